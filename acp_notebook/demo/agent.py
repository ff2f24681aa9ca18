"""DemoAgent: the protocol side of the built-in demo agent (sessions, turns, file work, config options)."""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from typing import Any, Literal, TypeVar

from acp import PROTOCOL_VERSION, RequestError
from acp.connection import Connection
from acp.meta import CLIENT_METHODS
from acp.schema import ClientCapabilities, PermissionOption, ToolCallLocation, ToolCallUpdate

from . import replies
from .options import MODES, ConfigChoiceError, SessionSettings, legacy_models, legacy_modes

__all__ = ["AGENT_NAME", "AUTH_METHOD_ID", "DemoAgent", "agent_version"]

log = logging.getLogger(__name__)

AGENT_NAME = "acp-notebook-demo"
AGENT_TITLE = "Demo agent"
AUTH_METHOD_ID = "demo-token"
CONTEXT_WINDOW = 128_000
# Made-up prices (USD per demo token) so usage_update carries a cost that depends on the model.
PRICE_PER_TOKEN: dict[str, float] = {"fast": 0.000002, "smart": 0.00001}

PERMISSION_OPTIONS = [
    PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
]

_READ_COMMAND = re.compile(r"read\s+(?P<path>\S+)", re.IGNORECASE)
_WRITE_COMMAND = re.compile(r"write\s+(?P<text>.+?)\s+to\s+(?P<path>\S+)", re.IGNORECASE | re.DOTALL)

T = TypeVar("T")


def agent_version() -> str:
    try:
        return metadata.version("acp-notebook")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


class TurnCancelled(Exception):
    """The client sent session/cancel (or closed the session) while a turn was running."""


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


@dataclass
class Exchange:
    """One prompt and the reply text that was actually sent, kept for session/load replays."""

    user: str
    agent: str


@dataclass
class Turn:
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    chunks_sent: int = 0
    reply_sent: str = ""


@dataclass
class DemoSession:
    session_id: str
    cwd: str
    settings: SessionSettings = field(default_factory=SessionSettings)
    title: str | None = None
    updated_at: str = field(default_factory=_now)
    history: list[Exchange] = field(default_factory=list)
    is_open: bool = True
    turn: Turn | None = None
    tool_calls: int = 0
    tokens_used: int = 0
    cost: float = 0.0


