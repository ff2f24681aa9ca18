"""The proxy's added latency: the same demo agent reached directly and through the proxy, in one run.

The connections are open at once and turns go round them (the order rotated every turn), so
machine noise hits all alike. The client is a bare SDK Connection (no acp-notebook client code),
so the ratios are the proxy's own cost. Two more paths give the floors under the proxy's figures:
bench/relay.py, a bare relay that only decodes and re-encodes each line (what any extra Python
process costs here), and bench/sdk_relay.py, two SDK Connections forwarding requests, answers and
notifications and nothing else (what any proxy on the SDK's JSON-RPC layer costs, as ours is).

Measured per turn, on each path:
  request   round trip of session/set_config_option (the mode toggled, a small request/answer)
  ttfc      prompt sent -> first streamed chunk received
  chunk     steady-state time per streamed chunk: (last chunk - first chunk) / (chunks - 1)
  arrival   mean over the turn's chunks of (chunk received - prompt sent): each chunk's latency
  turn      prompt sent -> prompt answered

Usage: python bench/proxy_latency.py [--turns 200] [--delay 0 | --delays 0,0.02] [--json results.json]
(``--delays``: one run per delay, in turn; the JSON then maps each delay to its results.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path as PathLib
from typing import Any

from acp.connection import Connection, StreamDirection, StreamEvent

sys.path.insert(0, str(PathLib(__file__).resolve().parent))

from common import LoadMeter, close_client, open_client  # noqa: E402

DEMO = [sys.executable, "-m", "acp_notebook.demo"]
RELAY = PathLib(__file__).resolve().parent / "relay.py"
SDK_RELAY = PathLib(__file__).resolve().parent / "sdk_relay.py"
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
        self.process, self.conn = await open_client(self.argv, cwd, "proxy-latency-bench", self.observe)
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
        await close_client(self.conn, self.process)


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": statistics.median(ordered), "mean": statistics.fmean(ordered),
            "p90": ordered[int(0.9 * (len(ordered) - 1))]}


def compare(base: Path, other: Path) -> dict[str, Any]:
    """Each metric of ``other`` against ``base``: both summaries (ms), the ratios and the added median."""
    metrics: dict[str, Any] = {}
    for name in METRICS:
        d, p = summary(base.samples[name]), summary(other.samples[name])
        metrics[name] = {"direct_ms": {k: v * 1000 for k, v in d.items()},
                         "proxied_ms": {k: v * 1000 for k, v in p.items()},
                         "ratio_median": p["median"] / d["median"], "ratio_mean": p["mean"] / d["mean"],
                         "added_ms_median": (p["median"] - d["median"]) * 1000}
    return metrics


async def run(turns: int, delay: float, warmup: int) -> dict[str, Any]:
    """Direct, through a bare relay (bench/relay.py: the floor of any Python proxy), through an SDK relay
    (bench/sdk_relay.py: the floor of a proxy on the SDK) and through the proxy, round-robin with the
    order rotated every turn."""
    cwd = os.getcwd()
    demo = [*DEMO, "--delay", f"{delay:g}"]
    direct = Path("direct", demo)
    relay = Path("relay", [sys.executable, str(RELAY), json.dumps(demo)])
    sdk_relay = Path("sdk relay", [sys.executable, str(SDK_RELAY), json.dumps(demo)])
    proxied = Path("proxied", [sys.executable, "-m", "acp_notebook.proxy",
                               "--agent", "a=" + json.dumps(demo), "--agent", "b=" + json.dumps(demo)])
    paths = (direct, relay, sdk_relay, proxied)
    try:
        for path in paths:
            await path.open(cwd)
        for index in range(warmup + turns):
            shift = index % len(paths)
            for path in paths[shift:] + paths[:shift]:
                await path.turn(record=index >= warmup)
    finally:
        for path in paths:
            await path.close()
    return {
        "turns": turns, "warmup": warmup, "delay_s": delay, "chunks_per_turn": statistics.fmean(direct.chunk_counts),
        "python": sys.version.split()[0], "machine": f"{platform.machine()} {os.cpu_count()} cpu",
        "metrics": compare(direct, proxied), "relay_metrics": compare(direct, relay),
        "sdk_relay_metrics": compare(direct, sdk_relay), "beyond_relay_metrics": compare(relay, proxied),
        "beyond_sdk_relay_metrics": compare(sdk_relay, proxied),
    }


def report(results: dict[str, Any]) -> str:
    lines = [f"{results['turns']} turns per path (+{results['warmup']} warm-up), demo --delay {results['delay_s']:g}, "
             f"{results['chunks_per_turn']:.1f} chunks per turn (mean), Python {results['python']}, {results['machine']}",
             "",
             f"{'metric':<8} {'direct ms':>10} {'proxied ms':>11} {'added ms':>9} {'ratio':>7}   (medians; mean ratio)"]
    for name, m in results["metrics"].items():
        lines.append(f"{name:<8} {m['direct_ms']['median']:>10.3f} {m['proxied_ms']['median']:>11.3f} "
                     f"{m['added_ms_median']:>9.3f} {m['ratio_median']:>7.3f}   ({m['ratio_mean']:.3f})")
    for key, what in (("relay_metrics", "a bare relay (bench/relay.py): the floor of any extra Python process"),
                      ("sdk_relay_metrics", "an SDK relay (bench/sdk_relay.py): the floor of a proxy on the SDK")):
        floor = results.get(key)
        if not floor:
            continue
        lines += ["", f"{what}, against direct",
                  f"{'metric':<8} {'direct ms':>10} {'floor ms':>11} {'added ms':>9} {'ratio':>7}"]
        for name, m in floor.items():
            lines.append(f"{name:<8} {m['direct_ms']['median']:>10.3f} {m['proxied_ms']['median']:>11.3f} "
                         f"{m['added_ms_median']:>9.3f} {m['ratio_median']:>7.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--delay", type=float, default=0.0, help="the demo agent's pause between chunks (s)")
    parser.add_argument("--delays", help="several delays, comma-separated: one run each")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    if args.delays:
        meter = LoadMeter()
        results: dict[str, Any] = {"by_delay": {}}
        for delay in (float(d) for d in args.delays.split(",")):
            one = asyncio.run(run(args.turns, delay, args.warmup))
            print(report(one), end="\n\n")
            results["by_delay"][f"{delay:g}"] = one
        results["load"] = meter.done()
    else:
        results = asyncio.run(run(args.turns, args.delay, args.warmup))
        print(report(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
