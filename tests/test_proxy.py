"""The multi-agent proxy as a real subprocess in front of real agents, driven by our client.

Every test also validates every frame on every pipe (client <-> proxy from our client's log,
proxy <-> each agent from the proxy's --trace file) against the official ACP schema."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.proxy.launcher import agents_left_out
from tests.processes import wait_gone
from tests.proxy_agents.harness import (
    FrameWaiter,
    broken,
    is_update,
    model_values,
    quirky,
    raw_result,
    start_proxies,
    status,
)

proxy_factory = pytest.fixture(name="proxy_factory")(start_proxies)

EDGE_AGENT = Path(__file__).resolve().parent / "agents" / "edge_agent.py"
DEMO_SLOW = [sys.executable, "-m", "acp_notebook.demo", "--delay", "0.1"]


@pytest.mark.slow
def test_two_demo_agents_bind_turn_prefixed_updates_bad_ids_and_a_crash(proxy_factory):
    """`acp-notebook proxy --agent a=demo --agent b=demo`: grouped namespaced list, bind, a turn,
    prefixed config updates, a clear error for a bad id, recovery after a backend crash."""
    proxy = proxy_factory({"a": "demo", "b": "demo"}, env={"ACP_DEMO_DELAY": "0.05"})
    assert proxy.info["name"] == "acp-notebook-proxy"
    session = proxy.new_session()
    model = session.config["model"]
    assert session.config.ids() == ["model"]
    assert model.category == "model" and model.grouped
    assert [(c.value, c.group) for c in model.choices] == [
        ("a:fast", "a"), ("a:smart", "a"), ("b:fast", "b"), ("b:smart", "b")]
    assert model.value == "a:fast"

    # bind: the backend's own options appear, the model id stays "model", values prefixed
    options = session.set("model", "b:smart")
    assert options.ids() == ["model", "thought_level", "mode", "tone", "show_thoughts"]
    assert session.model == "b:smart"
    assert options["tone"].category == "_demo_style"  # a custom category passes through
    assert [c.value for c in options["model"].choices] == ["a:fast", "a:smart", "b:fast", "b:smart"]
    assert session.set("thought_level", "high")["thought_level"].value == "high"

    # a turn; every agent's models stay listed after it (picking another agent's hands the conversation over)
    turn = session.prompt("Tell me about tide pools")
    assert turn.stop_reason == "end_turn" and "tide pools" in turn.text
    assert "Thought 3 of 3" in turn.thoughts  # thought level high reached agent b
    assert session.title and session.usage is not None
    assert [c.value for c in session.config["model"].choices] == ["a:fast", "a:smart", "b:fast", "b:smart"]
    assert session.model == "b:smart"

    # the agent's own config_option_update (a fallback to fast) arrives prefixed
    turn = session.prompt("fallback please")
    assert session.model == "b:fast"
    pushed = [u for u in turn.updates if u.get("sessionUpdate") == "config_option_update"]
    assert pushed and model_values(pushed[-1]["configOptions"][0]) == ["a:fast", "a:smart", "b:fast", "b:smart"]

    # bad ids: -32602 naming the valid ids; another agent's after the first prompt is a handover
    # (tests/test_proxy_handover.py), and an id that agent does not offer is refused naming its models
    with pytest.raises(acpnb.RpcError) as bad:
        proxy.request("session/set_config_option", {"sessionId": session.id, "configId": "model", "value": "c:fast"})
    assert bad.value.code == -32602 and "b:fast, b:smart" in str(bad.value)
    with pytest.raises(acpnb.RpcError) as other:
        proxy.request("session/set_config_option", {"sessionId": session.id, "configId": "model", "value": "a:genius"})
    assert other.value.code == -32602 and "a:fast, a:smart" in str(other.value)
    assert session.model == "b:fast"

    # crash: the agent dies mid-turn -> the turn fails naming it; the session binds again
    b_pid = status(proxy)["agents"]["b"]["pid"]
    killer = FrameWaiter(proxy, is_update(session.id, "agent_message_chunk"),
                         then=lambda _msg: os.killpg(b_pid, signal.SIGKILL))
    with pytest.raises(acpnb.RpcError) as crash:
        session.prompt("Tell me about sea stars")
    killer.wait()
    assert "agent 'b'" in str(crash.value) and "exited" in str(crash.value)
    assert crash.value.data["agent"] == "b"
    # unbound again: the client was sent the full list; the next prompt restarts b and rebinds
    assert [c.value for c in session.config["model"].choices] == ["a:fast", "a:smart", "b:fast", "b:smart"]
    turn = session.prompt("Tell me about kelp")
    assert turn.stop_reason == "end_turn" and "kelp" in turn.text
    after = status(proxy)
    assert after["agents"]["b"]["starts"] == 2 and after["sessions"][session.id]["agent"] == "b"
    assert session.model == "b:fast"


@pytest.mark.slow
def test_three_agents_binding_rebinding_and_odd_ids(proxy_factory):
    proxy = proxy_factory({"d": "demo", "q": quirky("--bind-update"), "n": quirky("--no-model")})
    session = proxy.new_session()
    assert [(c.value, c.group) for c in session.config["model"].choices] == [
        ("d:fast", "d"), ("d:smart", "d"), ("q:vendor/model-a", "q"), ("q:org:model-b:latest", "q"),
        ("n:default", "n")]
    agents = raw_result(proxy, "session/new")["_meta"]["acp-notebook/proxy"]["agents"]
    assert all(agents[name]["ok"] for name in "dqn")

    # bind to q: its option "llm" becomes "model"; its bind-time config_option_update is already
    # rewritten and reaches the client before the answer to set_config_option
    options = session.set("model", "q:org:model-b:latest")
    assert options.ids() == ["model", "effort", "verbosity"]
    assert options["effort"].value == "high" and options["verbosity"].category == "_quirky_verbosity"
    frames = [e["msg"] for e in proxy.log if e["dir"] == "recv"]
    answer_at = next(i for i, m in enumerate(frames) if m.get("id") is not None and "method" not in m
                     and "configOptions" in (m.get("result") or {}) and m["result"]["configOptions"][0]
                     ["currentValue"] == "q:org:model-b:latest")
    pushed_at = next(i for i, m in enumerate(frames) if is_update(session.id, "config_option_update")(m))
    assert pushed_at < answer_at
    pushed = frames[pushed_at]["params"]["update"]["configOptions"]
    assert pushed[0]["id"] == "model" and pushed[0]["currentValue"] == "q:org:model-b:latest"
    assert "q:vendor/model-a" in model_values(pushed[0])
    # what q said about the session before its session/new answer was held, then delivered at binding
    assert session.title == "Quirky session" and session.meta["quirky"] == {"born": True}

    # re-picks before the first prompt: same agent forwarded, other agents re-bind
    assert session.set("model", "q:vendor/model-a")["model"].value == "q:vendor/model-a"
    assert "thought_level" in session.set("model", "d:smart")
    options = session.set("model", "n:default")
    assert options.ids() == ["model", "effort", "verbosity"] and options["model"].value == "n:default"
    turn = session.prompt("hello there")
    assert turn.text == "quirky(none, effort=low) heard: hello there"
    assert session.usage["used"] == len("hello there") and session.meta["quirky"]["turns"] == 1
    assert status(proxy)["sessions"][session.id]["agent"] == "n"
    assert [c.value for c in session.config["model"].choices] == [
        "d:fast", "d:smart", "q:vendor/model-a", "q:org:model-b:latest", "n:default"]
    assert session.model == "n:default"

    # several sessions on one connection, bound independently and prompted at the same time
    first, second = proxy.new_session(), proxy.new_session()
    second.set("model", "q:org:model-b:latest")
    running = [first.start_prompt("Tell me about owls"), second.start_prompt("hi")]
    turns = [future.result(30) for future in running]
    assert "owls" in turns[0].text and turns[0].model == "d:fast"  # lazily bound to the default
    assert turns[1].text == "quirky(org:model-b:latest, effort=high) heard: hi"
    assert first.config.ids()[:1] == ["model"] and "mode" in first.config  # learned at the lazy binding
    sessions = status(proxy)["sessions"]
    assert sessions[first.id]["agent"] == "d" and sessions[second.id]["agent"] == "q"

    # extension methods: with a session id they go to its agent; without one, to the first that knows them
    assert proxy.request("_quirky/ping", {"sessionId": second.id, "x": 1})["pong"]["sessionId"].startswith("q/")
    assert proxy.request("_demo/echo", {"hello": "world"}) == {"hello": "world"}
    assert proxy.request("_quirky/ping", {"y": 2}) == {"pong": {"y": 2}}
    with pytest.raises(acpnb.RpcError) as unknown:
        proxy.request("_nobody/knows", {})
    assert unknown.value.code == -32601

    # closing the proxy ends every agent behind it (each runs in a process group of its own)
    pids = [agent["pid"] for agent in status(proxy)["agents"].values()]
    proxy.close()
    assert all(wait_gone(pid) for pid in pids)


@pytest.mark.slow
def test_agent_requests_reach_the_client_with_its_session_ids(proxy_factory, tmp_path):
    (tmp_path / "notes.txt").write_text("one\ntwo\nthree\n")
    proxy = proxy_factory({"d": "demo", "q": quirky()}, permission="allow")
    notices = []
    proxy.on_ext_method("_quirky/notice", notices.append)
    proxy.on_ext_method("_quirky/ask", lambda params: {"answer": 42, "asked_for": params["sessionId"]})
    demo_session = proxy.new_session()
    turn = demo_session.prompt("read notes.txt")  # permission, then fs/read_text_file on our client
    assert turn.permissions and turn.permissions[0].chosen == "allow_once"
    assert turn.tool_calls and turn.tool_calls[0].status == "completed"
    assert "3 lines" in turn.text
    turn = demo_session.prompt("write hello to out.txt")
    assert (tmp_path / "out.txt").read_text() == "hello"

    session = proxy.new_session()
    session.set("model", "q:vendor/model-a")
    turn = session.prompt("ask")
    assert turn.text == "permission: {'outcome': 'selected', 'optionId': 'yes'}"
    turn = session.prompt("ext")
    assert turn.text == f"client answered {{'answer': 42, 'asked_for': '{session.id}'}}"
    assert notices == [{"sessionId": session.id, "note": "hello"}]
    turn = session.prompt("run ls")
    assert turn.text == "no terminal"  # our client does not offer terminals, and the proxy says so too


@pytest.mark.slow
def test_crash_mid_turn_names_the_agent_and_its_stderr_then_binds_again(proxy_factory):
    proxy = proxy_factory({"q": quirky(), "d": "demo"})
    session = proxy.new_session()
    session.set("model", "q:org:model-b:latest")
    with pytest.raises(acpnb.RpcError) as crash:
        session.prompt("please crash now")
    message = str(crash.value)
    assert "agent 'q'" in message and "code 3" in message
    assert "simulated crash in the model client" in message
    assert crash.value.data["exitCode"] == 3 and crash.value.data["stderr"]
    assert [c.value for c in session.config["model"].choices][0] == "q:vendor/model-a"
    # before the next prompt any agent may be picked again; the old pick is kept otherwise
    assert session.model == "q:org:model-b:latest"
    turn = session.prompt("are you back?")
    assert turn.text == "quirky(org:model-b:latest, effort=low) heard: are you back?"
    assert status(proxy)["agents"]["q"]["starts"] == 2
    assert "simulated crash" in "\n".join(proxy.stderr_tail(50))  # the agent's stderr, prefixed, on ours

    # an agent that dies between turns: the session is unbound at once (the client is told) and
    # the next prompt starts the agent again
    unbound = FrameWaiter(proxy, is_update(session.id, "config_option_update"))
    os.killpg(status(proxy)["agents"]["q"]["pid"], signal.SIGKILL)
    assert "d:fast" in model_values(unbound.wait()["params"]["update"]["configOptions"][0])
    assert session.prompt("and again?").text.endswith("heard: and again?")
    assert status(proxy)["agents"]["q"]["starts"] == 3


@pytest.mark.slow
def test_failed_and_slow_agents_are_left_out_and_named(proxy_factory):
    proxy = proxy_factory({"d": "demo", "x": broken("x: cannot read my config", 4),
                           "slow": quirky("--probe-delay", "60")}, probe_timeout=5)
    session = proxy.new_session()
    assert [c.value for c in session.config["model"].choices] == ["d:fast", "d:smart"]
    meta = raw_result(proxy, "session/new")["_meta"]["acp-notebook/proxy"]
    assert meta["agents"]["d"]["ok"] is True
    assert "x: cannot read my config" in meta["failed"]["x"] and "code 4" in meta["failed"]["x"]
    assert meta["failed"]["x"].count("agent 'x'") == 1  # named once (it read "agent 'x': agent 'x' exited")
    assert agents_left_out(proxy) == {"x": "x: cannot read my config"}
    assert meta["pending"] == ["slow"] and meta["agents"]["slow"]["pending"] is True
    assert "did not answer within 5 s" in meta["agents"]["slow"]["error"]
    # ...and the proxy's own log (its stderr) names both, for whoever runs it outside a notebook.
    wait_for_stderr(proxy, "x: cannot read my config")
    wait_for_stderr(proxy, "agent 'slow' did not answer within 5 s")
    with pytest.raises(acpnb.RpcError) as bad:
        proxy.request("session/set_config_option", {"sessionId": session.id, "configId": "model",
                                                     "value": "slow:vendor/model-a"})
    assert bad.value.code == -32602 and "d:fast, d:smart" in str(bad.value)
    assert session.prompt("Tell me about owls").stop_reason == "end_turn"


def wait_for_stderr(agent: acpnb.Agent, needle: str, timeout: float = 10.0) -> None:
    """Until a line of the agent's stderr holds ``needle`` (listening first, so no line slips between)."""
    seen = threading.Event()
    stop = agent.on_stderr(lambda line: needle in line and seen.set())
    try:
        assert any(needle in line for line in agent.stderr_tail(500)) or seen.wait(timeout), \
            f"{needle!r} not on stderr: {agent.stderr_tail(20)}"
    finally:
        stop()


