"""AgentConnection: one agent over one transport, from start to close.

The lifecycle shared by the client's ``Agent`` and the proxy's backends:

    created -> starting -> running -> closed    (close())
                   |           \\-> exited     (the peer ended by itself)
                   \\-> failed                 (could not start, or no valid initialize answer)

- ``start`` opens the transport and sends ``initialize``, raced against the peer's exit and
  bounded by a deadline;
- ``request`` sends one request with a deadline (default ``request_timeout``; ``None`` only
  where the caller bounds it, as a prompt turn does) and maps every lower failure to the
  AcpError tree, here and nowhere else; a session request answered "authentication
  required" is retried once after authenticating from the environment, when the agent's
  registry entry maps a variable that is set to a method the agent offers;
- every frame passes a tap, synchronously and in wire order, before the SDK dispatches it:
  the reply router applies answers to state, then ``on_frame`` sees the frame (the client
  logs it and applies notifications; the proxy forwards them); notifications the owner says
  ``on_frame`` handles in full (``tapped_notifications``) go no further;
- a frame the SDK could not take (an id that is not a string or integer, an error that is not
  ``{code, message}``, a method that is not a string: see checks.py) never reaches it: it is
  reported to ``on_frame`` as a bad frame (``{}`` with a note), and when it answers one of our
  requests that request fails at once with a ProtocolError naming the cause. So does a request
  whose answer was too large to read (transport.DroppedFrame); an agent's request too large to
  read is answered with an error, so the agent does not wait for ever;
- what this module puts into errors (stderr lines, the command, the agent's error text and
  data) and every bad-frame excerpt is masked by ``redactor`` (secret environment values);
- the peer's exit is watched: ``on_exit`` is called once, right after the state changes. A process
  that closes its stdout is gone too (it can never answer): once it has not exited within a short
  grace it is ended, and ``end_reason()`` says which of the two happened;
- a fault in ``on_frame`` (the owner's code) is logged and the frame still goes on: an exception in
  the tap would end the SDK's receive loop and leave a live agent that can never answer.

The SDK's ``Connection`` speaks JSON-RPC (ids, pending futures, dispatch of agent requests to
``handler``); nothing here parses or builds JSON-RPC beyond reading a frame's id and method.

Threads: everything runs on, and is mutated only by, the loop thread that called ``start``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

from .._process import EXIT_GRACE_S
from .._protocol import (
    AUTH_REQUIRED,
    AUTH_RETRIED_METHODS,
    CANCELLED_BY_SESSION_CANCEL,
    INTERNAL_ERROR,
    INVALID_REQUEST,
)
from .._redact import Redactor
from .._sdk import defer_sdk_package, sdk_cancels_requests
from .._timeout import within
from ..errors import (
    AcpError,
    AcpTimeoutError,
    AgentClosedError,
    AgentExitedError,
    AgentStartError,
    ProtocolError,
    ReplayMismatch,
    RpcError,
    data_details,
)
from ..launch import AgentSpec, SpecLike, auto_auth_method, resolve_spec, spec_of, terminal_login_command
from ..remedies import Remedy
from .checks import error_problem, frame_problem, init_result_problem, valid_id
from .routing import Applier, ReplyRouter
from .transport import EXCERPT_CHARS, DroppedFrame, MemoryTransport, StdioTransport, Transport

__all__ = ["AgentConnection", "ConnectionState", "FrameSink", "transport_for"]

logger = logging.getLogger(__name__)

ConnectionState = Literal["created", "starting", "running", "exited", "closed", "failed"]
# (direction "send" | "recv", the frame, a note or None). Called on the loop thread, in wire order.
FrameSink = Callable[[str, dict[str, Any], "str | None"], None]
RequestHandler = Callable[[str, Any, bool], Awaitable[Any]]
ExitHook = Callable[[], "Awaitable[None] | None"]

_DEFAULT = object()  # "use the connection's request_timeout"
# How long a process whose stdout closed may take to exit before it is taken for gone (and ended).
OUTPUT_CLOSED_GRACE_S = 2.0


# In the data of an error the connection made up itself, standing in for an answer it could not
# read: request() raises a ProtocolError with this text instead of an RpcError from the agent.
STAND_IN_KEY = "acpNotebookUnreadableAnswer"


def transport_for(spec: SpecLike | Transport | Any, *, cwd: str, env: Mapping[str, str] | None = None,
                  inherit_env: bool = True) -> tuple[str, Transport, dict[str, str]]:
    """``(name, transport, the agent's environment)`` for anything ``acpnb.start`` accepts.

    A registry name, a command line or argv list, or an AgentSpec run as a subprocess. A
    Transport is used as it is. Any other object is taken as an agent object (or class) with
    the SDK's agent methods and served in memory.
    """
    if isinstance(spec, Transport):
        return spec.description, spec, dict(os.environ)
    if isinstance(spec, (str, list, tuple, AgentSpec)):
        name, argv, extra_env = resolve_spec(spec, env)
        agent_env = dict(os.environ) if inherit_env else _sdk_default_environment()
        agent_env.update(extra_env)
        known = spec_of(spec)
        exit_grace = known.exit_grace if known is not None else EXIT_GRACE_S
        return name, StdioTransport(argv, cwd=cwd, env=agent_env, exit_grace=exit_grace), agent_env
    agent = spec() if inspect.isclass(spec) else spec
    if not callable(getattr(agent, "initialize", None)):
        raise AgentStartError(
            f"cannot start {spec!r}: not an agent name, a command or an agent object",
            hint="Pass a registered name ('demo'), a command list such as ['python', 'agent.py'], or an object "
                 "with the SDK's agent methods (initialize, new_session, prompt).")
    name = getattr(agent, "name", None) or type(agent).__name__
    return str(name), MemoryTransport(agent), dict(os.environ)


NPX_RUNNERS = frozenset({"npx", "bunx", "pnpx"})


def _silent_start_remedy(command: Sequence[str]) -> Remedy:
    """What to do about an agent that did not answer initialize: a first npx start is slow (a download);
    any other agent may not speak ACP, or may need longer."""
    return Remedy("slow_start", {"npx": bool(command) and os.path.basename(command[0]) in NPX_RUNNERS})


def auth_remedy(spec: AgentSpec | None, auth_methods: Sequence[Mapping[str, Any]], command: Sequence[str]) -> Remedy:
    """The facts of an "authentication required" answer (remedies.py words them per surface): what the agent's
    registry entry says it needs, the methods it offered, and its terminal logins as command lines."""
    methods = [m for m in auth_methods if isinstance(m, Mapping) and m.get("id")]
    facts: dict[str, Any] = {
        "methods": [str(m["id"]) for m in methods if m.get("type") != "terminal"],
        "terminal": [terminal_login_command(command, m) for m in methods if m.get("type") == "terminal"]}
    if spec is not None and (spec.login_hint or spec.key_vars):
        facts.update(agent=spec.name, needs=spec.needs_key_message())
    return Remedy("authenticate", facts)


def _sdk_default_environment() -> dict[str, str]:
    defer_sdk_package()  # the SDK on first use, without its schema models (see _sdk.py)
    from acp.transports import default_environment

    return dict(default_environment())


class AgentConnection:
    """One agent over one transport (see the module docstring)."""

    def __init__(self, transport: Transport, *, name: str, handler: RequestHandler,
                 on_frame: FrameSink | None = None, on_exit: ExitHook | None = None,
                 spec: AgentSpec | None = None, env: Mapping[str, str] | None = None,
                 request_timeout: float | None = 60.0,
                 tapped_notifications: Callable[[str], bool] | None = None) -> None:
        self.transport = transport
        self.name = name
        self.request_timeout = request_timeout
        self.state: ConnectionState = "created"
        self.init_result: dict[str, Any] = {}
        self.router = ReplyRouter()
        # The registry entry and environment, for authenticating from a key in the environment.
        self.spec = spec
        self.env = dict(env or {})
        # Masks the environment's secret values in what this connection writes into errors and notes.
        self.redactor = Redactor.from_env(self.env)
        self.auth_method: str | None = None
        self.started_at: float | None = None
        self._handler = handler
        self._on_frame = on_frame
        self._on_exit = on_exit
        # Notifications (by method) that ``on_frame`` applies in full, for which ``handler`` does nothing:
        # they stop at the tap. Handed to the SDK, each would cost a task of its own just to call the
        # handler (a third of a streamed chunk's cost in the client).
        self._tapped_notifications = tapped_notifications
        self._conn: Any = None  # acp.connection.Connection, made in start()
        self._exit_watch: asyncio.Task[None] | None = None
        self._env_auth: asyncio.Future[None] | None = None
        # Set when the peer's output reached its end (its stdout closed): it can never answer again.
        self._output_closed: asyncio.Event | None = None

    # --- what the agent said about itself -----------------------------------------
    @property
    def capabilities(self) -> dict[str, Any]:
        return dict(self.init_result.get("agentCapabilities") or {})

    @property
    def auth_methods(self) -> list[dict[str, Any]]:
        return [m for m in self.init_result.get("authMethods") or [] if isinstance(m, dict)]

    @property
    def agent_info(self) -> dict[str, Any]:
        return dict(self.init_result.get("agentInfo") or {})

    @property
    def protocol_version(self) -> int | None:
        return self.init_result.get("protocolVersion")

    def supports(self, capability: str) -> bool:
        """``load`` (loadSession) or a ``sessionCapabilities`` entry (list, close, resume, delete...)."""
        caps = self.capabilities
        if capability in ("load", "loadSession"):
            return bool(caps.get("loadSession"))
        return (caps.get("sessionCapabilities") or {}).get(capability) is not None

    @property
    def pid(self) -> int | None:
        return self.transport.pid

    @property
    def exit_code(self) -> int | None:
        return self.transport.exit_code

    def stderr_tail(self, lines: int = 20) -> list[str]:
        """The agent's last stderr lines, secrets masked (they go into error messages and views)."""
        return [self.redactor.text(line) for line in self.transport.stderr_tail(lines)]

    # --- start ---------------------------------------------------------------------
    async def start(self, init_params: dict[str, Any], *, timeout: float | None) -> dict[str, Any]:
        """Open the transport and complete ``initialize``; AgentStartError on any failure."""
        self.state = "starting"
        self.started_at = time.monotonic()
        try:
            await self.transport.open()
        except OSError as exc:
            self.state = "failed"
            raise AgentStartError(f"cannot run {self._command()[0]!r}: {exc.strerror or exc}",
                                  command=self._command(),
                                  hint="Check that the program is installed and on PATH, and that cwd exists.",
                                  ) from exc
        # Imported after the agent was spawned, not before: the first start in a process pays for the
        # SDK's connection module (about 0.1 s; its schema models are not loaded, see _sdk.py), and the
        # agent boots on another core meanwhile. The SDK's package is set up for that here, on the first
        # start, not when this package is imported.
        defer_sdk_package()
        from acp.connection import Connection  # the acp SDK, on the first start (see above)

        self.transport.on_bad_frame = self._bad_frame
        self._output_closed = asyncio.Event()
        self._conn = Connection(self._handler, _Tap(self.transport, self))
        self._exit_watch = asyncio.create_task(self._watch_exit(), name=f"acp-exit-{self.name}")
        try:
            result = await self._initialize(init_params, timeout)
        except BaseException:
            self.state = "failed"
            await self._shut()
            raise
        self.init_result = result
        self.state = "running"
        return result

    async def _initialize(self, params: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        from acp.exceptions import RequestError  # the acp SDK, loaded on the first start (see start)

        request = asyncio.ensure_future(self._conn.send_request("initialize", params))
        assert self.transport.ended is not None
        ended = asyncio.ensure_future(self.transport.ended.wait())
        try:
            done, _ = await asyncio.wait({request, ended}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
            if not request.done():
                request.cancel()
        if request in done and not request.cancelled():
            try:
                result = request.result()
            except RequestError as exc:
                if isinstance(exc.data, dict) and STAND_IN_KEY in exc.data:
                    raise AgentStartError(f"agent '{self.name}' answered initialize with {exc.data[STAND_IN_KEY]}",
                                          command=self._command(), stderr_tail=self.stderr_tail()) from None
                error = self._rpc_error(exc, "initialize")
                details = data_details(error.data)
                raise AgentStartError(f"agent '{self.name}' refused initialize: {error.rpc_message}"
                                      + (f" ({details})" if details else ""), command=self._command(),
                                      stderr_tail=self.stderr_tail()) from exc
            except ConnectionError:
                done = {ended}
            else:
                return self._checked_init(result)
        if done:
            await self.transport.settle()
            raise AgentStartError(
                f"agent '{self.name}' exited with code {self.exit_code} before answering initialize",
                command=self._command(), exit_code=self.exit_code, stderr_tail=self.stderr_tail(),
                hint="Is this an ACP agent? Some need a flag (e.g. `gemini --acp`) or a login first.")
        raise AgentStartError(
            f"agent '{self.name}' did not answer initialize within {timeout:g} s",
            command=self._command(), stderr_tail=self.stderr_tail(), remedy=_silent_start_remedy(self._command()))

    def _checked_init(self, result: Any) -> dict[str, Any]:
        problem = init_result_problem(result)
        if problem is not None:
            raise AgentStartError(f"agent '{self.name}' sent an invalid initialize result: {problem}",
                                  command=self._command())
        return dict(result)

    def _command(self) -> list[str]:
        argv = getattr(self.transport, "argv", None)
        return [self.redactor.text(str(part)) for part in argv] if argv else [self.transport.description]

    # --- requests ------------------------------------------------------------------------
    async def request(self, method: str, params: dict[str, Any], *, apply: Applier | None = None,
                      timeout: Any = _DEFAULT, auth_retry: bool = True) -> Any:
        """Send a request and return the agent's result; ``apply`` (see routing) runs in wire order.

        Raises RpcError (the agent's error answer), AgentExitedError / AgentClosedError (no agent
        to answer), AcpTimeoutError (no answer within the deadline).
        """
        from acp.exceptions import RequestError  # the acp SDK, loaded on the first start (see start)

        self._check_usable(method)
        deadline = self.request_timeout if timeout is _DEFAULT else timeout
        sent_at = time.monotonic()
        slot = None
        try:
            with self.router.sending(apply) as slot:
                sent = self._conn.send_request(method, params)
                if method in CANCELLED_BY_SESSION_CANCEL:
                    sent = _left_to_session_cancel(sent)
                return await (sent if deadline is None else within(sent, deadline))
        except (asyncio.CancelledError, asyncio.TimeoutError) as exc:
            if slot is not None:
                self._cancel_request(method, slot.request_id)
            if isinstance(exc, asyncio.CancelledError):
                raise
            strays = self.router.strays_since(sent_at)
            meanwhile = f"; meanwhile it sent {'; '.join(strays)}" if strays else ""
            raise AcpTimeoutError(f"agent '{self.name}' did not answer {method} within {deadline:g} s{meanwhile}") \
                from None
        except RequestError as exc:
            if isinstance(exc.data, dict) and STAND_IN_KEY in exc.data:
                raise ProtocolError(f"agent '{self.name}' answered {method} with {exc.data[STAND_IN_KEY]}",
                                    remedy=Remedy("see_log")) from None
            error = self._rpc_error(exc, method)
            if error.auth_required and auth_retry and method in AUTH_RETRIED_METHODS \
                    and await self.authenticate_from_env():
                return await self.request(method, params, apply=apply, timeout=timeout, auth_retry=False)
            raise error from exc
        except ConnectionError as exc:
            raise await self._gone_error(f"while waiting for {method}") from exc

    def _cancel_request(self, method: str, request_id: Any) -> None:
        """The caller gave up on a request: tell the agent with ``$/cancel_request`` so it can stop working on it.

        Not for prompts (``CANCELLED_BY_SESSION_CANCEL``), and not when the SDK sends it itself (its 1.x line
        does, when a request is cancelled)."""
        if request_id is None or method in CANCELLED_BY_SESSION_CANCEL or self.state != "running" \
                or sdk_cancels_requests():
            return
        task = asyncio.ensure_future(self.notify("$/cancel_request", {"requestId": request_id}))
        task.add_done_callback(lambda done: done.cancelled() or done.exception())

    def _rpc_error(self, exc: Any, method: str) -> RpcError:
        message = self.redactor.text(str(exc.args[0] if exc.args else exc))
        if isinstance(exc.data, dict) and ReplayMismatch.DATA_KEY in exc.data:  # a replay that diverged
            return ReplayMismatch(message, where=exc.data[ReplayMismatch.DATA_KEY], method=method)
        fix = auth_remedy(self.spec, self.auth_methods, self._command()) if exc.code == AUTH_REQUIRED else None
        return RpcError(exc.code, message, self.redactor.data(exc.data), method=method, remedy=fix)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification; silently dropped when the agent is not running (nothing awaits it)."""
        if self.state == "running" and self._conn is not None:
            with contextlib.suppress(ConnectionError):
                await self._conn.send_notification(method, params)

    def _check_usable(self, method: str) -> None:
        if self.state == "running" or (self.state == "starting" and method == "initialize"):
            return
        if self.state == "closed":
            raise AgentClosedError(f"agent '{self.name}' is closed; {method} was not sent")
        if self.state == "exited":
            raise AgentExitedError(f"agent '{self.name}' has exited (code {self.exit_code}); {method} was not sent",
                                   exit_code=self.exit_code, stderr_tail=self.stderr_tail())
        raise AgentClosedError(f"agent '{self.name}' is not running ({self.state}); {method} was not sent")

    async def _gone_error(self, doing: str) -> AcpError:
        if self.state == "closed":
            return AgentClosedError(f"agent '{self.name}' was closed {doing}")
        await self.settle()
        return AgentExitedError(f"{self.end_reason()} {doing}", exit_code=self.exit_code,
                                stderr_tail=self.stderr_tail())

    def end_reason(self) -> str:
        """How the agent went, in words: it exited (with its code), it closed its output while its process
        still ran, or (a fault of ours, logged) the connection failed while it ran."""
        if self.exit_code is not None:
            return f"agent '{self.name}' exited with code {self.exit_code}"
        if self.state == "closed":
            return f"agent '{self.name}' was closed"
        running = f"its process (pid {self.pid}) was still running" if self.pid is not None else "it had not ended"
        if self._output_closed is not None and self._output_closed.is_set():
            return f"agent '{self.name}' closed its output (stdout); {running}"
        return f"the connection to agent '{self.name}' failed ({running}; the log says why)"

    # --- authentication -----------------------------------------------------------------
    async def authenticate(self, method_id: str) -> dict[str, Any]:
        result = await self.request("authenticate", {"methodId": method_id}, auth_retry=False)
        self.auth_method = method_id
        return result if isinstance(result, dict) else {}

    def env_auth_method(self) -> tuple[str, str] | None:
        """``(method id, variable)`` this connection would authenticate with on its own, or None."""
        return auto_auth_method(self.spec, self.auth_methods, self.env)

    async def authenticate_from_env(self) -> bool:
        """Authenticate with the method whose key is in the agent's environment; True when done.

        Only when the agent asks, so a login it already has is never replaced by the key. One
        attempt per connection, shared by concurrent callers (even if they all give up); a
        refusal is raised again to every later caller as an AUTH_REQUIRED error naming the key.
        """
        chosen = self.env_auth_method()
        if chosen is None:
            return False
        if self._env_auth is None:
            self._env_auth = asyncio.ensure_future(self._authenticate_with_key(*chosen))
            self._env_auth.add_done_callback(lambda task: task.cancelled() or task.exception())
        await asyncio.shield(self._env_auth)
        return True

    async def _authenticate_with_key(self, method_id: str, env_var: str) -> None:
        try:
            await self.authenticate(method_id)
        except RpcError as exc:
            data = {"agent": self.name, "methodId": method_id, "envVar": env_var, "agentError": exc.data}
            raise RpcError(AUTH_REQUIRED, f"agent '{self.name}' refused authenticate {method_id!r} (with the key in "
                                          f"${env_var}): {exc.rpc_message}", data, method="authenticate",
                           remedy=auth_remedy(self.spec, self.auth_methods, self._command())) from exc

    # --- frames -------------------------------------------------------------------------
    def _tap(self, direction: str, message: dict[str, Any]) -> None:
        note = self.router.on_receive(message) if direction == "recv" else self.router.on_send(message)
        self._observe(direction, message, note)

    def _observe(self, direction: str, message: dict[str, Any], note: str | None) -> None:
        """``on_frame``, whose fault is logged, never raised: raised in the tap it would end the SDK's receive
        loop, and the agent, still running, could never answer again."""
        if self._on_frame is None:
            return
        try:
            self._on_frame(direction, message, note)
        except Exception:  # noqa: BLE001 - see the docstring
            logger.exception("agent '%s': handling a frame failed; the frame goes on", self.name)

    def _stops_at_tap(self, message: dict[str, Any]) -> bool:
        tapped = self._tapped_notifications
        if tapped is None or "id" in message or "method" not in message:
            return False
        return tapped(message["method"])

    def _bad_frame(self, reason: str, excerpt: str) -> None:
        self._observe("recv", {}, f"bad frame ({reason}): {self.redactor.text(excerpt)}")

    def _screened(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The frame to hand to the SDK: ``message`` itself, a stand-in error for the request a bad
        answer was meant for, or None (dropped, already reported)."""
        problem = frame_problem(message)
        if problem is None:
            return message
        excerpt = json.dumps(message, ensure_ascii=False, default=str)[:EXCERPT_CHARS]
        self._bad_frame(problem, excerpt)
        request_id = message.get("id")
        if "method" not in message and "error" in message and valid_id(request_id) \
                and error_problem(message["error"]) is not None:
            return self._stand_in(request_id, f"a malformed error ({problem})")
        return None

    def _stand_in(self, request_id: Any, cause: str) -> dict[str, Any]:
        """An error answer for our request ``request_id``, standing in for one we could not read."""
        stand_in = {"jsonrpc": "2.0", "id": request_id,
                    "error": {"code": INTERNAL_ERROR, "message": cause, "data": {STAND_IN_KEY: cause}}}
        self.router.on_receive(stand_in)  # the request is answered: a late real answer is noted as a second one
        return stand_in

    async def _dropped(self, frame: DroppedFrame, tap: _Tap) -> dict[str, Any] | None:
        """A frame too large to read (already reported by the transport): fail the request it answered
        at once, or answer the agent's request with an error; None when there is nothing to answer."""
        head = frame.head
        if head.kind == "response":
            return self._stand_in(head.id, f"{frame.reason}, which was dropped")
        message = f"the client dropped this {head.method or ''} request: it was {frame.reason}"
        refusal = {"jsonrpc": "2.0", "id": head.id, "error": {"code": INVALID_REQUEST, "message": message}}
        with contextlib.suppress(ConnectionError, OSError):
            await tap.send(refusal)
        return None

    # --- exit and close ------------------------------------------------------------------
    async def _watch_exit(self) -> None:
        assert self.transport.ended is not None and self._output_closed is not None
        ended = asyncio.ensure_future(self.transport.ended.wait())
        output = asyncio.ensure_future(self._output_closed.wait())
        try:
            await asyncio.wait({ended, output}, return_when=asyncio.FIRST_COMPLETED)
            if not ended.done():  # its output closed: an exit usually follows at once
                await asyncio.wait({ended}, timeout=OUTPUT_CLOSED_GRACE_S)
        finally:
            ended.cancel()
            output.cancel()
        if self.state not in ("running", "starting"):
            return
        self.state = "exited"
        lingering = not self.transport.ended.is_set()
        try:
            if self._on_exit is not None:
                outcome = self._on_exit()
                if inspect.isawaitable(outcome):
                    await outcome
        finally:
            if lingering:  # a process that closed its output but lives on can never answer: end it
                with contextlib.suppress(Exception):
                    await self.transport.close()

    async def settle(self) -> None:
        """Let the exit code and the last stderr lines arrive (bounded), for error messages."""
        await self.transport.settle()

    async def close(self) -> None:
        """End the agent: close the connection, then the transport (its whole process group)."""
        if self.state in ("closed", "created"):
            self.state = "closed"
            return
        self.state = "closed"
        await self._shut()

    async def _shut(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.close(), 2.0)
        with contextlib.suppress(Exception):
            await self.transport.close()
        if self._exit_watch is not None:
            self._exit_watch.cancel()


def _left_to_session_cancel(sent: Awaitable[Any]) -> Awaitable[Any]:
    """A prompt's request, kept from the SDK's own cancellation (see ``CANCELLED_BY_SESSION_CANCEL``): its answer,
    the "cancelled" stop reason, is read by the request's ``apply``. The SDK's 1.x line sends ``$/cancel_request``
    when the awaiting task is cancelled, and the agent's own wrap-up (saving the turn) would be cut short."""
    task = asyncio.ensure_future(sent)
    task.add_done_callback(lambda done: done.cancelled() or done.exception())  # an answer nobody awaits now
    return asyncio.shield(task)


class _Tap:
    """The SDK's message transport, wrapping ours: every frame passes the connection's tap first.

    ``send`` runs in the sending task, before the frame is written (so the reply router files a
    request before its answer can arrive); ``receive`` runs in the SDK's receive loop, before
    the SDK dispatches the frame to a task of its own (so state changes keep wire order).
    """

    def __init__(self, transport: Transport, connection: AgentConnection) -> None:
        self._transport = transport
        self._connection = connection

    async def send(self, message: dict[str, Any]) -> None:
        self._connection._tap("send", message)
        await self._transport.send(message)

    async def receive(self) -> dict[str, Any] | None:
        while True:
            message = await self._transport.receive()
            if message is None:
                closed = self._connection._output_closed
                if closed is not None and self._connection.pid is not None:  # a process's stdout closed
                    closed.set()
                return None
            if isinstance(message, DroppedFrame):
                screened = await self._connection._dropped(message, self)
            else:
                screened = self._connection._screened(message)
                if screened is message:
                    self._connection._tap("recv", message)
                    if self._connection._stops_at_tap(message):
                        continue
            if screened is not None:
                return screened

    async def close(self) -> None:
        """The SDK closes its side only; the peer is ended by AgentConnection (its state decides how)."""

