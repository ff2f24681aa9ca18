"""The client and the parts of ACP most agents do not exercise yet: forms (elicitation), terminal logins,
logout, session/delete, updates outside their turn, and the title taken from the first prompt.

Agents that behave exactly so are written as recordings, here in the test, and replayed: the
replay transport is a real transport under the real client."""

from __future__ import annotations

import concurrent.futures
import shlex
import sys
import threading
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.elicitation import ElicitationRequest, check_answers
from acp_notebook.frames import analyze
from tests.proxy_agents.harness import start_proxies
from tests.recorded_agents import write_recording
from tests.schema_check import FrameLog

SID = "sess-1"
FORM = {"type": "object", "properties": {
    "name": {"type": "string", "title": "Name", "minLength": 1},
    "cups": {"type": "integer", "minimum": 0, "maximum": 9},
    "tea": {"type": "boolean"},
    "colour": {"type": "string", "enum": ["red", "blue"]}}, "required": ["name"]}


def new_session(request_id=1, early=()):
    return [("send", {"id": request_id, "method": "session/new", "params": {"cwd": "/rec", "mcpServers": []}}),
            *early,
            ("recv", {"id": request_id, "result": {"sessionId": SID}})]


def update(kind, **fields):
    return ("recv", {"method": "session/update", "params": {"sessionId": SID, "update": {"sessionUpdate": kind,
                                                                                          **fields}}})


def chunk(text):
    return update("agent_message_chunk", content={"type": "text", "text": text})


def prompt(request_id, text, *middle, stop="end_turn", after=()):
    return [("send", {"id": request_id, "method": "session/prompt",
                      "params": {"sessionId": SID, "prompt": [{"type": "text", "text": text}]}}),
            *middle, ("recv", {"id": request_id, "result": {"stopReason": stop}}), *after]


def form_request(request_id, answer):
    return [("recv", {"id": request_id, "method": "elicitation/create",
                      "params": {"sessionId": SID, "mode": "form", "message": "About you", "requestedSchema": FORM}}),
            ("send", {"id": request_id, "result": answer})]


def test_a_form_is_answered_by_the_turn_session_or_agent_policy(tmp_path):
    accepted = {"action": "accept", "content": {"name": "Ada", "cups": 2, "tea": True, "colour": "blue"}}
    path = write_recording(tmp_path / "forms.acp.jsonl", [
        *new_session(),
        *prompt(2, "one", *form_request("e1", accepted), chunk("thanks Ada")),
        *prompt(3, "two", *form_request("e2", {"action": "decline"}), chunk("fine")),
        *prompt(4, "three", *form_request("e3", {"action": "cancel"}), chunk("ok")),
        *prompt(5, "four", *form_request("e4", {"action": "decline"}), chunk("no answers")),
    ])
    seen: list[ElicitationRequest] = []

    def by_hand(request):
        seen.append(request)
        future = concurrent.futures.Future()  # what a form widget returns: answered later, from elsewhere
        threading.Thread(target=future.set_result, args=({"name": "Ada", "cups": 2.0, "tea": True,
                                                           "colour": "blue"},)).start()
        return future

    with acpnb.replay(path, elicitation=by_hand) as agent:
        assert agent.log[0]["msg"]["params"]["clientCapabilities"]["elicitation"] == {"form": {}}
        session = agent.new_session()
        first = session.prompt("one")
        assert seen[0].message == "About you" and list(seen[0].fields) == ["name", "cups", "tea", "colour"]
        assert seen[0].required == ["name"] and seen[0].turn is first
        assert first.elicitations[0].action == "accept" and first.elicitations[0].content["cups"] == 2
        session.elicitation = "decline"
        assert session.prompt("two").elicitations[0].action == "decline"
        assert session.prompt("three", elicitation=lambda request: None).elicitations[0].action == "cancel"
        bad = session.prompt("four", elicitation={"cups": 12}).elicitations[0]
        assert bad.action == "decline" and "required: name" in bad.problem


def test_answers_are_checked_against_the_form():
    request = ElicitationRequest(None, "m", FORM, {})
    assert check_answers(request, {"name": "A", "cups": 3.0}) == {"name": "A", "cups": 3}
    for answers, problem in [({"cups": 1}, "required: name"), ({"name": "A", "cups": 10}, "out of range"),
                             ({"name": "A", "cups": 1.5}, "whole number"), ({"name": "A", "tea": "yes"}, "true or false"),
                             ({"name": "A", "colour": "green"}, "not one of"), ({"name": "", }, "required"),
                             ({"name": "A", "x": 1}, "not in the form")]:
        with pytest.raises(ValueError, match=problem):
            check_answers(request, answers)


