"""Agent and Session: the ACP client over the SDK's Connection; async core on the loop thread, thin sync facade."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import difflib
import inspect
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from acp.connection import Connection, StreamDirection, StreamEvent
from acp.exceptions import RequestError
from acp.meta import PROTOCOL_VERSION
from acp.schema import InitializeResponse
from pydantic import ValidationError

from . import _loop
from ._process import AgentProcess
from .errors import (
    AcpError,
    AgentClosedError,
    AgentExitedError,
    AgentStartError,
    CapabilityError,
    ConfigOptionError,
    PermissionDenied,
    ProtocolError,
    RpcError,
    _data_details,
)
from .launch import AgentSpec, SpecLike, auth_hint, auto_auth_method, resolve_spec, spec_of
from .state import ConfigOptions, SessionState
from .turn import PermissionRecord, Turn

__all__ = ["Agent", "PermissionRequest", "Session", "current", "set_current", "start", "astart"]

logger = logging.getLogger(__name__)

LOG_LIMIT = 200_000
CANCEL_GRACE_S = 5.0
AUTH_REQUIRED = -32000
# Requests that may answer "authentication required" before any session exists; the client
# then authenticates from the environment once (AgentSpec.auth_env) and sends them again.
AUTH_RETRIED_METHODS = ("session/new", "session/load", "session/resume", "session/list")


@dataclass(frozen=True)
class PermissionRequest:
    """What a permission policy callable receives."""

    session: Session
    tool_call: dict[str, Any]
    options: list[dict[str, Any]]
    raw: dict[str, Any]

    def option_for(self, *kinds: str) -> str | None:
        for kind in kinds:
            for option in self.options:
                if option.get("kind") == kind:
                    return option.get("optionId")
        return None


PermissionPolicy = Union[str, Callable[[PermissionRequest], Any]]


def _client_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("acp-notebook")
    except PackageNotFoundError:
        return "0.0.0"


class Agent:
    """A running ACP agent subprocess and its connection. Create with ``acpnb.start(...)``.

    Lifecycle: starting -> running -> closed (by ``close()``) or exited (the process died).
    Every method has an async twin named with an ``a`` prefix (``anew_session``, ``aclose``...).
    """

    def __init__(
        self,
        spec: SpecLike,
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        permission: PermissionPolicy = "deny",
        inherit_env: bool = True,
        fs: bool = True,
        name: str | None = None,
    ) -> None:
        self.spec = spec
        self.cwd = str(Path(cwd).resolve()) if cwd is not None else os.getcwd()
        self.extra_env = dict(env or {})
        self.timeout = timeout
        self.permission = permission
        self.inherit_env = inherit_env
        self.fs = fs
        self.name = name or ""
        self.command: list[str] = []
        self.info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        self.auth_methods: list[dict[str, Any]] = []
        self.protocol_version: int | None = None
        self.log: list[dict[str, Any]] = []
        self.status = "starting"
        self.exit_code: int | None = None
        self._process: AgentProcess | None = None
        self._conn: Connection | None = None
        self._exit_watch: asyncio.Task[None] | None = None
        self._sessions: dict[str, Session] = {}
        self._states: dict[str, SessionState] = {}
        self._sent: dict[Any, tuple[str, dict[str, Any], Turn | None]] = {}
        self._early_responses: dict[Any, dict[str, Any]] = {}
        self._frame_listeners: list[Callable[[dict[str, Any]], None]] = []
        self._stderr_listeners: list[Callable[[str], None]] = []
        self._ext_handlers: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self._shutdown_hook = self._close
        # The auth method acp-notebook picked on its own, from a key in the agent's environment.
        self.auth_method: str | None = None
        self._agent_spec = spec_of(spec)
        self._agent_env: dict[str, str] = {}
        self._auth_from_env: asyncio.Future[None] | None = None

    # --- lifecycle -------------------------------------------------------
    async def _start(self) -> Agent:
        name, argv, extra_env = resolve_spec(self.spec, self.extra_env)
        self.name = self.name or name
        self.command = argv
        env = dict(os.environ) if self.inherit_env else {}
        if not self.inherit_env:
            from acp.transports import default_environment

            env.update(default_environment())
        env.update(extra_env)
        self._agent_env = env
        process = AgentProcess(argv, cwd=self.cwd, env=env)
        process.stderr_listeners.append(self._fan_out_stderr)
        try:
            await process.spawn()
        except OSError as exc:
            self.status = "exited"
            raise AgentStartError(
                f"cannot run {argv[0]!r}: {exc.strerror or exc}",
                command=argv,
                hint="Check that the program is installed and on PATH, and that cwd exists.",
            ) from exc
        self._process = process
        _loop.on_shutdown(self._shutdown_hook)
        self._exit_watch = asyncio.create_task(self._watch_exit(), name=f"acp-exit-{self.name}")
        self._conn = Connection(self._handle_request, process.stdin, process.stdout, observers=[self._on_frame])
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": self._client_capabilities(),
            "clientInfo": {"name": "acp-notebook", "title": "acp-notebook", "version": _client_version()},
        }
        try:
            result = await self._initialize(params)
        except BaseException:
            await self._terminate()
            self.status = "exited"
            raise
        try:
            parsed = InitializeResponse.model_validate(result)
        except ValidationError as exc:
            await self._terminate()
            raise AgentStartError(f"agent '{self.name}' sent an invalid initialize result: {exc.errors()[:2]}",
                                  command=argv) from exc
        self.protocol_version = parsed.protocol_version
        self.info = dict(result.get("agentInfo") or {})
        self.capabilities = dict(result.get("agentCapabilities") or {})
        self.auth_methods = list(result.get("authMethods") or [])
        self.status = "running"
        return self

    def _client_capabilities(self) -> dict[str, Any]:
        return {
            "fs": {"readTextFile": self.fs, "writeTextFile": self.fs},
            "terminal": False,
            "session": {"configOptions": {"boolean": {}}},
        }

    async def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        assert self._conn is not None and self._process is not None
        request = asyncio.create_task(self._conn.send_request("initialize", params))
        exited = asyncio.create_task(self._process.exited.wait())
        try:
            done, _ = await asyncio.wait({request, exited}, timeout=self.timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()
        if request in done:
            try:
                return request.result()
            except RequestError as exc:
                raise AgentStartError(f"agent '{self.name}' refused initialize: {exc}", command=self.command,
                                      stderr_tail=self.stderr_tail(20)) from exc
            except ConnectionError:
                await self._settle_exit()
        request.cancel()
        if self.exit_code is not None or done:
            await self._settle_exit()
            raise AgentStartError(
                f"agent '{self.name}' exited with code {self.exit_code} before answering initialize",
                command=self.command, exit_code=self.exit_code, stderr_tail=self.stderr_tail(20),
                hint="Is this an ACP agent? Some need a flag (e.g. `gemini --acp`) or a login first.",
            )
        raise AgentStartError(
            f"agent '{self.name}' did not answer initialize within {self.timeout:g} s",
            command=self.command, stderr_tail=self.stderr_tail(20),
            hint="Agents fetched by npx can take long on first start: pass a larger timeout=.",
        )

    async def _settle_exit(self) -> None:
        if self._process is not None:
            await self._process.settle()
        if self._exit_watch is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._exit_watch), 1.0)

    def _fan_out_stderr(self, line: str) -> None:
        for listener in list(self._stderr_listeners):
            with contextlib.suppress(Exception):
                listener(line)

    async def _watch_exit(self) -> None:
        assert self._process is not None
        await self._process.exited.wait()
        code = self.exit_code = self._process.exit_code
        if self.status != "closed":
            self.status = "exited"
        if self.status == "exited":
            await self._process.settle(exit_timeout=0)
            error = AgentExitedError(f"agent '{self.name}' exited with code {code}", exit_code=code,
                                     stderr_tail=self.stderr_tail(20))
            for session in list(self._sessions.values()):
                session._agent_gone(error)

    async def _close(self) -> None:
        if self.status == "closed":
            return
        was_running = self.status in ("running", "starting")
        self.status = "closed"
        _loop.remove_shutdown_hook(self._shutdown_hook)
        error = AgentClosedError(f"agent '{self.name}' was closed")
        for session in list(self._sessions.values()):
            session._agent_gone(error)
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.close(), 2.0)
        if was_running or self._process is not None:
            await self._terminate()
        if self._exit_watch is not None:
            self._exit_watch.cancel()

    async def _terminate(self) -> None:
        if self._process is not None:
            await self._process.terminate()

    def close(self) -> None:
        """Close every session and end the agent process (and its process group). Safe to call twice."""
        if self.status == "closed":
            return
        _loop.run_sync(self._close(), 15, what=f"closing agent '{self.name}'")

    async def aclose(self) -> None:
        await _loop.run_async(self._close(), 15, what=f"closing agent '{self.name}'")

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # --- introspection ---------------------------------------------------
    @property
    def registry_spec(self) -> AgentSpec | None:
        """The registry entry this agent was started from, if any (its key variables, login hint...)."""
        return self._agent_spec

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def sessions(self) -> list[Session]:
        return list(self._sessions.values())

    def stderr_tail(self, lines: int = 20) -> list[str]:
        return self._process.stderr_tail(lines) if self._process is not None else []

    def on_frame(self, callback: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """Call ``callback(log_entry)`` for each frame as it is logged (on the loop thread; must not block)."""
        self._frame_listeners.append(callback)
        return lambda: self._frame_listeners.remove(callback) if callback in self._frame_listeners else None

    def on_stderr(self, callback: Callable[[str], None]) -> Callable[[], None]:
        self._stderr_listeners.append(callback)
        return lambda: self._stderr_listeners.remove(callback) if callback in self._stderr_listeners else None

    def on_ext_method(self, method: str, handler: Callable[[dict[str, Any]], Any]) -> None:
        """Answer the agent's ``_method`` extension requests (handler gets params, returns a dict, may be async)."""
        self._ext_handlers[method if method.startswith("_") else f"_{method}"] = handler

    def __repr__(self) -> str:
        version = self.info.get("version", "?")
        return f"<acp Agent {self.name!r} {self.info.get('name', '')} {version} {self.status}>"

    # --- raw frames, in wire order ----------------------------------------
    def _on_frame(self, event: StreamEvent) -> None:
        """Runs synchronously in the SDK's receive loop, in wire order, before dispatch."""
        msg = event.message
        direction = "send" if event.direction == StreamDirection.OUTGOING else "recv"
        entry = {"dir": direction, "t": time.time(), "msg": msg}
        self.log.append(entry)
        if len(self.log) > LOG_LIMIT:
            del self.log[: LOG_LIMIT // 10]
        try:
            if direction == "recv":
                self._on_incoming(msg, entry)
            else:
                self._on_outgoing(msg)
        except Exception:  # noqa: BLE001 - a bad frame must never stop the receive loop
            logger.exception("acp-notebook failed to apply a frame")
            entry["note"] = "failed to apply (see logs)"
        for listener in list(self._frame_listeners):
            with contextlib.suppress(Exception):
                listener(entry)

    def _on_outgoing(self, msg: dict[str, Any]) -> None:
        if "method" not in msg or "id" not in msg:
            return
        params = msg.get("params") or {}
        turn = None
        if msg["method"] == "session/prompt":
            session = self._sessions.get(params.get("sessionId"))
            turn = session._turn if session else None
        self._sent[msg["id"]] = (msg["method"], params, turn)
        early = self._early_responses.pop(msg["id"], None)
        if early is not None:
            self._apply_response(early)

    def _on_incoming(self, msg: dict[str, Any], entry: dict[str, Any]) -> None:
        method = msg.get("method")
        if method == "session/update" and "id" not in msg:
            note = self._route_update(msg.get("params") or {})
            if note:
                entry["note"] = note
        elif method is None and "id" in msg:
            if msg["id"] in self._sent:
                self._apply_response(msg)
            else:
                self._early_responses[msg["id"]] = msg

    def _apply_response(self, msg: dict[str, Any]) -> None:
        method, params, turn = self._sent.pop(msg["id"])
        result = msg.get("result")
        if method == "session/prompt" and turn is not None:
            session = self._sessions.get(params.get("sessionId"))
            model = session.state.model if session else None
            if "error" in msg:
                err = msg["error"] or {}
                turn.finish(None, model, RpcError(err.get("code", -32603), err.get("message", ""), err.get("data"),
                                                  method=method))
            else:
                turn.finish(result if isinstance(result, dict) else {}, model)
            return
        if "error" in msg or not isinstance(result, dict):
            return
        if method == "session/new" and isinstance(result.get("sessionId"), str):
            state = self._states.setdefault(result["sessionId"], SessionState(result["sessionId"]))
            state.apply_session_result(result)
        elif method in ("session/load", "session/resume"):
            state = self._states.get(params.get("sessionId"))
            if state is not None:
                state.apply_session_result(result)
        elif method == "session/set_config_option":
            state = self._states.get(params.get("sessionId"))
            if state is not None and isinstance(result.get("configOptions"), list):
                state.set_options(result["configOptions"])
        elif method == "session/set_mode":
            state = self._states.get(params.get("sessionId"))
            if state is not None:
                state.set_legacy_mode(params.get("modeId"))

    def _route_update(self, params: dict[str, Any]) -> str | None:
        session_id = params.get("sessionId")
        update = params.get("update")
        state = self._states.get(session_id)
        if state is None:
            logger.debug("ignoring an update for unknown session %r", session_id)
            return "ignored: unknown session"
        if not isinstance(update, dict):
            return "ignored: no update object"
        known = state.apply_update(update)
        session = self._sessions.get(session_id)
        turn = session._turn if session is not None else None
        if turn is not None and not turn.finished:
            turn.apply(update)
        else:
            state.history.append(copy.deepcopy(update))
        state.emit("update", {"turn": turn, "update": update})
        return None if known else f"ignored: unknown update kind {update.get('sessionUpdate')!r}"

    # --- agent -> client requests ----------------------------------------
    async def _handle_request(self, method: str, params: Any, is_notification: bool) -> Any:
        params = params if isinstance(params, dict) else {}
        if method == "session/update":
            return None  # applied in wire order by _on_frame
        if method in self._ext_handlers:
            result = self._ext_handlers[method](params)
            if inspect.isawaitable(result):
                result = await result
            return None if is_notification else (result if result is not None else {})
        if is_notification:
            return None  # unknown notifications are ignored
        if method == "session/request_permission":
            return await self._on_permission(params)
        if method == "fs/read_text_file" and self.fs:
            return self._fs_read(params)
        if method == "fs/write_text_file" and self.fs:
            return self._fs_write(params)
        raise RequestError.method_not_found(method)

    async def _on_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._sessions.get(params.get("sessionId"))
        if session is None:
            return {"outcome": {"outcome": "cancelled"}}
        return await session._decide_permission(params)

    def _session_for_fs(self, params: dict[str, Any]) -> Session:
        session = self._sessions.get(params.get("sessionId"))
        if session is None:
            raise RequestError.invalid_params({"message": f"unknown session {params.get('sessionId')!r}"})
        return session

    def _fs_read(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session_for_fs(params)
        path = session._confined_path(params.get("path"))
        if not path.is_file():
            raise RequestError.resource_not_found(str(path))
        text = path.read_text(encoding="utf-8", errors="replace")
        line, limit = params.get("line"), params.get("limit")
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max(int(line or 1) - 1, 0)
            end = start + int(limit) if limit is not None else None
            text = "".join(lines[start:end])
        return {"content": text}

    def _fs_write(self, params: dict[str, Any]) -> dict[str, Any]:
        session = self._session_for_fs(params)
        path = session._confined_path(params.get("path"))
        content = params.get("content")
        if not isinstance(content, str):
            raise RequestError.invalid_params({"message": "content must be a string"})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return {}

    # --- client -> agent requests ----------------------------------------
    async def _request(self, method: str, params: dict[str, Any], *, auth_retry: bool = True) -> Any:
        if self.status == "closed":
            raise AgentClosedError(f"agent '{self.name}' is closed; {method} was not sent")
        if self.status == "exited":
            raise AgentExitedError(f"agent '{self.name}' has exited (code {self.exit_code}); {method} was not sent",
                                   exit_code=self.exit_code, stderr_tail=self.stderr_tail(20))
        assert self._conn is not None
        try:
            return await self._conn.send_request(method, params)
        except RequestError as exc:
            if (exc.code == AUTH_REQUIRED and auth_retry and method in AUTH_RETRIED_METHODS
                    and await self._authenticate_from_env()):
                return await self._request(method, params, auth_retry=False)
            hint = auth_hint(self._agent_spec, self.auth_methods) if exc.code == AUTH_REQUIRED else None
            raise RpcError(exc.code, str(exc), exc.data, method=method, hint=hint) from exc
        except ConnectionError as exc:
            if self.status == "closed":
                raise AgentClosedError(f"agent '{self.name}' was closed while waiting for {method}") from exc
            await self._settle_exit()
            raise AgentExitedError(
                f"agent '{self.name}' exited (code {self.exit_code}) while waiting for {method}",
                exit_code=self.exit_code, stderr_tail=self.stderr_tail(20),
            ) from exc

    async def _notify(self, method: str, params: dict[str, Any]) -> None:
        if self.status != "running" or self._conn is None:
            return
        with contextlib.suppress(ConnectionError):
            await self._conn.send_notification(method, params)

    def _require(self, capability: str, method: str) -> None:
        caps = self.capabilities
        if capability == "loadSession":
            ok = bool(caps.get("loadSession"))
        else:
            ok = (caps.get("sessionCapabilities") or {}).get(capability) is not None
        if not ok:
            raise CapabilityError(
                f"agent '{self.name}' does not support {method} (it did not advertise it in initialize)",
                hint="agent.capabilities shows what this agent offers.",
            )

    async def _authenticate(self, method_id: str) -> dict[str, Any]:
        ids = [m.get("id") for m in self.auth_methods]
        if self.auth_methods and method_id not in ids:
            raise AcpError(f"agent '{self.name}' has no auth method {method_id!r}",
                           hint=f"Its auth methods are: {', '.join(map(str, ids))}.")
        result = await self._request("authenticate", {"methodId": method_id})
        return result if isinstance(result, dict) else {}

    async def _authenticate_from_env(self) -> bool:
        """Authenticate with the method whose key is in the agent's environment (AgentSpec.auth_env,
        e.g. codex: OPENAI_API_KEY -> openai-api-key); True when done. Only when the agent asks, so a
        login it already has (~/.codex/auth.json) is never replaced by the key; one attempt per agent,
        shared by concurrent callers."""
        chosen = auto_auth_method(self._agent_spec, self.auth_methods, self._agent_env)
        if chosen is None:
            return False
        if self._auth_from_env is None:
            self._auth_from_env = asyncio.ensure_future(self._authenticate_as(chosen[0]))
        await asyncio.shield(self._auth_from_env)
        return True

    async def _authenticate_as(self, method_id: str) -> None:
        await self._request("authenticate", {"methodId": method_id})
        self.auth_method = method_id

    async def _new_session(self, cwd: str | os.PathLike[str] | None, additional_directories: Sequence[str],
                           permission: PermissionPolicy | None, mcp_servers: Sequence[Mapping[str, Any]]) -> Session:
        root = str(Path(cwd).resolve()) if cwd is not None else self.cwd
        extra = [str(Path(d).resolve()) for d in additional_directories]
        params: dict[str, Any] = {"cwd": root, "mcpServers": [dict(s) for s in mcp_servers]}
        if extra:
            params["additionalDirectories"] = extra
        result = await self._request("session/new", params)
        if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
            raise ProtocolError(f"agent '{self.name}' answered session/new without a sessionId: {result!r}")
        session_id = result["sessionId"]
        state = self._states.setdefault(session_id, SessionState(session_id))
        return self._adopt(Session(self, session_id, state, root, extra, permission))

    def _adopt(self, session: Session) -> Session:
        self._sessions[session.id] = session
        return session

    async def _open_existing(self, method: str, session_id: str, cwd: str | os.PathLike[str] | None,
                             permission: PermissionPolicy | None) -> Session:
        self._require("loadSession" if method == "session/load" else "resume", method)
        root = str(Path(cwd).resolve()) if cwd is not None else self.cwd
        # The state exists before the request, so the history the agent replays lands in it.
        state = self._states.setdefault(session_id, SessionState(session_id))
        session = self._adopt(Session(self, session_id, state, root, [], permission))
        try:
            await self._request(method, {"sessionId": session_id, "cwd": root, "mcpServers": []})
        except BaseException:
            self._sessions.pop(session_id, None)
            self._states.pop(session_id, None)
            raise
        return session

    async def _list_sessions(self, cwd: str | None) -> list[dict[str, Any]]:
        self._require("list", "session/list")
        sessions: list[dict[str, Any]] = []
        cursor = None
        while True:
            params: dict[str, Any] = {}
            if cwd is not None:
                params["cwd"] = str(Path(cwd).resolve())
            if cursor:
                params["cursor"] = cursor
            result = await self._request("session/list", params) or {}
            sessions.extend(result.get("sessions") or [])
            cursor = result.get("nextCursor")
            if not cursor:
                return sessions

    # --- public facade -----------------------------------------------------
    def _t(self, timeout: float | None) -> float | None:
        return self.timeout if timeout is None else timeout

    def authenticate(self, method_id: str, *, timeout: float | None = None) -> dict[str, Any]:
        return _loop.run_sync(self._authenticate(method_id), self._t(timeout), what="authenticate")

    async def aauthenticate(self, method_id: str, *, timeout: float | None = None) -> dict[str, Any]:
        return await _loop.run_async(self._authenticate(method_id), self._t(timeout), what="authenticate")

    def new_session(self, cwd: str | os.PathLike[str] | None = None, *, additional_directories: Sequence[str] = (),
                    permission: PermissionPolicy | None = None, mcp_servers: Sequence[Mapping[str, Any]] = (),
                    timeout: float | None = None) -> Session:
        """Open a session (``cwd`` defaults to the agent's); ``permission`` overrides the agent's policy."""
        coro = self._new_session(cwd, additional_directories, permission, mcp_servers)
        return _loop.run_sync(coro, self._t(timeout), what="session/new")

    async def anew_session(self, cwd: str | os.PathLike[str] | None = None, *,
                           additional_directories: Sequence[str] = (), permission: PermissionPolicy | None = None,
                           mcp_servers: Sequence[Mapping[str, Any]] = (), timeout: float | None = None) -> Session:
        coro = self._new_session(cwd, additional_directories, permission, mcp_servers)
        return await _loop.run_async(coro, self._t(timeout), what="session/new")

    def load_session(self, session_id: str, cwd: str | os.PathLike[str] | None = None, *,
                     permission: PermissionPolicy | None = None, timeout: float | None = None) -> Session:
        """Reopen a past session; the agent replays its history into ``session.history``."""
        coro = self._open_existing("session/load", session_id, cwd, permission)
        return _loop.run_sync(coro, self._t(timeout), what="session/load")

    async def aload_session(self, session_id: str, cwd: str | os.PathLike[str] | None = None, *,
                            permission: PermissionPolicy | None = None, timeout: float | None = None) -> Session:
        coro = self._open_existing("session/load", session_id, cwd, permission)
        return await _loop.run_async(coro, self._t(timeout), what="session/load")

    def resume_session(self, session_id: str, cwd: str | os.PathLike[str] | None = None, *,
                       permission: PermissionPolicy | None = None, timeout: float | None = None) -> Session:
        """Reattach to a past session without a history replay."""
        coro = self._open_existing("session/resume", session_id, cwd, permission)
        return _loop.run_sync(coro, self._t(timeout), what="session/resume")

    async def aresume_session(self, session_id: str, cwd: str | os.PathLike[str] | None = None, *,
                              permission: PermissionPolicy | None = None, timeout: float | None = None) -> Session:
        coro = self._open_existing("session/resume", session_id, cwd, permission)
        return await _loop.run_async(coro, self._t(timeout), what="session/resume")

    def list_sessions(self, cwd: str | None = None, *, timeout: float | None = None) -> list[dict[str, Any]]:
        """Every page of ``session/list``, as the agent's dicts (sessionId, cwd, title, updatedAt...)."""
        return _loop.run_sync(self._list_sessions(cwd), self._t(timeout), what="session/list")

    async def alist_sessions(self, cwd: str | None = None, *, timeout: float | None = None) -> list[dict[str, Any]]:
        return await _loop.run_async(self._list_sessions(cwd), self._t(timeout), what="session/list")

    def request(self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None) -> Any:
        """Send any request (an ``_extension`` method, say) and return the agent's raw result."""
        return _loop.run_sync(self._request(method, params or {}), self._t(timeout), what=method)

    async def arequest(self, method: str, params: dict[str, Any] | None = None, *,
                       timeout: float | None = None) -> Any:
        return await _loop.run_async(self._request(method, params or {}), self._t(timeout), what=method)


class Session:
    """One ACP session: its live state (config, title, usage), turns, and the calls that change it."""

    def __init__(self, agent: Agent, session_id: str, state: SessionState, cwd: str,
                 additional_directories: Sequence[str], permission: PermissionPolicy | None) -> None:
        self.agent = agent
        self.id = session_id
        self.state = state
        self.cwd = cwd
        self.additional_directories = list(additional_directories)
        self.permission = permission
        self.turns: list[Turn] = []
        self.closed = False
        self._turn: Turn | None = None
        self._pending_permissions: set[asyncio.Future[Any]] = set()

    # --- state -----------------------------------------------------------
    @property
    def config(self) -> ConfigOptions:
        return self.state.config

    @property
    def title(self) -> str | None:
        return self.state.title

    @property
    def updated_at(self) -> str | None:
        return self.state.updated_at

    @property
    def meta(self) -> dict[str, Any]:
        return self.state.meta

    @property
    def usage(self) -> dict[str, Any] | None:
        return self.state.usage

    @property
    def history(self) -> list[dict[str, Any]]:
        """Updates received outside any turn (a load's replay, agent-initiated messages)."""
        return self.state.history

    @property
    def model_option(self):  # -> ConfigOption | None
        return self.config.by_category("model") or self.config.get("model")

    @property
    def model(self) -> str | bool | None:
        return self.state.model

    @model.setter
    def model(self, value: str) -> None:
        option = self.model_option
        if option is None:
            raise ConfigOptionError(f"agent '{self.agent.name}' offers no model option in this session",
                                    config_id="model", value=value, valid=self.config.ids())
        self.set(option.id, value)

    @property
    def busy(self) -> bool:
        return self._turn is not None

    def __repr__(self) -> str:
        return f"<acp Session {self.id} of {self.agent.name!r} title={self.title!r} model={self.model!r}>"

    # --- set -------------------------------------------------------------
    def _check_value(self, config_id: str, value: Any):
        if self.closed:
            raise AgentClosedError(f"session {self.id} is closed")
        option = self.config.get(config_id)
        if option is None:
            ids = self.config.ids()
            close = difflib.get_close_matches(config_id, ids, n=1)
            raise ConfigOptionError(
                f"no config option {config_id!r} in this session",
                config_id=config_id, value=value, valid=ids,
                hint=(f"Did you mean {close[0]!r}? " if close else "") + f"Options: {', '.join(ids) or 'none'}.",
            )
        if option.read_only:
            raise ConfigOptionError(
                f"option {config_id!r} is read-only: agent '{self.agent.name}' reports it only through the old "
                "`models` field and offers no way to change it over ACP",
                config_id=config_id, value=value, valid=option.values,
            )
        if option.type == "boolean":
            if not isinstance(value, bool):
                raise ConfigOptionError(f"option {config_id!r} is on/off: pass True or False, not {value!r}",
                                        config_id=config_id, value=value, valid=[False, True])
            return option
        if not isinstance(value, str) or value not in option.values:
            values = [str(v) for v in option.values]
            close = difflib.get_close_matches(str(value), values, n=1)
            raise ConfigOptionError(
                f"{value!r} is not a choice of {config_id!r}",
                config_id=config_id, value=value, valid=values,
                hint=(f"Did you mean {close[0]!r}? " if close else "") + f"Valid values: {', '.join(values)}.",
            )
        return option

    async def _set(self, config_id: str, value: Any) -> ConfigOptions:
        option = self._check_value(config_id, value)
        try:
            if option.legacy_source == "modes":
                await self.agent._request("session/set_mode", {"sessionId": self.id, "modeId": value})
                return self.config
            params: dict[str, Any] = {"sessionId": self.id, "configId": config_id, "value": value}
            if option.type == "boolean":
                params["type"] = "boolean"
            result = await self.agent._request("session/set_config_option", params)
        except RpcError as exc:
            raise ConfigOptionError(
                f"agent '{self.agent.name}' refused {config_id}={value!r}: {exc.rpc_message}"
                # The reason is often only in data: {"details": ...} (claude, gemini) or a string (codex).
                + (f" ({_data_details(exc.data)})" if _data_details(exc.data) else ""),
                config_id=config_id, value=value, valid=option.values,
                hint="The session's settings are unchanged.",
            ) from exc
        if not isinstance(result, dict) or not isinstance(result.get("configOptions"), list):
            raise ProtocolError(f"agent '{self.agent.name}' answered set_config_option without the option list")
        return self.config

    def set(self, config_id: str, value: str | bool, *, timeout: float | None = None) -> ConfigOptions:
        """Change one option; returns the complete new ConfigOptions. Bad values raise ConfigOptionError."""
        return _loop.run_sync(self._set(config_id, value), self.agent._t(timeout), what="set_config_option")

    async def aset(self, config_id: str, value: str | bool, *, timeout: float | None = None) -> ConfigOptions:
        return await _loop.run_async(self._set(config_id, value), self.agent._t(timeout), what="set_config_option")

    # --- turns -----------------------------------------------------------
    async def _prompt(self, prompt: str | Sequence[Mapping[str, Any]]) -> Turn:
        if self.closed:
            raise AgentClosedError(f"session {self.id} is closed")
        if self._turn is not None:
            raise AcpError("a turn is already running in this session",
                           hint="Wait for it to finish, or call session.cancel().")
        blocks = [{"type": "text", "text": prompt}] if isinstance(prompt, str) else [dict(b) for b in prompt]
        turn = Turn(prompt, self.id, model=self.model)
        self._turn = turn
        self.state.set_status("working")
        turn.mark_sent()
        try:
            await self.agent._request("session/prompt", {"sessionId": self.id, "prompt": blocks})
        except asyncio.CancelledError:
            await self._cancel_running(turn)
            raise
        except AcpError as exc:
            turn.finish(None, self.model, exc)
            self.state.set_status("error", str(exc).splitlines()[0])
            raise
        finally:
            self._turn = None
            self.turns.append(turn)
        self.state.set_status("idle")
        return turn

    async def _cancel_running(self, turn: Turn) -> None:
        """The caller gave up on the turn (interrupt, timeout): tell the agent, give it a moment to stop."""
        await asyncio.shield(self._send_cancel())
        deadline = time.monotonic() + CANCEL_GRACE_S
        while not turn.finished and time.monotonic() < deadline and self.agent.status == "running":
            await asyncio.sleep(0.02)
        if not turn.finished:
            turn.finish({"stopReason": "cancelled"}, self.model)
        self.state.set_status("idle", "cancelled")

    def prompt(self, prompt: str | Sequence[Mapping[str, Any]], *, timeout: float | None = None) -> Turn:
        """Send a prompt and block until the turn ends; a timeout or Ctrl-C sends session/cancel."""
        return _loop.run_sync(self._prompt(prompt), timeout, what="the prompt turn")

    async def aprompt(self, prompt: str | Sequence[Mapping[str, Any]], *, timeout: float | None = None) -> Turn:
        return await _loop.run_async(self._prompt(prompt), timeout, what="the prompt turn")

    def start_prompt(self, prompt: str | Sequence[Mapping[str, Any]],
                     timeout: float | None = None) -> concurrent.futures.Future[Turn]:
        """Start a turn without waiting; returns a concurrent Future (for views that must not block the kernel)."""
        return _loop.submit(_loop.run_async(self._prompt(prompt), timeout, what="the prompt turn"))

    async def _send_cancel(self) -> None:
        for future in list(self._pending_permissions):
            if not future.done():
                future.set_result(None)
        await self.agent._notify("session/cancel", {"sessionId": self.id})

    def cancel(self) -> None:
        """Ask the agent to stop the running turn; pending permission requests are answered 'cancelled'."""
        _loop.run_sync(self._send_cancel(), self.agent.timeout, what="session/cancel")

    async def acancel(self) -> None:
        await _loop.run_async(self._send_cancel(), self.agent.timeout, what="session/cancel")

    async def _close(self) -> None:
        if self.closed:
            return
        if self._turn is not None:
            await self._send_cancel()
        closable = (self.agent.capabilities.get("sessionCapabilities") or {}).get("close") is not None
        if closable and self.agent.status == "running":
            await self.agent._request("session/close", {"sessionId": self.id})
        self.closed = True
        self.agent._sessions.pop(self.id, None)
        self.agent._states.pop(self.id, None)

    def close(self) -> None:
        """End the session (session/close where the agent supports it); the agent keeps running."""
        _loop.run_sync(self._close(), self.agent.timeout, what="session/close")

    async def aclose(self) -> None:
        await _loop.run_async(self._close(), self.agent.timeout, what="session/close")

    # --- agent requests for this session (loop thread) -------------------
    def _agent_gone(self, error: AcpError) -> None:
        turn = self._turn
        if turn is not None and not turn.finished:
            turn.finish(None, self.model, error)
        for future in list(self._pending_permissions):
            if not future.done():
                future.set_result(None)
        self.state.set_status("error", str(error).splitlines()[0])

    async def _decide_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        request = PermissionRequest(self, dict(params.get("toolCall") or {}), list(params.get("options") or []),
                                    params)
        policy = self.permission if self.permission is not None else self.agent.permission
        cancelled: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending_permissions.add(cancelled)
        try:
            decided = asyncio.ensure_future(_apply_policy(policy, request))
            done, _ = await asyncio.wait({decided, cancelled}, return_when=asyncio.FIRST_COMPLETED)
            if decided not in done:
                decided.cancel()
                chosen = None
            else:
                chosen = decided.result()
        finally:
            self._pending_permissions.discard(cancelled)
        turn = self._turn
        if turn is not None:
            turn.merge_tool_call(request.tool_call)
            turn.permissions.append(PermissionRecord(request.tool_call, request.options, chosen))
        if chosen is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": chosen}}

    def _confined_path(self, raw: Any) -> Path:
        if not isinstance(raw, str) or not os.path.isabs(raw):
            raise RequestError.invalid_params({"message": f"path must be absolute, got {raw!r}"})
        resolved = Path(raw).resolve()  # follows symlinks, so a link cannot point us outside
        roots = [Path(self.cwd).resolve(), *(Path(d).resolve() for d in self.additional_directories)]
        if not any(resolved == root or resolved.is_relative_to(root) for root in roots):
            denied = PermissionDenied(f"{raw} is outside the session's directories")
            if self._turn is not None:
                self._turn.permissions.append(PermissionRecord({"path": raw}, [], None))
            raise RequestError(-32602, str(denied), {"path": raw, "allowed": [str(r) for r in roots]})
        return resolved


async def _apply_policy(policy: PermissionPolicy, request: PermissionRequest) -> str | None:
    """Turn a policy ("allow", "deny", or a callable) into an option id, or None for 'cancelled'."""
    if policy in ("allow", "allow_once"):
        return request.option_for("allow_once", "allow_always")
    if policy == "allow_always":
        return request.option_for("allow_always", "allow_once")
    if policy in ("deny", "reject", "reject_once"):
        return request.option_for("reject_once", "reject_always")
    if not callable(policy):
        raise ValueError(f"permission policy must be 'allow', 'deny' or a callable, not {policy!r}")
    try:
        answer = policy(request)
        if isinstance(answer, concurrent.futures.Future):
            answer = await asyncio.wrap_future(answer)
        elif inspect.isawaitable(answer):
            answer = await answer
    except Exception:  # noqa: BLE001 - a failing policy must not leave the agent waiting forever
        logger.exception("permission policy failed; answering with the reject option")
        return request.option_for("reject_once", "reject_always")
    if answer is None:
        return None
    if answer in ("allow", "deny", "allow_always", "reject"):
        return await _apply_policy(answer, request)
    ids = [o.get("optionId") for o in request.options]
    if answer in ids:
        return answer
    logger.warning("permission policy returned %r, not one of %r; rejecting", answer, ids)
    return request.option_for("reject_once", "reject_always")


# --- module-level entry points ----------------------------------------------
def start(spec: SpecLike, *, cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None,
          timeout: float = 60.0, permission: PermissionPolicy = "deny", inherit_env: bool = True, fs: bool = True,
          name: str | None = None) -> Agent:
    """Start an agent: a registered name ("demo", "claude"...), a command line, or an argv list."""
    agent = Agent(spec, cwd=cwd, env=env, timeout=timeout, permission=permission, inherit_env=inherit_env,
                  fs=fs, name=name)
    return _loop.run_sync(agent._start(), timeout + 10, what=f"starting agent {spec!r}")


async def astart(spec: SpecLike, *, cwd: str | os.PathLike[str] | None = None,
                 env: Mapping[str, str] | None = None, timeout: float = 60.0, permission: PermissionPolicy = "deny",
                 inherit_env: bool = True, fs: bool = True, name: str | None = None) -> Agent:
    agent = Agent(spec, cwd=cwd, env=env, timeout=timeout, permission=permission, inherit_env=inherit_env,
                  fs=fs, name=name)
    return await _loop.run_async(agent._start(), timeout + 10, what=f"starting agent {spec!r}")


_current: Session | None = None


def set_current(session: Session | None) -> None:
    global _current
    _current = session


def current() -> Session:
    """The Session the %acp magics are using."""
    if _current is None:
        raise AcpError("no current session", hint="Run `%acp start demo` (or another agent) first.")
    return _current
