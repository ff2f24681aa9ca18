"""Property-based tests: schema-shaped and malformed frames fed to the client and to the proxy.

The client test drives a real ``StdioTransport`` whose "process" is a scripted peer in this
process (the same line reading, frame checks, SDK and client code as for a subprocess, without
one per example). The proxy test feeds the frames to the proxy from a real agent subprocess that
plays them on request. Both check, for every example: nothing is logged as an error on the
loop thread (no exception escaped a handler), the connection still answers, the session's state
has the types the client promises, and every bad frame is reported where it should be.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from datetime import timedelta

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import acp_notebook as acpnb
from acp_notebook import _loop
from acp_notebook.connection.transport import StdioTransport
from acp_notebook.state import ConfigOptions
from tests.processes import wait_gone

FAULT_AGENT = [sys.executable, str(Path(__file__).resolve().parent / "agents" / "fault_agent.py")]
SID = "$SID"  # replaced by the session's id before a frame is sent
# Examples per property; ACPNB_PROPERTY_EXAMPLES=1000 for a deeper search by hand. No example database
# (database=None): a run leaves nothing in the work tree.
EXAMPLES = int(os.environ.get("ACPNB_PROPERTY_EXAMPLES", "60"))
SETTINGS: dict[str, Any] = {"deadline": None, "database": None,
                            "suppress_health_check": [HealthCheck.function_scoped_fixture]}

# --- strategies ------------------------------------------------------------------------------
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=False,
                    allow_infinity=False), st.text(max_size=12))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                            st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                           max_leaves=12)


def maybe(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the right shape, sometimes anything at all."""
    return st.one_of(good, good, good, json_values)