def test_terminal_logins_show_the_command_and_logout_and_delete_are_sent(tmp_path):
    terminal = {"type": "terminal", "id": "tui", "name": "Log in", "args": ["--login"], "env": {"LOGIN_MODE": "tty"}}
    path = write_recording(tmp_path / "auth.acp.jsonl", [
        *new_session(),
        ("send", {"id": 2, "method": "logout", "params": {}}), ("recv", {"id": 2, "result": {}}),
        ("send", {"id": 3, "method": "session/delete", "params": {"sessionId": SID}}), ("recv", {"id": 3, "result": {}}),
    ], capabilities={"auth": {"logout": {}}, "sessionCapabilities": {"delete": {}}}, auth_methods=[terminal])
    with acpnb.replay(path) as agent:
        assert agent.log[0]["msg"]["params"]["clientCapabilities"]["auth"] == {"terminal": True}
        assert agent.terminal_login_command("tui") == shlex.join(["LOGIN_MODE=tty", *agent.command, "--login"])
        with pytest.raises(acpnb.AcpError) as info:
            agent.authenticate("tui")
        assert "--login" in info.value.hint and "terminal" in str(info.value)
        session = agent.new_session()
        assert agent.logout() == {}
        session.delete()
        assert session.closed and session not in agent.sessions


def test_updates_before_their_session_and_after_their_turn_land_where_they_belong(tmp_path):
    path = write_recording(tmp_path / "order.acp.jsonl", [
        *new_session(early=[update("available_commands_update", availableCommands=[{"name": "go",
                                                                                      "description": "d"}])]),
        *prompt(2, "Write a haiku about tides\nplease", chunk("Tides"),
                after=[update("usage_update", used=120, size=1000), chunk("!")]),
    ])
    with acpnb.replay(path) as agent:
        session = agent.new_session()
        assert [c["name"] for c in session.state.commands] == ["go"]  # sent before the session/new answer
        assert session.title is None and session.display_title is None
        trailing = threading.Event()
        turn = session.start_turn("Write a haiku about tides\nplease")

        def both_arrived(_event=None):
            if turn.text == "Tides!" and turn.usage:
                trailing.set()

        turn.observe(both_arrived)
        both_arrived()  # they may have come before the observer
        turn.future.result(10)
        assert session.display_title == "Write a haiku about tides" and session.state.title_source == "prompt"
        assert trailing.wait(10), "the update sent after the prompt's answer reached its turn"
        assert turn.usage["used"] == 120 and turn.text == "Tides!"
        assert [u["sessionUpdate"] for u in session.history] == ["available_commands_update"]  # no chunk


def test_a_request_given_up_on_is_cancelled_with_cancel_request(tmp_path):
    """A long request the caller stops waiting for: the agent is told with $/cancel_request (our own on the SDK's
    0.12 line, the SDK's own on 1.x), so it can stop working on it; a prompt is stopped with session/cancel."""
    import asyncio

    release = threading.Event()

    class Slow:  # the SDK's agent methods, enough for a session-less extension request
        async def initialize(self, protocol_version, **kwargs):
            return {"protocolVersion": protocol_version}

        async def ext_method(self, method, params):
            await asyncio.get_running_loop().run_in_executor(None, release.wait, 10)  # a long operation
            return {}

    with acpnb.start(Slow()) as agent:
        with pytest.raises(acpnb.AcpTimeoutError, match="_slow to agent 'Slow' did not finish within 0.5 s"):
            agent.request("_slow", {}, timeout=0.5)
        release.set()
        sent = [e["msg"] for e in agent.log if e["dir"] == "send"]
        asked = next(m for m in sent if m.get("method") == "_slow")
        agent.request("_slow", {})  # a later round trip: the cancel was written before it
        cancels = [m for m in (e["msg"] for e in agent.log if e["dir"] == "send") if m.get("method") == "$/cancel_request"]
        assert [c["params"]["requestId"] for c in cancels] == [asked["id"]]


def test_an_authentication_error_names_the_terminal_login_command(tmp_path):
    terminal = {"type": "terminal", "id": "tui", "name": "Log in", "args": ["--login"]}
    path = write_recording(tmp_path / "locked.acp.jsonl", [
        ("send", {"id": 1, "method": "session/new", "params": {"cwd": "/rec", "mcpServers": []}}),
        ("recv", {"id": 1, "error": {"code": -32000, "message": "Authentication required"}}),
    ], auth_methods=[terminal])
    with acpnb.replay(path) as agent:
        with pytest.raises(acpnb.RpcError) as info:
            agent.new_session()
        assert info.value.auth_required
        assert f"from a terminal, then start the agent again: {agent.terminal_login_command('tui')}" in info.value.hint


# --- the stable v1 of today: tool-call names, notices, compaction, as raw frames ------------------------
TODAY_AGENT = [sys.executable, str(Path(__file__).resolve().parent / "agents" / "today_agent.py")]


def _received_updates(agent, session_id):
    """The session's updates as the client received them; but option lists, which the proxy sends of its own."""
    updates = [e["msg"]["params"]["update"] for e in list(agent.log) if e["dir"] == "recv"
               and e["msg"].get("method") == "session/update" and e["msg"]["params"].get("sessionId") == session_id]
    return [u for u in updates if u.get("sessionUpdate") != "config_option_update"]


