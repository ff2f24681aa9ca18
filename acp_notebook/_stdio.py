"""The stdio of our own ACP servers (the demo agent, the proxy, the replay server): pipes or a plain refusal.

Started by hand with stdin from /dev/null or stdout to a file, such a server used to die in an
asyncio traceback, or wait for ever on a stdin that had already ended. ``open_stdio`` says what
is wrong and how to start the server instead, before any frame is read.

Threads: none of its own; called on the server's event loop as it starts.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import stat

__all__ = ["StdioError", "open_stdio"]


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


async def open_stdio(server: str, start_from: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """This process's stdin and stdout as the SDK's streams, or ``StdioError`` naming what is wrong.

    ``server``: what the user started ("the demo agent"); ``start_from``: the ACP clients to start
    it from instead, as examples ("such as acpnb.start('demo') or Zed")."""
    from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
    from acp.stdio import stdio_streams

    _check(server, start_from)
    try:
        return await stdio_streams(limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
    except (ValueError, OSError) as exc:
        raise StdioError(f"ACP travels on stdin and stdout, which must be pipes: start {server} from an ACP "
                         f"client ({start_from}), not a terminal or a file ({exc})") from None
