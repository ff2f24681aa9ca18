"""The proxy's added latency: the same demo agent reached directly and through the proxy, in one run.

Both connections are open at once and turns alternate between them (direct first on even turns,
proxied first on odd ones), so machine noise hits both alike. The client is a bare SDK
Connection (no acp-notebook client code), so the ratios are the proxy's own cost.

Measured per turn, on each path:
  request   round trip of session/set_config_option (the mode toggled, a small request/answer)
  ttfc      prompt sent -> first streamed chunk received
  chunk     steady-state time per streamed chunk: (last chunk - first chunk) / (chunks - 1)
  arrival   mean over the turn's chunks of (chunk received - prompt sent): each chunk's latency
  turn      prompt sent -> prompt answered

Usage: python bench/proxy_latency.py [--turns 200] [--delay 0] [--json results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from acp.connection import Connection, StreamDirection, StreamEvent

DEMO = [sys.executable, "-m", "acp_notebook.demo"]
PROMPT = "Tell me about tide pools and the creatures that live in them, at some length please"
CHUNK_KINDS = ("agent_message_chunk", "agent_thought_chunk")
METRICS = ("request", "ttfc", "chunk", "arrival", "turn")


@dataclass
class Path:
    """One way to reach the agent (direct or proxied) and what was measured on it."""

    label: str
    argv: list[str]
    process: asyncio.subprocess.Process | None = None
    conn: Connection | None = None
    session_id: str = ""
    chunk_times: list[float] = field(default_factory=list)
    samples: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in METRICS})
    chunk_counts: list[int] = field(default_factory=list)
    mode: str = "ask"

    def observe(self, event: StreamEvent) -> None:
        # Runs in the receive loop as each frame is read: the arrival time of every chunk.
        if event.direction != StreamDirection.INCOMING:
            return
        message = event.message
        if message.get("method") == "session/update":
            update = (message.get("params") or {}).get("update") or {}
            if update.get("sessionUpdate") in CHUNK_KINDS:
                self.chunk_times.append(time.perf_counter())

    async def open(self, cwd: str) -> None:
        self.process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, cwd=cwd, limit=50 * 1024 * 1024)
        assert self.process.stdin is not None and self.process.stdout is not None

        async def refuse(method: str, params: Any, is_notification: bool) -> Any:
            return None

        self.conn = Connection(refuse, self.process.stdin, self.process.stdout, observers=[self.observe])
        await self.conn.send_request("initialize", {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
            "clientInfo": {"name": "proxy-latency-bench", "version": "1"},
        })
        result = await self.conn.send_request("session/new", {"cwd": cwd, "mcpServers": []})
        self.session_id = result["sessionId"]
        model_values = [o["value"] for g in result["configOptions"][0]["options"] for o in g["options"]]
        if "a:fast" in model_values:  # the proxy: bind to agent a's fast model, like a user picking it
            await self.conn.send_request("session/set_config_option",
                                         {"sessionId": self.session_id, "configId": "model", "value": "a:fast"})

    async def turn(self, record: bool) -> None:
        assert self.conn is not None
        self.mode = "code" if self.mode == "ask" else "ask"
        started = time.perf_counter()
        await self.conn.send_request("session/set_config_option",
                                     {"sessionId": self.session_id, "configId": "mode", "value": self.mode})
        request = time.perf_counter() - started
        self.chunk_times.clear()
        started = time.perf_counter()
        await self.conn.send_request("session/prompt", {"sessionId": self.session_id,
                                                        "prompt": [{"type": "text", "text": PROMPT}]})
        ended = time.perf_counter()
        times = list(self.chunk_times)
        if len(times) < 2:
            raise RuntimeError(f"{self.label}: the turn streamed {len(times)} chunks; need at least 2")
        if not record:
            return
        self.chunk_counts.append(len(times))
        self.samples["request"].append(request)
        self.samples["ttfc"].append(times[0] - started)
        self.samples["chunk"].append((times[-1] - times[0]) / (len(times) - 1))
        self.samples["arrival"].append(statistics.fmean(t - started for t in times))
        self.samples["turn"].append(ended - started)

    async def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.conn.close(), 2)
        if self.process is not None:
            if self.process.stdin is not None:
                self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), 5)
            except asyncio.TimeoutError:
                self.process.kill()
                await self.process.wait()


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": statistics.median(ordered), "mean": statistics.fmean(ordered),
            "p90": ordered[int(0.9 * (len(ordered) - 1))]}


async def run(turns: int, delay: float, warmup: int) -> dict[str, Any]:
    cwd = os.getcwd()
    demo = [*DEMO, "--delay", f"{delay:g}"]
    direct = Path("direct", demo)
    proxied = Path("proxied", [sys.executable, "-m", "acp_notebook.proxy",
                               "--agent", "a=" + json.dumps(demo), "--agent", "b=" + json.dumps(demo)])
    paths = (direct, proxied)
    try:
        for path in paths:
            await path.open(cwd)
        for index in range(warmup + turns):
            order = paths if index % 2 == 0 else paths[::-1]
            for path in order:
                await path.turn(record=index >= warmup)
    finally:
        for path in paths:
            await path.close()
    metrics: dict[str, Any] = {}
    for name in METRICS:
        d, p = summary(direct.samples[name]), summary(proxied.samples[name])
        metrics[name] = {"direct_ms": {k: v * 1000 for k, v in d.items()},
                         "proxied_ms": {k: v * 1000 for k, v in p.items()},
                         "ratio_median": p["median"] / d["median"], "ratio_mean": p["mean"] / d["mean"],
                         "added_ms_median": (p["median"] - d["median"]) * 1000}
    return {
        "turns": turns, "warmup": warmup, "delay_s": delay, "chunks_per_turn": statistics.fmean(direct.chunk_counts),
        "python": sys.version.split()[0], "machine": f"{platform.machine()} {os.cpu_count()} cpu",
        "metrics": metrics,
    }


def report(results: dict[str, Any]) -> str:
    lines = [f"{results['turns']} turns per path (+{results['warmup']} warm-up), demo --delay {results['delay_s']:g}, "
             f"{results['chunks_per_turn']:.1f} chunks per turn (mean), Python {results['python']}, {results['machine']}",
             "",
             f"{'metric':<8} {'direct ms':>10} {'proxied ms':>11} {'added ms':>9} {'ratio':>7}   (medians; mean ratio)"]
    for name, m in results["metrics"].items():
        lines.append(f"{name:<8} {m['direct_ms']['median']:>10.3f} {m['proxied_ms']['median']:>11.3f} "
                     f"{m['added_ms_median']:>9.3f} {m['ratio_median']:>7.3f}   ({m['ratio_mean']:.3f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--delay", type=float, default=0.0, help="the demo agent's pause between chunks (s)")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    results = asyncio.run(run(args.turns, args.delay, args.warmup))
    print(report(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
