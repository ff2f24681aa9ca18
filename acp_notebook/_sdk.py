"""The SDK's package registered without its package-level names until something reads them; and the one
place that reads an SDK private name (``sdk_cancels_requests``: whether its ``Connection`` sends
``$/cancel_request`` itself, which no public flag says). Agents are served on the SDK's public API only
(``agent_side``).

Importing any module of the SDK (``acp.connection``) first runs ``acp/__init__.py``, and that
builds every pydantic model of the protocol's schema: about 0.35 s on the build machine, most of
``acpnb.start("demo")``. The client needs none of them on that path (it speaks through the SDK's
``Connection`` and checks answers itself), so ``defer_sdk_package()`` registers the ``acp`` package
without running its ``__init__``; later imports of its modules (``from acp.connection import
Connection``) then load just those modules. The first read of a name of the
package itself (``acp.PROTOCOL_VERSION``, ``from acp import Agent``, by us or by the user's own
code) runs the real ``__init__`` into the same module object, so ``acp`` behaves as if imported
the ordinary way, only later. If ``acp`` is already imported, nothing is changed.

It is called when something starts, never when a module of ours is imported: a connection's first
start (``AgentConnection.start``, before its first SDK import), the demo agent's first use and its
process's entry, the proxy's process entry. Importing ``acp_notebook`` leaves ``sys.modules`` alone
(tests/test_layers.py). Any thread may call it; the package is set up under a lock (``_setting_up``, made at
import, one per process like the module it guards) and completed under another. The ``acp`` entry it adds is process-wide by nature (it is the SDK's own module);
it behaves as the ordinarily imported package once anything reads one of its names.

Our own stdio servers (the proxy, the replay server, a CellAgent's ``run_stdio``) open their stdin and stdout through
``stdio_streams`` here rather than the SDK's ``acp.stdio.stdio_streams``: that module (and
``acp.core``, which holds ``DEFAULT_STDIO_BUFFER_LIMIT_BYTES``) imports the SDK's typed connections
and so the whole schema, which those processes never use. ``STDIO_BUFFER_LIMIT_BYTES`` is the SDK's
value (tests/test_startup.py compares them on every SDK line we support), and on POSIX the streams are
made from asyncio's pipes and its flow-control protocol, with the SDK's limit; elsewhere the SDK's own
function is used.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import sys
import threading
from typing import Any

__all__ = ["STDIO_BUFFER_LIMIT_BYTES", "defer_sdk_package", "sdk_cancels_requests", "stdio_streams"]

PACKAGE = "acp"

# acp.core.DEFAULT_STDIO_BUFFER_LIMIT_BYTES: the longest line an SDK reader takes whole.
STDIO_BUFFER_LIMIT_BYTES = 50 * 1024 * 1024

_setting_up = threading.Lock()


def defer_sdk_package() -> None:
    """Register the SDK's package with its ``__init__`` left for later (see the module docstring)."""
    if PACKAGE not in sys.modules:
        with _setting_up:
            if PACKAGE not in sys.modules:
                _register_package()


def _register_package() -> None:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed (or not a package): the first import of it raises the usual ImportError
    package = importlib.util.module_from_spec(spec)
    completing = threading.RLock()
    state = {"complete": False, "running": False}

    def __getattr__(name: str) -> Any:
        with completing:
            if not state["complete"] and not state["running"]:
                state["running"] = True
                try:
                    spec.loader.exec_module(package)  # type: ignore[union-attr]
                finally:
                    state["running"] = False
                state["complete"] = True
        try:
            return package.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {PACKAGE!r} has no attribute {name!r}") from None

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[PACKAGE] = package


@functools.lru_cache(maxsize=1)
def sdk_cancels_requests() -> bool:
    """Whether the installed SDK sends $/cancel_request itself when a request is cancelled (its 1.x line does)."""
    from acp.connection import Connection  # the acp SDK: asked once a request is sent, so it is loaded by then

    return hasattr(Connection, "_send_cancel_request")


async def stdio_streams(limit: int = STDIO_BUFFER_LIMIT_BYTES) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """This process's stdin and stdout as asyncio streams, as ``acp.stdio.stdio_streams(limit)`` makes them,
    without importing the SDK's schema (see the module docstring)."""
    if sys.platform == "win32":  # the SDK feeds stdin from a thread there: use its function as it is
        from acp.stdio import stdio_streams as sdk_stdio_streams

        return await sdk_stdio_streams(limit=limit)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    # asyncio's own flow-control protocol: StreamWriter.drain waits while stdout's pipe is full.
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)
