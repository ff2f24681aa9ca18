"""The kernel tools through the proxy: a private channel per bound agent session, relayed to the kernel's.

The client's ``kernel`` entry in ``mcpServers`` (a stdio server named ``kernel`` whose env holds
``ACPNB_KERNEL_CHANNEL`` and ``ACPNB_KERNEL_TOKEN``: see kernel_tools/bridge.py) gives whoever
holds it the user's kernel. The proxy never passes it on as it is. Each agent session bound to a
proxy session gets an entry of its own instead (``KernelRelay``): the proxy opens its own channel
(``kernel_tools.channel.Channel``: a 0700 directory, a socket, a token of its own), and each
connection that presents that token is piped to the kernel's socket with the real token. When the
agent session is released (the session moved to another agent, was closed or deleted, the agent
ended) its relay closes: its bridge is refused from then on, and open connections end.

``kernel_entry_index`` finds the entry; ``KernelRelay.grant`` returns the mcpServers list an agent
session receives, the kernel entry swapped for the relay's.

Threads: the proxy's one event loop; the channel and its connections are tasks on it.

Process-wide: ``_closing``, the close tasks of relays still ending (the loop keeps only weak
references to tasks), for every session of the proxy's one process; added on its loop when a relay
closes, each removed by its done callback, awaited (up to ``CLOSE_WAIT_S``) when the proxy stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from .._protocol import KERNEL_SERVER_NAME
from ..kernel_tools.channel import CHANNEL_ENV, HANDSHAKE_OK, LINE_LIMIT, TOKEN_ENV, Channel

__all__ = ["KernelRelay", "closing_relays", "kernel_entry_index"]

logger = logging.getLogger(__name__)

# How long a close may take (each connection's end is awaited); a stuck one is left to the loop.
CLOSE_WAIT_S = 10.0
_closing: set[asyncio.Task[None]] = set()


def _env_value(entry: Mapping[str, Any], name: str) -> str | None:
    for pair in entry.get("env") or ():
        if isinstance(pair, Mapping) and pair.get("name") == name and isinstance(pair.get("value"), str):
            return pair["value"]
    return None


def kernel_entry_index(servers: Any) -> int | None:
    """Where the notebook's ``kernel`` entry is in an mcpServers list (a stdio server named ``kernel`` that
    names a channel and a token), or None."""
    if not isinstance(servers, list):
        return None
    for index, server in enumerate(servers):
        if isinstance(server, Mapping) and server.get("name") == KERNEL_SERVER_NAME and server.get("command") \
                and _env_value(server, CHANNEL_ENV) and _env_value(server, TOKEN_ENV):
            return index
    return None


class KernelRelay:
    """One agent session's way to the kernel: the proxy's channel, piped to the kernel's with its token."""

    def __init__(self, entry: Mapping[str, Any]) -> None:
        self._kernel_path = str(_env_value(entry, CHANNEL_ENV))
        self._kernel_token = str(_env_value(entry, TOKEN_ENV))
        self._entry = dict(entry)
        self._channel = Channel(self._serve)
        self.entry: dict[str, Any] | None = None
        self.closed = False

    @classmethod
    async def grant(cls, servers: Sequence[Any]) -> tuple[list[Any], KernelRelay | None]:
        """The mcpServers one agent session receives: ``servers`` with the kernel entry (if any) swapped for a
        new relay's, and that relay. If no relay can be opened the kernel entry is left out (logged): the
        client's own entry is never passed on."""
        servers = list(servers)
        index = kernel_entry_index(servers)
        if index is None:
            return servers, None
        relay = cls(servers[index])
        try:
            servers[index] = await relay.open()
        except OSError as exc:
            logger.warning("the kernel tools are left out of this agent session: no relay channel (%s)", exc)
            del servers[index]
            return servers, None
        return servers, relay

    async def open(self) -> dict[str, Any]:
        path = await self._channel.open()
        env = [pair for pair in self._entry.get("env") or () if not (isinstance(pair, Mapping)
                                                                      and pair.get("name") in (CHANNEL_ENV, TOKEN_ENV))]
        env += [{"name": CHANNEL_ENV, "value": path}, {"name": TOKEN_ENV, "value": self._channel.token}]
        self.entry = {**self._entry, "env": env}
        return self.entry

    async def _serve(self, lines_in: Any, lines_out: Any) -> None:
        """One agent's bridge, accepted by the proxy's channel: connect to the kernel with its token, then
        pipe messages both ways until either side ends."""
        try:
            reader, writer = await asyncio.open_unix_connection(self._kernel_path, limit=LINE_LIMIT)
        except OSError as exc:
            logger.warning("the kernel's channel cannot be reached (%s); the agent's bridge is closed", exc)
            return
        try:
            writer.write(self._kernel_token.encode() + b"\n")
            await writer.drain()
            if await reader.readline() != HANDSHAKE_OK:
                logger.warning("the kernel's channel refused the proxy's relay; the agent's bridge is closed")
                return
            up = asyncio.ensure_future(self._agent_to_kernel(lines_in, writer))
            down = asyncio.ensure_future(self._kernel_to_agent(reader, lines_out))
            try:
                await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
                if up.done() and not down.done():  # the agent ended its input: let the last answers through
                    await down
            finally:
                for task in (up, down):
                    task.cancel()
                await asyncio.gather(up, down, return_exceptions=True)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    @staticmethod
    async def _agent_to_kernel(lines_in: Any, writer: asyncio.StreamWriter) -> None:
        async for line in lines_in:
            writer.write(line.encode("utf-8", "replace"))
            await writer.drain()
        with contextlib.suppress(OSError):
            writer.write_eof()

    @staticmethod
    async def _kernel_to_agent(reader: asyncio.StreamReader, lines_out: Any) -> None:
        while True:
            try:
                line = await reader.readline()
            except ValueError:  # a line over the limit: the connection ends, as the kernel's channel would
                return
            if not line:
                return
            await lines_out.write(line.decode("utf-8", "replace"))
            await lines_out.flush()

    def close_soon(self) -> None:
        """Close now, from synchronous code: the channel stops listening on the loop's next step (bridges
        are refused), its connections end; ``closing_relays()`` awaits it."""
        if self.closed:
            return
        self.closed = True
        task = asyncio.ensure_future(self._close())
        _closing.add(task)
        task.add_done_callback(_closing.discard)

    async def close(self) -> None:
        self.close_soon()
        await closing_relays()

    async def _close(self) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._channel.close(), CLOSE_WAIT_S)


async def closing_relays() -> None:
    """Wait for the relays being closed (so an answer to the client leaves after a released agent's way to
    the kernel is shut)."""
    pending = [task for task in _closing if not task.done()]
    if pending:
        await asyncio.wait(pending, timeout=CLOSE_WAIT_S)