class DemoAgent:
    """An offline, deterministic ACP agent implementing the SDK's `acp.Agent` interface.

    Config options, in order: `model` (grouped select: Everyday/fast, Deep thinking/smart),
    `thought_level` (low/medium/high, only while the model is smart), `mode` (ask/code),
    `tone` (plain/pirate, custom category "_demo_style"), `show_thoughts` (boolean, only for
    clients advertising `session.configOptions.boolean`). Prompts stream agent_message_chunks
    (smart: preceded by 1-3 agent_thought_chunks), then session_info_update (title on the first
    turn and after "new topic: ..."; updatedAt every turn), then usage_update. "read PATH" and
    "write TEXT to PATH" run plan -> tool_call -> session/request_permission -> fs/*; a prompt
    containing "fallback" while smart switches to fast and pushes config_option_update.
    `legacy` sends only `modes`/`models`; `require_auth` refuses sessions until `authenticate`
    with "demo-token"; `delay` is the pause between streamed chunks.

    Results are returned as plain dicts and session/update notifications are sent as plain
    dicts, because the SDK's typed models replace custom `_` config-option categories by None.
    """

    def __init__(self, *, delay: float = 0.0, legacy: bool = False, require_auth: bool = False) -> None:
        if delay < 0:
            raise ValueError("delay must be >= 0")
        self.delay = delay
        self.legacy = legacy
        self.require_auth = require_auth
        self._authenticated = False
        self._client: Any = None
        self._sessions: dict[str, DemoSession] = {}
        self._session_counter = 0
        self._client_reads = False
        self._client_writes = False
        self._client_booleans = False

    # ----------------------------------------------------------------- connection

    def on_connect(self, conn: Any) -> None:
        self._client = conn

    def _wire(self) -> Connection:
        # AgentSideConnection only offers typed notifications; the raw Connection it wraps
        # sends our dicts unchanged. Fail loudly if a future SDK moves it.
        raw = getattr(self._client, "_conn", None)
        if not isinstance(raw, Connection):
            raise RuntimeError("the acp SDK's AgentSideConnection no longer exposes its Connection as _conn")
        return raw

    async def _update(self, session: DemoSession, update: dict[str, Any]) -> None:
        await self._wire().send_notification(
            CLIENT_METHODS["session_update"], {"sessionId": session.session_id, "update": update}
        )

    # ----------------------------------------------------------------- initialize / auth

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        fs = client_capabilities.fs if client_capabilities else None
        self._client_reads = bool(fs and fs.read_text_file)
        self._client_writes = bool(fs and fs.write_text_file)
        session_caps = client_capabilities.session if client_capabilities else None
        config_caps = session_caps.config_options if session_caps else None
        self._client_booleans = bool(config_caps and config_caps.boolean is not None)
        auth_methods = []
        if self.require_auth:
            auth_methods.append(
                {"id": AUTH_METHOD_ID, "name": "Demo token", "description": "Any client may use it; no secret involved"}
            )
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": False},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
            },
            "authMethods": auth_methods,
            "agentInfo": {"name": AGENT_NAME, "title": AGENT_TITLE, "version": agent_version()},
        }

    async def authenticate(self, method_id: str, **kwargs: Any) -> dict[str, Any]:
        if not self.require_auth:
            raise RequestError(-32602, f"Unknown auth method {method_id!r}; this agent advertises no auth methods")
        if method_id != AUTH_METHOD_ID:
            raise RequestError(-32602, f"Unknown auth method {method_id!r}; valid methods: {AUTH_METHOD_ID}")
        self._authenticated = True
        return {}

    def _check_authenticated(self) -> None:
        if self.require_auth and not self._authenticated:
            raise RequestError.auth_required({"authMethods": [AUTH_METHOD_ID]})

    # ----------------------------------------------------------------- session lifecycle

    def _known_session(self, session_id: str) -> DemoSession:
        session = self._sessions.get(session_id)
        if session is None:
            known = ", ".join(self._sessions) or "none yet"
            raise RequestError(
                -32602, f"Unknown session id {session_id!r}; known sessions: {known}", {"sessionId": session_id}
            )
        return session

    def _open_session(self, session_id: str) -> DemoSession:
        session = self._known_session(session_id)
        if not session.is_open:
            raise RequestError(
                -32602, f"Session {session_id!r} is closed; load or resume it first", {"sessionId": session_id}
            )
        return session

    def _options(self, session: DemoSession) -> list[dict[str, Any]]:
        return session.settings.describe(include_boolean=self._client_booleans)

    async def _push_options(self, session: DemoSession) -> None:
        """Agent-initiated config_option_update with the complete list."""
        await self._update(session, {"sessionUpdate": "config_option_update", "configOptions": self._options(session)})

    def _session_state(self, session: DemoSession) -> dict[str, Any]:
        """The session-setup fields of new/load/resume results."""
        if self.legacy:
            return {
                "modes": legacy_modes(session.settings.mode),
                "models": legacy_models(session.settings.model),
            }
        return {"configOptions": self._options(session)}

    @staticmethod
    def _require_absolute(cwd: str) -> None:
        if not os.path.isabs(cwd):
            raise RequestError(-32602, f"cwd must be an absolute path, got {cwd!r}", {"cwd": cwd})

    async def new_session(
        self, cwd: str, additional_directories: list[str] | None = None, mcp_servers: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        self._check_authenticated()
        self._require_absolute(cwd)
        self._session_counter += 1
        session = DemoSession(session_id=f"demo-{self._session_counter}", cwd=cwd)
        self._sessions[session.session_id] = session
        return {"sessionId": session.session_id, **self._session_state(session)}

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: list[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        session = self._reopen(session_id, cwd)
        for exchange in session.history:
            await self._update(session, {"sessionUpdate": "user_message_chunk", "content": _text(exchange.user)})
            if exchange.agent:
                await self._update(
                    session, {"sessionUpdate": "agent_message_chunk", "content": _text(exchange.agent)}
                )
        if session.title is not None:
            await self._update(
                session,
                {"sessionUpdate": "session_info_update", "title": session.title, "updatedAt": session.updated_at},
            )
        return self._session_state(session)

    async def resume_session(
        self,
        session_id: str,
        cwd: str,
        additional_directories: list[str] | None = None,
        mcp_servers: Any = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        return self._session_state(self._reopen(session_id, cwd))

    def _reopen(self, session_id: str, cwd: str) -> DemoSession:
        """load and resume alike: a known session, open again in ``cwd``."""
        self._check_authenticated()
        self._require_absolute(cwd)
        session = self._known_session(session_id)
        session.cwd = cwd
        session.is_open = True
        return session

    async def close_session(self, session_id: str, **kwargs: Any) -> dict[str, Any]:
        session = self._known_session(session_id)
        if session.turn is not None:
            session.turn.cancelled.set()
        session.is_open = False
        return {}

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any) -> dict[str, Any]:
        sessions = []
        for session in self._sessions.values():
            if cwd is not None and session.cwd != cwd:
                continue
            info: dict[str, Any] = {
                "sessionId": session.session_id,
                "cwd": session.cwd,
                "updatedAt": session.updated_at,
            }
            if session.title is not None:
                info["title"] = session.title
            sessions.append(info)
        return {"sessions": sessions}

    # ----------------------------------------------------------------- settings

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> dict[str, Any]:
        if self.legacy:
            # Old agents predate configOptions; answer the way they do.
            raise RequestError.method_not_found("session/set_config_option")
        session = self._open_session(session_id)
        try:
            session.settings.apply(config_id, value, include_boolean=self._client_booleans)
        except ConfigChoiceError as exc:
            raise RequestError(-32602, str(exc), {"configId": config_id}) from None
        return {"configOptions": self._options(session)}

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> dict[str, Any]:
        session = self._open_session(session_id)
        valid = [choice.value for choice in MODES]
        if mode_id not in valid:
            raise RequestError(
                -32602, f"Unknown mode {mode_id!r}; valid modes: {', '.join(valid)}", {"modeId": mode_id}
            )
        session.settings.mode = mode_id
        await self._update(session, {"sessionUpdate": "current_mode_update", "currentModeId": mode_id})
        if not self.legacy:
            # The mode is also a config option; keep clients that follow configOptions in sync.
            await self._push_options(session)
        return {}

    # ----------------------------------------------------------------- prompt turns

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is not None and session.turn is not None:
            session.turn.cancelled.set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> dict[str, Any]:
        session = self._open_session(session_id)
        if session.turn is not None:
            raise RequestError(-32600, f"Session {session_id!r} is already running a prompt turn")
        text = _prompt_text(prompt)
        turn = Turn()
        session.turn = turn
        stop_reason = "end_turn"
        try:
            await self._play_turn(session, text, turn)
        except TurnCancelled:
            stop_reason = "cancelled"
        except ConnectionError:
            # The client hung up mid-turn; nobody is left to read a traceback.
            log.info("client disconnected during a turn of %s", session_id)
            stop_reason = "cancelled"
        finally:
            session.turn = None
            session.history.append(Exchange(user=text, agent=turn.reply_sent))
        return {"stopReason": stop_reason}

    async def _pause(self, turn: Turn) -> None:
        """The delay between streamed chunks (none before a turn's first chunk, so a reply
        starts at once); it ends early when the turn is cancelled."""
        if self.delay > 0 and turn.chunks_sent > 0:
            try:
                await asyncio.wait_for(turn.cancelled.wait(), self.delay)
            except asyncio.TimeoutError:
                pass
        else:
            await asyncio.sleep(0)  # let a pending session/cancel be dispatched
        if turn.cancelled.is_set():
            raise TurnCancelled

    async def _unless_cancelled(self, turn: Turn, awaitable: Awaitable[T]) -> T:
        """Await a request to the client, abandoning it if the turn is cancelled first."""
        work = asyncio.ensure_future(awaitable)
        cancelled = asyncio.ensure_future(turn.cancelled.wait())
        try:
            await asyncio.wait({work, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
            if not work.done():
                work.cancel()
        if work.done() and not work.cancelled():
            return work.result()
        raise TurnCancelled

    async def _play_turn(self, session: DemoSession, text: str, turn: Turn) -> None:
        settings = session.settings
        fell_back = False
        if "fallback" in text.lower() and settings.model == "smart":
            settings.model = "fast"
            fell_back = True
            await self._push_options(session)
        thoughts = replies.thoughts(text, settings)
        for thought in thoughts:
            await self._pause(turn)
            await self._update(session, {"sessionUpdate": "agent_thought_chunk", "content": _text(thought)})
            turn.chunks_sent += 1
        command = parse_file_command(text)
        if command is None:
            reply = replies.chat_reply(text, settings, fell_back=fell_back)
        else:
            sentence = await self._file_work(session, command, turn)
            reply = replies.outcome_reply(settings, sentence, fell_back=fell_back)
        for piece in replies.chunk(reply):
            await self._pause(turn)
            await self._update(session, {"sessionUpdate": "agent_message_chunk", "content": _text(piece)})
            turn.chunks_sent += 1
            turn.reply_sent += piece
        await self._finish_turn(session, text, reply, thoughts)

    async def _finish_turn(self, session: DemoSession, text: str, reply: str, thoughts: list[str]) -> None:
        session.updated_at = _now()
        info: dict[str, Any] = {"sessionUpdate": "session_info_update", "updatedAt": session.updated_at}
        topic = replies.topic_of(text)
        if topic is not None or session.title is None:
            session.title = replies.title_from(topic if topic is not None else text)
            info["title"] = session.title
        await self._update(session, info)
        tokens = replies.token_count(text, reply, *thoughts)
        session.tokens_used += tokens
        session.cost += tokens * PRICE_PER_TOKEN[session.settings.model]
        await self._update(
            session,
            {
                "sessionUpdate": "usage_update",
                "used": session.tokens_used,
                "size": CONTEXT_WINDOW,
                "cost": {"amount": round(session.cost, 6), "currency": "USD"},
            },
        )

    # ----------------------------------------------------------------- file work

    async def _plan(self, session: DemoSession, steps: list[str], done: int, *, working: bool = True) -> None:
        """Send the complete plan: the first `done` steps completed, the next one in progress
        unless the work stopped (`working=False`), the rest pending."""
        entries = []
        for index, step in enumerate(steps):
            status = "completed" if index < done else "in_progress" if index == done and working else "pending"
            entries.append({"content": step, "priority": "high" if index < 2 else "medium", "status": status})
        await self._update(session, {"sessionUpdate": "plan", "entries": entries})

    async def _file_work(self, session: DemoSession, command: FileCommand, turn: Turn) -> str:
        """Plan, tool call, permission, then fs/* on the client; returns the sentence for the reply."""
        voice = replies.VOICES[session.settings.tone]
        reading = command.action == "read"
        path = command.path if os.path.isabs(command.path) else os.path.join(session.cwd, command.path)
        path = os.path.normpath(path)
        session.tool_calls += 1
        call_id = f"call-{session.tool_calls}"
        title = f"{'Read' if reading else 'Write'} {command.path}"
        kind = "read" if reading else "edit"
        method = "fs/read_text_file" if reading else "fs/write_text_file"
        diff = [{"type": "diff", "path": path, "newText": command.text}]
        steps = [
            f"Ask permission to {command.action} {command.path}",
            f"{command.action.capitalize()} {command.path} through the client",
            "Report the result",
        ]

        async def settle(status: str, message: str | None = None, content: list[dict[str, Any]] | None = None) -> None:
            update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": status}
            if message is not None:
                update["content"] = [{"type": "content", "content": _text(message)}]
            if content is not None:
                update["content"] = content
            await self._update(session, update)

        await self._plan(session, steps, done=0)
        tool_call: dict[str, Any] = {
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "title": title,
            "kind": kind,
            "status": "pending",
            "locations": [{"path": path}],
            "rawInput": {"path": path} if reading else {"path": path, "content": command.text},
        }
        if not reading:
            tool_call["content"] = diff
        await self._update(session, tool_call)
        try:
            permission = await self._unless_cancelled(
                turn,
                self._client.request_permission(
                    session_id=session.session_id,
                    tool_call=ToolCallUpdate(
                        tool_call_id=call_id,
                        title=title,
                        kind=kind,
                        status="pending",
                        locations=[ToolCallLocation(path=path)],
                    ),
                    options=PERMISSION_OPTIONS,
                ),
            )
            if permission.outcome.outcome != "selected":
                raise TurnCancelled
            if permission.outcome.option_id != "allow_once":
                await settle("failed", "Permission denied by the user")
                await self._plan(session, steps, done=1, working=False)
                return voice.denied.format(action=command.action, path=command.path)
            await self._plan(session, steps, done=1)
            await settle("in_progress")
            if not (self._client_reads if reading else self._client_writes):
                capability = "fs.readTextFile" if reading else "fs.writeTextFile"
                await settle("failed", f"The client did not advertise {capability}")
                await self._plan(session, steps, done=1, working=False)
                return voice.no_fs.format(action=command.action, path=command.path, method=method)
            try:
                if reading:
                    response = await self._unless_cancelled(
                        turn, self._client.read_text_file(session_id=session.session_id, path=path)
                    )
                    lines = len(response.content.splitlines())
                    await settle("completed", response.content)
                    sentence = voice.read_ok.format(path=command.path, lines=replies.plural(lines, "line"))
                else:
                    await self._unless_cancelled(
                        turn,
                        self._client.write_text_file(session_id=session.session_id, path=path, content=command.text),
                    )
                    await settle("completed", content=diff)
                    sentence = voice.write_ok.format(
                        path=command.path, chars=replies.plural(len(command.text), "character")
                    )
            except RequestError as exc:
                await settle("failed", f"{method} failed: {exc}")
                await self._plan(session, steps, done=1, working=False)
                return voice.failed.format(action=command.action, path=command.path, error=str(exc))
            await self._plan(session, steps, done=len(steps))
            return sentence
        except TurnCancelled:
            await settle("failed", "Cancelled")
            raise

    # ----------------------------------------------------------------- extensions

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "demo/echo":
            return params
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.debug("ignoring extension notification _%s", method)


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _prompt_text(blocks: list[Any]) -> str:
    """The prompt as plain text: text blocks, plus the URI of any resource link."""
    parts = []
    for block in blocks:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "resource_link":
            parts.append(block.uri)
    return "\n".join(parts)
