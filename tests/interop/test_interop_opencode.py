"""opencode 1.18.33 through our public API: initialize, the options of session/new, set, the `effort`
option that picking a reasoning model adds (pushed as config_option_update), full turns against
the model server (streaming, thinking, edit and shell permissions, fs/write_text_file), cancel.

One opencode serves the whole module (its start costs about 5 core-seconds), started as `%acp start
opencode` starts it; each test works in a session of its own, and what it checks of the agent's log and
of the model server's requests is what arrived after the test began."""

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
    kinds,
)

import acp_notebook as acpnb

pytestmark = pytest.mark.interop

SMALL, LARGE = "interop/interop-model", "interop/interop-model-large"


def received(agent: acpnb.Agent, method: str, *, since: int = 0) -> list[dict]:
    """The requests of `method` the agent sent, from entry `since` of its log on."""
    return [e["msg"] for e in agent.log[since:] if e["dir"] == "recv" and e["msg"].get("method") == method]


@pytest.fixture(scope="module")
def opencode(module_interop, module_model_server) -> acpnb.Agent:
    return module_interop.start_by_name("opencode", module_model_server)  # what `%acp start opencode` runs


def test_initialize_and_session_options(opencode):
    agent = opencode
    assert agent.info == {"name": "OpenCode", "version": "1.18.33"}
    assert agent.capabilities["loadSession"] is True
    assert set(agent.capabilities["sessionCapabilities"]) == {"close", "fork", "list", "resume"}
    assert [m["id"] for m in agent.auth_methods] == ["opencode-login"]

    session = agent.new_session()
    assert [(o.id, o.category, o.type) for o in session.config] == [("model", "model", "select"),
                                                                    ("mode", "mode", "select")]
    model = session.config["model"]
    assert model.values == [SMALL, LARGE] and model.value == SMALL
    assert [c.name for c in model.choices] == ["Interop model server/Interop Model",
                                               "Interop model server/Interop Model Large"]
    assert session.config["mode"].values == ["build", "plan"] and session.config["mode"].value == "build"


def test_set_options_and_the_effort_option_of_a_reasoning_model(opencode):
    agent = opencode
    session = agent.new_session()
    # What session.config held right after each config_option_update frame was applied; opencode
    # pushes the complete list before it answers set_config_option.
    seen_at_push: list[list[str]] = []
    unsubscribe = agent.on_frame(lambda entry: seen_at_push.append(session.config.ids()) if entry["dir"] == "recv"
                                 and (entry["msg"].get("params") or {}).get("update", {}).get("sessionUpdate")
                                 == "config_option_update" else None)
    try:
        answered = session.set("model", LARGE)
        assert answered.ids() == ["model", "effort", "mode"]
        assert seen_at_push == [["model", "effort", "mode"]]
        effort = session.config["effort"]
        assert (effort.category, effort.type, effort.value) == ("thought_level", "select", "low")
        assert effort.values == ["low", "medium", "high", "default"]
        assert session.set("effort", "high")["effort"].value == "high"
        with pytest.raises(acpnb.ConfigOptionError):
            session.set("effort", "extreme")

        assert "effort" not in session.set("model", SMALL)
        assert seen_at_push[-1] == ["model", "mode"] and len(seen_at_push) == 2
        assert session.set("mode", "plan")["mode"].value == "plan"
        assert len(seen_at_push) == 2  # setting the mode answers without a push
    finally:
        unsubscribe()

    before, sent = session.config, len(agent.log)
    for option_id, value in [("model", "no-such-model"), ("mode", "nope"), ("nope", "x")]:
        with pytest.raises(acpnb.ConfigOptionError):
            session.set(option_id, value)
    assert len(agent.log) == sent and session.config == before

    for params, message in [({"configId": "model", "value": "no-such-model"}, "model not found: no-such-model"),
                            ({"configId": "mode", "value": "nope"}, "mode not found: nope"),
                            ({"configId": "nope", "value": "x"}, "unknown config option: nope")]:
        with pytest.raises(acpnb.RpcError) as info:
            agent.request("session/set_config_option", {"sessionId": session.id, **params})
        assert info.value.code == -32602 and info.value.rpc_message == f"Invalid params: {message}"
    assert session.config == before


def test_full_turns_streaming_thinking_and_permissions(opencode, module_interop, module_model_server):
    agent, work, since = opencode, module_interop.work, len(opencode.log)
    session = agent.new_session()
    session.permission = "allow"

    turn = session.prompt("say hi", timeout=TURN_TIMEOUT)
    assert_streamed(turn, HELLO + "say hi")
    assert turn.usage["inputTokens"] > 0 and turn.usage["totalTokens"] > turn.usage["inputTokens"]
    chat = module_model_server.wait_for(lambda r: r.path == "/v1/chat/completions" and bool(r.body.get("tools"))
                                        and "say hi" in json.dumps(r.body.get("messages")), timeout=5)
    assert chat.body["model"] == "interop-model" and chat.body["stream"] is True

    thinking = session.prompt("think tides", timeout=TURN_TIMEOUT)
    assert thinking.text == "Thought about tides."
    assert thinking.thoughts == "Thinking about: tides" and "agent_thought_chunk" in kinds(thinking)

    allowed = work / "allowed.txt"
    turn = session.prompt(f"write {allowed} with hello world", timeout=TURN_TIMEOUT)
    assert allowed.read_text() == "hello world"
    # opencode writes through our client (fs/write_text_file), after asking permission.
    (write,) = received(agent, "fs/write_text_file", since=since)
    assert write["params"]["path"] == str(allowed) and write["params"]["content"] == "hello world"
    (call,) = turn.tool_calls
    assert (call.kind, call.status) == ("edit", "completed")
    (record,) = turn.permissions
    assert chosen_kind(record) == "allow_once" and record.tool_call["toolCallId"] == call.id
    assert record.tool_call["content"][0]["newText"] == "hello world"
    assert turn.text.endswith("Tool finished: Wrote file successfully.") and turn.stop_reason == "end_turn"

    turn = session.prompt("run echo shell-ran", timeout=TURN_TIMEOUT)
    (call,) = turn.tool_calls
    assert (call.kind, call.status, call.title) == ("execute", "completed", "echo shell-ran")
    assert chosen_kind(turn.permissions[0]) == "allow_once"
    assert turn.text.endswith("Tool finished: shell-ran")

    session.permission = "deny"
    denied = work / "denied.txt"
    turn = session.prompt(f"write {denied} with should not exist", timeout=TURN_TIMEOUT)
    assert not denied.exists() and len(received(agent, "fs/write_text_file", since=since)) == 1
    (record,) = turn.permissions
    assert chosen_kind(record) == "reject_once"
    # After a rejection opencode ends the turn at once, without asking the model again.
    assert turn.stop_reason == "end_turn" and not turn.text.endswith("Tool finished")


def test_cancel_then_the_same_session_carries_on(opencode):
    session = opencode.new_session()
    assert_cancelled_mid_stream(cancel_after_first_chunk(session, "slow " + SLOW_WORDS))
    assert_streamed(session.prompt("after cancel", timeout=TURN_TIMEOUT), HELLO + "after cancel")
