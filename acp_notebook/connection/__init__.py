"""The agent-connection lifecycle and the transports under it (see core.py and transport.py).

Importing it changes nothing outside this package: the SDK's package is set up (``_sdk.defer_sdk_package``)
when a connection first starts, before the SDK's first module is imported.
"""

from __future__ import annotations

from .core import AgentConnection, ConnectionState, transport_for
from .routing import ReplyRouter
from .transport import MemoryTransport, StdioTransport, Transport

__all__ = ["AgentConnection", "ConnectionState", "MemoryTransport", "ReplyRouter", "StdioTransport", "Transport",
           "transport_for"]
