"""Record a session with each pinned real agent, offline, for replay (notebooks/recordings/NAME.acp.jsonl).

    .venv/bin/python tests/interop/record_sessions.py [claude opencode codex gemini] [--out DIR]
    .venv/bin/python tests/interop/record_sessions.py --kernel [claude opencode codex gemini] [--out DIR]
    .venv/bin/python tests/interop/record_sessions.py --fork [claude opencode] [--out DIR]

(`make recordings` runs it for all four.) Each agent runs as in the interop tests: installed by
scripts/install-agents.sh, a fresh HOME, no network, its model calls answered by the scripted
model server (model_server.py). The session: config options, a model switch (for opencode it
adds the dependent `effort` option, which is then set), a streamed turn, a turn with thoughts, a
turn that writes a file through a tool call after a permission request, and session/list, which
carries the titles these agents give their sessions. Keys in the environment are masked by the
recorder. The session's cwd is WORK, a fixed path, so the recorded prompts read the same on
every machine that replays them.

With --kernel (all four; into recordings/kernel-tools/): a session offered the notebook's kernel
tools under the "ask" policy, with a DataFrame `df` in the namespace they serve, and one turn in
which the model lists the variables, then runs code after an Allow (the answer: "Kernel answered:
1491"). The session/new frame carries the `kernel` entry, its token masked. gemini-cli runs with
GEMINI_CLI_TRUST_WORKSPACE=true: in a folder it does not trust it starts no MCP server at all.

With --fork (claude, opencode and codex, the pinned agents that advertise the unstable session/fork; into
recordings/fork/): a turn, then the session forked and a turn in the fork.

Agents change: re-run this after bumping a pinned version, and check the replay tests.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from agent_setups import AGENTS, AgentSetup, home_env
from interop_support import KERNEL_PROMPT, allow_everything, bridge_env, kernel_frame, served_namespace
from model_server import ModelServer

import acp_notebook as acpnb

ROOT = Path(__file__).resolve().parents[2]
WORK = Path("/tmp/acp-notebook-recording")
TURN_TIMEOUT = 120.0


def _opencode_models(session: acpnb.Session) -> None:
    session.set("model", "interop/interop-model-large")  # a reasoning model: the `effort` option appears
    session.set("effort", "high")


def _claude_models(session: acpnb.Session) -> None:
    session.set("model", "haiku")
    session.set("mode", "default")  # so the write asks for permission (its own default, "auto", does not)


def _codex_models(session: acpnb.Session) -> None:
    session.set("mode", "read-only")  # so the write asks for permission (in "agent" a reviewer model approves it)


# What each recording does with the session's options before its turns.
CONFIG_STEPS: dict[str, Callable[[acpnb.Session], None]] = {
    "claude": _claude_models,
    "opencode": _opencode_models,
    "codex": _codex_models,
    "gemini": lambda session: None,  # only the old `modes` field: read-only here
}


def _prepare(name: str) -> AgentSetup:
    """The agent's setup, once it is known to be installed; WORK emptied for its session."""
    setup = AGENTS[name]
    if not setup.installed():
        raise SystemExit(f"{name}: {setup.package}@{setup.version} is not installed; run scripts/install-agents.sh")
    if WORK.exists():
        shutil.rmtree(WORK)
    WORK.mkdir(parents=True)
    return setup


def record(name: str, out: Path, server: ModelServer) -> Path:
    setup = _prepare(name)
    path = out / f"{name}.acp.jsonl"
    with tempfile.TemporaryDirectory(prefix=f"acp-rec-{name}-") as home:
        spec = setup.spec(Path(home), server)
        # gemini-cli cannot create files through the client's fs methods (FINDINGS 5.4): it writes them itself.
        with acpnb.start(spec, cwd=WORK, inherit_env=False, env=home_env(Path(home)), record=path,
                         permission="allow", timeout=90, fs=name != "gemini") as agent:
            session = agent.new_session()
            CONFIG_STEPS[name](session)
            for prompt in ("say hi", "think tides", f"write {WORK}/notes.txt with hello world"):
                session.prompt(prompt, timeout=TURN_TIMEOUT)
            if agent.capabilities.get("sessionCapabilities", {}).get("list") is not None:
                agent.list_sessions(str(WORK))
    return path


KERNEL_AGENTS = ("claude", "opencode", "codex", "gemini")
# What an agent needs to start the kernel's MCP server at all.
KERNEL_ENV: dict[str, dict[str, str]] = {"gemini": {"GEMINI_CLI_TRUST_WORKSPACE": "true"}}
# The mode in which the agent asks the client before each MCP call (claude's own default, "auto", has a
# classifier model judge them, codex's "agent" a reviewer model; the scripted model can be neither).
KERNEL_MODE: dict[str, str] = {"claude": "default", "codex": "read-only"}


def record_kernel(name: str, out: Path, server: ModelServer) -> Path:
    """A session with the notebook's kernel tools (see the module docstring)."""
    setup = _prepare(name)
    served_namespace()["df"] = kernel_frame()
    path = out / f"{name}.acp.jsonl"
    with tempfile.TemporaryDirectory(prefix=f"acp-rec-{name}-") as home:
        spec = setup.spec(Path(home), server)
        env = {**home_env(Path(home)), **bridge_env(), **KERNEL_ENV.get(name, {})}
        with acpnb.start(spec, cwd=WORK, inherit_env=False, env=env, record=path,
                         permission=allow_everything([]), kernel_tools="ask", timeout=90) as agent:
            session = agent.new_session()
            if name in KERNEL_MODE:
                session.set("mode", KERNEL_MODE[name])
            session.prompt(KERNEL_PROMPT, timeout=TURN_TIMEOUT)
    return path


FORK_AGENTS = ("claude", "opencode", "codex")  # the pinned agents that advertise sessionCapabilities.fork


def record_fork(name: str, out: Path, server: ModelServer) -> Path:
    """A session, then ``session/fork`` of it (unstable ACP) and a turn in the fork, which starts with its history."""
    setup = _prepare(name)
    path = out / f"{name}.acp.jsonl"
    with tempfile.TemporaryDirectory(prefix=f"acp-rec-{name}-") as home:
        spec = setup.spec(Path(home), server)
        with acpnb.start(spec, cwd=WORK, inherit_env=False, env=home_env(Path(home)), record=path,
                         permission="allow", timeout=90) as agent:
            session = agent.new_session()
            session.prompt("say hi", timeout=TURN_TIMEOUT)
            session.fork().prompt("say forked", timeout=TURN_TIMEOUT)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agents", nargs="*", help="default: all four")
    parser.add_argument("--out", type=Path, help="default: notebooks/recordings (with --kernel: its kernel-tools/)")
    parser.add_argument("--kernel", action="store_true", help="sessions that use the notebook's kernel tools")
    parser.add_argument("--fork", action="store_true", help="a session forked (the agents that advertise fork)")
    args = parser.parse_args(argv)
    known = KERNEL_AGENTS if args.kernel else FORK_AGENTS if args.fork else tuple(AGENTS)
    names = args.agents or list(known)
    unknown = [a for a in names if a not in known]
    if unknown:
        parser.error(f"unknown agent(s) {', '.join(unknown)}; known: {', '.join(known)}")
    out = args.out or ROOT / "notebooks" / "recordings" / ("kernel-tools" if args.kernel else "fork" if args.fork else "")
    out.mkdir(parents=True, exist_ok=True)
    recorder = record_kernel if args.kernel else record_fork if args.fork else record
    with ModelServer() as server:
        for name in names:
            path = recorder(name, out, server)
            print(f"{name}: recorded {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
