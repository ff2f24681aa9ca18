"""The client against real agents: the demo agent over both transports (a subprocess over pipes, and
in memory in this process), and tests/agents/edge_agent.py (subprocess only: it misbehaves as a process)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.client import PermissionRequest
from tests.schema_check import FrameLog, validate_frame
from tests.processes import wait_gone

EDGE = [sys.executable, str(Path(__file__).parent / "agents" / "edge_agent.py")]


def validate_log(agent: acpnb.Agent) -> FrameLog:
    """Every frame our client sent and received, checked against the official schema."""
    frames = FrameLog(local="client")
    for entry in agent.log:
        frames.record("client" if entry["dir"] == "send" else "agent", entry["msg"])
    frames.check()
    return frames


def validate_client_frames(agent: acpnb.Agent) -> int:
    """Check only what our client sent (for agents that break the schema on purpose); returns the count."""
    asked = {e["msg"]["id"]: e["msg"]["method"] for e in agent.log
             if e["dir"] == "recv" and "method" in e["msg"] and "id" in e["msg"]}
    sent = [e["msg"] for e in agent.log if e["dir"] == "send"]
    for msg in sent:
        validate_frame(msg, "client", answers=None if "method" in msg else asked[msg["id"]])
    return len(sent)


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    """Where the subprocess runs of this module record the demo agent, for their replay runs."""
    return tmp_path_factory.mktemp("recordings")


@pytest.fixture(params=["subprocess", "memory", "replay"])
def start_demo(request, recordings):
    """start_demo(*flags, **start_kwargs): the demo agent with its command-line flags (--delay S,
    --legacy, --require-auth), as a subprocess (recorded), as a DemoAgent object served in memory,
    or as `acp-notebook replay` serving the subprocess run's recording (at the recorded pace, so the
    timings a test relies on hold): the same test passes against all three."""
    from acp_notebook.demo.agent import DemoAgent

    started = []

    def start(*flags: str, **kwargs):
        kwargs.setdefault("timeout", 30)
        recording = recordings / f"{request.node.originalname}-{len(started)}.acp.jsonl"
        started.append(recording)
        if request.param == "subprocess":
            return acpnb.start([sys.executable, "-m", "acp_notebook.demo", *flags], record=recording, **kwargs)
        if request.param == "replay":
            if not recording.exists():
                pytest.skip("replays the recording of this test's subprocess run, which did not run")
            command = [sys.executable, "-m", "acp_notebook.cli", "replay", str(recording), "--speed", "1"]
            return acpnb.start(command, **kwargs)
        options = {"legacy": "--legacy" in flags, "require_auth": "--require-auth" in flags}
        if "--delay" in flags:
            options["delay"] = float(flags[flags.index("--delay") + 1])
        return acpnb.start(DemoAgent(**options), **kwargs)

    return start


@pytest.fixture
def demo(start_demo, tmp_path):
    """The demo agent; after the test, every frame both ways is checked against the official schema."""
    agent = start_demo(cwd=tmp_path)
    yield agent
    agent.close()
    validate_log(agent)


def test_initialize_reports_info_capabilities_and_auth(demo):
    assert demo.info["name"] == "acp-notebook-demo"
    assert demo.info["version"]
    assert demo.capabilities["loadSession"] is True
    assert isinstance(demo.auth_methods, list)
    assert demo.status == "running" and demo.running
    sent_init = demo.log[0]["msg"]
    assert sent_init["method"] == "initialize"
    caps = sent_init["params"]["clientCapabilities"]
    assert caps["fs"] == {"readTextFile": True, "writeTextFile": True}
    assert caps["session"]["configOptions"]["boolean"] == {}


def test_config_options_a_rejected_value_and_a_turn(demo):
    session = demo.new_session()
    assert session.config.ids()[0] == "model"
    assert "thought_level" not in session.config
    new_state = session.set("model", "smart")
    assert "thought_level" in new_state
    assert new_state["model"].value == "smart" and session.model == "smart"
    before = session.config
    with pytest.raises(acpnb.ConfigOptionError) as info:
        session.set("model", "genius")
    assert "fast" in str(info.value) and "smart" in str(info.value)
    assert session.config == before
    turn = session.prompt("Tell me about tide pools")
    assert isinstance(turn, acpnb.Turn)
    assert turn.text and turn.stop_reason == "end_turn"
    assert session.title
    assert turn.duration_s is not None and turn.ttft_s is not None and 0 <= turn.ttft_s <= turn.duration_s
    assert turn.model == "smart"
    validate_log(demo)


@pytest.mark.slow
def test_boolean_options_and_custom_categories(demo):
    session = demo.new_session()
    assert session.config["show_thoughts"].type == "boolean"
    assert session.config["tone"].category == "_demo_style"
    session.set("show_thoughts", True)
    assert session.config["show_thoughts"].value is True
    on_wire = [e["msg"] for e in demo.log if e["msg"].get("method") == "session/set_config_option"]
    assert on_wire[-1]["params"]["type"] == "boolean" and on_wire[-1]["params"]["value"] is True
    with pytest.raises(acpnb.ConfigOptionError, match="True or False"):
        session.set("show_thoughts", "yes")
    with pytest.raises(acpnb.ConfigOptionError, match="Did you mean 'model'"):
        session.set("modell", "fast")
    validate_log(demo)


def test_local_rejection_makes_no_round_trip(demo):
    session = demo.new_session()
    sent_before = sum(1 for e in demo.log if e["dir"] == "send")
    with pytest.raises(acpnb.ConfigOptionError):
        session.set("mode", "yolo")
    assert sum(1 for e in demo.log if e["dir"] == "send") == sent_before


def test_agent_rejection_leaves_state_unchanged():
    with acpnb.start(EDGE + ["edge"]) as agent:
        session = agent.new_session()
        before = session.config
        with pytest.raises(acpnb.ConfigOptionError, match="forbidden is not allowed") as info:
            session.set("model", "forbidden")
        assert info.value.config_id == "model"
        assert isinstance(info.value.__cause__, acpnb.RpcError)
        assert session.config == before and session.model == "m1"
        assert session.set("model", "m2")["model"].value == "m2"


def test_updates_in_wire_order_and_unknowns_ignored():
    with acpnb.start(EDGE + ["edge"]) as agent:
        session = agent.new_session()
        assert "dial" not in session.config, "unknown option types stay out of config"
        assert [o["id"] for o in session.state.raw_options] == ["model", "style", "dial"]
        assert session.config["style"].category == "_edge_style"
        turn = session.prompt("go")
        assert turn.text == "".join(f"{i}," for i in range(300))
        assert session.model == "m2", "config_option_update reached session.config"
        assert session.title == "Edge cases" and session.meta == {"edge": {"n": 1}}
        assert turn.usage["cost"] == {"amount": 0.5, "currency": "USD"}
        notes = [e.get("note") for e in agent.log if e.get("note")]
        assert "ignored: unknown session" in notes
        assert any("hologram" in n for n in notes)
        assert agent.status == "running"


def test_permission_policies_and_fs(start_demo, tmp_path):
    (tmp_path / "notes.txt").write_text("one\ntwo\nthree\n")
    with start_demo(cwd=tmp_path) as agent:
        denied = agent.new_session()
        turn = denied.prompt("read notes.txt")
        assert [p.chosen for p in turn.permissions] == [denied_choice(turn)]
        assert turn.tool_calls and turn.tool_calls[0].status == "failed"

        allowed = agent.new_session(permission="allow")
        turn = allowed.prompt("read notes.txt")
        assert turn.tool_calls[0].status == "completed"
        assert "3" in turn.text
        turn = allowed.prompt("write hello there to out/greeting.txt")
        assert (tmp_path / "out" / "greeting.txt").read_text() == "hello there"
        assert turn.tool_calls[-1].kind == "edit" and turn.tool_calls[-1].diffs

        seen: list[PermissionRequest] = []

        def ask(request: PermissionRequest):
            seen.append(request)
            return request.option_for("allow_once")

        custom = agent.new_session(permission=ask)
        custom.prompt("read notes.txt")
        assert seen and seen[0].session is custom and seen[0].tool_call["toolCallId"]
        validate_log(agent)


def test_a_tool_call_first_seen_in_a_permission_request_is_tracked():
    with acpnb.start(EDGE + ["ask-first"], permission="allow") as agent:
        turn = agent.new_session().prompt("list files")
        [call] = turn.tool_calls
        assert (call.id, call.title, call.kind, call.status) == ("t9", "Run ls", "execute", "completed")
        assert turn.permissions[0].chosen == "yes"
        assert validate_client_frames(agent) == 4  # initialize, session/new, session/prompt, the permission answer


def denied_choice(turn):
    return next(o["optionId"] for o in turn.permissions[0].options if o["kind"] == "reject_once")


def test_fs_is_confined_to_the_session_directories(start_demo, tmp_path, request):
    inside = tmp_path / "work"
    inside.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    if "replay" in request.node.name:
        pytest.skip("its prompts name a path outside the session's directory, which differs between runs")
    (inside / "link.txt").symlink_to(secret)
    with start_demo(cwd=inside, permission="allow") as agent:
        session = agent.new_session()
        for target in (str(secret), "link.txt", "../secret.txt"):
            turn = session.prompt(f"read {target}")
            assert turn.tool_calls[-1].status == "failed", target
            assert "do not read" not in turn.text
        extra = agent.new_session(additional_directories=[str(tmp_path)])
        turn = extra.prompt(f"read {secret}")
        assert turn.tool_calls[-1].status == "completed"


# Not replayed: a replay sends the recorded answer to the prompt at its recorded time, which is the recorded
# cancel's round trip (a few ms) after the client's own 0.5 s timeout, whether the live client has timed out or not.
@pytest.mark.parametrize("start_demo", ["subprocess", "memory"], indirect=True)
@pytest.mark.slow
def test_prompt_timeout_cancels_the_turn_and_the_session_stays_usable(start_demo, tmp_path):
    with start_demo("--delay", "0.2", cwd=tmp_path) as agent:
        session = agent.new_session()
        session.set("model", "smart")
        with pytest.raises(acpnb.AcpTimeoutError):
            session.prompt("a long answer please", timeout=0.5)
        cancels = [e for e in agent.log if e["msg"].get("method") == "session/cancel"]
        assert cancels, "a timed-out turn sends session/cancel"
        assert session.turns[-1].done.wait(10)
        assert session.turns[-1].stop_reason == "cancelled"
        # session/cancel stops a turn; $/cancel_request would make an agent on the SDK's 1.x line abandon its
        # handler and answer -32800 (no stop reason, and the client waited out its 5 s grace for one).
        sent = [e["msg"].get("method") for e in agent.log if e["dir"] == "send"]
        assert "$/cancel_request" not in sent
        (answer,) = [e["msg"] for e in agent.log if e["dir"] == "recv" and e["msg"].get("id") == 3]
        assert answer.get("result") == {"stopReason": "cancelled"}, answer
        session.set("model", "fast")
        assert session.prompt("short one").stop_reason == "end_turn"


class _Abandons:
    """An agent that ends a turn as an SDK does when it abandons the prompt's handler: error -32800, no stop reason.
    A cancelled turn ends so; the prompt "now" does at once."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

    async def initialize(self, protocol_version, **kwargs):
        return {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "abandons", "version": "1"}}

    async def new_session(self, cwd, **kwargs):
        return {"sessionId": "abandons-1"}

    async def prompt(self, session_id, prompt, **kwargs):
        from acp import RequestError

        first = prompt[0]  # a schema model on the SDK's typed agent side
        if getattr(first, "text", None) != "now":
            await self.cancelled.wait()
        raise RequestError(-32800, "Request cancelled")

    async def cancel(self, session_id, **kwargs):
        self.cancelled.set()


