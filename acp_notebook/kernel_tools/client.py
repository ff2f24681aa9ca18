"""An MCP client for the kernel tools, started from an ACP ``mcpServers`` stdio entry.

``open_kernel_tools(entry)`` spawns the entry's command (the bridge) with the official MCP SDK's
stdio client and yields an initialized ``mcp.ClientSession``: what the demo agent and the tests
use to call the tools as any agent would. Runs on whatever event loop awaits it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, TextIO

from .server import import_client_sdk

__all__ = ["entry_environment", "open_kernel_tools"]

# The SDK starts servers with a trimmed environment; these pass through as an agent's own would.
_PASSED_THROUGH = ("PYTHONPATH", "XDG_RUNTIME_DIR", "TMPDIR")


def entry_environment(entry: Mapping[str, Any]) -> dict[str, str]:
    """The entry's ``env`` list as a dict, over the variables an agent would pass on."""
    env = {name: os.environ[name] for name in _PASSED_THROUGH if name in os.environ}
    for item in entry.get("env") or ():
        env[str(item["name"])] = str(item["value"])
    return env


def _process_stderr() -> TextIO:
    """sys.stderr where it is a file; in a kernel (whose sys.stderr has no descriptor) the process's own."""
    try:
        sys.stderr.fileno()
        return sys.stderr
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__


@asynccontextmanager
async def open_kernel_tools(entry: Mapping[str, Any], *, errlog: TextIO | None = None,
                            read_timeout: float | None = None) -> AsyncIterator[Any]:
    """An initialized ``mcp.ClientSession`` on the server that ``entry`` (an ACP stdio McpServer) starts."""
    import_client_sdk()  # under the server's import lock (see there why)
    # The MCP SDK is heavy (most of a second): imported when a client first opens, as the server's is.
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=str(entry["command"]), args=[str(a) for a in entry.get("args") or ()],
                                   env=entry_environment(entry))
    async with stdio_client(params, errlog=errlog or _process_stderr()) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=read_timeout) as session:
            await session.initialize()
            yield session
