"""The stable ACP v1 of today in the client's state: tool-call names, notices and compactions as records, the
rules each follows (a compaction is an upsert with patch semantics; notices are bounded live events), and how
the inspector explains the new frames. The frames themselves crossing real pipes, the proxy included, are in
tests/test_client_protocol.py (it also runs on the SDK's 1.x line)."""

from __future__ import annotations

from acp_notebook import _explain
from acp_notebook.state import NOTICES_KEPT, Compaction, Notice, SessionState
from acp_notebook.turn import Turn


def compaction(**fields):
    return {"sessionUpdate": "compaction_update", "compactionId": "c1", **fields}


def summary_chunk(text, compaction_id="c1"):
    return {"sessionUpdate": "compaction_summary_chunk", "compactionId": compaction_id,
            "content": {"type": "text", "text": text}}


def test_a_compaction_is_one_record_patched_in_place_by_its_id():
    state = SessionState("s")
    events = []
    state.observe(lambda event: events.append(event))
    state.apply_update({"sessionUpdate": "usage_update", "used": 120_000, "size": 128_000})
    assert state.apply_update(summary_chunk("Earlier: "))  # a first-seen id by a chunk starts one
    record = state.compactions["c1"]
    assert (record.status, record.summary_text, record.finished) == ("in_progress", "Earlier: ", False)
    assert record.usage_before == {"used": 120_000, "size": 128_000}
    state.apply_update(summary_chunk("a table."))
    state.apply_update(compaction(status="completed", error="partly", _meta={"a": 1}))
    assert state.compactions["c1"] is record and record.summary_text == "Earlier: a table."
    assert (record.status, record.error, record.meta, record.finished) == ("completed", "partly", {"a": 1}, True)
    state.apply_update(compaction(status="completed", summary=[{"type": "text", "text": "New summary."}],
                                  error=None, _meta={"b": 2}))
    # summary and error: a value replaces, null clears; _meta is replaced whole (not merged as session info is)
    assert (record.summary_text, record.error, record.meta) == ("New summary.", None, {"b": 2})
    state.apply_update(compaction(status="completed"))  # omitted fields are unchanged
    assert record.summary_text == "New summary."
    state.apply_update(compaction(status="completed", summary=[]))
    assert record.summary_text == ""
    state.apply_update({"sessionUpdate": "usage_update", "used": 9_000, "size": 128_000})
    assert record.usage_after == {"used": 9_000, "size": 128_000} and state.usage["used"] == 9_000
    state.apply_update({"sessionUpdate": "usage_update", "used": 10_000, "size": 128_000})
    assert record.usage_after["used"] == 9_000  # the first report after it, kept
    assert [e.kind for e in events].count("compaction") == 6 and all(
        e.data is record for e in events if e.kind == "compaction")


def test_a_custom_status_is_kept_and_a_summary_names_blocks_that_are_not_text():
    record = Compaction("c2")
    record.apply(compaction(compactionId="c2", status="_paused",
                            summary=[{"type": "text", "text": "See "}, {"type": "image", "data": "", "mimeType": "x"}]))
    assert (record.status, record.finished, record.summary_text) == ("_paused", True, "See [image]")


def test_notices_go_to_the_running_turn_else_to_the_session_which_keeps_the_latest():
    state = SessionState("s")
    turn = Turn("hi", "s")
    update = {"sessionUpdate": "notice", "severity": "warning", "title": "Slow", "description": None}
    assert state.apply_update(update)
    turn.apply(update)
    assert turn.notices[0].text == "Slow" and turn.notices[0].severity == "warning" and state.notices == []
    seen = []
    state.observe(lambda event: seen.append(event.data) if event.kind == "notice" else None)
    for index in range(NOTICES_KEPT + 5):
        state.keep_outside_turn({"sessionUpdate": "notice", "severity": "info", "title": f"n{index}"})
    assert len(state.notices) == NOTICES_KEPT and state.notices[0].title == "n5"
    assert len(seen) == NOTICES_KEPT + 5 and isinstance(seen[-1], Notice)
    assert state.history[-1]["title"] == f"n{NOTICES_KEPT + 4}"


def test_a_tool_calls_name_is_kept_and_an_update_may_change_it_but_null_leaves_it():
    turn = Turn("hi", "s")
    turn.apply({"sessionUpdate": "tool_call", "toolCallId": "t", "title": "Run", "name": "bash"})
    turn.apply({"sessionUpdate": "tool_call_update", "toolCallId": "t", "name": None, "status": "completed"})
    assert turn.tool_calls[0].name == "bash"
    turn.apply({"sessionUpdate": "tool_call_update", "toolCallId": "t", "name": "shell"})
    assert turn.tool_calls[0].name == "shell"
    turn.apply({"sessionUpdate": "tool_call", "toolCallId": "u", "title": "Think"})
    assert turn.tool_calls[1].name is None


def test_the_inspector_explains_each_new_update_kind_and_the_tool_name():
    for kind in ("notice", "compaction_update", "compaction_summary_chunk"):
        caption = _explain.explain("session/update", "notification", kind)
        assert "does not know" not in caption.text and caption.url.startswith("https://agentclientprotocol.com/")
    assert "programmatic name" in _explain.explain("session/update", "notification", "tool_call").text
    assert _explain.explain("session/update", "notification", "notice").url.endswith("/schema#notice")
