"""KernelTools: the MCP server named ``kernel``, served in the kernel process over a private channel.

Design: the server is the official MCP SDK's low-level ``Server``, run as tasks on the background
loop (``_loop``), one per bridge connection, over the SDK's own stdio transport fed from the
channel's socket (channel.py). Serving in the kernel process, rather than in the bridge, keeps
the user's objects where they are: a tool answer is built on the kernel thread and only its capped
text or PNG crosses to the agent. The handlers never touch the namespace themselves: they hand
work to the kernel thread (``_loop.on_kernel_thread``) and await it, so the loop never blocks.

Every answer is made safe to send before the SDK serializes it (``safe_answer``): its text, structured
content and error messages go through ``_visible.visible``, so a lone surrogate (an undecodable file
name), a NUL or a bidi control in a value can never end the connection (the SDK's serializer refuses
lone surrogates, and the whole connection went with it).

A failure to get the SDK (its import failed, e.g. out of file descriptors) is not kept: the next bridge
connection tries again. Until one succeeds, ``problem`` says what failed, observers of
``observe_problem`` (the session panel) hear of it, and each bridge turned away prints it on its stderr.

Threads: KernelTools' fields change on the background loop (start, close, the handlers, ``problem``),
except ``policy`` which any thread may set (one attribute store; read once per call). ``ask``,
``on_event`` and problem observers are called on the background loop.

The SDK is imported through sdk.py (one import at a time, shared with the tools' clients).
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import dataclasses
import itertools
import json
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .. import _loop
from .._protocol import client_version
from .._visible import visible
from .answers import Answer, busy_message, current_shell
from .channel import CHANNEL_ENV, TOKEN_ENV, Channel, LineReader, LineWriter
from .namespace import inspect_variable, list_variables, notebook_history
from .policy import OFF_REFUSAL, READ_ONLY_REFUSAL, REJECTED, KernelToolEvent, RunRequest, parse_policy
from .runner import run_code_here, run_code_tool
from .sdk import import_server_sdk
from .secrets import watch
from .structured import result_parts
from .tools import TOOLS, ArgumentError, argument

__all__ = ["READ_TIMEOUT_S", "KernelTools", "safe_answer", "start_kernel_tools"]

log = logging.getLogger(__name__)

SERVER_NAME = "kernel"
READ_TIMEOUT_S = 10.0  # a reading tool's work on the kernel thread (a repr that hangs is stopped)
BRIDGE_MODULE = "acp_notebook.kernel_tools.bridge"

# Which bridge connection a handler serves: set by _serve, inherited by the tasks the SDK starts for it.
_CONNECTION: contextvars.ContextVar[str] = contextvars.ContextVar("kernel_tools_connection", default="local")
_CALL: contextvars.ContextVar[str] = contextvars.ContextVar("kernel_tools_call", default="")  # set by call()

Ask = Callable[[RunRequest], Awaitable["bool | str"]]  # True runs; a str is the refusal's reason
OnEvent = Callable[[KernelToolEvent], None]
OnProblem = Callable[[str], None]


class KernelTools:
    """The tools of one session's ``kernel`` MCP server, its channel and its policy.

    ``namespace``: the mapping the tools serve; by default the IPython shell's user namespace, or
    ``__main__``'s outside IPython (the same pump: work runs when the main thread waits in one of
    our blocking calls, since a plain script has no idle event loop to run it from).
    """

    def __init__(self, policy: str = "ask", ask: Ask | None = None, on_event: OnEvent | None = None,
                 run_timeout: float = 60.0, namespace: Mapping[str, Any] | None = None) -> None:
        self.policy = policy
        self.ask = ask
        self.on_event = on_event
        self.run_timeout = float(run_timeout)
        self.namespace = namespace
        self.entry: dict[str, Any] | None = None
        self._channel: Channel | None = None
        self._server: Any = None
        self._sdk_imported: asyncio.Future[None] | None = None
        self._closed = False
        self.problem = ""  # what keeps the tools from serving now ("" when nothing does); see observe_problem
        self._connections = itertools.count(1)  # numbers the bridge connections (a call's identity, call_id)
        # The MCP messages of every connection as this side saw them, for the inspector (``mcp_frames``): entries
        # {"dir": "mcp-in" (agent to kernel) | "mcp-out", "t", "msg", "connection"}; bounded, images left out.
        self.mcp_frames: collections.deque[dict[str, Any]] = collections.deque(maxlen=MCP_FRAMES_KEPT)
        self._local_calls = itertools.count(1)  # numbers the calls made in process
        self._problem_observers: list[OnProblem] = []
        # Whether the agent ever connected: bridges whose token the channel accepted, and set once an MCP
        # ``initialize`` reached the server from one. connect.py judges, once a session (``connection_judged``), an
        # agent that was offered the server and never came; a bridge that came without MCP yet gets one more turn.
        self.bridges = 0
        self.connected = threading.Event()
        self.connection_judged = False
        self.connection_deferred = False

    @property
    def policy(self) -> str:
        return self._policy

    @policy.setter
    def policy(self, value: str) -> None:
        self._policy = parse_policy(value)

    async def start(self, *, import_sdk_now: bool = True) -> dict[str, Any]:
        """Open the channel; the ACP stdio ``McpServer`` entry that starts a bridge to it.

        ``import_sdk_now=False`` leaves the MCP SDK's import (most of a second of CPU) to the first bridge that
        connects: for an agent known to connect only when a prompt needs the kernel, whose sessions mostly never do."""
        if self.policy == "off":
            raise ValueError('kernel_tools is "off": no kernel MCP server is offered (start_kernel_tools returns None)')
        if self._closed:
            raise RuntimeError("these KernelTools were closed; make new ones")
        if self.entry is not None:
            return self.entry
        channel = Channel(self._serve, ready=self._mcp_server, accepted=self._bridge_came)
        path = await channel.open()
        # An agent that connects as soon as it has the entry would wait for the SDK's import (most of a second): it
        # starts now, in a worker thread, so the first tool call need not wait for all of it.
        if import_sdk_now:
            self._import_sdk()
        self._channel = channel
        if self.namespace is None:
            # Secrets are learned after every cell from now on, not from the first tool call: a key computed
            # and deleted before the agent first looks is still masked when it shows up later (in history).
            watch(current_shell())
        _loop.on_shutdown(self.close)
        self.entry = {"name": SERVER_NAME, "command": sys.executable, "args": ["-m", BRIDGE_MODULE],
                      "env": [{"name": CHANNEL_ENV, "value": path}, {"name": TOKEN_ENV, "value": channel.token}]}
        return self.entry

    async def close(self) -> None:
        """End the channel (bridges exit), remove its socket and directory. Idempotent."""
        self._closed = True
        _loop.remove_shutdown_hook(self.close)
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.close()

    # -- serving -------------------------------------------------------------------------------

    async def _serve(self, lines_in: LineReader, lines_out: LineWriter) -> None:
        """Serve MCP on one bridge connection with the SDK's stdio transport."""
        server = await self._mcp_server()
        from mcp.server.stdio import stdio_server  # the MCP SDK, loaded when a channel is first used

        connection = str(next(self._connections))
        _CONNECTION.set(connection)
        lines_in, lines_out = _Tapped(lines_in, self._noted(connection, "mcp-in")), \
            _Tapped(lines_out, self._noted(connection, "mcp-out"))
        async with stdio_server(stdin=lines_in, stdout=lines_out) as (read, write):  # type: ignore[arg-type]
            await server.run(read, write, server.create_initialization_options())

    def _bridge_came(self) -> None:
        self.bridges += 1

    def _noted(self, connection: str, direction: str) -> Callable[[str], None]:
        """What records one line of a connection in ``mcp_frames`` (loop thread; a line that is not JSON is kept
        as its text)."""
        def note(line: str) -> None:
            try:
                msg: Any = json.loads(line)
            except ValueError:
                msg = {"unreadable": line[:MCP_TEXT_KEPT]}
            if direction == "mcp-in" and isinstance(msg, dict) and msg.get("method") == "initialize":
                self.connected.set()  # before the SDK answers it: the agent's client has begun MCP with us
            self.mcp_frames.append({"dir": direction, "t": time.time(), "msg": _lighter(msg),
                                    "connection": connection})

        return note

    def observe_problem(self, observer: OnProblem) -> Callable[[], None]:
        """Call ``observer(problem)`` on the loop each time ``problem`` changes; returns the unsubscribe."""
        self._problem_observers.append(observer)

        def unsubscribe() -> None:
            if observer in self._problem_observers:
                self._problem_observers.remove(observer)

        return unsubscribe

    def _set_problem(self, problem: str) -> None:
        if problem == self.problem:
            return
        self.problem = problem
        for observer in list(self._problem_observers):
            try:
                observer(problem)
            except Exception:  # noqa: BLE001 - a view's failure must not fail the channel
                log.exception("a kernel tools problem observer failed")

    def _import_sdk(self) -> asyncio.Future[None]:
        """The SDK's import in a worker thread (most of a second, off the loop); a failure is noted at once."""
        imported = asyncio.get_running_loop().run_in_executor(None, import_server_sdk)
        self._sdk_imported = imported

        def noted(future: asyncio.Future[None]) -> None:
            error = None if future.cancelled() else future.exception()
            if error is not None:
                self._set_problem(sdk_problem(error))

        imported.add_done_callback(noted)  # also keeps "exception never retrieved" out of the log
        return imported

    async def _mcp_server(self) -> Any:
        """The SDK's Server, made on first use; a failed import is tried again by the next caller."""
        if self._server is None:
            imported = self._sdk_imported
            if imported is None or (imported.done() and (imported.cancelled() or imported.exception() is not None)):
                imported = self._import_sdk()
            try:
                await asyncio.shield(imported)  # one caller giving up does not cancel the import for the others
            except Exception as exc:  # noqa: BLE001 - said to the bridge turned away, in the panel's words
                raise RuntimeError(sdk_problem(exc)) from exc
            from mcp.server.lowlevel import Server  # the MCP SDK: imported off the loop above, bound here

            self._server = Server(SERVER_NAME, version=_version(), on_list_tools=self._on_list_tools,
                                  on_call_tool=self._on_call_tool,
                                  instructions="Tools over the user's live Jupyter kernel: read variables, "
                                               "run code (as the user allows), propose cells.")
            self._set_problem("")
        return self._server

    async def _on_list_tools(self, _ctx: Any, _params: Any) -> Any:
        import mcp.types as types  # the MCP SDK, loaded when a channel is first used

        return types.ListToolsResult(tools=[types.Tool(name=name, description=spec["description"],
                                                       input_schema=spec["input_schema"])
                                            for name, spec in TOOLS.items()])

    async def _on_call_tool(self, ctx: Any, params: Any) -> Any:
        call_id = f"{_CONNECTION.get()}:{getattr(ctx, 'request_id', None)}"
        try:
            answer = await self.call(params.name, dict(params.arguments or {}), call_id=call_id)
        except Exception as exc:  # noqa: BLE001 - a tool's bug is its call's error, said in words the wire carries
            answer = Answer.error(f"the tool failed: {type(exc).__name__}: {exc}")
        return to_mcp_result(safe_answer(answer), params.name)

    # -- the tools -----------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any], *, call_id: str = "") -> Answer:
        """Call one tool in process: what the MCP handler does for each tools/call (the benchmark calls it directly).
        ``call_id``: the call's identity, on every event it causes (made up for a call made in process)."""
        call_id = call_id or f"local:{next(self._local_calls)}"
        _CALL.set(call_id)  # the handlers' events carry it (this task's context, and the tasks it starts)
        emit = self._emit_for(call_id)
        emit(KernelToolEvent("tool_call", tool, dict(arguments)))
        handler = getattr(self, f"_tool_{tool}", None) if tool in TOOLS else None
        error: str | None = None
        answer: Answer | None = None
        try:
            if self.policy == "off":  # switched off while the session runs: every tool refuses, the connection stays
                answer = Answer.error(OFF_REFUSAL)
            elif handler is None:
                answer = Answer.error(f"No tool named {tool!r}; the kernel tools are {', '.join(TOOLS)}.")
            else:
                try:
                    answer = await handler(arguments)
                except ArgumentError as exc:
                    answer = Answer.error(str(exc))
            error = answer.text_of() if answer.is_error else None
            return answer
        except asyncio.CancelledError:
            error = "stopped: the tool call was cancelled"
            raise
        except Exception as exc:
            error = f"failed: {type(exc).__name__}: {exc}"
            raise
        finally:
            outputs = list(answer.content) if answer is not None and not answer.is_error else []
            emit(KernelToolEvent("tool_answered", tool, dict(arguments), error=error, outputs=outputs))

    def _emit_for(self, call_id: str) -> Callable[[KernelToolEvent], None]:
        """``_emit`` with every event marked as the call ``call_id``'s."""
        return lambda event: self._emit(dataclasses.replace(event, call_id=call_id))

    async def _tool_list_variables(self, _arguments: dict[str, Any]) -> Answer:

        return await self._read(lambda: list_variables(*self._scope()), "listing the variables")

    async def _tool_inspect_variable(self, arguments: dict[str, Any]) -> Answer:

        name = argument("inspect_variable", arguments, "name", str)
        rows = argument("inspect_variable", arguments, "rows", int, 10)
        namespace_and_hidden = self._scope

        def inspect() -> Answer:
            namespace, hidden = namespace_and_hidden()
            return inspect_variable(namespace, name, rows, hidden)

        return await self._read(inspect, f"inspecting {name!r}")

    async def _tool_notebook_history(self, arguments: dict[str, Any]) -> Answer:

        n = argument("notebook_history", arguments, "n", int, 10)
        return await self._read(lambda: notebook_history(current_shell(), n), "reading the notebook's history")

    async def _tool_propose_cell(self, arguments: dict[str, Any]) -> Answer:
        code = argument("propose_cell", arguments, "code", str)
        explanation = argument("propose_cell", arguments, "explanation", str, "")
        self._emit_for(_CALL.get())(KernelToolEvent("propose_cell", "propose_cell", dict(arguments), code=code,
                                   explanation=explanation))
        return Answer.text("Proposed: the cell is shown to the user below the running cell, not run. "
                           "The user decides whether to run it.")

    async def _tool_run_code(self, arguments: dict[str, Any]) -> Answer:

        code = argument("run_code", arguments, "code", str)
        policy = self.policy
        if policy in ("read-only", "off"):
            return Answer.error(READ_ONLY_REFUSAL if policy == "read-only" else OFF_REFUSAL)
        if policy == "ask":
            if self.ask is None:
                return Answer.error('refused: nobody can be asked to allow run_code here; '
                                    '`%config AcpMagics.kernel_tools = "allow"` lets the agent run code')
            verdict = await self.ask(RunRequest(code, call_id=_CALL.get()))
            if verdict is not True:
                # A string says why nobody said yes (no one could be asked, an automatic answer); False, a "no".
                return Answer.error(f"refused: {verdict}" if isinstance(verdict, str) and verdict else REJECTED)
        return await run_code_tool(code, lambda capture: run_code_here(code, self._scope()[0], capture),
                                   self.run_timeout, self._emit_for(_CALL.get()))

    # -- helpers -------------------------------------------------------------------------------

    def _scope(self) -> tuple[Mapping[str, Any], Any]:
        """The namespace the tools serve and the names hidden from listings (kernel thread)."""
        if self.namespace is not None:
            return self.namespace, ()

        shell = current_shell()
        if shell is not None:
            return shell.user_ns, getattr(shell, "user_ns_hidden", ())
        return vars(sys.modules["__main__"]), ()

    async def _read(self, work: Callable[[], Answer], what: str) -> Answer:
        try:
            return await _loop.on_kernel_thread(work, wait_timeout=self.run_timeout, run_timeout=READ_TIMEOUT_S)
        except _loop.KernelBusy:
            return Answer.error(busy_message(self.run_timeout))
        except _loop.KernelWorkInterrupted as exc:
            if exc.reason == "timeout":
                return Answer.error(f"{what} took over {READ_TIMEOUT_S:g} s and was stopped "
                                    "(a repr or property that hangs?)")
            return Answer.error(f"{what} was interrupted")
        except Exception as exc:  # noqa: BLE001 - a failing repr or property becomes a tool error
            return Answer.error(f"{what} failed: {type(exc).__name__}: {exc}")

    def _emit(self, event: KernelToolEvent) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception:  # noqa: BLE001 - a view's failure must not fail the agent's tool call
            log.exception("the kernel tools' on_event callback failed")


