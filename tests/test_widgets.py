"""The widgets headless, against the real demo agent, with a comm that records every message sent.

What the frontend would see is what the recording comm saw: comm_open and update messages
per widget. User actions are simulated the way the browser sends them: a comm message to
the widget's comm (``update`` with the new ``index`` for a Dropdown, ``custom`` click
events for Buttons).
"""

from __future__ import annotations

import copy
import sys
import textwrap
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import comm
import ipywidgets as widgets
import pytest
from comm.base_comm import BaseComm

import acp_notebook as acpnb
from acp_notebook import _loop
from acp_notebook.widgets.chat import TurnView
from acp_notebook.widgets.inspector import ALL_METHODS, ProtocolInspector, frames_html, summarize_frames
from acp_notebook.widgets.panel import SessionPanel
from acp_notebook.widgets.permission import PermissionPrompt

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


@pytest.fixture
def demo(tmp_path):
    (tmp_path / "notes.txt").write_text("first line\nsecond line\n")
    agent = acpnb.start("demo", cwd=tmp_path)
    yield agent
    agent.close()


def set_requests(agent: acpnb.Agent) -> list[dict[str, Any]]:
    return [e["msg"]["params"] for e in agent.log
            if e["dir"] == "send" and e["msg"].get("method") == "session/set_config_option"]


def on_loop(fn: Callable[[], Any]) -> Any:
    """Run fn on the background loop thread, where agent updates are applied, and wait for it."""

    async def call() -> Any:
        return fn()

    return _loop.run_sync(call(), TIMEOUT)


def run_turn(session: acpnb.Session, prompt: str, *, ask: bool = False, **view_options: Any) -> TurnView:
    """Show a view and start its turn; with ``ask``, the view's buttons answer permission requests."""
    view = TurnView(session, prompt, **view_options)
    if ask:
        session.permission = view.ask_permission
    view.arm()
    view.attach(session.start_prompt(prompt))
    return view


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
    assert first.reply.outputs == ({"output_type": "display_data", "metadata": {},
                                    "data": {"text/markdown": turn.text, "text/plain": turn.text}},)
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
    assert turn.text in view.reply.outputs[0]["data"]["text/markdown"]


def test_permission_buttons_resolve_the_agents_request(comms, demo):
    session = demo.new_session()
    view = run_turn(session, "read notes.txt", ask=True)
    comms.wait_for(lambda: view.permissions.children)
    (prompt_box,) = view.permissions.children
    buttons = [w for w in prompt_box.children[1].children if isinstance(w, widgets.Button)]
    assert [b.description for b in buttons] == ["Allow once", "Reject"]
    assert [b.button_style for b in buttons] == ["success", "danger"]
    assert "acpnb-status-waiting" in view.header.value or view.status == "waiting"

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
        comms.wait_for(lambda: view.reply.outputs)  # the first chunk is on screen
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
        reply_updates = comms.updates_of(view.reply, "outputs")
        allowed_renders = turn.duration_s / interval + 3
        assert view.renders <= allowed_renders, (view.renders, turn.duration_s)
        assert len(reply_updates) <= allowed_renders
        # Every widget of the view together: a handful of messages per render, not one per chunk.
        assert len(sent) <= 6 * allowed_renders, (len(sent), turn.duration_s)
        assert reply_updates[-1][0]["data"]["text/markdown"] == turn.text
        assert turn.text.startswith("w0 w1 ") and turn.text.endswith(f"w{chunks - 1} ")
    finally:
        agent.close()


# --- the protocol inspector --------------------------------------------------------------
def test_frames_are_summarized_with_direction_method_and_session(demo):
    session = demo.new_session()
    session.set("model", "smart")
    session.prompt("hello")
    frames = summarize_frames(demo.log)
    first = frames[0]
    assert (first.direction, first.kind, first.method) == ("send", "request", "initialize")
    answer = next(f for f in frames if f.kind == "result" and f.method == "session/set_config_option")
    assert answer.direction == "recv" and answer.session_id == session.id and answer.detail == "5 options"
    request = next(f for f in frames if f.kind == "request" and f.method == "session/set_config_option")
    assert request.detail == "model='smart'"
    chunks = [f for f in frames if f.method == "session/update" and "agent_message_chunk" in f.detail]
    assert chunks and all(f.kind == "notification" and f.session_id == session.id for f in chunks)
    assert any(f.detail == "stopReason=end_turn" for f in frames)
    html = frames_html(frames[:3])
    assert html.count("<details") == 3 and "&quot;initialize&quot;" in html and "3 frames" in html


def test_the_inspector_filters_by_method_shows_json_on_demand_and_follows_new_frames(comms, demo):
    session = demo.new_session()
    inspector = ProtocolInspector(demo, interval=0.05)
    assert inspector.method.value == ALL_METHODS
    assert len(inspector.frames.options) == len(demo.log)
    assert "session/new" in inspector.method.options

    comms.user_sets(inspector.method, index=list(inspector.method.options).index("session/new"))
    assert {f.method for f in inspector.visible()} == {"session/new"}
    assert len(inspector.frames.options) == 2  # the request and its result

    # Pick the request: its JSON shows, and following the newest frame stops.
    request_index = inspector.frames.options[0][1]
    comms.user_sets(inspector.frames, index=0)
    assert inspector.frames.value == request_index and inspector.follow.value is False
    assert "&quot;method&quot;: &quot;session/new&quot;" in inspector.detail.value

    # New frames arrive live (on the loop thread); the filter still applies.
    comms.user_sets(inspector.method, index=0)
    comms.user_sets(inspector.follow, value=True)
    before = len(demo.log)
    session.prompt("hello")
    comms.wait_for(lambda: len(inspector.frames.options) >= len(demo.log) > before)
    assert inspector.frames.value == inspector.frames.options[-1][1]
    assert "stopReason" in inspector.detail.value or "session/update" in inspector.detail.value
    inspector.close()


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
