"""The widgets headless, against the real demo agent, with a comm that records every message sent.

What the frontend would see is what the recording comm saw: comm_open and update messages
per widget. User actions are simulated the way the browser sends them: a comm message to
the widget's comm (``update`` with the new ``index`` for a Dropdown, ``custom`` click
events for Buttons).
"""

from __future__ import annotations

import concurrent.futures
import copy
import re
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from html import escape
from typing import Any

import comm
import ipywidgets as widgets
import pytest
from comm.base_comm import BaseComm
from IPython.testing import globalipapp
from IPython.utils.capture import capture_output

import acp_notebook as acpnb
from acp_notebook.demo import DemoAgent
from acp_notebook import _loop
from acp_notebook.widgets.chat import TurnView
from acp_notebook.widgets.display import LiveDisplay, flush_all, open_displays
from acp_notebook.widgets.forms import FormAsker, FormPrompt
from acp_notebook.widgets.sessions import SessionTable
from acp_notebook.widgets.static import turn_forms
from acp_notebook.widgets.panel import SessionPanel
from acp_notebook.widgets.permission import PermissionAsker, PermissionPrompt

TIMEOUT = 15.0


# --- the recording comm ---------------------------------------------------------------
@dataclass(frozen=True)
class Sent:
    comm_id: str
    msg_type: str
    data: dict[str, Any]

    @property
    def state(self) -> dict[str, Any]:
        return self.data.get("state") or {}


class RecordingComm(BaseComm):
    def __init__(self, recorder: CommRecorder, **kwargs: Any) -> None:
        self.recorder = recorder
        super().__init__(**kwargs)

    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None,
                    **keys: Any) -> None:
        self.recorder.record(Sent(self.comm_id, msg_type, copy.deepcopy(data or {})))


