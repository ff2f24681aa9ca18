"""Recordings as test fixtures: replay a recorded session against the client, from pytest or a script.

- ``replay_script(path)`` drives ``acpnb.replay(path)`` through every request the client made
  when the session was recorded, using the client's public API (new_session, set, prompt with
  the recorded permission answers, list, close...), and returns what came back. A client change
  that alters what it sends, or how it reads what it gets, shows up as a ReplayMismatch or a
  difference in the returned turns.
- the ``acp_replay`` fixture (registered as a pytest plugin when acp-notebook is installed):
  ``acp_replay(path, **kwargs)`` returns a replayed Agent, closed after the test.

Blocking calls from the test's thread; the agents run on the package's loop thread as usual.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from .client import Agent, PermissionRequest, Session, replay
from .record.format import RecordedFrame, Recording
from .turn import Turn

__all__ = ["ReplayedRun", "acp_replay", "replay_script"]


@dataclass
class ReplayedRun:
    """What ``replay_script`` did: the agent (closed), its sessions by id, and every turn in order."""

    agent: Agent
    sessions: dict[str, Session] = field(default_factory=dict)
    turns: list[Turn] = field(default_factory=list)
    listed: list[list[dict[str, Any]]] = field(default_factory=list)


def _recorded_answers(recording: Recording) -> Iterator[Any]:
    """The recorded client's answers to the agent's permission requests, in order (option id or None)."""
    asked = {f.msg["id"] for f in recording.frames
             if f.direction == "recv" and f.msg.get("method") == "session/request_permission"}
    for frame in recording.frames:
        if frame.direction == "send" and "method" not in frame.msg and frame.msg.get("id") in asked:
            outcome = (frame.msg.get("result") or {}).get("outcome") or {}
            yield outcome.get("optionId") if outcome.get("outcome") == "selected" else None


def replay_script(path: str | os.PathLike[str], *, timeout: float = 60.0, **replay_kwargs: Any) -> ReplayedRun:
    """Replay ``path`` through the client's public API, as the recorded client used it (see the module docstring)."""
    recording = Recording.load(path)
    answers = _recorded_answers(recording)

    def permission(request: PermissionRequest) -> Any:
        return next(answers, None)

    agent = replay(path, permission=permission, timeout=timeout, **replay_kwargs)
    run = ReplayedRun(agent)
    try:
        for frame in recording.frames:
            if frame.direction == "send" and frame.kind == "request" and frame.msg["method"] != "initialize":
                _perform(run, frame, timeout)
    finally:
        agent.close()
    return run


def _perform(run: ReplayedRun, frame: RecordedFrame, timeout: float) -> None:
    method, params = frame.msg["method"], frame.msg.get("params") or {}
    agent, session = run.agent, run.sessions.get(params.get("sessionId", ""))
    if method == "session/new":
        opened = agent.new_session(timeout=timeout)
        run.sessions[opened.id] = opened
    elif method in ("session/load", "session/resume"):
        reopen = agent.load_session if method == "session/load" else agent.resume_session
        run.sessions[params["sessionId"]] = reopen(params["sessionId"], timeout=timeout)
    elif method == "session/set_config_option" and session is not None:
        session.set(params["configId"], params["value"], timeout=timeout)
    elif method == "session/prompt" and session is not None:
        run.turns.append(session.prompt(params.get("prompt") or [], timeout=timeout))
    elif method == "session/list":
        run.listed.append(agent.list_sessions(params.get("cwd"), timeout=timeout))
    elif method == "session/close" and session is not None:
        session.close(timeout=timeout)
    else:
        agent.request(method, params, timeout=timeout)


@pytest.fixture
def acp_replay() -> Iterator[Any]:
    """``acp_replay(path, **kwargs)``: an Agent answered from the recording at ``path``; closed after the test."""
    started: list[Agent] = []

    def start(path: str | os.PathLike[str], **kwargs: Any) -> Agent:
        agent = replay(path, **kwargs)
        started.append(agent)
        return agent

    yield start
    for agent in started:
        agent.close()
