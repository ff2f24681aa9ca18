"""Transports: how JSON-RPC messages reach one agent, and that agent's own life.

The seam under ``AgentConnection``, as httpx has one under its client. A transport moves
whole messages (dicts): it is the SDK's message-level transport (``send`` / ``receive`` /
``close``, which ``acp.connection.Connection`` accepts in place of byte streams). It also owns
its peer: it starts it (``open``), ends it (``close``) and says when and how it ended
(``ended``, ``exit_code``, ``stderr_tail``), so that errors can name the cause.

- ``StdioTransport``: an agent subprocess, newline-delimited JSON over its pipes. The framing
  (``_ndjson``, shared with the proxy's client link and the replay server) is ours rather than
  the SDK's ``NdjsonTransport`` so that every line the agent writes (not JSON, not an object,
  too long) is reported to ``on_bad_frame`` and shows in the frame log instead of vanishing into
  a logger. A line over the frame limit is skipped as it streams in; when its first bytes show
  an answer or a request with an id, ``receive`` returns a ``DroppedFrame`` saying so, and the
  connection fails that request at once (or answers the agent's request with an error) instead
  of leaving someone waiting for its deadline.
- ``MemoryTransport``: an agent object living in this process (the demo agent, or one a
  learner wrote in a cell), served by the SDK's ``AgentSideConnection`` (or by its own
  ``serve_acp``, as the demo agent is) on a thread and loop of its own, so an agent that
  blocks cannot freeze the client's loop. Messages cross as JSON
  text, as on a real wire: nothing is shared between the two sides.
- ``acp_notebook.record.ReplayTransport`` answers from a recording.

Threads: every method runs on the loop thread of the connection that uses the transport;
``MemoryTransport`` additionally owns one thread of its own, where the agent runs.

Process-wide: ``_thread_logs``, the root logger's filter that sends log records from an
in-memory agent's thread to that agent's last words. One per process, as the root logger is: made
(empty) at import, put on the root logger only when the first in-memory agent runs, kept until the
interpreter exits; each agent thread adds and removes its own sink.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shlex
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._ndjson import (  # the framing's names stay importable from here
    EXCERPT_CHARS,
    FRAME_LIMIT,
    DroppedFrame,
    FrameHead,
    LineReader,
    LineWriter,
    frame_head,
    request_id_in,
)
from .._process import EXIT_GRACE_S, AgentProcess

__all__ = ["FRAME_LIMIT", "DroppedFrame", "FrameHead", "MemoryTransport", "StdioTransport", "Transport", "frame_head",
           "request_id_in"]

logger = logging.getLogger(__name__)

BadFrameSink = Callable[[str, str], None]  # (why it is bad, an excerpt of it)


class Transport:
    """The interface every transport implements (see the module docstring).

    ``command`` is the peer's command line ([] when it is not a process); ``stderr_listeners`` are
    called with each line the peer writes to stderr (a peer without one never calls them)."""

    description: str = "agent"
    pid: int | None = None

    def __init__(self) -> None:
        self.ended: asyncio.Event | None = None  # set when the peer is gone; made in open(), on the loop
        self.on_bad_frame: BadFrameSink | None = None
        self._stderr_listeners: list[Callable[[str], None]] = []

    @property
    def command(self) -> list[str]:
        return []

    @property
    def stderr_listeners(self) -> list[Callable[[str], None]]:
        return self._stderr_listeners

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


class StdioTransport(Transport):
    """An agent subprocess speaking newline-delimited JSON on stdin/stdout (stderr drained)."""

    def __init__(self, argv: Sequence[str], *, cwd: str, env: Mapping[str, str],
                 frame_limit: int = FRAME_LIMIT, exit_grace: float = EXIT_GRACE_S) -> None:
        super().__init__()
        self.argv = list(argv)
        self.description = shlex.join(self.argv)
        self.process = AgentProcess(self.argv, cwd=cwd, env=env, exit_grace=exit_grace)
        self.frame_limit = frame_limit
        self._lines: LineReader | None = None
        self._frames: LineWriter | None = None

    @property
    def pid(self) -> int | None:  # type: ignore[override]
        return self.process.pid

    @property
    def exit_code(self) -> int | None:
        return self.process.exit_code

    @property
    def command(self) -> list[str]:
        return list(self.argv)

    @property
    def stderr_listeners(self) -> list[Callable[[str], None]]:
        return self.process.stderr_listeners

    def stderr_tail(self, lines: int = 20) -> list[str]:
        return self.process.stderr_tail(lines)

    async def open(self) -> None:
        await self.process.spawn()
        self.ended = self.process.exited
        self._lines = LineReader(self.process.stdout, limit=self.frame_limit, on_bad=self._bad_frame)
        self._frames = LineWriter(self.process.stdin, closed="the agent's stdin is closed")

    async def send(self, message: dict[str, Any]) -> None:
        if self._frames is None:
            raise ConnectionError("the agent is not started")
        await self._frames.send(message)

    async def receive(self) -> dict[str, Any] | None:
        return await self._lines.read() if self._lines is not None else None

    async def close(self) -> None:
        await self.process.terminate()

    async def settle(self) -> None:
        await self.process.settle()


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


# Process-wide, as the root logger it filters is: put on that logger when the first in-memory agent runs
# (not when this module is imported), and kept for the life of the process; each agent thread's sink is
# added and removed by that thread.
_thread_logs = _AgentThreadLogs()


class MemoryTransport(Transport):
    """An agent object served in this process by the SDK's ``AgentSideConnection``.

    ``agent`` is what ``AgentSideConnection`` accepts: an object with the SDK's agent methods
    (``initialize``, ``new_session``, ``prompt``...) or a callable that receives the connection
    and returns one. An object with an async ``serve_acp(transport)`` method serves itself instead,
    on the SDK message transport it is given (the demo agent does: it needs none of the SDK's typed
    models). It runs on a thread with its own event loop.
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
        self._serving = False
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
        if not self._serving:  # its thread ended before it could serve (it sets _ready on its way out too)
            raise OSError(f"{self.description} ended before it was ready: "
                          + ("; ".join(self._last_words[-3:]) or "it said nothing"))

    def _serve(self) -> None:
        """The agent's thread: its own loop, the SDK's agent side, until the client closes."""
        loop = asyncio.new_event_loop()
        self._agent_loop = loop
        logging.getLogger().addFilter(_thread_logs)  # once: addFilter keeps one of each
        _thread_logs.sinks[threading.get_ident()] = self._last_words
        try:
            loop.run_until_complete(self._agent_side())
        except BaseException as error:  # noqa: BLE001 - what a dying subprocess would have printed
            self._last_words.extend(f"{type(error).__name__}: {error}".splitlines())
        finally:
            self._ready.set()  # open() must not wait for a readiness that will never come
            _thread_logs.sinks.pop(threading.get_ident(), None)
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._stopped.set()
            if self._client_loop is not None and not self._client_loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    self._client_loop.call_soon_threadsafe(self._peer_gone)

    async def _agent_side(self) -> None:
        self._agent_inbox = asyncio.Queue()
        end = _AgentEnd(self._agent_inbox, self._to_client)
        serves_itself = getattr(self.agent, "serve_acp", None)
        if callable(serves_itself):
            serving = asyncio.ensure_future(serves_itself(end))
        else:
            import acp  # an SDK agent object: the SDK's own serving (it builds the schema models it uses)

            serving = asyncio.ensure_future(acp.run_agent(self.agent, end, use_unstable_protocol=True))
        self._serving = True
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