@pytest.mark.slow
def test_a_slow_agent_joins_the_model_list_after_the_probe_deadline(proxy_factory):
    proxy = proxy_factory({"d": "demo", "late": quirky("--probe-delay", "3")}, probe_timeout=1)

    def late_joined(message):
        update = (message.get("params") or {}).get("update") or {}
        return update.get("sessionUpdate") == "config_option_update" and \
            "late:vendor/model-a" in model_values(update["configOptions"][0])

    joined = FrameWaiter(proxy, late_joined)
    session = proxy.new_session()
    assert "late:vendor/model-a" not in (session.config["model"].values if "model" in session.config else [])
    picked = session.config["model"].value if "model" in session.config else None
    joined.wait()
    values = session.config["model"].values
    assert "late:vendor/model-a" in values and "d:fast" in values
    if picked is not None:
        assert session.config["model"].value == picked, "the pick made before stays"
    session.set("model", "late:vendor/model-a")
    assert session.prompt("hi").text.endswith("heard: hi")


@pytest.mark.slow  # two probe deadlines: initialize's and session/new's
def test_a_backend_that_never_answers_initialize_stalls_nothing(proxy_factory):
    mute = [sys.executable, str(EDGE_AGENT), "silent"]
    # The mute agent never answers, so initialize and session/new each wait the whole (short) deadline. On a loaded
    # machine the demo agent may miss it too: it then joins the model list a moment later, which the test waits for.
    proxy = proxy_factory({"d": "demo", "mute": mute}, probe_timeout=1, start_timeout=600)

    def demo_joined(message):
        update = (message.get("params") or {}).get("update") or {}
        return update.get("sessionUpdate") == "config_option_update" and \
            "d:fast" in model_values(update["configOptions"][0])

    joined = FrameWaiter(proxy, demo_joined)
    # A stall would end in the client's own deadline (AcpTimeoutError) and fail the test.
    session = proxy.new_session(timeout=20)
    meta = raw_result(proxy, "session/new")["_meta"]["acp-notebook/proxy"]
    assert meta["pending"] in (["mute"], ["d", "mute"])
    if meta["pending"] != ["mute"]:
        joined.wait()
        session.set("model", "d:fast")
    assert session.config["model"].values == ["d:fast", "d:smart"]
    assert session.prompt("hello", timeout=20).stop_reason == "end_turn"
    with pytest.raises(acpnb.RpcError) as refused:
        proxy.request("session/set_config_option", {"sessionId": session.id, "configId": "model",
                                                     "value": "mute:default"}, timeout=20)
    assert refused.value.code == -32602


