"""Recordings and replay: what is written (frames, header, no secrets), how a replay answers, and where it diverges."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import acp_notebook as acpnb
from acp_notebook.record import Recording, RecordingError
from tests.schema_check import FrameLog

KEY = "sk-test-planted-0123456789abcdef"


def recorded_session(tmp_path, monkeypatch, **start_kwargs):
    """A demo session recorded to tmp_path/rec/s.acp.jsonl: a model switch, two turns (one with a file read)."""
    monkeypatch.setenv("DEMO_SERVICE_API_KEY", KEY)
    work = tmp_path / "rec"
    work.mkdir()
    (work / "notes.txt").write_text("one\ntwo\n")
    path = work / "s.acp.jsonl"
    with acpnb.start("demo", cwd=work, record=path, permission="allow", **start_kwargs) as agent:
        session = agent.new_session()
        session.set("model", "smart")
        turns = [session.prompt(f"Tell me about tide pools (my key is {KEY})"), session.prompt("read notes.txt")]
        title = session.title
    return path, turns, title


def test_a_recording_has_a_header_every_frame_in_order_and_no_secret(tmp_path, monkeypatch):
    path, turns, _ = recorded_session(tmp_path, monkeypatch)
    text = path.read_text()
    assert KEY not in text and "***DEMO_SERVICE_API_KEY***" in text
    recording = Recording.load(path)
    header = recording.header
    assert header["agentInfo"]["name"] == "acp-notebook-demo" and header["protocolVersion"] == 1
    assert header["client"]["name"] == "acp-notebook" and header["date"].endswith("Z")
    assert header["agent"]["cwd"] == str(tmp_path / "rec")
    requests = [f.msg["method"] for f in recording.frames if f.kind == "request"]
    assert requests == ["initialize", "session/new", "session/set_config_option", "session/prompt",
                        "session/prompt", "session/request_permission", "fs/read_text_file"]
    assert [f.direction for f in recording.frames if f.kind == "request"][-2:] == ["recv", "recv"]
    assert [f.t for f in recording.frames] == sorted(f.t for f in recording.frames)
    frames = FrameLog(local="client")
    for frame in recording.frames:
        frames.record("client" if frame.direction == "send" else "agent", frame.msg)
    frames.check()


def test_a_replay_gives_the_same_session_offline_and_names_a_divergence(tmp_path, monkeypatch):
    path, turns, title = recorded_session(tmp_path, monkeypatch)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with acpnb.replay(path, cwd=elsewhere, permission="allow") as agent:
        assert agent.info["name"] == "acp-notebook-demo" and agent.name == "demo"
        session = agent.new_session()
        assert session.config.ids() == ["model", "mode", "tone", "show_thoughts"]
        with pytest.raises(acpnb.ReplayMismatch) as wrong_value:
            session.set("model", "fast")  # valid for the agent, but never recorded
        assert "set_config_option model='fast'" in str(wrong_value.value)
        assert "set_config_option model='smart'" in str(wrong_value.value)
        assert session.set("model", "smart")["thought_level"].value  # a corrected request goes on
        masked = f"Tell me about tide pools (my key is ***DEMO_SERVICE_API_KEY***)"
        with pytest.raises(acpnb.ReplayMismatch) as changed:
            session.prompt("Tell me about rock pools")
        where = changed.value.where
        assert where["got"] == "session/prompt 'Tell me about rock pools'"
        assert where["expected"] == f"session/prompt {masked!r}" and where["line"] > 1
        replayed = session.prompt(masked)
        assert replayed.text == turns[0].text.replace(KEY, "***DEMO_SERVICE_API_KEY***")
        assert session.title == title
        read = session.prompt("read notes.txt")  # the agent's fs request now names a path under `elsewhere`
        assert read.text == turns[1].text and read.tool_calls[0].status == "completed"
        reads = [e["msg"] for e in agent.log if e["msg"].get("method") == "fs/read_text_file"]
        assert reads[0]["params"]["path"] == str(elsewhere / "notes.txt")
        with pytest.raises(acpnb.ReplayMismatch, match="the recording has ended"):
            session.prompt("one more")


def test_a_different_permission_answer_fails_the_turn_with_a_mismatch(tmp_path, monkeypatch):
    path, _, _ = recorded_session(tmp_path, monkeypatch)
    with acpnb.replay(path, permission="deny") as agent:
        session = agent.new_session()
        session.set("model", "smart")
        session.prompt("Tell me about tide pools (my key is ***DEMO_SERVICE_API_KEY***)")
        with pytest.raises(acpnb.ReplayMismatch, match="permission answer differs"):
            session.prompt("read notes.txt", timeout=20)


def test_recording_from_the_middle_of_a_session_keeps_what_came_before(tmp_path):
    path = tmp_path / "later.acp.jsonl"
    with acpnb.start("demo", cwd=tmp_path) as agent:
        session = agent.new_session()
        first = session.prompt("new topic: owls")
        assert agent.record(path) == str(path)
        second = session.prompt("and their nests?")
    with acpnb.replay(path) as replay:
        again = replay.new_session()
        assert again.prompt("new topic: owls").text == first.text
        assert again.prompt("and their nests?").text == second.text


def test_the_replay_command_serves_a_recording_to_any_client(tmp_path, monkeypatch):
    path, turns, _ = recorded_session(tmp_path, monkeypatch)
    command = [sys.executable, "-m", "acp_notebook.cli", "replay", str(path)]
    with acpnb.start(command, cwd=tmp_path / "rec", permission="allow") as agent:
        session = agent.new_session()
        with pytest.raises(acpnb.ReplayMismatch, match="line"):
            session.set("model", "fast")
        session.set("model", "smart")
        masked = "Tell me about tide pools (my key is ***DEMO_SERVICE_API_KEY***)"
        assert session.prompt(masked).text == turns[0].text.replace(KEY, "***DEMO_SERVICE_API_KEY***")
        assert any("replay of" in line and "model='fast'" in line for line in agent.stderr_tail(5))


def test_bad_recordings_and_speeds_are_refused_clearly(tmp_path):
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(RecordingError, match="no recording at"):
        acpnb.replay(missing)
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"hello": 1}) + "\n")
    with pytest.raises(RecordingError, match="not an acp-notebook recording") as refused:
        acpnb.replay(other)
    # Each surface says where a recording comes from in its own syntax.
    assert "record=FILE" in refused.value.hint and "%acp" not in refused.value.hint
    assert "%acp start ... --record FILE" in refused.value.hint_for("magic")
    assert "acpnb.start" not in refused.value.hint_for("magic")
    result = subprocess.run([sys.executable, "-m", "acp_notebook.cli", "replay", str(other)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "not an acp-notebook recording" in result.stderr
    assert "written in a notebook by %acp start ... --record FILE" in result.stderr
    good = tmp_path / "good.acp.jsonl"
    with acpnb.start("demo", cwd=tmp_path, record=good) as agent:
        agent.new_session()
    with pytest.raises(ValueError, match="speed must be positive"):
        acpnb.replay(good, speed=0)
