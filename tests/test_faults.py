"""The fault suite: each fault of tests/agents/fault_agent.py, against the client and behind the proxy.

``FAULTS`` is the table the README's Reliability section is generated from (test_faults_doc.py):
each row says what the fault is, what a user sees in the client and behind the proxy, and the
test checks exactly that. Every test first builds state (a session, its model, one turn), then
provokes the fault and asserts: the error type; that its message names the cause; that the
earlier state and transcript are intact; that a new session works. Each test has a deadline
(pytest-timeout) that fails it if anything hangs; nothing here measures time.
"""

from __future__ import annotations

import concurrent.futures
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import acp_notebook as acpnb
from acp_notebook.connection.transport import StdioTransport
from acp_notebook.turn import Turn

FAULT_AGENT = [sys.executable, str(Path(__file__).resolve().parent / "agents" / "fault_agent.py")]
# Requests to a well-behaved local agent answer in milliseconds: this deadline is generous on a loaded
# machine, and it costs nothing where the agent answers.
REQUEST_DEADLINE = 4.0
# The deadline of the request that provokes a fault ending in one (no answer, a wrong id): what the test
# waits through. A warm agent's stray answer to that request still comes well within it.
ENDS_IN_DEADLINE = 1.5
# Left out of `make test-quick`: a 2 s turn deadline, then the client's grace for the cancelled turn.
SLOW = {"hang-mid-turn"}
START_DEADLINE = 30.0


@dataclass
class Run:
    """One agent (the fault agent itself, or the proxy in front of it) with state built before the fault."""

    agent: acpnb.Agent
    session: acpnb.Session
    first: Turn
    via_proxy: bool
    argv: list[str]

    def value(self, bare: str) -> str:
        """A model value as this agent spells it (the proxy prefixes its agent's name)."""
        return f"f:{bare}" if self.via_proxy else bare

    def notes(self) -> list[str]:
        return [entry["note"] for entry in list(self.agent.log) if entry.get("note")]

    def stderr(self) -> str:
        return "\n".join(self.agent.stderr_tail(200))


@dataclass(frozen=True)
class Fault:
    """One row of the table: the fault, where it fires, and what the user gets in each setting."""

    name: str  # fault_agent.py's argv[1]
    title: str
    stage: str  # start | request (set_config_option) | turn (the prompt "go") | session (session/new)
    client: str  # what the client does, for the README
    proxy: str  # what a client of the proxy gets
    client_error: type[BaseException] | None = None
    proxy_error: type[BaseException] | None = None
    cause: str = ""  # the message names this (both settings unless proxy_cause is given)
    proxy_cause: str | None = None
    args: tuple[str, ...] = ()
    proxy_args: tuple[str, ...] | None = None
    check: Callable[[Run, Any], None] | None = field(default=None, repr=False)
    timeout: float = 60.0  # the test's deadline
    ends_in_deadline: bool = False  # the provoking request runs into its deadline (ENDS_IN_DEADLINE)
    frame_limit: int | None = None  # the client's, when not the default (a smaller frame shows the same)


# --- per-fault checks (after the generic ones) -------------------------------------------
def _exit_code_and_stderr(run: Run, error: Any) -> None:
    assert "simulated crash" in str(error)
    if not run.via_proxy:
        assert run.agent.status == "exited" and run.agent.exit_code == 3
        assert run.session.turns[-1].error is error


def _hung_turn_is_cancelled(run: Run, error: Any) -> None:
    assert any(entry["msg"].get("method") == "session/cancel" for entry in list(run.agent.log))
    assert run.session.turns[-1].done.wait(15)
    assert run.session.turns[-1].stop_reason == "cancelled"
    assert run.session.turns[-1].text == "thinking..."


