"""The ACP of today with the four pinned agents: tool-call names, notices, compaction, session/fork and system
prompts (FINDINGS.md section 11). claude-agent-acp 0.101.0 and codex-acp 2.6.0 have all five (claude takes a
system prompt only as an override, codex only appended); opencode 1.18.33 forks and has none of the rest;
gemini-cli 0.61.0 has none. What an agent does not advertise is never sent, and says so when asked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from interop_support import TURN_TIMEOUT

import acp_notebook as acpnb

pytestmark = pytest.mark.interop

TODAYS_KINDS = {"notice", "compaction_update", "compaction_summary_chunk"}
SYSTEM_PROMPT = "Answer in one line."


@dataclass(frozen=True)
class Today:
    names: tuple[str | None, ...]  # each tool call's `name` in the write turn (None: not sent)
    fork: bool
    system_prompt_mode: str | None  # the one mode it takes, None when it advertises no systemPrompt
    advertised: dict | None  # its sessionCapabilities.systemPrompt
    notice: str | None  # the title of the warning notice it sends on a turn here


TODAY = {
    # claude warns that its auto mode's classifier billing does not fit a gateway on 127.0.0.1.
    "claude": Today(("Write",), True, "override", {"mode": {"override": {}}}, "Claude reported a warning"),
    # codex warns that it has no metadata for the interop model; its second tool call is its approval
    # reviewer's ("Guardian Review"), which carries no name. It advertises systemPrompt without modes: the
    # schema's default, append.
    "codex": Today(("exec_command", None), True, "append", {}, "Model metadata for `gpt-5.4` not found."),
    "opencode": Today((None,), True, None, None, None),
    "gemini": Today((None,), False, None, None, None),
}


def received_updates(agent: acpnb.Agent) -> list[dict]:
    return [e["msg"]["params"]["update"] for e in list(agent.log)
            if e["dir"] == "recv" and e["msg"].get("method") == "session/update"]


def sent(agent: acpnb.Agent, method: str) -> list[dict]:
    return [e["msg"] for e in agent.log if e["dir"] == "send" and e["msg"].get("method") == method]


@pytest.mark.parametrize("name", list(TODAY))
def test_what_each_pinned_agent_has_of_todays_acp(interop, model_server, name):
    today = TODAY[name]
    agent = interop.start(name, model_server, permission="allow", system_prompt=SYSTEM_PROMPT,
                          system_prompt_mode=today.system_prompt_mode or "append")
    assert (agent.capabilities.get("sessionCapabilities") or {}).get("systemPrompt") == today.advertised
    session = agent.new_session()
    (opened,) = sent(agent, "session/new")
    if today.system_prompt_mode is None:
        assert "systemPrompt" not in opened["params"] and session.system_prompt is None
    else:
        assert opened["params"]["systemPrompt"] == {"mode": today.system_prompt_mode,
                                                    "content": [{"type": "text", "text": SYSTEM_PROMPT}]}
    written = interop.work / "today.txt"
    turn = session.prompt(f"write {written} with hello", timeout=TURN_TIMEOUT)
    assert tuple(call.name for call in turn.tool_calls) == today.names
    if today.system_prompt_mode is not None:  # the agent passed ours on to its model, with the prompt
        # Not necessarily in its last request: codex 2.6.0 may ask for the thread's title after the turn.
        bodies = [json.dumps(r.body) for r in model_server.requests]
        assert any(SYSTEM_PROMPT in body and str(written) in body for body in bodies), bodies[-1][:2000]
    if today.notice is None:  # claude's comes in its default mode, auto
        assert turn.notices == []
    else:
        assert {(n.severity, n.title.startswith(today.notice)) for n in turn.notices} == {("warning", True)}

    if today.fork:
        forked = session.fork()
        assert forked.id != session.id and forked in agent.sessions
        before = len(model_server.requests)
        again = forked.prompt("say forked", timeout=TURN_TIMEOUT)
        assert again.text.endswith("You said: say forked")
        # The fork starts with the source's history: its model request carries the earlier prompt. Not necessarily
        # the last request either: codex may ask for the forked thread's title after (or before) the turn's.
        bodies = [json.dumps(r.body) for r in model_server.requests[before:]]
        assert any("say forked" in body and str(written) in body for body in bodies), bodies[-1][:2000]
    else:
        with pytest.raises(acpnb.CapabilityError, match=f"agent '{agent.name}'"):
            session.fork()
        assert sent(agent, "session/fork") == []
    if today.notice is None:
        assert not {u["sessionUpdate"] for u in received_updates(agent)} & TODAYS_KINDS


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_compact_sends_compaction_updates(interop, model_server, name):
    agent = interop.start(name, model_server, permission="allow")
    session = agent.new_session()
    session.prompt("say hi", timeout=TURN_TIMEOUT)
    turn = session.prompt("/compact", timeout=TURN_TIMEOUT)
    assert turn.text == ""  # no reply of text any more: the compaction is told in compaction_update frames
    (compaction,) = turn.compactions
    assert compaction.status == "completed" and session.state.compactions == {compaction.id: compaction}
    statuses = [u["status"] for u in received_updates(agent) if u["sessionUpdate"] == "compaction_update"]
    assert statuses[0] == "in_progress" and statuses[-1] == "completed"
    if name == "claude":  # claude sends the summary (its model's answer to the compaction request)
        assert compaction.summary and compaction.summary[0]["type"] == "text" and compaction.summary[0]["text"]
    else:
        assert compaction.summary == []
