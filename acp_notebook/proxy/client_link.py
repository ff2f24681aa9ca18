"""The proxy's link to its client: newline-delimited JSON on the proxy's own stdin and stdout.

A message-level transport for the SDK's ``Connection`` (which still speaks JSON-RPC on it), in
place of the SDK's byte-stream form. That form queues every outgoing frame for a sender task, so
each frame the proxy forwards costs a queue, a future and a trip through the event loop before it
is written. Here ``send`` writes the frame at once, in its caller's first step, so frames leave in
the order their sends started (the proxy relies on that: notifications before the answer they
precede) and a streamed chunk costs one write.

Reading follows the SDK's framing: a line that is not JSON, or not a JSON object, is logged and
skipped; a line longer than the reader's limit is read whole in pieces, as the SDK does.

Threads: one event loop, the proxy's.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from .._stdio import read_line

__all__ = ["ClientLink"]

logger = logging.getLogger(__name__)


class ClientLink:
    """The SDK's message transport (``send`` / ``receive`` / ``close``) over the proxy's stdio streams."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        # One drain at a time: before Python 3.11 a second concurrent drain() of a paused stream fails.
        self._draining = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        if self._writer.is_closing():
            raise ConnectionError("the client's end (stdout) is closed")
        self._writer.write((json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8"))
        async with self._draining:
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if not line:
                return None
            text = line.strip()
            if not text:
                continue
            try:
                message = json.loads(text)
            except ValueError:
                logger.warning("a line from the client is not JSON, skipped: %.200r", text)
                continue
            if not isinstance(message, dict):
                logger.warning("a line from the client is not a JSON object, skipped: %.200r", text)
                continue
            return message

    async def _read_line(self) -> bytes:
        return await read_line(self._reader)

    async def close(self) -> None:
        """Flush what is written; stdout itself stays open until the process ends."""
        if not self._writer.is_closing():
            try:
                await asyncio.wait_for(self._writer.drain(), 1.0)
            except (asyncio.TimeoutError, ConnectionError, OSError):
                pass
