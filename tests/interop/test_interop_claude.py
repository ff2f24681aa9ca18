"""claude-agent-acp 0.101.0 through our public API: initialize, its config options, set, full
turns against the model server (streaming, thinking, a permission request allowed and denied,
usage), cancel, list and close."""

from __future__ import annotations

import os

import pytest
from agent_setups import DUMMY_KEY
from interop_support import (
    HELLO,
    SLOW_WORDS,
    TURN_TIMEOUT,
    assert_cancelled_mid_stream,
    assert_streamed,
    cancel_after_first_chunk,
    chosen_kind,
    kinds,
)

import acp_notebook as acpnb
from acp_notebook import launch

pytestmark = pytest.mark.interop


def test_initialize_options_and_no_key(interop):
    # What `%acp start claude` runs; no key, no model server. Should the adapter call its API anyway (see below), its
    # CLI would retry the refused connection with back-off for minutes (180 s once in `make test`): no retry here.
    agent = interop.start_by_name("claude", env={"CLAUDE_CODE_MAX_RETRIES": "0"})
    assert agent.info == {"name": "@agentclientprotocol/claude-agent-acp", "title": "Claude Agent", "version": "0.101.0"}
    assert agent.capabilities["loadSession"] is True
    assert set(agent.capabilities["sessionCapabilities"]) == {
        "additionalDirectories", "close", "delete", "fork", "list", "resume", "systemPrompt"}
    assert agent.capabilities["sessionCapabilities"]["systemPrompt"] == {"mode": {"override": {}}}
    assert agent.capabilities["promptCapabilities"] == {"image": True, "embeddedContext": True}
    # Offered because our client says it handles terminal logins (clientCapabilities.auth.terminal): the
    # agent's own command with --cli auth login, for the user to run; authenticate refuses them and says so.
    assert [(m["id"], m["type"], m["args"]) for m in agent.auth_methods] == [
        ("claude-ai-login", "terminal", ["--cli", "auth", "login", "--claudeai"]),
        ("console-login", "terminal", ["--cli", "auth", "login", "--console"])]
    assert agent.terminal_login_command("console-login").endswith("claude-agent-acp --cli auth login --console")
    with pytest.raises(acpnb.AcpError, match="a login you do in a terminal") as refused:
        agent.authenticate("claude-ai-login")
    assert "--cli auth login --claudeai" in refused.value.hint

    session = agent.new_session()  # works without a key
    assert [(o.id, o.category, o.type) for o in session.config] == [
        ("mode", "mode", "select"), ("model", "model", "select"), ("effort", "thought_level", "select"),
        ("fast", "model_config", "boolean"), ("ultracode", "model_config", "boolean")]
    # It also sends the old modes/models fields; configOptions wins.
    assert all(o.legacy_source is None for o in session.config)
    # claude-agent-acp adds bypassPermissions unless it runs as root without IS_SANDBOX (the registry
    # sets IS_SANDBOX=1 for root users who set it to something else, see launch._claude_env).
    bypass = os.geteuid() != 0 or bool(launch.registered("claude").env.get("IS_SANDBOX"))
    assert session.config["mode"].values == ["default", "acceptEdits", "plan", "auto"] + (
        ["bypassPermissions"] if bypass else [])
    assert session.config["mode"].value == "auto"
    assert session.config["model"].values == ["default", "opus", "fable", "sonnet", "haiku"]
    assert session.model == "default" and session.model_option.id == "model"

    with pytest.raises(acpnb.RpcError) as info:
        # A hang guard, not a timing: without a key the adapter asks its own CLI before refusing (about 1 s here
        # idle; it passed the 90 s turn deadline once under make test-loaded).
        session.prompt("say hi", timeout=3 * TURN_TIMEOUT)
    if info.value.code == -32603 and "ECONNREFUSED" in info.value.rpc_message:
        # claude-agent-acp 0.101.0 without a key sometimes calls its API anyway (about one full run in three here,
        # never alone) and reports the refused connection: FINDINGS section 12. Not our client's doing.
        pytest.xfail("claude-agent-acp 0.101.0 tried its API without a key: " + info.value.rpc_message)
    assert info.value.code == -32000 and info.value.rpc_message == "Authentication required"
    assert "set ANTHROPIC_API_KEY" in info.value.hint and "/login" in info.value.hint