def test_a_turn_answered_request_cancelled_ends_cancelled_at_once(monkeypatch, tmp_path):
    # Without reading the -32800 answer the client waited out its grace for a stop reason: make that wait endless.
    monkeypatch.setattr("acp_notebook.session.CANCEL_GRACE_S", 3600.0)
    with acpnb.start(_Abandons(), cwd=tmp_path) as agent:
        session = agent.new_session()
        with pytest.raises(acpnb.AcpTimeoutError):
            session.prompt("wait for me", timeout=0.3)
        assert session.turns[-1].done.wait(30) and session.turns[-1].stop_reason == "cancelled"
        turn = session.prompt("now")  # the agent's own -32800, with no cancel of ours: the turn ended, cancelled
        assert (turn.stop_reason, turn.error) == ("cancelled", None)
        assert session.state.status == "idle"


@pytest.mark.slow
def test_list_load_and_resume(start_demo, tmp_path):
    with start_demo(cwd=tmp_path) as agent:
        first = agent.new_session()
        first.prompt("Remember the lighthouse")
        listed = agent.list_sessions()
        assert any(s["sessionId"] == first.id for s in listed)
        first.close()
        assert first.closed and first.id not in [s.id for s in agent.sessions]
        assert any(e["msg"].get("method") == "session/close" for e in agent.log)
        validate_log(agent)
    with start_demo(cwd=tmp_path) as agent:
        with pytest.raises(acpnb.RpcError):
            agent.load_session("no-such-session")
        assert "no-such-session" not in [s.id for s in agent.sessions]


