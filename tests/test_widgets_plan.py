"""The live plan (widgets/live_plan.py) sends the rows that changed, and what the frontend makes of them is the plan;
the turn header's clock ticks in the browser (widgets/parts.py ClockParts), so the kernel sends nothing for it."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acp_notebook.widgets.live_plan import PlanRows, plan_entries, plan_rows
from acp_notebook.widgets.parts import CLOCK_ATTRIBUTE, ClockParts, LiveParts
from tests.test_widgets import CommRecorder, comms  # noqa: F401 - fixture

STATUSES = st.sampled_from(["pending", "in_progress", "completed"])
TEXT = st.text(alphabet=st.sampled_from(list("ab <>&\"é\u202e\u0007\U0001f600")), max_size=40)
PLANS = st.lists(st.lists(st.tuples(STATUSES, TEXT), max_size=6), min_size=1, max_size=6)


def _utf16_patch(old: str, start: int, end: int, text: str) -> str:
    units = old.encode("utf-16-le", "surrogatepass")
    return (units[:2 * start] + text.encode("utf-16-le", "surrogatepass") + units[2 * end:]).decode(
        "utf-16-le", "surrogatepass")


def plan_shows(comms: CommRecorder, widget: PlanRows) -> list[list[list[str]]]:
    """The rows the frontend holds after each message the kernel sent the plan: its ``apply`` replayed in Python
    (offsets in UTF-16 units, as in JavaScript). A message for another version than the one held fails."""
    rows: list[list[str]] = []
    version, shown = 0, []
    for message in comms.to(widget):
        if message.msg_type == "comm_open":
            rows, version = [list(r) for r in message.state.get("rows", [])], message.state.get("v", 0)
            continue
        if message.msg_type != "comm_msg" or message.data.get("method") != "custom":
            continue
        sent = message.data["content"]
        if "full" in sent:
            rows, version = [list(r) for r in sent["full"]], sent["v"]
        else:
            assert sent["f"] == version, (sent["f"], version)
            rows = rows[:sent["n"]]
            for change in sent["e"]:
                old = rows[change[0]] if change[0] < len(rows) else ["pending", ""]
                text = _utf16_patch(old[1], *change[2:]) if len(change) > 2 else old[1]
                if change[0] < len(rows):
                    rows[change[0]] = [change[1], text]
                else:
                    assert change[0] == len(rows)  # new rows come in order
                    rows.append([change[1], text])
            version = sent["f"] + 1
        shown.append([list(r) for r in rows])
    return shown


def _entries(rows: list[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"content": text, "priority": "medium", "status": status} for status, text in rows]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(PLANS)
@pytest.mark.slow
def test_the_frontend_holds_each_plan_as_sent(comms, plans):
    widget = PlanRows()
    try:
        for rows in plans:
            widget.update(_entries(rows))
            widget.flush()
            assert plan_shows(comms, widget)[-1:] in ([], [[list(r) for r in plan_entries(_entries(rows))]])
        assert widget.value == "".join(html for _key, html in plan_rows(_entries(plans[-1])))
    finally:
        widget.close()


def test_a_plan_worked_through_sends_the_rows_that_changed(comms):
    widget = PlanRows()
    base = [f"Step {n}: change module {n} and run its tests" for n in range(1, 21)]
    rows = [("pending", text) for text in base]
    widget.update(_entries(rows))
    widget.flush()
    rows[2] = ("completed", base[2])
    rows[3] = ("in_progress", base[3] + " (3 of 9 tests pass)")
    widget.update(_entries(rows))
    widget.flush()
    last = comms.to(widget)[-1].data["content"]
    assert last == {"f": 1, "n": 20, "e": [[2, "completed"], [3, "in_progress", 41, 41, " (3 of 9 tests pass)"]]}
    rows[3] = ("in_progress", base[3] + " (4 of 9 tests pass)")
    widget.update(_entries(rows))
    widget.flush()
    assert comms.to(widget)[-1].data["content"]["e"] == [[3, "in_progress", 43, 44, "4"]]
    widget.flush()  # nothing changed: nothing sent
    assert comms.to(widget)[-1].data["content"]["f"] == 2
    assert plan_shows(comms, widget)[-1] == [list(r) for r in rows]
    # A row's agent text is shown as visible text (a right-to-left override spelt out), escaped in the HTML form.
    widget.update(_entries([("pending", "<b>x\u202e</b>")]))
    widget.flush()
    assert "\u202e" not in plan_shows(comms, widget)[-1][0][1] and "&lt;b&gt;" in widget.value
    widget.close()


def test_a_frontend_that_holds_another_version_is_sent_every_row(comms):
    widget = PlanRows()
    widget.update(_entries([("pending", "one"), ("completed", "two")]))
    widget.flush()
    comms.from_frontend(widget, {"method": "custom", "content": {"sync": 0}})
    assert comms.to(widget)[-1].data["content"] == {"full": [["pending", "one"], ["completed", "two"]], "v": 2}
    assert widget.get_state()["rows"] == [["pending", "one"], ["completed", "two"]] and widget.get_state()["v"] == 2
    widget.close()


def test_only_the_clock_section_carries_the_clock_and_the_kernels_time(comms):
    clock, plain = ClockParts(), LiveParts()
    try:
        before = time.time()
        state = clock.get_state()
        assert before <= state["now"] <= time.time()
        assert "now" not in plain.get_state()
        assert "function clocksOf" in clock._esm and "function clocksOf" not in json.dumps(plain.get_state())
    finally:
        clock.close()
        plain.close()
    assert CLOCK_ATTRIBUTE == "data-acpnb-since"
