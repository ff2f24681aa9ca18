"""Transports: how JSON-RPC messages reach one agent, and that agent's own life.

The seam under ``AgentConnection``, as httpx has one under its client. A transport moves
whole messages (dicts): it is the SDK's message-level transport (``send`` / ``receive`` /
``close``, which ``acp.connection.Connection`` accepts in place of byte streams). It also owns
its peer: it starts it (``open``), ends it (``close``) and says when and how it ended
(``ended``, ``exit_code``, ``stderr_tail``), so that errors can name the cause.

- ``StdioTransport``: an agent subprocess, newline-delimited JSON over its pipes. The framing
  is ours rather than the SDK's ``NdjsonTransport`` so that every line the agent writes (not
  JSON, not an object, too long) is reported to ``on_bad_frame`` and shows in the frame log
  instead of vanishing into a logger. A line over the frame limit is skipped as it streams in;
  when its first bytes show an answer or a request with an id, ``receive`` returns a
  ``DroppedFrame`` saying so, and the connection fails that request at once (or answers the
  agent's request with an error) instead of leaving someone waiting for its deadline.
- ``MemoryTransport``: an agent object living in this process (the demo agent, or one a
  learner wrote in a cell), served by the SDK's ``AgentSideConnection`` on a thread and loop of
  its own, so an agent that blocks cannot freeze the client's loop. Messages cross as JSON
  text, as on a real wire: nothing is shared between the two sides.
- ``acp_notebook.record.ReplayTransport`` answers from a recording.

Threads: every method runs on the loop thread of the connection that uses the transport;
``MemoryTransport`` additionally owns one thread of its own, where the agent runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._process import STDIO_LIMIT, AgentProcess

__all__ = ["FRAME_LIMIT", "DroppedFrame", "FrameHead", "MemoryTransport", "StdioTransport", "Transport", "frame_head",
           "request_id_in"]

logger = logging.getLogger(__name__)

# The largest frame read whole; a longer line is dropped (and reported) rather than buffered.
FRAME_LIMIT = STDIO_LIMIT
# How much of a bad frame is kept for the log.
EXCERPT_CHARS = 300

BadFrameSink = Callable[[str, str], None]  # (why it is bad, an excerpt of it)


class Transport:
    """The interface every transport implements (see the module docstring)."""

    description: str = "agent"
    pid: int | None = None

    def __init__(self) -> None:
        self.ended: asyncio.Event | None = None  # set when the peer is gone; made in open(), on the loop
        self.on_bad_frame: BadFrameSink | None = None

    @property
    def exit_code(self) -> int | None:
        return None

    def stderr_tail(self, lines: int = 20) -> list[str]:
        return []

    async def open(self) -> None:
        """Start the peer. Raises OSError when it cannot be started."""
        raise NotImplementedError

    async def send(self, message: dict[str, Any]) -> None:
        """Deliver one message; ConnectionError when the peer is gone."""
        raise NotImplementedError

    async def receive(self) -> dict[str, Any] | None:
        """The next message from the peer; None at end of stream."""
        raise NotImplementedError

    async def close(self) -> None:
        """End the peer (idempotent)."""
        raise NotImplementedError

    async def settle(self) -> None:
        """Give the peer's exit code and last words a moment to arrive (for error messages)."""

    def _bad_frame(self, reason: str, excerpt: str) -> None:
        if self.on_bad_frame is not None:
            self.on_bad_frame(reason, excerpt[:EXCERPT_CHARS])


def _loads(line: bytes) -> Any:
    """``json.loads`` of one frame. A line that starts as UTF-8 JSON does (what NDJSON is) is decoded as
    UTF-8 at once: given bytes, json.loads first sniffs for UTF-16 and UTF-32, a cost on every chunk."""
    if line[:1] == b"{" and line[1:2] != b"\x00":
        return json.loads(line.decode("utf-8", "surrogatepass"))
    return json.loads(line)


def encode(message: Mapping[str, Any]) -> bytes:
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


