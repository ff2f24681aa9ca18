"""Agent: the ACP client's agent. One async core on the loop thread; the blocking twins derived.

``Agent`` sits on an ``AgentConnection`` (connection/), made in ``__init__``: the process or in-memory
agent, the SDK connection, deadlines, error mapping and what initialize answered live there. Here:
what the client does with frames, and the agent-wide operations users call. A session's own
operations are in session.py (``Session``, importable from here too), permission policies in
_permission.py, the frame log in _framelog.py.

- Agent -> client: every frame passes ``Agent._on_frame`` on the loop thread, in wire order,
  before the SDK dispatches it. It is logged (_framelog.py), and ``session/update`` notifications
  are applied to the session's ``SessionState`` and to its running ``Turn`` (_inbound.py, which
  also answers the agent's requests). Answers to our requests are applied by the appliers their
  senders registered (connection/routing.py), also in wire order.
- Client -> agent: each operation is one core coroutine (``_new_session``, ``_list_sessions``...)
  run on the loop thread; ``twins()`` derives the public blocking and awaitable pair with the same
  signature and docstring. Loop-thread code calls the cores directly.

Threads: ``Agent.log``, every ``SessionState``, ``Turn`` and the session tables are mutated only
on the background loop thread. Other threads read them: ``Agent.log`` is appended to and trimmed
from its front there, so readers elsewhere take a snapshot (``list(agent.log)``).

``current()``, ``set_current`` and ``CurrentSession`` are current_scope.py's (re-exported here): the current
session belongs to the IPython shell that asks, else to one process default made on first use.
"""
from __future__ import annotations

import contextlib
import copy
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import _loop
from ._inbound import AgentRequests, SessionUpdates
from ._facade import twins
from ._framelog import LOG_LIMIT, LOG_LIMIT_BYTES, FrameLog  # noqa: F401 - the limits are read here too
from ._permission import PermissionPolicy, PermissionRequest
from ._protocol import (
    CLIENT_SESSION_CAPABILITIES,
    PROTOCOL_VERSION,
    SYSTEM_PROMPT_MODES,
    client_version,
    system_prompt_modes,
)
from ._redact import Redactor, secret_values
from .auth_terminal import is_terminal_method, shown_command
from ._lazy import lazy_names
from ._timeout import CANCEL_GRACE_S  # noqa: F401 - the grace is read here too
from .connection import AgentConnection, transport_for
from .current_scope import CurrentSession, SessionScope, current, process_current, set_current  # noqa: F401
from .elicitation import ElicitationPolicy
from .errors import AcpError, AgentClosedError, AgentExitedError, AgentStartError, CapabilityError
from .extensions import SessionExtension, close_links, servers_with
from .launch import AgentSpec, SpecLike, environment, spec_of
from .record import ReplayTransport
from .record.format import Recorder
from .remedies import Remedy
from .session import (
    Session,
    agent_deadline,
    delete_session,
    not_a_directory,
    open_session_links,
    open_session,
    require_capability,
    session_directory,
    system_prompt_params,
)
from .session_results import apply_session_result, state_applier
from .session_table import EARLY_SESSIONS_KEPT, EARLY_UPDATES_KEPT, SessionTable  # noqa: F401 - limits read here

