"""Third-party ACP clients against our side: acpx (npm) against the multi-agent proxy and the replay server,
the Python SDK's example client against the demo agent and the proxy, and our client against the SDK's
example agents. Every frame our agents and the proxy exchanged is checked against the ACP schema: the
proxy writes its own trace (--trace, every pipe), and stdio_tap.py traces the demo agent and the replay
server. Pins and install paths: client_setups.py; measured behaviour: FINDINGS.md section 9.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from agent_setups import home_env
from client_setups import (
    check_traces,
    command_line,
    require_acpx,
    require_sdk_examples,
    tapped,
)

import acp_notebook as acpnb
from tests.schema_check import FrameLog

pytestmark = pytest.mark.interop

CALL_TIMEOUT = 120.0
ACP_NOTEBOOK = str(Path(sys.executable).with_name("acp-notebook"))
DEMO = [ACP_NOTEBOOK, "demo-agent"]
# "{trace}": stdio_tap.py gives each proxy process a trace file of its own.
PROXY = [ACP_NOTEBOOK, "proxy", "--agent", "a=demo", "--agent", "b=demo", "--trace", "{trace}"]
# acpx keeps a session's agent running for --ttl seconds after a call, for the next call to reuse;
# a tenth of a second keeps each call on a process of its own once the test has waited for the last one to end.
ACPX_TTL = "0.1"


def our_state(interop: Any) -> dict[str, str]:
    """Where our demo agent and proxy keep sessions in this test, and the test's process marker."""
    return {"ACP_NOTEBOOK_DEMO_STATE": str(interop.root / "demo-state"),
            "ACP_NOTEBOOK_PROXY_STATE": str(interop.root / "proxy-state"), **interop.marked_env()}


def base_env(interop: Any, home: Path, path_first: Path | None = None) -> dict[str, str]:
    """A small environment: PATH (with `path_first` in front), a fresh HOME, our state and the SDK line's
    PYTHONPATH (make test-sdk1 runs the agents on the 1.x SDK through it)."""
    path = os.environ.get("PATH", "/usr/bin:/bin")
    env = {"PATH": f"{path_first}:{path}" if path_first else path, **home_env(home), **our_state(interop)}
    for name in ("PYTHONPATH", "LANG", "USER"):
        if name in os.environ:
            env[name] = os.environ[name]
    return env


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]


def updates(frames: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"
            and f["params"]["update"].get("sessionUpdate") == kind]


def chunk_text(frames: list[dict[str, Any]], kind: str = "agent_message_chunk") -> str:
    return "".join(u["content"].get("text", "") for u in updates(frames, kind))


def answer_to(frames: list[dict[str, Any]], method: str) -> dict[str, Any]:
    """acpx's --format json output is the wire, both ways: the last answer to `method`."""
    ids = {f["id"] for f in frames if f.get("method") == method and "id" in f}
    answers = [f for f in frames if "method" not in f and f.get("id") in ids]
    assert answers, f"no answer to {method} in {frames}"
    return answers[-1]


@dataclass
class Acpx:
    """acpx calls of one test, each a process of its own as from a shell: the test's work directory as
    cwd, a HOME of its own (acpx keeps its session records in ~/.acpx), one agent command line."""

    bin_dir: Path
    agent: str
    cwd: Path
    env: dict[str, str]

    def argv(self, args: tuple[str, ...], fmt: str) -> list[str]:
        return [str(self.bin_dir / "acpx"), "--agent", self.agent, "--ttl", ACPX_TTL, "--format", fmt, *args]

    def run(self, *args: str, fmt: str = "json") -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(args, fmt), cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=CALL_TIMEOUT)

    def ok(self, *args: str, fmt: str = "json") -> subprocess.CompletedProcess[str]:
        done = self.run(*args, fmt=fmt)
        assert done.returncode == 0, f"acpx {' '.join(args)} exited {done.returncode}: {done.stderr}{done.stdout}"
        return done

    def start(self, *args: str, env: dict[str, str] | None = None, fmt: str = "json") -> subprocess.Popen[str]:
        return subprocess.Popen(self.argv(args, fmt), cwd=self.cwd, env={**self.env, **(env or {})},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def acpx_for(interop: Any) -> Iterator[Callable[[list[str]], Acpx]]:
    """acpx_for(agent argv) -> Acpx. At the end: acpx's queue sockets directory, which it makes in /tmp
    whatever TMPDIR says (/tmp/acpx-<first 10 hex digits of sha256(HOME)>), is removed with the HOME."""
    homes: list[Path] = []

    def make(agent: list[str]) -> Acpx:
        bin_dir = require_acpx()
        homes.append(interop.new_home("acpx"))
        # bin_dir first on PATH: acpx's `#!/usr/bin/env node` then finds the Node.js 22 installed beside it.
        env = base_env(interop, homes[-1], path_first=bin_dir)
        return Acpx(bin_dir=bin_dir, agent=command_line(agent), cwd=interop.work, env=env)

    yield make
    try:
        interop.wait_quiet()  # the last call's owner must be gone before its socket directory is
    finally:
        for home in homes:
            digest = hashlib.sha256(str(home).encode()).hexdigest()[:10]
            shutil.rmtree(Path("/tmp") / f"acpx-{digest}", ignore_errors=True)


def run_until_first_chunk(acpx: Acpx, prompt: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], list[str]]:
    """Start `acpx prompt` and return once the agent has streamed something; the output lines keep coming."""
    process = acpx.start("prompt", prompt, env=env)
    lines: list[str] = []
    streaming = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if '"agent_thought_chunk"' in line or '"agent_message_chunk"' in line:
                streaming.set()
        streaming.set()  # ended without streaming: the assertions after the wait say so

    threading.Thread(target=read, daemon=True).start()
    assert streaming.wait(CALL_TIMEOUT), "acpx's prompt streamed nothing"
    return process, lines


