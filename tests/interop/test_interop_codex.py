"""codex-acp 0.16.0 (the native binary) through our public API: initialize, authentication from
OPENAI_API_KEY when codex asks for it, its three options and what it accepts, full turns against
the model server (streaming, a shell command it asks permission for, allowed and rejected), cancel,
and its end (it does not exit on EOF: our client ends its process group)."""

from __future__ import annotations

import pytest
from agent_setups import DUMMY_KEY, codex_openai_args
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
from tests.processes import wait_gone

pytestmark = pytest.mark.interop


def sent_methods(agent: acpnb.Agent) -> list[str]:
    return [e["msg"]["method"] for e in agent.log if e["dir"] == "send" and "method" in e["msg"]]


def test_initialize_and_without_a_key_what_to_set(interop):
    agent = interop.start_by_name("codex")  # what `%acp start codex` runs; no key anywhere
    assert agent.info == {"name": "codex-acp", "title": "Codex", "version": "0.16.0"}
    assert set(agent.capabilities["sessionCapabilities"]) == {"list", "resume", "close"}
    assert agent.capabilities["auth"] == {"logout": {}}
    assert [m["id"] for m in agent.auth_methods] == ["chatgpt", "codex-api-key", "openai-api-key"]
    assert [v["name"] for v in agent.auth_methods[2]["vars"]] == ["OPENAI_API_KEY"]
    with pytest.raises(acpnb.RpcError) as info:
        agent.new_session()
    assert info.value.code == -32000 and info.value.rpc_message == "Authentication required"
    assert info.value.hint.startswith("Agent 'codex' needs a key or a login: set OPENAI_API_KEY or CODEX_API_KEY")
    assert "authenticate" not in sent_methods(agent) and agent.auth_method is None


def test_the_key_in_the_environment_authenticates_and_reaches_the_model(interop, model_server):
    # Codex's own OpenAI provider, moved to the model server: like a real OPENAI_API_KEY user.
    agent = interop.start("codex", env={"OPENAI_API_KEY": DUMMY_KEY}, extra_args=codex_openai_args(model_server),
                          permission="allow")
    session = agent.new_session()
    assert agent.auth_method == "openai-api-key"
    assert sent_methods(agent) == ["initialize", "session/new", "authenticate", "session/new"]
    assert session.config.ids() == ["mode", "model", "reasoning_effort"]
    turn = session.prompt("say hi", timeout=TURN_TIMEOUT)
    # Codex first tries a WebSocket to the endpoint, says so in the reply, and falls back to HTTP.
    assert turn.stop_reason == "end_turn" and turn.text.endswith(HELLO + "say hi"), turn.text
    request = model_server.wait_for(lambda r: r.method == "POST" and r.path == "/v1/responses", timeout=5)
    assert {k.lower(): v for k, v in request.headers.items()}["authorization"] == f"Bearer {DUMMY_KEY}"


