"""The demo agent's file work: "read PATH" and "write TEXT to PATH" run as plan -> tool_call ->
session/request_permission -> fs/* on the client -> tool_call_update; an edit (`tasks.parse_edit`) is
a read and a write, or a write alone, each done that way.

A client request that fails (an error answer, or an answer that does not parse) marks the tool
call `failed` with the reason and ends the work with a sentence saying what failed; the turn goes
on and ends normally. A cancelled turn marks the tool call failed ("Cancelled") and re-raises
TurnCancelled. One FileWork runs inside one prompt turn, on the agent's event loop.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Literal

from acp.exceptions import RequestError
from acp.meta import CLIENT_METHODS

from . import replies, tasks
from .host import TurnHost
from .session import DemoSession, RunningTurn, TurnCancelled


__all__ = ["PERMISSION_OPTIONS", "AnswerInvalid", "FileCommand", "FileWork", "client_error", "parse_file_command",
           "run_edit"]

PERMISSION_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]


class AnswerInvalid(Exception):
    """A client's answer that is not the shape its request's result has; the message says what is wrong."""


def answer_field(answer: Any, key: str, kind: type, what: str) -> Any:
    """``answer[key]`` when the answer is an object holding a ``kind`` there, else AnswerInvalid."""
    value = answer.get(key) if isinstance(answer, dict) else None
    if not isinstance(value, kind):
        raise AnswerInvalid(f"{key!r} should be {what}, got {type(value).__name__}")
    return value

_READ_COMMAND = re.compile(r"read\s+(?P<path>\S+)", re.IGNORECASE)
_WRITE_COMMAND = re.compile(r"write\s+(?P<text>.+?)\s+to\s+(?P<path>\S+)", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class FileCommand:
    action: Literal["read", "write"]
    path: str  # as the user typed it; made absolute against the session cwd before use
    text: str = ""


def parse_file_command(prompt: str) -> FileCommand | None:
    """Recognise "read PATH" and "write TEXT to PATH" (PATH is the last word, TEXT may be quoted)."""
    stripped = prompt.strip()
    if match := _READ_COMMAND.fullmatch(stripped):
        return FileCommand("read", match["path"])
    if match := _WRITE_COMMAND.fullmatch(stripped):
        text = match["text"]
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
            text = text[1:-1]
        return FileCommand("write", match["path"], text)
    return None


def client_error(exc: RequestError | AnswerInvalid) -> str:
    """A client's failed answer in a few words: its error message, or why its result is not valid."""
    if isinstance(exc, RequestError):
        return str(exc) or f"error {exc.code}"
    return f"the client's answer was not valid ({exc})"