def _wait_for_notices(session, count, timeout=20.0):
    """Until the session holds ``count`` notices that came outside a turn (they follow the prompt's answer)."""
    arrived = threading.Event()
    stop = session.state.observe(lambda event: arrived.set() if len(session.state.notices) >= count else None)
    try:
        if len(session.state.notices) < count:
            assert arrived.wait(timeout), f"only {len(session.state.notices)} notices came"
    finally:
        stop()


def _check_today_turn(turn, session, *, answer_in_order=True):
    """``answer_in_order``: the prompt's answer reaches the client where the agent sent it, before the notices
    that follow it. The proxy forwards notifications as they come and the answer once its handler returns, so
    there the later notices may come first and are then the turn's."""
    from tests.agents import today_agent

    call = turn.tool_calls[0]
    assert (call.name, call.title, call.status) == ("mcp__kernel__list_variables", "Looking at your variables",
                                                    "completed")
    notice = turn.notices[0]
    assert (notice.severity, notice.title, notice.description) == ("warning", "Rate limited", "Retrying in 2 s")
    assert notice.text == "Rate limited: Retrying in 2 s" and notice.meta == {"retryAfterMs": 2000}
    (compaction,) = turn.compactions
    assert session.state.compactions == {"c1": compaction}
    assert (compaction.status, compaction.summary_text, compaction.meta) == (
        "completed", "You asked about the sales table.", {"by": "today"})
    assert compaction.usage_before is None and compaction.usage_after == {"used": 1200, "size": 128000}
    assert session.usage == {"used": 1200, "size": 128000} and turn.text == "Done."
    after = [("error", "Quota exhausted"), ("info", "Back to normal")]
    if answer_in_order:
        _wait_for_notices(session, 2)
        assert [(n.severity, n.title) for n in session.state.notices] == after
        assert turn.notices == [notice]  # the ones after the answer are the session's, not the turn's
    else:
        _wait_for_notices(session, 2 - len(turn.notices[1:]))
        assert [(n.severity, n.title) for n in [*turn.notices[1:], *session.state.notices]] == after
    assert _received_updates(session.agent, session.id) == today_agent.TURN_UPDATES + today_agent.AFTER_UPDATES
    return turn.result["_meta"]["clientCapabilities"]


def test_todays_frames_reach_the_client_field_for_field_and_fill_its_turn_and_session():
    """The client advertises notices and compaction; names, notices and compactions the agent writes by hand
    (fields neither SDK line models among them) arrive unchanged and land on the turn or the session."""
    with acpnb.start(TODAY_AGENT) as agent:
        session = agent.new_session()
        seen = _check_today_turn(session.prompt("hello"), session)
        assert seen["session"] == {"configOptions": {"boolean": {}}, "notices": {}, "compaction": {}}
        frames = FrameLog(local="client")
        for entry in list(agent.log):
            frames.record("client" if entry["dir"] == "send" else "agent", entry["msg"])
        frames.check()  # every frame, the new kinds included, is valid under the stable schema
        rows = {row.update: row for row in analyze(list(agent.log), check_schema=False) if row.update}
        assert "mcp__kernel__list_variables" in rows["tool_call"].summary
        assert rows["notice"].summary.startswith("info: ")  # the last notice of the log: the session's
        assert "this schema does not know" not in rows["compaction_summary_chunk"].explanation.text


@pytest.mark.slow
def test_todays_frames_pass_the_proxy_unchanged_and_so_do_the_capabilities(tmp_path):
    """The proxy hands the client's notices and compaction capabilities to the agent it binds, and the
    agent's names, notices and compaction updates back to the client, per session, unchanged."""
    starts = start_proxies(tmp_path)
    start = next(starts)
    try:
        proxy = start({"today": TODAY_AGENT})
        session = proxy.new_session()
        seen = _check_today_turn(session.prompt("hello"), session, answer_in_order=False)
        assert seen["session"]["notices"] == {} and seen["session"]["compaction"] == {}
    finally:
        next(starts, None)  # closes the proxy and checks every frame on both of its pipes against the schema


def test_a_malformed_notice_or_compaction_is_logged_with_why_and_not_applied(tmp_path):
    path = write_recording(tmp_path / "bad.acp.jsonl", [
        *new_session(),
        *prompt(2, "one", update("notice", severity="warning"), update("compaction_update", compactionId=7,
                                                                        status="completed"),
                update("compaction_summary_chunk", compactionId="c9", content="text"), chunk("ok")),
    ])
    with acpnb.replay(path) as agent:
        session = agent.new_session()
        turn = session.prompt("one")
        assert turn.notices == [] and turn.compactions == [] and session.state.compactions == {}
        notes = [e.get("note", "") for e in agent.log if e["dir"] == "recv" and "method" in e["msg"]]
        assert any("malformed notice update: its severity or title is not a string" in n for n in notes)
        assert any("malformed compaction_update update: its compactionId is not a string" in n for n in notes)
        assert any("malformed compaction_summary_chunk update: its content is not an object" in n for n in notes)