# --------------------------------------------------------------------------- acpx and the proxy

def test_acpx_drives_a_full_session_through_the_proxy(interop, acpx_for):
    """acpx 0.19.1, one call (and one proxy process) per step: `sessions new`, `set model b:smart` (ties the
    session to agent b), `set thought_level high` (the option b adds for its smart model), `prompt`, `cancel`
    while a slow prompt streams, `sessions list`. acpx has every one of these operations (set =
    session/set_config_option, cancel = session/cancel sent by the call that owns the session, sessions list
    = session/list); `set-mode code` (the old session/set_mode) is tried too."""
    traces = interop.root / "traces"
    acpx = acpx_for(tapped(traces, PROXY))
    session_id = acpx.ok("sessions", "new", fmt="quiet").stdout.strip()
    assert session_id.startswith("acpnb-proxy.")

    picked = json.loads(acpx.ok("set", "model", "b:smart").stdout)
    assert picked["action"] == "model_set" and picked["modelId"] == "b:smart"
    options = {o["id"]: o for o in json.loads(acpx.ok("set", "thought_level", "high").stdout)["configOptions"]}
    # acpx does not advertise boolean options, so the demo's show_thoughts is not offered to it.
    assert list(options) == ["model", "thought_level", "mode", "tone"]
    assert options["model"]["currentValue"] == "b:smart" and options["thought_level"]["currentValue"] == "high"
    # The old session/set_mode, which the proxy turns into the mode option's set_config_option.
    assert json.loads(acpx.ok("set-mode", "code").stdout)["modeId"] == "code"

    frames = json_lines(acpx.ok("prompt", "tell me about otters").stdout)
    assert answer_to(frames, "session/prompt")["result"]["stopReason"] == "end_turn"
    assert "Thought 3 of 3" in chunk_text(frames, "agent_thought_chunk")  # high reached agent b
    reply = chunk_text(frames)
    assert reply.startswith("[smart] I thought it over at the high level.") and "```python" in reply  # code mode
    interop.wait_quiet()  # the prompt's proxy has ended: the slow prompt below starts its own

    # The demo agent streams a chunk a second here: the cancel comes long before the turn could end.
    process, lines = run_until_first_chunk(acpx, "a long story about many otters", env={"ACP_DEMO_DELAY": "1"})
    assert acpx.ok("cancel", fmt="text").stdout.strip() == "cancel requested"
    process.wait(CALL_TIMEOUT)
    assert answer_to(json_lines("".join(lines)), "session/prompt")["result"]["stopReason"] == "cancelled"
    interop.wait_quiet()

    listed = json.loads(acpx.ok("sessions", "list").stdout)
    assert [s["sessionId"] for s in listed["sessions"]] == [session_id]
    assert listed["sessions"][0]["title"] == "Tell me about otters"
    assert listed["sessions"][0]["_meta"]["acp-notebook/proxy"]["agent"] == "b"
    check_traces(traces)
    assert_prompts_went_to(traces, "b", count=2)