def _bad_lines_noted(run: Run, turn: Any) -> None:
    assert turn.text == "still here" and turn.stop_reason == "end_turn"
    where = run.stderr() if run.via_proxy else "\n".join(run.notes())
    for reason in ("(not JSON): {broken", "(not a JSON object): [1, 2, 3]", "(its method is not a string (number))",
                   "(a response whose id is not a string or an integer (array))", "it has no method and no id)",
                   "(a response whose id is not a string or an integer (boolean))", "(JSON nested too deeply)"):
        assert reason in where, reason
    assert where.count("bad frame (") == 10


def _stderr_drained(run: Run, turn: Any) -> None:
    assert turn.text == "flooded"
    if not run.via_proxy:  # behind the proxy, its echo drops lines while the pipe lags
        assert run.agent.stderr_tail(1) == ["fault-agent: flood done"]


def _every_chunk_in_order(run: Run, turn: Any) -> None:
    count = 5_000 if run.via_proxy else 50_000
    assert turn.text == "".join(f"{i}," for i in range(count))
    chunks = [e for e in list(run.agent.log) if e["msg"].get("method") == "session/update"]
    assert len(chunks) >= count


def _request_refused(run: Run, turn: Any) -> None:
    assert turn.stop_reason == "end_turn"
    assert turn.text.startswith("the client said -32600: the client dropped this fs/write_text_file request: "
                                "it was a ")
    assert "frame limit" in turn.text


def _unknowns_ignored(run: Run, turn: Any) -> None:
    assert turn.text == "done" and turn.stop_reason == "end_turn"
    notes = run.notes()
    assert any("unknown update kind 'hologram'" in n for n in notes)
    assert any("malformed agent_message_chunk update" in n for n in notes)
    if not run.via_proxy:  # the proxy keeps updates for sessions it does not know, and never forwards them
        assert "ignored: unknown session" in notes
        assert any("malformed config_option_update" in n for n in notes)
    assert run.session.config[run.session.config.ids()[0]].value == run.value("m1")


def _permission_cancelled(run: Run, turn: Any) -> None:
    assert turn.stop_reason == "end_turn"
    assert [record.chosen for record in turn.permissions] == [None]
    (call,) = turn.tool_calls
    assert call.status == "failed"
    assert "permission cancelled no decision within 1 s" in call.content[0]["content"]["text"]


def _odd_value_kept(run: Run, session: Any) -> None:
    option = session.config["model"]
    assert option.value == run.value("m9") and option.value_name == run.value("m9")
    assert any("currentValue" in n and "m9" in n and "not one of its choices" in n for n in run.notes())
    assert session.set("model", run.value("m2"))["model"].value == run.value("m2")


def _second_answer_ignored(run: Run, options: Any) -> None:
    assert options["model"].value == run.value("m2"), "the first answer is applied"
    if run.via_proxy:
        wait_for(lambda: "a second answer to request" in run.stderr(), run.agent.on_stderr)
    else:
        wait_for(lambda: any("a second answer to request" in n for n in run.notes()), run.agent.on_frame)
    assert run.session.model == run.value("m2"), "and the second one is not"


def _stray_answer_named(run: Run, error: Any) -> None:
    if run.via_proxy:
        wait_for(lambda: "answers no request sent" in run.stderr(), run.agent.on_stderr)
    else:
        assert any("answers no request sent (id 10" in n for n in run.notes())


