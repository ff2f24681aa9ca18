"""Fixtures for the interop tests: the scripted model server, the pinned agents started through our
public API (a fresh HOME each, no network), and a check that nothing they started outlives the test.

The pinned agents come from scripts/install-agents.sh (`make test` runs it first). A missing one
fails its tests when CI is set (CI=true) and skips them otherwise, saying what to run.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from agent_setups import AGENTS, AgentSetup, agent_cache, home_env
from model_server import ModelServer

import acp_notebook as acpnb
from acp_notebook.launch import AgentSpec
from tests.processes import wait_gone
from tests.schema_check import validate_frame

# Every process an interop test starts carries this variable (value: the test's own marker), so
# the teardown can find whatever is left of them, however deep in the process tree.
MARKER_VAR = "ACP_INTEROP_RUN"
START_TIMEOUT = 60.0
GONE_TIMEOUT = 10.0


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require_pinned(name: str) -> AgentSetup:
    """The agent's setup if its pinned version is installed; otherwise fail (CI) or skip."""
    setup = AGENTS[name]
    found = setup.installed_version()
    if found == setup.version:
        return setup
    what = (f"{setup.package}@{setup.version} is not installed in {agent_cache() / name}"
            + (f" (found version {found})" if found else ""))
    if in_ci():
        pytest.fail(f"{what}; CI must run scripts/install-agents.sh before the tests (`make test` does)",
                    pytrace=False)
    pytest.skip(f"{what}; run scripts/install-agents.sh {name} to include it")


def marked_processes(marker: str) -> list[int]:
    """Live processes whose environment carries this test's marker."""
    needle = f"{MARKER_VAR}={marker}".encode()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            environ = Path(entry.path, "environ").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def check_client_frames(agent: acpnb.Agent) -> None:
    """Everything our client sent this agent is valid ACP (the agents' own frames are theirs)."""
    asked = {e["msg"]["id"]: e["msg"]["method"] for e in agent.log
             if e["dir"] == "recv" and "method" in e["msg"] and "id" in e["msg"]}
    for entry in agent.log:
        if entry["dir"] != "send":
            continue
        message = entry["msg"]
        variant = "unstable" if message.get("method") in ("session/list", "session/close", "session/fork") else "stable"
        validate_frame(message, "client", answers=None if "method" in message else asked[message["id"]],
                       variant=variant)


