"""Backends behind the proxy that want authentication: from the registry's env-var mapping
(AgentSpec.auth_env) once per agent process, or by the client's own `authenticate agent:method`.

The agent is the quirky test agent with --auth-var; every frame on every pipe is schema-checked."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

import acp_notebook as acpnb
from acp_notebook.launch import AgentSpec
from tests.proxy_agents.harness import (
    quirky,
    raw_result,
    requests_to,
    start_proxies,
    status,
)

proxy_factory = pytest.fixture(name="proxy_factory")(start_proxies)

KEY_VAR = "QUIRKY_PROXY_TEST_KEY"
LOCKED_MODELS = ["locked:vendor/model-a", "locked:org:model-b:latest"]


def locked_spec(**changes) -> AgentSpec:
    """A registry-style entry for the locked agent: its key variable maps to its `quirky-key` method."""
    fields = {"name": "locked", "command": tuple(quirky("--auth-var", KEY_VAR)),
              "auth_env": {"UNSET_QUIRKY_VAR": "quirky-login", KEY_VAR: "quirky-key"},
              "key_vars": (KEY_VAR,)}
    return AgentSpec(**{**fields, **changes})


@pytest.fixture(autouse=True)
def no_key_in_our_environment(monkeypatch):
    monkeypatch.delenv(KEY_VAR, raising=False)
    monkeypatch.delenv("UNSET_QUIRKY_VAR", raising=False)


@pytest.mark.slow
def test_the_key_in_the_environment_authenticates_once_per_process(proxy_factory):
    proxy = proxy_factory({"locked": locked_spec(), "open": quirky()}, env={KEY_VAR: "sesame"})
    session = proxy.new_session()
    assert session.config["model"].values[:2] == LOCKED_MODELS
    assert status(proxy)["agents"]["locked"]["authMethod"] == "quirky-key"
    # The client sees the proxy's methods, but has nothing to do.
    assert [m["id"] for m in proxy.auth_methods] == ["locked:quirky-key", "locked:quirky-login"]

    session.set("model", LOCKED_MODELS[1])
    turn = session.prompt("hello")
    assert turn.stop_reason == "end_turn" and "quirky(org:model-b:latest" in turn.text
    assert [s["sessionId"] for s in proxy.list_sessions()]  # session/list reaches the agent too

    # A new process authenticates again (the old one's login died with it).
    with pytest.raises(acpnb.RpcError):
        session.prompt("crash now")
    assert session.prompt("again").stop_reason == "end_turn"
    assert status(proxy)["agents"]["locked"]["starts"] == 2

    # A prompt refused for want of authentication is never authenticated and sent again.
    with pytest.raises(acpnb.RpcError) as expired:
        session.prompt("expire")
    assert expired.value.code == -32000
    proxy.close()
    sent = requests_to(proxy.trace_path, "locked")
    assert sent.count("authenticate") == 2 and sent.count("session/prompt") == 4
    first_process = sent[:sent.index("session/prompt")]
    assert first_process[:2] == ["initialize", "session/new"] and first_process.count("authenticate") == 1
    assert "authenticate" not in requests_to(proxy.trace_path, "open")


@pytest.mark.slow
def test_concurrent_session_requests_share_one_attempt(proxy_factory):
    # The agent holds its authenticate answer until both session/new were refused: both probes then
    # wait on the same attempt, and both are sent again after it.
    spec = locked_spec(command=tuple(quirky("--auth-var", KEY_VAR, "--auth-after", "2")))
    proxy = proxy_factory({"locked": spec}, env={KEY_VAR: "sesame"})
    with ThreadPoolExecutor(2) as pool:
        sessions = list(pool.map(lambda _: proxy.new_session(), range(2)))
    for session in sessions:
        assert session.config["model"].values == LOCKED_MODELS
    proxy.close()
    sent = requests_to(proxy.trace_path, "locked")
    assert sent.count("authenticate") == 1 and sent.count("session/new") == 4 and sent[-1] == "session/new"


@pytest.mark.slow
def test_without_the_key_the_probe_says_what_to_do_and_the_client_can_authenticate(proxy_factory):
    proxy = proxy_factory({"locked": locked_spec(), "open": quirky("--name", "open")})
    session = proxy.new_session()
    assert session.config["model"].values == ["open:vendor/model-a", "open:org:model-b:latest"]
    failed = raw_result(proxy, "session/new")["_meta"]["acp-notebook/proxy"]["failed"]["locked"]
    assert "set QUIRKY_PROXY_TEST_KEY" in failed
    assert "authenticate with one of: locked:quirky-key, locked:quirky-login" in failed
    assert status(proxy)["agents"]["locked"]["authMethod"] is None

    # The client's own authenticate goes to the agent named by the prefix, bare method id.
    assert proxy.authenticate("locked:quirky-login") == {}
    assert status(proxy)["agents"]["locked"]["authMethod"] == "quirky-login"
    assert proxy.new_session().config["model"].values[:2] == LOCKED_MODELS
    with pytest.raises(acpnb.RpcError) as unknown:
        proxy.request("authenticate", {"methodId": "open:quirky-login"})
    assert unknown.value.code == -32602 and "locked:quirky-key, locked:quirky-login" in str(unknown.value)
    proxy.close()
    assert requests_to(proxy.trace_path, "locked").count("authenticate") == 1


@pytest.mark.slow
def test_a_refused_key_is_reported_and_not_tried_again_by_the_same_process(proxy_factory):
    proxy = proxy_factory({"locked": locked_spec(), "open": quirky()}, env={KEY_VAR: "wrong"})
    for _ in range(2):
        proxy.new_session()
        failed = raw_result(proxy, "session/new")["_meta"]["acp-notebook/proxy"]["failed"]["locked"]
        assert "refused authenticate 'quirky-key' (with the key in $QUIRKY_PROXY_TEST_KEY)" in failed
        assert "is not valid" in failed
    proxy.close()
    assert requests_to(proxy.trace_path, "locked").count("authenticate") == 1


@pytest.mark.slow
def test_a_plain_command_is_not_authenticated_on_its_behalf(proxy_factory):
    """Without a registry entry there is no variable -> method mapping: the agent's refusal stands."""
    proxy = proxy_factory({"locked": quirky("--auth-var", KEY_VAR), "open": quirky()}, env={KEY_VAR: "sesame"})
    proxy.new_session()
    failed = raw_result(proxy, "session/new")["_meta"]["acp-notebook/proxy"]["failed"]["locked"]
    assert "authenticate with one of: locked:quirky-key" in failed
    proxy.close()
    assert "authenticate" not in requests_to(proxy.trace_path, "locked")
