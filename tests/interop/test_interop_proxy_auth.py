"""codex with its built-in OpenAI provider behind our proxy: the proxy authenticates the backend from
OPENAI_API_KEY (the registry's auth_env) when codex answers "authentication required", as our client
does for an agent started directly."""

from __future__ import annotations

import pytest
from agent_setups import DUMMY_KEY, codex_openai_env
from interop_support import HELLO, TURN_TIMEOUT

pytestmark = pytest.mark.interop


def test_codex_builtin_provider_is_authenticated_by_the_proxy(interop, model_server):
    env = {"OPENAI_API_KEY": DUMMY_KEY, **codex_openai_env(model_server, interop.new_home("codex"))}
    spec = interop.spec("codex", env=env)
    proxy = interop.start_proxy({"codex": spec})
    session = proxy.new_session()  # the probe: session/new, authenticate, session/new
    assert "codex:gpt-5.4" in session.config["model"].values
    assert proxy.request("_proxy/status", {})["agents"]["codex"]["authMethod"] == "api-key"
    session.set("model", "codex:gpt-5.4")
    turn = session.prompt("say hi", timeout=TURN_TIMEOUT)
    assert turn.stop_reason == "end_turn" and turn.text.endswith(HELLO + "say hi"), turn.text
    request = model_server.wait_for(lambda r: r.method == "POST" and r.path == "/v1/responses", timeout=5)
    assert {k.lower(): v for k, v in request.headers.items()}["authorization"] == f"Bearer {DUMMY_KEY}"
    # Our client asked for nothing: the proxy did it.
    assert not [e for e in proxy.log if e["dir"] == "send" and e["msg"].get("method") == "authenticate"]


def test_codex_without_a_key_behind_the_proxy_says_what_to_do(interop, model_server):
    spec = interop.spec("codex", env=codex_openai_env(model_server, interop.new_home("codex")))
    proxy = interop.start_proxy({"codex": spec})
    proxy.new_session()
    answers = [e["msg"] for e in proxy.log if e["dir"] == "recv" and "result" in e["msg"]
               and "sessionId" in (e["msg"]["result"] or {})]
    failed = answers[-1]["result"]["_meta"]["acp-notebook/proxy"]["failed"]["codex"]
    assert "Authentication required" in failed and "set OPENAI_API_KEY or CODEX_API_KEY" in failed
    assert "codex:api-key" in failed
    assert proxy.request("_proxy/status", {})["agents"]["codex"]["authMethod"] is None
