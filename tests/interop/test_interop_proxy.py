"""The real agents behind our multi-agent proxy (`acpnb.start_proxy`): one model list with every
agent's models as `agent:model`, binding a session to each agent, full turns through the proxy.

The proxy in front of claude and opencode serves the module's first two tests (opencode's start alone costs
about 5 core-seconds); each works in sessions of its own and checks what arrived after it began."""

from __future__ import annotations

import json

import pytest
from interop_support import (
    HELLO,
    SLOW_WORDS,
    TURN_TIMEOUT,
    assert_cancelled_mid_stream,
    assert_streamed,
    cancel_after_first_chunk,
    chosen_kind,
)

import acp_notebook as acpnb

pytestmark = pytest.mark.interop

CLAUDE_MODELS = ["claude:default", "claude:opus", "claude:fable", "claude:sonnet", "claude:haiku"]
OPENCODE_MODELS = ["opencode:interop/interop-model", "opencode:interop/interop-model-large"]


@pytest.fixture(scope="module")
def proxy(module_interop, module_model_server):
    return module_interop.start_proxy({"claude": module_interop.spec("claude", module_model_server),
                                       "opencode": module_interop.spec("opencode", module_model_server)},
                                      permission="allow")


def test_both_agents_models_namespaced_and_a_claude_turn(module_interop, module_model_server, proxy):
    assert proxy.info["name"] == "acp-notebook-proxy"
    # claude offers its terminal login (our client handles terminal logins), opencode its own login method
    assert [m["id"] for m in proxy.auth_methods] == ["claude:claude-ai-login", "claude:console-login",
                                                     "opencode:opencode-login"]
    session = proxy.new_session()
    model = session.config["model"]
    assert session.config.ids() == ["model"]  # nothing but the model before one is picked
    assert model.values == CLAUDE_MODELS + OPENCODE_MODELS
    assert [choice.group for choice in model.choices] == ["claude"] * 5 + ["opencode"] * 2
    assert model.value == "claude:default"

    session.set("model", "claude:haiku")  # binds the session to claude
    assert {"mode", "model", "effort"} <= set(session.config.ids()) and session.model == "claude:haiku"
    session.set("mode", "default")  # claude's own default, "auto", approves tools without asking
    assert session.config["model"].values == CLAUDE_MODELS + OPENCODE_MODELS
    turn = session.prompt("say hi", timeout=TURN_TIMEOUT)
    assert_streamed(turn, HELLO + "say hi")
    request = module_model_server.wait_for(lambda r: r.path.startswith("/v1/messages")
                                           and "say hi" in json.dumps(r.body.get("messages")), timeout=5)
    assert request.body["model"].startswith("claude-haiku-")

    target = module_interop.work / "from-claude.txt"
    turn = session.prompt(f"write {target} with through the proxy", timeout=TURN_TIMEOUT)
    assert target.read_text() == "through the proxy"
    assert chosen_kind(turn.permissions[0]) == "allow_once" and turn.tool_calls[0].status == "completed"

    # After the first prompt, another agent's model hands the conversation over to it (proxy/handover.py).
    session.set("model", OPENCODE_MODELS[0])
    assert session.model == OPENCODE_MODELS[0]


def test_an_opencode_session_its_effort_option_and_fs_through_the_proxy(module_interop, proxy):
    since = len(proxy.log)
    session = proxy.new_session()
    session.set("model", OPENCODE_MODELS[1])  # the reasoning model: opencode adds `effort`
    assert session.config.ids() == ["model", "effort", "mode"]
    assert session.set("effort", "high")["effort"].value == "high"
    assert "effort" not in session.set("model", OPENCODE_MODELS[0])
    assert session.model == OPENCODE_MODELS[0]

    assert_streamed(session.prompt("say hi", timeout=TURN_TIMEOUT), HELLO + "say hi")
    target = module_interop.work / "from-opencode.txt"
    turn = session.prompt(f"write {target} with through the proxy", timeout=TURN_TIMEOUT)
    assert target.read_text() == "through the proxy"
    # opencode's fs/write_text_file came through the proxy to our client.
    writes = [e["msg"]["params"] for e in proxy.log[since:] if e["dir"] == "recv"
              and e["msg"].get("method") == "fs/write_text_file"]
    assert [w["path"] for w in writes] == [str(target)]
    assert chosen_kind(turn.permissions[0]) == "allow_once"

    assert_cancelled_mid_stream(cancel_after_first_chunk(session, "slow " + SLOW_WORDS))


def test_codex_and_gemini_behind_the_proxy(interop, model_server):
    proxy = interop.start_proxy({"codex": interop.spec("codex", model_server),
                                 "gemini": interop.spec("gemini", model_server)})
    session = proxy.new_session()
    values = session.config["model"].values
    # gemini has no model option (only the old `models` field): the proxy lists it as one entry.
    # codex lists the configured model first, then the ones it knows.
    assert values[0] == "codex:gpt-5.4" and "codex:gpt-5.5" in values and values[-1] == "gemini:default"
    session.set("model", "codex:gpt-5.4")
    assert session.config.ids() == ["mode", "collaboration_mode", "model"]
    assert_streamed(session.prompt("say hi", timeout=TURN_TIMEOUT), HELLO + "say hi")

    other = proxy.new_session()
    other.set("model", "gemini:default")
    # gemini's old `modes` field becomes a `mode` option, set through session/set_mode.
    assert other.config.ids() == ["model", "mode"]
    assert other.config["mode"].values == ["default", "autoEdit", "yolo", "plan"]
    assert other.set("mode", "plan")["mode"].value == "plan"
    with pytest.raises(acpnb.ConfigOptionError, match="Cannot enable privileged approval modes"):
        other.set("mode", "yolo")  # gemini's refusal reaches the client; the option keeps its value
    assert other.config["mode"].value == "plan"
    other.set("mode", "default")
    assert_streamed(other.prompt("say hello", timeout=TURN_TIMEOUT), HELLO + "say hello")
