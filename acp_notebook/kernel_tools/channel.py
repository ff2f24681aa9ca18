"""The private channel between the kernel and the bridge: a Unix socket plus a random token.

One channel per KernelTools: a fresh directory only the user can open (mode 0700) under
``$XDG_RUNTIME_DIR`` or the temp dir, one socket in it, one token. A caller first sends the
token on a line of its own; the answer is ``ok`` (then the MCP byte stream follows, one JSON-RPC
message a line, read and written by the MCP SDK's own stdio transport) or one ``refused: ...``
line before the channel closes. Nothing listens on a TCP port.

Threads: everything here runs on the background loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import socket
import stat
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from .bridge import CHANNEL_ENV, HANDSHAKE_OK, TOKEN_ENV

__all__ = ["CHANNEL_ENV", "TOKEN_ENV", "Channel", "HANDSHAKE_OK", "LINE_LIMIT"]

HANDSHAKE_TIMEOUT_S = 10.0
log = logging.getLogger(__name__)
# One MCP message is one line; a run_code request carries a whole cell of code, an answer an image.
LINE_LIMIT = 32 * 1024 * 1024
# sockaddr_un holds about 107 bytes of path.
_MAX_SOCKET_PATH = 100


class LineReader:
    """The socket's incoming lines as text, as the SDK's stdio transport reads its stdin."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def __aiter__(self) -> AsyncIterator[str]:
        while True:
            try:
                line = await self._reader.readline()
            except ValueError:  # a line over LINE_LIMIT: the connection ends, its bridge says so
                log.warning("a message over %d bytes came through the kernel tools' channel; closing it", LINE_LIMIT)
                return
            if not line:
                return
            yield line.decode("utf-8", errors="replace")


class LineWriter:
    """The socket's outgoing side, as the SDK's stdio transport writes its stdout."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


Serve = Callable[[LineReader, LineWriter], Awaitable[None]]


def _private_directory() -> Path:
    """A new directory only this user can open, where a socket path still fits."""
    for base in (os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), "/tmp"):
        if not base or not os.path.isdir(base) or not os.access(base, os.W_OK):
            continue
        if len(os.path.join(base, "acpnb-kt-XXXXXXXX", "kernel.sock")) > _MAX_SOCKET_PATH:
            continue
        _remove_dead_channels(Path(base))
        path = Path(tempfile.mkdtemp(prefix="acpnb-kt-", dir=base))  # mkdtemp makes it 0700
        os.chmod(path, stat.S_IRWXU)
        return path
    raise OSError("no directory for the kernel tools' socket: set XDG_RUNTIME_DIR or TMPDIR to a short, writable path")


def _remove_dead_channels(base: Path) -> None:
    """Directories left by kernels that were killed (nothing closed them): a socket nobody listens on."""
    for directory in base.glob("acpnb-kt-*"):
        socket_path = directory / "kernel.sock"
        try:
            if directory.stat().st_uid != os.getuid() or not socket_path.is_socket():
                continue
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(socket_path))
            finally:
                probe.close()
        except ConnectionRefusedError:
            shutil.rmtree(directory, ignore_errors=True)
        except OSError:
            continue


class Channel:
    """A listening socket that hands each caller presenting the token to ``serve``."""

    def __init__(self, serve: Serve) -> None:
        self._serve = serve
        self.token = secrets.token_urlsafe(32)
        self.directory: Path | None = None
        self.path: str | None = None
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def open(self) -> str:
        if not hasattr(asyncio, "start_unix_server"):
            raise OSError("the kernel tools need Unix domain sockets (Linux, macOS); "
                          "use kernel_tools=\"off\" on this system")
        self.directory = _private_directory()
        self.path = str(self.directory / "kernel.sock")
        self._server = await asyncio.start_unix_server(self._connected, path=self.path, limit=LINE_LIMIT)
        os.chmod(self.path, stat.S_IRUSR | stat.S_IWUSR)
        return self.path

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            if await self._handshake(reader, writer):
                await self._serve(LineReader(reader), LineWriter(writer))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the bridge went away: its agent ended
        except asyncio.CancelledError:
            # close() ends connections by cancelling them; a handler task that ends cancelled makes asyncio's
            # stream protocol log a "CancelledError" traceback to stderr, so it ends quietly instead.
            if self._server is not None:
                raise
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _handshake(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            line = await asyncio.wait_for(reader.readline(), HANDSHAKE_TIMEOUT_S)
        except (asyncio.TimeoutError, ValueError):
            line = b""
        if not secrets.compare_digest(line.rstrip(b"\r\n"), self.token.encode()):
            writer.write(b"refused: wrong token for the kernel tools' channel\n")
            with contextlib.suppress(ConnectionError):
                await writer.drain()
            return False
        writer.write(HANDSHAKE_OK)
        await writer.drain()
        return True

    async def close(self) -> None:
        """Stop listening, end every connection (their bridges exit), remove socket and directory."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5.0)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)
            self.directory = None
