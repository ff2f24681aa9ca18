"""The floor for any proxy written in Python: a relay that only forwards lines between its stdio and one agent.

It decodes and re-encodes each frame as JSON (as any proxy that reads frames must) and does nothing
else: no JSON-RPC, no rewriting. bench/proxy_latency.py runs it beside the direct path and the real
proxy, so the proxy's cost shows in two parts: what any extra process costs on this machine (two more
pipe hops and wake-ups), and what the proxy does beyond that.

It runs on the proxy's own event loop (``acp_notebook._loop.run_main``), so the paths compare alike.

Usage: python bench/relay.py '["python", "-m", "acp_notebook.demo"]'
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from acp_notebook._loop import run_main

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import relay_until_either_ends  # noqa: E402

LIMIT = 50 * 1024 * 1024


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter | asyncio.BaseTransport) -> None:
    while True:
        line = await reader.readline()
        if not line:
            return
        data = (json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        writer.write(data)  # type: ignore[union-attr]
        if isinstance(writer, asyncio.StreamWriter):
            await writer.drain()


async def main(argv: list[str]) -> None:
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader(limit=LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    stdout = asyncio.StreamWriter(transport, protocol, stdin, loop)
    agent = await asyncio.create_subprocess_exec(*json.loads(argv[0]), stdin=asyncio.subprocess.PIPE,
                                                 stdout=asyncio.subprocess.PIPE, limit=LIMIT)
    assert agent.stdin is not None and agent.stdout is not None
    await relay_until_either_ends(agent, _pump(stdin, agent.stdin), _pump(agent.stdout, stdout))


if __name__ == "__main__":
    run_main(main(sys.argv[1:]))
