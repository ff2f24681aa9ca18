"""The recorded sessions of the four pinned agents using the notebook's kernel tools replay offline, with no
agent and no kernel tools running: notebooks/recordings/kernel-tools/, made by
`record_sessions.py --kernel` (list_variables, then run_code after an Allow, "Kernel answered: 1491").

Not marked `interop`: nothing here needs an agent installed. What each agent showed its client is kept
as it was recorded: the tool calls' titles, the agent's own permission questions, and what the client saw
of run_code's answer (claude-agent-acp shows the structured content its model got; codex the whole MCP
result in rawOutput; the others the text).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acp_notebook.record import Recording
from acp_notebook.testing import replay_script

RECORDINGS = Path(__file__).resolve().parents[2] / "notebooks" / "recordings" / "kernel-tools"
STRUCTURED = {"output": "1491\n", "error": None}

# Per agent: the tool calls' first titles (its tool_call frames; gemini sends none), their titles when the turn
# ends (a permission request's toolCall retitles them), the agent's own questions, and what the client was
# shown as run_code's content.
FACTS: dict[str, dict[str, Any]] = {
    "claude": {"first": ["mcp__kernel__list_variables", "mcp__kernel__run_code"],
               "titles": ["mcp__kernel__list_variables", "mcp__kernel__run_code"], "questions": 2,
               "shown": json.dumps(STRUCTURED, separators=(",", ":"))},
    "opencode": {"first": ["kernel_list_variables", "kernel_run_code"],
                 "titles": ["kernel_list_variables", "kernel_run_code"], "questions": 0, "shown": "1491\n"},
    "codex": {"first": ["mcp.kernel.list_variables", "mcp.kernel.run_code"],
              "titles": ["mcp.kernel.list_variables", "mcp.kernel.run_code"], "questions": 2, "shown": None},
    "gemini": {"first": [], "titles": ["list_variables (kernel MCP Server)", "run_code (kernel MCP Server)"],
               "questions": 2, "shown": "1491\n"},
}


def recorded_tool_call_titles(path: Path) -> list[str]:
    return [frame.msg["params"]["update"].get("title", "") for frame in Recording.load(path).frames
            if frame.direction == "recv" and frame.msg.get("method") == "session/update"
            and frame.msg["params"]["update"].get("sessionUpdate") == "tool_call"]


@pytest.mark.parametrize("name", list(FACTS))
def test_a_recorded_kernel_tools_session_replays_offline(tmp_path: Path, name: str) -> None:
    facts, path = FACTS[name], RECORDINGS / f"{name}.acp.jsonl"
    run = replay_script(path, cwd=tmp_path)
    (turn,) = run.turns
    assert turn.stop_reason == "end_turn" and turn.text.endswith("Kernel answered: 1491"), turn.text
    assert [(call.title, call.status) for call in turn.tool_calls] == [(t, "completed") for t in facts["titles"]]
    assert recorded_tool_call_titles(path) == facts["first"]
    assert len(turn.permissions) == facts["questions"]  # the kernel's own Allow is no ACP frame
    run_code = turn.tool_calls[-1]
    shown = [] if facts["shown"] is None else [{"type": "content", "content": {"type": "text", "text": facts["shown"]}}]
    assert run_code.content == shown
    if name == "codex":  # no content: the whole MCP result, structured content and all, in rawOutput
        assert run_code.raw_output == {"result": {"content": [{"type": "text", "text": "1491\n"}],
                                                  "structuredContent": STRUCTURED, "_meta": None}, "error": None}
    (new,) = [f.msg for f in Recording.load(path).frames if f.direction == "send"
              and f.msg.get("method") == "session/new"]
    (entry,) = new["params"]["mcpServers"]
    assert entry["name"] == "kernel" and {e["name"]: e["value"] for e in entry["env"]}["ACPNB_KERNEL_TOKEN"] == "***"