FAULTS = [
    Fault("exit-before-initialize", "Exits before `initialize`", "start",
          client="`AgentStartError` with the exit code and the agent's last stderr lines.",
          proxy="The agent is left out of `session/new`; `_meta` names it with its exit code and stderr; the other "
                "agents serve the session.",
          client_error=acpnb.AgentStartError, cause="code 7"),
    Fault("silent", "Never answers `initialize`", "start",
          client="`AgentStartError` after the start deadline (`timeout=`), naming `initialize`.",
          proxy="`session/new` answers within `--probe-timeout` without it (`_meta` lists it as pending); it joins "
                "later if it ever answers.",
          client_error=acpnb.AgentStartError, cause="did not answer initialize", proxy_cause="did not answer within"),
    Fault("no-answer", "Never answers a request", "request",
          client="`AcpTimeoutError` at the request deadline naming the method; the session's state is unchanged.",
          proxy="The same, at the client's deadline.",
          client_error=acpnb.AcpTimeoutError, cause="did not answer session/set_config_option within",
          ends_in_deadline=True),
    Fault("wrong-id", "Answers with a wrong id", "request",
          client="The answer is ignored and noted in `agent.log`; `AcpTimeoutError` at the deadline says an "
                 "answer to no request arrived meanwhile.",
          proxy="`AcpTimeoutError` at the client's deadline; the proxy's log (stderr) names the stray answer.",
          client_error=acpnb.AcpTimeoutError, cause="an answer to no request we sent (id 10",
          proxy_cause="did not answer session/set_config_option", check=_stray_answer_named,
          ends_in_deadline=True),
    Fault("twice", "Answers a request twice", "request",
          client="The first answer counts; the second is ignored and noted in `agent.log`.",
          proxy="The same; the proxy's log names the second answer.",
          check=_second_answer_ignored),
    Fault("malformed-error", "Answers with a malformed error", "request",
          client="`ProtocolError` at once naming what is wrong with the error; the session's state is unchanged.",
          proxy="`ConfigOptionError` at once carrying the proxy's explanation; the state is unchanged.",
          client_error=acpnb.ProtocolError, proxy_error=acpnb.ConfigOptionError,
          cause="malformed error (its error is not an object"),
    Fault("exit-mid-turn", "Exits mid-turn", "turn",
          client="The turn fails with `AgentExitedError` (exit code, last stderr lines); earlier turns stay; a new "
                 "agent is needed.",
          proxy="The turn fails with `RpcError` naming the agent, its exit code and stderr; the next session starts "
                "the agent again.",
          client_error=acpnb.AgentExitedError, proxy_error=acpnb.RpcError, cause="exited",
          check=_exit_code_and_stderr),
    Fault("hang-mid-turn", "Hangs mid-turn (ignores `session/cancel`)", "turn",
          client="`prompt(timeout=)` raises `AcpTimeoutError`, sends `session/cancel`, and the turn ends "
                 "`cancelled` after a grace period; the agent stays usable.",
          proxy="The same; the proxy forwards the cancel.",
          client_error=acpnb.AcpTimeoutError, cause="did not finish within", check=_hung_turn_is_cancelled,
          timeout=90.0),
    Fault("non-json", "Prints lines that are not JSON-RPC", "turn",
          client="Each line (not JSON, not an object, nested too deeply to decode, an id that is not a string or "
                 "an integer, a method that is not a string) is dropped and noted in `agent.log` as a bad frame "
                 "with the reason and an excerpt; the turn goes on.",
          proxy="The proxy drops them and names each in its log (stderr); the turn goes on.",
          check=_bad_lines_noted),
    Fault("huge-line", "Sends a single 64 MiB line", "turn",
          client="The line is skipped as it streams in (never held whole) and noted; the request it answered "
                 "fails at once with `ProtocolError` naming its size and the 50 MiB frame limit.",
          proxy="The proxy does the same and answers the prompt with an error naming the size (tested with "
                "51 MiB); the client raises `RpcError`.",
          client_error=acpnb.ProtocolError, proxy_error=acpnb.RpcError, cause="MiB frame limit",
          proxy_args=("51",), timeout=120.0),
    Fault("huge-request", "Sends a request too large to read", "turn",
          client="The line is skipped and noted; the agent's request is answered at once with an error "
                 "(-32600) naming its size and the frame limit, so the agent does not wait for ever.",
          proxy="The proxy answers its agent the same way (tested with 51 MiB against the 50 MiB limit).",
          args=("2",), frame_limit=1_000_000, proxy_args=("51",), check=_request_refused, timeout=120.0),
    Fault("stderr-flood", "Floods stderr (20 MiB)", "turn",
          client="stderr is drained as it comes, so the agent never blocks; the last 200 lines are kept for "
                 "error messages.",
          proxy="The same; the proxy echoes its agents' stderr to its own, dropping lines while that lags.",
          check=_stderr_drained, timeout=90.0),
    Fault("flood", "Sends 50,000 notifications as fast as it can", "turn",
          client="Every chunk is applied in wire order; the reply is complete.",
          proxy="The same (tested with 5,000).",
          proxy_args=("5000",), check=_every_chunk_in_order, timeout=180.0),
    Fault("unknown-updates", "Updates for unknown sessions, unknown kinds, malformed updates", "turn",
          client="Ignored and noted in `agent.log` (a malformed update is never half-applied); the turn goes on.",
          proxy="The same; updates for sessions the proxy does not know are held briefly, then dropped.",
          check=_unknowns_ignored),
    Fault("permission", "A permission request nobody answers", "turn",
          client="With `permission_timeout=` the request is answered `cancelled` when it runs out, the reason in "
                 "the answer's `_meta`; the agent fails the tool call and the turn ends normally.",
          proxy="The same: the proxy relays the request and the client's answer.",
          check=_permission_cancelled),
    Fault("odd-config", "A config option whose `currentValue` is not among its choices", "session",
          client="Kept and shown as the agent says, noted in `agent.log`; picking a listed value works.",
          proxy="The same, with the value's `agent:` prefix.",
          check=_odd_value_kept),
]
BY_NAME = {fault.name: fault for fault in FAULTS}