def test_load_replays_history_into_the_session(demo):
    first = demo.new_session()
    first.prompt("Remember the lighthouse")
    loaded = demo.load_session(first.id)
    kinds = [u["sessionUpdate"] for u in loaded.history]
    assert "user_message_chunk" in kinds and "agent_message_chunk" in kinds
    assert loaded.config.ids()[0] == "model"
    resumed = demo.resume_session(first.id)
    assert resumed.config.ids()[0] == "model"
    validate_log(demo)


def test_legacy_agent_modes_and_models(start_demo, tmp_path):
    with start_demo("--legacy", cwd=tmp_path) as agent:
        session = agent.new_session()
        mode = session.config["mode"]
        assert mode.legacy_source == "modes"
        other = next(v for v in mode.values if v != mode.value)
        session.set("mode", other)
        assert session.config["mode"].value == other
        assert any(e["msg"].get("method") == "session/set_mode" for e in agent.log)
        if "model" in session.config:
            with pytest.raises(acpnb.ConfigOptionError, match="read-only"):
                session.set("model", session.config["model"].value)


@pytest.mark.slow
def test_authenticate_and_capability_errors(start_demo, tmp_path):
    with start_demo("--require-auth", cwd=tmp_path) as agent:
        assert [m["id"] for m in agent.auth_methods] == ["demo-token"]
        with pytest.raises(acpnb.RpcError) as info:
            agent.new_session()
        assert info.value.code == -32000 and "authenticate" in info.value.hint
        with pytest.raises(acpnb.AcpError, match="demo-token"):
            agent.authenticate("password")
        agent.authenticate("demo-token")
        assert agent.new_session().config
    with acpnb.start(EDGE + ["edge"]) as agent:
        with pytest.raises(acpnb.CapabilityError, match="session/list"):
            agent.list_sessions()


