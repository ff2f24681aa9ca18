"""The proxy under load: many concurrent sessions over several agents, all streaming, against bare relays.

One proxy process serves ``--sessions`` sessions bound round-robin to ``--backends`` benchmark agents
(bench/agent.py, paced at ``--delay`` seconds between chunks). The floor is one bare relay process
(bench/relay.py: decodes and re-encodes every line, nothing else) in front of one such agent, with
the same number of sessions: one process in the middle on each side, carrying the same frames (a
relay per agent would give the floor several processes, and so several cores and scheduler shares,
against the proxy's one). In each round every session of one side runs one turn at once, then every
session of the other (the order swapped every round); the client is a bare SDK Connection per side,
in this process.

Checked on every turn (an error ends the benchmark): each session gets exactly its own chunks (each
prompt carries a tag the agent puts in every chunk; a chunk with another session's tag, or under
another session's id, is cross-talk) and the turn ends with ``end_turn``.

Measured: each turn's time (prompt sent -> answered), per side; the ratio of the medians (and of the
90th percentiles) is the proxy's cost under load beyond any extra Python process.

Usage: python bench/proxy_load.py [--sessions 200] [--backends 4] [--chunks 20] [--delay 0.05] [--rounds 5]
       [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from acp.connection import Connection, StreamDirection, StreamEvent

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import HERE, LoadMeter, bench_agent, close_client, emit, open_client  # noqa: E402

RELAY = HERE / "relay.py"


class Link:
    """One client connection (to the proxy, or to one relay) and the chunks it received, by session and tag."""

    def __init__(self, label: str, argv: list[str]) -> None:
        self.label = label
        self.argv = argv
        self.process: asyncio.subprocess.Process | None = None
        self.conn: Connection | None = None
        self.received: dict[str, list[str]] = defaultdict(list)  # session id -> tags of its chunks

    def observe(self, event: StreamEvent) -> None:
        if event.direction != StreamDirection.INCOMING or event.message.get("method") != "session/update":
            return
        params = event.message.get("params") or {}
        update = params.get("update") or {}
        if update.get("sessionUpdate") == "agent_message_chunk":
            text = (update.get("content") or {}).get("text", "")
            self.received[params.get("sessionId")].append(text[1:text.index("]")] if text.startswith("[") else "")

    async def open(self, cwd: str) -> None:
        self.process, self.conn = await open_client(self.argv, cwd, "proxy-load-bench", self.observe)

    async def new_session(self, cwd: str, model: str | None) -> str:
        assert self.conn is not None
        result = await self.conn.send_request("session/new", {"cwd": cwd, "mcpServers": []})
        session_id = result["sessionId"]
        if model is not None:  # the proxy: bind to one agent, as a user picking its model does
            await self.conn.send_request("session/set_config_option",
                                         {"sessionId": session_id, "configId": "model", "value": model})
        return session_id

    async def turn(self, session_id: str, tag: str, chunks: int) -> float:
        assert self.conn is not None
        self.received.pop(session_id, None)
        started = time.perf_counter()
        answer = await self.conn.send_request("session/prompt", {"sessionId": session_id, "prompt": [
            {"type": "text", "text": f"tag={tag} chunks={chunks}"}]})
        took = time.perf_counter() - started
        got = self.received.get(session_id, [])
        if answer.get("stopReason") != "end_turn" or got != [tag] * chunks:
            strangers = sorted(set(got) - {tag})
            raise RuntimeError(f"{self.label}: session {session_id} (tag {tag}) ended {answer.get('stopReason')!r} "
                               f"with {len(got)} chunks of {chunks}; other sessions' tags among them: {strangers}")
        return took

    async def close(self) -> None:
        await close_client(self.conn, self.process, wait=10)


async def _side_turns(sessions: list[tuple[Link, str, str]], chunks: int) -> list[float]:
    """Every session of one side runs one turn, all at once; each turn's time."""
    return list(await asyncio.gather(*(link.turn(sid, tag, chunks) for link, sid, tag in sessions)))


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median_s": statistics.median(ordered), "p90_s": ordered[int(0.9 * (len(ordered) - 1))],
            "max_s": ordered[-1], "n": len(ordered)}


async def run(sessions: int, backends: int, chunks: int, delay: float, rounds: int) -> dict[str, Any]:
    cwd = os.getcwd()
    agent = bench_agent(chunks=chunks, delay=delay)
    names = [f"a{i}" for i in range(backends)]
    proxy = Link("proxy", [sys.executable, "-m", "acp_notebook.proxy", "--probe-timeout", "60",
                           *(arg for name in names for arg in ("--agent", f"{name}={json.dumps(agent)}"))])
    relay = Link("relay", [sys.executable, str(RELAY), json.dumps(agent)])
    links = [proxy, relay]
    sides: dict[str, list[tuple[Link, str, str]]] = {"proxy": [], "relay": []}
    try:
        await asyncio.gather(*(link.open(cwd) for link in links))
        for index in range(sessions):
            name = names[index % backends]
            sides["proxy"].append((proxy, await proxy.new_session(cwd, f"{name}:fast"), f"p{index}"))
            sides["relay"].append((relay, await relay.new_session(cwd, None), f"r{index}"))
        await _side_turns(sides["proxy"], chunks)  # warm-up: every session's first turn, on both sides
        await _side_turns(sides["relay"], chunks)
        samples: dict[str, list[float]] = {"proxy": [], "relay": []}
        for index in range(rounds):
            for side in (("proxy", "relay") if index % 2 == 0 else ("relay", "proxy")):
                samples[side] += await _side_turns(sides[side], chunks)
    finally:
        await asyncio.gather(*(link.close() for link in links))
    proxy_stats, relay_stats = _summary(samples["proxy"]), _summary(samples["relay"])
    return {"sessions": sessions, "backends": backends, "chunks_per_turn": chunks, "delay_s": delay,
            "rounds": rounds, "turns_checked": len(samples["proxy"]) + len(samples["relay"]) + 2 * sessions,
            "proxy": proxy_stats, "relay": relay_stats,
            "ratio_median": proxy_stats["median_s"] / relay_stats["median_s"],
            "ratio_p90": proxy_stats["p90_s"] / relay_stats["p90_s"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--backends", type=int, default=4)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.05, help="the agents' pause between two chunks (s)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    meter = LoadMeter()
    result = asyncio.run(run(args.sessions, args.backends, args.chunks, args.delay, args.rounds))
    result["load"] = meter.done()
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
