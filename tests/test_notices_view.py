"""Notices, compactions and tool-call names in the views (issue 37): the turn view shows the agent's notices by
severity and each compaction as a folded "context compacted" block, updated as their updates arrive, and its
saved forms hold them; the session panel shows the notices that came while no turn ran and a compaction that
began outside any turn; the context meter follows a compaction; a tool card shows the tool's name.

Headless, with the recording comm of tests/test_widgets.py: what the frontend shows is replayed from the
messages the kernel side sent. The agents are real: the demo agent (its ``notices`` / ``notice later`` /
``compact`` prompts) and, where the test must hold a compaction open or send one outside a turn, a CellAgent
whose prompt waits on an event the test sets.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import acp_notebook as acpnb
from acp_notebook.cellagent import CellAgent
from acp_notebook.frames import analyze
from acp_notebook.widgets._frames_html import row_html
from acp_notebook.widgets.chat import TurnView
from acp_notebook.widgets.panel import SessionPanel
from acp_notebook.widgets.static import panel_forms, turn_forms
from tests.test_widgets import TIMEOUT, comms, demo, frontend_shows, run_turn  # noqa: F401 - fixtures


def shows(comms, widget) -> str:
    """What the frontend of a LiveParts section shows now."""
    shown = frontend_shows(comms, widget)
    return shown[-1] if shown else ""


def test_a_turns_notices_show_by_severity_and_are_saved(comms, demo):
    view = run_turn(demo.new_session(), "notices")
    turn = view.finished.result(TIMEOUT)
    assert [n.severity for n in turn.notices] == ["info", "warning", "error"]
    live = view.notices.value
    assert live.index("Using the cached index") < live.index("Rate limited") < live.index("The search tool failed")
    assert "acpnb-notice-info" in live and "acpnb-notice-warning" in live and "acpnb-notice-error" in live
    assert "\u26a0 warning:" in live and "\u2716 error:" in live  # marked as such; info is one quiet line
    assert shows(comms, view.notices) == live  # what the frontend holds
    # Each notice was sent once: one insert per part, never patched.
    ops = [op for m in comms.to(view.notices) if m.msg_type == "comm_msg" and m.data.get("method") == "custom"
           for op in m.data["content"].get("o", [])]
    assert sorted(op[1] for op in ops if op[0] == "+") == ["n0", "n1", "n2"] and not [op for op in ops if op[0] != "+"]
    forms = turn_forms(view.snapshot())
    assert 'class="acpnb-turn-notices"' in forms["text/html"] and "acpnb-notice-warning" in forms["text/html"]
    assert "**\u26a0 warning: Rate limited**" in forms["text/markdown"]
    assert "\u2139 info: Using the cached index" in forms["text/plain"]
    assert "\u2716 error: The search tool failed" in forms["text/plain"]


def test_a_compaction_shows_folded_with_its_summary_and_the_meter_follows_it(comms, demo):
    session = demo.new_session()
    run_turn(session, "hello there").finished.result(TIMEOUT)
    view = run_turn(session, "compact our talk")
    turn = view.finished.result(TIMEOUT)
    (compaction,) = turn.compactions
    assert compaction.status == "completed" and "You first said" in compaction.summary_text
    live = shows(comms, view.notices)
    assert '<details class="acpnb-compaction" data-status="completed"' in live and " open" not in live.split(">")[0]
    assert "\u27f2 context compacted" in live and "You first said: &quot;hello there&quot;" in live
    # The meter: the context it held before the compaction, in the turn's footer and its saved forms.
    before = compaction.usage_before["used"]
    assert f"compacted from {before:,}" in view.footer.value and "acpnb-context-compacted" in view.footer.value
    forms = turn_forms(view.snapshot())
    assert "acpnb-compaction" in forms["text/html"] and f"compacted from {before:,}" in forms["text/plain"]
    assert "**\u27f2 context compacted" in forms["text/markdown"] and "> 1 earlier exchange" in forms["text/markdown"]
    assert "\u27f2 context compacted" in forms["text/plain"]


class Compactor(CellAgent):
    """Holds a compaction open until the test says so; keeps its session to send from outside a turn."""

    def __init__(self) -> None:
        self.go_on = threading.Event()
        self.kept: Any = None

    def prompt(self, text: str) -> str | None:
        self.kept = self.session
        if text.startswith("compact"):
            self.send_update({"sessionUpdate": "usage_update", "used": 120_000, "size": 200_000})
            self.send_update({"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"})
            self.send_update({"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1",
                              "content": {"type": "text", "text": "We agreed on "}})
            assert self.go_on.wait(TIMEOUT)
            self.send_update({"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1",
                              "content": {"type": "text", "text": "the <plan>."}})
            self.send_update({"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed"})
            self.send_update({"sessionUpdate": "usage_update", "used": 9_000, "size": 200_000})
        elif text.startswith("tool"):
            for call_id, title, name in (("t1", "Read notes.txt", "Read"), ("t2", "Bash", "Bash"), ("t3", "x", None)):
                update = {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": title, "status": "completed"}
                self.send_update({**update, "name": name} if name else update)
        return "ok"


@pytest.fixture
def compactor():
    made = Compactor()
    agent = acpnb.start(made)
    yield made, agent
    made.go_on.set()
    agent.close()


def test_a_compaction_in_the_turn_updates_as_its_updates_arrive(comms, compactor):
    made, agent = compactor
    session = agent.new_session()
    view = TurnView(session.start_turn("compact now"))
    # The compaction's start and its summary's first chunk are two updates: a render may fall between them.
    comms.wait_for(lambda: all(text in shows(comms, view.notices) for text in ("compacting context", "We agreed on")))
    held = shows(comms, view.notices)
    assert 'data-status="in_progress"' in held and "We agreed on" in held
    comms.wait_for(lambda: "acpnb-context-compacting" in view.footer.value)  # the meter marks it while it runs
    made.go_on.set()
    view.finished.result(TIMEOUT)
    done = shows(comms, view.notices)
    assert 'data-status="completed"' in done and "We agreed on the &lt;plan&gt;." in done and "<plan>" not in done
    assert "120,000 \u2192 9,000 tokens" in done  # the context it freed, once the agent reported usage
    assert "compacted from 120,000" in view.footer.value and "context 9,000 of 200,000" in view.footer.value
    # Sent as it came: the block inserted once, then patched (no whole-list resend).
    contents = [m.data["content"] for m in comms.to(view.notices) if m.data.get("method") == "custom"]
    assert not [c for c in contents if "full" in c]
    assert [op[0] for c in contents for op in c["o"]].count("+") == 1


def test_the_panel_shows_notices_while_no_turn_runs_and_a_compaction_outside_turns(comms, demo, compactor):
    session = demo.new_session()
    panel = SessionPanel(session)
    session.prompt("notice later warning: Disk almost full")
    comms.wait_for(lambda: "Disk almost full" in panel.notices.value)
    assert "acpnb-notice-warning" in panel.notices.value
    assert "Disk almost full" in panel.snapshot().notices[0].title
    while_busy: list[str] = []
    session.state.observe(lambda e: e.kind == "status" and while_busy.append(panel.notices.value))
    turn = session.prompt("hello")
    assert turn.notices == [] and while_busy[0] == ""  # hidden while the turn runs: it shows its own
    assert "Disk almost full" in panel.notices.value  # back once it ended

    made, agent = compactor
    other = agent.new_session()
    other_panel = SessionPanel(other)
    other.prompt("hello")
    made.kept.send_update({"sessionUpdate": "compaction_update", "compactionId": "out", "status": "completed",
                           "summary": [{"type": "text", "text": "Between turns."}]})
    comms.wait_for(lambda: "acpnb-compaction" in other_panel.notices.value)
    assert "Between turns." in other_panel.notices.value and 'data-status="completed"' in other_panel.notices.value
    forms = panel_forms(other_panel.snapshot())
    assert "Between turns." in forms["text/html"] and "\u27f2 context compacted" in forms["text/plain"]


def test_a_compaction_in_a_turn_stays_out_of_the_panel(comms, compactor):
    made, agent = compactor
    session = agent.new_session()
    panel = SessionPanel(session)
    made.go_on.set()
    turn = session.prompt("compact now")
    assert [c.id for c in turn.compactions] == ["c1"]
    assert "acpnb-compaction" not in panel.notices.value
    assert "compacted from 120,000" in panel.footer.value  # the meter follows it until usage moves on


def test_a_tool_card_shows_the_tools_name_where_the_title_does_not_say_it(comms, compactor):
    _made, agent = compactor
    view = TurnView(agent.new_session().start_turn("tool calls"))
    view.finished.result(TIMEOUT)
    cards = view.tools.value
    assert cards.count("acpnb-tool-name") == 1 and ">Read</span>" in cards  # "Bash" titled "Bash" says nothing more
    forms = turn_forms(view.snapshot())
    assert "- Read notes.txt [Read] (other, completed)" in forms["text/plain"]
    assert "- Bash (other, completed)" in forms["text/plain"]


def test_the_inspector_labels_unstable_fields_as_unstable():
    entries = [{"dir": "send", "t": 0.0, "msg": {"jsonrpc": "2.0", "id": 1, "method": "session/new",
                                                 "params": {"cwd": "/", "mcpServers": [], "systemPrompt": "x"}}}]
    (row,) = analyze(entries)
    assert [i.level for i in row.issues] == ["unstable"]
    html = row_html(row)
    assert "\u26a0 unstable at" in html and "unknown field" not in html