class InteropRun:
    """Starts agents for one test and, at its end, closes them and checks nothing is left running."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.work = root / "work"
        self.work.mkdir()
        self.marker = uuid.uuid4().hex
        self.agents: list[acpnb.Agent] = []
        self._homes = itertools.count(1)

    def new_home(self, name: str) -> Path:
        home = self.root / f"home-{name}-{next(self._homes)}"
        home.mkdir()
        return home

    def spec(self, name: str, server: ModelServer | None = None, *, env: Mapping[str, str] | None = None,
             extra_args: list[str] | None = None) -> AgentSpec:
        """The registry's spec for `name`, wired to `server`, with a fresh HOME of its own."""
        setup = require_pinned(name)
        return setup.spec(self.new_home(name), server, env={MARKER_VAR: self.marker, **(env or {})},
                          extra_args=extra_args)

    def start(self, name: str, server: ModelServer | None = None, *, env: Mapping[str, str] | None = None,
              extra_args: list[str] | None = None, **start_kwargs: Any) -> acpnb.Agent:
        """`acpnb.start` of the pinned agent with nothing of the user's environment but PATH and such."""
        spec = self.spec(name, server, env=env, extra_args=extra_args)
        start_kwargs.setdefault("timeout", START_TIMEOUT)
        agent = acpnb.start(spec, cwd=self.work, inherit_env=False, **start_kwargs)
        self.agents.append(agent)
        assert agent.info.get("version") == AGENTS[name].version, f"{name} reports {agent.info}"
        return agent

    def start_by_name(self, name: str, server: ModelServer | None = None, *, env: Mapping[str, str] | None = None,
                      **start_kwargs: Any) -> acpnb.Agent:
        """`acpnb.start("claude")` as `%acp start claude` does: the registry name, resolved here."""
        setup = require_pinned(name)
        start_kwargs.setdefault("timeout", START_TIMEOUT)
        full_env = {**setup.env(server), **home_env(self.new_home(name)), MARKER_VAR: self.marker, **(env or {})}
        agent = acpnb.start(name, cwd=self.work, env=full_env, inherit_env=False, **start_kwargs)
        self.agents.append(agent)
        assert agent.command[0] == str(setup.executable()), agent.command
        assert agent.info.get("version") == setup.version, f"{name} reports {agent.info}"
        return agent

    def start_proxy(self, agents: Mapping[str, AgentSpec], **start_kwargs: Any) -> acpnb.Agent:
        start_kwargs.setdefault("timeout", START_TIMEOUT)
        # The tests check every agent's part of initialize and of the first model list: a real agent slowed by a
        # busy machine may take longer than the 5 s the proxy waits by default before it answers without it.
        start_kwargs.setdefault("probe_timeout", START_TIMEOUT)
        proxy = acpnb.start_proxy(dict(agents), cwd=self.work, inherit_env=False, env={MARKER_VAR: self.marker},
                                  **start_kwargs)
        self.agents.append(proxy)
        return proxy

    def marked_env(self) -> dict[str, str]:
        """The variable that marks a process as this test's: put it in the environment of what a test
        starts by itself (a CLI client), so the leak check at the end finds whatever is left of it."""
        return {MARKER_VAR: self.marker}

    def wait_quiet(self, timeout: float = GONE_TIMEOUT) -> None:
        """Wait (on pidfds, no polling) until no process of this test is left: between two calls of a client
        that leaves a process behind for a while (acpx keeps its session's agent until its --ttl ends)."""
        left = [pid for pid in marked_processes(self.marker) if not wait_gone(pid, timeout)]
        assert not left, f"still running after {timeout:g} s: {describe(left)}"

    def finish(self) -> None:
        """Close every agent, then wait for every process of this test to end (killing what is left)."""
        errors = []
        for agent in self.agents:
            try:
                agent.close()
            except Exception as exc:  # noqa: BLE001 - close the others first, then report
                errors.append(f"closing {agent.name}: {exc!r}")
        left = [pid for pid in marked_processes(self.marker) if not wait_gone(pid, GONE_TIMEOUT)]
        if left:
            errors.append(f"processes left running after the agents were closed: {describe(left)}")
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert not errors, "; ".join(errors)
        for agent in self.agents:
            check_client_frames(agent)


def describe(pids: list[int]) -> str:
    parts = []
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            cmdline = "?"
        parts.append(f"{pid} ({cmdline.strip()[:120]})")
    return ", ".join(parts)


@pytest.fixture
def model_server(tmp_path: Path) -> Iterator[ModelServer]:
    """A fresh model server on a free 127.0.0.1 port; every request is also logged to
    tmp_path/model-requests.jsonl for debugging a failed test."""
    with ModelServer(log_path=tmp_path / "model-requests.jsonl") as server:
        yield server


@pytest.fixture
def interop(tmp_path: Path) -> Iterator[InteropRun]:
    run = InteropRun(tmp_path)
    try:
        yield run
    finally:
        run.finish()


@pytest.fixture(scope="module")
def module_model_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    """One model server for a whole module, for a module whose tests share one agent (see `module_interop`)."""
    log = tmp_path_factory.mktemp("model-server") / "model-requests.jsonl"
    with ModelServer(log_path=log) as server:
        yield server


@pytest.fixture(scope="module")
def module_interop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InteropRun]:
    """An InteropRun that lasts a whole module: for an agent whose start is the costly part of its tests
    (opencode's takes about 5 core-seconds), started once and given a new session by each test. The
    check that nothing is left running, and of every frame our client sent, runs when the module ends."""
    run = InteropRun(tmp_path_factory.mktemp("interop"))
    try:
        yield run
    finally:
        run.finish()
