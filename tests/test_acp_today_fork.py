"""session/fork (unstable ACP v1): ``session.fork()`` / ``afork()`` and ``%acp fork`` open a new session that
starts with the source's history, with kernel tools and a panel of its own, where the agent advertises
``sessionCapabilities.fork``; where it does not, a clear error names the agent. The demo agent in memory and
as a subprocess (whose forks are session files another process can load)."""

from __future__ import annotations

import asyncio
import sys

import pytest
from IPython.utils.capture import capture_output

import acp_notebook as acpnb
from acp_notebook.demo import DemoAgent
from acp_notebook.magics.grammar import ForkSession, help_text, parse_line
from tests.shells import shell  # noqa: F401 - fixture

DEMO_PROCESS = [sys.executable, "-m", "acp_notebook.demo"]


def sent(agent, method):
    return [e["msg"]["params"] for e in list(agent.log) if e["dir"] == "send" and e["msg"].get("method") == method]


@pytest.mark.parametrize("where", ["memory", "subprocess"])
def test_a_fork_starts_with_the_sources_history_and_goes_its_own_way(where, tmp_path):
    with acpnb.start(DemoAgent() if where == "memory" else DEMO_PROCESS, cwd=tmp_path,
                     kernel_tools="read-only") as agent:
        assert agent.capabilities["sessionCapabilities"]["fork"] == {}
        source = agent.new_session()
        source.set("model", "smart")
        source.prompt("Tell me about tide pools")
        fork = source.fork()
        assert fork.id != source.id and fork.forked_from == source.id and agent.sessions == [source, fork]
        assert fork.model == "smart" and fork.cwd == source.cwd
        assert "Tell me about tide pools" in fork.prompt("what did I say first?").text
        source.prompt("new topic: kelp")
        # the fork's own history, not the source's
        assert "You have sent 2 prompts before this one" in fork.prompt("what did I say first?").text
        # its own kernel tools: a kernel entry of its own in the request, a token unlike the source's
        (request,) = sent(agent, "session/fork")
        assert request["sessionId"] == source.id and request["cwd"] == str(tmp_path)
        assert [s["name"] for s in request["mcpServers"]] == ["kernel"]
        assert fork.kernel_tools is not None and fork.kernel_tools is not source.kernel_tools
        assert request["mcpServers"] != sent(agent, "session/new")[0]["mcpServers"]
        if where == "subprocess":  # forks are sessions like any other: listed, and reopened by a new process
            assert fork.id in [s["sessionId"] for s in agent.list_sessions()]
    if where == "subprocess":
        with acpnb.start(DEMO_PROCESS, cwd=tmp_path) as again:
            loaded = again.load_session(fork.id)
            assert [u["content"]["text"] for u in loaded.history if u["sessionUpdate"] == "user_message_chunk"][0] \
                == "Tell me about tide pools"


def test_afork_is_awaitable_and_a_fork_may_change_directory(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with acpnb.start(DemoAgent(), cwd=tmp_path) as agent:
        source = agent.new_session()
        fork = asyncio.run(source.afork(str(elsewhere), permission="allow"))
        assert fork.cwd == str(elsewhere) and fork.permission == "allow" and source.cwd == str(tmp_path)


def test_an_agent_that_does_not_advertise_fork_is_named_in_the_error(tmp_path):
    with acpnb.start(DemoAgent(legacy=True), cwd=tmp_path, name="old-demo") as agent:
        session = agent.new_session()
        with pytest.raises(acpnb.CapabilityError) as raised:
            session.fork()
        assert "agent 'old-demo' does not support session/fork" in str(raised.value)
        assert sent(agent, "session/fork") == [] and agent.sessions == [session]
        session.close()
        with pytest.raises(acpnb.AgentClosedError):
            session.fork()


# --- %acp fork on a real shell ---------------------------------------------------------------------
def run(ip, source):
    result = ip.run_cell(source)
    for error in (result.error_before_exec, result.error_in_exec):
        if error is not None:
            raise error
    return result.result


@pytest.mark.slow
def test_the_fork_command(shell):
    assert parse_line("fork") == ForkSession() and parse_line("fork --agent a --cwd d") == ForkSession("a", "d")
    with capture_output():
        run(shell, "%acp start demo")
        first = acpnb.current()
        run(shell, "%%acp\nnew topic: Owls")
    with capture_output() as captured:
        run(shell, "%acp fork")
    fork = acpnb.current()
    assert fork is not first and fork.forked_from == first.id
    assert any("Owls" in str(output.data) for output in captured.outputs)  # the fork's panel, titled as its source
    with capture_output():
        run(shell, "%%acp\nwhat did I say first?")
    assert 'You first said: "new topic: Owls"' in fork.turns[-1].text
    with capture_output():
        run(shell, "%acp start --name old -- " + " ".join([*DEMO_PROCESS, "--legacy"]))
    with pytest.raises(acpnb.CapabilityError, match="agent 'old' does not support session/fork"):
        run(shell, "%acp fork")
    assert "%acp fork" in help_text()