MCP_FRAMES_KEPT = 1000  # MCP messages kept per session for the inspector
MCP_TEXT_KEPT = 4000  # characters of one string of an MCP message kept for it


def _lighter(value: Any) -> Any:
    """An MCP message as the inspector keeps it: image data named by size, long strings cut."""
    if isinstance(value, dict):
        if value.get("type") == "image" and isinstance(value.get("data"), str):
            return {**value, "data": f"[{len(value['data']):,} characters of base64 left out]"}
        return {key: _lighter(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_lighter(item) for item in value]
    if isinstance(value, str) and len(value) > MCP_TEXT_KEPT:
        return value[:MCP_TEXT_KEPT] + f"... [{len(value) - MCP_TEXT_KEPT:,} more characters]"
    return value


class _Tapped:
    """A connection's LineReader or LineWriter whose lines are also noted (for the inspector), unchanged."""

    def __init__(self, inner: Any, note: Callable[[str], None]) -> None:
        self._inner, self._note = inner, note

    async def __aiter__(self) -> Any:
        async for line in self._inner:
            self._note(line)
            yield line

    async def write(self, text: str) -> None:
        self._note(text)
        await self._inner.write(text)

    async def flush(self) -> None:
        await self._inner.flush()


def sdk_problem(error: BaseException) -> str:
    """What the panel and a turned-away bridge say when the SDK could not be imported."""
    return (f"the MCP SDK failed to import ({type(error).__name__}: {error}); "
            "the agent's next connection to the kernel tools tries again")


def _safe(value: Any) -> Any:
    """``value`` with every string in it (mapping keys too) made visible, so any serializer can send it."""
    if isinstance(value, str):
        return visible(value, keep_cr=True)
    if isinstance(value, Mapping):
        return {_safe(key): _safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_safe(item) for item in value]
    return value


def safe_answer(answer: Answer) -> Answer:
    """``answer`` with its text and structured content made visible (image data is base64: left as it is).

    The answers' own text is escaped where it is made; this is the last line of defence before the SDK's
    serializer, which fails the whole connection on a lone surrogate."""
    content = [block if block.get("type") == "image" else _safe(block) for block in answer.content]
    structured = _safe(answer.structured) if answer.structured is not None else None
    return Answer(content, is_error=answer.is_error, structured=structured)


def _version() -> str:
    return client_version()


def to_mcp_result(answer: Answer, tool: str | None = None) -> Any:
    """The MCP result of ``tool``'s answer: its text and images, and a ``structuredContent`` object whenever
    that hides no image from the model (structured.py says why each client needs it and what it holds)."""
    import mcp.types as types  # the MCP SDK, loaded when a channel is first used

    blocks, structured = result_parts(answer, tool)
    content: list[Any] = []
    for block in blocks:
        if block["type"] == "image":
            content.append(types.ImageContent(data=block["data"], mime_type=block["mimeType"]))
        else:
            content.append(types.TextContent(text=block["text"]))
    return types.CallToolResult(content=content, is_error=answer.is_error, structured_content=structured)


async def start_kernel_tools(policy: str = "ask", *, ask: Ask | None = None, on_event: OnEvent | None = None,
                             run_timeout: float = 60.0) -> KernelTools | None:
    """Started KernelTools for one session (its ``entry`` goes in mcpServers), or None under "off"."""
    if parse_policy(policy) == "off":
        return None
    tools = KernelTools(policy, ask=ask, on_event=on_event, run_timeout=run_timeout)
    await tools.start()
    return tools
