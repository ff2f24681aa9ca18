"""The agent's side of the kernel tools: an MCP client started from an ACP ``mcpServers`` stdio entry.

``kernel_entry(servers)`` finds the ``kernel`` server among the ``mcpServers`` a session request brought;
``open_kernel_tools(entry)`` spawns the entry's command (the bridge) with the official MCP SDK's stdio
client and yields an initialized ``mcp.ClientSession``; ``result_text`` reads a tool result's text. What
the package's agents (the demo agent, CellAgent) and the tests use to call the tools as any agent would.
Runs on whatever event loop awaits it; light to import (the SDK comes when a client first opens), so an
agent's process imports none of the client's session machinery nor the tools' server.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, TextIO

from .._protocol import KERNEL_SERVER_NAME
from .sdk import import_client_sdk

__all__ = ["entry_environment", "kernel_entry", "open_kernel_tools", "result_text"]

# The SDK starts servers with a trimmed environment; these pass through as an agent's own would.
_PASSED_THROUGH = ("PYTHONPATH", "XDG_RUNTIME_DIR", "TMPDIR")


def entry_environment(entry: Mapping[str, Any]) -> dict[str, str]:
    """The entry's ``env`` list as a dict, over the variables an agent would pass on."""
    env = {name: os.environ[name] for name in _PASSED_THROUGH if name in os.environ}
    for item in entry.get("env") or ():
        env[str(item["name"])] = str(item["value"])
    return env


def _field(server: Any, name: str) -> Any:
    return server.get(name) if isinstance(server, dict) else getattr(server, name, None)


def kernel_entry(servers: Sequence[Any] | None) -> dict[str, Any] | None:
    """The stdio server named ``kernel`` among a session request's mcpServers (the SDK's models or dicts), as
    the plain entry ``open_kernel_tools`` takes; None when there is none."""
    for server in servers or ():
        if _field(server, "name") != KERNEL_SERVER_NAME or not _field(server, "command"):
            continue
        pairs = _field(server, "env")
        env = [{"name": str(_field(pair, "name")), "value": str(_field(pair, "value"))}
               for pair in (pairs if isinstance(pairs, (list, tuple)) else []) if _field(pair, "name") is not None]
        return {"name": KERNEL_SERVER_NAME, "command": str(_field(server, "command")),
                "args": [str(arg) for arg in _field(server, "args") or []], "env": env}
    return None


def result_text(result: Any) -> str:
    """The text blocks of an MCP tool result (``mcp.types.CallToolResult``), joined; an image is named."""
    parts = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind == "image":
            parts.append(f"[an image, {getattr(block, 'mime_type', None) or 'image/png'}]")
    return "\n".join(parts)


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
    import_client_sdk()  # under the SDK's import lock (see sdk.py why)
    # The MCP SDK is heavy (most of a second): imported when a client first opens, as the server's is.
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=str(entry["command"]), args=[str(a) for a in entry.get("args") or ()],
                                   env=entry_environment(entry))
    async with stdio_client(params, errlog=errlog or _process_stderr()) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=read_timeout) as session:
            await session.initialize()
            yield session
