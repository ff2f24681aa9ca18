"""The demo agent teaches today's stable ACP v1: notices of each severity (during a turn, or after its answer),
a context compaction with its summary (and the usage it empties), and tool calls with programmatic names.
In memory, as a subprocess (the notices sent after the answer cross a real pipe in order), and to a client
that does not advertise the capabilities (the demo then says what it would have sent)."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

import acp_notebook as acpnb
from acp_notebook.demo import DemoAgent
from acp_notebook.demo.notices import EXAMPLES, parse_notice_command

DEMO_PROCESS = [sys.executable, "-m", "acp_notebook.demo"]


def wait_for_session_notices(session, count, timeout=20.0):
    arrived = threading.Event()
    stop = session.state.observe(lambda _event: arrived.set() if len(session.state.notices) >= count else None)
    try:
        assert len(session.state.notices) >= count or arrived.wait(timeout), "the notice never came"
    finally:
        stop()


def test_the_notice_grammar():
    assert [n[0] for n in parse_notice_command("Notices please").notices] == ["info", "warning", "error"]
    one = parse_notice_command("notice Warning: the disk is almost full")
    assert one.notices == (("warning", "the disk is almost full", None),) and not one.later
    assert parse_notice_command("notice later error: lost the connection").later
    assert parse_notice_command("notice critical: nope") is None and parse_notice_command("a notice") is None


@pytest.mark.parametrize("where", ["memory", "subprocess"])
def test_notices_during_a_turn_and_after_its_answer(where, tmp_path):
    with acpnb.start(DemoAgent() if where == "memory" else DEMO_PROCESS, cwd=tmp_path) as agent:
        session = agent.new_session()
        turn = session.prompt("notices")
        assert [(n.severity, n.title, n.description) for n in turn.notices] == [
            (severity, title, description) for severity, (title, description) in EXAMPLES.items()]
        assert "I sent 3 notices: info, warning, error." in turn.text and session.state.notices == []
        later = session.prompt("notice later warning: the disk is almost full")
        wait_for_session_notices(session, 1)
        assert later.notices == [] and "once this turn has ended" in later.text
        assert [(n.severity, n.title) for n in session.state.notices] == [("warning", "the disk is almost full")]
        # the answer went out before the notice: the notice came while no turn ran
        kinds = [e["msg"].get("params", {}).get("update", {}).get("sessionUpdate") or ("answer" if "result" in e["msg"]
                 else e["msg"].get("method")) for e in list(agent.log) if e["dir"] == "recv"]
        assert kinds[-2:] == ["answer", "notice"]


def test_a_compaction_summarises_the_session_and_empties_the_context_meter(tmp_path):
    with acpnb.start(DemoAgent(), cwd=tmp_path) as agent:
        session = agent.new_session()
        session.prompt("Tell me about tide pools and the creatures that live in them")
        session.prompt("And about kelp forests")
        full = session.usage["used"]
        turn = session.prompt("compact the context please")
        (compaction,) = turn.compactions
        assert compaction.status == "completed" and session.state.compactions == {compaction.id: compaction}
        assert compaction.summary_text == ('2 earlier exchanges. You first said: "Tell me about tide pools and the '
                                           'creatures that live in them". Most recently: "And about kelp forests".')
        assert compaction.usage_before["used"] == full
        assert compaction.usage_after == session.usage and session.usage["used"] < full
        assert f"{full} tokens of context became a summary" in turn.text


def test_tool_calls_carry_their_programmatic_names(tmp_path):
    with acpnb.start(DemoAgent(), cwd=tmp_path, permission="allow") as agent:
        session = agent.new_session()
        (tmp_path / "notes.txt").write_text("hello\n")
        read = session.prompt("read notes.txt")
        wrote = session.prompt("write goodbye to out.txt")
        assert [c.name for c in read.tool_calls] == ["read_text_file"]
        assert [c.name for c in wrote.tool_calls] == ["write_text_file"]


@pytest.mark.slow
def test_a_client_without_the_capabilities_is_told_instead(tmp_path):
    from tests.test_demo_agent import demo_agent, text_of, updates_in

    async def body():
        async with demo_agent(tmp_path) as harness:  # the SDK's client: no notices, no compaction advertised
            session_id, _ = await harness.new_session()
            await harness.prompt(session_id, "notices")
            said = text_of(updates_in(harness.turn_frames(session_id), "agent_message_chunk"))
            assert "this client does not show notices (no session.notices capability)" in said
            await harness.prompt(session_id, "compact")
            frames = harness.turn_frames(session_id)
            assert "no session.compaction capability" in text_of(updates_in(frames, "agent_message_chunk"))
            assert not updates_in(frames, "notice") and not updates_in(frames, "compaction_update")

    asyncio.run(asyncio.wait_for(body(), 60))
