"""The real agents and the notice for an agent that never connected to the `kernel` MCP server (issue 40, point 2).

gemini-cli in a folder it does not trust takes the entry and starts nothing (FINDINGS.md section 10): its first
answered turn, and the session's notices, carry one warning with Gemini CLI's own remedy; a second turn carries
none. Started with the registry's trust setting (what `%acp start gemini --trust-workspace` adds) it connects as
the session opens and nothing is said; so does opencode (the registry says so: AgentSpec.mcp_connect).
claude-agent-acp 0.101.0 and codex-acp 2.6.0 may connect after a first plain turn has ended: they are never judged.
"""

from __future__ import annotations

import pytest
from interop_support import TURN_TIMEOUT, bridge_env

from acp_notebook.kernel_tools.connect import NOTICE_META
from acp_notebook.launch import trust_workspace_env

pytestmark = pytest.mark.interop


def test_gemini_in_a_folder_it_does_not_trust_is_told_once_with_its_remedy(interop, model_server):
    agent = interop.start("gemini", model_server, env=bridge_env(), kernel_tools="read-only", permission="allow")
    session = agent.new_session()
    turn = session.prompt("say hi", timeout=TURN_TIMEOUT)
    assert turn.stop_reason == "end_turn", turn
    (notice,) = turn.notices
    assert notice.severity == "warning" and notice.meta == NOTICE_META
    assert "Gemini CLI starts MCP servers only in a folder it trusts" in notice.description
    assert "%acp start gemini --trust-workspace" in notice.description
    assert session.kernel_tools.tools.bridges == 0  # no bridge ever reached the kernel
    assert [n for n in session.state.notices if n.meta == NOTICE_META] == [notice]
    again = session.prompt("say hi again", timeout=TURN_TIMEOUT)
    assert again.notices == [] and len([n for n in session.state.notices if n.meta == NOTICE_META]) == 1


@pytest.mark.parametrize("name", ["gemini", "opencode"])
def test_an_agent_that_connects_at_session_start_is_not_told(interop, model_server, name):
    env = {**bridge_env(), **(trust_workspace_env(name) if name == "gemini" else {})}
    agent = interop.start(name, model_server, env=env, kernel_tools="read-only", permission="allow")
    session = agent.new_session()
    turn = session.prompt("say hi", timeout=TURN_TIMEOUT)
    assert turn.stop_reason == "end_turn", turn
    assert session.kernel_tools.tools.connected.is_set() and session.kernel_tools.tools.connection_judged
    # (codex warns on every turn that it has no metadata for the interop model: not ours)
    assert not [n for n in turn.notices if n.meta == NOTICE_META]
    assert not [n for n in session.state.notices if n.meta == NOTICE_META]


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_an_agent_that_may_connect_after_the_first_turn_is_never_told(interop, model_server, name):
    # claude-agent-acp 0.101.0 did not reach the kernel's MCP server by the end of a first "say hi" turn here (0.23.1
    # did), and codex-acp 2.6.0 had not in about one run in three: the registry marks both mcp_connect="lazy", so
    # such a turn gets no not-connected notice, whether or not the connection had come by its end.
    # (Both use the kernel tools when a turn asks for them: test_interop_kernel_tools.py.)
    agent = interop.start(name, model_server, env=bridge_env(), kernel_tools="read-only", permission="allow")
    session = agent.new_session()
    turn = session.prompt("say hi", timeout=TURN_TIMEOUT)
    assert turn.stop_reason == "end_turn", turn
    assert not session.kernel_tools.tools.connection_judged
    assert not [n for n in session.state.notices if n.meta == NOTICE_META]
