"""An ACP agent on stdio that writes its frames by hand (no SDK): the stable v1 features of today.

Every prompt turn sends ``TURN_UPDATES`` (a named tool call, a notice, a compaction streamed in pieces,
the usage after it, a reply), answers, then sends ``AFTER_UPDATES`` (notices while no turn runs). The
frames go out exactly as these tables have them, field for field, so a test can check that the client
and the proxy pass them on unchanged whatever SDK line they run on: both SDK lines predate some of these
fields (0.12.1 has no notices or compaction; ``FUTURE_FIELD`` no SDK knows).

The prompt's answer carries, in ``_meta``, the clientCapabilities this agent's initialize received.
Runs until stdin closes; one session at a time is enough for the tests.
"""

from __future__ import annotations

import json
import sys
from typing import Any

SESSION_ID = "today-1"
FUTURE_FIELD = "x_later"  # a field of some later schema: passed on as it is, never dropped

TURN_UPDATES: list[dict[str, Any]] = [
    {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Looking at your variables",
     "name": "mcp__kernel__list_variables", "kind": "read", "status": "in_progress", "rawInput": {}},
    {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
     "name": "mcp__kernel__list_variables"},
    {"sessionUpdate": "notice", "severity": "warning", "title": "Rate limited",
     "description": "Retrying in 2 s", "_meta": {"retryAfterMs": 2000}, FUTURE_FIELD: {"kept": True}},
    {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"},
    {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1",
     "content": {"type": "text", "text": "You asked about "}},
    {"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1",
     "content": {"type": "text", "text": "the sales table."}},
    {"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed", "_meta": {"by": "today"}},
    {"sessionUpdate": "usage_update", "used": 1200, "size": 128000},
    {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Done."}},
]
AFTER_UPDATES: list[dict[str, Any]] = [
    {"sessionUpdate": "notice", "severity": "error", "title": "Quota exhausted"},
    {"sessionUpdate": "notice", "severity": "info", "title": "Back to normal"},
]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def update(session_id: str, payload: dict[str, Any]) -> None:
    send({"method": "session/update", "params": {"sessionId": session_id, "update": payload}})


def main() -> None:
    capabilities: Any = None
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, request_id, params = message.get("method"), message.get("id"), message.get("params") or {}
        if request_id is None or method is None:
            continue  # notifications (session/cancel, $/cancel_request) and answers: nothing to do
        if method == "initialize":
            capabilities = params.get("clientCapabilities")
            send({"id": request_id, "result": {
                "protocolVersion": 1, "agentInfo": {"name": "today-agent", "version": "1"},
                "agentCapabilities": {"loadSession": False, "sessionCapabilities": {}}, "authMethods": []}})
        elif method == "session/new":
            send({"id": request_id, "result": {"sessionId": SESSION_ID}})
        elif method == "session/prompt":
            for payload in TURN_UPDATES:
                update(params.get("sessionId", SESSION_ID), payload)
            send({"id": request_id, "result": {"stopReason": "end_turn",
                                               "_meta": {"clientCapabilities": capabilities}}})
            for payload in AFTER_UPDATES:
                update(params.get("sessionId", SESSION_ID), payload)
        else:
            send({"id": request_id, "error": {"code": -32601, "message": f"Method not found: {method}"}})


if __name__ == "__main__":
    main()
