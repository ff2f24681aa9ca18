"""One demo session as data: what is saved to its file (history, title, settings, cwd, usage) and
what lives only while a turn runs (RunningTurn: its cancel and end events, what it has streamed, and
the waits a cancel cuts short). `to_record` / `from_record` are the file format.

Sessions are mutated only by the demo agent's request handlers, on its one event loop.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import Any, TypeVar

from .options import SessionSettings, choices_of

__all__ = ["RECORD_VERSION", "DemoSession", "Exchange", "RunningTurn", "TurnCancelled", "new_session_id", "now_iso"]

RECORD_FORMAT = "acp-notebook-demo-session"
RECORD_VERSION = 1
ID_PREFIX = "demo-"

T = TypeVar("T")


def new_session_id() -> str:
    """A fresh id, unique across processes and machines (a random UUID), usable as a file name."""
    return f"{ID_PREFIX}{uuid.uuid4().hex}"


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


@dataclass
class Exchange:
    """One prompt and the reply text that was actually sent (all of it, or what went out before a cancel)."""

    user: str
    agent: str


class TurnCancelled(Exception):
    """The client sent session/cancel (or closed or deleted the session) while a turn was running."""


@dataclass
class RunningTurn:
    """A running prompt turn; never saved."""

    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    chunks_sent: int = 0
    reply_sent: str = ""

    async def pause(self, delay: float) -> None:
        """The delay between streamed chunks (none before the turn's first chunk, so a reply starts
        at once); it ends early, raising TurnCancelled, when the turn is cancelled."""
        if delay > 0 and self.chunks_sent > 0:
            try:
                await asyncio.wait_for(self.cancelled.wait(), delay)
            except asyncio.TimeoutError:
                pass
        else:
            await asyncio.sleep(0)  # let a pending session/cancel be dispatched
        if self.cancelled.is_set():
            raise TurnCancelled

    async def unless_cancelled(self, awaitable: Awaitable[T]) -> T:
        """Await a request to the client, abandoning it (TurnCancelled) if the turn is cancelled first."""
        work = asyncio.ensure_future(awaitable)
        cancelled = asyncio.ensure_future(self.cancelled.wait())
        try:
            await asyncio.wait({work, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
            if not work.done():
                work.cancel()
        if work.done() and not work.cancelled():
            return work.result()
        raise TurnCancelled


@dataclass
class DemoSession:
    session_id: str
    cwd: str
    settings: SessionSettings = field(default_factory=SessionSettings)
    title: str | None = None
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    # Orders session/list (most recent activity first); updatedAt has only whole seconds.
    activity_ns: int = field(default_factory=time.time_ns)
    history: list[Exchange] = field(default_factory=list)
    tool_calls: int = 0
    tokens_used: int = 0
    cost: float = 0.0
    # Not saved: the running turn, and whether session/delete removed it (a finishing turn must not
    # write the file back).
    turn: RunningTurn | None = None
    deleted: bool = False
    # The `kernel` MCP server this connection's client offered for the session (kernel_tools.client.kernel_entry), if any.
    kernel: dict[str, Any] | None = None
    # The client's system prompt ({mode, text}, demo/instructions.py), saved with the session; None: none given.
    system_prompt: dict[str, Any] | None = None

    def forked(self, session_id: str, cwd: str, kernel: dict[str, Any] | None) -> DemoSession:
        """A new session that starts where this one is: its history, settings, title and context (tokens); its
        own id, directory, kernel tools and cost."""
        return DemoSession(session_id=session_id, cwd=cwd, settings=replace(self.settings), title=self.title,
                           history=[replace(exchange) for exchange in self.history], tool_calls=self.tool_calls,
                           tokens_used=self.tokens_used, kernel=kernel, system_prompt=self.system_prompt)

    def touch(self) -> None:
        self.updated_at = now_iso()
        self.activity_ns = time.time_ns()

    def info(self) -> dict[str, Any]:
        """The session's SessionInfo for session/list."""
        info: dict[str, Any] = {"sessionId": self.session_id, "cwd": self.cwd, "updatedAt": self.updated_at}
        if self.title is not None:
            info["title"] = self.title
        return info

    def to_record(self) -> dict[str, Any]:
        return {
            "format": RECORD_FORMAT,
            "version": RECORD_VERSION,
            "sessionId": self.session_id,
            "cwd": self.cwd,
            "title": self.title,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "activityNs": self.activity_ns,
            "settings": {f.name: getattr(self.settings, f.name) for f in fields(SessionSettings)},
            "history": [{"user": e.user, "agent": e.agent} for e in self.history],
            "toolCalls": self.tool_calls,
            "usage": {"tokens": self.tokens_used, "cost": self.cost},
            "systemPrompt": self.system_prompt,
        }

    @classmethod
    def from_record(cls, record: dict[str, Any], session_id: str) -> DemoSession:
        """Rebuild a session from its file; ValueError saying what is wrong with the record."""
        if record.get("format") != RECORD_FORMAT:
            raise ValueError(f"not a demo session file (format {record.get('format')!r})")
        if record.get("version") != RECORD_VERSION:
            raise ValueError(f"session file version {record.get('version')!r}; this agent reads {RECORD_VERSION}")
        if record.get("sessionId") != session_id:
            raise ValueError(f"the file names session {record.get('sessionId')!r}, not {session_id!r}")
        usage = _typed(record, "usage", dict)
        return cls(
            session_id=session_id,
            cwd=_typed(record, "cwd", str),
            settings=_settings(_typed(record, "settings", dict)),
            title=_typed(record, "title", (str, type(None))),
            created_at=_typed(record, "createdAt", str),
            updated_at=_typed(record, "updatedAt", str),
            activity_ns=_typed(record, "activityNs", int),
            history=[_exchange(item) for item in _typed(record, "history", list)],
            tool_calls=_typed(record, "toolCalls", int),
            tokens_used=_typed(usage, "tokens", int),
            cost=float(_typed(usage, "cost", (int, float))),
            system_prompt=_system_prompt(record.get("systemPrompt")),  # absent from files written before it
        )


def _typed(record: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = record.get(key)
    # bool is an int in Python; a boolean never stands for a count here.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, (int, float))):
        raise ValueError(f"field {key!r} is {value!r}")
    return value


def _system_prompt(saved: Any) -> dict[str, Any] | None:
    if saved is None:
        return None
    if not isinstance(saved, dict) or not isinstance(saved.get("mode"), str) or not isinstance(saved.get("text"), str):
        raise ValueError(f"field 'systemPrompt' is {saved!r}, not {{mode, text}}")
    return {"mode": saved["mode"], "text": saved["text"]}


def _exchange(item: Any) -> Exchange:
    if not isinstance(item, dict) or not isinstance(item.get("user"), str) or not isinstance(item.get("agent"), str):
        raise ValueError(f"history entry {item!r} is not {{user, agent}} text")
    return Exchange(user=item["user"], agent=item["agent"])


def _settings(saved: dict[str, Any]) -> SessionSettings:
    settings = SessionSettings()
    for name in ("model", "thought_level", "mode", "tone"):
        value = saved.get(name)
        valid = [choice.value for choice in choices_of(name)]
        if value not in valid:
            raise ValueError(f"setting {name!r} is {value!r}, not one of {', '.join(valid)}")
        setattr(settings, name, value)
    show = saved.get("show_thoughts")
    if not isinstance(show, bool):
        raise ValueError(f"setting 'show_thoughts' is {show!r}, not true or false")
    settings.show_thoughts = show
    return settings
