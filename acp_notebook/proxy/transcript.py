"""What a proxy session's conversation held, as the proxy saw it pass: for handing it over to another agent.

``Transcript`` keeps one ``branching.Exchange`` per turn (the client's prompt, the bound agent's reply,
each tool call summarised with its result, as the client's own handovers write them). A turn begins when
the client's session/prompt goes to the agent and ends with its answer; the ``session/update``s of the
bound agent session in between are read. A session reopened with its history (session/load replays it as
``user_message_chunk`` / ``agent_message_chunk`` updates) is read the same way, each user message
beginning an exchange.

Threads: the proxy's one event loop.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..branching import Exchange
from .._visible import visible

__all__ = ["Transcript"]

TOOL_SUMMARY_CHARS = 300  # each tool call's summary (title, status, result), as the client's handover caps it


def _text_of(content: Any) -> str:
    if isinstance(content, Mapping) and content.get("type") == "text" and isinstance(content.get("text"), str):
        return content["text"]
    return ""


def _listed(value: Any) -> list[Any]:
    """``value`` if it is a list (an agent's frame may hold anything where a list belongs), else nothing."""
    return value if isinstance(value, list) else []


def _prompt_text(blocks: Any) -> str:
    return "\n".join(_text_of(b) for b in _listed(blocks) if _text_of(b))


def _tool_line(call: Mapping[str, Any]) -> str:
    """One tool call in a line, capped: what it was, how it ended, what it gave."""
    name = call.get("title") or call.get("toolCallId") or "tool call"
    raw = call.get("rawOutput")
    if raw is not None:
        result = raw if isinstance(raw, str) else json.dumps(raw, default=str)
    else:
        result = " ".join(_text_of(c.get("content")) for c in _listed(call.get("content"))
                          if isinstance(c, Mapping) and c.get("type") == "content")
    result = " ".join(result.split())
    line = f"{name} ({call.get('status') or 'no status'})" + (f": {result}" if result else "")
    return visible(line if len(line) <= TOOL_SUMMARY_CHARS else line[: TOOL_SUMMARY_CHARS - 1] + "…")


class Transcript:
    """The exchanges of one proxy session so far, and the one being made."""

    def __init__(self, done: tuple[Exchange, ...] = ()) -> None:
        self._done: list[Exchange] = list(done)
        self._prompt: str | None = None
        self._reply: list[str] = []
        self._tools: dict[str, dict[str, Any]] = {}
        self._in_turn = False

    def begin(self, prompt: Any) -> None:
        """The client's prompt goes to the agent: a new exchange."""
        self._finish()
        self._prompt, self._in_turn = _prompt_text(prompt), True

    def end(self) -> None:
        """The turn's answer came (or it failed): the exchange is complete."""
        self._finish()
        self._in_turn = False

    def see(self, update: Mapping[str, Any]) -> None:
        """One session/update of the bound agent session."""
        kind = update.get("sessionUpdate")
        if kind == "user_message_chunk" and not self._in_turn:  # a replayed history: each message opens an exchange
            self._finish()
            self._prompt = _text_of(update.get("content"))
        elif kind == "agent_message_chunk" and self._prompt is not None:
            self._reply.append(_text_of(update.get("content")))
        elif kind in ("tool_call", "tool_call_update") and self._prompt is not None:
            call_id = str(update.get("toolCallId"))
            known = self._tools.setdefault(call_id, {})
            known.update({k: v for k, v in update.items() if v is not None})

    def so_far(self) -> tuple[Exchange, ...]:
        return tuple(self._done)

    def copy(self) -> Transcript:
        """The exchanges so far, for a fork of the session (its own turns then add to its own copy)."""
        return Transcript(self.so_far())

    def _finish(self) -> None:
        if self._prompt is not None:
            self._done.append(Exchange(self._prompt, "".join(self._reply),
                                       tuple(_tool_line(call) for call in self._tools.values())))
        self._prompt, self._reply, self._tools = None, [], {}
