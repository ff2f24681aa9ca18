"""One agent behind the proxy: started on demand over an AgentConnection, restarted after it dies.

The connection lifecycle (spawn, initialize raced against exit, deadlines, authentication from
the environment, exit watch, close) is ``connection.AgentConnection``, the same as the client's.
What is the proxy's own here: starting on first use and again after an exit, the routing of
the agent's session ids to the proxy's sessions, and the translation of failures into what the
proxy answers its client (``BackendGone`` / ``RequestError``), done in ``request`` only.

Threads: everything runs on the proxy's one event loop.

Process-wide: ``_echo``, the proxy's echo of its agents' stderr to its own, one per process
because the proxy's stderr is: made at import without a thread, its writer thread started by the
first line (from the proxy's loop) and kept until the process exits; a bounded queue drops lines
rather than block the loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import signal
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from acp.exceptions import RequestError

from .._early import EarlyUpdates
from .._once import SharedStart
from .._protocol import INTERNAL_ERROR
from ..connection import AgentConnection, transport_for
from ..connection.transport import StdioTransport
from ..errors import (
    AcpError,
    AcpTimeoutError,
    AgentClosedError,
    AgentExitedError,
    AgentStartError,
    ProtocolError,
    RpcError,
)
from ..launch import AgentSpec, spec_of

__all__ = ["Backend", "BackendConfig", "BackendGone", "Routed"]

logger = logging.getLogger(__name__)

ORPHAN_UPDATES_KEPT = 500
ORPHAN_SESSIONS_KEPT = 64
DEFAULT_REQUEST_TIMEOUT = 60.0
_DEFAULT = object()


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


def _every_notification(method: str) -> bool:
    """The agent's notifications are all forwarded by ``Backend._observe`` (its handler ignores them): none
    need go on to the SDK, which would make a task for each."""
    return True


class BackendGone(Exception):
    """The agent cannot answer: it never started, it exited, or it did not answer in time."""

    def __init__(self, message: str, *, agent: str, exit_code: int | None = None,
                 stderr: list[str] | None = None) -> None:
        super().__init__(message)
        self.agent = agent
        self.exit_code = exit_code
        self.stderr = list(stderr or [])

    def within(self, context: str) -> BackendGone:
        """The same failure, its message prefixed with what the proxy was doing for the client."""
        return BackendGone(f"{context}: {self}", agent=self.agent, exit_code=self.exit_code, stderr=self.stderr)

    def to_request_error(self) -> RequestError:
        """What the proxy's client gets (converted once, where the proxy answers it: ProxyServer.handle_client)."""
        data: dict[str, Any] = {"agent": self.agent, "stderr": self.stderr}
        if self.exit_code is not None:
            data["exitCode"] = self.exit_code
        return RequestError(INTERNAL_ERROR, str(self), data)


@dataclass(frozen=True)
class BackendConfig:
    """An agent as given on the command line: its name and how to start it."""

    name: str
    spec: str | list[str] | AgentSpec
    env: Mapping[str, str] = field(default_factory=dict)


class Routed(Protocol):
    """What a backend routes an agent session id to: all it reads of one (session.py's Candidate)."""

    @property
    def backend_session_id(self) -> str: ...


R = TypeVar("R", bound=Routed)

NotificationSink = Callable[["Backend", str, dict[str, Any]], None]
RequestSink = Callable[["Backend", str, dict[str, Any]], Any]
ExitSink = Callable[["Backend"], None]
FrameSink = Callable[[str, str, dict[str, Any]], None]


