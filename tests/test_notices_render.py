"""How notices, compactions and tool-call names are drawn (acp_notebook/widgets/notices.py): by severity, folded,
escaped, with hidden characters spelled out, in HTML, Markdown and plain text. The records are the client's
own (state.Notice, state.Compaction, turn.ToolCall), filled from updates as the client applies them."""

from __future__ import annotations

from acp_notebook.state import SessionState
from acp_notebook.turn import ToolCall
from acp_notebook.widgets import notices as view

HOSTILE = "<script>alert(1)</script> \u202eevil"


def notice(severity, title, description=None):
    state = SessionState("s")
    update = {"sessionUpdate": "notice", "severity": severity, "title": title}
    if description is not None:
        update["description"] = description
    state.keep_outside_turn(update)
    return state.notices[-1]


def test_info_is_quiet_warnings_and_errors_are_marked():
    info, warning, error = notice("info", "Cached"), notice("warning", "Slow", "retrying"), notice("error", "Failed")
    quiet = view.notice_html(info)
    assert 'acpnb-notice-info' in quiet and "font-weight:600" not in quiet and "border-left" not in quiet
    loud = view.notice_html(warning)
    assert 'acpnb-notice-warning' in loud and 'role="status"' in loud and "#b26a00" in loud
    assert ">\u26a0 warning:</span>" in loud and 'acpnb-notice-description' in loud and "retrying" in loud
    assert "#c62828" in view.notice_html(error) and "\u2716 error:" in view.notice_html(error)
    both = view.notices_html([info, warning, error])
    assert both.index("Cached") < both.index("Slow") < both.index("Failed") and view.notices_html([]) == ""
    assert view.notices_text([info, warning]) == "\u2139 info: Cached\n\u26a0 warning: Slow \u2014 retrying"
    assert view.notices_markdown([info, error]) == "*\u2139 info: Cached*\n\n**\u2716 error: Failed**"


def test_a_custom_severity_is_shown_quietly_under_its_own_name():
    custom = notice("_debug", "Trace on")
    assert view.severity_of(custom) == "info"
    assert 'data-severity="_debug"' in view.notice_html(custom) and view.notices_text([custom]) == \
        "\u2139 _debug: Trace on"


def test_what_an_agent_writes_in_a_notice_is_escaped_and_hides_nothing():
    hostile = notice("error", HOSTILE, HOSTILE)
    html = view.notice_html(hostile)
    assert "<script>" not in html and "&lt;script&gt;" in html and "\u202e" not in html and "\\u202eevil" in html
    assert "\u202e" not in view.notices_text([hostile]) and "\\<script\\>" in view.notices_markdown([hostile])
    custom = notice(HOSTILE, "x")
    assert "<script>" not in view.notice_html(custom)


def test_the_panel_shows_the_latest_notices_only_while_no_turn_runs():
    notes = [notice("info", f"n{i}") for i in range(5)]
    shown = view.panel_notices_html(notes, busy=False)
    assert "n1" not in shown and all(f"n{i}" in shown for i in (2, 3, 4))
    assert view.panel_notices_html(notes, busy=True) == "" and view.panel_notices_html([], busy=False) == ""


def compaction_of(*updates, usage=None):
    state = SessionState("s")
    if usage is not None:
        state.apply_update({"sessionUpdate": "usage_update", "used": usage, "size": 200_000})
    for update in updates:
        state.apply_update({"compactionId": "c", **update})
    return state, state.compactions["c"]


def test_a_compaction_is_a_marked_folded_block_with_its_summary_and_the_context_it_freed():
    state, running = compaction_of({"sessionUpdate": "compaction_update", "status": "in_progress"}, usage=150_000)
    html = view.compaction_html(running)
    assert html.startswith('<details class="acpnb-compaction" data-status="in_progress"') and " open" not in html
    assert "compacting context\u2026" in html and "no summary" not in html
    running.apply({"sessionUpdate": "compaction_summary_chunk", "compactionId": "c",
                   "content": {"type": "text", "text": "You asked about\ntides."}})
    running.apply({"sessionUpdate": "compaction_update", "compactionId": "c", "status": "completed"})
    state.apply_update({"sessionUpdate": "usage_update", "used": 4_000, "size": 200_000})
    html = view.compaction_html(running, open_=True)
    assert "\u27f2 context compacted \u00b7 150,000 \u2192 4,000 tokens</summary>" in html and " open " in html
    assert 'acpnb-compaction-summary' in html and "You asked about\ntides." in html
    assert view.compaction_text(running) == ("\u27f2 context compacted \u00b7 150,000 \u2192 4,000 tokens\n"
                                             "  You asked about\n  tides.")
    assert view.compaction_markdown(running) == ("**\u27f2 context compacted \u00b7 150,000 \u2192 4,000 tokens**"
                                                 "\n\n> You asked about\n> tides.")


def test_a_failed_compaction_shows_its_error_and_hostile_text_is_escaped():
    _, failed = compaction_of({"sessionUpdate": "compaction_update", "status": "failed", "error": HOSTILE,
                               "summary": [{"type": "text", "text": HOSTILE}]})
    html = view.compaction_html(failed)
    assert "context compaction failed" in html and 'acpnb-compaction-error' in html
    assert "<script>" not in html and "\u202e" not in html and html.count("&lt;script&gt;") == 2
    assert "  error: <script>" in view.compaction_text(failed)  # plain text is not HTML: escaped only of hidden chars
    assert "\u202e" not in view.compaction_text(failed)
    _, odd = compaction_of({"sessionUpdate": "compaction_update", "status": "<b>_x</b>"})
    assert "<b>" not in view.compaction_html(odd) and "context compaction: &lt;b&gt;_x&lt;/b&gt;" in \
        view.compaction_html(odd)


def test_a_tool_calls_name_is_a_chip_unless_the_title_says_it_already():
    named = ToolCall(id="t", title="Read notes.txt", name="read_text_file")
    assert 'class="acpnb-tool-name"' in view.tool_name_html(named) and ">read_text_file</span>" in \
        view.tool_name_html(named)
    assert view.tool_name_html(ToolCall(id="t", title="bash", name="bash")) == ""
    assert view.tool_name_html(ToolCall(id="t", title="x")) == ""
    hostile = ToolCall(id="t", title="x", name=HOSTILE)
    assert "<script>" not in view.tool_name_html(hostile) and "\u202e" not in view.tool_name_text(hostile)
