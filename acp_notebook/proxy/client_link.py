"""The proxy's link to its client: newline-delimited JSON on the proxy's own stdin and stdout.

A message-level transport for the SDK's ``Connection`` (which still speaks JSON-RPC on it), in
place of the SDK's byte-stream form. That form queues every outgoing frame for a sender task, so
each frame the proxy forwards costs a queue, a future and a trip through the event loop before it
is written. Here ``send`` writes the frame at once, in its caller's first step, so frames leave in
the order their sends started (the proxy relies on that: notifications before the answer they
precede) and a streamed chunk costs one write.

The framing is ``_ndjson``'s, with its one policy: a line that is not JSON, not a JSON object or
over the frame limit is logged and skipped; a request too large to read is answered at once with
an error naming its size.

Threads: one event loop, the proxy's.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .._ndjson import DroppedFrame, LineReader, LineWriter
from .._protocol import INVALID_REQUEST

__all__ = ["ClientLink"]

logger = logging.getLogger(__name__)


class ClientLink:
    """The SDK's message transport (``send`` / ``receive`` / ``close``) over the proxy's stdio streams."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._lines = LineReader(reader, on_bad=_skipped)
        self._frames = LineWriter(writer, closed="the client's end (stdout) is closed")

    async def send(self, message: dict[str, Any]) -> None:
        await self._frames.send(message)

    async def receive(self) -> dict[str, Any] | None:
        while True:
            message = await self._lines.read()
            if not isinstance(message, DroppedFrame):
                return message
            if message.head.kind == "request":  # its sender would wait for an answer for ever
                refusal = {"jsonrpc": "2.0", "id": message.head.id, "error": {
                    "code": INVALID_REQUEST,
                    "message": f"the proxy dropped this {message.head.method or ''} request: it was {message.reason}"}}
                try:
                    await self._frames.send(refusal)
                except (ConnectionError, OSError):
                    return None

    async def close(self) -> None:
        """Flush what is written; stdout itself stays open until the process ends."""
        if not self._writer.is_closing():
            try:
                await asyncio.wait_for(self._frames.drain(), 1.0)
            except (asyncio.TimeoutError, ConnectionError, OSError):
                pass


def _skipped(reason: str, excerpt: str) -> None:
    logger.warning("a line from the client is %s, skipped: %.200r", reason, excerpt)