text_block = st.fixed_dictionaries({"type": maybe(st.just("text")), "text": maybe(st.text(max_size=20))})
choice = st.fixed_dictionaries({"value": maybe(st.text(min_size=1, max_size=6)), "name": maybe(st.text(max_size=6))})
option = st.fixed_dictionaries({
    "id": maybe(st.sampled_from(["model", "mode", "x"])), "name": maybe(st.just("Name")),
    "type": maybe(st.sampled_from(["select", "boolean", "dial"])),
    "currentValue": maybe(st.one_of(st.text(max_size=6), st.booleans())),
    "options": maybe(st.lists(st.one_of(choice, st.fixed_dictionaries({"group": st.just("g"), "name": st.just("G"),
                                                                        "options": st.lists(choice, max_size=3)})),
                              max_size=4)),
})
updates = st.one_of(
    st.fixed_dictionaries({"sessionUpdate": st.sampled_from(["agent_message_chunk", "agent_thought_chunk",
                                                             "user_message_chunk"]), "content": maybe(text_block)}),
    st.fixed_dictionaries({"sessionUpdate": st.sampled_from(["tool_call", "tool_call_update"]),
                           "toolCallId": maybe(st.sampled_from(["t1", "t2"])), "title": maybe(st.text(max_size=8)),
                           "status": maybe(st.sampled_from(["pending", "completed", "failed"])),
                           "content": maybe(st.lists(st.fixed_dictionaries({"type": st.just("content"),
                                                                            "content": text_block}), max_size=2))}),
    st.fixed_dictionaries({"sessionUpdate": st.just("plan"), "entries": maybe(st.lists(st.fixed_dictionaries(
        {"content": st.text(max_size=8), "priority": st.just("high"), "status": st.just("pending")}), max_size=3))}),
    st.fixed_dictionaries({"sessionUpdate": st.just("config_option_update"),
                           "configOptions": maybe(st.lists(option, max_size=3))}),
    st.fixed_dictionaries({"sessionUpdate": st.just("session_info_update"), "title": maybe(st.text(max_size=10)),
                           "_meta": maybe(st.dictionaries(st.text(max_size=4), json_values, max_size=3))}),
    st.fixed_dictionaries({"sessionUpdate": st.just("usage_update"), "used": maybe(st.integers(0, 10**6)),
                           "size": maybe(st.integers(1, 10**6))}),
    st.fixed_dictionaries({"sessionUpdate": st.sampled_from(["available_commands_update", "current_mode_update",
                                                             "hologram"]), "availableCommands": json_values,
                           "currentModeId": json_values}),
    st.dictionaries(st.text(max_size=8), json_values, max_size=4),
)
session_ids = st.one_of(st.just(SID), st.just(SID), st.just("someone-else"), json_values)
# Ids that can never match a request the client has outstanding (those count from 0).
stray_ids = st.one_of(st.integers(10_000, 10**9), st.text(min_size=1, max_size=6).map(lambda t: f"x-{t}"))
bad_ids = st.one_of(st.booleans(), st.sampled_from([1.5, -0.25, 1e300]), st.lists(st.integers(), max_size=2),
                    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
agent_methods = st.sampled_from(["session/request_permission", "fs/read_text_file", "fs/write_text_file",
                                 "terminal/create", "_ext/ask", "no/such/method", "elicitation/create"])

good_frames = st.one_of(
    st.builds(lambda sid, update: {"jsonrpc": "2.0", "method": "session/update",
                                   "params": {"sessionId": sid, "update": update}}, session_ids, updates),
    st.builds(lambda method, request_id, sid, params: {"jsonrpc": "2.0", "id": request_id, "method": method,
                                                       "params": {"sessionId": sid, **params}},
              agent_methods, stray_ids, session_ids,
              st.dictionaries(st.sampled_from(["path", "content", "toolCall", "options", "mode", "requestedSchema",
                                               "message"]), json_values, max_size=4)),
    st.builds(lambda request_id, body: {"jsonrpc": "2.0", "id": request_id, **body}, stray_ids,
              st.one_of(st.fixed_dictionaries({"result": json_values}),
                        st.fixed_dictionaries({"error": st.fixed_dictionaries({"code": st.integers(-33000, 0),
                                                                               "message": st.text(max_size=8)})}))),
    st.builds(lambda method, params: {"jsonrpc": "2.0", "method": method, "params": params},
              st.text(max_size=10), json_values),
)
bad_frames = st.one_of(
    st.builds(lambda i, body: {"jsonrpc": "2.0", "id": i, **body}, bad_ids,
              st.sampled_from([{"result": {}}, {"error": {"code": 1, "message": "m"}}])),
    st.builds(lambda m: {"jsonrpc": "2.0", "method": m, "params": {}},
              st.one_of(st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2))),
    st.builds(lambda i, e: {"jsonrpc": "2.0", "id": i, "error": e}, stray_ids,
              st.one_of(st.text(max_size=5), st.integers(), st.fixed_dictionaries({"code": st.text(max_size=3)}))),
    st.fixed_dictionaries({"jsonrpc": st.just("2.0")}),
)
# A line: (text, whether the client must report it as a bad frame)
lines = st.one_of(
    good_frames.map(lambda f: (json.dumps(f), False)),
    bad_frames.map(lambda f: (json.dumps(f), True)),
    st.text(alphabet=st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)), min_size=1,
            max_size=30).filter(lambda t: t.strip() and not _is_json(t)).map(lambda t: (t, True)),
    st.one_of(st.lists(scalars, max_size=3), scalars).map(lambda v: (json.dumps(v), True)),
)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


