"""One agent behind the proxy: its subprocess, its SDK connection, its stderr, its start and its end."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from acp.connection import Connection, StreamDirection, StreamEvent
from acp.exceptions import RequestError

from .._process import AgentProcess
from ..errors import AcpError
from ..launch import AgentSpec, auto_auth_method, resolve_spec, spec_of

if TYPE_CHECKING:
    from .server import Candidate

__all__ = ["Backend", "BackendConfig", "BackendGone"]

ORPHAN_UPDATES_KEPT = 500
ORPHAN_SESSIONS_KEPT = 64
AUTH_REQUIRED = -32000
# Requests an agent may answer "authentication required" before any session exists; the backend
# then authenticates from its environment (the registry's AgentSpec.auth_env) and sends them again.
# Never prompts: a turn is not repeated behind the user's back.
AUTH_RETRIED_METHODS = frozenset({"session/new", "session/load", "session/resume", "session/list"})


class _StderrEcho:
    """Copies agents' stderr lines to the proxy's own stderr from a thread, dropping lines when it lags.

    Not every client drains the proxy's stderr (the SDK's spawn helpers pipe it and never read it);
    a blocking write there must stall this thread only, never the event loop."""

    def __init__(self, capacity: int = 2000) -> None:
        self._lines: queue.Queue[bytes] = queue.Queue(maxsize=capacity)
        self._thread: threading.Thread | None = None
        self.dropped = 0

    def write(self, line: str) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="proxy-stderr-echo", daemon=True)
            self._thread.start()
        try:
            self._lines.put_nowait(line.encode("utf-8", "replace"))
        except queue.Full:
            self.dropped += 1

    def _run(self) -> None:
        while True:
            data = self._lines.get()
            with contextlib.suppress(OSError):
                os.write(2, data)


_echo = _StderrEcho()


class BackendGone(Exception):
    """The agent is not running (it never started, or it exited); the message says why."""

    def __init__(self, message: str, *, agent: str, exit_code: int | None = None,
                 stderr: list[str] | None = None) -> None:
        super().__init__(message)
        self.agent = agent
        self.exit_code = exit_code
        self.stderr = list(stderr or [])

    def to_request_error(self, message: str | None = None) -> RequestError:
        data: dict[str, Any] = {"agent": self.agent, "stderr": self.stderr}
        if self.exit_code is not None:
            data["exitCode"] = self.exit_code
        return RequestError(-32603, message or str(self), data)


@dataclass(frozen=True)
class BackendConfig:
    """An agent as given on the command line: its name and how to start it."""

    name: str
    spec: str | list[str] | AgentSpec
    env: Mapping[str, str] = field(default_factory=dict)


NotificationSink = Callable[["Backend", str, dict[str, Any]], None]
RequestSink = Callable[["Backend", str, dict[str, Any]], Any]
ExitSink = Callable[["Backend"], None]
FrameSink = Callable[[str, str, dict[str, Any]], None]


class Backend:
    """A backend agent, started on demand and restarted after it dies.

    Notifications are handed to `on_notification` synchronously from the SDK's receive loop, in
    wire order; requests go to `on_request` (awaited, its result is the answer).
    """

    def __init__(self, config: BackendConfig, *, cwd: str, on_notification: NotificationSink,
                 on_request: RequestSink, on_exit: ExitSink, on_frame: FrameSink | None = None) -> None:
        self.config = config
        self.name = config.name
        self.cwd = cwd
        self._on_notification = on_notification
        self._on_request = on_request
        self._on_exit = on_exit
        self._on_frame = on_frame
        self.status = "idle"  # idle -> starting -> ready -> exited | failed; closed at shutdown
        self.error: str | None = None
        self.command: list[str] = []
        self.init_result: dict[str, Any] = {}
        self.exit_code: int | None = None
        self.starts = 0
        self.conn: Connection | None = None
        self.process: AgentProcess | None = None
        self.routes: dict[str, Candidate] = {}
        # The registry's entry (auth_env...) when the spec names one; None for a plain command.
        self.spec: AgentSpec | None = spec_of(config.spec)
        self.env: dict[str, str] = {}
        # The auth method used on this process (by the client's authenticate, or from the environment).
        self.auth_method: str | None = None
        self._auth_from_env: asyncio.Future[None] | None = None
        self._orphans: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self._start_task: asyncio.Task[None] | None = None
        self._exit_watch: asyncio.Task[None] | None = None

    # --- state ---------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def capabilities(self) -> dict[str, Any]:
        return dict(self.init_result.get("agentCapabilities") or {})

    def supports(self, session_capability: str) -> bool:
        """`list`, `close`, `resume`, `delete`... from sessionCapabilities; `load` from loadSession."""
        caps = self.capabilities
        if session_capability == "load":
            return bool(caps.get("loadSession"))
        return (caps.get("sessionCapabilities") or {}).get(session_capability) is not None

    def stderr_tail(self, lines: int = 10) -> list[str]:
        return self.process.stderr_tail(lines) if self.process is not None else []

    def describe(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "error": self.error,
            "pid": self.pid,
            "exitCode": self.exit_code,
            "starts": self.starts,
            "command": self.command,
            "agentInfo": self.init_result.get("agentInfo"),
            "authMethod": self.auth_method,
            "stderrTail": self.stderr_tail(10),
        }

    def failure(self) -> BackendGone:
        """Why this backend cannot serve a request right now."""
        if self.status == "exited":
            return self._gone(f"agent '{self.name}' exited with code {self.exit_code}")
        if self.status == "closed":
            return BackendGone(f"agent '{self.name}' was shut down", agent=self.name)
        return BackendGone(self.error or f"agent '{self.name}' is not running", agent=self.name,
                           exit_code=self.exit_code, stderr=self.stderr_tail())

    def _gone(self, message: str) -> BackendGone:
        tail = self.stderr_tail(10)
        text = message + (":\n  " + "\n  ".join(tail) if tail else " (it wrote nothing to stderr)")
        return BackendGone(text, agent=self.name, exit_code=self.exit_code, stderr=tail)

    # --- start ----------------------------------------------------------------
    async def ensure_ready(self, init_params: dict[str, Any]) -> None:
        """Start and initialize the agent unless it is running; raises BackendGone on failure.

        The start runs in its own task, so a caller that gives up (a probe timeout) does not
        abort it: the next caller finds the agent started."""
        if self.status == "ready":
            return
        if self.status == "closed":
            raise self.failure()
        if self._start_task is None or self._start_task.done():
            self._start_task = asyncio.create_task(self._start(init_params), name=f"proxy-start-{self.name}")
        await asyncio.shield(self._start_task)
        if self.status != "ready":
            raise self.failure()

    async def _start(self, init_params: dict[str, Any]) -> None:
        self.status = "starting"
        self.error = None
        self.exit_code = None
        self.init_result = {}
        self.auth_method = None
        self._auth_from_env = None  # a new process: one new attempt
        self.starts += 1
        try:
            _, argv, extra_env = resolve_spec(self.config.spec, self.config.env)
        except AcpError as exc:
            self._fail(f"agent '{self.name}': {exc}" + (f" ({exc.hint})" if getattr(exc, "hint", None) else ""))
            return
        except ValueError as exc:
            self._fail(f"agent '{self.name}': {exc}")
            return
        self.command = argv
        # The user's whole environment (API keys...), not the SDK's trimmed default one.
        self.env = {**os.environ, **extra_env}
        process = AgentProcess(argv, cwd=self.cwd, env=self.env)
        # Prefixed with the agent's name, stderr also goes to the proxy's own stderr for whoever runs it.
        process.stderr_listeners.append(lambda line: _echo.write(f"[{self.name}] {line}\n"))
        try:
            await process.spawn()
        except OSError as exc:
            self._fail(f"agent '{self.name}': cannot run {argv[0]!r}: {exc.strerror or exc}")
            return
        self.process = process
        self._exit_watch = asyncio.create_task(self._watch_exit(process), name=f"proxy-exit-{self.name}")
        self.conn = Connection(self._handle, process.stdin, process.stdout, observers=[self._observe])
        request = asyncio.ensure_future(self.conn.send_request("initialize", init_params))
        exited = asyncio.ensure_future(process.exited.wait())
        try:
            await asyncio.wait({request, exited}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            exited.cancel()
        if not request.done():
            request.cancel()
        try:
            result = request.result() if request.done() and not request.cancelled() else None
        except RequestError as exc:
            self._fail(f"agent '{self.name}' refused initialize: {exc}")
            await self._terminate()
            return
        except ConnectionError:
            result = None
        if not isinstance(result, dict):
            await self._settle()
            self._fail(str(self._gone(f"agent '{self.name}' exited with code {self.exit_code} "
                                      "before answering initialize")))
            return
        self.init_result = result
        self.status = "ready"

    def _fail(self, message: str) -> None:
        self.status = "failed"
        self.error = message

    async def _watch_exit(self, process: AgentProcess) -> None:
        await process.exited.wait()
        if process is not self.process:
            return
        code = self.exit_code = process.exit_code
        if self.status in ("ready", "starting"):
            # Status and routes change in the same step, so no request can reach a dead session
            # and a restart cannot lose the routes of the new process.
            self.status = "exited"
            self.error = f"agent '{self.name}' exited with code {code}"
            self._on_exit(self)
            await process.settle(exit_timeout=0)
            if process is self.process and self.status == "exited":
                self.error = str(self._gone(f"agent '{self.name}' exited with code {code}"))

    async def _settle(self) -> None:
        """Let the exit watcher and the stderr drain finish, so errors carry the code and last lines."""
        if self.process is not None:
            await self.process.settle()
        if self._exit_watch is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._exit_watch), 1.0)

    # --- requests and frames ----------------------------------------------------
    @property
    def auth_methods(self) -> list[dict[str, Any]]:
        return [m for m in self.init_result.get("authMethods") or [] if isinstance(m, dict)]

    async def request(self, method: str, params: dict[str, Any], *, auth_retry: bool = True) -> Any:
        """Send a request to the agent; BackendGone when it is not running or dies before answering.

        A session request answered with "authentication required" is sent again once after
        authenticating from the environment, when the registry maps a variable that is set to a
        method the agent offers (see `authenticate_from_env`)."""
        if self.status != "ready" or self.conn is None:
            raise self.failure()
        try:
            return await self.conn.send_request(method, params)
        except RequestError as exc:
            if exc.code == AUTH_REQUIRED and auth_retry and method in AUTH_RETRIED_METHODS \
                    and await self.authenticate_from_env():
                return await self.request(method, params, auth_retry=False)
            raise
        except ConnectionError:
            await self._settle()
            raise self._gone(f"agent '{self.name}' exited with code {self.exit_code} while answering {method}") \
                from None

    def env_auth_method(self) -> tuple[str, str] | None:
        """``(method id, env var)`` this backend would authenticate with on its own, or None."""
        return auto_auth_method(self.spec, self.auth_methods, self.env)

    async def authenticate_from_env(self) -> bool:
        """Authenticate with the method whose key is in the agent's environment (codex: OPENAI_API_KEY ->
        openai-api-key); True when done. Called only when the agent asks, so a login it already has is
        never replaced by the key. One attempt per agent process, shared by concurrent callers; a
        refusal is kept and raised again to every later caller, as a -32000 that names the variable."""
        chosen = self.env_auth_method()
        if chosen is None:
            return False
        if self._auth_from_env is None:
            self._auth_from_env = asyncio.ensure_future(self._authenticate_as(*chosen))
            # Its callers may all have given up (a probe's timeout); the outcome is still read.
            self._auth_from_env.add_done_callback(lambda task: task.cancelled() or task.exception())
        await asyncio.shield(self._auth_from_env)
        return True

    async def _authenticate_as(self, method_id: str, env_var: str) -> None:
        try:
            await self.request("authenticate", {"methodId": method_id}, auth_retry=False)
        except RequestError as exc:
            data = {"agent": self.name, "methodId": method_id, "envVar": env_var, "agentError": exc.data}
            raise RequestError(AUTH_REQUIRED, f"agent '{self.name}' refused authenticate {method_id!r} "
                                              f"(with the key in ${env_var}): {exc}", data) from None
        self.auth_method = method_id

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if self.status == "ready" and self.conn is not None:
            with contextlib.suppress(ConnectionError):
                await self.conn.send_notification(method, params)

    async def _handle(self, method: str, params: Any, is_notification: bool) -> Any:
        if is_notification:
            return None  # already handed over, in wire order, by _observe
        return await self._on_request(self, method, params if isinstance(params, dict) else {})

    def _observe(self, event: StreamEvent) -> None:
        message = event.message
        incoming = event.direction == StreamDirection.INCOMING
        if self._on_frame is not None:
            self._on_frame(self.name, "in" if incoming else "out", message)
        if incoming and "method" in message and "id" not in message:
            params = message.get("params")
            self._on_notification(self, message["method"], params if isinstance(params, dict) else {})

    # --- session routes ---------------------------------------------------------
    def hold_orphan(self, session_id: str, method: str, params: dict[str, Any]) -> None:
        """Keep a notification for a session id not registered yet (sent before its session/new answer)."""
        if session_id not in self._orphans and len(self._orphans) >= ORPHAN_SESSIONS_KEPT:
            self._orphans.pop(next(iter(self._orphans)))
        held = self._orphans.setdefault(session_id, [])
        if len(held) < ORPHAN_UPDATES_KEPT:
            held.append((method, params))

    def register(self, candidate: Candidate) -> list[tuple[str, dict[str, Any]]]:
        """Route the agent's session id to `candidate`; returns what the agent sent for it before."""
        self.routes[candidate.backend_session_id] = candidate
        return self._orphans.pop(candidate.backend_session_id, [])

    def unregister(self, candidate: Candidate) -> None:
        if self.routes.get(candidate.backend_session_id) is candidate:
            del self.routes[candidate.backend_session_id]

    def forget_sessions(self) -> list[Candidate]:
        routes = list(self.routes.values())
        self.routes.clear()
        self._orphans.clear()
        return routes

    # --- end ----------------------------------------------------------------------
    async def shutdown(self) -> None:
        """End the agent: EOF on stdin, then SIGTERM, then SIGKILL to its process group."""
        self.status = "closed"
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.conn.close(), 1.0)
        await self._terminate()
        if self._exit_watch is not None:
            self._exit_watch.cancel()

    async def _terminate(self) -> None:
        if self.process is not None:
            await self.process.terminate(grace=1.0)

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """Signal the agent's whole process group (tests use it to simulate a crash)."""
        if self.process is not None:
            self.process.signal_group(sig)
