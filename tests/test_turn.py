"""Turn bookkeeping: tool calls merged from updates, usage from the result, gemini's _meta.quota."""

from __future__ import annotations

from acp_notebook.turn import Turn


def test_tool_calls_merge_and_absent_fields_stay():
    turn = Turn("p", "s1")
    turn.apply({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read a", "kind": "read",
                "status": "pending"})
    turn.apply({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
                "content": [{"type": "diff", "path": "/a", "oldText": "", "newText": "x"}]})
    [call] = turn.tool_calls
    assert (call.title, call.kind, call.status) == ("Read a", "read", "completed")
    assert call.diffs and len(call.updates) == 2


def test_usage_from_the_result_and_from_gemini_quota():
    turn = Turn("p", "s1")
    turn.finish({"stopReason": "end_turn", "usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}}, "m")
    assert turn.usage == {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}
    gemini = Turn("p", "s1")
    gemini.finish({"stopReason": "end_turn", "_meta": {"quota": {"token_count": {"input_tokens": 145,
                                                                                 "output_tokens": 28}}}}, "m")
    assert gemini.usage == {"inputTokens": 145, "outputTokens": 28, "totalTokens": 173}
    plain = Turn("p", "s1")
    plain.finish({"stopReason": "end_turn", "_meta": {"other": 1}}, "m")
    assert plain.usage is None


def test_finish_happens_once():
    turn = Turn("p", "s1")
    turn.finish({"stopReason": "end_turn"}, "fast")
    turn.finish({"stopReason": "cancelled"}, "smart")
    assert (turn.stop_reason, turn.model, turn.finished) == ("end_turn", "fast", True)