class StdioTransport(Transport):
    """An agent subprocess speaking newline-delimited JSON on stdin/stdout (stderr drained)."""

    def __init__(self, argv: Sequence[str], *, cwd: str, env: Mapping[str, str],
                 frame_limit: int = FRAME_LIMIT) -> None:
        super().__init__()
        self.argv = list(argv)
        self.description = shlex.join(self.argv)
        self.process = AgentProcess(self.argv, cwd=cwd, env=env)
        self.frame_limit = frame_limit

    @property
    def pid(self) -> int | None:  # type: ignore[override]
        return self.process.pid

    @property
    def exit_code(self) -> int | None:
        return self.process.exit_code

    @property
    def stderr_listeners(self) -> list[Callable[[str], None]]:
        return self.process.stderr_listeners

    def stderr_tail(self, lines: int = 20) -> list[str]:
        return self.process.stderr_tail(lines)

    async def open(self) -> None:
        await self.process.spawn()
        self.ended = self.process.exited

    async def send(self, message: dict[str, Any]) -> None:
        stdin = self.process.stdin
        if stdin.is_closing():
            raise ConnectionError("the agent's stdin is closed")
        stdin.write(encode(message))
        await stdin.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if line is None:
                return None
            if isinstance(line, DroppedFrame):
                return line
            text = line.strip()
            if not text:
                continue
            try:
                message = _loads(text)
            except ValueError:
                self._bad_frame("not JSON", text.decode("utf-8", "replace"))
                continue
            except RecursionError:  # the decoder gives up on deep nesting this way, not with a ValueError
                self._bad_frame("JSON nested too deeply", text[:EXCERPT_CHARS].decode("utf-8", "replace"))
                continue
            if not isinstance(message, dict):
                self._bad_frame("not a JSON object", text.decode("utf-8", "replace"))
                continue
            return message

    async def _read_line(self) -> bytes | DroppedFrame | None:
        """One line, or None at EOF. A line longer than the frame limit is skipped (and reported)
        while it streams in, so it never sits whole in memory; b"" stands for it, or a
        DroppedFrame when its first bytes name a request or an answer with an id."""
        reader = self.process.stdout
        head = b""
        skipped = 0
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if skipped:
                    self._report_oversized(head, skipped + len(exc.partial))
                    return None
                return exc.partial or None
            except asyncio.LimitOverrunError as exc:
                chunk = await reader.readexactly(exc.consumed)
                head = head or chunk[:EXCERPT_CHARS * 4]
                skipped += len(chunk)
                continue
            if skipped:
                return self._report_oversized(head, skipped + len(line))
            if len(line) > self.frame_limit:
                return self._report_oversized(line[:EXCERPT_CHARS * 4], len(line))
            return line

    def _report_oversized(self, head: bytes, size: int) -> bytes | DroppedFrame:
        reason = f"a {size / 2**20:.1f} MiB line, over the {self.frame_limit / 2**20:g} MiB frame limit"
        excerpt = head.decode("utf-8", "replace")
        self._bad_frame(f"{reason}: dropped", excerpt)
        found = frame_head(excerpt)
        if found.kind in ("response", "request") and found.id is not None:
            return DroppedFrame(found, reason)
        return b""

    async def close(self) -> None:
        await self.process.terminate()

    async def settle(self) -> None:
        await self.process.settle()


@dataclass(frozen=True)
class FrameHead:
    """What the first bytes of a frame say about it (for a frame too large to parse)."""

    kind: Literal["response", "request", "notification"] | None
    id: int | str | None = None
    method: str | None = None


# One leading member of a JSON-RPC object whose value is a scalar: "jsonrpc", "id" or "method".
_LEADING_MEMBER = re.compile(r'\s*"(jsonrpc|id|method)"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*"|null)\s*,')
# The member after them, whose value is the (large) rest: it tells an answer from a request.
_BODY_MEMBER = re.compile(r'\s*"(result|error|params)"\s*:')


def frame_head(excerpt: str) -> FrameHead:
    """Read ``jsonrpc``, ``id`` and ``method`` from the start of a frame's text, up to its body.

    Only the leading members are read (the SDKs write them first); a frame whose first bytes
    do not look like that gives ``FrameHead(None)``: nothing is guessed.
    """
    text = excerpt.lstrip()
    if not text.startswith("{"):
        return FrameHead(None)
    position, members = 1, {}
    while (match := _LEADING_MEMBER.match(text, position)) is not None:
        members[match.group(1)] = json.loads(match.group(2))
        position = match.end()
    body = _BODY_MEMBER.match(text, position)
    if body is None:
        return FrameHead(None)
    request_id, method = members.get("id"), members.get("method")
    if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
        request_id = None
    if body.group(1) == "params" or isinstance(method, str):
        kind: Literal["response", "request", "notification"] = "request" if "id" in members else "notification"
        return FrameHead(kind, request_id, method if isinstance(method, str) else None)
    return FrameHead("response", request_id)


def request_id_in(excerpt: str) -> int | str | None:
    """The ``id`` of a response, read from the start of its text (for a frame too large to parse)."""
    head = frame_head(excerpt)
    return head.id if head.kind == "response" else None


class DroppedFrame(dict):  # type: ignore[type-arg]
    """Returned by ``receive`` in place of a request or answer too large to read.

    A distinct type, not a marker key: nothing an agent writes can decode to it. The
    connection turns it into an error for the request it answered, or an error answer to
    the agent's request; it never reaches the SDK or the frame log as it is.
    """

    def __init__(self, head: FrameHead, reason: str) -> None:
        super().__init__()
        self.head = head
        self.reason = reason