def assert_prompts_went_to(traces: Path, agent: str, count: int) -> None:
    """The proxy passed each of the client's prompts to `agent` (read from the proxies' own traces)."""
    links = []
    for path in traces.glob("*.proxy.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record["dir"] == "out" and record["msg"].get("method") == "session/prompt":
                links.append(record["link"])
    assert links == [agent] * count, links


def test_acpx_continues_a_proxy_session_in_a_later_call(interop, acpx_for):
    """Two `acpx prompt` calls, each with a proxy process of its own: the second reopens the first's session
    (session/resume through the id the proxy handed out), and the demo agent answers from its history."""
    traces = interop.root / "traces"
    acpx = acpx_for(tapped(traces, PROXY))
    acpx.ok("sessions", "new", fmt="quiet")
    first = acpx.ok("prompt", "new topic: lighthouses", fmt="quiet").stdout
    assert "lighthouses" in first
    interop.wait_quiet()
    second = acpx.ok("prompt", "what did I say first?", fmt="quiet").stdout
    assert 'You first said: "new topic: lighthouses"' in second

    logs = check_traces(traces)
    prompted = [name for name, log in logs.items() if log.results("session/prompt")]
    assert len(prompted) == 2, f"the prompts did not run in two processes: {sorted(logs)}"
    resumed = [name for name, log in logs.items() if log.results("session/resume")]
    assert resumed, "acpx never reopened the session"


# --------------------------------------------------------------------------- acpx and the replay server

def test_acpx_drives_the_replay_server(interop, acpx_for):
    """A recording made here with our client against the demo agent, served by `acp-notebook replay FILE`
    to acpx: the same prompt replays the recorded reply; a changed one gets the mismatch error naming the
    recording's line. acpx's one-shot `exec` is used: its persistent sessions reopen the session in every
    call (session/resume), which a recording of one process cannot answer."""
    recording = interop.root / "hello.acp.jsonl"
    agent = acpnb.start("demo", cwd=interop.work, record=recording, env=our_state(interop))
    interop.agents.append(agent)
    recorded = agent.new_session().prompt("hello replay").text
    agent.close()

    traces = interop.root / "traces"
    acpx = acpx_for(tapped(traces, [ACP_NOTEBOOK, "replay", str(recording)]))
    frames = json_lines(acpx.ok("exec", "hello replay").stdout)
    assert chunk_text(frames) == recorded
    assert answer_to(frames, "session/prompt")["result"]["stopReason"] == "end_turn"

    changed = acpx.run("exec", "hello changed")
    assert changed.returncode != 0
    error = answer_to(json_lines(changed.stdout), "session/prompt")["error"]
    mismatch = error["data"]["replayMismatch"]
    assert mismatch["expected"] == "session/prompt 'hello replay'" and mismatch["got"] == "session/prompt 'hello changed'"
    assert f"line {mismatch['line']} of the recording" in error["message"]
    check_traces(traces)


# --------------------------------------------------------------------------- the SDK's examples

@pytest.mark.parametrize("target", ["demo", "proxy"])
def test_the_sdk_example_client_runs_a_turn(interop, target):
    """examples/client.py of the SDK's sdist (the line this interpreter runs) against our demo agent and our
    proxy: it reads prompts from stdin and prints each streamed chunk as `| Agent: <text>`."""
    examples = require_sdk_examples()
    traces = interop.root / "traces"
    agent = tapped(traces, DEMO if target == "demo" else PROXY)
    done = subprocess.run([sys.executable, str(examples / "client.py"), *agent], input="hello from the sdk\n",
                          cwd=interop.work, env=base_env(interop, interop.new_home("sdk-client")),
                          capture_output=True, text=True, timeout=CALL_TIMEOUT)
    assert done.returncode == 0, done.stderr
    chunks = [line.split("| Agent: ", 1)[1] for line in done.stdout.splitlines() if "| Agent: " in line]
    assert "".join(chunks) == '[fast] You said: "hello from the sdk". Short answer: noted, 4 words.'
    logs = check_traces(traces)
    (log,) = logs.values()
    assert log.last_result("session/prompt")["stopReason"] == "end_turn"


@pytest.mark.parametrize("example", ["agent.py", "echo_agent.py"])
def test_our_client_runs_against_an_sdk_example_agent(interop, example):
    """Our client (acpnb.start) against the SDK's example agents: initialize, a session, a turn."""
    examples = require_sdk_examples()
    agent = acpnb.start([sys.executable, str(examples / example)], cwd=interop.work, env=interop.marked_env(),
                        timeout=60)
    interop.agents.append(agent)
    session = agent.new_session()
    turn = session.prompt("hello from acp-notebook")
    assert turn.stop_reason == "end_turn" and turn.error is None
    expected = {"agent.py": "Client sent:hello from acp-notebook", "echo_agent.py": "hello from acp-notebook"}
    assert turn.text == expected[example]
    if example == "agent.py":
        assert agent.info == {"name": "example-agent", "title": "Example Agent", "version": "0.1.0"}
    frames = FrameLog(local="client")
    for entry in agent.log:  # the example agent's frames too (ours are checked when the test ends)
        frames.record("client" if entry["dir"] == "send" else "agent", entry["msg"])
    frames.check()