def wait_for(condition: Callable[[], bool], subscribe: Callable[[Callable[[Any], None]], Callable[[], None]],
             timeout: float = 20.0) -> None:
    """Wait until ``condition()`` holds, checking it again on each event ``subscribe`` delivers."""
    changed = threading.Event()
    unsubscribe = subscribe(lambda _: changed.set())
    try:
        while not condition():
            assert changed.wait(timeout), "the awaited frame or stderr line never came"
            changed.clear()
    finally:
        unsubscribe()


# --- starting agents ----------------------------------------------------------------------
def never_decides(request: Any) -> concurrent.futures.Future[Any]:
    """A permission policy nobody answers (a widget no one clicks)."""
    return concurrent.futures.Future()


def fault_argv(fault: Fault, via_proxy: bool) -> list[str]:
    args = fault.proxy_args if via_proxy and fault.proxy_args is not None else fault.args
    return [*FAULT_AGENT, fault.name, *args]


def start(fault: Fault, via_proxy: bool, tmp_path: Path) -> acpnb.Agent:
    """The fault agent, directly or behind the proxy, with a short request deadline."""
    argv = fault_argv(fault, via_proxy)
    kwargs: dict[str, Any] = {"cwd": tmp_path, "timeout": START_DEADLINE}
    if fault.name == "permission":
        kwargs.update(permission=never_decides, permission_timeout=1)
    if via_proxy:
        agent = acpnb.start_proxy({"f": argv}, probe_timeout=10, **kwargs)
    elif fault.frame_limit is not None:
        transport = StdioTransport(argv, cwd=str(tmp_path), env=os.environ, frame_limit=fault.frame_limit)
        agent = acpnb.start(transport, **kwargs)
    else:
        agent = acpnb.start(argv, **kwargs)
    agent.timeout = agent.connection.request_timeout = REQUEST_DEADLINE  # see REQUEST_DEADLINE
    return agent


def prepare(fault: Fault, via_proxy: bool, tmp_path: Path) -> Run:
    agent = start(fault, via_proxy, tmp_path)
    session = agent.new_session()
    first = session.prompt("hello")
    assert first.text == "echo: hello"
    return Run(agent, session, first, via_proxy, fault_argv(fault, via_proxy))


def attempt(action: Callable[[], Any]) -> Any:
    """What ``action`` returned, or the AcpError it raised."""
    try:
        return action()
    except acpnb.AcpError as error:
        return error