def test_set_each_option_valid_and_invalid(interop):
    agent = interop.start("claude")
    session = agent.new_session()
    for option_id, value in [("mode", "acceptEdits"), ("effort", "high"), ("mode", "plan")]:
        other_values = {o.id: o.value for o in session.config if o.id != option_id}
        answered = session.set(option_id, value)
        assert answered[option_id].value == value and session.config[option_id].value == value
        assert {o.id: o.value for o in session.config if o.id != option_id} == other_values
    # Setting the mode is also announced as current_mode_update.
    pushed = [e["msg"]["params"]["update"] for e in agent.log
              if e["dir"] == "recv" and e["msg"].get("method") == "session/update"]
    assert {"sessionUpdate": "current_mode_update", "currentModeId": "plan"} in pushed
    # A model without a fast mode drops the `fast` option.
    session.model = "haiku"
    assert session.model == "haiku" and "fast" not in session.config

    before, sent = session.config, len(agent.log)
    for option_id, value in [("mode", "no-such-value"), ("model", "opus[1m]"), ("no-such-option", "x")]:
        with pytest.raises(acpnb.ConfigOptionError):
            session.set(option_id, value)
    assert len(agent.log) == sent and session.config == before  # refused here, nothing sent

    # What the agent itself answers to a bad value (sent raw, past our check): an error, state unchanged.
    with pytest.raises(acpnb.RpcError) as info:
        agent.request("session/set_config_option", {"sessionId": session.id, "configId": "mode", "value": "nope"})
    assert (info.value.code, info.value.rpc_message) == (-32602, "Invalid params: Invalid value for config option mode: nope")
    with pytest.raises(acpnb.RpcError) as info:
        agent.request("session/set_config_option", {"sessionId": session.id, "configId": "nope", "value": "x"})
    assert info.value.rpc_message == "Invalid params: Unknown config option: nope"
    assert session.config == before


def test_full_turns_streaming_thinking_and_permissions(interop, model_server):
    agent = interop.start("claude", model_server, permission="allow")
    session = agent.new_session()
    session.set("mode", "default")  # its default mode, "auto", lets a classifier approve tools instead of asking

    turn = session.prompt("say hi", timeout=TURN_TIMEOUT)
    assert_streamed(turn, HELLO + "say hi")
    assert turn.usage["inputTokens"] > 0 and turn.usage["outputTokens"] > 0
    assert turn.usage["size"] == 1000000 and turn.cost["currency"] == "USD"
    request = model_server.wait_for(lambda r: r.path.startswith("/v1/messages"), timeout=5)
    assert request.headers.get("x-api-key") == DUMMY_KEY and request.body["stream"] is True

    thinking = session.prompt("think tides", timeout=TURN_TIMEOUT)
    assert thinking.thoughts == "Thinking about: tides" and thinking.text == "Thought about tides."
    assert "agent_thought_chunk" in kinds(thinking)

    allowed = interop.work / "allowed.txt"
    turn = session.prompt(f"write {allowed} with hello world", timeout=TURN_TIMEOUT)
    assert allowed.read_text() == "hello world"  # written by the agent itself, not through fs/*
    (call,) = turn.tool_calls
    assert (call.kind, call.status, call.title) == ("edit", "completed", "Write allowed.txt")
    assert call.diffs[0]["newText"] == "hello world"
    (record,) = turn.permissions
    assert chosen_kind(record) == "allow_once" and record.tool_call["toolCallId"] == call.id
    assert f"Tool finished: File created successfully at: {allowed}" in turn.text
    assert call.name == "Write"  # ACP's tool-call name (stable v1 since schema 1.33)
    assert turn.stop_reason == "end_turn"

    session.permission = "deny"
    denied = interop.work / "denied.txt"
    turn = session.prompt(f"write {denied} with should not exist", timeout=TURN_TIMEOUT)
    assert not denied.exists()
    (record,) = turn.permissions
    assert chosen_kind(record) == "reject_once"
    assert turn.tool_calls[0].status == "failed"
    assert turn.text.endswith("Tool finished: User refused permission to run tool")
    assert turn.stop_reason == "end_turn"


def test_cancel_list_and_close(interop, model_server):
    agent = interop.start("claude", model_server)
    session = agent.new_session()
    assert_cancelled_mid_stream(cancel_after_first_chunk(session, "slow " + SLOW_WORDS))
    # After a cancel, claude answers the session's next prompt with an empty end_turn (FINDINGS 5.1),
    # so a new session carries on.
    fresh = agent.new_session()
    assert_streamed(fresh.prompt("after cancel", timeout=TURN_TIMEOUT), HELLO + "after cancel")

    # Titles are the first prompt. (Claude writes a session's file as a turn ends, so the cancelled
    # session, written a whole turn earlier, is the one to look for.)
    listed = {entry["sessionId"]: entry for entry in agent.list_sessions()}
    assert listed[session.id]["title"].startswith("slow word1 word2")
    fresh.close()
    assert fresh.closed and fresh not in agent.sessions
    assert any(e["msg"].get("method") == "session/close" for e in agent.log if e["dir"] == "send")
