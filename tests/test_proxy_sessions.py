"""A proxy session's phases, the client's MCP servers on the agents' sessions, and the values the client set
put back when a new proxy process reopens a session on an agent that reopens it on its defaults."""

from __future__ import annotations

import json

import pytest

from acp_notebook.proxy.session import TRANSITIONS, IllegalTransition, Phase, ProxySession
from tests.proxy_agents.harness import quirky, start_proxies

proxy_factory = pytest.fixture(name="proxy_factory")(start_proxies)

KERNEL_SERVER = {"name": "kernel", "command": "/usr/bin/env", "args": ["kernel-bridge", "--token", "t"], "env": []}


@pytest.fixture
def own_state(tmp_path, monkeypatch):
    """A proxy state directory of this test's own (the proxies started below inherit the variable)."""
    state = tmp_path / "proxy-state"
    monkeypatch.setenv("ACP_NOTEBOOK_PROXY_STATE", str(state))
    return state


class _Backend:
    name = "a"


class _Candidate:
    def __init__(self, session: ProxySession) -> None:
        self.session, self.agent, self.backend_session_id = session, "a", "s1"


def test_the_transition_table_is_the_only_way_a_phase_changes():
    assert TRANSITIONS[Phase.CLOSED] == frozenset()
    session = ProxySession(id="p", params={})
    with pytest.raises(IllegalTransition, match="prompted with nothing bound"):
        session.tie()
    candidate = _Candidate(session)
    assert session.bind(candidate) is True and session.phase is Phase.BOUND  # type: ignore[arg-type]
    assert session.bind(candidate) is False  # the same agent session again: nothing new to remember
    session.tie()
    assert session.phase is Phase.PROMPTED and session.prompted
    session.bind(candidate)  # type: ignore[arg-type]
    assert session.phase is Phase.PROMPTED  # a reopen on its agent keeps it tied
    session.unbind()
    assert session.phase is Phase.UNBOUND and session.bound is None
    session.close()
    for move in (session.unbind, session.close, lambda: session.bind(candidate)):  # type: ignore[arg-type]
        with pytest.raises(IllegalTransition, match="closed -> "):
            move()


def backend_frames(trace, agent: str, method: str) -> list[dict]:
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    return [r["msg"]["params"] for r in records
            if r["link"] == agent and r["dir"] == "out" and r["msg"].get("method") == method]


@pytest.mark.slow
def test_the_client_mcp_servers_reach_the_agents_on_new_bind_and_load(proxy_factory, own_state, tmp_path):
    agents = {"q": quirky("--store", str(tmp_path / "q.json")), "r": quirky("--store", str(tmp_path / "r.json"))}
    first = proxy_factory(agents)
    session = first.new_session(mcp_servers=[KERNEL_SERVER])
    session.set("model", "r:org:model-b:latest")  # r's probe had no servers: a fresh session on r gets the list
    assert json.loads(session.prompt("mcp").text) == [KERNEL_SERVER]
    first.close()  # the trace is complete once the proxy has ended
    # Only the picked agent receives the client's servers: q (never picked) and r's probe got none.
    assert [p["mcpServers"] for p in backend_frames(first.trace_path, "q", "session/new")] == [[]]
    assert [p["mcpServers"] for p in backend_frames(first.trace_path, "r", "session/new")] == [[], [KERNEL_SERVER]]

    second = proxy_factory(agents)
    second.request("session/load", {"sessionId": session.id, "cwd": str(second.cwd), "mcpServers": [KERNEL_SERVER]})
    answer = second.request("session/prompt", {"sessionId": session.id,
                                               "prompt": [{"type": "text", "text": "mcp"}]})
    assert answer["stopReason"] == "end_turn"
    said = [e["msg"]["params"]["update"]["content"]["text"] for e in list(second.log)
            if e["msg"].get("method") == "session/update"
            and e["msg"]["params"]["update"].get("sessionUpdate") == "agent_message_chunk"]
    assert json.loads(said[-1]) == [KERNEL_SERVER]
    second.close()  # the trace is complete once the proxy has ended
    (loaded,) = backend_frames(second.trace_path, "r", "session/load")
    assert loaded["mcpServers"] == [KERNEL_SERVER]


@pytest.mark.slow  # three proxy processes, one after the other
def test_a_new_proxy_process_puts_back_the_model_and_options_the_client_set(proxy_factory, own_state, tmp_path):
    agents = {"q": quirky("--store", str(tmp_path / "q.json"))}
    first = proxy_factory(agents)
    session = first.new_session()
    session.set("model", "q:org:model-b:latest")
    session.set("effort", "high")
    assert session.prompt("hello").text.startswith("quirky(org:model-b:latest, effort=high)")
    first.close()

    # The agent reopens its sessions on its defaults (model-a, low): the proxy sets the values again.
    second = proxy_factory(agents)
    again = second.load_session(session.id)
    assert again.model == "q:org:model-b:latest" and again.config["effort"].value == "high"
    assert again.prompt("and now?").text.startswith("quirky(org:model-b:latest, effort=high)")
    second.close()

    # A value the agent no longer offers is reported, not guessed; the others are still put back.
    with (own_state / "bindings.jsonl").open("a") as bindings:
        bindings.write(json.dumps({"sessionId": session.id, "option": "verbosity", "value": "epic"}) + "\n")
    third = proxy_factory(agents)
    answer = third.request("session/load", {"sessionId": session.id, "cwd": str(third.cwd), "mcpServers": []})
    (missing,) = answer["_meta"]["acp-notebook/proxy"]["notRestored"]
    assert missing["configId"] == "verbosity" and missing["value"] == "epic"
    assert "no longer offers it" in missing["reason"]
    values = {o["id"]: o["currentValue"] for o in answer["configOptions"]}
    assert values["model"] == "q:org:model-b:latest" and values["effort"] == "high"
    assert values["verbosity"] == "terse"


@pytest.mark.slow
def test_before_its_first_prompt_a_reopened_session_gets_its_model_and_options_back(proxy_factory, own_state,
                                                                                    tmp_path):
    agents = {"q": quirky("--store", str(tmp_path / "q.json")), "r": quirky("--store", str(tmp_path / "r.json"))}
    first = proxy_factory(agents)
    session = first.new_session()
    session.set("model", "r:org:model-b:latest")
    session.set("effort", "high")
    first.close()

    second = proxy_factory(agents)
    again = second.load_session(session.id)
    assert again.model == "r:org:model-b:latest" and again.config["effort"].value == "high"
    assert "q:vendor/model-a" in again.config["model"].values  # still free to move to the other agent
    assert again.prompt("hi").text.startswith("quirky(org:model-b:latest, effort=high)")