def provoke(run: Run, fault: Fault) -> Any:
    if fault.stage == "request":
        if not fault.ends_in_deadline:
            return attempt(lambda: run.session.set("model", run.value("m2")))
        run.agent.timeout = run.agent.connection.request_timeout = ENDS_IN_DEADLINE
        try:
            return attempt(lambda: run.session.set("model", run.value("m2")))
        finally:
            run.agent.timeout = run.agent.connection.request_timeout = REQUEST_DEADLINE
    if fault.stage == "turn":
        return attempt(lambda: run.session.prompt("go", timeout=2 if fault.name == "hang-mid-turn" else None))
    return attempt(run.agent.new_session)


# --- the tests ----------------------------------------------------------------------------
@pytest.mark.parametrize("via_proxy", [False, True], ids=["client", "proxy"])
@pytest.mark.parametrize("name", [pytest.param(f.name, marks=[pytest.mark.slow] if f.name in SLOW else [])
                                  for f in FAULTS if f.stage != "start"])
def test_fault(name: str, via_proxy: bool, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    fault = BY_NAME[name]
    request.node.add_marker(pytest.mark.timeout(fault.timeout))
    run = prepare(fault, via_proxy, tmp_path)
    try:
        outcome = provoke(run, fault)
        expected = fault.proxy_error if via_proxy and fault.proxy_error else fault.client_error
        if expected is None:
            assert not isinstance(outcome, BaseException), outcome
        else:
            assert isinstance(outcome, expected), outcome
            cause = fault.proxy_cause if via_proxy and fault.proxy_cause is not None else fault.cause
            assert cause in str(outcome)
        if fault.check is not None:
            fault.check(run, outcome)
        # What was there before the fault is still there.
        assert run.session.turns[0] is run.first and run.first.text == "echo: hello"
        if fault.stage != "session" and fault.name != "twice":
            assert run.session.model == run.value("m1")
        assert_new_session_works(run)
    finally:
        run.agent.close()


def assert_new_session_works(run: Run) -> None:
    agent = run.agent
    if agent.status != "running":  # the agent itself died: a new one (the proxy restarts its own)
        agent.close()
        agent = acpnb.start([*FAULT_AGENT, "normal"], timeout=START_DEADLINE)
    try:
        assert agent.new_session().prompt("again", timeout=30).text == "echo: again"
    finally:
        if agent is not run.agent:
            agent.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", [f.name for f in FAULTS if f.stage == "start"])
@pytest.mark.slow
def test_start_fault_in_the_client(name: str, tmp_path: Path) -> None:
    fault = BY_NAME[name]
    with pytest.raises(fault.client_error) as info:
        acpnb.start(fault_argv(fault, False), cwd=tmp_path, timeout=2)
    assert fault.cause in str(info.value)
    if name == "exit-before-initialize":
        assert info.value.exit_code == 7 and "cannot find my config file" in str(info.value)
    with acpnb.start([*FAULT_AGENT, "normal"], cwd=tmp_path, timeout=START_DEADLINE) as agent:
        assert agent.new_session().prompt("again").text == "echo: again"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", [f.name for f in FAULTS if f.stage == "start"])
@pytest.mark.slow
def test_start_fault_behind_the_proxy(name: str, tmp_path: Path) -> None:
    fault = BY_NAME[name]
    agents = {"ok": [*FAULT_AGENT, "normal"], "f": fault_argv(fault, True)}
    with acpnb.start_proxy(agents, probe_timeout=1, start_timeout=30, cwd=tmp_path, timeout=START_DEADLINE) as proxy:
        session = proxy.new_session()
        assert session.config["model"].values == ["ok:m1", "ok:m2"]
        (answer,) = [e["msg"]["result"] for e in list(proxy.log) if e["dir"] == "recv" and "sessionId" in
                     (e["msg"].get("result") or {})]
        described = answer["_meta"]["acp-notebook/proxy"]["agents"]["f"]
        assert described["ok"] is False
        cause = fault.proxy_cause if fault.proxy_cause is not None else fault.cause
        assert cause in described["error"]
        if name == "exit-before-initialize":
            assert "cannot find my config file" in described["error"]
        assert session.prompt("again").text == "echo: again"
