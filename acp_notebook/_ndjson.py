"""Newline-delimited JSON framing, written once: what every stdio end of ours reads and writes.

Used by ``connection.StdioTransport`` (an agent's pipes), the proxy's client link (its own stdio)
and the replay server (``acp-notebook replay``).

One policy for what a peer sends (``LineReader``):

- blank lines are skipped;
- a line over the frame limit (``FRAME_LIMIT``, 50 MiB) is skipped as it streams in, never held
  whole, and reported; when its first bytes show a request or an answer with an id, ``read``
  returns a ``DroppedFrame`` naming it, so that its sender can be answered at once instead of
  waiting for a deadline;
- a line that is not JSON, is nested too deeply to decode, or is not a JSON object is reported and
  skipped.

Reports go to the reader's ``on_bad(reason, excerpt)`` (the frame log, the proxy's log, stderr).

One writer per stream (``LineWriter``): frames are written whole, in the order ``write``/``send`` is
called, and drained under one lock (before Python 3.11 a second concurrent ``drain()`` of a paused
stream fails an assertion).

Threads: each reader and writer is used on the one event loop that owns its stream.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ._process import STDIO_LIMIT

__all__ = ["EXCERPT_CHARS", "FRAME_LIMIT", "DroppedFrame", "FrameHead", "LineReader", "LineWriter", "encode",
           "frame_head", "request_id_in"]

# The largest frame read whole; a longer line is dropped (and reported) rather than buffered.
FRAME_LIMIT = STDIO_LIMIT
# How much of a bad frame is kept for a report.
EXCERPT_CHARS = 300

BadFrameSink = Callable[[str, str], None]  # (why it is bad, an excerpt of it)


def encode(message: Mapping[str, Any]) -> bytes:
    """One frame: compact JSON, UTF-8, one line. A string holding a lone surrogate (a path with undecodable
    bytes, text an agent sent as ``\\udcff``) cannot be UTF-8: such a frame goes out with every non-ASCII
    character as a JSON escape, which any JSON reader takes, instead of failing to be sent at all."""
    try:
        return (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(message, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


def _loads(line: bytes) -> Any:
    """``json.loads`` of one frame. A line that starts as UTF-8 JSON does (what NDJSON is) is decoded as
    UTF-8 at once: given bytes, json.loads first sniffs for UTF-16 and UTF-32, a cost on every chunk."""
    if line[:1] == b"{" and line[1:2] != b"\x00":
        return json.loads(line.decode("utf-8", "surrogatepass"))
    return json.loads(line)


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


class LineReader:
    """Messages from an ``asyncio.StreamReader`` of newline-delimited JSON, under the module's policy."""

    def __init__(self, reader: asyncio.StreamReader, *, limit: int = FRAME_LIMIT,
                 on_bad: BadFrameSink | None = None) -> None:
        self._reader = reader
        self.limit = limit
        self._on_bad = on_bad

    def _bad(self, reason: str, excerpt: str) -> None:
        if self._on_bad is not None:
            self._on_bad(reason, excerpt[:EXCERPT_CHARS])

    async def read(self) -> dict[str, Any] | None:
        """The next message (a dict, or a ``DroppedFrame``); None at the end of the stream."""
        while True:
            line = await self._line()
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
                self._bad("not JSON", text.decode("utf-8", "replace"))
                continue
            except RecursionError:  # the decoder gives up on deep nesting this way, not with a ValueError
                self._bad("JSON nested too deeply", text[:EXCERPT_CHARS].decode("utf-8", "replace"))
                continue
            if not isinstance(message, dict):
                self._bad("not a JSON object", text.decode("utf-8", "replace"))
                continue
            return message

    async def _line(self) -> bytes | DroppedFrame | None:
        """One line, or None at EOF. A line longer than the limit is skipped (and reported) while it
        streams in, so it never sits whole in memory; b"" stands for it, or a DroppedFrame when its
        first bytes name a request or an answer with an id."""
        reader = self._reader
        head = b""
        skipped = 0
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if skipped:
                    self._oversized(head, skipped + len(exc.partial))
                    return None
                return exc.partial or None
            except asyncio.LimitOverrunError as exc:
                chunk = await reader.readexactly(exc.consumed)
                head = head or chunk[:EXCERPT_CHARS * 4]
                skipped += len(chunk)
                continue
            if skipped:
                return self._oversized(head, skipped + len(line))
            if len(line) > self.limit:
                return self._oversized(line[:EXCERPT_CHARS * 4], len(line))
            return line

    def _oversized(self, head: bytes, size: int) -> bytes | DroppedFrame:
        reason = f"a {size / 2**20:.1f} MiB line, over the {self.limit / 2**20:g} MiB frame limit"
        excerpt = head.decode("utf-8", "replace")
        self._bad(f"{reason}: dropped", excerpt)
        found = frame_head(excerpt)
        if found.kind in ("response", "request") and found.id is not None:
            return DroppedFrame(found, reason)
        return b""


class LineWriter:
    """Frames to an ``asyncio.StreamWriter``, written whole and in order, drained under one lock."""

    def __init__(self, writer: asyncio.StreamWriter, *, closed: str = "the stream is closed") -> None:
        self._writer = writer
        self._closed = closed  # the ConnectionError's message once the stream is closing
        self._draining = asyncio.Lock()

    @property
    def closing(self) -> bool:
        return self._writer.is_closing()

    def write(self, message: Mapping[str, Any]) -> None:
        """Queue one frame now (it leaves in the order of these calls); ``drain`` lets the pipe catch up."""
        if self._writer.is_closing():
            raise ConnectionError(self._closed)
        self._writer.write(encode(message))

    async def drain(self) -> None:
        async with self._draining:
            await self._writer.drain()

    async def send(self, message: Mapping[str, Any]) -> None:
        self.write(message)
        await self.drain()
