"""What the recordings of the pins moved on 2026-11-28 hold of today's ACP, replayed offline through the client
(FINDINGS.md sections 11 and 12): claude-agent-acp 0.101.0's and codex-acp 2.6.0's write turns carry the tool
call's `name`, and codex warns in a `notice` on every turn (no metadata for the interop model). Not marked `interop`: nothing here needs an agent installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_notebook.testing import replay_script

RECORDINGS = Path(__file__).resolve().parents[2] / "notebooks" / "recordings"
# The tool call's name in the recorded write turn, and the title each turn's warning notice starts with.
TODAY = {
    "claude": ("Write", None),
    "codex": ("exec_command", "Model metadata for `gpt-5.4` not found."),
}


@pytest.mark.parametrize("name", list(TODAY))
def test_recorded_turns_carry_tool_call_names_and_notices(tmp_path: Path, name: str) -> None:
    tool_name, notice = TODAY[name]
    run = replay_script(RECORDINGS / f"{name}.acp.jsonl", cwd=tmp_path)
    say_hi, think, write = run.turns
    assert [turn.stop_reason for turn in run.turns] == ["end_turn"] * 3
    assert [call.name for call in write.tool_calls] == [tool_name]
    assert write.permissions and write.tool_calls[0].status == "completed"
    for turn in (say_hi, think, write):
        if notice is None:
            assert turn.notices == []
        else:
            assert [(n.severity, n.title.startswith(notice)) for n in turn.notices] == [("warning", True)]
