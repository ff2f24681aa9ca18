"""The private channel between the kernel and the bridge: a Unix socket plus a random token.

One channel per KernelTools: a fresh directory only the user can open (mode 0700) under
``$XDG_RUNTIME_DIR`` or the temp dir, one socket in it, one token. A caller first sends the
token on a line of its own; the answer is ``ok`` (then the MCP byte stream follows, one JSON-RPC
message a line, read and written by the MCP SDK's own stdio transport), one ``refused: ...``
line (a wrong token) or one ``failed: ...`` line (the server behind the channel could not start)
before the channel closes. Nothing listens on a TCP port.

What a caller can make the kernel hold before its token is checked is small: the socket's
stream reader is limited to ``HANDSHAKE_LIMIT`` (the token line is read with it, under
``HANDSHAKE_TIMEOUT_S``), so a peer that sends megabytes without a newline, or nothing, is
refused after a few kB or a few seconds. Only after the token do lines up to ``LINE_LIMIT`` get
buffered, by ``LineReader``'s own splitter over the same reader.

Threads: everything here runs on the background loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import shutil
import socket
import stat
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from .._timeout import deadline
from .._visible import visible
from .bridge import CHANNEL_ENV, HANDSHAKE_FAILED, HANDSHAKE_OK, HANDSHAKE_REFUSED, TOKEN_ENV

__all__ = ["CHANNEL_ENV", "HANDSHAKE_LIMIT", "HANDSHAKE_OK", "LINE_LIMIT", "TOKEN_ENV", "Channel", "LineReader",
           "LineWriter", "channel_root"]

log = logging.getLogger(__name__)
# The token line (43 characters) and some room; all a peer can make us buffer before its token is checked.
HANDSHAKE_LIMIT = 4096
# A bridge sends its token as soon as it is connected; a peer that sends nothing is dropped after this.
HANDSHAKE_TIMEOUT_S = 5.0
# One MCP message is one line; a run_code request carries a whole cell of code, an answer an image.
LINE_LIMIT = 32 * 1024 * 1024
# What one read takes from the socket's stream reader after the handshake.
_READ_CHUNK = 64 * 1024
# sockaddr_un holds about 107 bytes of path.
_MAX_SOCKET_PATH = 100
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class LineReader:
    """The socket's incoming lines as text, as the SDK's stdio transport reads its stdin.

    Lines are split here rather than by ``StreamReader.readline``: the reader's own limit is the
    handshake's small one, and a line may be up to ``LINE_LIMIT`` (read when iteration starts).
    """

    def __init__(self, reader: asyncio.StreamReader, limit: int | None = None) -> None:
        self._reader = reader
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[str]:
        limit = self._limit if self._limit is not None else LINE_LIMIT
        pending = bytearray()
        while True:
            chunk = await self._reader.read(_READ_CHUNK)
            if not chunk:
                if pending:  # a last line without its newline is still a message, as readline gives it
                    yield pending.decode("utf-8", errors="replace")
                return
            start, search = 0, len(pending)  # only the new bytes can hold the next newline
            pending += chunk
            while (end := pending.find(b"\n", search)) >= 0 and end - start < limit:
                yield pending[start:end + 1].decode("utf-8", errors="replace")
                start = search = end + 1
            del pending[:start]
            if len(pending) > limit:  # the connection ends, its bridge says so
                log.warning("a message over %d bytes came through the kernel tools' channel; closing it", limit)
                return


def _escape_surrogates(text: str) -> str:
    r"""Lone surrogates written as the visible escape ``\\udcff``: the text is JSON, where such a character
    can only sit inside a string and ``\\`` reads back as one backslash, so the reader sees ``\udcff``."""
    return _LONE_SURROGATE.sub(lambda match: f"\\\\u{ord(match.group()):04x}", text)


class LineWriter:
    """The socket's outgoing side, as the SDK's stdio transport writes its stdout.

    Never fails on text: a character UTF-8 cannot carry (a lone surrogate) is escaped, not fatal to
    the connection.
    """

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            data = _escape_surrogates(text).encode("utf-8")
        self._writer.write(data)

    async def flush(self) -> None:
        await self._writer.drain()


Serve = Callable[[LineReader, LineWriter], Awaitable[None]]
Ready = Callable[[], Awaitable[object]]


def channel_root() -> Path:
    """The folder only this user can open that holds every channel of this user's kernels (made if missing).

    One per user, so that a sandboxed agent (``sandbox="bwrap"``, whose /tmp is private) can be given all of
    them at once, read-only, before any of its sessions has a channel. A folder of that name that is not
    this user's own private folder (another user made it first) is never used.
    """
    uid = os.getuid()
    for base in (os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir(), "/tmp"):
        if not base or not os.path.isdir(base) or not os.access(base, os.W_OK):
            continue
        root = Path(base) / f"acpnb-kt-{uid}"
        if len(str(root / "kt-XXXXXXXX" / "kernel.sock")) > _MAX_SOCKET_PATH:
            continue
        try:
            root.mkdir(mode=stat.S_IRWXU)
        except FileExistsError:
            pass
        except OSError:
            continue
        info = os.lstat(root)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            continue
        return root
    raise OSError("no directory for the kernel tools' socket: set XDG_RUNTIME_DIR or TMPDIR to a short, writable path")


def _private_directory() -> Path:
    """A new directory only this user can open, where a socket path still fits."""
    root = channel_root()
    _remove_dead_channels(root)
    path = Path(tempfile.mkdtemp(prefix="kt-", dir=root))  # mkdtemp makes it 0700
    os.chmod(path, stat.S_IRWXU)
    return path


def _remove_dead_channels(root: Path) -> None:
    """Directories left by kernels that were killed (nothing closed them): a socket nobody listens on."""
    for directory in root.glob("kt-*"):
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
    """A listening socket that hands each caller presenting the token to ``serve``.

    ``ready`` (optional) is awaited after a caller's token is accepted and before it is told ``ok``: what
    ``serve`` needs that can fail (the MCP SDK's import). If it raises, the caller gets one ``failed: ...``
    line saying why, and the next caller tries again. ``accepted`` (optional) is called as soon as a caller's
    token is accepted, before ``ready``: someone holding the token came (a bridge the agent started).
    """

    def __init__(self, serve: Serve, *, ready: Ready | None = None, accepted: Callable[[], None] | None = None) -> None:
        self._serve = serve
        self._ready = ready
        self._accepted = accepted
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
        # The reader's limit is the handshake's: a peer without the token can make us hold only this much.
        self._server = await asyncio.start_unix_server(self._connected, path=self.path, limit=HANDSHAKE_LIMIT)
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
            async with deadline(HANDSHAKE_TIMEOUT_S):
                line = await reader.readline()  # over HANDSHAKE_LIMIT without a newline: ValueError, buffer dropped
        except (asyncio.TimeoutError, ValueError):
            line = b""
        if not secrets.compare_digest(line.rstrip(b"\r\n"), self.token.encode()):
            await _say(writer, HANDSHAKE_REFUSED + b"wrong token for the kernel tools' channel\n")
            return False
        if self._accepted is not None:
            self._accepted()
        if self._ready is not None:
            try:
                await self._ready()
            except Exception as exc:  # noqa: BLE001 - whatever it is, the bridge says it and the next caller retries
                log.warning("the kernel tools could not serve a bridge: %s", exc)
                await _say(writer, HANDSHAKE_FAILED + _one_line(exc).encode("utf-8") + b"\n")
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


async def _say(writer: asyncio.StreamWriter, line: bytes) -> None:
    """One last line to a caller that is not served; a caller already gone is no matter."""
    writer.write(line)
    with contextlib.suppress(ConnectionError):
        await writer.drain()


def _one_line(exc: BaseException) -> str:
    """Why ``ready`` failed, as one line the bridge prints whole (it reads at most 4 kB)."""
    text = " ".join(visible(str(exc) or type(exc).__name__).split())
    return text if len(text) <= 1000 else text[:1000] + "..."
