"""The recordings shipped in notebooks/recordings/ (made by tests/interop/record_sessions.py against the
pinned real agents and the scripted model server): they hold no secret, and each replays through the
client's public API, offline, with no agent installed."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from acp_notebook._redact import secret_values
from acp_notebook.record import Recording
from acp_notebook.testing import replay_script
from tests.schema_check import validate_frame

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "notebooks" / "recordings").glob("*.acp.jsonl"))
# Shapes of real credentials (OpenAI/Anthropic, Google, GitHub, AWS, bearer headers, PEM keys), and the
# placeholder key the interop setups pass in the agents' environment.
CREDENTIAL = re.compile(r"sk-[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|AKIA[0-9A-Z]{16}|"
                        r"Bearer [A-Za-z0-9._-]{16,}|-----BEGIN [A-Z ]*PRIVATE KEY-----|dummy-key-for-offline-tests")


def every_recording_in_the_repo() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.acp.jsonl"], cwd=ROOT, capture_output=True, text=True, check=True)
    return sorted({ROOT / line for line in listed.stdout.split()} | set(SHIPPED))


def test_the_four_agents_are_shipped():
    assert [p.name for p in SHIPPED] == ["claude.acp.jsonl", "codex.acp.jsonl", "gemini.acp.jsonl",
                                         "opencode.acp.jsonl"]


@pytest.mark.parametrize("path", every_recording_in_the_repo(), ids=lambda p: p.name)
def test_no_recording_holds_a_secret(path):
    text = path.read_text(encoding="utf-8")
    found = CREDENTIAL.findall(text)
    assert not found, f"{path.name} holds what looks like a credential: {found[:3]}"
    for name, value in secret_values(os.environ):
        assert value not in text, f"{path.name} holds the value of ${name}"


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem.split(".")[0])
def test_a_shipped_recording_replays_through_the_client(path, tmp_path):
    recording = Recording.load(path)
    for frame in recording.frames:  # what our client sent when it was recorded is valid ACP
        if frame.direction == "send" and "method" in frame.msg:
            validate_frame(frame.msg, "client")
    run = replay_script(path, cwd=tmp_path)
    texts = [turn.text for turn in run.turns]
    assert texts[0] == "Hello from the interop model. You said: say hi"
    assert texts[1] == "Thought about tides." and run.turns[1].thoughts
    write = run.turns[2]
    assert write.permissions and write.tool_calls and write.tool_calls[-1].kind in ("edit", "execute")
    assert all(turn.stop_reason == "end_turn" for turn in run.turns)
    session = next(iter(run.sessions.values()))
    name = path.name.split(".")[0]
    if name == "opencode":  # the reasoning model added the dependent `effort` option, then set to high
        assert session.config["effort"].value == "high" and session.model == "interop/interop-model-large"
    if name == "claude":
        assert session.model == "haiku" and session.config["mode"].value == "default"
    if name == "gemini":
        assert session.config["mode"].legacy_source == "modes"
    if name != "gemini":
        assert run.listed and run.listed[0][0]["title"]