def test_options_and_what_codex_accepts(interop, model_server):
    agent = interop.start("codex", model_server)  # our own model provider: no authenticate needed
    session = agent.new_session()
    assert agent.auth_method is None and "authenticate" not in sent_methods(agent)
    assert [(o.id, o.category) for o in session.config] == [("mode", "mode"), ("model", "model"),
                                                            ("reasoning_effort", "thought_level")]
    assert all(o.legacy_source is None for o in session.config)  # it sends old `modes` too; ignored
    assert session.config["mode"].values == ["read-only", "auto", "full-access"]
    assert session.config["mode"].value == "read-only"
    assert session.config["model"].values == ["gpt-5.5", "gpt-5.4", "gpt-5.4-mini", "gpt-5.3-codex", "gpt-5.2"]
    assert session.model == "gpt-5.4"
    assert session.config["reasoning_effort"].values == ["low", "medium", "high", "xhigh"]

    for option_id, value in [("mode", "auto"), ("model", "gpt-5.5"), ("reasoning_effort", "high")]:
        assert session.set(option_id, value)[option_id].value == value
    before, sent = session.config, len(agent.log)
    for option_id, value in [("mode", "nope"), ("reasoning_effort", "extreme"), ("nope", "x")]:
        with pytest.raises(acpnb.ConfigOptionError):
            session.set(option_id, value)
    assert len(agent.log) == sent and session.config == before

    with pytest.raises(acpnb.RpcError) as info:
        agent.request("session/set_config_option", {"sessionId": session.id, "configId": "mode", "value": "nope"})
    assert (info.value.code, info.value.rpc_message, info.value.data) == (-32602, "Invalid params", None)
    with pytest.raises(acpnb.RpcError) as info:
        agent.request("session/set_config_option", {"sessionId": session.id, "configId": "nope", "value": "x"})
    assert info.value.data == "Unsupported config option"
    assert session.config == before

    # Codex accepts ANY model id (our client only offers the listed ones; sent raw here): the id
    # is added at the top of the list and, as codex knows nothing about it, reasoning_effort goes.
    agent.request("session/set_config_option", {"sessionId": session.id, "configId": "model", "value": "my-model"})
    assert session.model == "my-model" and session.config["model"].values[0] == "my-model"
    assert "reasoning_effort" not in session.config
    with pytest.raises(acpnb.ConfigOptionError, match="no config option 'reasoning_effort'"):
        session.set("reasoning_effort", "low")
    with pytest.raises(acpnb.RpcError) as info:
        agent.request("session/set_config_option",
                      {"sessionId": session.id, "configId": "reasoning_effort", "value": "low"})
    assert info.value.data == "Reasoning effort can only be set for known model presets"
    assert "reasoning_effort" in session.set("model", "gpt-5.4")  # a known model brings it back


def test_full_turns_with_a_command_it_asks_permission_for(interop, model_server):
    agent = interop.start("codex", model_server, permission="allow")
    session = agent.new_session()
    turn = session.prompt("say hi", timeout=TURN_TIMEOUT)
    assert_streamed(turn, HELLO + "say hi")
    assert turn.usage["used"] > 0 and turn.usage["size"] > turn.usage["used"] and turn.cost is None
    request = model_server.wait_for(lambda r: r.path == "/v1/responses", timeout=5)
    assert request.body["stream"] is True and request.body["model"] == "gpt-5.4"

    thinking = session.prompt("think tides", timeout=TURN_TIMEOUT)
    assert thinking.text == "Thought about tides." and "Thinking about: tides" in thinking.thoughts

    # Codex has no file-writing tool: the model server has it run printf with escalated sandbox
    # permissions, which is what makes codex ask (unescalated commands need bubblewrap, FINDINGS 5.3).
    allowed = interop.work / "allowed.txt"
    turn = session.prompt(f"write {allowed} with hello world", timeout=TURN_TIMEOUT)
    assert allowed.read_text() == "hello world"
    (record,) = turn.permissions
    assert chosen_kind(record) == "allow_once" and record.chosen == "approved"
    # The permission request is where codex first mentions the tool call; the client tracks it from there.
    (call,) = turn.tool_calls
    assert call.id == record.tool_call["toolCallId"] and (call.kind, call.status) == ("execute", "completed")
    assert call.raw_output["exit_code"] == 0
    assert turn.stop_reason == "end_turn"

    session.permission = "deny"
    denied = interop.work / "denied.txt"
    turn = session.prompt(f"write {denied} with should not exist", timeout=TURN_TIMEOUT)
    assert not denied.exists()
    (record,) = turn.permissions
    assert chosen_kind(record) == "reject_once" and record.chosen == "abort"
    assert turn.stop_reason == "cancelled"  # "abort" ends codex's turn


def test_cancel_and_the_process_ends_with_close(interop, model_server):
    agent = interop.start("codex", model_server)
    session = agent.new_session()
    assert_cancelled_mid_stream(cancel_after_first_chunk(session, "slow " + SLOW_WORDS))
    assert_streamed(session.prompt("after cancel", timeout=TURN_TIMEOUT), HELLO + "after cancel")
    pid = agent.pid
    agent.close()
    # codex ignores EOF on stdin; the client's SIGTERM to the process group ends it.
    assert wait_gone(pid, 10) and agent.exit_code == -15