@pytest.mark.slow
def test_no_agent_at_all_gives_no_options_and_a_prompt_error_naming_each(proxy_factory):
    proxy = proxy_factory({"x": broken("x: no API key", 2), "y": ["/nonexistent/agent-binary"]})
    session = proxy.new_session()
    assert len(session.config) == 0 and "configOptions" not in raw_result(proxy, "session/new")
    with pytest.raises(acpnb.RpcError) as info:
        session.prompt("hello")
    message = str(info.value)
    assert "x: no API key" in message and "/nonexistent/agent-binary" in message
    assert set(info.value.data["failures"]) == {"x", "y"}


@pytest.mark.slow
def test_list_load_resume_and_close_through_the_proxy(proxy_factory):
    proxy = proxy_factory({"a": "demo", "b": "demo"})
    assert proxy.capabilities["loadSession"] is True
    first, second = proxy.new_session(), proxy.new_session()
    second.set("model", "b:smart")
    first.prompt("new topic: lighthouses")
    second.prompt("new topic: glaciers")
    listed = {entry["sessionId"]: entry for entry in proxy.list_sessions(proxy.cwd)}
    assert set(listed) == {first.id, second.id}  # the probes' sessions are not shown
    assert listed[first.id]["_meta"]["acp-notebook/proxy"]["agent"] == "a"
    assert listed[first.id]["title"] == "Lighthouses" and listed[second.id]["title"] == "Glaciers"

    first_id = first.id
    first.close()
    loaded = proxy.load_session(first_id)
    replay = [u["sessionUpdate"] for u in loaded.history]
    assert "user_message_chunk" in replay and "agent_message_chunk" in replay
    # reopened with its history on a; b's models are listed as this proxy last saw them (a pick hands over)
    assert [c.value for c in loaded.config["model"].choices] == ["a:fast", "a:smart", "b:fast", "b:smart"]
    assert loaded.model == "a:fast"
    assert "lighthouses" in loaded.prompt("Tell me about lighthouses").text.lower()

    second_id = second.id
    second.close()
    resumed = proxy.resume_session(second_id)
    assert resumed.model == "b:smart" and resumed.prompt("more").stop_reason == "end_turn"
    with pytest.raises(acpnb.RpcError) as unknown:
        proxy.load_session("nobody:nothing")
    assert unknown.value.code == -32002 and unknown.value.not_found  # resource not found, as both SDKs use
    assert set(unknown.value.data["validSessionIds"]) == {first_id, second_id}


