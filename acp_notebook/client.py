"""Agent: the ACP client's agent. One async core on the loop thread; the blocking twins derived.

``Agent`` sits on an ``AgentConnection`` (connection/), made in ``__init__``: the process or in-memory
agent, the SDK connection, deadlines, error mapping and what initialize answered live there. Here:
what the client does with frames, and the agent-wide operations users call. A session's own
operations are in session.py (``Session``, importable from here too), permission policies in
_permission.py, the frame log in _framelog.py.

- Agent -> client: every frame passes ``Agent._on_frame`` on the loop thread, in wire order,
  before the SDK dispatches it. It is logged, and ``session/update`` notifications are applied
  to the session's ``SessionState`` and to its running ``Turn``. Answers to our requests are
  applied by the appliers their senders registered (connection/routing.py), also in wire order.
- Client -> agent: each operation is one core coroutine (``_new_session``, ``_list_sessions``...)
  run on the loop thread; ``twins()`` derives the public blocking and awaitable pair with the same
  signature and docstring. Loop-thread code calls the cores directly.

Threads: ``Agent.log``, every ``SessionState``, ``Turn`` and the session tables are mutated only
on the background loop thread. Other threads read them: ``Agent.log`` is appended to and trimmed
from its front there, so readers elsewhere take a snapshot (``list(agent.log)``).
"""
from __future__ import annotations

import contextlib
import inspect
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import _loop
from ._early import EarlyUpdates
from ._facade import twins
from ._framelog import LOG_LIMIT, LOG_LIMIT_BYTES, FrameLog  # noqa: F401 - the limits are read here too
from ._permission import PermissionPolicy, PermissionRequest, answer_permission
from ._protocol import PROTOCOL_VERSION, client_version
from ._redact import Redactor, secret_values
from ._timeout import CANCEL_GRACE_S  # noqa: F401 - the grace is read here too
from .connection import AgentConnection, transport_for
from .connection.checks import update_problem
from .elicitation import ElicitationPolicy, ElicitationRequest
from .elicitation import decide as decide_elicitation
from .elicitation import response as elicitation_response
from .errors import AcpError, AgentClosedError, AgentExitedError, CapabilityError, ProtocolError
from .kernel_link import KernelLink, close_links, entry_secrets, resolve_policy, servers_with_kernel
from .launch import AgentSpec, SpecLike, spec_of, terminal_login_command
from .record.format import Recorder
from .session import Session, _agent_timeout, _apply_session_result, _odd_values_note, _state_applier
from .state import SessionState

__all__ = ["Agent", "PermissionRequest", "Session", "areplay", "astart", "current", "replay", "set_current", "start"]

logger = logging.getLogger(__name__)

# Update kinds that belong to a turn (the others describe the session: its options, title, commands).
TURN_UPDATES = frozenset({"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan",
                          "usage_update"})
# Updates kept for a session id we do not know yet (sent before its session/new answer).
EARLY_UPDATES_KEPT = 500
EARLY_SESSIONS_KEPT = 16


class _OnConnection:
    """An Agent attribute that is its connection's own (read-only): the connection is its one home."""

    def __init__(self, name: str, doc: str) -> None:
        self.name = name
        self.__doc__ = doc

    def __get__(self, agent: Agent | None, owner: type | None = None) -> Any:
        return self if agent is None else getattr(agent.connection, self.name)

    def __set__(self, agent: Agent, value: Any) -> None:
        raise AttributeError(f"read-only: the agent's connection keeps it (connection.{self.name})")


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
            self.log.recorder = _recorder_for(self, self._record_to)
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": _client_capabilities(self.fs),
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

    # What the agent said about itself in initialize, and how its process is: read from the connection, the
    # one place each is kept.
    info = _OnConnection("agent_info", "The agent's ``agentInfo`` (name, title, version); {} before initialize.")
    capabilities = _OnConnection("capabilities", "The agent's ``agentCapabilities``; {} before initialize.")
    auth_methods = _OnConnection("auth_methods", "The agent's ``authMethods`` (dicts with ``id``, ``name``, "
                                 "maybe ``type``).")
    protocol_version = _OnConnection("protocol_version", "The protocol version of the agent's initialize answer.")
    exit_code = _OnConnection("exit_code", "The agent process's exit code; None while it runs.")
    auth_method = _OnConnection("auth_method", "The auth method used (by ``authenticate``, or picked from a key "
                                "in the environment).")
    pid = _OnConnection("pid", "The agent's process id; None for an agent that is not a process.")

    @property
    def status(self) -> str:
        """starting, running, closed or exited."""
        state = self.connection.state
        return {"created": "starting", "failed": "exited"}.get(state, state)

    @property
    def registry_spec(self) -> AgentSpec | None:
        """The registry entry this agent was started from, if any (its key variables, login hint...)."""
        return self._registry_spec

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

    async def _record(self, path: str | os.PathLike[str]) -> str:
        """Record this agent's session to ``path`` (JSON lines, secrets masked): the frames so far, then every
        frame until the agent is closed (or ``record`` is called again). ``acpnb.replay(path)`` plays it back."""
        if self.connection.state != "running":
            raise AgentClosedError(f"agent '{self.name}' is not running; start it with record=PATH instead")
        recorder = _recorder_for(self, path)
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
            return await answer_permission(session, params)
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
        if _auth_method(self.auth_methods, method_id).get("type") == "terminal":
            raise AcpError(f"{method_id!r} is a login you do in a terminal, not through the agent",
                           hint=f"Run this in a terminal, then start the agent again: "
                                f"{self.terminal_login_command(method_id)}")
        return await self.connection.authenticate(method_id)

    authenticate, aauthenticate = twins(_authenticate, what="authenticate", default_timeout=_agent_timeout)

    def terminal_login_command(self, method_id: str) -> str:
        """The shell command for a terminal auth method: this agent's own command with the method's
        arguments and environment (ACP's terminal authentication)."""
        method = _auth_method(self.auth_methods, method_id)
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




def _client_capabilities(fs: bool) -> dict[str, Any]:
    return {
        "fs": {"readTextFile": fs, "writeTextFile": fs},
        "terminal": False,
        "session": {"configOptions": {"boolean": {}}},
        "elicitation": {"form": {}},
        # Terminal logins are shown to the user as the command to run (terminal_login_command).
        "auth": {"terminal": True},
    }


def _auth_method(methods: list[dict[str, Any]], method_id: str) -> dict[str, Any]:
    return next((m for m in methods if m.get("id") == method_id), {})


def _recorder_for(agent: Agent, path: str | os.PathLike[str]) -> Recorder:
    """A recording of ``agent``'s frames to ``path``, secrets masked with its redactor."""
    return Recorder(path, agent={"name": agent.name, "command": agent.command, "cwd": agent.cwd},
                    redactor=agent._redactor)


def _applied_by_on_frame(method: str) -> bool:
    """Notifications ``Agent._on_frame`` applies in full (``_handle_request`` ignores them): the SDK
    never sees them, so a streamed chunk costs no task of its own."""
    return method == "session/update"




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
