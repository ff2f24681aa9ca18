"""A proxy session used from a new proxy process at every step, as clients that reconnect on every call
(acpx) use it: created in one process, its model picked in the next, prompted in a third.

Found by the acpx interop test (tests/interop/test_interop_clients.py): a session reopened before its
first prompt was tied to the first agent in its id, so `acpx set model b:smart` after `acpx sessions
new` was refused; and two demo agents sharing one store listed a session bound to b also as a's."""

from __future__ import annotations

import pytest

import acp_notebook as acpnb
from acp_notebook.proxy.ids import decode_session_id
from tests.proxy_agents.harness import start_proxies, status

proxy_factory = pytest.fixture(name="proxy_factory")(start_proxies)

ALL_MODELS = ["a:fast", "a:smart", "b:fast", "b:smart"]


@pytest.fixture
def own_state(tmp_path, monkeypatch):
    """A proxy state directory of this test's own (the proxies started below inherit the variable)."""
    monkeypatch.setenv("ACP_NOTEBOOK_PROXY_STATE", str(tmp_path / "proxy-state"))


def reopened(proxy_factory, session_id):
    proxy = proxy_factory({"a": "demo", "b": "demo"})
    return proxy, proxy.resume_session(session_id)


@pytest.mark.slow
def test_before_its_first_prompt_a_reopened_session_can_still_move_to_any_agent(proxy_factory, own_state,
                                                                                  demo_state_dir):
    first = proxy_factory({"a": "demo", "b": "demo"})
    session_id = first.new_session().id
    first.close()

    proxy, session = reopened(proxy_factory, session_id)
    assert session.config["model"].values == ALL_MODELS and session.config.ids() == ["model"]
    assert session.set("model", "b:smart")["thought_level"].value  # bound to b: its dependent option is there
    proxy.close()

    proxy, session = reopened(proxy_factory, session_id)
    assert session.model == "b:smart"  # the binding was remembered...
    assert session.config["model"].values == ALL_MODELS  # ...and the other agent can still be picked
    assert "thought_level" not in session.set("model", "a:fast")
    session.set("model", "b:smart")
    session.set("thought_level", "high")
    turn = session.prompt("new topic: lighthouses")
    assert "Thought 3 of 3" in turn.thoughts
    assert session.config["model"].values == ALL_MODELS  # a's models stay listed: a pick of one hands over
    proxy.close()

    proxy, session = reopened(proxy_factory, session_id)
    # a proxy process that never saw agent a probes it once (a session opened and deleted) to list its models
    assert session.model == "b:smart" and session.config["model"].values == ALL_MODELS
    assert "lighthouses" in session.prompt("what did I say first?").text.lower()
    # One entry: a's session, picked for a while, was deleted at the first prompt, and b's session, which
    # agent a also sees (the two demo agents share one store), is listed once, by the id the client knows.
    (listed,) = proxy.list_sessions(proxy.cwd)
    assert listed["sessionId"] == session_id and listed["title"] == "Lighthouses"
    assert listed["_meta"]["acp-notebook/proxy"]["agent"] == "b"
    a_session = decode_session_id(session_id)[0][1]
    assert not (demo_state_dir / f"{a_session}.json").exists()

    # a's model picked there hands the conversation over (the turns this process saw: session/resume replays none)
    assert session.set("model", "a:fast")["model"].value == "a:fast"
    turn = session.prompt("what did I say before?")
    assert 'before this one: "what did I say first?"' in turn.text
    assert status(proxy)["sessions"][session_id]["agent"] == "a"


@pytest.mark.slow
def test_a_never_prompted_session_whose_agent_sessions_are_gone_is_not_found(proxy_factory, own_state,
                                                                          demo_state_dir):
    first = proxy_factory({"a": "demo", "b": "demo"})
    session_id = first.new_session().id
    first.close()
    for _agent, backend_id in decode_session_id(session_id):
        (demo_state_dir / f"{backend_id}.json").unlink()
    proxy = proxy_factory({"a": "demo", "b": "demo"})
    with pytest.raises(acpnb.RpcError) as missing:
        proxy.resume_session(session_id)
    assert missing.value.code == -32002 and "no agent could reopen" in str(missing.value)
