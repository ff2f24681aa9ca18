"""Moving a prompted session to another agent behind the proxy: its conversation is handed over.

Two demo agents behind a real proxy process; the demo takes a handed-over conversation as its history,
so "what did I say before?" on the new agent counts the prompts sent to the old one. The old agent's
way to the kernel (its relay) is shut, as a hostile local process would find by trying it."""

from __future__ import annotations

import json
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

import acp_notebook as acpnb
from acp_notebook import _loop
from acp_notebook.kernel_tools import KernelTools
from acp_notebook.proxy.transcript import Transcript
from tests.proxy_agents.harness import FrameWaiter, is_update, raw_result, start_proxies, status

proxy_factory = pytest.fixture(name="proxy_factory")(start_proxies)

TIMEOUT = 60.0


@pytest.fixture
def kernel():
    tools = KernelTools(policy="allow", namespace={"budget": 1234}, run_timeout=20.0)
    _loop.run_sync(tools.start(), TIMEOUT)
    try:
        yield tools
    finally:
        _loop.run_sync(tools.close(), TIMEOUT)


def sent_to(trace, agent: str, method: str) -> list[dict]:
    records = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    return [r["msg"]["params"] for r in records
            if r["link"] == agent and r["dir"] == "out" and r["msg"].get("method") == method]


def handshake(entry: dict) -> str:
    """The kernel channel's handshake spoken with an entry's socket and token: what it answers, or the error."""
    env = {pair["name"]: pair["value"] for pair in entry["env"]}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(TIMEOUT)
    try:
        sock.connect(env["ACPNB_KERNEL_CHANNEL"])
        sock.sendall(env["ACPNB_KERNEL_TOKEN"].encode() + b"\n")
        return sock.recv(200).decode("utf-8", "replace").strip()
    except OSError as exc:
        return f"error: {exc}"
    finally:
        sock.close()


@pytest.mark.slow
def test_set_model_on_another_agent_after_turns_hands_the_conversation_over(proxy_factory, kernel):
    proxy = proxy_factory({"a": "demo", "b": "demo"})
    session = proxy.new_session(mcp_servers=[kernel.entry])
    session.set("model", "a:smart")
    session.prompt("the tide is low")
    session.prompt("the crabs are out")
    a_id = status(proxy)["sessions"][session.id]["backendSessionId"]

    told = FrameWaiter(proxy, is_update(session.id, "session_info_update"))
    # every agent's models stay listed once prompted, so our client's own check lets the pick through
    assert "b:fast" in session.config["model"].values
    assert session.set("model", "b:fast")["model"].value == "b:fast"
    answer = raw_result(proxy, "session/set_config_option")
    marker = answer["_meta"]["acp-notebook/handover"]
    assert marker["from"] == "a:smart" and marker["to"] == "b:fast" and marker["turns"] == 2
    assert marker["description"] == "handed over from a:smart after 2 turns"
    assert told.wait()["params"]["update"]["_meta"]["acp-notebook/handover"]["turns"] == 2
    assert [o for o in answer["configOptions"] if o["id"] == "model"][0]["currentValue"] == "b:fast"
    now = status(proxy)["sessions"][session.id]
    assert now["agent"] == "b" and now["backendSessionId"] != a_id

    turn = session.prompt("what did I say before?")
    assert "You have sent 2 prompts before this one" in turn.text
    assert "the tide is low" in turn.text and "the crabs are out" in turn.text
    assert raw_result(proxy, "session/prompt")["_meta"]["acp-notebook/handover"]["from"] == "a:smart"
    assert "You have sent 3 prompts" in session.prompt("what did I say before?").text  # b keeps it from here
    assert "_meta" not in raw_result(proxy, "session/prompt")  # only the first turn on b carries the marker
    proxy.close()

    trace = proxy.trace_path
    a_entry = next(s for s in sent_to(trace, "a", "session/new")[-1]["mcpServers"] if s["name"] == "kernel")
    assert handshake(a_entry) != "ok"  # a's relay is closed: its token opens nothing
    prompts_to_b = sent_to(trace, "b", "session/prompt")
    first = prompts_to_b[0]
    assert first["_meta"]["acp-notebook/handover"]["turns"] == 2
    assert first["prompt"][0]["text"].startswith("This conversation was handed over to you from a:smart after 2 turns")
    assert first["prompt"][1:] == [{"type": "text", "text": "what did I say before?"}]
    assert "_meta" not in prompts_to_b[1] or "acp-notebook/handover" not in prompts_to_b[1]["_meta"]
    assert any(p["sessionId"] == a_id for p in sent_to(trace, "a", "session/close"))


