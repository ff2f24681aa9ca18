"""Session extensions: what serves each session of an agent beside the protocol itself.

An extension is given to ``Agent(extensions=[...])``. Before a session opens (session/new, load, resume,
fork) each extension may open a ``SessionLink`` for it: an ``mcpServers`` entry the request carries, the
secrets in that entry (masked wherever frames are written down), and a link that is told which session it
serves, hears each answered turn, and is closed with the session (or when its agent goes). The notebook's
kernel tools are one (kernel_link.py's ``KernelToolsExtension``, installed by ``acpnb.start`` and the %acp
magics); the core knows them only through these protocols, so it imports nothing of Jupyter.

A server of the user's own with the same name wins over an extension's entry: the link then goes unused and
is closed at once.

Threads: ``open`` and ``close`` run on the loop thread that serves the agent (the background loop);
``bind`` and ``turn_answered`` are called there too, in wire order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

__all__ = ["SessionExtension", "SessionLink", "close_links", "open_links", "servers_with"]

logger = logging.getLogger(__name__)


class SessionLink(Protocol):
    """What an extension opened for one session."""

    name: str  # the name of its mcpServers entry
    entry: Mapping[str, Any] | None  # the entry the session request carries; None: nothing to add
    closed: bool

    def secrets(self) -> list[tuple[str, str]]: ...

    def bind(self, session: Any) -> None: ...

    def turn_answered(self, session: Any, turn: Any, result: Mapping[str, Any]) -> None: ...

    async def close(self) -> None: ...


class SessionExtension(Protocol):
    """Opens a ``SessionLink`` for each session of the agent it is installed on (or None: not for this one)."""

    name: str

    async def open(self, agent: Any) -> SessionLink | None: ...


async def open_links(agent: Any, extensions: Sequence[SessionExtension]) -> list[SessionLink]:
    """A link of each extension for a session about to open; those already opened are closed if one fails."""
    links: list[SessionLink] = []
    try:
        for extension in extensions:
            link = await extension.open(agent)
            if link is not None:
                links.append(link)
    except BaseException:
        await close_links(links)
        raise
    return links


def servers_with(user_servers: Sequence[Mapping[str, Any]], links: Sequence[SessionLink],
                 ) -> tuple[list[dict[str, Any]], list[SessionLink], list[SessionLink]]:
    """The ``mcpServers`` of a session request (the user's own first, then the links' entries), the links whose
    entry went in, and those left out (a user's server of the same name wins; a link with no entry)."""
    servers = [dict(server) for server in user_servers]
    taken = {server.get("name") for server in servers}
    offered, unused = [], []
    for link in links:
        if link.entry is None or link.name in taken:
            unused.append(link)
            continue
        servers.append(dict(link.entry))
        taken.add(link.name)
        offered.append(link)
    return servers, offered, unused


async def close_links(links: Sequence[SessionLink | None]) -> None:
    """Close several links at once (a closing agent's sessions); failures are logged, never raised."""
    results = await asyncio.gather(*(link.close() for link in links if link is not None), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            logger.warning("closing a session extension failed: %s", result)