__all__ = ["Agent", "CurrentSession", "PermissionRequest", "Session", "areplay", "astart", "current", "current_session",
           "replay", "set_current", "start"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0  # an agent's start and each of its requests, unless timeout= says otherwise

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
        timeout: float | None = DEFAULT_TIMEOUT_S,
        permission: PermissionPolicy = "deny",
        inherit_env: bool = True,
        fs: bool = True,
        name: str | None = None,
        record: str | os.PathLike[str] | None = None,
        elicitation: ElicitationPolicy = "decline",
        permission_timeout: float | None = None,
        notebook_writes: bool = False,
        extensions: Sequence[SessionExtension] = (),
        wrap: Callable[[Any, str, Mapping[str, str]], Any] | None = None,
        system_prompt: str | Callable[[Agent], str | None] | None = None,
        system_prompt_mode: str = "append",
    ) -> None:
        self.spec = spec
        if system_prompt_mode not in SYSTEM_PROMPT_MODES:
            raise ValueError(f"system_prompt_mode is 'append' or 'override', not {system_prompt_mode!r}")
        # Sent as the unstable `systemPrompt` of each session/new, load, resume and fork, where the agent takes
        # one (session.system_prompt_params): text, or a function of the agent giving the text when a session opens.
        self.system_prompt = system_prompt
        self.system_prompt_mode = system_prompt_mode
        # What serves each of its sessions beside the protocol (extensions.py): the notebook's kernel tools, say.
        self.extensions: list[SessionExtension] = list(extensions)
        self.cwd = str(Path(cwd).resolve()) if cwd is not None else os.getcwd()
        if (problem := not_a_directory(self.cwd)) is not None:
            # Checked here: the spawn's own error would blame the program ("cannot run 'python'").
            raise AgentStartError(f"the agent's working directory {problem}",
                                  remedy=Remedy("existing_directory", {"what": "cwd"}))
        self.extra_env = environment(env, where="acpnb.start")
        self.timeout = timeout if timeout is not None else DEFAULT_TIMEOUT_S  # None: the default, as for every call
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
        # Its open sessions and their states (session_table.py); session/update applied to them by _updates.
        self.session_table: SessionTable[Session] = SessionTable()
        self._updates = SessionUpdates(self)
        self._frame_listeners: list[Callable[[dict[str, Any]], None]] = []
        self._stderr_listeners: list[Callable[[str], None]] = []
        self._requests = AgentRequests(self)  # answers the agent's requests (permission, forms, fs, extensions)
        self._registry_spec = spec_of(spec) if isinstance(spec, (str, list, tuple, AgentSpec)) else None
        self._record_to = record
        self._redactor: Redactor = Redactor()
        # Secret values the agent gets some other way than its environment (the proxy's agents' keys, which
        # travel on its command line): masked like the environment's.
        self.extra_secrets: list[tuple[str, str]] = []
        # What the spec runs as, given the agent's working directory and environment (starting.py: a bubblewrap
        # sandbox, sandbox.SandboxWrap); kept so the agent can be started again the same way.
        self.wrap = wrap
        launched = self.spec
        if wrap is not None:
            launched = wrap(self.spec, self.cwd, self.extra_env)
        resolved, transport, self._agent_env = transport_for(launched, cwd=self.cwd, env=self.extra_env,
                                                             inherit_env=self.inherit_env)
        self.name = name or resolved
        transport.stderr_listeners.append(self._fan_out_stderr)
        # Made here, so it is never None: "created" until connect(); what initialize answered lives on it.
        self.connection = AgentConnection(
            transport, name=self.name, handler=self._requests, on_frame=self._on_frame,
            on_exit=self._on_exit, spec=self._registry_spec, env=self._agent_env, request_timeout=self.timeout,
            tapped_notifications=_applied_by_on_frame)

    # --- lifecycle -------------------------------------------------------
    async def connect(self) -> Agent:
        """Start the agent (its process, or the object served in this process) and initialize it: "starting" ->
        "running". A coroutine for the loop that serves this agent: ``acpnb.start`` runs it on the background loop
        thread, the proxy on its own loop. Called once per Agent."""
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
        for session in self.session_table.sessions():
            session.agent_gone(error)
        await close_links([link for session in self.session_table.sessions() for link in session.links.values()])

    async def _close(self) -> None:
        """Close every session and end the agent (its whole process group). Safe to call twice."""
        if self.connection.state in ("created", "closed"):
            return
        _loop.remove_shutdown_hook(self._close)
        error = AgentClosedError(f"agent '{self.name}' was closed")
        for session in self.session_table.sessions():
            session.agent_gone(error)
        await close_links([link for session in self.session_table.sessions() for link in session.links.values()])
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
    def extension(self, name: str) -> SessionExtension | None:
        """The installed extension named ``name`` (``"kernel"``: the notebook's kernel tools), or None."""
        return next((e for e in self.extensions if e.name == name), None)

    @property
    def kernel_tools(self) -> str:
        """The policy of the MCP server ``kernel`` offered to this agent's sessions: "ask", "read-only", "allow" or
        "off" ("off" also when the kernel tools are not installed: an Agent made without ``acpnb.start``). A
        change applies at once to the open sessions' tools; under "off" they refuse every call and keep their
        connection, so switching back on works again in the same session. A session opened under "off" has no
        server: it gets tools when it is opened again (``load_session`` / ``resume_session``, or a new session)
        under another policy. The policy lives on the extension (kernel_link.py's ``KernelToolsExtension``)."""
        extension = self.extension("kernel")
        return "off" if extension is None else str(getattr(extension, "policy"))

    @kernel_tools.setter
    def kernel_tools(self, value: str) -> None:
        extension = self.extension("kernel")
        if extension is None:
            raise ValueError(f"agent.kernel_tools = {value!r}: agent '{self.name}' was made without the kernel tools "
                             "(acpnb.start installs them; Agent(extensions=[KernelToolsExtension(...)]) does too)")
        setattr(extension, "policy", value)

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
        """Its open sessions, in the order they were opened (``session_table`` has them by id, with their states)."""
        return self.session_table.sessions()

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
        self._requests.ext_handlers[method if method.startswith("_") else f"_{method}"] = handler

    async def _record(self, path: str | os.PathLike[str]) -> str:
        """Record this agent's session to ``path`` (JSON lines, secrets masked): the frames so far, then every
        frame until the agent is closed (or ``record`` is called again). ``acpnb.replay(path)`` plays it back."""
        if self.connection.state != "running":
            raise AgentClosedError(f"agent '{self.name}' is not running; start it with record=PATH instead")
        recorder = _recorder_for(self, path)
        self.log.record_to(recorder, self.connection.init_result)
        return str(recorder.path)

    record, arecord = twins(_record, what="starting a recording", default_timeout=agent_deadline)

    def _fan_out_stderr(self, line: str) -> None:
        line = self._redactor.text(line)  # listeners show it (views, saved notebooks): secrets masked
        for listener in list(self._stderr_listeners):
            with contextlib.suppress(Exception):
                listener(line)

    def __repr__(self) -> str:
        version = self.info.get("version", "?")
        return f"<acp Agent {self.name!r} {self.info.get('name', '')} {version} {self.status}>"

    # --- frames, in wire order (loop thread) -------------------------------
    def _on_frame(self, direction: str, msg: dict[str, Any], note: str | None) -> None:
        # What is written down (the log, the recording, the inspector) and what a transcript shows is the
        # log's masked copy (_framelog.py); the SDK acts on the frame as sent.
        entry, size = self.log.entry(direction, msg, self._redactor)
        msg = entry["msg"]
        if direction == "recv" and msg.get("method") == "session/update" and "id" not in msg:
            try:  # a sized entry is a compacted chunk, known to be well formed
                note = self._updates.route(msg.get("params"), checked=size is not None) or note
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

    # --- client -> agent requests --------------------------------------------
    async def _request(self, method: str, params: dict[str, Any] | list[Any] | None = None) -> Any:
        """Send any request (an ``_extension`` method, say) and return the agent's raw result. A request that
        changes a session's options (set_config_option, set_mode) sent this way still updates its state.
        ``params`` goes out as given: ACP's requests take an object, but JSON-RPC also allows an array, and
        seeing how an agent answers a malformed request is part of learning the protocol."""
        params = {} if params is None else params
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        state = self.session_table.state(session_id)
        apply = state_applier(state, method, params) if state is not None else None
        return await self.connection.request(method, params, apply=apply)

    request, arequest = twins(_request, what=lambda self, method, *_, **__: f"{method} to agent '{self.name}'",
                              default_timeout=agent_deadline)

    async def _authenticate(self, method_id: str) -> dict[str, Any]:
        """Authenticate with one of ``agent.auth_methods`` (by id). A terminal login is not sent to the agent:
        the error says which command to run in a terminal instead (``terminal_login_command``)."""
        ids = [m.get("id") for m in self.auth_methods]
        if self.auth_methods and method_id not in ids:
            raise AcpError(f"agent '{self.name}' has no auth method {method_id!r}",
                           remedy=Remedy("pick_auth_method", {"methods": [str(i) for i in ids]}))
        if is_terminal_method(_auth_method(self.auth_methods, method_id)):
            # ACP: a terminal method is never sent to authenticate. Scripts get the command line to run (the
            # environment by name only); the magics' auth command runs it in the cell (magics/login.py).
            raise AcpError(f"{method_id!r} is a login you do in a terminal, not through the agent",
                           remedy=Remedy("terminal_login", {"method": method_id,
                                                            "command": self.terminal_login_command(method_id)}))
        return await self.connection.authenticate(method_id)

    authenticate, aauthenticate = twins(_authenticate, what="authenticate", default_timeout=agent_deadline)

    def terminal_login_command(self, method_id: str) -> str:
        """The shell command for a terminal auth method: this agent's own command with the method's
        arguments and environment (ACP's terminal authentication). Secret values are never in it: the method's
        secret-named variables and those the agent was started with appear as ``NAME="$NAME"``."""
        method = _auth_method(self.auth_methods, method_id)
        if not is_terminal_method(method):
            raise AcpError(f"{method_id!r} is not a terminal login of agent '{self.name}'",
                           remedy=Remedy("list_auth_methods"))
        return shown_command(self.command, method, launch_env_names=sorted(self.extra_env), redactor=self._redactor)

    async def _logout(self) -> dict[str, Any]:
        """Log out of the agent (where it offers ``logout``); new sessions then need authentication."""
        if (self.capabilities.get("auth") or {}).get("logout") is None:
            raise CapabilityError(f"agent '{self.name}' does not offer logout",
                                  remedy=Remedy("show_capabilities", {"part": "auth"}))
        result = await self.connection.request("logout", {})
        return result if isinstance(result, dict) else {}

    logout, alogout = twins(_logout, what="logout", default_timeout=agent_deadline)

    async def _delete_session(self, session_id: str) -> None:
        """Delete a session from the agent's list (``session/delete``); an open one here is closed too."""
        await delete_session(self, session_id)

    delete_session, adelete_session = twins(_delete_session, what="session/delete", default_timeout=agent_deadline)

    async def _new_session(self, cwd: str | os.PathLike[str] | None = None, *,
                           additional_directories: Sequence[str] = (), permission: PermissionPolicy | None = None,
                           mcp_servers: Sequence[Mapping[str, Any]] = ()) -> Session:
        """Open a session (``cwd`` defaults to the agent's); ``permission`` overrides the agent's policy.
        ``mcp_servers`` go to the agent first, then the notebook's ``kernel`` server (unless the policy is
        "off", or one of yours is named ``kernel``: yours wins)."""
        root = session_directory(cwd, self.cwd)
        extra = [session_directory(d, self.cwd, "additional directory") for d in additional_directories]
        return await open_session(self, "session/new", {"cwd": root},
                                   {"additionalDirectories": extra} if extra else {}, extra, permission, mcp_servers)

    new_session, anew_session = twins(_new_session, what="session/new", default_timeout=agent_deadline)

    async def _reopen(self, method: str, session_id: str, cwd: str | os.PathLike[str] | None,
                      permission: PermissionPolicy | None) -> Session:
        require_capability(self, "loadSession" if method == "session/load" else "resume", method)
        root = session_directory(cwd, self.cwd)
        links = await open_session_links(self)  # fresh ones: those a session had here before are closed below
        # The state and session exist before the request, so the history the agent replays lands in them.
        table = self.session_table
        state = table.state_for(session_id)
        session = Session(self, session_id, state, root, [], permission)
        before = table.add(session)

        def reopened(answer: dict[str, Any]) -> str | None:
            if isinstance(answer.get("result"), dict):
                return apply_session_result(state, answer["result"])
            return None

        servers, offered, unused = servers_with((), links)
        await close_links(unused)
        session.adopt_links(offered)
        params: dict[str, Any] = {"sessionId": session_id, "cwd": root, "mcpServers": servers}
        try:
            if (prompt := system_prompt_params(self)) is not None:
                params["systemPrompt"] = session.system_prompt = prompt
            await self.connection.request(method, params, apply=reopened)
        except BaseException:
            table.forget(session_id, session)
            if before is not None:
                table.add(before)
            await close_links(offered)
            raise
        if before is not None and before is not session:
            await close_links(list(before.links.values()))
        return session

    async def _load_session(self, session_id: str, cwd: str | os.PathLike[str] | None = None, *,
                            permission: PermissionPolicy | None = None) -> Session:
        """Reopen a past session; the agent replays its history into ``session.history``."""
        return await self._reopen("session/load", session_id, cwd, permission)

    load_session, aload_session = twins(_load_session, what="session/load", default_timeout=agent_deadline)

    async def _resume_session(self, session_id: str, cwd: str | os.PathLike[str] | None = None, *,
                              permission: PermissionPolicy | None = None) -> Session:
        """Reattach to a past session without a history replay."""
        return await self._reopen("session/resume", session_id, cwd, permission)

    resume_session, aresume_session = twins(_resume_session, what="session/resume", default_timeout=agent_deadline)

    async def _list_sessions(self, cwd: str | None = None) -> list[dict[str, Any]]:
        """Every page of ``session/list``, as the agent's dicts (sessionId, cwd, title, updatedAt...)."""
        require_capability(self, "list", "session/list")
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

    list_sessions, alist_sessions = twins(_list_sessions, what="session/list", default_timeout=agent_deadline)