# --- the scripted peer -------------------------------------------------------------------------
class ScriptedProcess:
    """Stands in for AgentProcess under a StdioTransport: the client's lines go to ``answer``, and
    ``feed`` writes lines the client reads, on the loop thread, in order."""

    pid = None
    exit_code = None

    def __init__(self) -> None:
        self.stderr_listeners: list[Callable[[str], None]] = []
        self.stdin = self
        self.session_id = "s-1"

    async def spawn(self) -> None:
        # Made here, on the loop thread that reads them.
        self.exited = asyncio.Event()
        self.stdout = asyncio.StreamReader(limit=64 * 1024 * 1024)

    # the "stdin" side: what the client writes
    def is_closing(self) -> bool:
        return self.exited.is_set()

    def write(self, data: bytes) -> None:
        for line in data.decode().split("\n"):  # not splitlines(): U+0085 and friends may be inside a frame
            if line:
                self.answer(json.loads(line))

    async def drain(self) -> None:
        pass

    def answer(self, frame: dict[str, Any]) -> None:
        method = frame.get("method")
        result: Any = None
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
        elif method == "session/new":
            result = {"sessionId": self.session_id, "configOptions": [
                {"id": "model", "name": "Model", "type": "select", "currentValue": "m1",
                 "options": [{"value": "m1", "name": "M1"}, {"value": "m2", "name": "M2"}]}]}
        elif method in ("_sync", "session/prompt"):
            return  # answered by the test, after the frames of an example
        elif "id" in frame and method is not None:
            result = {}
        if "id" in frame and method is not None:
            self.feed([json.dumps({"jsonrpc": "2.0", "id": frame["id"], "result": result})])

    def feed(self, texts: list[str]) -> None:
        self.stdout.feed_data("".join(t + "\n" for t in texts).encode())

    def stderr_tail(self, lines: int = 20) -> list[str]:
        return []

    async def terminate(self) -> None:
        self.stdout.feed_eof()
        self.exited.set()

    async def settle(self) -> None:
        pass


class ScriptedTransport(StdioTransport):
    def __init__(self) -> None:
        super().__init__(["scripted-peer"], cwd=".", env={})
        self.process = ScriptedProcess()  # type: ignore[assignment]


class ErrorRecords(logging.Handler):
    """Every ERROR logged anywhere (the SDK logs exceptions from handlers and tasks on the root logger)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(self.format(record))


@pytest.fixture(scope="module")
def errors():
    handler = ErrorRecords()
    logging.getLogger().addHandler(handler)
    yield handler
    logging.getLogger().removeHandler(handler)


@pytest.fixture(scope="module")
def scripted(tmp_path_factory, errors):
    transport = ScriptedTransport()
    agent = acpnb.start(transport, cwd=tmp_path_factory.mktemp("scripted"), timeout=30)
    session = agent.new_session()
    yield agent, session, transport.process
    agent.close()


def check_state(session: acpnb.Session) -> None:
    """The types the client promises, whatever the agent sent."""
    state = session.state
    assert isinstance(state.config, ConfigOptions)
    for option in state.config:
        assert isinstance(option.id, str) and option.type in ("select", "boolean")
        if option.type == "select":
            assert isinstance(option.value, str) and all(isinstance(c.value, str) for c in option.choices)
        else:
            assert isinstance(option.value, bool)
    assert state.title is None or isinstance(state.title, str)
    assert isinstance(state.meta, dict) and (state.usage is None or isinstance(state.usage, dict))
    assert all(isinstance(update, dict) for update in state.history)
    for turn in session.turns:
        assert isinstance(turn.text, str) and isinstance(turn.thoughts, str)
        assert all(isinstance(call.id, str) for call in turn.tool_calls)
        assert all(isinstance(entry, dict) for entry in turn.plan)


def bad_notes(agent: acpnb.Agent) -> int:
    return sum(1 for entry in list(agent.log) if (entry.get("note") or "").startswith("bad frame"))


@settings(max_examples=EXAMPLES, **SETTINGS)
@given(st.lists(lines, min_size=1, max_size=12), st.booleans())
def test_the_client_survives_any_frames(scripted, errors, examples, during_turn):
    agent, session, peer = scripted
    before, errors.records[:] = bad_notes(agent), []
    texts = [text.replace(SID, session.id) for text, _ in examples]
    turn = session.start_turn("x") if during_turn else None
    if turn is not None:  # the prompt is on the wire once the turn is working
        prompt_id = wait_for_request(agent, "session/prompt")
    sync = _loop.submit(agent.arequest("_sync", {}))
    sync_id = wait_for_request(agent, "_sync")
    peer_call(peer.feed, texts)
    answers = [json.dumps({"jsonrpc": "2.0", "id": sync_id, "result": {"ok": True}})]
    if turn is not None:
        answers.insert(0, json.dumps({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "end_turn"}}))
    peer_call(peer.feed, answers)
    assert sync.result(30) == {"ok": True}, "the connection stopped answering"
    if turn is not None:
        assert turn.done.wait(30) and turn.error is None
    assert bad_notes(agent) - before == sum(1 for _, bad in examples if bad)
    assert errors.records == []
    check_state(session)


def peer_call(function: Callable[..., None], *args: Any) -> None:
    """Run the peer's ``function`` on the loop thread (its StreamReader belongs to that loop)."""
    done = threading.Event()
    _loop.call_soon(lambda: (function(*args), done.set()))
    assert done.wait(10)