class _AgentThreadLogs(logging.Filter):
    """Keeps what in-memory agents log for their ``stderr_tail`` instead of printing it.

    The SDK reports an exception raised in an agent's handler with ``logging.exception`` on the
    root logger; for an agent in this process that would print a traceback into whichever
    notebook cell runs. Records from an agent's thread go to that agent's last words instead
    (the error answer the client receives is the agent's error either way).
    """

    def __init__(self) -> None:
        super().__init__()
        self.sinks: dict[int, list[str]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        sink = self.sinks.get(record.thread) if record.thread is not None else None
        if sink is None:
            return True
        sink.append(record.getMessage())
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            sink.append(f"{type(error).__name__}: {error}")
        del sink[:-EXCERPT_CHARS]
        return False


_thread_logs = _AgentThreadLogs()
logging.getLogger().addFilter(_thread_logs)


class MemoryTransport(Transport):
    """An agent object served in this process by the SDK's ``AgentSideConnection``.

    ``agent`` is what ``AgentSideConnection`` accepts: an object with the SDK's agent methods
    (``initialize``, ``new_session``, ``prompt``...) or a callable that receives the connection
    and returns one. It runs on a thread with its own event loop.
    """

    def __init__(self, agent: Any, *, description: str | None = None) -> None:
        super().__init__()
        self.agent = agent
        self.description = description or f"in-memory {type(agent).__name__}"
        self._inbox: asyncio.Queue[str | None] | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._agent_loop: asyncio.AbstractEventLoop | None = None
        self._agent_inbox: asyncio.Queue[str | None] | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._closed = False
        self._last_words: list[str] = []

    def stderr_tail(self, lines: int = 20) -> list[str]:
        return self._last_words[-lines:]

    async def open(self) -> None:
        self._client_loop = asyncio.get_running_loop()
        self._inbox = asyncio.Queue()
        self.ended = asyncio.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True,
                                        name=f"acp-memory-agent-{type(self.agent).__name__}")
        self._thread.start()
        await asyncio.get_running_loop().run_in_executor(None, self._ready.wait)

    def _serve(self) -> None:
        """The agent's thread: its own loop, the SDK's agent side, until the client closes."""
        loop = asyncio.new_event_loop()
        self._agent_loop = loop
        _thread_logs.sinks[threading.get_ident()] = self._last_words
        try:
            loop.run_until_complete(self._agent_side())
        finally:
            _thread_logs.sinks.pop(threading.get_ident(), None)
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._stopped.set()
            if self._client_loop is not None and not self._client_loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    self._client_loop.call_soon_threadsafe(self._peer_gone)

    async def _agent_side(self) -> None:
        import acp

        self._agent_inbox = asyncio.Queue()
        end = _AgentEnd(self._agent_inbox, self._to_client)
        serving = asyncio.ensure_future(acp.run_agent(self.agent, end, use_unstable_protocol=True))
        self._ready.set()
        closed = asyncio.ensure_future(end.closed.wait())
        await asyncio.wait({serving, closed}, return_when=asyncio.FIRST_COMPLETED)
        closed.cancel()
        if not serving.done():
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(serving, 2.0)
        elif not serving.cancelled() and serving.exception() is not None:
            # What a subprocess would have printed before dying: the client's errors quote it.
            error = serving.exception()
            self._last_words.extend(f"{type(error).__name__}: {error}".splitlines())

    def _to_client(self, text: str | None) -> None:
        """Called on the agent's thread: hand a message (or EOF) to the client's loop."""
        loop = self._client_loop
        if loop is not None and not loop.is_closed() and self._inbox is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._inbox.put_nowait, text)

    def _peer_gone(self) -> None:
        assert self._inbox is not None and self.ended is not None
        self._inbox.put_nowait(None)
        self.ended.set()

    async def send(self, message: dict[str, Any]) -> None:
        loop, inbox = self._agent_loop, self._agent_inbox
        if self._closed or self._stopped.is_set() or loop is None or inbox is None:
            raise ConnectionError("the in-memory agent has stopped")
        text = json.dumps(message, ensure_ascii=False)
        try:
            loop.call_soon_threadsafe(inbox.put_nowait, text)
        except RuntimeError as exc:  # its loop closed meanwhile
            raise ConnectionError("the in-memory agent has stopped") from exc

    async def receive(self) -> dict[str, Any] | None:
        assert self._inbox is not None
        text = await self._inbox.get()
        return None if text is None else json.loads(text)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop, inbox = self._agent_loop, self._agent_inbox
        if loop is not None and inbox is not None and not self._stopped.is_set():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(inbox.put_nowait, None)
        # An agent stuck in blocking code keeps its (daemon) thread; the client does not wait for it.
        await asyncio.get_running_loop().run_in_executor(None, self._stopped.wait, 3.0)
        if self.ended is not None and not self.ended.is_set():
            self._peer_gone()


class _AgentEnd:
    """The agent's end of a MemoryTransport: the SDK's message transport, on the agent's loop."""

    def __init__(self, inbox: asyncio.Queue[str | None], deliver: Callable[[str | None], None]) -> None:
        self._inbox = inbox
        self._deliver = deliver
        self.closed = asyncio.Event()

    async def send(self, message: dict[str, Any]) -> None:
        if self.closed.is_set():
            raise ConnectionError("the client has disconnected")
        self._deliver(json.dumps(message, ensure_ascii=False))

    async def receive(self) -> dict[str, Any] | None:
        text = await self._inbox.get()
        if text is None:
            self.closed.set()
            return None
        return json.loads(text)

    async def close(self) -> None:
        if not self.closed.is_set():
            self.closed.set()
            self._deliver(None)
