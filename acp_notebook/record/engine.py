"""ReplayEngine: answers a client from a recording, frame by frame, and says where it diverges.

Pure: ``receive(frame)`` takes what the live client sent and returns what the recorded agent
sent next (with the recorded gaps), or raises ReplayMismatch. The transports around it (an
in-process ReplayTransport, and ``acp-notebook replay FILE`` on stdio) only move frames.

Matching, in the recording's order:
- requests match by method and by what decides the agent's answer: the prompt's text, the config
  id and value, the mode, the session id, the auth method (not the cwd, not the capabilities);
- the client's answers to the agent's requests match by id; a permission answer must pick the
  same outcome, since the recorded agent went on from it;
- the client's notifications (session/cancel...) are not waited for: the recorded agent's frames
  after a recorded cancel play out anyway, and a live cancel is ignored. Their timing is the
  user's, and what the agent did about them is already in the recording.
Ids: the live client's request ids may differ from the recorded ones; answers are re-addressed.
Paths: paths under the recorded session cwd are moved under the live one, in what the agent sends
(and back, in what the client sends, before comparing): "read /old/cwd/a.txt" matches "read /new/cwd/a.txt".

Not thread-safe: one engine per connection, used from one loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ReplayMismatch
from .format import RecordedFrame, Recording

__all__ = ["Emission", "ReplayEngine"]


@dataclass(frozen=True)
class Emission:
    frame: dict[str, Any]
    gap: float  # recorded seconds since the previous frame the agent sent


def _prompt_text(params: dict[str, Any]) -> str:
    blocks = params.get("prompt") or []
    return "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")


# What must be equal for a live request to stand for a recorded one, per method.
_KEYS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "initialize": lambda p: None,
    "session/new": lambda p: None,
    "session/list": lambda p: None,
    "authenticate": lambda p: p.get("methodId"),
    "session/prompt": lambda p: (p.get("sessionId"), _prompt_text(p)),
    "session/set_config_option": lambda p: (p.get("sessionId"), p.get("configId"), p.get("value")),
    "session/set_mode": lambda p: (p.get("sessionId"), p.get("modeId")),
    "session/set_model": lambda p: (p.get("sessionId"), p.get("modelId")),
}


def _key(method: str, params: Any) -> Any:
    params = params if isinstance(params, dict) else {}
    rule = _KEYS.get(method)
    if rule is not None:
        return rule(params)
    return params.get("sessionId") if "sessionId" in params else {k: v for k, v in params.items() if k != "_meta"}


def _describe(method: str, key: Any) -> str:
    if method == "session/prompt" and isinstance(key, tuple):
        return f"session/prompt {key[1]!r}"
    if method == "session/set_config_option" and isinstance(key, tuple):
        return f"set_config_option {key[1]}={key[2]!r}"
    return method if key is None else f"{method} {key!r}"


def _outcome(result: Any) -> Any:
    outcome = (result or {}).get("outcome") if isinstance(result, dict) else None
    return (outcome.get("outcome"), outcome.get("optionId")) if isinstance(outcome, dict) else None


class ReplayEngine:
    """Walks a recording in step with a live client."""

    def __init__(self, recording: Recording, *, cwd: str | None = None) -> None:
        self.recording = recording
        self._frames = recording.frames
        self._cursor = 0
        self._ids: dict[Any, Any] = {}  # recorded client request id -> live id
        self._open_requests: dict[Any, str] = {}  # live id -> method, for requests not answered yet
        self._last_t: float | None = None
        self._move: tuple[str, str] | None = None
        if cwd is not None:
            self._move_to(cwd)

    def _move_to(self, cwd: Any) -> None:
        """Paths under the recorded cwd are shown under ``cwd`` from now on (set by the first session request,
        when the transport was not told)."""
        old = self.recording.cwd
        if self._move is None and isinstance(cwd, str) and old and old.rstrip("/") != cwd.rstrip("/"):
            self._move = (old.rstrip("/"), cwd.rstrip("/"))

    @property
    def finished(self) -> bool:
        return self._next_send(self._cursor) is None

    def opening(self) -> list[Emission]:
        """What the agent sent before the client's first frame (rare; some agents greet)."""
        return self._emit_until_next_send(0)

    def receive(self, frame: dict[str, Any]) -> list[Emission]:
        """The live client's frame; returns the agent's recorded frames that follow it."""
        kind = "request" if "method" in frame and "id" in frame else "notification" if "method" in frame \
            else "response"
        if kind == "notification":
            return []
        index = self._next_send(self._cursor)
        if index is None:
            raise self._mismatch(frame, None, "the recording has ended")
        recorded = self._frames[index]
        problem = self._compare(recorded, frame, kind)
        if problem:
            raise self._mismatch(frame, recorded, problem)
        if kind == "request":
            self._ids[recorded.msg["id"]] = frame["id"]
            self._open_requests[frame["id"]] = frame["method"]
            if frame["method"] in ("session/new", "session/load", "session/resume"):
                self._move_to((frame.get("params") or {}).get("cwd"))
        return self._consume(index, frame)

    def failure_answers(self, mismatch: ReplayMismatch) -> list[dict[str, Any]]:
        """Error answers for every live request still waiting, so nothing hangs after a divergence."""
        answers = [{"jsonrpc": "2.0", "id": live_id, "error": {"code": mismatch.code, "message": mismatch.message,
                                                               "data": mismatch.data}}
                   for live_id in self._open_requests]
        self._open_requests.clear()
        return answers

    # --- internals --------------------------------------------------------------
    def _compare(self, recorded: RecordedFrame, frame: dict[str, Any], kind: str) -> str | None:
        if recorded.kind != kind:
            return f"the recording has a {recorded.kind} here"
        if kind == "request":
            method = frame["method"]
            if recorded.msg["method"] != method:
                return "the recording has another request here"
            live = self._moved(frame.get("params"), back=True) if self._move is not None else frame.get("params")
            if _key(method, recorded.msg.get("params")) != _key(method, live):
                return "its parameters differ from the recording's"
            return None
        if recorded.msg.get("id") != frame.get("id"):
            return "it answers another request than the recording's next answer"
        if _outcome(recorded.msg.get("result")) != _outcome(frame.get("result")):
            return "the permission answer differs from the recorded one"
        return None

    def _mismatch(self, frame: dict[str, Any], recorded: RecordedFrame | None, problem: str) -> ReplayMismatch:
        method = frame.get("method") or "an answer"
        got = _describe(method, _key(method, frame.get("params"))) if "method" in frame \
            else f"answer {_outcome(frame.get('result')) or frame.get('result')!r}"
        where: dict[str, Any] = {"file": self.recording.name, "got": got}
        if recorded is None:
            message = f"replay of {self.recording.name}: the client sent {got}, but {problem}"
        else:
            rmethod = recorded.msg.get("method") or "an answer"
            expected = _describe(rmethod, _key(rmethod, recorded.msg.get("params"))) if "method" in recorded.msg \
                else f"answer {_outcome(recorded.msg.get('result')) or recorded.msg.get('result')!r}"
            where.update(line=recorded.line, expected=expected)
            message = (f"replay of {self.recording.name}: the client sent {got}, but line {recorded.line} of the "
                       f"recording has {expected} ({problem})")
        return ReplayMismatch(message, where=where, method=frame.get("method") or "")

    def _next_send(self, start: int) -> int | None:
        """The next frame the client must send: a request or an answer (notifications are not waited for)."""
        for index in range(start, len(self._frames)):
            recorded = self._frames[index]
            if recorded.direction == "send" and recorded.kind != "notification":
                return index
        return None

    def _consume(self, index: int, frame: dict[str, Any]) -> list[Emission]:
        self._last_t = self._frames[index].t
        return self._emit_until_next_send(index + 1)

    def _emit_until_next_send(self, start: int) -> list[Emission]:
        out: list[Emission] = []
        stop = self._next_send(start)
        for recorded in self._frames[start:stop]:
            if recorded.direction != "recv" or not recorded.msg:
                continue  # the client's notifications; bad lines noted at recording time are not sent again
            gap = recorded.t - self._last_t if self._last_t is not None else 0.0
            out.append(Emission(self._readdress(recorded.msg), max(0.0, gap)))
            self._last_t = recorded.t
        self._cursor = len(self._frames) if stop is None else stop
        return out

    def _readdress(self, msg: dict[str, Any]) -> dict[str, Any]:
        if "method" not in msg and "id" in msg and msg["id"] in self._ids:
            live_id = self._ids.pop(msg["id"])
            self._open_requests.pop(live_id, None)
            msg = {**msg, "id": live_id}
        return self._moved(msg) if self._move is not None else msg

    def _moved(self, value: Any, *, back: bool = False) -> Any:
        """Strings naming paths under the recorded cwd, moved under the live one (``back``: the other way,
        to compare what the live client sends with what was recorded)."""
        assert self._move is not None
        old, new = self._move[::-1] if back else self._move
        if isinstance(value, str):
            return value.replace(old + "/", new + "/") if old in value else (new if value == old else value)
        if isinstance(value, dict):
            return {k: self._moved(v, back=back) for k, v in value.items()}
        if isinstance(value, list):
            return [self._moved(v, back=back) for v in value]
        return value