def wait_for_request(agent: acpnb.Agent, method: str) -> Any:
    """The id of the newest ``method`` request the client has sent, once it is on the wire."""
    seen = threading.Event()

    def sent() -> Any:
        ids = [e["msg"]["id"] for e in list(agent.log) if e["dir"] == "send" and e["msg"].get("method") == method]
        return ids[-1] if ids and ids[-1] not in answered else None

    answered = {e["msg"]["id"] for e in list(agent.log) if e["dir"] == "recv" and "id" in e["msg"]
                and "method" not in e["msg"]}
    unsubscribe = agent.on_frame(lambda _entry: seen.set())
    try:
        while sent() is None:
            assert seen.wait(10), f"{method} was never sent"
            seen.clear()
    finally:
        unsubscribe()
    return sent()


# --- behind the proxy ------------------------------------------------------------------------------
# Each proxy example fails fast: every call it makes has a short timeout, and the example a deadline that a
# loaded 2-core machine still meets (an example takes about 0.1 s; seconds under load). It is not shrunk: it
# is at most ten lines, printed whole, and shrinking re-runs a failing turn many times over (a run that found
# a fault once went on shrinking into the suite's 300 s timeout).
PROXY_CALL_TIMEOUT = 15
PROXY_SETTINGS: dict[str, Any] = {**SETTINGS, "deadline": timedelta(seconds=20),
                                  "phases": (Phase.explicit, Phase.reuse, Phase.generate)}


class Warnings:
    """Counts the proxy's stderr lines naming a bad frame (its log), with an event for each new one; keeps any
    traceback (a fault in the proxy's own code, which must never happen whatever its agent sends)."""

    def __init__(self) -> None:
        self.count = 0
        self.arrived = threading.Event()
        self.faults: list[str] = []

    def __call__(self, line: str) -> None:
        if "bad frame (" in line:
            self.count += 1
            self.arrived.set()
        if line.startswith("Traceback"):
            self.faults.append(line)

    def wait_for(self, count: int) -> None:
        while self.count < count:
            assert self.arrived.wait(10), "the proxy never named the bad frames in its log"
            self.arrived.clear()


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    with acpnb.start_proxy({"f": [*FAULT_AGENT, "normal"]}, cwd=tmp_path_factory.mktemp("proxied"),
                           timeout=30) as proxy:
        warnings = Warnings()
        proxy.on_stderr(warnings)
        session = proxy.new_session()
        assert session.prompt("hello").text == "echo: hello"
        yield proxy, session, tmp_path_factory.mktemp("plays"), warnings