class CommRecorder:
    """Every message the kernel side sends to the frontend, in order; waits are on a condition."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.comms: dict[str, RecordingComm] = {}
        self._changed = threading.Condition()

    def create(self, **kwargs: Any) -> RecordingComm:
        made = RecordingComm(self, **kwargs)
        self.comms[made.comm_id] = made
        return made

    def record(self, message: Sent) -> None:
        with self._changed:
            self.sent.append(message)
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[], Any], timeout: float = TIMEOUT) -> None:
        """Wait until predicate() holds; re-checked whenever a message is sent."""
        with self._changed:
            assert self._changed.wait_for(predicate, timeout), "condition not met in time"

    def to(self, widget: widgets.Widget) -> list[Sent]:
        return [m for m in self.sent if m.comm_id == widget.model_id]

    def updates_of(self, widget: widgets.Widget, key: str) -> list[Any]:
        return [m.state[key] for m in self.to(widget) if m.msg_type == "comm_msg" and key in m.state]

    def from_frontend(self, widget: widgets.Widget, data: dict[str, Any]) -> None:
        """Deliver a message as the browser would (on this thread, like the kernel's shell handler)."""
        self.comms[widget.model_id].handle_msg({"content": {"data": data}, "buffers": []})

    def user_sets(self, widget: widgets.Widget, **state: Any) -> None:
        self.from_frontend(widget, {"method": "update", "state": state, "buffer_paths": []})

    def click(self, button: widgets.Button) -> None:
        self.from_frontend(button, {"method": "custom", "content": {"event": "click"}})


@pytest.fixture
def comms(monkeypatch: pytest.MonkeyPatch) -> CommRecorder:
    recorder = CommRecorder()
    monkeypatch.setattr(comm, "create_comm", recorder.create)
    return recorder


def on_the_main_shell(widget: Any) -> bool:
    """Whether ipykernel routes the widget's messages to the main shell, whichever subshell the browser names
    (see widgets.comms)."""
    return widget.comm._reply_subshell_for({"method": "update"}, "a-frontend-subshell") is None


@pytest.fixture
def demo(tmp_path):
    (tmp_path / "notes.txt").write_text("first line\nsecond line\n")
    # In memory: what these tests look at is the widgets, not the pipe (a demo process costs 0.5 s of CPU).
    agent = acpnb.start(DemoAgent(state_dir=tmp_path / "demo-state"), cwd=tmp_path)
    yield agent
    agent.close()


@pytest.fixture
def shown() -> Any:
    """What views display, as a notebook would get it: IPython's capturing publisher keeps every
    display and every update (``update=True``) with its display id."""
    globalipapp.start_ipython()  # once per process; later calls do nothing
    with capture_output() as captured:
        yield captured


def outputs_of(captured: Any, live: LiveDisplay) -> list[Any]:
    return [o for o in captured.outputs if (o.transient or {}).get("display_id") == live.display_id]


def set_requests(agent: acpnb.Agent) -> list[dict[str, Any]]:
    return [e["msg"]["params"] for e in agent.log
            if e["dir"] == "send" and e["msg"].get("method") == "session/set_config_option"]


def on_loop(fn: Callable[[], Any]) -> Any:
    """Run fn on the background loop thread, where agent updates are applied, and wait for it."""

    async def call() -> Any:
        return fn()

    return _loop.run_sync(call(), TIMEOUT)


def frontend_shows(comms: CommRecorder, widget: Any) -> list[str]:
    """What the frontend of a LiveParts section shows after each message the kernel sent it: the module's
    ``apply`` replayed in Python, offsets in UTF-16 units as in JavaScript. A message for another version than
    the one held fails the test (no frontend here asks for the whole list again)."""
    parts: list[list[str]] = []
    version, shown = 0, []
    for message in comms.to(widget):
        if message.msg_type == "comm_open":
            parts, version = [list(p) for p in message.state.get("parts", [])], message.state.get("v", 0)
            continue
        if message.msg_type != "comm_msg" or message.data.get("method") != "custom":
            continue
        sent = message.data["content"]
        if "full" in sent:
            parts = [list(p) for p in sent["full"]]
        else:
            assert sent["f"] == version, (sent["f"], version)
            for op in sent["o"]:
                keys = [key for key, _ in parts]
                if op[0] == "=":
                    units = parts[keys.index(op[1])][1].encode("utf-16-le", "surrogatepass")
                    new = units[:2 * op[2]] + op[4].encode("utf-16-le", "surrogatepass") + units[2 * op[3]:]
                    parts[keys.index(op[1])][1] = new.decode("utf-16-le", "surrogatepass")
                elif op[0] == "+":
                    parts.insert(len(parts) if op[3] is None else keys.index(op[3]), [op[1], op[2]])
                else:
                    del parts[keys.index(op[1])]
        version = sent["v"] if "full" in sent else sent["f"] + 1
        shown.append("".join(html for _, html in parts))
    return shown


def run_turn(session: acpnb.Session, prompt: str, *, ask: bool = False, **view_options: Any) -> TurnView:
    """Start a turn and follow it with a view; with ``ask``, the view's buttons answer permission requests."""
    asker = PermissionAsker() if ask else None
    return TurnView(session.start_turn(prompt, permission=asker), asker=asker, **view_options)


# --- the session panel ------------------------------------------------------------------
def test_panel_shows_header_and_one_control_per_option_in_the_agents_order(comms, demo):
    panel = SessionPanel(demo.new_session())
    assert panel.option_ids == ["model", "mode", "tone", "show_thoughts"]
    model = panel.control("model")
    assert isinstance(model, widgets.Dropdown) and model.description == "Model" and model.value == "fast"
    assert model.options == (("Everyday / Fast", "fast"), ("Deep thinking / Smart", "smart"))
    assert isinstance(panel.control("show_thoughts"), widgets.Checkbox)
    assert panel.control("tone").options == (("Plain", "plain"), ("Pirate", "pirate"))
    header = panel.header.value
    assert ">Demo agent<" in header  # no title yet: the agent's name
    assert f"acp-notebook-demo {demo.info['version']}" in header and "model: Fast" in header
    assert "acpnb-status-idle" in header
    # What the frontend got: the controls box lists exactly those widgets, in that order.
    (opened,) = [m for m in comms.to(panel.controls) if m.msg_type == "comm_open"]
    children = opened.state.get("children") or comms.updates_of(panel.controls, "children")[-1]
    assert children == [f"IPY_MODEL_{panel.control(i).model_id}" for i in panel.option_ids]
    assert all(on_the_main_shell(panel.control(i)) for i in panel.option_ids)


def test_unknown_option_types_are_left_out(comms, demo):
    session = demo.new_session()
    panel = SessionPanel(session)
    raw = [*session.state.raw_options, {"id": "temperature", "name": "Temperature", "type": "slider",
                                         "currentValue": 0.3}]
    on_loop(lambda: session.state.set_options(raw))
    assert panel.option_ids == ["model", "mode", "tone", "show_thoughts"]


def test_an_agent_update_re_renders_the_panel_and_sends_no_set_config_option(comms, demo):
    session = demo.new_session()
    panel = SessionPanel(session)
    session.set("model", "smart")  # from code: the panel follows the response
    assert panel.option_ids == ["model", "thought_level", "mode", "tone", "show_thoughts"]
    assert panel.control("model").value == "smart"
    assert len(set_requests(demo)) == 1

    # The agent pushes config_option_update on its own (a mid-turn fallback to the fast model):
    # the thought level vanishes and the model Dropdown moves back, without any request from us.
    turn = session.prompt("please fallback")
    assert "Falling back" in turn.text
    assert panel.option_ids == ["model", "mode", "tone", "show_thoughts"]
    assert panel.control("model").value == "fast"
    # The choices of an option change too: ipywidgets resets the value when options change.
    raw = copy.deepcopy(session.state.raw_options)
    tone = next(o for o in raw if o["id"] == "tone")
    tone["options"] = [{"value": "pirate", "name": "Pirate"}, {"value": "plain", "name": "Plain"}]
    on_loop(lambda: session.state.set_options(raw))
    assert panel.control("tone").options == (("Pirate", "pirate"), ("Plain", "plain"))
    assert panel.control("tone").value == "plain"

    assert len(set_requests(demo)) == 1, "an agent update was echoed back as set_config_option"
    # The frontend was told the new values.
    assert comms.updates_of(panel.control("model"), "index")[-1] == 0
    assert comms.updates_of(panel.control("tone"), "index")[-1] == 1


def test_a_user_change_sends_exactly_one_set_config_option_and_disables_the_control_meanwhile(comms, demo):
    session = demo.new_session()
    panel = SessionPanel(session)
    model = panel.control("model")
    comms.user_sets(model, index=1)  # the browser: "Deep thinking / Smart" picked
    assert panel.wait_idle(TIMEOUT)

    assert set_requests(demo) == [{"sessionId": session.id, "configId": "model", "value": "smart"}]
    assert session.model == "smart"
    assert panel.option_ids == ["model", "thought_level", "mode", "tone", "show_thoughts"]
    assert panel.control("thought_level").value == "medium"
    assert comms.updates_of(model, "disabled") == [True, False]
    assert not model.disabled and panel.error.value == ""
    assert "model: Smart" in panel.header.value

    comms.user_sets(panel.control("show_thoughts"), value=True)
    assert panel.wait_idle(TIMEOUT)
    assert set_requests(demo)[-1] == {"sessionId": session.id, "configId": "show_thoughts", "value": True,
                                      "type": "boolean"}
    assert len(set_requests(demo)) == 2


def test_a_refused_change_reverts_the_control_and_shows_the_error(comms, demo):
    session = demo.new_session()
    panel = SessionPanel(session)
    # Our copy of the options offers a tone the agent does not have (stale or buggy agent data).
    raw = copy.deepcopy(session.state.raw_options)
    next(o for o in raw if o["id"] == "tone")["options"].append({"value": "shouty", "name": "Shouty"})
    on_loop(lambda: session.state.set_options(raw))
    tone = panel.control("tone")
    comms.user_sets(tone, index=2)
    assert panel.wait_idle(TIMEOUT)

    assert len(set_requests(demo)) == 1  # the refused one; the revert sent nothing
    assert tone.value == "plain" and not tone.disabled
    assert "refused tone='shouty'" in panel.last_error
    assert "acpnb-error" in panel.error.value and "shouty" in panel.error.value
    assert session.config["tone"].value == "plain"


def test_the_panel_shows_working_while_a_turn_runs_and_the_live_title(comms, demo):
    session = demo.new_session()
    panel = SessionPanel(session)
    statuses: list[str] = []
    session.state.observe(lambda e: e.kind == "status" and statuses.append(panel.header.value))
    session.prompt("new topic: Bananas and apples")
    assert any("acpnb-status-working" in h for h in statuses)
    assert ">Bananas and apples<" in panel.header.value and "acpnb-status-idle" in panel.header.value
    demo.close()
    panel.render_header()
    assert "acpnb-status-closed" in panel.header.value


# --- the %%acp turn view ------------------------------------------------------------------
def test_the_reply_streams_as_markdown_and_each_cell_keeps_the_title_it_had(comms, demo):
    session = demo.new_session()
    panel = SessionPanel(session)
    first = run_turn(session, "hello world")
    turn = first.finished.result(TIMEOUT)
    # The reply as Markdown rendered (in blocks: a finished one is sent once), what the frontend holds.
    assert first.reply.value.startswith("<p>") and escape(turn.text.split('"')[0]) in first.reply.value
    assert frontend_shows(comms, first.reply)[-1] == first.reply.value
    assert ">Hello world<" in first.header.value and "acpnb-status-done" in first.header.value
    assert first.cancel_button.layout.display == "none"

    second = run_turn(session, "new topic: Bananas and apples")
    second.finished.result(TIMEOUT)
    assert ">Hello world<" in first.header.value  # frozen at the end of its own turn
    assert ">Bananas and apples<" in second.header.value
    assert ">Bananas and apples<" in panel.header.value  # the panel shows the live title


def test_thoughts_are_collapsed_and_usage_and_cost_are_shown(comms, demo):
    session = demo.new_session()
    session.set("model", "smart")
    view = run_turn(session, "think about it")
    view.finished.result(TIMEOUT)
    assert view.thoughts.layout.display == "" and view.thoughts.selected_index is None
    assert view.thoughts.titles == ("Thoughts",)
    assert "Thought 1 of 2" in view.thoughts_text.value
    assert "model: Smart" in view.header.value
    assert "tokens" in view.footer.value and "$0.0" in view.footer.value


def test_tool_calls_show_kind_status_and_diff_and_the_plan_is_a_checklist(comms, demo, tmp_path):
    session = demo.new_session()
    session.permission = "allow"
    view = run_turn(session, "write hello there to out.txt")
    turn = view.finished.result(TIMEOUT)
    assert (tmp_path / "out.txt").read_text() == "hello there"
    assert "Write out.txt" in view.tools.value and "acpnb-tool-kind" in view.tools.value
    assert ">edit<" in view.tools.value and ">completed<" in view.tools.value
    assert "acpnb-diff" in view.tools.value and "+hello there" in view.tools.value
    assert view.plan.value.count("acpnb-plan-completed") == 3 and "&#9745;" in view.plan.value
    assert escape(turn.text.split("\n")[0]) in view.reply.value
    for section in (view.tools, view.reply, view.header):
        assert frontend_shows(comms, section)[-1] == section.value
    from tests.test_widgets_plan import plan_shows  # the plan's frontend holds rows, not HTML parts
    assert plan_shows(comms, view.plan)[-1] == [[e["status"], e["content"]] for e in turn.plan]


def test_permission_buttons_resolve_the_agents_request(comms, demo):
    session = demo.new_session()
    view = run_turn(session, "read notes.txt", ask=True)
    comms.wait_for(lambda: view.permissions.children)
    (prompt_box,) = view.permissions.children
    buttons = [w for w in prompt_box.children[1].children if isinstance(w, widgets.Button)]
    assert [b.description for b in buttons] == ["Allow once", "Reject"]
    assert [b.button_style for b in buttons] == ["success", "danger"]
    assert all(on_the_main_shell(b) for b in buttons)
    assert view.status == "waiting"
    # Saved while it waits, the cell says what the agent asked and that nobody answered yet.
    waiting = turn_forms(view.snapshot())
    assert "Waiting for an answer: Allow once | Reject" in waiting["text/html"]
    assert "The agent asks permission: Read notes.txt (waiting for your answer)" in waiting["text/plain"]

    comms.click(buttons[0])
    turn = view.finished.result(TIMEOUT)
    assert "Read notes.txt: 2 lines." in turn.text
    assert [p.chosen for p in turn.permissions] == ["allow_once"]
    assert all(b.disabled for b in buttons)
    assert "You chose: Allow once." in view.tools.value


def test_the_cancel_button_ends_the_turn_and_withdraws_a_pending_prompt(comms, tmp_path):
    agent = acpnb.start("demo", cwd=tmp_path, env={"ACP_DEMO_DELAY": "0.3"})
    try:
        session = agent.new_session()
        view = run_turn(session, "tell me a long story about the sea and the stars")
        comms.wait_for(lambda: view.reply.value)  # the first chunk is on screen
        comms.click(view.cancel_button)
        turn = view.finished.result(TIMEOUT)
        assert turn.stop_reason == "cancelled" and view.status == "cancelled"
        assert "acpnb-status-cancelled" in view.header.value
        assert view.cancel_button.layout.display == "none"
        assert any(e["msg"].get("method") == "session/cancel" for e in agent.log)

        (tmp_path / "notes.txt").write_text("x\n")
        asking = run_turn(session, "read notes.txt", ask=True)
        comms.wait_for(lambda: asking.permissions.children)
        buttons = [w for w in asking.permissions.children[0].children[1].children]
        comms.click(asking.cancel_button)
        assert asking.finished.result(TIMEOUT).stop_reason == "cancelled"
        assert "Withdrawn: the turn was cancelled." in asking.permissions.children[0].children[2].value
        assert all(b.disabled for b in buttons)
    finally:
        agent.close()


def test_an_unanswered_permission_prompt_falls_back_after_its_timeout(comms):
    prompt = PermissionPrompt({"toolCallId": "c1", "title": "Read x"},
                              [{"optionId": "ok", "name": "Allow once", "kind": "allow_once"},
                               {"optionId": "no", "name": "Reject", "kind": "reject_once"}],
                              timeout=0.05, fallback="no")
    assert prompt.future.result(TIMEOUT) == "no"
    assert prompt.decision == "No answer within 0.05 s: Reject."


FLOOD_AGENT = textwrap.dedent('''
    """A test agent that answers every prompt with CHUNKS message chunks, as fast as it can."""
    import asyncio, sys
    import acp
    from acp.helpers import update_agent_message_text

    CHUNKS = int(sys.argv[1])

    class Flood:
        def on_connect(self, conn):
            self.conn = conn

        async def initialize(self, protocol_version, **kwargs):
            return {"protocolVersion": acp.PROTOCOL_VERSION, "agentCapabilities": {},
                    "agentInfo": {"name": "flood", "version": "1"}}

        async def new_session(self, cwd, **kwargs):
            return {"sessionId": "flood-1"}

        async def prompt(self, session_id, prompt, **kwargs):
            for i in range(CHUNKS):
                await self.conn.session_update(session_id=session_id, update=update_agent_message_text(f"w{i} "))
            return {"stopReason": "end_turn"}

        async def cancel(self, session_id, **kwargs):
            pass

    asyncio.run(acp.run_agent(Flood()))
''')


@pytest.mark.slow
def test_a_flood_of_chunks_is_coalesced_into_a_few_widget_messages(comms, tmp_path):
    script = tmp_path / "flood_agent.py"
    script.write_text(FLOOD_AGENT)
    chunks = 3000
    agent = acpnb.start([sys.executable, str(script), str(chunks)], cwd=tmp_path)
    try:
        session = agent.new_session()
        interval = 0.1
        view = run_turn(session, "go", interval=interval)
        turn = view.finished.result(60)
        assert len(turn.updates) == chunks
        sent = [m for m in comms.sent if m.msg_type == "comm_msg"]
        reply_updates = frontend_shows(comms, view.reply)
        allowed_renders = turn.duration_s / interval + 3
        assert view.renders <= allowed_renders, (view.renders, turn.duration_s)
        assert len(reply_updates) <= allowed_renders
        # Every widget of the view together: a handful of messages per render, not one per chunk.
        assert len(sent) <= 6 * allowed_renders, (len(sent), turn.duration_s)
        assert reply_updates[-1] == view.reply.value
        # Each word once, in order (a reply of one paragraph this long shows in pieces while it streams).
        assert re.findall(r"w\d+", view.reply.value) == turn.text.split()
        assert turn.text.startswith("w0 w1 ") and turn.text.endswith(f"w{chunks - 1} ")
    finally:
        agent.close()


# --- an agent with the old fields -----------------------------------------------------
def test_an_old_agent_with_modes_and_models_only(comms, tmp_path):
    """No configOptions: the mode is settable through session/set_mode, the model shown read-only."""
    agent = acpnb.start([sys.executable, "-m", "acp_notebook.demo", "--legacy"], cwd=tmp_path)
    try:
        session = agent.new_session()
        panel = SessionPanel(session)
        assert panel.option_ids == ["mode", "model"]
        assert panel.control("model").disabled and not panel.control("mode").disabled
        comms.user_sets(panel.control("mode"), index=1)
        assert panel.wait_idle(TIMEOUT)
        sent = [e["msg"] for e in agent.log if e["dir"] == "send" and "id" in e["msg"]]
        assert [m["method"] for m in sent][-1] == "session/set_mode"
        assert session.config["mode"].value == "code" and panel.control("mode").value == "code"
        assert not set_requests(agent)
    finally:
        agent.close()


# --- turns you can follow -----------------------------------------------------------------
@pytest.mark.slow
def test_the_header_runs_a_clock_and_the_latest_thought_shows_while_thinking(comms, tmp_path):
    agent = acpnb.start("demo", cwd=tmp_path, env={"ACP_DEMO_DELAY": "0.3"})
    try:
        session = agent.new_session()
        session.set("model", "smart")
        view = run_turn(session, "tell me about the tides and the moon and the sea")
        comms.wait_for(lambda: any("Thinking:" in v for v in comms.updates_of(view.latest_thought, "value")))
        # The clock ticks in the browser from the turn's start: the header the frontend holds names that start.
        comms.wait_for(lambda: any(f'data-acpnb-since="{view.turn.wall_started_at:.3f}"' in v
                                   and "acpnb-status-working" in v for v in frontend_shows(comms, view.header)))
        view.finished.result(60)
        thoughts = [v for v in comms.updates_of(view.latest_thought, "value") if v]
        # The latest thought replaces the one before; renders are throttled, so on a loaded machine the first may be
        # drawn over before it is sent: whatever was shown, in order, ends with the second.
        shown = [1 if "<i>Thought 1 of 2: " in t else 2 if "<i>Thought 2 of 2: " in t else 0 for t in thoughts]
        assert shown[-1] == 2 and 0 not in shown and shown == sorted(shown)
        assert view.latest_thought.value == ""  # the turn is over: the full thoughts are folded below
        assert "line-height:1.5" in view.thoughts_text.box_style and "monospace" not in view.thoughts_text.box_style
        assert "Thought 2 of 2: " in view.thoughts_text.value
        header = view.header.value
        assert "acpnb-status-done" in header and f">{view.turn.duration_s:.1f} s<" in header
        assert "data-acpnb-since" not in header  # stopped: the final time, patched in once
    finally:
        agent.close()


def test_tool_calls_show_their_progress_as_they_change(comms, demo):
    session = demo.new_session()
    view = run_turn(session, "read notes.txt", ask=True)
    comms.wait_for(lambda: view.permissions.children)
    comms.wait_for(lambda: "acpnb-tool-time" in view.tools.value)  # waiting: pending, with a running clock
    assert ">pending<" in view.tools.value and "Read notes.txt" in view.tools.value
    # The clock ticks in the browser from when the call was first seen: the card the frontend holds names that time,
    # so it is not sent again each second; the saved form has it stopped (no attribute left to tick).
    since = re.search(r'class="acpnb-tool-time" data-acpnb-since="([0-9.]+)">0 s<', view.tools.value)
    assert since and abs(float(since[1]) - time.time()) < TIMEOUT
    assert "clocksOf" in view.sections.tools._esm
    (saved,) = view.snapshot().tools
    assert "data-acpnb-since" not in saved.html and re.search(r'class="acpnb-tool-time"[^>]*>\d+ s<', saved.html)
    comms.click(view.permissions.children[0].children[1].children[0])  # Allow once
    view.finished.result(TIMEOUT)
    shown = frontend_shows(comms, view.tools)
    statuses = [status for status in ("pending", "in progress", "completed") if any(f">{status}<" in v for v in shown)]
    assert statuses[0] == "pending" and statuses[-1] == "completed"
    assert "permission: You chose: Allow once." in view.tools.value


def test_a_saved_form_stops_each_running_clock_at_the_time_it_was_taken():
    from acp_notebook.widgets.turn_sections import stopped_clocks, tool_ticking

    card = tool_ticking('<div><span class="acpnb-tool-time">0 s</span><b>x</b></div>', 1000.0)
    header = '<span class="acpnb-extra" data-acpnb-since="900.000" title="t">0 s</span>'
    assert stopped_clocks(card + header, now=1065.5) == (
        '<div><span class="acpnb-tool-time">1 min 05 s</span><b>x</b></div>'
        '<span class="acpnb-extra" title="t">2 min 45 s</span>')
    assert stopped_clocks("<p>no clock, 3 s</p>", now=5.0) == "<p>no clock, 3 s</p>"


def test_permission_requests_made_before_the_view_exists_are_shown_when_it_attaches(comms):
    asker = PermissionAsker()
    request = acpnb.PermissionRequest(None, {"toolCallId": "c1", "title": "Read x"},  # type: ignore[arg-type]
                                      [{"optionId": "ok", "name": "Allow once", "kind": "allow_once"},
                                       {"optionId": "no", "name": "Reject", "kind": "reject_once"}], {})
    future = asker(request)
    shown: list[PermissionPrompt] = []

    class View:
        def add_prompt(self, prompt: PermissionPrompt) -> None:
            shown.append(prompt)

    asker.attach(View())
    (prompt,) = shown
    prompt.choose("ok")
    assert future.result(TIMEOUT) == "ok"
    assert "You chose: Allow once." in prompt.static_html()


# --- outputs that stay true: display ids and static forms ----------------------------------
def test_a_turn_is_shown_live_and_ends_as_its_static_form(comms, demo, shown):
    session = demo.new_session()
    view = run_turn(session, "new topic: Owls in winter")
    view_model = view.widget.model_id
    view.show()
    turn = view.finished.result(TIMEOUT)
    # `finished` may come from its backstop timer before the render thread (held up on a loaded machine) has
    # sent the static form and closed the widgets: both follow.
    comms.wait_for(lambda: any(m.msg_type == "comm_close" for m in comms.sent if m.comm_id == view_model))
    final = outputs_of(shown, view.live)[-1]
    assert "application/vnd.jupyter.widget-view+json" not in final.data
    assert turn.text in final.data["text/plain"] and turn.text in final.data["text/markdown"]
    html = final.data["text/html"]
    assert 'class="acpnb-turn acpnb-static"' in html and ">Owls in winter<" in html and "acpnb-status-done" in html
    assert "<p>" in html and turn.text.split('"')[0] in html  # the reply as rendered Markdown
    # Static from here on: the widgets are closed, so no kernel and no saved widget state needs them.
    assert any(m.msg_type == "comm_close" for m in comms.sent if m.comm_id == view_model)
    assert view.live.final and view.live not in open_displays()


def test_a_view_shown_while_its_turn_ends_still_closes_its_widgets(comms, demo, shown, monkeypatch):
    # The render thread ends the turn just as the cell shows the view: it found the view not shown, and show()
    # found the output not final yet. Seen once under load in CI (widgets left open, the saved output live).
    finalizing, shown_now = threading.Event(), threading.Event()
    finalize = LiveDisplay.finalize

    def after_the_show(display: LiveDisplay, *args: Any, **kwargs: Any) -> bool:
        finalizing.set()
        assert shown_now.wait(TIMEOUT)
        return finalize(display, *args, **kwargs)

    monkeypatch.setattr(LiveDisplay, "finalize", after_the_show)
    view = run_turn(demo.new_session(), "new topic: Owls in winter")
    view_model = view.widget.model_id
    assert finalizing.wait(TIMEOUT)  # the render thread is ending the turn and has looked at `shown`
    view.show()
    shown_now.set()
    view.finished.result(TIMEOUT)
    comms.wait_for(lambda: any(m.msg_type == "comm_close" for m in comms.sent if m.comm_id == view_model))
    assert view.live.final and "application/vnd.jupyter.widget-view+json" not in outputs_of(shown, view.live)[-1].data


def test_a_request_reaches_the_saved_output_before_its_buttons_and_nothing_is_republished_while_it_waits(
        comms, tmp_path, shown, monkeypatch):
    # JupyterLab builds a widget's view anew on every update of its output; one landing while the person clicks
    # or types loses the input. So the output takes the request before the buttons exist, then stays put.
    agent = acpnb.start("demo", cwd=tmp_path, env={"ACP_DEMO_DELAY": "0.3"})
    try:
        view = run_turn(agent.new_session(), "tell me a long story about the sea and the stars")
        view.show()
        comms.wait_for(lambda: view.reply.value)
        saved_when_shown: list[str] = []
        record, permissions = comms.record, view.permissions.model_id

        def recording(message: Sent) -> None:
            if message.msg_type == "comm_msg" and message.comm_id == permissions and message.state.get("children"):
                saved_when_shown.append(outputs_of(shown, view.live)[-1].data["text/plain"])
            record(message)

        monkeypatch.setattr(comms, "record", recording)
        prompt = PermissionPrompt({"toolCallId": "c9", "title": "Read secrets.txt"},
                                  [{"optionId": "ok", "name": "Allow once", "kind": "allow_once"},
                                   {"optionId": "no", "name": "Reject", "kind": "reject_once"}])
        on_loop(lambda: view.add_prompt(prompt))
        assert len(saved_when_shown) == 1
        assert "The agent asks permission: Read secrets.txt (waiting for your answer)" in saved_when_shown[0]
        published = view.live.published

        # The turn's structure changes while the request waits: the widgets follow, the output does not.
        on_loop(lambda: view.turn.apply({"sessionUpdate": "plan", "entries": [
            {"content": "Look for treasure", "priority": "high", "status": "in_progress"}]}))
        comms.wait_for(lambda: "Look for treasure" in view.plan.value)
        view.render()
        flush_all()
        assert view.live.published == published

        # Answered: the output catches up with the turn (the plan, and the answer).
        comms.click(prompt.widget.children[1].children[0])
        assert prompt.future.result(TIMEOUT) == "ok"
        view.render()
        flush_all()
        latest = outputs_of(shown, view.live)[-1].data
        assert view.live.published > published and "Look for treasure" in latest["text/html"]
        assert "waiting for your answer" not in latest["text/plain"]
        comms.click(view.cancel_button)
        view.finished.result(TIMEOUT)
    finally:
        agent.close()


def test_a_panel_output_follows_the_session_and_closes_static(comms, demo, shown):
    session = demo.new_session()
    panel = SessionPanel(session, metadata=lambda: {"acp_notebook": {"session": {"title": session.title}}})
    live = panel.show()
    session.set("model", "smart")
    flush_all()  # what the kernel does after each cell
    latest = outputs_of(shown, live)[-1]
    assert latest.update and "application/vnd.jupyter.widget-view+json" in latest.data
    assert "model: Smart" in latest.data["text/markdown"] and "Thought level: Medium" in latest.data["text/markdown"]
    sent = live.published
    flush_all()
    assert live.published == sent  # nothing changed, nothing sent (JupyterLab would rebuild the view)

    session.prompt("new topic: Herons")
    flush_all()
    latest = outputs_of(shown, live)[-1]  # a live output is marked so (see acp_notebook/saving.py)
    ours = latest.metadata["acp_notebook"]
    assert ours["session"] == {"title": "Herons"} and ours["live"]["pid"] > 0
    assert "closed" in ours["live"]["ended"]["text/plain"] and "the kernel stopped" in ours["live"]["ended"]["text/plain"]
    assert "· open · live in a running kernel" in latest.data["text/plain"]  # what a notebook saved now shows
    panel.close("closed with %acp stop")
    final = outputs_of(shown, live)[-1]
    assert final.metadata == {"acp_notebook": {"session": {"title": "Herons"}}}
    assert set(final.data) == {"text/html", "text/markdown", "text/plain"}
    assert final.data["text/markdown"].startswith("**Herons** · acp-notebook-demo")
    assert "closed" in final.data["text/plain"] and "closed with %acp stop" in final.data["text/plain"]
    assert "acpnb-status-closed" in final.data["text/html"] and ">Smart<" in final.data["text/html"]


def test_a_live_header_hides_the_broken_link_icons_once_the_kernel_is_gone(comms, demo):
    panel = SessionPanel(demo.new_session())
    header = panel.header.value
    assert "acpnb-offline" in header and ".jupyter-widgets-disconnected::before{display:none!important}" in header
    assert "acpnb-live" in panel.widget._dom_classes
    assert "acpnb-offline" not in panel.snapshot().header.status  # the saved form has no such badge


def test_the_session_table_follows_the_titles_of_open_sessions(comms, demo, shown):
    session = demo.new_session()
    table = SessionTable.build([{"sessionId": session.id, "title": ""}, {"sessionId": "elsewhere", "title": "Old"}],
                               {session.id: session}, session.id)
    table.show()
    session.prompt("new topic: Kingfishers")
    flush_all()
    latest = outputs_of(shown, table.live)[-1]
    assert "<td>Kingfishers</td>" in latest.data["text/html"] and "| Kingfishers |" in latest.data["text/markdown"]
    assert "<td>Old</td>" in latest.data["text/html"]
    table.close()
    assert table.live.final


# --- the agent's forms (elicitation) -------------------------------------------------------
def ask_form(session: acpnb.Session, prompt: str = "ask me about tea", **view_options: Any) -> TurnView:
    """Start a turn whose forms are drawn in its view (what AcpMagics.elicitation = 'ask' does)."""
    asker = FormAsker()
    return TurnView(session.start_turn(prompt, elicitation=asker), form_asker=asker, **view_options)


def shown_form(comms: CommRecorder, view: TurnView) -> FormPrompt:
    comms.wait_for(lambda: view.forms.children)
    (form,) = view._forms
    return form


def field(form: FormPrompt, name: str) -> Any:
    return next(f for f in form.fields if f.name == name)


def test_a_form_is_drawn_from_its_schema_and_submit_sends_the_answers(comms, demo):
    session = demo.new_session()
    view = ask_form(session)
    form = shown_form(comms, view)
    assert view.status == "waiting" and form.widget in view.forms.children
    name, colour, cups, notebooks = (field(form, n) for n in ("name", "colour", "cups", "notebooks"))
    assert isinstance(name.input, widgets.Text) and name.input.value == "" and name.required
    assert isinstance(colour.input, widgets.Dropdown) and colour.input.value == "green"  # the schema's default
    assert colour.input.options == (("red", "red"), ("green", "green"), ("blue", "blue"))
    assert isinstance(cups.input, widgets.Text) and cups.input.value == "2"
    assert cups.input.placeholder == "a number from 0 to 20"
    assert isinstance(notebooks.input, widgets.Checkbox) and notebooks.input.value is True
    assert notebooks.input.description == "Do you like notebooks?"
    # Typed text goes to the kernel as the field loses focus, so a click on Submit cannot overtake it.
    assert not name.input.continuous_update and not cups.input.continuous_update
    # ...and every field and button is handled on the main shell, in the order the browser sent them.
    assert all(on_the_main_shell(w) for w in (*(f.input for f in form.fields), form.submit_button,
                                               form.decline_button, form.cancel_button, view.cancel_button))
    label = name.box.children[0].value
    assert "Your name" in label and 'title="required"' in label
    assert 'title="required"' not in cups.box.children[0].value
    # Saved while it waits, the cell says what the agent asks.
    waiting = turn_forms(view.snapshot())
    assert ("The agent asks: A few questions from the demo agent (waiting for an answer: Your name*, "
            "Favourite colour*, Cups of tea a day, Do you like notebooks?)") in waiting["text/plain"]

    # What the browser sends when the person types and picks.
    comms.user_sets(name.input, value="Ada")
    comms.user_sets(colour.input, index=2)
    comms.user_sets(cups.input, value="3")
    comms.click(form.submit_button)
    turn = view.finished.result(TIMEOUT)
    assert "Thank you, Ada! Favourite colour: blue. 3 cups of tea a day. You like notebooks." in turn.text
    (record,) = turn.elicitations
    assert record.action == "accept" and record.content == {"name": "Ada", "colour": "blue", "cups": 3,
                                                            "notebooks": True}
    assert all(b.disabled for b in (form.submit_button, form.decline_button, form.cancel_button))
    assert all(f.input.disabled for f in form.fields)
    said = ("You answered: Your name: Ada; Favourite colour: blue; Cups of tea a day: 3; "
            "Do you like notebooks?: yes.")
    assert said in form.outcome.value
    final = turn_forms(view.snapshot())
    assert f"The agent asked: A few questions from the demo agent. {said}" in final["text/plain"]
    assert f"*The agent asked: A few questions from the demo agent. {said}*" in final["text/markdown"]
    html = final["text/html"]
    assert 'class="acpnb-form acpnb-static"' in html and "<b>The agent asked:</b>" in html
    assert ">Your name*</td>" in html and ">Ada</td>" in html and ">blue</td>" in html and ">yes</td>" in html


def test_answers_that_break_the_schema_say_why_next_to_the_field_and_are_not_sent(comms, demo):
    session = demo.new_session()
    view = ask_form(session)
    form = shown_form(comms, view)
    name, cups = field(form, "name"), field(form, "cups")
    comms.user_sets(cups.input, value="25")
    comms.click(form.submit_button)
    assert "required" in name.error.value and "acpnb-form-error" in name.error.value
    assert "out of range (maximum 20)" in cups.error.value
    assert "2 fields to fix; nothing was sent" in form.problem.value
    comms.user_sets(cups.input, value="lots")
    comms.user_sets(name.input, value="Ada")
    comms.click(form.submit_button)
    assert name.error.value == "" and "expected a number" in cups.error.value
    assert not form.future.done() and not view.turn.elicitations  # the agent has heard nothing yet
    assert not any(e["dir"] == "send" and e["msg"].get("result", {}).get("action") for e in demo.log)

    comms.click(form.decline_button)
    turn = view.finished.result(TIMEOUT)
    assert "No problem, I will not ask." in turn.text
    assert [r.action for r in turn.elicitations] == ["decline"]
    assert "You declined." in form.outcome.value and form.submit_button.disabled


def test_a_form_still_open_when_the_turn_ends_is_withdrawn_and_disabled(comms, demo):
    session = demo.new_session()
    view = ask_form(session)
    form = shown_form(comms, view)
    comms.click(view.cancel_button)
    turn = view.finished.result(TIMEOUT)
    assert turn.stop_reason == "cancelled"
    assert form.future.result(TIMEOUT) is None  # the client tells the agent "cancel"
    assert "Withdrawn: the turn ended before an answer." in form.outcome.value
    assert all(f.input.disabled for f in form.fields) and form.submit_button.disabled
    assert "Withdrawn" in turn_forms(view.snapshot())["text/plain"]


WIDE_FORM = {
    "type": "object", "title": "Trip", "required": ["nights", "when"],
    "properties": {
        "nights": {"type": "integer", "title": "Nights", "minimum": 1, "maximum": 14, "description": "how long"},
        "budget": {"type": "number", "minimum": 0, "maximum": 1000000, "default": 2500.5},
        "when": {"type": "string", "format": "date"},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "room": {"type": "string", "oneOf": [{"const": "s", "title": "Single"}, {"const": "d", "title": "Double"}]},
        "extras": {"type": "array", "maxItems": 2,
                   "items": {"anyOf": [{"const": "b", "title": "Breakfast"}, {"const": "p", "title": "Parking"},
                                       {"const": "w", "title": "Wifi"}]}},
        "pet": {"type": "boolean"},
        "mood": {"type": "_colour_wheel"},
    },
}


def test_each_kind_of_field_has_its_input_and_its_rules(comms):
    form = FormPrompt(acpnb.elicitation.ElicitationRequest(None, "Plan a trip", WIDE_FORM, {}))
    kinds = {f.name: (type(f.input).__name__ if f.input is not None else None) for f in form.fields}
    assert kinds == {"nights": "Text", "budget": "Text", "when": "Text", "code": "Text", "room": "Dropdown",
                     "extras": "SelectMultiple", "pet": "Checkbox", "mood": None}
    nights, budget, when, code, room, extras, pet, mood = form.fields
    assert nights.input.placeholder == "a whole number from 1 to 14" and budget.input.placeholder == "a number from 0 to 1000000"
    assert budget.input.value == "2500.5"
    assert when.input.placeholder == "YYYY-MM-DD"
    assert any("how long" in getattr(w, "value", "") for w in nights.box.children)
    assert room.input.options == (("(no answer)", None), ("Single", "s"), ("Double", "d"))
    assert extras.input.options == (("Breakfast", "b"), ("Parking", "p"), ("Wifi", "w"))
    assert pet.input.value is False
    assert "cannot show" in mood.box.children[1].value  # named, never drawn as a known control

    nights.input.value, when.input.value, code.input.value, budget.input.value = "2.5", "next week", "abcd", "nan"
    extras.input.value = ("b", "p", "w")
    assert not form.submit()
    assert "expected a whole number" in nights.error.value and "expected YYYY-MM-DD" in when.error.value
    assert "does not match the pattern ^[A-Z]{3}$" in code.error.value and "pick at most 2" in extras.error.value
    assert "expected a number" in budget.error.value  # JSON has no NaN
    assert "5 fields to fix" in form.problem.value

    nights.input.value, when.input.value, code.input.value, budget.input.value = "3", "2026-05-01", "LHR", ""
    extras.input.value, room.input.value = ("b", "w"), "d"
    assert form.submit()
    assert form.future.result(TIMEOUT) == {"nights": 3, "when": "2026-05-01", "code": "LHR", "room": "d",
                                           "extras": ["b", "w"], "pet": False}
    # Fields without a title are named by their property.
    assert ("You answered: Nights: 3; when: 2026-05-01; code: LHR; room: Double; extras: Breakfast, Wifi; "
            "pet: no.") in form.outcome.value


def test_a_form_nobody_answers_is_declined_after_its_timeout(comms):
    form = FormPrompt(acpnb.elicitation.ElicitationRequest(None, "Quick?", WIDE_FORM, {}), timeout=0.05)
    assert form.future.result(TIMEOUT) == "decline"
    assert "No answer within 0.05 s: declined." in form.outcome.value


def test_a_policy_that_answers_without_asking_is_said_in_the_turn(comms, demo):
    session = demo.new_session()
    turn = session.start_turn("ask me", elicitation={"name": "Bo", "colour": "red"})
    view = TurnView(turn, elicitation_note="AcpMagics.elicitation = {...}")
    view.finished.result(TIMEOUT)
    assert "Thank you, Bo! Favourite colour: red." in turn.text
    said = ("The agent asked: A few questions from the demo agent. Answered: Your name: Bo; Favourite colour: red "
            "automatically by AcpMagics.elicitation = {...}.")
    assert said in view.forms.children[0].value and said in turn_forms(view.snapshot())["text/plain"]

    refused = TurnView(session.start_turn("ask me", elicitation={"colour": "red"}), elicitation_note="a dict")
    refused.finished.result(TIMEOUT)
    assert ("Declined (answers not sent (required: name)) automatically by a dict."
            in turn_forms(refused.snapshot())["text/plain"])


# --- records made before the view subscribed (the quickstart's race) -------------------------
def test_a_permission_and_a_form_answered_before_the_view_exists_are_shown(comms, demo):
    session = demo.new_session()
    allow: concurrent.futures.Future[str] = concurrent.futures.Future()  # the policy answers when we say
    turn = session.start_turn("read notes.txt", permission=lambda request: allow)
    recorded = threading.Event()
    turn.observe(lambda event: event.kind == "permission" and recorded.set())
    allow.set_result("allow")
    assert recorded.wait(TIMEOUT)  # answered and recorded: a view made now has missed the event
    view = TurnView(turn, permission_note="a policy")
    view.finished.result(TIMEOUT)
    assert "permission: allowed automatically (a policy)" in view.tools.value
    assert view.tools.value.count("permission:") == 1  # noted once, though the event may also have reached it

    done = session.start_turn("ask me", elicitation="decline")
    done.future.result(TIMEOUT)  # the whole turn is over before its view exists
    late = TurnView(done, elicitation_note="AcpMagics.elicitation = 'decline'")
    assert len(late.forms.children) == 1 and "acpnb-form-auto" in late.forms.children[0].value
    assert ("The agent asked: A few questions from the demo agent. Declined automatically by "
            "AcpMagics.elicitation = 'decline'.") in turn_forms(late.snapshot())["text/plain"]


# --- usage and titles -----------------------------------------------------------------------------
def test_the_context_meter_follows_usage_in_the_panel_and_the_turn(comms, demo, shown):
    session = demo.new_session()
    panel = SessionPanel(session)
    live = panel.show()
    assert panel.footer.value == ""  # no usage_update yet
    view = run_turn(session, "hello there")
    turn = view.finished.result(TIMEOUT)
    used, size = session.usage["used"], session.usage["size"]
    words = f"context {used:,} of {size:,} tokens ({used / size:.0%})"
    for footer in (panel.footer.value, view.footer.value):
        assert "acpnb-context-bar" in footer and words in footer and "session cost " in footer
    assert words in turn_forms(view.snapshot())["text/plain"]
    flush_all()
    saved = outputs_of(shown, live)[-1].data
    assert words in saved["text/plain"] and words in saved["text/markdown"] and "acpnb-context-bar" in saved["text/html"]
    assert turn.usage["used"] == used

    before = used
    run_turn(session, "and again, a longer prompt this time").finished.result(TIMEOUT)
    assert session.usage["used"] > before
    assert f"context {session.usage['used']:,} of" in panel.footer.value  # kept current


@pytest.mark.slow
def test_a_title_from_the_first_prompt_is_marked_until_the_agent_names_the_session(comms, demo, tmp_path):
    session = demo.new_session()
    panel = SessionPanel(session)
    run_turn(session, "new topic: Herons at dusk").finished.result(TIMEOUT)
    headers = comms.updates_of(panel.header, "value")
    prompt_titled = [h for h in headers if 'data-title-source="prompt"' in h]
    assert prompt_titled and ">new topic: Herons at dusk<" in prompt_titled[0]
    assert 'title="from the first prompt; the agent has not titled this session"' in prompt_titled[0]
    assert "font-style:italic" in prompt_titled[0]
    assert ">Herons at dusk<" in panel.header.value and "data-title-source" not in panel.header.value

    # An agent that never titles its sessions: the prompt's title stays, marked, in every form.
    script = tmp_path / "flood_agent.py"
    script.write_text(FLOOD_AGENT)
    quiet = acpnb.start([sys.executable, str(script), "3"], cwd=tmp_path)
    try:
        untitled = quiet.new_session()
        view = run_turn(untitled, "Count the herons\nsecond line")
        view.finished.result(TIMEOUT)
        assert 'data-title-source="prompt"' in view.header.value and ">Count the herons<" in view.header.value
        forms = turn_forms(view.snapshot())
        assert forms["text/plain"].startswith("Count the herons (from the first prompt) · ")
        assert forms["text/markdown"].startswith("**_Count the herons_** (from the first prompt) · ")
        table = SessionTable.build([{"sessionId": untitled.id}], {untitled.id: untitled}, untitled.id)
        assert ('<i data-title-source="prompt" title="from the first prompt; the agent has not titled this session">'
                "Count the herons</i>") in table._repr_html_()
        assert "Count the herons (from the first prompt)" in repr(table)
    finally:
        quiet.close()