@pytest.mark.slow
def test_start_errors_are_clear(tmp_path):
    with pytest.raises(acpnb.AgentStartError, match="cannot run 'definitely-not-an-agent-binary'"):
        acpnb.start(["definitely-not-an-agent-binary", "--acp"])
    with pytest.raises(acpnb.AgentStartError, match="unknown agent") as info:
        acpnb.start("nonexistent_agent_name")
    assert "demo" in info.value.hint
    with pytest.raises(acpnb.AgentStartError) as info:
        acpnb.start(EDGE + ["exit-early"])
    assert info.value.exit_code == 7
    assert "cannot find my config file" in str(info.value)
    with pytest.raises(acpnb.AgentStartError, match="did not answer initialize"):
        acpnb.start(EDGE + ["silent"], timeout=1)
    # A missing working directory is named as such, not blamed on the program.
    with pytest.raises(acpnb.AgentStartError, match=f"working directory {tmp_path / 'gone'} does not exist") as info:
        acpnb.start("demo", cwd=tmp_path / "gone")
    assert "as cwd=" in info.value.hint and "--cwd DIR" in info.value.hint_for("magic")
    (tmp_path / "file").write_text("")
    with pytest.raises(acpnb.AgentStartError, match="is not a directory"):
        acpnb.start("demo", cwd=tmp_path / "file")
    # A session's directories too, before anything is sent.
    with acpnb.start("demo", cwd=tmp_path) as agent:
        sent = len(agent.log)
        with pytest.raises(acpnb.AcpError, match=f"the session's working directory {tmp_path / 'gone'} does not exist"):
            agent.new_session(cwd=tmp_path / "gone")
        with pytest.raises(acpnb.AcpError, match="the session's additional directory .* is not a directory"):
            agent.new_session(additional_directories=[str(tmp_path / "file")])
        with pytest.raises(acpnb.AcpError, match="does not exist"):
            agent.load_session("any-id", cwd=tmp_path / "gone")
        assert len(agent.log) == sent and agent.new_session().id


