"""The recorded forks of the three pinned agents that advertise the unstable session/fork (claude-agent-acp,
opencode and codex-acp) replay offline: notebooks/recordings/fork/, made by `record_sessions.py --fork` (a turn, the session
forked, a turn in the fork). Not marked `interop`: nothing here needs an agent installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.record import Recording

RECORDINGS = Path(__file__).resolve().parents[2] / "notebooks" / "recordings" / "fork"


@pytest.mark.parametrize("name", ["claude", "opencode", "codex"])
def test_a_recorded_fork_replays_offline(tmp_path: Path, name: str) -> None:
    path = RECORDINGS / f"{name}.acp.jsonl"
    sent = [f.msg for f in Recording.load(path).frames if f.direction == "send"]
    (fork,) = [m for m in sent if m.get("method") == "session/fork"]
    assert set(fork["params"]) == {"sessionId", "cwd", "mcpServers"}  # no systemPrompt: not advertised
    with acpnb.replay(path, cwd=tmp_path) as agent:
        assert "fork" in agent.capabilities["sessionCapabilities"]
        session = agent.new_session()
        assert session.prompt("say hi").text == "Hello from the interop model. You said: say hi"
        forked = session.fork()
        assert forked.id != session.id and fork["params"]["sessionId"] == session.id
        assert forked.prompt("say forked").text == "Hello from the interop model. You said: say forked"