def _client_capabilities(fs: bool) -> dict[str, Any]:
    return {
        "fs": {"readTextFile": fs, "writeTextFile": fs},
        "terminal": False,
        "session": copy.deepcopy(dict(CLIENT_SESSION_CAPABILITIES)),  # boolean options, notices, compaction
        "elicitation": {"form": {}},
        # Terminal logins: %acp auth runs the agent's login in a pseudo-terminal in the cell and reconnects
        # (auth_terminal.py, magics/login.py); scripts are told the command line to run.
        "auth": {"terminal": True},
    }


def _auth_method(methods: list[dict[str, Any]], method_id: str) -> dict[str, Any]:
    return next((m for m in methods if m.get("id") == method_id), {})


def _recorder_for(agent: Agent, path: str | os.PathLike[str]) -> Recorder:
    """A recording of ``agent``'s frames to ``path``, secrets masked with its redactor."""
    return Recorder(path, agent={"name": agent.name, "command": agent.command, "cwd": agent.cwd},
                    redactor=agent.redactor)


def _applied_by_on_frame(method: str) -> bool:
    """Notifications ``Agent._on_frame`` applies in full (``_handle_request`` ignores them): the SDK
    never sees them, so a streamed chunk costs no task of its own."""
    return method == "session/update"




# --- module-level entry points ----------------------------------------------
async def _start(spec: SpecLike | Any, *, cwd: str | os.PathLike[str] | None = None,
                 env: Mapping[str, str] | None = None, timeout: float | None = DEFAULT_TIMEOUT_S,
                 permission: PermissionPolicy = "deny",
                 inherit_env: bool = True, fs: bool = True, name: str | None = None,
                 record: str | os.PathLike[str] | None = None, permission_timeout: float | None = None,
                 notebook_writes: bool = False, elicitation: ElicitationPolicy = "decline",
                 extensions: Sequence[SessionExtension] = (),
                 wrap: Callable[[Any, str, Mapping[str, str]], Any] | None = None,
                 system_prompt: str | Callable[[Agent], str | None] | None = None,
                 system_prompt_mode: str = "append") -> Agent:
    """Start an agent: a registered name ("demo", "claude"...), a command line, an argv list, or an agent
    object with the SDK's agent methods (served in this process). ``timeout`` bounds the start and each
    request; ``permission`` answers permission requests ("allow", "deny" or a callable), and a callable that
    has not decided after ``permission_timeout`` seconds is answered "cancelled"; ``record`` writes every
    frame to that file (secrets masked), for ``acpnb.replay``. The agent reads and writes files only in its
    sessions' directories, and never replaces a notebook unless ``notebook_writes=True``. ``elicitation``
    answers the agent's forms: "decline", "cancel", a dict of answers or a callable (see acp_notebook.elicitation).
    ``extensions`` serve each session beside the protocol (acp_notebook.extensions; ``acpnb.start`` adds the
    notebook's kernel tools). ``wrap(spec, cwd, env)`` gives what actually runs (``acpnb.start``'s
    ``sandbox=`` is one: acp_notebook/sandbox.py). ``system_prompt``: instructions for the agent, sent when each
    session opens where the agent takes a system prompt (unstable ACP; not sent to others), joined to its own
    in ``system_prompt_mode`` "append", or replacing them in "override" where the agent offers that (else a
    CapabilityError); ``session.system_prompt`` shows what was sent."""
    agent = Agent(spec, cwd=cwd, env=env, timeout=timeout, permission=permission, inherit_env=inherit_env,
                  elicitation=elicitation,
                  fs=fs, name=name, record=record, permission_timeout=permission_timeout,
                  notebook_writes=notebook_writes, extensions=extensions, wrap=wrap,
                  system_prompt=system_prompt, system_prompt_mode=system_prompt_mode)
    return await agent.connect()


