"""The demo agent's notices and context compaction: what a prompt asks of them, and the updates it sends.

The grammar (case is ignored):

- ``notices``: one notice of each severity (info, warning, error), while the turn runs;
- ``notice SEVERITY: TEXT`` (SEVERITY is info, warning or error): one notice titled TEXT, while the turn
  runs; ``notice later SEVERITY: TEXT`` sends it just after the prompt's answer, when no turn runs (a
  client shows such a notice in its session panel rather than in a turn);
- a prompt that starts with ``compact``: a context compaction: ``compaction_update`` (in_progress), a
  summary of the session's history streamed as ``compaction_summary_chunk``s, then ``compaction_update``
  (completed). The session's token count drops to the summary's, so the turn's usage_update shows the
  context emptied.

ACP lets an agent send notices and compactions only to clients that advertise ``session.notices`` and
``session.compaction``; to other clients the demo says in its reply what it would have sent.

``AfterAnswers`` is the demo connection's stream observer that sends the "later" notices once the answer
to the prompt that asked for them is on the wire (the SDK tells observers after each frame is written),
so they reach the client after it, in order. Everything here runs on the demo process's one event loop.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from acp.meta import CLIENT_METHODS

from .._protocol import NOTICE_SEVERITIES
from . import replies
from .host import TurnHost
from .session import DemoSession, RunningTurn


__all__ = ["EXAMPLES", "AfterAnswers", "NoticeCommand", "asks_to_compact", "compact", "parse_notice_command",
           "send_notices"]

# What "notices" sends: a title and a description per severity.
EXAMPLES: dict[str, tuple[str, str]] = {
    "info": ("Using the cached index", "The project was indexed a minute ago; nothing changed since."),
    "warning": ("Rate limited", "The model asked to slow down; retrying in 2 s."),
    "error": ("The search tool failed", "It timed out; the answer goes on without it."),
}
_ALL = re.compile(r"^\s*notices\b", re.IGNORECASE)
_ONE = re.compile(r"^\s*notice\s+(later\s+)?(" + "|".join(NOTICE_SEVERITIES) + r")\s*:\s*(.+?)\s*$",
                  re.IGNORECASE | re.DOTALL)
_COMPACT = re.compile(r"^\s*compact\b", re.IGNORECASE)
SUMMARY_QUOTE = 60


@dataclass(frozen=True)
class NoticeCommand:
    """The notices a prompt asks for: (severity, title, description) each; ``later``: after the answer."""

    notices: tuple[tuple[str, str, str | None], ...]
    later: bool = False


def parse_notice_command(text: str) -> NoticeCommand | None:
    if _ALL.match(text):
        return NoticeCommand(tuple((severity, title, description) for severity, (title, description)
                                   in EXAMPLES.items()))
    found = _ONE.match(text)
    if found is None:
        return None
    later, severity, title = found.groups()
    return NoticeCommand(((severity.lower(), title, None),), later=bool(later))


def asks_to_compact(text: str) -> bool:
    return _COMPACT.match(text) is not None


def _notice(severity: str, title: str, description: str | None) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "notice", "severity": severity, "title": title}
    if description:
        update["description"] = description
    return update


async def send_notices(agent: TurnHost, session: DemoSession, command: NoticeCommand, turn: RunningTurn) -> str:
    """Send the notices now, or leave them for after the answer; the sentence the reply says about it."""
    kinds = ", ".join(severity for severity, _title, _description in command.notices)
    if not agent.client_notices:
        return f"I would send a notice ({kinds}), but this client does not show notices (no session.notices " \
               "capability)."
    updates = [_notice(*notice) for notice in command.notices]
    if command.later:
        agent.after_answers.add(session.session_id, updates)
        return f"I will send a {kinds} notice once this turn has ended."
    for update in updates:
        await turn.pause(agent.delay)
        await agent.update(session, update)
    return f"I sent {len(updates)} notice{'s' if len(updates) != 1 else ''}: {kinds}."


def summary_of(session: DemoSession) -> str:
    """What a compaction keeps of the session: how much was said, the first and the latest prompt."""
    exchanges = session.history
    if not exchanges:
        return "Nothing was said before this compaction."
    first = replies.quote(exchanges[0].user, SUMMARY_QUOTE)
    text = f"{len(exchanges)} earlier exchange{'s' if len(exchanges) != 1 else ''}. You first said: \"{first}\"."
    if len(exchanges) > 1:
        text += f" Most recently: \"{replies.quote(exchanges[-1].user, SUMMARY_QUOTE)}\"."
    return text


async def compact(agent: TurnHost, session: DemoSession, turn: RunningTurn) -> str:
    """Compact the session's context (streamed as ACP compaction updates); the sentence the reply says."""
    if not agent.client_compaction:
        return "I would compact our conversation, but this client does not follow compactions (no " \
               "session.compaction capability)."
    compaction_id = f"compaction-{uuid.uuid4().hex[:12]}"
    await agent.update(session, {"sessionUpdate": "compaction_update", "compactionId": compaction_id,
                                 "status": "in_progress"})
    summary = summary_of(session)
    for piece in replies.chunk(summary):
        await turn.pause(agent.delay)
        await agent.update(session, {"sessionUpdate": "compaction_summary_chunk", "compactionId": compaction_id,
                                     "content": replies.text_content(piece)})
    before, session.tokens_used = session.tokens_used, replies.token_count(summary)
    await agent.update(session, {"sessionUpdate": "compaction_update", "compactionId": compaction_id,
                                 "status": "completed"})
    return f"I compacted our conversation: {before} tokens of context became a summary of {session.tokens_used}."


class AfterAnswers:
    """Updates to send once the answer to a session's running prompt is on the wire (a stream observer)."""

    def __init__(self, agent: TurnHost) -> None:
        self._agent = agent
        self._prompts: dict[Any, str] = {}  # request id of a prompt being answered -> its session id
        self._pending: dict[str, list[dict[str, Any]]] = {}  # session id -> updates for after its answer

    def add(self, session_id: str, updates: list[dict[str, Any]]) -> None:
        self._pending.setdefault(session_id, []).extend(updates)

    def __call__(self, event: Any) -> Awaitable[None] | None:
        message = event.message
        direction = getattr(event.direction, "value", event.direction)
        if direction == "incoming":
            if message.get("method") == "session/prompt" and "id" in message:
                params = message.get("params")
                if isinstance(params, dict) and isinstance(params.get("sessionId"), str):
                    self._prompts[message["id"]] = params["sessionId"]
            return None
        if "method" in message or message.get("id") not in self._prompts:
            return None
        session_id = self._prompts.pop(message["id"])
        updates = self._pending.pop(session_id, [])
        return self._send(session_id, updates) if updates else None

    async def _send(self, session_id: str, updates: list[dict[str, Any]]) -> None:
        for update in updates:
            await self._agent.wire().send_notification(CLIENT_METHODS["session_update"],
                                                       {"sessionId": session_id, "update": update})
