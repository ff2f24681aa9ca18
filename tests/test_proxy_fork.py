"""session/fork and systemPrompt (both unstable ACP v1) through the proxy, with real demo agents behind it.

The fork is made by the agent the session is bound to and remembers the session's turns; a session not
bound yet, or bound to an agent without fork, is refused in words that say why. A system prompt reaches
only the agent session the user picks (probes get none), unchanged."""

from __future__ import annotations

import json
import sys

import pytest

import acp_notebook as acpnb
from acp_notebook.kernel_tools.channel import TOKEN_ENV
from tests.proxy_agents.harness import raw_result, start_proxies, status

proxy_factory = pytest.fixture(name="proxy_factory")(start_proxies)

LEGACY = [sys.executable, "-m", "acp_notebook.demo", "--legacy"]  # advertises neither fork nor systemPrompt
FAKE_KERNEL = {"name": "kernel", "command": sys.executable, "args": ["-m", "acp_notebook.kernel_tools.bridge"],
               "env": [{"name": "ACPNB_KERNEL_CHANNEL", "value": "/nonexistent/kernel.sock"},
                       {"name": TOKEN_ENV, "value": "the-users-own-token"}]}


def requests_of(trace, agent: str, method: str) -> list[dict]:
    records = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    return [r["msg"]["params"] for r in records
            if r["link"] == agent and r["dir"] == "out" and r["msg"].get("method") == method]


@pytest.mark.slow
def test_a_fork_is_made_by_the_bound_agent_and_remembers_the_earlier_turns(proxy_factory):
    proxy = proxy_factory({"a": "demo", "b": "demo"})
    assert proxy.capabilities["sessionCapabilities"].get("fork") == {}
    session = proxy.new_session()
    with pytest.raises(acpnb.RpcError) as unbound:  # no agent has its conversation yet
        proxy.request("session/fork", {"sessionId": session.id, "cwd": str(session.cwd), "mcpServers": []})
    assert unbound.value.code == -32602 and "pick a model" in str(unbound.value) and "prompt" in str(unbound.value)

    session.set("model", "b:smart")
    session.prompt("first words")
    session.prompt("second words")
    fork = session.fork(kernel_tools=False)
    assert fork.id != session.id and fork.model == "b:smart"
    answer = fork.prompt("what did I say before?").text
    assert "You have sent 2 prompts before this one" in answer and "second words" in answer
    assert "You have sent 2 prompts" in session.prompt("what did I say before?").text  # the source is unchanged
    sessions = status(proxy)["sessions"]
    assert sessions[fork.id]["agent"] == "b" and sessions[fork.id]["prompted"]
    assert sessions[fork.id]["backendSessionId"] != sessions[session.id]["backendSessionId"]


def test_a_fork_gets_a_relay_of_its_own_for_the_kernel_entry(proxy_factory):
    proxy = proxy_factory({"a": "demo"})
    session = proxy.new_session()
    session.prompt("hello")
    forked = proxy.request("session/fork", {"sessionId": session.id, "cwd": str(session.cwd),
                                            "mcpServers": [FAKE_KERNEL]})
    assert forked["sessionId"] in status(proxy)["sessions"]
    assert [o["id"] for o in raw_result(proxy, "session/fork")["configOptions"]][0] == "model"
    proxy.close()
    (sent,) = requests_of(proxy.trace_path, "a", "session/fork")
    (entry,) = sent["mcpServers"]
    env = {pair["name"]: pair["value"] for pair in entry["env"]}
    assert entry["name"] == "kernel" and env[TOKEN_ENV] != "the-users-own-token"  # never the client's own


@pytest.mark.slow
def test_a_fork_on_an_agent_without_fork_is_refused_naming_it(proxy_factory):
    proxy = proxy_factory({"old": LEGACY, "new": "demo"})
    assert proxy.capabilities["sessionCapabilities"].get("fork") == {}  # one of its agents forks
    session = proxy.new_session()
    session.set("model", f"old:{session.config['model'].choices[0].value.split(':', 1)[1]}")
    session.prompt("hello")
    with pytest.raises(acpnb.RpcError) as refused:
        proxy.request("session/fork", {"sessionId": session.id, "cwd": str(session.cwd), "mcpServers": []})
    assert "agent 'old' does not support session/fork" in str(refused.value)


@pytest.mark.slow
def test_a_system_prompt_reaches_only_the_picked_agent_unchanged(proxy_factory):
    proxy = proxy_factory({"a": "demo", "b": "demo"})
    assert proxy.capabilities["sessionCapabilities"]["systemPrompt"] == {"mode": {"override": {}}}
    proxy.system_prompt = "Answer like a lighthouse keeper."
    session = proxy.new_session()
    session.set("model", "b:fast")
    assert "lighthouse keeper" in session.prompt("what is your system prompt?").text
    fork = session.fork(kernel_tools=False)
    assert "lighthouse keeper" in fork.prompt("what is your system prompt?").text
    proxy.close()
    trace = proxy.trace_path
    wanted = {"mode": "append", "content": [{"type": "text", "text": "Answer like a lighthouse keeper."}]}
    probes_a = requests_of(trace, "a", "session/new")
    assert probes_a and all("systemPrompt" not in p for p in probes_a)  # a probe gets none
    new_b = requests_of(trace, "b", "session/new")
    assert "systemPrompt" not in new_b[0] and new_b[-1]["systemPrompt"] == wanted
    assert requests_of(trace, "b", "session/fork")[0]["systemPrompt"] == wanted


@pytest.mark.slow
def test_a_system_prompt_for_an_agent_that_takes_none_is_refused_naming_it(proxy_factory):
    proxy = proxy_factory({"old": LEGACY, "new": "demo"})
    proxy.system_prompt = "Be brief."
    session = proxy.new_session()
    old_model = next(c.value for c in session.config["model"].choices if c.value.startswith("old:"))
    with pytest.raises(acpnb.ConfigOptionError) as refused:
        session.set("model", old_model)
    assert "agent 'old' does not take a system prompt" in str(refused.value)