@pytest.mark.slow
def test_a_timeout_that_is_not_a_number_of_seconds_is_refused_before_anything_is_sent(start_demo, tmp_path):
    with pytest.raises(ValueError, match=r"start: timeout must be a number of seconds, 0 or more .*not -5"):
        acpnb.start("demo", cwd=tmp_path, timeout=-5)
    with acpnb.start("demo", cwd=tmp_path, timeout=None) as default:  # None: the default, as for every call
        assert default.timeout == 60.0
    with start_demo(cwd=tmp_path) as agent:
        session = agent.new_session()
        sent = len(agent.log)
        for bad in (-1, float("nan"), "10", True):
            with pytest.raises(ValueError, match="prompt: timeout must be a number of seconds"):
                session.prompt("hi", timeout=bad)
        assert len(agent.log) == sent and not session.turns
        assert session.prompt("hi", timeout=30).stop_reason == "end_turn"


def test_stderr_is_drained_so_a_chatty_agent_does_not_freeze():
    with acpnb.start(EDGE + ["stderr-flood"], timeout=30) as agent:
        assert agent.new_session().config
        assert agent.stderr_tail(1) == ["edge-agent: flood done"]


def test_a_crash_mid_turn_fails_the_turn_with_the_stderr_tail():
    agent = acpnb.start(EDGE + ["crash"])
    try:
        session = agent.new_session()
        with pytest.raises(acpnb.AgentExitedError) as info:
            session.prompt("go", timeout=30)
        assert "simulated fatal error" in str(info.value)
        assert agent.status == "exited" and agent.exit_code == 3
        assert session.turns[-1].error is not None
        with pytest.raises(acpnb.AgentExitedError):
            agent.new_session()
    finally:
        agent.close()


def test_close_ends_the_process_and_is_idempotent(tmp_path):
    agent = acpnb.start("demo", cwd=tmp_path)
    pid = agent.pid
    agent.close()
    assert wait_gone(pid)
    agent.close()
    assert agent.status == "closed"
    with pytest.raises(acpnb.AgentClosedError):
        agent.new_session()


def test_async_twins(tmp_path):
    import asyncio

    from acp_notebook.demo.agent import DemoAgent

    async def main():
        agent = await acpnb.astart(DemoAgent(), cwd=tmp_path)
        try:
            session = await agent.anew_session()
            await session.aset("model", "smart")
            turn = await session.aprompt("hello from asyncio")
            return turn, session
        finally:
            await agent.aclose()

    turn, session = asyncio.run(main())
    assert turn.text and session.model == "smart"