def start_deadline(*args: Any, timeout: float | None = DEFAULT_TIMEOUT_S, **kwargs: Any) -> float:
    # initialize has `timeout`; spawning and tearing down a failed start get a margin
    return (DEFAULT_TIMEOUT_S if timeout is None else timeout) + 10


start, astart = twins(_start, what="starting the agent", default_timeout=start_deadline, core_takes_timeout=True)
start_core = _start  # the coroutine itself, for a layer that starts agents its own way (starting.py)


async def _replay(path: str | os.PathLike[str], *, speed: float | None = None,
                  cwd: str | os.PathLike[str] | None = None, timeout: float | None = DEFAULT_TIMEOUT_S,
                  permission: PermissionPolicy = "deny", fs: bool = True, name: str | None = None,
                  elicitation: ElicitationPolicy = "decline") -> Agent:
    """An Agent answered from a recording instead of a live agent: the same initialize, sessions, config
    options and streamed turns, offline. ``speed``: None replays as fast as possible, 1.0 at the recorded
    pace. A request the recording does not have raises ReplayMismatch, naming the line that differs."""
    root = str(Path(cwd).resolve()) if cwd is not None else os.getcwd()
    transport = ReplayTransport(path, speed=speed, cwd=root)
    # No kernel tools: the recorded agent's tool calls are in the recording, it never calls them here.
    agent = Agent(transport, cwd=root, timeout=timeout, permission=permission, fs=fs, elicitation=elicitation,
                  name=name or transport.recording.agent_name)
    return await agent.connect()


replay, areplay = twins(_replay, what="starting the replay", default_timeout=start_deadline, core_takes_timeout=True)


# ``current()`` and what it answers live in current_scope.py; kept importable from here. ``current_session`` is the
# process's CurrentSession, made on first read (current_scope.py), not when this module is imported.
__getattr__, __dir__ = lazy_names(__name__, globals(), {"current_session": process_current})