class Backend(Generic[R]):
    """A backend agent, started on demand and restarted after it dies.

    ``R`` is what its routes lead to (the proxy's ``Candidate``); this module knows only its
    ``backend_session_id``, so the routing table imports nothing of the sessions.

    Notifications are handed to `on_notification` synchronously from the connection's frame tap,
    in wire order; requests go to `on_request` (awaited, its result is the answer).
    """

    def __init__(self, config: BackendConfig, *, cwd: str, on_notification: NotificationSink,
                 on_request: RequestSink, on_exit: ExitSink, on_frame: FrameSink | None = None,
                 start_timeout: float = 60.0, request_timeout: float = DEFAULT_REQUEST_TIMEOUT) -> None:
        self.config = config
        self.name = config.name
        self.cwd = cwd
        self.start_timeout = start_timeout
        self.request_timeout = request_timeout
        self._on_notification = on_notification
        self._on_request = on_request
        self._on_exit = on_exit
        self._on_frame = on_frame
        self.connection: AgentConnection | None = None
        self.error: str | None = None
        self.starts = 0
        self.routes: dict[str, R] = {}
        # The registry's entry (auth_env...) when the spec names one; None for a plain command.
        self.spec: AgentSpec | None = spec_of(config.spec)
        self._shut_down = False
        # Notifications for an agent session id not registered yet (sent before its session/new answer).
        self._orphans: EarlyUpdates[tuple[str, dict[str, Any]]] = EarlyUpdates(
            per_session=ORPHAN_UPDATES_KEPT, sessions=ORPHAN_SESSIONS_KEPT)
        # A failed start is retried by the next caller; a running agent is not asked (see ensure_ready).
        self._starting: SharedStart[None] = SharedStart(lambda _ended: True, name=f"proxy-start-{self.name}")

    # --- state ---------------------------------------------------------------
    @property
    def status(self) -> str:
        """idle -> starting -> ready -> exited | failed; closed after shutdown."""
        if self._shut_down:
            return "closed"
        if self.connection is None:
            return "failed" if self.error else "idle"
        return {"created": "starting", "running": "ready", "closed": "closed"}.get(self.connection.state,
                                                                                 self.connection.state)

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def init_result(self) -> dict[str, Any]:
        return self.connection.init_result if self.connection is not None else {}

    @property
    def capabilities(self) -> dict[str, Any]:
        return self.connection.capabilities if self.connection is not None else {}

    @property
    def auth_methods(self) -> list[dict[str, Any]]:
        return self.connection.auth_methods if self.connection is not None else []

    @property
    def auth_method(self) -> str | None:
        """The auth method used on this process (by the client's authenticate, or from the environment)."""
        return self.connection.auth_method if self.connection is not None else None

    @property
    def command(self) -> list[str]:
        return self.connection.transport.command if self.connection is not None else []

    @property
    def pid(self) -> int | None:
        return self.connection.pid if self.connection is not None else None

    @property
    def exit_code(self) -> int | None:
        return self.connection.exit_code if self.connection is not None else None

    def supports(self, session_capability: str) -> bool:
        """`list`, `close`, `resume`, `delete`... from sessionCapabilities; `load` from loadSession."""
        return self.connection is not None and self.connection.supports(session_capability)

    def stderr_tail(self, lines: int = 10) -> list[str]:
        return self.connection.stderr_tail(lines) if self.connection is not None else []

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
            return self._gone(self._end_reason())
        if self.status == "closed":
            return BackendGone(f"agent '{self.name}' was shut down", agent=self.name)
        return BackendGone(self.error or f"agent '{self.name}' is not running", agent=self.name,
                           exit_code=self.exit_code, stderr=self.stderr_tail())

    def _end_reason(self) -> str:
        """Whether the agent's process exited (and its code) or its output closed: never "exited" when it did not."""
        if self.connection is None:
            return f"agent '{self.name}' is not running"
        return self.connection.end_reason()

    def _gone(self, message: str) -> BackendGone:
        tail = self.stderr_tail(10)
        text = message + (":\n  " + "\n  ".join(tail) if tail else " (it wrote nothing to stderr)")
        return BackendGone(text, agent=self.name, exit_code=self.exit_code, stderr=tail)

    # --- start ----------------------------------------------------------------
    async def ensure_ready(self, init_params: dict[str, Any], timeout: float | None = None) -> None:
        """Start and initialize the agent unless it is running; BackendGone on failure or after
        ``timeout`` (default: the start timeout).

        The start runs in its own task, so a caller that gives up (a probe's deadline) does not
        abort it: the next caller finds the agent started."""
        if self.ready:
            return
        if self._shut_down:
            raise self.failure()
        limit = self.start_timeout if timeout is None else timeout
        # Begun here, not inside wait_for: even a deadline already spent leaves the start running.
        start = self._starting.begin(lambda: self._start(init_params))
        try:
            await asyncio.wait_for(asyncio.shield(start), limit)
        except asyncio.TimeoutError:
            raise BackendGone(f"agent '{self.name}' did not start within {limit:g} s", agent=self.name,
                              stderr=self.stderr_tail()) from None
        if not self.ready:
            raise self.failure()

    async def _start(self, init_params: dict[str, Any]) -> None:
        self.error = None
        self.connection = None
        self.starts += 1
        try:
            _, transport, agent_env = transport_for(self.config.spec, cwd=self.cwd, env=self.config.env)
        except AcpError as exc:
            self.error = self._named(exc.message) + (f" ({exc.hint})" if exc.hint else "")
            return
        except ValueError as exc:
            self.error = self._named(str(exc))
            return
        # Prefixed with the agent's name, stderr also goes to the proxy's own stderr for whoever runs it.
        transport.stderr_listeners.append(lambda line: _echo.write(f"[{self.name}] {line}\n"))
        connection = self.connection = AgentConnection(
            transport, name=self.name, handler=self._handle, on_frame=self._observe,
            on_exit=lambda: self._exited(connection), spec=self.spec, env=agent_env,
            request_timeout=self.request_timeout, tapped_notifications=_every_notification)
        try:
            await connection.start(init_params, timeout=self.start_timeout)
        except AgentStartError as exc:
            self.error = self._named(exc.message)

    def _named(self, message: str) -> str:
        """``message`` saying which agent it is about, once (the connection's own errors name it already)."""
        return message if message.startswith(f"agent '{self.name}'") else f"agent '{self.name}': {message}"

    async def _exited(self, connection: AgentConnection) -> None:
        if connection is not self.connection:
            return
        # Routes go in the same step as the state change, so no request can reach a dead session
        # and a restart cannot lose the routes of the new process.
        self._on_exit(self)
        await connection.settle()
        if connection is self.connection:
            self.error = str(self._gone(self._end_reason()))

    # --- requests and frames ----------------------------------------------------
    async def request(self, method: str, params: dict[str, Any], *, timeout: Any = _DEFAULT) -> Any:
        """Send a request to the agent (deadline: ``request_timeout``; pass None for a prompt turn).

        The agent's error answer is raised as the RequestError the proxy's client will see,
        unchanged; an agent that is not running, dies or does not answer in time gives BackendGone."""
        connection = self.connection
        if not self.ready or connection is None:
            raise self.failure()
        try:
            if timeout is _DEFAULT:
                return await connection.request(method, params)
            return await connection.request(method, params, timeout=timeout)
        except RpcError as exc:
            raise RequestError(exc.code, exc.rpc_message, exc.data) from exc
        except ProtocolError as exc:  # an answer that could not be read (too large, malformed)
            raise RequestError(INTERNAL_ERROR, exc.message, {"agent": self.name}) from None
        except (AgentExitedError, AgentClosedError):
            raise self._gone(f"{connection.end_reason()} while answering {method}") from None
        except AcpTimeoutError as exc:
            raise BackendGone(exc.message, agent=self.name, stderr=self.stderr_tail()) from None

    def env_auth_method(self) -> tuple[str, str] | None:
        """``(method id, env var)`` this backend would authenticate with on its own, or None."""
        return self.connection.env_auth_method() if self.connection is not None else None

    async def authenticate(self, method_id: str, params: dict[str, Any]) -> Any:
        """The client's authenticate, for this agent's own method id."""
        result = await self.request("authenticate", {**params, "methodId": method_id})
        if self.connection is not None:
            self.connection.auth_method = method_id
        return result

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if self.ready and self.connection is not None:
            await self.connection.notify(method, params)

    async def _handle(self, method: str, params: Any, is_notification: bool) -> Any:
        if is_notification:
            return None  # already handed over, in wire order, by _observe
        return await self._on_request(self, method, params if isinstance(params, dict) else {})

    def _observe(self, direction: str, message: dict[str, Any], note: str | None) -> None:
        if not message:
            # A bad frame (not JSON, too large, not JSON-RPC): nothing to forward; the proxy's log says so.
            logger.warning("agent '%s': %s", self.name, note)
            return
        if note:  # an answer to no request, a second answer
            logger.warning("agent '%s': %s", self.name, note)
        incoming = direction == "recv"
        if self._on_frame is not None:
            self._on_frame(self.name, "in" if incoming else "out", message)
        if incoming and "method" in message and "id" not in message:
            params = message.get("params")
            self._on_notification(self, message["method"], params if isinstance(params, dict) else {})

    # --- session routes ---------------------------------------------------------
    def hold_orphan(self, session_id: str, method: str, params: dict[str, Any]) -> None:
        """Keep a notification for a session id not registered yet (sent before its session/new answer)."""
        self._orphans.hold(session_id, (method, params))

    def register(self, candidate: R) -> list[tuple[str, dict[str, Any]]]:
        """Route the agent's session id to `candidate`; returns what the agent sent for it before."""
        self.routes[candidate.backend_session_id] = candidate
        return self._orphans.take(candidate.backend_session_id)

    def unregister(self, candidate: R) -> None:
        if self.routes.get(candidate.backend_session_id) is candidate:
            del self.routes[candidate.backend_session_id]

    def forget_sessions(self) -> list[R]:
        routes = list(self.routes.values())
        self.routes.clear()
        self._orphans.clear()
        return routes

    # --- end ----------------------------------------------------------------------
    async def shutdown(self) -> None:
        """End the agent: EOF on stdin, then SIGTERM, then SIGKILL to its process group."""
        self._shut_down = True
        self._starting.cancel()
        if self.connection is not None:
            await self.connection.close()

    def kill(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """Signal the agent's whole process group (tests use it to simulate a crash)."""
        transport = self.connection.transport if self.connection is not None else None
        if isinstance(transport, StdioTransport):
            transport.process.signal_group(sig)
