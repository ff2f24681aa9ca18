"""The protocol inspector widget, headless, over the real demo agent: table, filters, following, the saved form."""

from __future__ import annotations

import re

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from IPython.display import display
from IPython.testing import globalipapp
from IPython.utils.capture import capture_output

import acp_notebook as acpnb
from acp_notebook.demo import DemoAgent
from acp_notebook import _schema
from acp_notebook.frames import analyze
from acp_notebook.widgets.inspector import ProtocolInspector

TIMEOUT = 15.0


@pytest.fixture
def demo(tmp_path) -> Iterator[acpnb.Agent]:
    (tmp_path / "notes.txt").write_text("first line\nsecond line\n")
    # In memory: the inspector reads the frame log, which an in-memory agent writes the same way.
    agent = acpnb.start(DemoAgent(state_dir=tmp_path / "demo-state"), cwd=tmp_path)
    yield agent
    agent.close()


class Watch:
    """Waits for a condition on the inspector, re-checked whenever its table or status is redrawn."""

    def __init__(self, inspector: ProtocolInspector) -> None:
        self.changed = threading.Condition()
        for widget in (inspector.table, inspector.status):
            widget.observe(self._notify, names="value")

    def _notify(self, _change: Any) -> None:
        with self.changed:
            self.changed.notify_all()

    def until(self, predicate: Callable[[], Any], timeout: float = TIMEOUT) -> None:
        with self.changed:
            assert self.changed.wait_for(predicate, timeout), "the inspector did not get there in time"


def rows_in(html: str) -> int:
    return html.count('<details class="acpnb-frame')


def test_the_demo_agents_frames_are_paired_and_clean_against_the_schema(demo):
    session = demo.new_session()
    session.set("model", "smart")
    session.prompt("hello")
    session.prompt("read notes.txt")
    rows = analyze(demo.log)
    # our client and the demo speak ACP v1 (the demo's unstable capabilities, fork and systemPrompt, noted as such)
    assert [str(i) for r in rows for i in r.issues or () if i.level != "unstable"] == []
    requests = [r for r in rows if r.kind == "request"]
    assert requests and all(r.pair is not None and r.rtt is not None and r.rtt >= 0 for r in requests)
    permission = next(r for r in rows if r.method == "session/request_permission" and r.kind == "request")
    assert permission.direction == "recv" and rows[permission.pair].direction == "send"


def test_the_table_has_headers_pairs_explanations_and_a_session_dropdown(demo):
    first, second = demo.new_session(), demo.new_session()
    first.set("model", "smart")
    second.prompt("hi")
    inspector = ProtocolInspector(demo)
    try:
        html = inspector.table.value
        for header in ("time", "direction", "method / update", "session", "round trip", "summary"):
            assert f"white-space:nowrap\">{header}</span>" in html
        assert [value for _label, value in inspector.session.options] == ["", first.id, second.id]
        inspector.session.value = first.id
        shown = inspector.visible()
        assert {r.session_id for r in shown} == {first.id} and rows_in(inspector.table.value) == len(shown)
        answer = next(r for r in shown if r.method == "session/set_config_option" and r.kind == "result")
        html = inspector.table.value
        assert f"answers #{answer.pair} after" in html and f"\u21a9 #{answer.pair} \u00b7 " in html
        assert "model: &#x27;fast&#x27; \u2192 &#x27;smart&#x27;" in html and "+ thought_level" in html
        assert 'href="https://agentclientprotocol.com/protocol/session-config-options#setting-a-config-option"' in html
        # Updates are listed under session/update and filter by kind.
        inspector.session.value = ""
        inspector.method.value = "session/update#agent_message_chunk"
        assert {r.update for r in inspector.visible()} == {"agent_message_chunk"}
        # Capabilities: the demo's boolean option relies on the client's session.configOptions.boolean.
        capabilities = inspector.capabilities.value
        assert "Capabilities: 1 used of" in capabilities
        assert "<code>session.configOptions.boolean</code>" in capabilities
    finally:
        inspector.close()


