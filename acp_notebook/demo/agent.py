"""DemoAgent: the protocol side of the built-in demo agent (initialize, auth, the session lifecycle on
top of the session files, config options, session/prompt and session/cancel). What a prompt's text
asks for, and the turn streamed around it, is `dispatch.PromptTurn`.

Everything runs on the one event loop of the demo process: the SDK dispatches each request in a
task of its own, and those tasks are the only code that mutates `DemoAgent._sessions` (the
sessions open on this connection) and the DemoSession objects in it. Every change that matters
after a restart (new session, settings, cwd, a finished turn) is written to the session's file
before the request answers, so another demo process can load or resume the session.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import Any

from acp.connection import Connection
from acp.exceptions import RequestError
from acp.meta import CLIENT_METHODS, PROTOCOL_VERSION

from ..agent_side import serve
from .._protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    client_version,
    prompt_text,
    unknown_session,
)
from ..kernel_tools.client import kernel_entry
from .dispatch import PromptTurn
from .instructions import read_system_prompt
from .notices import AfterAnswers
from .options import MODES, ConfigChoiceError, legacy_models, legacy_modes
from .replies import handed_over, text_content
from .session import DemoSession, Exchange, RunningTurn, TurnCancelled, new_session_id
from .store import SessionMissing, SessionStore, SessionUnreadable, StoreError, resolve_state_dir

__all__ = ["AGENT_NAME", "AUTH_METHOD_ID", "DemoAgent", "agent_version"]

log = logging.getLogger(__name__)

AGENT_NAME = "acp-notebook-demo"
AGENT_TITLE = "Demo agent"
AUTH_METHOD_ID = "demo-token"
LIST_PAGE_SIZE = 50
# How long close/delete wait for a cancelled turn to wind down before answering anyway.
TURN_END_WAIT = 5.0


def agent_version() -> str:
    return client_version()


def _object(container: dict[str, Any], key: str) -> dict[str, Any]:
    """``container[key]`` when it is a JSON object, else an empty one (a capability left out or mistyped
    counts as not advertised)."""
    value = container.get(key)
    return value if isinstance(value, dict) else {}


def _unknown_session(session_id: str, valid: list[str]) -> RequestError:
    return RequestError(*unknown_session(session_id, valid))


class DemoAgent:
    """An offline, deterministic ACP agent, served by `agent_side` (on stdio by `server`, or in memory).

    Config options, in order: `model` (grouped select: Everyday/fast, Deep thinking/smart),
    `thought_level` (low/medium/high, only while the model is smart), `mode` (ask/code),
    `tone` (plain/pirate, custom category "_demo_style"), `show_thoughts` (boolean, only for
    clients advertising `session.configOptions.boolean`). The old `modes` field goes along on
    session/new, load and resume, kept in step with the `mode` option, and the unstable
    `session/set_model` sets the `model` option, for clients that predate config options.

    Prompts stream agent_message_chunks (smart: preceded by 1-3 agent_thought_chunks), then
    session_info_update and usage_update; which work and reply a prompt gets (file work, forms,
    the kernel tools, recall, edits, arithmetic tasks, chat) is decided in `dispatch`.

    Sessions are files in a state directory (see `store`), so load, resume, list and delete work
    across processes; session ids are random UUIDs. `legacy` sends only `modes`/`models` and
    refuses set_config_option and set_model; `require_auth` refuses sessions until `authenticate`
    with "demo-token"; `delay` is the pause between streamed chunks.

    Its methods take the request's params as JSON values (by keyword, as `agent_side.ROUTES` names them)
    and answer plain dicts; session/update notifications are plain dicts too. Nothing goes through
    the SDK's typed models, which would also replace custom `_` config-option categories by None.
    """

    def __init__(
        self,
        *,
        delay: float = 0.0,
        legacy: bool = False,
        require_auth: bool = False,
        state_dir: str | Path | None = None,
    ) -> None:
        if delay < 0:
            raise ValueError("delay must be >= 0")
        self.delay = delay
        self.legacy = legacy
        self.require_auth = require_auth
        self.store = SessionStore(resolve_state_dir(None if state_dir is None else str(state_dir)))
        self._authenticated = False
        self.client: Connection | None = None
        self._sessions: dict[str, DemoSession] = {}  # open on this connection
        # What the client advertised in initialize; the turn's work reads the fs and form ones.
        self.client_reads = False
        self.client_writes = False
        self._client_booleans = False
        self.client_forms = False
        self.client_notices = False  # session.notices: the client shows notices
        self.client_compaction = False  # session.compaction: the client follows context compactions
        self.after_answers = AfterAnswers(self)  # notices asked for "later": sent once a prompt's answer is out

    # ----------------------------------------------------------------- connection

    async def serve_acp(self, transport: Any) -> None:
        """Serve this agent on an SDK message transport until the client goes (how ``MemoryTransport``
        serves an agent object that brings its own serving; see ``agent_side``)."""
        await serve(self, transport)

    def on_connect(self, conn: Connection) -> None:
        self.client = conn
        conn.add_observer(self.after_answers)

    def wire(self) -> Connection:
        """The connection to the client: frames go out as our own dicts, unchanged."""
        if self.client is None:
            raise RuntimeError("the demo agent is not connected to a client")
        return self.client

    async def update(self, session: DemoSession, update: dict[str, Any]) -> None:
        await self.wire().send_notification(
            CLIENT_METHODS["session_update"], {"sessionId": session.session_id, "update": update}
        )

    # ----------------------------------------------------------------- initialize / auth

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: dict[str, Any] | None = None,
        client_info: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        caps = client_capabilities or {}
        fs = _object(caps, "fs")
        self.client_reads = fs.get("readTextFile") is True
        self.client_writes = fs.get("writeTextFile") is True
        session_caps = _object(caps, "session")
        self._client_booleans = _object(session_caps, "configOptions").get("boolean") is not None
        self.client_notices = session_caps.get("notices") is not None
        self.client_compaction = session_caps.get("compaction") is not None
        self.client_forms = _object(caps, "elicitation").get("form") is not None
        auth_methods = []
        if self.require_auth:
            auth_methods.append(
                {"id": AUTH_METHOD_ID, "name": "Demo token", "description": "Any client may use it; no secret involved"}
            )
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": False, "sse": False},
                "sessionCapabilities": self._session_capabilities(),
            },
            "authMethods": auth_methods,
            "agentInfo": {"name": AGENT_NAME, "title": AGENT_TITLE, "version": agent_version()},
        }

    def _session_capabilities(self) -> dict[str, Any]:
        """The session methods it offers; the unstable session/fork too, unless it plays an old agent (legacy)."""
        capabilities: dict[str, Any] = {"list": {}, "resume": {}, "close": {}, "delete": {}}
        if not self.legacy:
            capabilities["fork"] = {}
            capabilities["systemPrompt"] = {"mode": {"override": {}}}  # both modes (demo/instructions.py)
        return capabilities

    async def authenticate(self, method_id: str) -> dict[str, Any]:
        if not self.require_auth:
            raise RequestError(
                INVALID_PARAMS, f"Unknown auth method {method_id!r}; this agent advertises no auth methods"
            )
        if method_id != AUTH_METHOD_ID:
            raise RequestError(INVALID_PARAMS, f"Unknown auth method {method_id!r}; valid methods: {AUTH_METHOD_ID}")
        self._authenticated = True
        return {}

    def _check_authenticated(self) -> None:
        if self.require_auth and not self._authenticated:
            raise RequestError.auth_required({"authMethods": [AUTH_METHOD_ID]})

    # ----------------------------------------------------------------- the session files

    def save(self, session: DemoSession) -> None:
        """Write the session's file (unless session/delete removed it); INTERNAL_ERROR if that fails."""
        if session.deleted:
            return  # a turn winding down must not write a deleted session back
        try:
            self.store.write(session.session_id, session.to_record())
        except StoreError as exc:
            raise RequestError(INTERNAL_ERROR, str(exc), {"sessionId": session.session_id}) from None

    def _stored(self, session_id: str) -> DemoSession:
        """The session as its file has it; RESOURCE_NOT_FOUND naming the stored ids when there is none."""
        try:
            record = self.store.read(session_id)
            return DemoSession.from_record(record, session_id)
        except SessionMissing:
            raise _unknown_session(session_id, [s.session_id for s in self._stored_sessions()]) from None
        except SessionUnreadable as exc:
            raise RequestError(INTERNAL_ERROR, str(exc), {"sessionId": session_id, "path": str(exc.path)}) from None
        except ValueError as exc:
            path = self.store.path_for(session_id)
            message = str(SessionUnreadable(session_id, path, str(exc)))
            raise RequestError(INTERNAL_ERROR, message, {"sessionId": session_id, "path": str(path)}) from None
        except StoreError as exc:
            raise RequestError(INTERNAL_ERROR, str(exc), {"sessionId": session_id}) from None

    def _stored_sessions(self) -> list[DemoSession]:
        """Every readable stored session, most recent activity first; unreadable files are logged
        and left out, so one bad file never hides the others."""
        sessions = []
        try:
            scanned = list(self.store.scan())
        except StoreError as exc:
            raise RequestError(INTERNAL_ERROR, str(exc)) from None
        for session_id, record in scanned:
            try:
                if isinstance(record, SessionUnreadable):
                    raise record
                sessions.append(DemoSession.from_record(record, session_id))
            except (SessionUnreadable, ValueError) as exc:
                log.warning("skipping session %s in %s: %s", session_id, self.store.root, exc)
        sessions.sort(key=lambda s: s.activity_ns, reverse=True)
        return sessions

    def _open_session(self, session_id: str) -> DemoSession:
        """A session open on this connection; INVALID_PARAMS for a stored one that is not open here,
        RESOURCE_NOT_FOUND (naming the open ones) for an id nobody knows."""
        session = self._sessions.get(session_id)
        if session is not None:
            return session
        if self.store.exists(session_id):
            raise RequestError(
                INVALID_PARAMS,
                f"Session {session_id!r} is not open on this connection (closed, or made elsewhere); "
                "load or resume it first",
                {"sessionId": session_id},
            )
        raise _unknown_session(session_id, list(self._sessions))

    async def _wait_for_turn(self, session: DemoSession) -> None:
        """Cancel the session's running turn, if any, and give it a moment to finish."""
        turn = session.turn
        if turn is None:
            return
        turn.cancelled.set()
        try:
            await asyncio.wait_for(turn.finished.wait(), TURN_END_WAIT)
        except asyncio.TimeoutError:
            log.warning("the cancelled turn of %s did not end within %ss", session.session_id, TURN_END_WAIT)

    # ----------------------------------------------------------------- session lifecycle

    def _options(self, session: DemoSession) -> list[dict[str, Any]]:
        return session.settings.describe(include_boolean=self._client_booleans)

    async def push_options(self, session: DemoSession) -> None:
        """Agent-initiated config_option_update with the complete list."""
        await self.update(session, {"sessionUpdate": "config_option_update", "configOptions": self._options(session)})

    def _session_state(self, session: DemoSession) -> dict[str, Any]:
        """The session-setup fields of new/load/resume results. Besides configOptions, the old
        `modes` field, for clients that only know modes."""
        modes = legacy_modes(session.settings.mode)
        if self.legacy:
            return {"modes": modes, "models": legacy_models(session.settings.model)}
        return {"configOptions": self._options(session), "modes": modes}

    @staticmethod
    def _require_absolute(cwd: str) -> None:
        if not os.path.isabs(cwd):
            raise RequestError(INVALID_PARAMS, f"cwd must be an absolute path, got {cwd!r}", {"cwd": cwd})

    async def new_session(
        self, cwd: str, additional_directories: list[str] | None = None, mcp_servers: Any = None,
        system_prompt: Any = None,
    ) -> dict[str, Any]:
        self._check_authenticated()
        self._require_absolute(cwd)
        session = DemoSession(session_id=new_session_id(), cwd=cwd, kernel=kernel_entry(mcp_servers),
                              system_prompt=read_system_prompt(system_prompt))
        self.save(session)
        self._sessions[session.session_id] = session
        return {"sessionId": session.session_id, **self._session_state(session)}

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Any = None,
        additional_directories: list[str] | None = None,
        system_prompt: Any = None,
    ) -> dict[str, Any]:
        session = self._reopen(session_id, cwd, mcp_servers, system_prompt)
        for exchange in session.history:
            user, agent = text_content(exchange.user), text_content(exchange.agent)
            await self.update(session, {"sessionUpdate": "user_message_chunk", "content": user})
            if exchange.agent:
                await self.update(session, {"sessionUpdate": "agent_message_chunk", "content": agent})
        if session.title is not None:
            await self.update(
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
        system_prompt: Any = None,
    ) -> dict[str, Any]:
        return self._session_state(self._reopen(session_id, cwd, mcp_servers, system_prompt))

    def _reopen(self, session_id: str, cwd: str, mcp_servers: Any = None, system_prompt: Any = None) -> DemoSession:
        """load and resume alike: the session as stored (another process may have changed it),
        open on this connection in `cwd`, with the system prompt sent now if any (else the one it had). A
        session whose turn is running here stays as it is."""
        self._check_authenticated()
        self._require_absolute(cwd)
        kept = read_system_prompt(system_prompt)
        running = self._sessions.get(session_id)
        session = running if running is not None and running.turn is not None else self._stored(session_id)
        if session.cwd != cwd or (kept is not None and kept != session.system_prompt):
            session.cwd = cwd
            session.system_prompt = kept if kept is not None else session.system_prompt
            self.save(session)
        session.kernel = kernel_entry(mcp_servers)  # a reopened session uses the kernel tools offered now
        self._sessions[session_id] = session
        return session

    async def fork_session(
        self, session_id: str, cwd: str, mcp_servers: Any = None, additional_directories: list[str] | None = None,
        system_prompt: Any = None,
    ) -> dict[str, Any]:
        """session/fork (unstable): a new session that starts from the source's conversation (its history,
        settings, title, context and system prompt, unless one is sent), open on this connection in `cwd`; the
        source goes on unchanged. The source may be open here or only stored."""
        if self.legacy:
            raise RequestError.method_not_found("session/fork")
        self._check_authenticated()
        self._require_absolute(cwd)
        kept = read_system_prompt(system_prompt)
        source = self._sessions.get(session_id) or self._stored(session_id)
        fork = source.forked(new_session_id(), cwd, kernel_entry(mcp_servers))
        fork.system_prompt = kept if kept is not None else fork.system_prompt
        self.save(fork)
        self._sessions[fork.session_id] = fork
        return {"sessionId": fork.session_id, **self._session_state(fork)}

    async def close_session(self, session_id: str) -> dict[str, Any]:
        """Ends a running turn and closes the session here; its file stays, to be loaded again."""
        session = self._sessions.pop(session_id, None)
        if session is not None:
            await self._wait_for_turn(session)
        elif not self.store.exists(session_id):
            raise _unknown_session(session_id, [s.session_id for s in self._stored_sessions()])
        return {}

    async def delete_session(self, session_id: str) -> dict[str, Any]:
        """session/delete: close the session if it is open here, and remove its file."""
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.deleted = True
            await self._wait_for_turn(session)
        try:
            self.store.delete(session_id)
        except SessionMissing:
            if session is None:
                raise _unknown_session(session_id, [s.session_id for s in self._stored_sessions()]) from None
        except StoreError as exc:
            raise RequestError(INTERNAL_ERROR, str(exc), {"sessionId": session_id}) from None
        return {}

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None) -> dict[str, Any]:
        """The stored sessions (of every demo process using this state directory), most recent
        activity first, `LIST_PAGE_SIZE` per page; `cwd` keeps those whose cwd is that directory."""
        self._check_authenticated()
        if cwd is not None:
            self._require_absolute(cwd)
        start = 0
        if cursor is not None:
            if not cursor.isdigit():
                raise RequestError(INVALID_PARAMS, f"Invalid cursor {cursor!r}: pass a nextCursor from session/list")
            start = int(cursor)
        sessions = self._stored_sessions()
        if cwd is not None:
            wanted = os.path.normpath(cwd)
            sessions = [s for s in sessions if os.path.normpath(s.cwd) == wanted]
        page = sessions[start : start + LIST_PAGE_SIZE]
        result: dict[str, Any] = {"sessions": [s.info() for s in page]}
        if start + LIST_PAGE_SIZE < len(sessions):
            result["nextCursor"] = str(start + LIST_PAGE_SIZE)
        return result

    # ----------------------------------------------------------------- settings

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool
    ) -> dict[str, Any]:
        if self.legacy:
            # Old agents predate configOptions; answer the way they do.
            raise RequestError.method_not_found("session/set_config_option")
        session = self._open_session(session_id)
        try:
            session.settings.apply(config_id, value, include_boolean=self._client_booleans)
        except ConfigChoiceError as exc:
            raise RequestError(INVALID_PARAMS, str(exc), {"configId": config_id}) from None
        self.save(session)
        if config_id == "mode":
            # Clients that follow the old `modes` field learn of the change this way.
            await self.update(session, {"sessionUpdate": "current_mode_update", "currentModeId": session.settings.mode})
        return {"configOptions": self._options(session)}

    async def set_session_mode(self, session_id: str, mode_id: str) -> dict[str, Any]:
        session = self._open_session(session_id)
        valid = [choice.value for choice in MODES]
        if mode_id not in valid:
            raise RequestError(
                INVALID_PARAMS, f"Unknown mode {mode_id!r}; valid modes: {', '.join(valid)}", {"modeId": mode_id}
            )
        session.settings.mode = mode_id
        self.save(session)
        await self.update(session, {"sessionUpdate": "current_mode_update", "currentModeId": mode_id})
        if not self.legacy:
            # The mode is also a config option; keep clients that follow configOptions in sync.
            await self.push_options(session)
        return {}

    async def set_model(self, session_id: str, model_id: str) -> dict[str, Any]:
        """The unstable session/set_model {sessionId, modelId}, which older clients still send: it
        sets the `model` config option (same validation and dependent options), then pushes the
        complete option list. The legacy demo does not know it (it sends the old `models` field
        and predates the method)."""
        if self.legacy:
            raise RequestError.method_not_found("session/set_model")
        session = self._open_session(session_id)
        try:
            session.settings.apply("model", model_id, include_boolean=self._client_booleans)
        except ConfigChoiceError as exc:
            raise RequestError(INVALID_PARAMS, str(exc), {"modelId": model_id}) from None
        self.save(session)
        await self.push_options(session)
        return {}

    # ----------------------------------------------------------------- prompt turns

    async def cancel(self, session_id: str) -> None:
        session = self._sessions.get(session_id)
        if session is not None and session.turn is not None:
            session.turn.cancelled.set()

    async def prompt(self, session_id: str, prompt: list[Any]) -> dict[str, Any]:
        session = self._open_session(session_id)
        if session.turn is not None:
            raise RequestError(INVALID_REQUEST, f"Session {session_id!r} is already running a prompt turn")
        handed, own = handed_over(list(prompt))
        if handed and not session.history:  # a session given the conversation so far: it becomes its history
            session.history.extend(Exchange(user=text, agent="") for text in handed)
        text = prompt_text(own)
        turn = RunningTurn()
        session.turn = turn
        stop_reason = "end_turn"
        try:
            await PromptTurn(self, session, text, turn).play()
        except TurnCancelled:
            stop_reason = "cancelled"
        except ConnectionError:
            # The client hung up mid-turn; nobody is left to read a traceback.
            log.info("client disconnected during a turn of %s", session_id)
            stop_reason = "cancelled"
        finally:
            session.turn = None
            session.history.append(Exchange(user=text, agent=turn.reply_sent))
            turn.finished.set()
        # What was said is saved before the turn answers, so a new process can load it at once.
        self.save(session)
        return {"stopReason": stop_reason}

    # ----------------------------------------------------------------- extensions

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "demo/echo":
            return params
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        log.debug("ignoring extension notification _%s", method)