@settings(max_examples=EXAMPLES * 2 // 3, **PROXY_SETTINGS)
@given(st.lists(lines, min_size=1, max_size=10))
@pytest.mark.slow
def test_the_proxy_survives_any_frames_from_its_agent(proxied, examples):
    proxy, session, plays, warnings = proxied
    script = plays / f"play-{len(list(plays.iterdir()))}.txt"
    script.write_text("".join(text + "\n" for text, _ in examples), encoding="utf-8")
    warned = warnings.count
    before = bad_notes(proxy)
    turn = session.prompt(f"play {script}", timeout=PROXY_CALL_TIMEOUT)
    assert turn.stop_reason == "end_turn"
    expected = sum(1 for _, bad in examples if bad)
    warnings.wait_for(warned + expected)
    assert warnings.count - warned == expected
    assert bad_notes(proxy) == before, "the proxy forwarded a bad frame"
    check_state(session)
    assert session.prompt("still there?", timeout=PROXY_CALL_TIMEOUT).text == "echo: still there?"
    assert warnings.faults == [], "the proxy's own code failed on a frame"


def test_a_model_option_whose_choices_are_not_a_list_leaves_the_proxy_answering(proxied):
    """The example a loaded run found: `options` of the model option a number. The proxy's model reader raised
    in its receive loop, which ended the connection of an agent still running: every later request failed
    "exited with code None", with the agent alive."""
    proxy, session, plays, warnings = proxied
    update = {"sessionUpdate": "config_option_update", "configOptions": [
        {"id": "model", "name": "Name", "type": "select", "currentValue": "", "options": 1}]}
    script = plays / "not-a-list.txt"
    script.write_text(json.dumps({"jsonrpc": "2.0", "method": "session/update",
                                  "params": {"sessionId": SID, "update": update}}) + "\n", encoding="utf-8")
    assert session.prompt(f"play {script}", timeout=PROXY_CALL_TIMEOUT).stop_reason == "end_turn"
    assert session.prompt("still there?", timeout=PROXY_CALL_TIMEOUT).text == "echo: still there?"
    assert warnings.faults == []


def test_a_frame_handler_that_fails_leaves_the_connection_answering(tmp_path):
    """A fault in the owner's frame handler is logged; the agent's frames go on (the fault used to end the
    SDK's receive loop, and the running agent could never answer again)."""
    from acp_notebook.connection import AgentConnection, transport_for

    async def scenario() -> list[str]:
        _, transport, env = transport_for([*FAULT_AGENT, "normal"], cwd=str(tmp_path))

        def on_frame(direction: str, message: dict[str, Any], note: str | None) -> None:
            if message.get("method") == "session/update":
                raise RuntimeError("a bug in whoever reads the frames")

        async def handler(method: str, params: Any, is_notification: bool) -> Any:
            return None

        connection = AgentConnection(transport, name="f", handler=handler, on_frame=on_frame, env=env)
        await connection.start({"protocolVersion": 1, "clientCapabilities": {}}, timeout=PROXY_CALL_TIMEOUT)
        try:
            sid = (await connection.request("session/new", {"cwd": str(tmp_path), "mcpServers": []}))["sessionId"]
            said = []
            for text in ("one", "two"):
                answer = await connection.request("session/prompt", {
                    "sessionId": sid, "prompt": [{"type": "text", "text": text}]}, timeout=PROXY_CALL_TIMEOUT)
                said.append(answer["stopReason"])
            return said
        finally:
            await connection.close()

    with_logs = logging.getLogger("acp_notebook.connection.core")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(with_logs, "disabled", True)  # the traceback it logs is the expected part here
        assert _loop.run_sync(scenario(), 60) == ["end_turn", "end_turn"]


@pytest.mark.slow
def test_an_agent_that_closes_its_output_is_gone_and_the_message_says_so(tmp_path):
    """Gone when its pipe closed, though its process still ran: the proxy says which, ends that process, and
    the next prompt starts the agent again."""
    from tests.proxy_agents.harness import quirky, status

    with acpnb.start_proxy({"q": quirky()}, cwd=tmp_path, timeout=30) as proxy:
        session = proxy.new_session()
        first = status(proxy)["agents"]["q"]["pid"]
        with pytest.raises(acpnb.AcpError) as gone:
            session.prompt("close-stdout", timeout=PROXY_CALL_TIMEOUT)
        message = str(gone.value)
        assert f"agent 'q' closed its output (stdout); its process (pid {first}) was still running" in message
        assert "exited" not in message
        assert "heard: again" in session.prompt("again", timeout=PROXY_CALL_TIMEOUT).text  # a new process
        assert status(proxy)["agents"]["q"]["pid"] != first
        assert wait_gone(first, timeout=30), "the mute process was left running"
