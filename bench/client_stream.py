"""Benchmark 1: a long streamed turn through acp-notebook's client vs a bare client written on the SDK.

Both clients talk to their own copy of the benchmark agent (bench/agent.py), which streams
``--chunks`` chunks of ``--size`` characters as fast as the pipe takes them, so the turn's time is
the client's time to read and apply them. Rounds alternate (which client goes first swaps each
round); both connections stay open for the whole run.

- ``acp_notebook``: ``acpnb.start(agent)``, ``session.prompt(...)`` from this (the main) thread, as a
  script or a cell would: the frames are read on the package's background loop thread, logged into
  ``agent.log``, applied to the session state and the ``Turn``.
- ``bare_sdk``: the SDK's ``ClientSideConnection`` on an event loop of this thread, with a client whose
  ``session_update`` only appends each chunk's text (the SDK validates every frame into its pydantic
  models first).

Usage: python bench/client_stream.py [--chunks 20000] [--rounds 7] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import LoadMeter, alternate, bench_agent, compare, emit  # noqa: E402


class _AppendingClient:
    """The bare client: keeps the text of each chunk, answers nothing else."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        content = getattr(update, "content", None)
        text = getattr(content, "text", None)
        if isinstance(text, str):
            self.parts.append(text)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def on_connect(self, conn: Any) -> None:
        pass


class BareSdkClient:
    """A session with the benchmark agent over the SDK's own client connection, on a loop of this thread."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.loop = asyncio.new_event_loop()
        self.client = _AppendingClient()
        self._context: Any = None
        self.conn: Any = None
        self.session_id = ""

    def open(self) -> None:
        self.loop.run_until_complete(self._open())

    async def _open(self) -> None:
        from acp import spawn_agent_process
        from acp.schema import ClientCapabilities

        self._context = spawn_agent_process(self.client, self.argv[0], *self.argv[1:], cwd=os.getcwd(),
                                            transport_kwargs={"limit": 50 * 1024 * 1024})
        self.conn, _process = await self._context.__aenter__()
        await self.conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        session = await self.conn.new_session(cwd=os.getcwd(), mcp_servers=[])
        self.session_id = session.session_id

    def prompt(self, text: str) -> tuple[float, int]:
        """One turn; (seconds, characters received)."""
        from acp import text_block

        self.client.parts.clear()
        started = time.perf_counter()
        self.loop.run_until_complete(self.conn.prompt(session_id=self.session_id, prompt=[text_block(text)]))
        elapsed = time.perf_counter() - started
        return elapsed, sum(map(len, self.client.parts))

    def close(self) -> None:
        if self._context is not None:
            self.loop.run_until_complete(self._context.__aexit__(None, None, None))
        self.loop.close()


class NotebookClient:
    """The same agent through ``acpnb.start``, prompted with the blocking ``Session.prompt``."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.agent: Any = None
        self.session: Any = None

    def open(self) -> None:
        import acp_notebook as acpnb

        self.agent = acpnb.start(self.argv)
        self.session = self.agent.new_session()

    def prompt(self, text: str) -> tuple[float, int]:
        started = time.perf_counter()
        turn = self.session.prompt(text)
        elapsed = time.perf_counter() - started
        return elapsed, len(turn.text)

    def close(self) -> None:
        if self.agent is not None:
            self.agent.close()


def run(chunks: int = 20_000, rounds: int = 7, size: int = 12) -> dict[str, Any]:
    """Alternating rounds of one ``chunks``-chunk turn on each client; the summary with their ratio."""
    meter = LoadMeter()
    argv = bench_agent(size=size)
    prompt = f"chunks={chunks}"
    clients = {"bare_sdk": BareSdkClient(argv), "acp_notebook": NotebookClient(argv)}
    expected = chunks * size
    try:
        for client in clients.values():
            client.open()

        def side(client: Any) -> Any:
            def once() -> float:
                elapsed, received = client.prompt(prompt)
                if received != expected:
                    raise RuntimeError(f"{type(client).__name__} received {received} characters, not {expected}")
                return elapsed
            return once

        samples = alternate(rounds, {name: side(client) for name, client in clients.items()})
    finally:
        for client in clients.values():
            client.close()
    result = compare(samples, "bare_sdk", "acp_notebook")
    result.update(chunks=chunks, chunk_chars=size, rounds=rounds, load=meter.done(),
                  chunks_per_s={name: chunks / result[name]["median"] for name in clients})
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--size", type=int, default=12)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    result = run(args.chunks, args.rounds, args.size)
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
