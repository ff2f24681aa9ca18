"""The stdio of our own ACP servers (the demo agent, the proxy, the replay server): pipes or a plain refusal.

Started by hand with stdin from /dev/null or stdout to a file, such a server used to die in an
asyncio traceback, or wait for ever on a stdin that had already ended. ``open_stdio`` says what
is wrong and how to start the server instead, before any frame is read.

A line from the client that is not a JSON object is skipped with one warning line, as the proxy
and the replay server do: ``open_stdio(screen=True)`` drops lines that cannot start an object
before the SDK reads them (a JSON number or list ends the SDK's receive loop, and the server with
it), and ``brief_bad_lines`` turns the SDK's parser traceback for a line that starts like an
object but is not JSON into one line.

Threads: none of its own; called on the server's event loop as it starts (the screen is one task on it).

Process-wide: ``_screens``, the screen tasks running (the event loop keeps only weak references
to tasks, so they are kept here until they end); added on the server's loop when it starts, each
removed by its own done callback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import selectors
import stat

from ._sdk import STDIO_BUFFER_LIMIT_BYTES, stdio_streams

__all__ = ["StdioError", "brief_bad_lines", "open_stdio", "read_line"]


class StdioError(RuntimeError):
    """stdin or stdout cannot carry the protocol (a file, /dev/null, closed)."""


def _check(server: str, start_from: str) -> None:
    # asyncio takes /dev/null for a character device, accepts it, and only fails when it registers
    # it with epoll, inside a loop callback, where its traceback would come out before our message.
    # Registering both streams with a throwaway selector first finds that out.
    for fd, events, name in ((0, selectors.EVENT_READ, "stdin"), (1, selectors.EVENT_WRITE, "stdout")):
        with selectors.DefaultSelector() as probe:
            try:
                probe.register(fd, events)
            except (OSError, ValueError):
                raise StdioError(f"ACP travels on stdin and stdout, which must be pipes, but {name} is "
                                 f"{_describe(fd)}: start {server} from an ACP client ({start_from})") from None


def _describe(fd: int) -> str:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return "closed"
    if stat.S_ISREG(mode):
        return "a file"
    return "/dev/null or another device" if stat.S_ISCHR(mode) else "not something asyncio can watch"


async def open_stdio(server: str, start_from: str, *,
                     screen: bool = False) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """This process's stdin and stdout as the SDK's streams, or ``StdioError`` naming what is wrong.

    ``server``: what the user started ("the demo agent"); ``start_from``: the ACP clients to start
    it from instead, as examples ("such as acpnb.start('demo') or Zed"). ``screen``: the reader
    passes on only the lines that can be JSON objects (see the module's docstring)."""
    _check(server, start_from)
    try:
        reader, writer = await stdio_streams(STDIO_BUFFER_LIMIT_BYTES)
        return (_screened(reader, STDIO_BUFFER_LIMIT_BYTES) if screen else reader), writer
    except (ValueError, OSError) as exc:
        raise StdioError(f"ACP travels on stdin and stdout, which must be pipes: start {server} from an ACP "
                         f"client ({start_from}), not a terminal or a file ({exc})") from None


class _BriefBadLine(logging.Filter):
    """A record carrying a JSON parse error becomes one warning line naming the line (no traceback)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, json.JSONDecodeError):
            record.msg, record.args = "a line from the client is not a JSON object, skipped: %.200r", (error.doc,)
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def brief_bad_lines() -> None:
    """On every handler of the root logger (set up by the server's ``logging.basicConfig``): the SDK's
    traceback for a line that is not JSON is logged as one line instead."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(_BriefBadLine())


_screens: set[asyncio.Task] = set()  # the running screens (the loop keeps only weak references to tasks)


def _screened(source: asyncio.StreamReader, limit: int) -> asyncio.StreamReader:
    """A reader fed with the lines of ``source`` that start with ``{`` (blank lines dropped silently)."""
    screened = asyncio.StreamReader(limit=limit)

    async def pump() -> None:
        try:
            while line := await read_line(source):
                text = line.strip()
                if text.startswith(b"{"):
                    screened.feed_data(line if line.endswith(b"\n") else line + b"\n")
                elif text:
                    logging.warning("a line from the client is not a JSON object, skipped: %.200r", text.decode(
                        errors="replace"))
        finally:
            screened.feed_eof()

    task = asyncio.get_running_loop().create_task(pump())
    _screens.add(task)
    task.add_done_callback(_screens.discard)
    return screened


async def read_line(reader: asyncio.StreamReader) -> bytes:
    """One line, however long (a line over the reader's limit is read in pieces, as the SDK does)."""
    pieces: list[bytes] = []
    try:
        while True:
            try:
                pieces.append(await reader.readuntil(b"\n"))
                return b"".join(pieces)
            except asyncio.LimitOverrunError as exc:
                pieces.append(await reader.readexactly(exc.consumed))
    except asyncio.IncompleteReadError as exc:
        pieces.append(exc.partial)
        return b"".join(pieces)
