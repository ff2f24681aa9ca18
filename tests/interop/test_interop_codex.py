"""codex-acp 2.6.0 (a node adapter over `codex app-server`) through our public API: initialize,
authentication from OPENAI_API_KEY when codex asks for it, its options and what it accepts, full turns
against the model server (streaming, a shell command it asks permission for in read-only mode, allowed
and rejected, tool calls with their `name`), cancel, and its end."""

from __future__ import annotations

import pytest
from agent_setups import DUMMY_KEY, codex_openai_env
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
    assert agent.info == {"name": "@agentclientprotocol/codex-acp", "title": "Codex", "version": "2.6.0"}
    assert set(agent.capabilities["sessionCapabilities"]) == {
        "list", "resume", "close", "delete", "fork", "title", "additionalDirectories", "subagents", "systemPrompt"}
    assert agent.capabilities["auth"] == {"logout": {}}
    assert [m["id"] for m in agent.auth_methods] == ["api-key", "chat-gpt"]
    with pytest.raises(acpnb.RpcError) as info:
        agent.new_session()
    assert info.value.code == -32000 and info.value.rpc_message == "Authentication required"
    assert info.value.hint.startswith("Agent 'codex' needs a key or a login: set OPENAI_API_KEY or CODEX_API_KEY")
    assert "authenticate" not in sent_methods(agent) and agent.auth_method is None


def test_the_key_in_the_environment_authenticates_and_reaches_the_model(interop, model_server):
    # Codex's own OpenAI provider, moved to the model server: like a real OPENAI_API_KEY user.
    env = {"OPENAI_API_KEY": DUMMY_KEY, **codex_openai_env(model_server, interop.new_home("codex"))}
    agent = interop.start("codex", env=env, permission="allow")
    session = agent.new_session()
    assert agent.auth_method == "api-key"
    assert sent_methods(agent) == ["initialize", "session/new", "authenticate", "session/new"]
    assert {"mode", "model"} <= set(session.config.ids())
    turn = session.prompt("say hi", timeout=TURN_TIMEOUT)
    assert turn.stop_reason == "end_turn" and turn.text.endswith(HELLO + "say hi"), turn.text
    request = model_server.wait_for(lambda r: r.method == "POST" and r.path == "/v1/responses", timeout=5)
    assert {k.lower(): v for k, v in request.headers.items()}["authorization"] == f"Bearer {DUMMY_KEY}"


def test_options_and_what_codex_accepts(interop, model_server):
    agent = interop.start("codex", model_server)  # our own model provider: no authenticate needed
    session = agent.new_session()
    assert agent.auth_method is None and "authenticate" not in sent_methods(agent)
    assert [(o.id, o.category) for o in session.config] == [
        ("mode", "mode"), ("collaboration_mode", "collaboration_mode"), ("model", "model")]
    assert all(o.legacy_source is None for o in session.config)  # it sends old `modes`/`models` too; ignored
    assert session.config["mode"].values == ["read-only", "workspace-write", "agent", "agent-full-access"]
    assert session.config["mode"].value == "agent"
    assert session.config["collaboration_mode"].values == ["default", "plan"]
    # The configured model first, then the ones codex knows; it has no metadata for ours, so no reasoning_effort.
    assert session.config["model"].values[0] == "gpt-5.4" and "gpt-5.5" in session.config["model"].values
    assert session.model == "gpt-5.4"

    for option_id, value in [("mode", "read-only"), ("collaboration_mode", "plan")]:
        assert session.set(option_id, value)[option_id].value == value
    # Refused before anything is sent (what codex sends meanwhile, e.g. its command list, does not count).
    before, sent = session.config, len(sent_methods(agent))
    for option_id, value in [("mode", "nope"), ("nope", "x")]:
        with pytest.raises(acpnb.ConfigOptionError):
            session.set(option_id, value)
    assert len(sent_methods(agent)) == sent and session.config == before
    with pytest.raises(acpnb.RpcError) as info:
        agent.request("session/set_config_option", {"sessionId": session.id, "configId": "nope", "value": "x"})
    assert info.value.code in (-32602, -32603)
    assert session.config == before
    # A model codex knows brings its reasoning_effort option.
    assert session.set("model", "gpt-5.5")["reasoning_effort"].category == "thought_level"


def test_full_turns_with_a_command_it_asks_permission_for(interop, model_server):
    agent = interop.start("codex", model_server, permission="allow")
    session = agent.new_session()
    session.set("mode", "read-only")  # in its default mode "agent" a reviewer model approves commands instead
    turn = session.prompt("say hi", timeout=TURN_TIMEOUT)
    assert_streamed(turn, HELLO + "say hi")
    assert turn.usage["used"] > 0 and turn.usage["size"] > turn.usage["used"] and turn.cost is None
    request = model_server.wait_for(lambda r: r.path == "/v1/responses", timeout=5)
    assert request.body["stream"] is True and request.body["model"] == "gpt-5.4"

    thinking = session.prompt("think tides", timeout=TURN_TIMEOUT)
    assert thinking.text == "Thought about tides." and "Thinking about: tides" in thinking.thoughts

    # Codex has no file-writing tool: the model server has it run printf with escalated sandbox
    # permissions, which is what makes codex ask in read-only mode.
    allowed = interop.work / "allowed.txt"
    turn = session.prompt(f"write {allowed} with hello world", timeout=TURN_TIMEOUT)
    assert allowed.read_text() == "hello world"
    (record,) = turn.permissions
    assert chosen_kind(record) == "allow_once" and record.chosen == "allow_once"
    # The permission request is where codex first mentions the tool call; the client tracks it from there.
    (call,) = turn.tool_calls
    assert call.id == record.tool_call["toolCallId"] and (call.kind, call.status) == ("execute", "completed")
    assert call.name == "exec_command"  # ACP's tool-call name (stable v1 since schema 1.33)
    assert turn.stop_reason == "end_turn"

    session.permission = "deny"
    denied = interop.work / "denied.txt"
    turn = session.prompt(f"write {denied} with should not exist", timeout=TURN_TIMEOUT)
    assert not denied.exists()
    (record,) = turn.permissions
    assert chosen_kind(record) == "reject_once" and record.chosen == "cancel"
    assert turn.stop_reason == "cancelled"  # "cancel" ends codex's turn


def test_cancel_and_the_process_ends_with_close(interop, model_server):
    agent = interop.start("codex", model_server)
    session = agent.new_session()
    assert_cancelled_mid_stream(cancel_after_first_chunk(session, "slow " + SLOW_WORDS))
    assert_streamed(session.prompt("after cancel", timeout=TURN_TIMEOUT), HELLO + "after cancel")
    pid = agent.pid
    agent.close()
    # codex-acp 2.6.0 usually ignores EOF on stdin and the client's SIGTERM to the process group ends it (-15); once
    # under make test-loaded it had ended on its own (0) before the SIGTERM. Either way close leaves nothing running.
    assert wait_gone(pid, 10) and agent.exit_code in (0, -15)
