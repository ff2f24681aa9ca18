"""claude-agent-acp 0.23.1 through our public API: initialize, its two config options, set, full
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
    agent = interop.start_by_name("claude")  # what `%acp start claude` runs; no key, no model server
    assert agent.info == {"name": "@zed-industries/claude-agent-acp", "title": "Claude Agent", "version": "0.23.1"}
    assert agent.capabilities["loadSession"] is True
    assert set(agent.capabilities["sessionCapabilities"]) == {"fork", "list", "resume", "close"}
    assert agent.capabilities["promptCapabilities"] == {"image": True, "embeddedContext": True}
    # Offered because our client says it handles terminal logins (clientCapabilities.auth.terminal): it is
    # the agent's own command with --cli, for the user to run; authenticate refuses it and says so.
    assert agent.auth_methods == [{"description": "Run `claude /login` in the terminal", "name": "Log in with Claude",
                                   "id": "claude-login", "type": "terminal", "args": ["--cli"]}]
    assert agent.terminal_login_command("claude-login").endswith("claude-agent-acp --cli")
    with pytest.raises(acpnb.AcpError, match="a login you do in a terminal") as refused:
        agent.authenticate("claude-login")
    assert "--cli" in refused.value.hint

    session = agent.new_session()  # works without a key
    assert [(o.id, o.category, o.type) for o in session.config] == [("mode", "mode", "select"),
                                                                    ("model", "model", "select")]
    # It also sends the old modes/models fields; configOptions wins.
    assert all(o.legacy_source is None for o in session.config)
    # claude-agent-acp adds bypassPermissions unless it runs as root without IS_SANDBOX (the registry
    # sets IS_SANDBOX=1 for root users who set it to something else, see launch._claude_env).
    bypass = os.geteuid() != 0 or bool(launch.registered("claude").env.get("IS_SANDBOX"))
    assert session.config["mode"].values == ["default", "acceptEdits", "plan", "dontAsk"] + (
        ["bypassPermissions"] if bypass else [])
    assert session.config["mode"].value == "default"
    assert session.config["model"].values == ["default", "sonnet[1m]", "opus[1m]", "haiku"]
    assert session.model == "default" and session.model_option.id == "model"

    with pytest.raises(acpnb.RpcError) as info:
        session.prompt("say hi", timeout=TURN_TIMEOUT)
    assert info.value.code == -32000 and info.value.rpc_message == "Authentication required"
    assert "set ANTHROPIC_API_KEY" in info.value.hint and "/login" in info.value.hint


def test_set_each_option_valid_and_invalid(interop):
    agent = interop.start("claude")
    session = agent.new_session()
    for option_id, value in [("mode", "acceptEdits"), ("model", "haiku"), ("mode", "plan")]:
        other_values = {o.id: o.value for o in session.config if o.id != option_id}
        answered = session.set(option_id, value)
        assert answered[option_id].value == value and session.config[option_id].value == value
        assert {o.id: o.value for o in session.config if o.id != option_id} == other_values
    # Setting the mode is also announced as current_mode_update (no config_option_update).
    pushed = [e["msg"]["params"]["update"] for e in agent.log
              if e["dir"] == "recv" and e["msg"].get("method") == "session/update"]
    assert {"sessionUpdate": "current_mode_update", "currentModeId": "plan"} in pushed
    assert "config_option_update" not in [u["sessionUpdate"] for u in pushed]
    session.model = "sonnet[1m]"
    assert session.model == "sonnet[1m]"

    before, sent = session.config, len(agent.log)
    for option_id, value in [("mode", "no-such-value"), ("model", "opus"), ("no-such-option", "x")]:
        with pytest.raises(acpnb.ConfigOptionError):
            session.set(option_id, value)
    assert len(agent.log) == sent and session.config == before  # refused here, nothing sent

    # What the agent itself answers to a bad value (sent raw, past our check): an error, state unchanged.
    with pytest.raises(acpnb.RpcError) as info:
        agent.request("session/set_config_option", {"sessionId": session.id, "configId": "mode", "value": "nope"})
    assert info.value.code == -32603 and info.value.data == {"details": "Invalid value for config option mode: nope"}
    with pytest.raises(acpnb.RpcError) as info:
        agent.request("session/set_config_option", {"sessionId": session.id, "configId": "nope", "value": "x"})
    assert info.value.data == {"details": "Unknown config option: nope"}
    assert session.config == before


def test_full_turns_streaming_thinking_and_permissions(interop, model_server):
    agent = interop.start("claude", model_server, permission="allow")
    session = agent.new_session()

    turn = session.prompt("say hi", timeout=TURN_TIMEOUT)
    assert_streamed(turn, HELLO + "say hi")
    assert turn.usage["inputTokens"] > 0 and turn.usage["outputTokens"] > 0
    assert turn.usage["size"] == 200000 and turn.cost["currency"] == "USD"
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
    assert turn.text.endswith(f"Tool finished: File created successfully at: {allowed}")
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