@pytest.mark.slow
def test_updates_keep_wire_order_and_cancel_is_forwarded(proxy_factory):
    proxy = proxy_factory({"q": quirky(), "d": "demo"})
    session = proxy.new_session()
    turn = session.prompt("burst 400")  # 400 notifications in a row, each handled in a task of its own
    assert turn.text == "".join(f"{i}," for i in range(400))

    waiting = FrameWaiter(proxy, is_update(session.id, "agent_message_chunk"))
    future = session.start_prompt("slow please")
    waiting.wait()
    session.cancel()
    assert future.result(20).stop_reason == "cancelled"


@pytest.mark.slow
def test_authentication_goes_to_the_agent_that_asked_for_it(proxy_factory):
    needs_auth = [sys.executable, "-m", "acp_notebook.demo", "--require-auth"]
    proxy = proxy_factory({"a": needs_auth, "b": "demo"})
    assert [m["id"] for m in proxy.auth_methods] == ["a:demo-token"]
    before = proxy.new_session()
    assert [c.value for c in before.config["model"].choices] == ["b:fast", "b:smart"]
    failed = raw_result(proxy, "session/new")["_meta"]["acp-notebook/proxy"]["failed"]
    assert "a:demo-token" in failed["a"]
    proxy.authenticate("a:demo-token")
    after = proxy.new_session()
    assert [c.value for c in after.config["model"].choices] == ["a:fast", "a:smart", "b:fast", "b:smart"]
    with pytest.raises(acpnb.RpcError) as wrong:
        proxy.request("authenticate", {"methodId": "b:demo-token"})
    assert wrong.value.code == -32602 and "a:demo-token" in str(wrong.value)


