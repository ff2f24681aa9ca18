"""Agent and Session: the ACP client. One async core on the loop thread; the blocking twins derived.

``Agent`` sits on an ``AgentConnection`` (connection/): the process or in-memory agent, the SDK
connection, deadlines and error mapping live there. Here: what the client does with frames,
and the operations users call.

- Agent -> client: every frame passes ``Agent._on_frame`` on the loop thread, in wire order,
  before the SDK dispatches it. It is logged, and ``session/update`` notifications are applied
  to the session's ``SessionState`` and to its running ``Turn``. Answers to our requests are
  applied by the appliers their senders registered (connection/routing.py), also in wire order.
- Client -> agent: each operation is one core coroutine (``_new_session``, ``_set``,
  ``_prompt``...) run on the loop thread; ``twins()`` derives the public blocking and awaitable
  pair with the same signature and docstring. Loop-thread code calls the cores directly.

Threads: ``Agent.log``, every ``SessionState``, ``Turn`` and the session tables are mutated only
on the background loop thread. Other threads read them: ``Agent.log`` is appended to and trimmed
from its front there, so readers elsewhere take a snapshot (``list(agent.log)``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import difflib
import inspect
import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from . import _loop, attachments
from ._early import EarlyUpdates
from ._facade import twins
from ._framelog import LOG_LIMIT, LOG_LIMIT_BYTES, FrameLog, _entry_size  # noqa: F401 - the limits are read here too
from ._protocol import INTERNAL_ERROR, INVALID_PARAMS, PROTOCOL_VERSION, client_version
from .connection import AgentConnection, files, transport_for
from .connection.checks import odd_current_values, options_problem, update_problem
from .connection.routing import Applier
from .elicitation import ElicitationPolicy, ElicitationRequest
from .elicitation import decide as decide_elicitation
from .elicitation import response as elicitation_response
from .errors import (
    AcpError,
    AgentClosedError,
    AgentExitedError,
    CapabilityError,
    ConfigOptionError,
    ProtocolError,
    ReplayMismatch,
    RpcError,
    _data_details,
)
from ._redact import Redactor, secret_values
from ._timeout import CANCEL_GRACE_S
from .kernel_link import KernelLink, close_links, entry_secrets, resolve_policy, servers_with_kernel
from .launch import AgentSpec, SpecLike, spec_of, terminal_login_command
from .record.format import Recorder
from .state import ConfigOption, ConfigOptions, SessionState
from .turn import PermissionRecord, Turn

__all__ = ["Agent", "PermissionRequest", "Session", "areplay", "astart", "current", "replay", "set_current", "start"]

logger = logging.getLogger(__name__)

# Update kinds that belong to a turn (the others describe the session: its options, title, commands).
TURN_UPDATES = frozenset({"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan",
                          "usage_update"})
# Updates kept for a session id we do not know yet (sent before its session/new answer).
EARLY_UPDATES_KEPT = 500
EARLY_SESSIONS_KEPT = 16
# Where a permission answer says why it is "cancelled" when no one decided in time.
PERMISSION_META_KEY = "acp-notebook/permission"


@dataclass(frozen=True)
class PermissionRequest:
    """What a permission policy callable receives; ``turn`` is the running turn, if any."""

    session: Session
    tool_call: dict[str, Any]
    options: list[dict[str, Any]]
    raw: dict[str, Any]
    turn: Turn | None = None

    def option_for(self, *kinds: str) -> str | None:
        for kind in kinds:
            for option in self.options:
                if option.get("kind") == kind:
                    return option.get("optionId")
        return None


PermissionPolicy = Union[str, Callable[[PermissionRequest], Any]]


# The blocking/awaitable twins wait this much longer than the agent's request deadline, so that a
# request nobody answers fails with the connection's error (which names the method and any stray
# answer) rather than the facade's plainer one.
_FACADE_MARGIN_S = 1.0


def _agent_timeout(agent: Agent, *_: Any, **__: Any) -> float | None:
    return None if agent.timeout is None else agent.timeout + _FACADE_MARGIN_S


def _session_timeout(session: Session, *_: Any, **__: Any) -> float | None:
    return _agent_timeout(session.agent)


class Agent:
    """A running ACP agent and its connection. Create with ``acpnb.start(...)``.

    Lifecycle: starting -> running -> closed (by ``close()``) or exited (the agent ended).
    Every method has an async twin named with an ``a`` prefix (``anew_session``, ``aclose``...).

    ``log`` holds the latest frames both ways, bounded: at most ``LOG_LIMIT`` (100,000) entries and
    ``LOG_LIMIT_BYTES`` (64 MiB) of their estimated size in memory (``log_bytes``); the oldest go first.
    """

    def __init__(
        self,
        spec: SpecLike | Any,
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        permission: PermissionPolicy = "deny",
        inherit_env: bool = True,
        fs: bool = True,
        name: str | None = None,
        record: str | os.PathLike[str] | None = None,
        elicitation: ElicitationPolicy = "decline",
        permission_timeout: float | None = None,
        notebook_writes: bool = False,
        kernel_tools: str | None = None,
    ) -> None:
        self.spec = spec
        # The kernel tools' policy for this agent's sessions (kernel_link.py): "ask", "read-only", "allow", "off".
        self._kernel_tools = resolve_policy(kernel_tools, api="acpnb.start")
        self.cwd = str(Path(cwd).resolve()) if cwd is not None else os.getcwd()
        self.extra_env = dict(env or {})
        self.timeout = timeout
        self.permission = permission
        self.elicitation = elicitation  # answers the agent's forms (elicitation.py); "decline" by default
        # Seconds a permission policy may take to decide (a callable waiting for a click); then the
        # request is answered "cancelled", with the reason in the answer's _meta. None: no limit.
        self.permission_timeout = permission_timeout
        self.inherit_env = inherit_env
        self.fs = fs
        # Whether fs/write_text_file may replace *.ipynb files in the session's directories (see connection/files.py).
        self.notebook_writes = notebook_writes
        self.command: list[str] = []
        self.log = FrameLog()
        self._sessions: dict[str, Session] = {}
        self._states: dict[str, SessionState] = {}
        self._early: EarlyUpdates[dict[str, Any]] = EarlyUpdates(per_session=EARLY_UPDATES_KEPT,
                                                                  sessions=EARLY_SESSIONS_KEPT)
        self._frame_listeners: list[Callable[[dict[str, Any]], None]] = []
        self._stderr_listeners: list[Callable[[str], None]] = []
        self._ext_handlers: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self._registry_spec = spec_of(spec) if isinstance(spec, (str, list, tuple, AgentSpec)) else None
        self._record_to = record
        self._redactor: Redactor = Redactor()
        # Secret values the agent gets some other way than its environment (the proxy's agents' keys, which
        # travel on its command line): masked like the environment's.
        self.extra_secrets: list[tuple[str, str]] = []
        resolved, transport, self._agent_env = transport_for(self.spec, cwd=self.cwd, env=self.extra_env,
                                                             inherit_env=self.inherit_env)
        self.name = name or resolved
        transport.stderr_listeners.append(self._fan_out_stderr)
        # Made here, so it is never None: "created" until _start; what initialize answered lives on it.
        self.connection = AgentConnection(
            transport, name=self.name, handler=self._handle_request, on_frame=self._on_frame,
            on_exit=self._on_exit, spec=self._registry_spec, env=self._agent_env, request_timeout=self.timeout,
            tapped_notifications=_applied_by_on_frame)

    # --- lifecycle -------------------------------------------------------
    async def _start(self) -> Agent:
        transport = self.connection.transport
        self._redactor = Redactor([*secret_values(self._agent_env), *self.extra_secrets])
        # Masked: a key passed on the command line would otherwise show wherever the command is shown.
        self.command = [self._redactor.text(str(part)) for part in transport.command or [transport.description]]
        if self._record_to is not None:
            self.log.recorder = self._new_recorder(self._record_to)
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": self._client_capabilities(),
            "clientInfo": {"name": "acp-notebook", "title": "acp-notebook", "version": client_version()},
        }
        _loop.on_shutdown(self._close)
        try:
            result = await self.connection.start(params, timeout=self.timeout)
        except BaseException:
            _loop.remove_shutdown_hook(self._close)
            raise
        if self.log.recorder is not None:
            self.log.recorder.begin(result)
        return self

    def _client_capabilities(self) -> dict[str, Any]:
        return {
            "fs": {"readTextFile": self.fs, "writeTextFile": self.fs},
            "terminal": False,
            "session": {"configOptions": {"boolean": {}}},
            "elicitation": {"form": {}},
            # Terminal logins are shown to the user as the command to run (terminal_login_command).
            "auth": {"terminal": True},
        }

    async def _on_exit(self) -> None:
        """The agent ended by itself: fail what waits on it, with its exit code and last stderr lines."""
        await self.connection.settle()
        error = AgentExitedError(f"agent '{self.name}' exited with code {self.exit_code}", exit_code=self.exit_code,
                                 stderr_tail=self.stderr_tail(20))
        for session in list(self._sessions.values()):
            session._agent_gone(error)
        await close_links([session.kernel_tools for session in self._sessions.values()])

    async def _close(self) -> None:
        """Close every session and end the agent (its whole process group). Safe to call twice."""
        if self.connection.state in ("created", "closed"):
            return
        _loop.remove_shutdown_hook(self._close)
        error = AgentClosedError(f"agent '{self.name}' was closed")
        for session in list(self._sessions.values()):
            session._agent_gone(error)
        await close_links([session.kernel_tools for session in self._sessions.values()])
        await self.connection.close()
        self.log.stop_recording()

    close, aclose = twins(_close, what="closing the agent", default_timeout=15.0)

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
    def kernel_tools(self) -> str:
        """The policy of the MCP server ``kernel`` offered to this agent's sessions: "ask", "read-only",
        "allow" or "off". A change applies at once to the open sessions' tools; "off" closes their channels
        (the agent's bridge is cut off), and a session opened under "off" gets tools only when it is opened
        again (``load_session`` / ``resume_session``) under another policy."""
        return self._kernel_tools

    @kernel_tools.setter
    def kernel_tools(self, value: str) -> None:
        policy = resolve_policy(value, api="agent.kernel_tools = ")
        self._kernel_tools = policy
        links = [s.kernel_tools for s in list(self._sessions.values()) if s.kernel_tools is not None]
        for link in links:
            link.policy = policy  # "off" refuses run_code at once; the channels close below
        if policy == "off" and links:
            closing = _loop.submit(close_links(links))
            if not _loop.in_loop_thread():
                closing.result(self.timeout)

    # What the agent said about itself in initialize: read from the one place it is kept, the connection.
    @property
    def info(self) -> dict[str, Any]:
        """The agent's ``agentInfo`` (name, title, version); {} before initialize."""
        return self.connection.agent_info

    @property
    def capabilities(self) -> dict[str, Any]:
        """The agent's ``agentCapabilities``; {} before initialize."""
        return self.connection.capabilities

    @property
    def auth_methods(self) -> list[dict[str, Any]]:
        """The agent's ``authMethods`` (each a dict with ``id``, ``name``, maybe ``type``)."""
        return self.connection.auth_methods

    @property
    def protocol_version(self) -> int | None:
        """The protocol version the agent answered initialize with; None before."""
        return self.connection.init_result.get("protocolVersion")

    @property
    def status(self) -> str:
        """starting, running, closed or exited."""
        state = self.connection.state
        return {"created": "starting", "failed": "exited"}.get(state, state)

    @property
    def exit_code(self) -> int | None:
        return self.connection.exit_code

    @property
    def auth_method(self) -> str | None:
        """The auth method used (by ``authenticate``, or picked from a key in the environment)."""
        return self.connection.auth_method

    @property
    def registry_spec(self) -> AgentSpec | None:
        """The registry entry this agent was started from, if any (its key variables, login hint...)."""
        return self._registry_spec

    @property
    def pid(self) -> int | None:
        return self.connection.pid

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def sessions(self) -> list[Session]:
        return list(self._sessions.values())

    @property
    def redactor(self) -> Redactor:
        """What masks this agent's secrets (its environment's secret values) in logs, recordings, attachments."""
        return self._redactor

    def stderr_tail(self, lines: int = 20) -> list[str]:
        return self.connection.stderr_tail(lines)

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

    def _new_recorder(self, path: str | os.PathLike[str]) -> Recorder:
        return Recorder(path, agent={"name": self.name, "command": self.command, "cwd": self.cwd},
                        redactor=self._redactor)

    async def _record(self, path: str | os.PathLike[str]) -> str:
        """Record this agent's session to ``path`` (JSON lines, secrets masked): the frames so far, then every
        frame until the agent is closed (or ``record`` is called again). ``acpnb.replay(path)`` plays it back."""
        if self.connection.state != "running":
            raise AgentClosedError(f"agent '{self.name}' is not running; start it with record=PATH instead")
        recorder = self._new_recorder(path)
        self.log.record_to(recorder, self.connection.init_result)
        return str(recorder.path)

    record, arecord = twins(_record, what="starting a recording", default_timeout=_agent_timeout)

    def _fan_out_stderr(self, line: str) -> None:
        line = self._redactor.text(line)  # listeners show it (views, saved notebooks): secrets masked
        for listener in list(self._stderr_listeners):
            with contextlib.suppress(Exception):
                listener(line)

    def __repr__(self) -> str:
        version = self.info.get("version", "?")
        return f"<acp Agent {self.name!r} {self.info.get('name', '')} {version} {self.status}>"

    def inspector(self, **filters: Any) -> Any:
        """The protocol inspector widget over this agent's frames (filters: ``method=``, ``session_id=``)."""
        from .widgets.inspector import ProtocolInspector

        return ProtocolInspector(self, **filters)

    # --- frames, in wire order (loop thread) -------------------------------
    def _on_frame(self, direction: str, msg: dict[str, Any], note: str | None) -> None:
        # What is written down (the log, the recording, the inspector) and what a transcript shows is the
        # log's masked copy (_framelog.py); the SDK acts on the frame as sent.
        entry, size = self.log.entry(direction, msg, self._redactor)
        msg = entry["msg"]
        if direction == "recv" and msg.get("method") == "session/update" and "id" not in msg:
            try:  # a sized entry is a compacted chunk, known to be well formed
                note = self._route_update(msg.get("params"), checked=size is not None) or note
            except Exception:  # noqa: BLE001 - a bad frame must never stop the receive loop
                logger.exception("acp-notebook failed to apply a frame")
                note = "failed to apply (see logs)"
        if note:
            entry["note"] = self._redactor.text(note)
        self.log.keep(entry, size)
        for listener in list(self._frame_listeners):
            with contextlib.suppress(Exception):
                listener(entry)

    @property
    def log_bytes(self) -> int:
        """The estimated size in memory of ``agent.log`` (bounded by ``LOG_LIMIT_BYTES``; see _framelog.py)."""
        return self.log.bytes

    def _route_update(self, params: Any, *, checked: bool = False) -> str | None:
        """Apply one session/update; ``checked``: the caller knows it is a well-formed text chunk."""
        if not isinstance(params, dict):
            return "ignored: params is not an object"
        session_id = params.get("sessionId")
        update = params.get("update")
        if not isinstance(update, dict):
            return "ignored: no update object"
        problem = None if checked else update_problem(update)
        if problem is not None:
            return f"ignored: a malformed {update.get('sessionUpdate')} update: {problem}"
        state = self._states.get(session_id) if isinstance(session_id, str) else None
        if state is None:
            return self._hold_early(session_id, update)
        known = state.apply_update(update)
        session = self._sessions.get(session_id)  # type: ignore[arg-type]
        turn = session._running if session is not None else None
        if turn is None and session is not None and session.turns and update.get("sessionUpdate") in TURN_UPDATES:
            # After the prompt's answer, before the next prompt: still that turn's (the TypeScript SDK
            # delivers an agent's last usage_update after the answer it was sent before).
            turn = session.turns[-1]
        if turn is not None:
            turn.apply(update)
        else:
            state.history.append(update)
        state.emit("update", {"turn": turn, "update": update})
        if not known:
            return f"ignored: unknown update kind {update.get('sessionUpdate')!r}"
        return _odd_values_note(update.get("configOptions")) if "configOptions" in update else None

    def _hold_early(self, session_id: Any, update: dict[str, Any]) -> str:
        """An update for a session we do not know: kept if a session/new, load or resume is on its way
        (agents may stream before answering), else ignored."""
        opening = any(r.method in ("session/new", "session/load", "session/resume")
                      for r in self.connection.router.outstanding.values())
        if not opening or not isinstance(session_id, str):
            return "ignored: unknown session"
        self._early.hold(session_id, update)
        return "held: its session is being opened"

    def _state_for(self, session_id: str) -> SessionState:
        """The session's state, made on first use; updates that arrived before it are applied now."""
        state = self._states.get(session_id)
        if state is None:
            state = self._states[session_id] = SessionState(session_id)
            for update in self._early.take(session_id):
                state.apply_update(update)
                state.history.append(update)
        return state

    # --- agent -> client requests (loop thread) -----------------------------
    def _session_named(self, params: dict[str, Any]) -> Session | None:
        """The open session a request names; None for an unknown id or one that is not a string."""
        session_id = params.get("sessionId")
        return self._sessions.get(session_id) if isinstance(session_id, str) else None

    async def _handle_request(self, method: str, params: Any, is_notification: bool) -> Any:
        from acp.exceptions import RequestError

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
            session = self._session_named(params)
            if session is None:
                return {"outcome": {"outcome": "cancelled"}}
            return await session._decide_permission(params)
        if method == "elicitation/create":
            return await self._elicit(params)
        if method in ("fs/read_text_file", "fs/write_text_file") and self.fs:
            session = self._session_named(params)
            if session is None:
                raise RequestError.invalid_params({"message": f"unknown session {params.get('sessionId')!r}"})
            return await session._fs_request(method, params)
        raise RequestError.method_not_found(method)

    # --- client -> agent requests --------------------------------------------
    async def _request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send any request (an ``_extension`` method, say) and return the agent's raw result. A request that
        changes a session's options (set_config_option, set_mode) sent this way still updates its state."""
        params = params or {}
        state = self._states.get(params.get("sessionId")) if isinstance(params.get("sessionId"), str) else None
        apply = _state_applier(state, method, params) if state is not None else None
        return await self.connection.request(method, params, apply=apply)

    request, arequest = twins(_request, what=lambda self, method, *_, **__: f"{method} to agent '{self.name}'",
                              default_timeout=_agent_timeout)

    async def _notify(self, method: str, params: dict[str, Any]) -> None:
        await self.connection.notify(method, params)

    def _require(self, capability: str, method: str) -> None:
        if not self.connection.supports(capability):
            raise CapabilityError(
                f"agent '{self.name}' does not support {method} (it did not advertise it in initialize)",
                hint="agent.capabilities shows what this agent offers.",
                hints={"magic": "%acp log --method initialize shows what the agent offers."},
            )

    async def _authenticate(self, method_id: str) -> dict[str, Any]:
        """Authenticate with one of ``agent.auth_methods`` (by id). A terminal login is not sent to the agent:
        the error says which command to run in a terminal instead (``terminal_login_command``)."""
        ids = [m.get("id") for m in self.auth_methods]
        if self.auth_methods and method_id not in ids:
            raise AcpError(f"agent '{self.name}' has no auth method {method_id!r}",
                           hint=f"Its auth methods are: {', '.join(map(str, ids))}.")
        if self._auth_method(method_id).get("type") == "terminal":
            raise AcpError(f"{method_id!r} is a login you do in a terminal, not through the agent",
                           hint=f"Run this in a terminal, then start the agent again: "
                                f"{self.terminal_login_command(method_id)}")
        return await self.connection.authenticate(method_id)

    authenticate, aauthenticate = twins(_authenticate, what="authenticate", default_timeout=_agent_timeout)

    def _auth_method(self, method_id: str) -> dict[str, Any]:
        return next((m for m in self.auth_methods if m.get("id") == method_id), {})

    def terminal_login_command(self, method_id: str) -> str:
        """The shell command for a terminal auth method: this agent's own command with the method's
        arguments and environment (ACP's terminal authentication)."""
        method = self._auth_method(method_id)
        if method.get("type") != "terminal":
            raise AcpError(f"{method_id!r} is not a terminal login of agent '{self.name}'",
                           hint="agent.auth_methods lists each method's type.",
                           hints={"magic": "%acp auth lists each method and how to use it."})
        return terminal_login_command(self.command, method)

    async def _logout(self) -> dict[str, Any]:
        """Log out of the agent (where it offers ``logout``); new sessions then need authentication."""
        if (self.capabilities.get("auth") or {}).get("logout") is None:
            raise CapabilityError(f"agent '{self.name}' does not offer logout",
                                  hint="agent.capabilities['auth'] shows what it offers.",
                                  hints={"magic": "%acp log --method initialize shows what the agent offers."})
        result = await self.connection.request("logout", {})
        return result if isinstance(result, dict) else {}

    logout, alogout = twins(_logout, what="logout", default_timeout=_agent_timeout)

    async def _delete_session(self, session_id: str) -> None:
        """Delete a session from the agent's list (``session/delete``); an open one here is closed too."""
        self._require("delete", "session/delete")
        await self.connection.request("session/delete", {"sessionId": session_id})
        session = self._sessions.pop(session_id, None)
        self._states.pop(session_id, None)
        if session is not None:
            session.closed = True

    delete_session, adelete_session = twins(_delete_session, what="session/delete", default_timeout=_agent_timeout)

    async def _elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        """An ``elicitation/create`` request: the form is answered by the turn's, session's or agent's policy."""
        session = self._session_named(params)
        if params.get("mode") != "form" or not isinstance(params.get("requestedSchema"), dict):
            return {"action": "decline"}  # only forms are advertised
        turn = session._running if session is not None else None
        request = ElicitationRequest(session, str(params.get("message") or ""), params["requestedSchema"],
                                     params, turn)
        policies = (turn.elicitation if turn is not None else None,
                    session.elicitation if session is not None else None, self.elicitation)
        record = await decide_elicitation(next(p for p in policies if p is not None), request)
        if turn is not None:
            turn.record_elicitation(record)
        return elicitation_response(record)

    async def _kernel_link(self) -> KernelLink | None:
        """A started KernelLink for a session about to open (None under "off"); its token is masked from here on
        wherever frames are written down (the log, recordings, the inspector)."""
        link = await KernelLink.open(self)
        if link is not None and link.entry is not None:
            self._redactor = Redactor([*self._redactor.secrets, *entry_secrets(link.entry)])
        return link

    async def _new_session(self, cwd: str | os.PathLike[str] | None = None, *,
                           additional_directories: Sequence[str] = (), permission: PermissionPolicy | None = None,
                           mcp_servers: Sequence[Mapping[str, Any]] = ()) -> Session:
        """Open a session (``cwd`` defaults to the agent's); ``permission`` overrides the agent's policy.
        ``mcp_servers`` go to the agent first, then the notebook's ``kernel`` server (unless the policy is
        "off", or one of yours is named ``kernel``: yours wins)."""
        root = str(Path(cwd).resolve()) if cwd is not None else self.cwd
        extra = [str(Path(d).resolve()) for d in additional_directories]
        link = await self._kernel_link()
        servers, offered = servers_with_kernel(mcp_servers, link.entry if link is not None else None)
        params: dict[str, Any] = {"cwd": root, "mcpServers": servers}
        if extra:
            params["additionalDirectories"] = extra

        def opened(answer: dict[str, Any]) -> str | None:
            result = answer.get("result")
            if isinstance(result, dict) and isinstance(result.get("sessionId"), str):
                return _apply_session_result(self._state_for(result["sessionId"]), result)
            return None

        try:
            result = await self.connection.request("session/new", params, apply=opened)
            if not isinstance(result, dict) or not isinstance(result.get("sessionId"), str):
                raise ProtocolError(f"agent '{self.name}' answered session/new without a sessionId: {result!r}")
        except BaseException:
            await close_links([link])
            raise
        session = Session(self, result["sessionId"], self._state_for(result["sessionId"]), root, extra, permission)
        session._adopt_kernel_tools(link if offered else None)
        if not offered:
            await close_links([link])
        self._sessions[session.id] = session
        return session

    new_session, anew_session = twins(_new_session, what="session/new", default_timeout=_agent_timeout)

    async def _reopen(self, method: str, session_id: str, cwd: str | os.PathLike[str] | None,
                      permission: PermissionPolicy | None) -> Session:
        self._require("loadSession" if method == "session/load" else "resume", method)
        root = str(Path(cwd).resolve()) if cwd is not None else self.cwd
        link = await self._kernel_link()  # a fresh channel: the one a session had here before is closed below
        # The state and session exist before the request, so the history the agent replays lands in them.
        state = self._state_for(session_id)
        before = self._sessions.get(session_id)
        session = self._sessions[session_id] = Session(self, session_id, state, root, [], permission)
        session._adopt_kernel_tools(link)

        def reopened(answer: dict[str, Any]) -> str | None:
            if isinstance(answer.get("result"), dict):
                return _apply_session_result(state, answer["result"])
            return None

        servers, _ = servers_with_kernel((), link.entry if link is not None else None)
        try:
            await self.connection.request(method, {"sessionId": session_id, "cwd": root, "mcpServers": servers},
                                       apply=reopened)
        except BaseException:
            self._sessions.pop(session_id, None)
            self._states.pop(session_id, None)
            if before is not None:
                self._sessions[session_id] = before
            await close_links([link])
            raise
        if before is not None and before is not session:
            await close_links([before.kernel_tools])
        return session

    async def _load_session(self, session_id: str, cwd: str | os.PathLike[str] | None = None, *,
                            permission: PermissionPolicy | None = None) -> Session:
        """Reopen a past session; the agent replays its history into ``session.history``."""
        return await self._reopen("session/load", session_id, cwd, permission)

    load_session, aload_session = twins(_load_session, what="session/load", default_timeout=_agent_timeout)

    async def _resume_session(self, session_id: str, cwd: str | os.PathLike[str] | None = None, *,
                              permission: PermissionPolicy | None = None) -> Session:
        """Reattach to a past session without a history replay."""
        return await self._reopen("session/resume", session_id, cwd, permission)

    resume_session, aresume_session = twins(_resume_session, what="session/resume", default_timeout=_agent_timeout)

    async def _list_sessions(self, cwd: str | None = None) -> list[dict[str, Any]]:
        """Every page of ``session/list``, as the agent's dicts (sessionId, cwd, title, updatedAt...)."""
        self._require("list", "session/list")
        sessions: list[dict[str, Any]] = []
        cursor = None
        while True:
            params: dict[str, Any] = {}
            if cwd is not None:
                params["cwd"] = str(Path(cwd).resolve())
            if cursor:
                params["cursor"] = cursor
            result = await self.connection.request("session/list", params) or {}
            sessions.extend(result.get("sessions") or [])
            cursor = result.get("nextCursor")
            if not cursor:
                return sessions

    list_sessions, alist_sessions = twins(_list_sessions, what="session/list", default_timeout=_agent_timeout)


class Session:
    """One ACP session: its live state (config, title, usage), turns, and the calls that change it.

    Turns run one at a time, in the order they were started (``start_turn`` queues).
    """

    def __init__(self, agent: Agent, session_id: str, state: SessionState, cwd: str,
                 additional_directories: Sequence[str], permission: PermissionPolicy | None) -> None:
        self.agent = agent
        self.id = session_id
        self.state = state
        self.cwd = cwd
        self.additional_directories = list(additional_directories)
        self.permission = permission
        self.elicitation: ElicitationPolicy | None = None  # overrides the agent's form policy when set
        self.turns: list[Turn] = []
        self.closed = False
        self._running: Turn | None = None  # the turn whose prompt is on the wire
        self._queue_lock = threading.Lock()
        self._last_queued: Turn | None = None  # the latest turn made by start_turn / prompt
        self._pending_permissions: set[asyncio.Future[Any]] = set()
        # The session's kernel tools (kernel_link.KernelLink): None when its agent offered none.
        self.kernel_tools: KernelLink | None = None

    def _adopt_kernel_tools(self, link: KernelLink | None) -> None:
        self.kernel_tools = link
        if link is not None:
            link.bind(self)

    # --- state -----------------------------------------------------------
    @property
    def config(self) -> ConfigOptions:
        return self.state.config

    @property
    def title(self) -> str | None:
        return self.state.title

    @property
    def display_title(self) -> str | None:
        """The agent's title, else the first prompt's (``state.title_source`` says which)."""
        return self.state.display_title

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
    def model_option(self) -> ConfigOption | None:
        return self.config.model_option

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
        return self._running is not None

    def __repr__(self) -> str:
        return f"<acp Session {self.id} of {self.agent.name!r} title={self.title!r} model={self.model!r}>"

    # --- set -------------------------------------------------------------
    def check_value(self, config_id: str, value: Any) -> ConfigOption:
        """The option ``set(config_id, value)`` would change; raises the ConfigOptionError that ``set``
        would raise for a value the session does not offer, without sending anything."""
        return self._check_value(config_id, value)

    def _check_value(self, config_id: str, value: Any) -> ConfigOption:
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

    async def _set(self, config_id: str, value: str | bool) -> ConfigOptions:
        """Change one option; returns the complete new ConfigOptions. Bad values raise ConfigOptionError
        (locally, or when the agent refuses) and leave the session's state unchanged."""
        option = self._check_value(config_id, value)
        state = self.state
        try:
            if option.legacy_source == "modes":
                params = {"sessionId": self.id, "modeId": value}
                await self.agent.connection.request("session/set_mode", params,
                                                 apply=_state_applier(state, "session/set_mode", params))
                return self.config
            params = {"sessionId": self.id, "configId": config_id, "value": value}
            if option.type == "boolean":
                params["type"] = "boolean"
            result = await self.agent.connection.request(
                "session/set_config_option", params, apply=_state_applier(state, "session/set_config_option", params))
        except ReplayMismatch:
            raise  # not the agent refusing: the recording has no such step
        except RpcError as exc:
            details = _data_details(exc.data)
            raise ConfigOptionError(
                f"agent '{self.agent.name}' refused {config_id}={value!r}: {exc.rpc_message}"
                # The reason is often only in data: {"details": ...} (claude, gemini) or a string (codex).
                + (f" ({details})" if details else ""),
                config_id=config_id, value=value, valid=option.values,
                hint="The session's settings are unchanged.",
            ) from exc
        if not isinstance(result, dict) or options_problem(result.get("configOptions")) is not None:
            problem = options_problem(result.get("configOptions")) if isinstance(result, dict) else "not an object"
            raise ProtocolError(f"agent '{self.agent.name}' answered set_config_option without a valid option list "
                                f"({problem}); the session's settings are unchanged")
        return self.config

    set, aset = twins(_set, what="set_config_option", default_timeout=_session_timeout)

    # --- turns -----------------------------------------------------------
    def start_turn(self, prompt: str | Sequence[Mapping[str, Any]], *, attach: Any = None,
                   permission: PermissionPolicy | None = None, elicitation: ElicitationPolicy | None = None,
                   timeout: float | None = None) -> Turn:
        """Queue a prompt and return its Turn at once (from any thread); views observe the turn.

        It is sent when the session's earlier turns have ended. ``turn.future`` resolves when it
        ends; ``attach`` adds objects as content blocks (see ``prompt``); ``permission`` and
        ``elicitation`` answer this turn's permission requests and forms; ``timeout`` cancels the
        turn (session/cancel) when it runs longer.
        """
        turn, previous = self._queue(prompt, permission, elicitation, attach)
        _loop.submit(_loop.run_async(self._run_turn(turn, previous), timeout, what="the prompt turn"))
        return turn

    def start_prompt(self, prompt: str | Sequence[Mapping[str, Any]],
                     timeout: float | None = None) -> concurrent.futures.Future[Turn]:
        """``start_turn(prompt).future``: a concurrent Future of the Turn."""
        return self.start_turn(prompt, timeout=timeout).future

    def _queue(self, prompt: Any, permission: PermissionPolicy | None,
               elicitation: ElicitationPolicy | None = None, attach: Any = None) -> tuple[Turn, Turn | None]:
        """A new turn, and the one it must wait for (turns of a session run in the order they were made)."""
        if self.closed:
            raise AgentClosedError(f"session {self.id} is closed")
        if not isinstance(prompt, str) and not (isinstance(prompt, Sequence) and
                                                all(isinstance(b, Mapping) for b in prompt)):
            raise TypeError(f"a prompt is a string or a list of content blocks (dicts), not {type(prompt).__name__}")
        attached = attachments.collect(attach, self.agent.capabilities, redactor=self.agent.redactor) \
            if attach is not None else []
        if attached:
            prompt = attachments.prompt_blocks(prompt, attached)
        with self._queue_lock:
            turn = Turn(prompt, self.id, self.model, session=self, permission=permission, elicitation=elicitation)
            turn.attachments = attached
            previous, self._last_queued = self._last_queued, turn
        return turn, previous

    async def _prompt(self, prompt: str | Sequence[Mapping[str, Any]], *, attach: Any = None,
                      permission: PermissionPolicy | None = None, elicitation: ElicitationPolicy | None = None) -> Turn:
        """Send a prompt (after any turn still running in this session) and wait for the turn to end.
        A timeout or Ctrl-C sends session/cancel. Raises the error that ended the turn, if any.

        ``attach``: objects sent with the text as content blocks (``attach=[df, fig]``; name them with
        ``(name, object)`` pairs or a dict): a DataFrame as a CSV resource, a figure or image as an image
        when the agent accepts images (else a note that it was left out), others as text; each capped,
        secrets masked (``acp_notebook.attachments``). ``turn.attachments`` lists what was sent."""
        return await self._run_turn(*self._queue(prompt, permission, elicitation, attach))

    prompt, aprompt = twins(_prompt, what="the prompt turn")

    async def _run_turn(self, turn: Turn, previous: Turn | None) -> Turn:
        try:
            if previous is not None and not previous.finished:
                await asyncio.wait({asyncio.wrap_future(previous.future)})
        except asyncio.CancelledError:
            turn.finish({"stopReason": "cancelled"}, self.model)  # given up while queued: never sent
            raise
        if self.closed:
            turn.finish(None, self.model, AgentClosedError(f"session {self.id} is closed"))
        else:
            await self._send_turn(turn)
        if turn.error is not None:
            raise turn.error
        return turn

    async def _send_turn(self, turn: Turn) -> None:
        blocks = [{"type": "text", "text": turn.prompt}] if isinstance(turn.prompt, str) \
            else [dict(b) for b in turn.prompt]
        self._running = turn
        self.turns.append(turn)
        self.state.note_prompt(turn.prompt if isinstance(turn.prompt, str) else
                               " ".join(str(b.get("text", "")) for b in turn.prompt if b.get("type") == "text"))
        self.state.set_status("working")
        turn.mark_sent()

        def answered(answer: dict[str, Any]) -> None:
            if isinstance(answer.get("result"), dict):
                turn.finish(answer["result"], self.state.model)

        try:
            with _loop.switch_interval.streaming():
                await self.agent.connection.request("session/prompt", {"sessionId": self.id, "prompt": blocks},
                                                 apply=answered, timeout=None)
        except asyncio.CancelledError:
            await self._cancel_running(turn)
            raise
        except AcpError as exc:
            turn.finish(None, self.state.model, exc)
            self.state.set_status("error", str(exc).splitlines()[0])
            return
        finally:
            if self._running is turn:
                self._running = None
        self.state.set_status("idle")

    async def _cancel_running(self, turn: Turn) -> None:
        """The caller gave up on the turn (interrupt, timeout): tell the agent, give it a moment to stop."""
        await asyncio.shield(self._cancel())
        if not turn.finished and self.agent.status == "running":
            with contextlib.suppress(asyncio.TimeoutError, AcpError):
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(turn.future)), CANCEL_GRACE_S)
        turn.finish({"stopReason": "cancelled"}, self.state.model)
        self.state.set_status("idle", "cancelled")

    async def _cancel(self) -> None:
        """Ask the agent to stop the running turn; pending permission requests are answered 'cancelled'."""
        for future in list(self._pending_permissions):
            if not future.done():
                future.set_result(None)
        await self.agent._notify("session/cancel", {"sessionId": self.id})

    cancel, acancel = twins(_cancel, what="session/cancel", default_timeout=_session_timeout)

    async def _close(self) -> None:
        """End the session (session/close where the agent supports it); the agent keeps running."""
        if self.closed:
            return
        if self._running is not None:
            await self._cancel()
        connection = self.agent.connection
        if connection.state == "running" and connection.supports("close"):
            await connection.request("session/close", {"sessionId": self.id})
        self.closed = True
        if self.agent._sessions.get(self.id) is self:
            self.agent._sessions.pop(self.id, None)
            self.agent._states.pop(self.id, None)
        await close_links([self.kernel_tools])

    close, aclose = twins(_close, what="session/close", default_timeout=_session_timeout)

    async def _delete(self) -> None:
        """Delete the session from the agent's list (``session/delete``, where the agent offers it); it is closed."""
        if self._running is not None:
            await self._cancel()
        await self.agent._delete_session(self.id)

    delete, adelete = twins(_delete, what="session/delete", default_timeout=_session_timeout)

    # --- agent requests for this session (loop thread) -------------------
    def _agent_gone(self, error: AcpError) -> None:
        turn = self._running
        if turn is not None and not turn.finished:
            turn.finish(None, self.model, error)
        for future in list(self._pending_permissions):
            if not future.done():
                future.set_result(None)
        self.state.set_status("error", str(error).splitlines()[0])

    async def _decide_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        """Ask the policy (the turn's, the session's or the agent's); "cancelled" when the turn is cancelled,
        the agent goes, or the policy has not decided within the agent's ``permission_timeout``."""
        turn = self._running
        tool_call = params.get("toolCall") if isinstance(params.get("toolCall"), dict) else {}
        if update_problem({"sessionUpdate": "tool_call_update", "toolCallId": "", **tool_call}) is not None:
            tool_call = {}  # malformed: not merged into the turn's tool calls (the policy still sees params)
        options = [o for o in params.get("options") or [] if isinstance(o, dict)] \
            if isinstance(params.get("options"), list) else []
        request = PermissionRequest(self, dict(tool_call), options, params, turn)
        chosen, reason = await decide_permission(self, request)
        if turn is not None:
            turn.record_permission(PermissionRecord(request.tool_call, request.options, chosen))
        if chosen is not None:
            return {"outcome": {"outcome": "selected", "optionId": chosen}}
        answer: dict[str, Any] = {"outcome": {"outcome": "cancelled"}}
        if reason:
            logger.warning("permission request in session %s answered 'cancelled': %s", self.id, reason)
            answer["_meta"] = {PERMISSION_META_KEY: {"reason": reason}}
        return answer

    async def _fs_request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Answer fs/read_text_file or fs/write_text_file within the rules of connection/files.py.

        The file I/O runs on a worker thread (a slow disk must not stall every agent's frames);
        a refusal is recorded on the running turn here, on the loop thread, and answered as an error."""
        from acp.exceptions import RequestError

        roots = [self.cwd, *self.additional_directories]
        raw = params.get("path")
        try:
            if method == "fs/read_text_file":
                text = await asyncio.to_thread(files.read_text, raw, roots, params.get("line"), params.get("limit"))
                return {"content": text}
            await asyncio.to_thread(files.write_text, raw, roots, params.get("content"),
                                    notebooks=self.agent.notebook_writes, protected=files.kernel_notebooks())
            return {}
        except files.FileRefused as refused:
            message, code, data = refused.message, refused.code, refused.data
        except OSError as exc:
            message, code, data = f"{method} {raw}: {exc.strerror or exc}", INTERNAL_ERROR, {"path": raw}
        if self._running is not None and code == INVALID_PARAMS:
            # A refusal by the rules (outside the directories, a notebook, not a regular file...) is shown on
            # the turn as a denied request; a file that is simply missing is not a decision of ours.
            self._running.record_permission(PermissionRecord({"path": raw}, [], None))
        raise RequestError(code, message, data)


def _state_applier(state: SessionState, method: str, params: dict[str, Any]) -> Applier | None:
    """How the answer to ``method`` changes the session's state, in wire order: the complete option list of a
    set_config_option answer, the mode of an accepted set_mode; None for requests that change nothing here."""
    def options(answer: dict[str, Any]) -> str | None:
        result = answer.get("result")
        if not isinstance(result, dict) or "configOptions" not in result:
            return None
        problem = options_problem(result["configOptions"])
        if problem is not None:
            return f"not applied: {problem}"
        state.set_options(result["configOptions"])
        return _odd_values_note(result["configOptions"])

    def mode(answer: dict[str, Any]) -> None:
        if "result" in answer and isinstance(params.get("modeId"), str):
            state.set_legacy_mode(params["modeId"])

    return {"session/set_config_option": options, "session/set_mode": mode}.get(method)


def _applied_by_on_frame(method: str) -> bool:
    """Notifications ``Agent._on_frame`` applies in full (``_handle_request`` ignores them): the SDK
    never sees them, so a streamed chunk costs no task of its own."""
    return method == "session/update"


def _apply_session_result(state: SessionState, result: dict[str, Any]) -> str | None:
    """Apply a session/new, load or resume result; a note naming what was left out, or options that look odd.

    A malformed field is left out (the rest applies): the session is open either way."""
    clean, notes = dict(result), []
    options = clean.get("configOptions")
    if options is not None and options_problem(options) is not None:
        notes.append(f"config options not applied: {options_problem(clean.pop('configOptions'))}")
    for legacy in ("modes", "models"):
        value = clean.get(legacy)
        if value is not None and not (isinstance(value, dict) and all(
                isinstance(v, list) for k, v in value.items() if k.startswith("available") and v is not None)):
            notes.append(f"its {legacy} field not applied: not an object with lists of choices")
            del clean[legacy]
    state.apply_session_result(clean)
    odd = _odd_values_note(clean.get("configOptions"))
    return "; ".join(notes + ([odd] if odd else [])) or None


def _odd_values_note(options: Any) -> str | None:
    """A note for options whose current value is not among their choices (kept and shown as the agent says)."""
    odd = odd_current_values(options)
    return "; ".join(odd) if odd else None


async def decide_permission(session: Session, request: PermissionRequest) -> tuple[str | None, str]:
    """The option id the policy chose (the turn's, the session's or the agent's), or None for "cancelled":
    the turn was cancelled, the agent went, or nobody decided within the agent's ``permission_timeout``,
    which the second item then says (else it is ""). Loop thread."""
    turn = request.turn
    policy = next(p for p in (turn.permission if turn is not None else None, session.permission,
                              session.agent.permission) if p is not None)
    cancelled: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    session._pending_permissions.add(cancelled)
    limit = session.agent.permission_timeout
    try:
        decided = asyncio.ensure_future(_apply_policy(policy, request))
        done, _ = await asyncio.wait({decided, cancelled}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        chosen = decided.result() if decided in done else None
        if decided not in done:
            decided.cancel()
    finally:
        session._pending_permissions.discard(cancelled)
    return chosen, "" if done else f"no decision within {limit:g} s (the permission_timeout)"


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
async def _start(spec: SpecLike | Any, *, cwd: str | os.PathLike[str] | None = None,
                 env: Mapping[str, str] | None = None, timeout: float = 60.0, permission: PermissionPolicy = "deny",
                 inherit_env: bool = True, fs: bool = True, name: str | None = None,
                 record: str | os.PathLike[str] | None = None, permission_timeout: float | None = None,
                 notebook_writes: bool = False, elicitation: ElicitationPolicy = "decline",
                 kernel_tools: str | None = None) -> Agent:
    """Start an agent: a registered name ("demo", "claude"...), a command line, an argv list, or an agent
    object with the SDK's agent methods (served in this process). ``timeout`` bounds the start and each
    request; ``permission`` answers permission requests ("allow", "deny" or a callable), and a callable that
    has not decided after ``permission_timeout`` seconds is answered "cancelled"; ``record`` writes every
    frame to that file (secrets masked), for ``acpnb.replay``. The agent reads and writes files only in its
    sessions' directories, and never replaces a notebook unless ``notebook_writes=True``. ``elicitation``
    answers the agent's forms: "decline", "cancel", a dict of answers or a callable (see acp_notebook.elicitation).
    ``kernel_tools``: the policy of the MCP server ``kernel`` every session is offered ("ask", "read-only",
    "allow", "off"); None is "ask" in a Jupyter kernel, where "ask" is answered by ``permission`` (in a
    ``%%acp`` cell: Allow / Reject buttons), and "off" in plain Python."""
    agent = Agent(spec, cwd=cwd, env=env, timeout=timeout, permission=permission, inherit_env=inherit_env,
                  elicitation=elicitation,
                  fs=fs, name=name, record=record, permission_timeout=permission_timeout,
                  notebook_writes=notebook_writes, kernel_tools=kernel_tools)
    return await agent._start()


def _start_deadline(*args: Any, timeout: float = 60.0, **kwargs: Any) -> float:
    return timeout + 10  # initialize has `timeout`; spawning and tearing down a failed start get a margin


start, astart = twins(_start, what="starting the agent", default_timeout=_start_deadline, core_takes_timeout=True)


async def _replay(path: str | os.PathLike[str], *, speed: float | None = None,
                  cwd: str | os.PathLike[str] | None = None, timeout: float = 60.0,
                  permission: PermissionPolicy = "deny", fs: bool = True, name: str | None = None,
                  elicitation: ElicitationPolicy = "decline") -> Agent:
    """An Agent answered from a recording instead of a live agent: the same initialize, sessions, config
    options and streamed turns, offline. ``speed``: None replays as fast as possible, 1.0 at the recorded
    pace. A request the recording does not have raises ReplayMismatch, naming the line that differs."""
    from .record import ReplayTransport

    root = str(Path(cwd).resolve()) if cwd is not None else os.getcwd()
    transport = ReplayTransport(path, speed=speed, cwd=root)
    # No kernel tools: the recorded agent's tool calls are in the recording, it never calls them here.
    agent = Agent(transport, cwd=root, timeout=timeout, permission=permission, fs=fs, elicitation=elicitation,
                  name=name or transport.recording.agent_name, kernel_tools="off")
    return await agent._start()


replay, areplay = twins(_replay, what="starting the replay", default_timeout=_start_deadline, core_takes_timeout=True)


_current: Session | None = None


def set_current(session: Session | None) -> None:
    global _current
    _current = session


def current() -> Session:
    """The Session the %acp magics are using."""
    if _current is None:
        raise AcpError("no current session", hint="Run `%acp start demo` (or another agent) first.")
    return _current
