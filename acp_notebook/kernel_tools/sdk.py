"""Importing the official MCP SDK, one import at a time, for the kernel tools' server and their clients.

The SDK is heavy (most of a second): nothing in the package imports it at module level. The server
(server.py) imports its half in a worker thread when its channel opens, or at the first bridge's connection
for an agent known to connect only when a prompt needs the kernel; an agent served in this process (the
demo agent in memory, a CellAgent) imports the client half when it first opens the tools (client.py). Both go
through here so that neither sees the other's modules half initialized.

Kept apart from server.py so that an agent's process (which only opens the tools as a client) does not
import the server's tools, namespace readers and runner.

Process-wide: ``_SDK_IMPORT_LOCK``, one lock around importing the MCP SDK, since the import system is
process-wide: two threads importing it at once could see a half-initialized module. Made at import (a
plain lock), held by whichever thread imports the SDK, never dropped.
"""

from __future__ import annotations

import importlib
import threading

__all__ = ["import_client_sdk", "import_server_sdk"]

_SDK_IMPORT_LOCK = threading.Lock()


def import_server_sdk() -> None:
    """The SDK's server side. Two sessions started together import it in two worker threads; under the lock the
    second waits instead of finding a module the first has only half initialized (ImportError on its first tool
    call)."""
    with _SDK_IMPORT_LOCK:
        for module in ("mcp.types", "mcp.server.lowlevel", "mcp.server.stdio"):
            importlib.import_module(module)


def import_client_sdk() -> None:
    """The SDK's client side, under the same lock as the server's: an agent served in this process importing it
    while a session's tools import the server half saw ``mcp.server`` partially initialized ("cannot import name
    'Server'") and failed its turn."""
    with _SDK_IMPORT_LOCK:
        for module in ("mcp", "mcp.client.stdio"):
            importlib.import_module(module)
