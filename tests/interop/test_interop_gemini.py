"""gemini-cli 0.61.0 through our public API: initialize, the old modes/models fields (mode settable
through session/set_mode, model read-only), full turns against the model server (streaming,
thinking, the client's fs methods, permission allowed and rejected), the new-file quirk, cancel.

One gemini with a key serves the tests that need no start of their own (its start costs about 3
core-seconds), started as `%acp start gemini` starts it; each test works in a session of its own, and
what it checks of the agent's log is what arrived after the test began."""

from __future__ import annotations

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

# The list gemini offers varies with its settings (FINDINGS lists six); these are always there.
MODELS = {"auto", "gemini-2.5-pro", "gemini-3.8-flash", "gemini-3.5-flash-lite"}


def methods(agent: acpnb.Agent, direction: str, *, since: int = 0) -> list[str]:
    """The methods of the requests and notifications sent one way, from entry `since` of the log on."""
    return [e["msg"]["method"] for e in agent.log[since:] if e["dir"] == direction and "method" in e["msg"]]


@pytest.fixture(scope="module")
def gemini(module_interop, module_model_server) -> acpnb.Agent:
    return module_interop.start_by_name("gemini", module_model_server)  # GEMINI_API_KEY set: no authenticate


def test_initialize_and_without_a_key_what_to_set(interop):
    agent = interop.start_by_name("gemini")  # what `%acp start gemini` runs; no key
    assert agent.info == {"name": "gemini-cli", "title": "Gemini CLI", "version": "0.61.0"}
    assert agent.capabilities["loadSession"] is True and "sessionCapabilities" not in agent.capabilities
    assert [m["id"] for m in agent.auth_methods] == ["oauth-personal", "gemini-api-key", "vertex-ai", "gateway"]
    with pytest.raises(acpnb.RpcError) as info:
        agent.new_session()
    assert info.value.code == -32000 and "Gemini API key is missing" in info.value.rpc_message
    assert info.value.hint.startswith("Agent 'gemini' needs a key or a login: set GEMINI_API_KEY")


def test_old_modes_and_models(gemini):
    agent = gemini
    session = agent.new_session()
    assert "authenticate" not in methods(agent, "send")
    mode, model = session.config["mode"], session.config["model"]
    assert session.config.ids() == ["mode", "model"]
    assert (mode.legacy_source, mode.read_only, mode.value) == ("modes", False, "default")
    assert mode.values == ["default", "autoEdit", "yolo", "plan"]
    assert (model.legacy_source, model.read_only, model.value) == ("models", True, "auto")
    assert model.values[0] == "auto" and MODELS <= set(model.values) and session.model == "auto"

    assert session.set("mode", "plan")["mode"].value == "plan"
    assert methods(agent, "send")[-1] == "session/set_mode"
    # The agent refuses privileged modes in a folder it does not trust: ConfigOptionError, state kept.
    with pytest.raises(acpnb.ConfigOptionError, match="Cannot enable privileged approval modes"):
        session.set("mode", "yolo")
    assert session.config["mode"].value == "plan"

    sent = len(agent.log)
    with pytest.raises(acpnb.ConfigOptionError, match="not a choice"):
        session.set("mode", "nope")
    with pytest.raises(acpnb.ConfigOptionError, match="read-only"):
        session.set("model", "gemini-2.5-pro")
    with pytest.raises(acpnb.ConfigOptionError, match="read-only"):
        session.model = "gemini-2.5-pro"
    assert len(agent.log) == sent and session.model == "auto"
    with pytest.raises(acpnb.RpcError) as info:
        agent.request("session/set_config_option", {"sessionId": session.id, "configId": "mode", "value": "plan"})
    assert info.value.code == -32601


def test_full_turns_streaming_thinking_fs_and_permissions(gemini, module_interop, module_model_server):
    agent, since, model_server = gemini, len(gemini.log), module_model_server
    session = agent.new_session()
    session.permission = "allow"

    turn = session.prompt("say hi", timeout=TURN_TIMEOUT)
    assert_streamed(turn, HELLO + "say hi")
    # Usage comes only in the result's _meta; in model "auto" a router call picks the model first.
    quota = turn.result["_meta"]["quota"]
    assert quota["token_count"]["input_tokens"] > 0 and quota["model_usage"][0]["model"] == "gemini-3.8-flash"
    assert turn.usage["inputTokens"] == quota["token_count"]["input_tokens"]
    assert turn.usage["outputTokens"] == quota["token_count"]["output_tokens"]
    model_server.wait_for(lambda r: r.path.endswith("gemini-3.5-flash-lite:generateContent"), timeout=5)
    model_server.wait_for(lambda r: "gemini-3.8-flash:streamGenerateContent" in r.path, timeout=5)

    thinking = session.prompt("think tides", timeout=TURN_TIMEOUT)
    assert thinking.text == "Thought about tides." and "Thinking about: tides" in thinking.thoughts
    assert "agent_thought_chunk" in kinds(thinking)

    # Overwriting a file goes through our fs methods: read, permission, write.
    existing = module_interop.work / "existing.txt"
    existing.write_text("old text")
    turn = session.prompt(f"write {existing} with hello world", timeout=TURN_TIMEOUT)
    assert existing.read_text() == "hello world"
    assert {"fs/read_text_file", "fs/write_text_file"} <= set(methods(agent, "recv", since=since))
    (record,) = turn.permissions
    assert chosen_kind(record) == "allow_once" and record.chosen == "proceed_once"
    # The permission request is where gemini first mentions the tool call.
    (call,) = turn.tool_calls
    assert call.id == record.tool_call["toolCallId"] and (call.kind, call.status) == ("edit", "completed")
    assert call.diffs[0]["oldText"] == "old text" and call.diffs[0]["newText"] == "hello world"

    session.permission = "deny"
    turn = session.prompt(f"write {existing} with should not be written", timeout=TURN_TIMEOUT)
    assert existing.read_text() == "hello world"
    (record,) = turn.permissions
    assert chosen_kind(record) == "reject_once" and turn.stop_reason == "end_turn"


def test_new_files_need_the_client_without_fs(gemini, module_interop, interop, model_server):
    """gemini treats any error reading a missing file through fs/read_text_file as fatal (FINDINGS 5.4),
    so with our fs methods it cannot create a file; started with fs=False it writes it itself."""
    with_fs = gemini.new_session()
    with_fs.permission = "allow"
    target = module_interop.work / "new-with-fs.txt"
    turn = with_fs.prompt(f"write {target} with hello", timeout=TURN_TIMEOUT)
    assert not target.exists() and turn.permissions == []
    assert turn.tool_calls[0].status == "failed"
    assert turn.text.endswith(f"Error checking existing file: {target} does not exist\"}}")

    without_fs = interop.start("gemini", model_server, permission="allow", fs=False)
    target = interop.work / "new-without-fs.txt"
    turn = without_fs.new_session().prompt(f"write {target} with hello", timeout=TURN_TIMEOUT)
    assert target.read_text() == "hello"
    assert chosen_kind(turn.permissions[0]) == "allow_once" and turn.tool_calls[0].status == "completed"
    assert not {"fs/read_text_file", "fs/write_text_file"} & set(methods(without_fs, "recv"))


def test_cancel_then_the_same_session_carries_on(gemini):
    session = gemini.new_session()
    assert_cancelled_mid_stream(cancel_after_first_chunk(session, "slow " + SLOW_WORDS))
    assert_streamed(session.prompt("after cancel", timeout=TURN_TIMEOUT), HELLO + "after cancel")
