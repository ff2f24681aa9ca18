"""The floor for a proxy built on the SDK's JSON-RPC layer: two SDK ``Connection`` objects and nothing else.

Requests from the client are sent on to the agent with the SDK's ``send_request`` and its answer
(or error) returned; notifications go on with ``send_notification``; the agent's requests and
notifications come back the same way. No session ids are rewritten, no state is kept, nothing is
logged. bench/proxy_latency.py runs it beside bench/relay.py (lines only) and the real proxy, so
the proxy's cost splits into the extra process, the SDK's per-message work, and the proxy's own.

It runs on the proxy's own event loop (``acp_notebook._loop.run_main``), so the paths compare alike.

Usage: python bench/sdk_relay.py '["python", "-m", "acp_notebook.demo"]'
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from acp.connection import Connection
from acp.core import DEFAULT_STDIO_BUFFER_LIMIT_BYTES
from acp.stdio import stdio_streams

from acp_notebook._loop import run_main

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import relay_until_either_ends  # noqa: E402


def _forwarder(peer: list[Connection]) -> Any:
    async def forward(method: str, params: Any, is_notification: bool) -> Any:
        if is_notification:
            await peer[0].send_notification(method, params)
            return None
        return await peer[0].send_request(method, params)
    return forward


async def main(argv: list[str]) -> None:
    agent = await asyncio.create_subprocess_exec(*json.loads(argv[0]), stdin=asyncio.subprocess.PIPE,
                                                 stdout=asyncio.subprocess.PIPE, limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
    assert agent.stdin is not None and agent.stdout is not None
    reader, writer = await stdio_streams(limit=DEFAULT_STDIO_BUFFER_LIMIT_BYTES)
    to_agent: list[Connection] = []
    to_client: list[Connection] = []
    client_side = Connection(_forwarder(to_agent), writer, reader, listening=False)
    agent_side = Connection(_forwarder(to_client), agent.stdin, agent.stdout, listening=False)
    to_agent.append(agent_side)
    to_client.append(client_side)
    await relay_until_either_ends(agent, client_side.main_loop(), agent_side.main_loop())


if __name__ == "__main__":
    run_main(main(sys.argv[1:]))