@pytest.mark.slow
def test_a_new_proxy_process_reopens_a_session_by_the_id_it_was_given(proxy_factory, tmp_path, monkeypatch):
    """What clients that reconnect on every call (acpx) rely on: the id outlives the proxy process."""
    state = tmp_path / "proxy-state"
    monkeypatch.setenv("ACP_NOTEBOOK_PROXY_STATE", str(state))  # the proxies started below inherit it
    first_proxy = proxy_factory({"a": "demo", "b": "demo"})
    session = first_proxy.new_session()
    session_id = session.id
    assert session_id.startswith("acpnb-proxy.")
    session.set("model", "b:smart")
    session.prompt("new topic: lighthouses")
    first_proxy.close()

    second_proxy = proxy_factory({"a": "demo", "b": "demo"})
    again = second_proxy.resume_session(session_id)
    assert again.model == "b:smart"
    assert "lighthouses" in again.prompt("what did I say first?").text.lower()
    second_proxy.close()

    # Without the remembered binding, the id itself leads to the session (the unused probe sessions
    # were deleted when the first prompt tied the session to b).
    (state / "bindings.jsonl").unlink()
    third_proxy = proxy_factory({"a": "demo", "b": "demo"})
    loaded = third_proxy.load_session(session_id)
    assert loaded.model == "b:smart"
    assert [u["sessionUpdate"] for u in loaded.history][:2] == ["user_message_chunk", "agent_message_chunk"]
