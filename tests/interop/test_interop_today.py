"""The ACP of today with the four pinned agents: tool-call names, notices, compaction, session/fork and system
prompts (FINDINGS.md section 11). At these versions only fork is there, in claude-agent-acp and opencode; the
others say so when asked, and nothing of the rest reaches the wire: a prompt's tool calls carry no ``name``,
no notice or compaction update comes (claude's and codex's /compact answer in plain text), no agent advertises
``sessionCapabilities.systemPrompt``, so ours is never sent.
"""

from __future__ import annotations

import json

import pytest
from interop_support import TURN_TIMEOUT

import acp_notebook as acpnb

pytestmark = pytest.mark.interop

FORKS = {"claude": True, "opencode": True, "codex": False, "gemini": False}
TODAYS_KINDS = {"notice", "compaction_update", "compaction_summary_chunk"}
# What /compact answers (a reply of text; the agents of these versions send no compaction update).
COMPACT_TEXT = {"claude": "Compacting...\n\nCompacting completed.", "codex": "Context compacted\n"}


def received_updates(agent: acpnb.Agent) -> list[dict]:
    return [e["msg"]["params"]["update"] for e in list(agent.log)
            if e["dir"] == "recv" and e["msg"].get("method") == "session/update"]


@pytest.mark.parametrize("name", list(FORKS))
def test_what_each_pinned_agent_has_of_todays_acp(interop, model_server, name):
    agent = interop.start(name, model_server, permission="allow", system_prompt="Answer in one line.")
    assert "systemPrompt" not in (agent.capabilities.get("sessionCapabilities") or {})
    session = agent.new_session()
    (opened,) = [e["msg"] for e in agent.log if e["dir"] == "send" and e["msg"].get("method") == "session/new"]
    assert "systemPrompt" not in opened["params"] and session.system_prompt is None  # not advertised: not sent

    written = interop.work / "today.txt"
    turn = session.prompt(f"write {written} with hello", timeout=TURN_TIMEOUT)
    assert turn.tool_calls and [call.name for call in turn.tool_calls] == [None] * len(turn.tool_calls)
    assert not any("name" in u for u in received_updates(agent) if u["sessionUpdate"].startswith("tool_call"))
    assert turn.notices == [] and session.state.compactions == {}

    if FORKS[name]:
        forked = session.fork()
        assert forked.id != session.id and forked in agent.sessions
        again = forked.prompt("say forked", timeout=TURN_TIMEOUT)
        assert again.text.endswith("You said: say forked")
        # The fork starts with the source's history: its model request carries the earlier prompt.
        assert str(written) in json.dumps(model_server.requests[-1].body)
    else:
        with pytest.raises(acpnb.CapabilityError, match=f"agent '{agent.name}'"):
            session.fork()
        assert "session/fork" not in [e["msg"].get("method") for e in agent.log if e["dir"] == "send"]
    assert not {u["sessionUpdate"] for u in received_updates(agent)} & TODAYS_KINDS


@pytest.mark.parametrize("name", list(COMPACT_TEXT))
def test_compact_answers_in_text_and_sends_no_compaction_update(interop, model_server, name):
    agent = interop.start(name, model_server, permission="allow")
    session = agent.new_session()
    session.prompt("say hi", timeout=TURN_TIMEOUT)
    turn = session.prompt("/compact", timeout=TURN_TIMEOUT)
    assert turn.text.startswith(COMPACT_TEXT[name]) and turn.compactions == []
    assert not {u["sessionUpdate"] for u in received_updates(agent)} & TODAYS_KINDS