@pytest.mark.slow
def test_an_unknown_model_of_the_other_agent_is_still_refused(proxy_factory):
    proxy = proxy_factory({"a": "demo", "b": "demo"})
    session = proxy.new_session()
    session.prompt("hello")
    with pytest.raises(acpnb.RpcError) as refused:
        proxy.request("session/set_config_option", {"sessionId": session.id, "configId": "model",
                                                    "value": "b:no-such-model"})
    assert refused.value.code == -32602 and "offers no model 'no-such-model'" in str(refused.value)
    assert status(proxy)["sessions"][session.id]["agent"] == "a"


def test_the_transcript_keeps_prompts_replies_and_tool_calls_with_their_results():
    """What is handed over, read from the frames the proxy forwards (and from a replayed history)."""
    from acp_notebook.branching import handover_text
    from acp_notebook.proxy.transcript import Transcript

    transcript = Transcript()
    transcript.see({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "replayed question"}})
    transcript.see({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "replayed answer"}})
    transcript.begin([{"type": "text", "text": "read notes.txt"}])
    transcript.see({"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read notes.txt", "status": "pending"})
    transcript.see({"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed",
                    "content": [{"type": "content", "content": {"type": "text", "text": "buy\u202eeggs"}}]})
    transcript.see({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "It says "}})
    transcript.see({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "buy eggs."}})
    transcript.end()
    first, second = transcript.so_far()
    assert (first.prompt, first.reply, first.tools) == ("replayed question", "replayed answer", ())
    assert (second.prompt, second.reply) == ("read notes.txt", "It says buy eggs.")
    (tool,) = second.tools
    assert tool.startswith("Read notes.txt (completed): buy") and "\u202e" not in tool  # hidden characters spelt out
    text, capped = handover_text(transcript.so_far(), "a:smart")
    assert "after 2 turns" in text and "[2] Tool call: Read notes.txt (completed)" in text and not capped


@pytest.mark.slow
def test_a_fork_taken_right_after_a_handover_carries_the_conversation_too(proxy_factory):
    proxy = proxy_factory({"a": "demo", "b": "demo"})
    session = proxy.new_session()
    session.set("model", "a:fast")
    session.prompt("one")
    session.prompt("two")
    proxy.request("session/set_config_option", {"sessionId": session.id, "configId": "model", "value": "b:smart"})
    fork = session.fork(kernel_tools=False)  # b's session has not been sent the conversation yet
    assert "You have sent 2 prompts before this one" in fork.prompt("what did I say before?").text
    assert "You have sent 2 prompts before this one" in session.prompt("what did I say before?").text
    assert status(proxy)["sessions"][fork.id]["agent"] == "b"


@given(st.dictionaries(st.sampled_from(["sessionUpdate", "toolCallId", "title", "status", "content", "rawOutput"]),
                       st.one_of(st.none(), st.booleans(), st.floats(), st.text(), st.lists(st.integers()),
                                 st.sampled_from(["tool_call", "tool_call_update", "agent_message_chunk"]),
                                 st.dictionaries(st.text(), st.integers()))))
def test_the_transcript_takes_any_update_an_agent_sends(update):
    # Found by the proxy's property test: a tool_call_update whose content was a number ended the prompt with
    # "'float' object is not iterable" when the exchange was written down.
    transcript = Transcript()
    transcript.begin([{"type": "text", "text": "hi"}])
    transcript.see(update)
    transcript.see({"sessionUpdate": "tool_call_update", "toolCallId": "t", "content": 1.5e16})
    transcript.end()
    (exchange,) = transcript.so_far()
    assert exchange.prompt == "hi" and all(isinstance(line, str) for line in exchange.tools)
