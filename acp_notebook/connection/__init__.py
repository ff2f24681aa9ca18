"""The agent-connection lifecycle and the transports under it (see core.py and transport.py)."""

from __future__ import annotations

from .._sdk import defer_sdk_package

defer_sdk_package()  # before any module here imports the SDK: its schema models load only if something reads them

from .core import AgentConnection, ConnectionState, transport_for  # noqa: E402
from .routing import ReplyRouter  # noqa: E402
from .transport import MemoryTransport, StdioTransport, Transport  # noqa: E402

__all__ = ["AgentConnection", "ConnectionState", "MemoryTransport", "ReplyRouter", "StdioTransport", "Transport",
           "transport_for"]