def test_the_table_shows_every_frame_from_the_first_and_unticking_holds_it_still(demo):
    session = demo.new_session()
    session.prompt("hello")
    inspector = ProtocolInspector(demo, interval=0.02)
    watch = Watch(inspector)
    # The reader's picks and scrolling are handled on the kernel's main shell, whichever subshell the browser
    # names (see widgets.comms).
    assert all(control.comm._reply_subshell_for({}, "a-frontend-subshell") is None
               for control in (inspector.method, inspector.session, inspector.follow, inspector.table))
    try:
        before = len(inspector.visible())
        assert rows_in(inspector.table.value) == before == len(demo.log)  # initialize first, nothing left out
        indexes = [int(i) for i in re.findall(r'data-index="(\d+)"', inspector.table.value)]
        assert indexes == sorted(indexes) and indexes[0] == inspector.visible()[0].index  # oldest first
        inspector.follow.value = False
        assert rows_in(inspector.table.value) == before
        held = inspector.table.value
        session.prompt("again")
        watch.until(lambda: "new frames held back" in inspector.status.value
                    and len(demo.log) == len(inspector._analyzer.rows))
        assert inspector.table.value == held  # a reader's open rows stay open while frames arrive
        inspector.follow.value = True
        assert rows_in(inspector.table.value) == len(demo.log) and "stopReason=end_turn" in inspector.table.value
        assert "held back" not in inspector.status.value
    finally:
        inspector.close()


def test_new_frames_arrive_live_from_the_loop_thread(demo):
    inspector = ProtocolInspector(demo, method="session/prompt", interval=0.02)
    watch = Watch(inspector)
    try:
        assert inspector.method.value == "session/prompt" and inspector.visible() == []
        assert "No frames match." in inspector.table.value
        session = demo.new_session()
        session.prompt("hello")
        watch.until(lambda: "stopReason=end_turn" in inspector.table.value)
        assert [r.kind for r in inspector.visible()] == ["request", "result"]
        assert inspector.session.options[-1] == (session.id, session.id)
    finally:
        inspector.close()


def test_a_bad_frame_given_by_hand_is_marked_without_any_agent():
    frames = [
        {"dir": "send", "t": 1.0, "msg": {"jsonrpc": "2.0", "id": 1, "method": "session/prompt",
                                          "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "hi"}]}}},
        {"dir": "recv", "t": 1.5, "msg": {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "finished"}}},
    ]
    inspector = ProtocolInspector.of_frames(frames, name="by hand")
    try:
        html = inspector.table.value
        assert html.count('class="acpnb-schema-error"') == 1 and "1 breaking the schema" in html
        assert "result/stopReason" in html and "&#x27;finished&#x27; is not one of" in html
        static = inspector._repr_mimebundle_()
        assert "agent 'by hand': 2 of 2 frames" in static["text/plain"]
        assert "| 1 | " in static["text/markdown"] and "\u2717 schema" in static["text/markdown"]
    finally:
        inspector.close()


def test_without_jsonschema_the_inspector_says_how_to_turn_checks_on(demo, monkeypatch):
    monkeypatch.setattr(_schema, "available", lambda: False)
    inspector = ProtocolInspector(demo)
    try:
        assert "schema checks are off: pip install 'acp-notebook[schema]'" in inspector.status.value
        assert "schema \u2717" not in inspector.table.value
    finally:
        inspector.close()


@pytest.fixture
def shell() -> Iterator[Any]:
    globalipapp.start_ipython()  # once per process; later calls do nothing
    yield globalipapp.get_ipython()


def test_the_saved_form_is_a_frame_table_kept_current_as_frames_arrive(demo, shell):
    session = demo.new_session()
    inspector = ProtocolInspector(demo, interval=0.02, save_interval=0.05)
    try:
        with capture_output() as captured:
            display(inspector)  # through the shell's display machinery, as %acp log does
            first = captured.outputs[0]
            assert "application/vnd.jupyter.widget-view+json" in first.data
            assert "| # | time | direction | method / update | session | round trip | summary |" in first.data[
                "text/markdown"]
            assert "session/new" in first.data["text/html"] and "stopReason" not in first.data["text/plain"]
            turn_saved = threading.Event()
            publisher = shell.display_pub  # the capturing one, while capture_output is active
            publish = publisher.publish

            def spied(data: dict[str, Any], *args: Any, **kwargs: Any) -> None:
                publish(data, *args, **kwargs)
                if kwargs.get("update") and "stopReason=end_turn" in data.get("text/plain", ""):
                    turn_saved.set()

            publisher.publish = spied
            session.prompt("hello")
            assert turn_saved.wait(TIMEOUT), "the saved form was not refreshed"
        updated = [o for o in captured.outputs if o.update]
        assert "agent_message_chunk" in updated[-1].data["text/html"]
        assert "application/vnd.jupyter.widget-view+json" in updated[-1].data  # still live
        (live,) = inspector.displays
    finally:
        inspector.close()
    assert live.final  # closed: the output keeps its static table