class FileWork:
    """One file command inside a turn; `run` returns the sentence the reply reports."""

    def __init__(self, agent: TurnHost, session: DemoSession, command: FileCommand, turn: RunningTurn) -> None:
        self.agent = agent
        self.session = session
        self.command = command
        self.turn = turn
        self.voice = replies.VOICES[session.settings.tone]
        self.reading = command.action == "read"
        path = command.path if os.path.isabs(command.path) else os.path.join(session.cwd, command.path)
        self.path = os.path.normpath(path)
        session.tool_calls += 1
        self.call_id = f"call-{session.tool_calls}"
        self.title = f"{'Read' if self.reading else 'Write'} {command.path}"
        self.kind = "read" if self.reading else "edit"
        self.method = "fs/read_text_file" if self.reading else "fs/write_text_file"
        self.content: str | None = None  # what a read returned
        self.diff = [{"type": "diff", "path": self.path, "newText": command.text}]
        self.steps = [
            f"Ask permission to {command.action} {command.path}",
            f"{command.action.capitalize()} {command.path} through the client",
            "Report the result",
        ]

    def _sentence(self, template: str, **fields: Any) -> str:
        return template.format(action=self.command.action, path=self.command.path, **fields)

    async def run(self) -> str:
        await self._plan(done=0)
        await self._announce()
        try:
            refusal = await self._ask_permission()
            if refusal is not None:
                return refusal
            await self._plan(done=1)
            await self._settle("in_progress")
            return await self._transfer()
        except TurnCancelled:
            await self._settle("failed", "Cancelled")
            raise

    async def _plan(self, done: int, *, working: bool = True) -> None:
        """Send the complete plan: the first `done` steps completed, the next one in progress
        unless the work stopped (`working=False`), the rest pending."""
        entries = []
        for index, step in enumerate(self.steps):
            status = "completed" if index < done else "in_progress" if index == done and working else "pending"
            entries.append({"content": step, "priority": "high" if index < 2 else "medium", "status": status})
        await self.agent.update(self.session, {"sessionUpdate": "plan", "entries": entries})

    async def _announce(self) -> None:
        tool_call: dict[str, Any] = {
            "sessionUpdate": "tool_call",
            "toolCallId": self.call_id,
            "title": self.title,
            "name": "read_text_file" if self.reading else "write_text_file",
            "kind": self.kind,
            "status": "pending",
            "locations": [{"path": self.path}],
            "rawInput": {"path": self.path} if self.reading else {"path": self.path, "content": self.command.text},
        }
        if not self.reading:
            tool_call["content"] = self.diff
        await self.agent.update(self.session, tool_call)

    async def _settle(self, status: str, message: str | None = None, content: list[dict[str, Any]] | None = None) -> None:
        update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": self.call_id, "status": status}
        if message is not None:
            update["content"] = [{"type": "content", "content": {"type": "text", "text": message}}]
        if content is not None:
            update["content"] = content
        await self.agent.update(self.session, update)

    async def _stop(self, reason: str, sentence: str, *, done: int) -> str:
        """The work ends early: the tool call fails with `reason`, the plan stops after `done` steps."""
        await self._settle("failed", reason)
        await self._plan(done=done, working=False)
        return sentence

    async def _ask_permission(self) -> str | None:
        """None when allowed; otherwise the sentence for the reply (denied, or the request failed)."""
        request = self.agent.wire().send_request(CLIENT_METHODS["session_request_permission"], {
            "sessionId": self.session.session_id,
            "toolCall": {"toolCallId": self.call_id, "title": self.title, "kind": self.kind, "status": "pending",
                         "locations": [{"path": self.path}]},
            "options": PERMISSION_OPTIONS,
        })
        try:
            outcome = answer_field(await self.turn.unless_cancelled(request), "outcome", dict, "an object")
            kind = answer_field(outcome, "outcome", str, "a string")
            if kind not in ("selected", "cancelled"):
                raise AnswerInvalid(f"'outcome' should be 'selected' or 'cancelled', got {kind!r}")
            selected = kind == "selected"
            option_id = answer_field(outcome, "optionId", str, "a string") if selected else None
        except (RequestError, AnswerInvalid) as exc:
            reason = client_error(exc)
            return await self._stop(
                f"session/request_permission failed: {reason}",
                self._sentence(self.voice.permission_failed, error=reason),
                done=0,
            )
        if not selected:
            raise TurnCancelled  # the client answers "cancelled" only for a turn it cancels
        if option_id != "allow_once":
            return await self._stop("Permission denied by the user", self._sentence(self.voice.denied), done=1)
        return None

    async def _transfer(self) -> str:
        """The fs request itself; the sentence for the reply."""
        if not (self.agent.client_reads if self.reading else self.agent.client_writes):
            capability = "fs.readTextFile" if self.reading else "fs.writeTextFile"
            return await self._stop(
                f"The client did not advertise {capability}",
                self._sentence(self.voice.no_fs, method=self.method),
                done=1,
            )
        wire, asked = self.agent.wire(), {"sessionId": self.session.session_id, "path": self.path}
        try:
            if self.reading:
                reading = wire.send_request(CLIENT_METHODS["fs_read_text_file"], asked)
                content = answer_field(await self.turn.unless_cancelled(reading), "content", str, "a string")
                await self._settle("completed", content)
                self.content = content
                lines = replies.plural(len(content.splitlines()), "line")
                sentence = self.voice.read_ok.format(path=self.command.path, lines=lines)
            else:
                writing = wire.send_request(CLIENT_METHODS["fs_write_text_file"],
                                            {**asked, "content": self.command.text})
                written = await self.turn.unless_cancelled(writing)
                if written is not None and not isinstance(written, dict):
                    raise AnswerInvalid(f"the result should be an object, got {type(written).__name__}")
                await self._settle("completed", content=self.diff)
                chars = replies.plural(len(self.command.text), "character")
                sentence = self.voice.write_ok.format(path=self.command.path, chars=chars)
        except (RequestError, AnswerInvalid) as exc:
            reason = client_error(exc)
            return await self._stop(
                f"{self.method} failed: {reason}", self._sentence(self.voice.failed, error=reason), done=1
            )
        await self._plan(done=len(self.steps))
        return sentence


async def run_edit(agent: TurnHost, session: DemoSession, edit: tasks.Edit, turn: RunningTurn) -> str:
    """An edit as file work (the contract in `tasks`): the sentence the reply reports."""
    model = session.settings.model
    if edit.action == "create" or model != "smart":  # fast writes without reading (on purpose, see `tasks`)
        text = tasks.edited_text(edit, None, model) or ""
        return await FileWork(agent, session, FileCommand("write", edit.path, text), turn).run()
    reading = FileWork(agent, session, FileCommand("read", edit.path), turn)
    sentence = await reading.run()
    if reading.content is None:
        return sentence  # the read failed or was refused; the sentence says so
    text = tasks.edited_text(edit, reading.content, model)
    if text is None:
        return f"{sentence} {replies.VOICES[session.settings.tone].edit_missing.format(old=edit.old, path=edit.path)}"
    written = await FileWork(agent, session, FileCommand("write", edit.path, text), turn).run()
    return f"{sentence} {written}"
