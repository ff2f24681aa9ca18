"""What every benchmark shares: the agents' command lines, alternating runs, summaries, machine facts.

Rules the benchmarks follow (bench/README.md explains why): two paths are always measured in the
same run, one after the other, swapping which goes first on each round, so that load from other
jobs on the machine hits both alike; what is reported is the median of each side and the ratio of
the medians (and the median of the per-round ratios, which is steadier under bursts of load).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PYTHON = sys.executable
BENCH_AGENT = [PYTHON, str(HERE / "agent.py")]
DEMO_AGENT = [PYTHON, "-m", "acp_notebook.demo"]


def bench_agent(**flags: Any) -> list[str]:
    """The benchmark agent's command line with ``--chunks`` / ``--size`` / ``--delay`` set."""
    argv = list(BENCH_AGENT)
    for key, value in flags.items():
        argv += [f"--{key}", f"{value:g}" if isinstance(value, float) else str(value)]
    return argv


def demo_agent(delay: float = 0.0) -> list[str]:
    return [*DEMO_AGENT, "--delay", f"{delay:g}"]


def stats(values: Sequence[float]) -> dict[str, float]:
    """Median, mean, min and max of ``values`` (seconds or any unit; unchanged)."""
    return {"median": statistics.median(values), "mean": statistics.fmean(values), "min": min(values),
            "max": max(values), "n": len(values)}


def alternate(rounds: int, sides: dict[str, Callable[[], float]], warmup: int = 1) -> dict[str, list[float]]:
    """Run each side once per round, the order reversed on every other round; ``warmup`` rounds are not kept.

    Each side is a callable that runs once and returns what it measured (seconds, usually).
    """
    names = list(sides)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for index in range(warmup + rounds):
        order = names if index % 2 == 0 else names[::-1]
        for name in order:
            value = sides[name]()
            if index >= warmup:
                samples[name].append(value)
    return samples


def compare(samples: dict[str, list[float]], base: str, other: str) -> dict[str, Any]:
    """``other`` against ``base``: both summaries, the ratio of medians and the median per-round ratio."""
    first, second = samples[base], samples[other]
    pairs = [b / a for a, b in zip(first, second) if a > 0]
    return {base: stats(first), other: stats(second),
            "ratio": statistics.median(second) / statistics.median(first),
            "ratio_of_rounds": statistics.median(pairs) if pairs else None,
            "added": statistics.median(second) - statistics.median(first)}


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def machine() -> dict[str, Any]:
    """Where the numbers were taken: CPU, cores, memory, OS, Python and the packages that matter."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory = round(pages * size / 2**30, 1)
    except (ValueError, OSError):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": memory, "os": platform.platform(),
            "python": platform.python_version(), "packages": versions(), "load_average_at_start": load_average(),
            "commit": _git_commit()}


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in ("acp-notebook", "agent-client-protocol", "pydantic", "ipykernel", "ipywidgets", "jupyter_client"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


class LoadMeter:
    """The machine's load while a benchmark ran: the 1-minute load average, sampled at start and end."""

    def __init__(self) -> None:
        self.start = load_average()
        self.started = time.monotonic()

    def done(self) -> dict[str, Any]:
        return {"load_average_start": self.start, "load_average_end": load_average(),
                "seconds": round(time.monotonic() - self.started, 1)}


def emit(result: Any, json_path: str | None) -> None:
    """A benchmark's result: printed as JSON, and written to ``json_path`` when given (``--json FILE``)."""
    text = json.dumps(result, indent=2)
    print(text)
    if json_path:
        Path(json_path).write_text(text + "\n", encoding="utf-8")


def run_process(argv: Sequence[str], *, timeout: float = 600, env: dict[str, str] | None = None) -> str:
    """Run a helper process from the repository's root; its stdout, or RuntimeError with its stderr's end."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, cwd=str(ROOT),
                          env={**os.environ, **(env or {})})
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv[1:3]))} failed ({done.returncode}): {done.stderr[-3000:]}")
    return done.stdout


def run_json(argv: Sequence[str], *, timeout: float = 600, env: dict[str, str] | None = None) -> Any:
    """Run a helper process that prints one JSON document on its last line of stdout, and return it."""
    return json.loads(run_process(argv, timeout=timeout, env=env).strip().splitlines()[-1])


async def relay_until_either_ends(agent: asyncio.subprocess.Process, from_client: Awaitable[Any],
                                  from_agent: Awaitable[Any]) -> None:
    """Run a relay's two directions until its client (end of stdin) or its agent goes; then end the agent's
    input, so it exits, and let its last output through. The relays never wait for a kill."""
    upstream = asyncio.ensure_future(from_client)
    downstream = asyncio.ensure_future(from_agent)
    await asyncio.wait((upstream, downstream), return_when=asyncio.FIRST_COMPLETED)
    upstream.cancel()
    assert agent.stdin is not None
    agent.stdin.close()
    await agent.wait()
    await downstream


async def open_client(argv: Sequence[str], cwd: str, name: str,
                      observe: Callable[[Any], None]) -> tuple[asyncio.subprocess.Process, Any]:
    """Start ``argv`` and speak to it with a bare SDK ``Connection`` (every frame also to ``observe``; the
    agent's requests are refused), initialized as client ``name``: the process and the connection."""
    from acp.connection import Connection

    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, cwd=cwd, limit=50 * 1024 * 1024)
    assert process.stdin is not None and process.stdout is not None

    async def refuse(method: str, params: Any, is_notification: bool) -> Any:
        return None

    conn = Connection(refuse, process.stdin, process.stdout, observers=[observe])
    await conn.send_request("initialize", {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False},
        "clientInfo": {"name": name, "version": "1"},
    })
    return process, conn


async def close_client(conn: Any, process: asyncio.subprocess.Process | None, wait: float = 5.0) -> None:
    """End a benchmark's client connection and the process it spoke to: the connection, then the process's
    stdin (it should exit on its own), then a kill after ``wait`` seconds."""
    if conn is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(conn.close(), 2)
    if process is None:
        return
    if process.stdin is not None:
        process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), wait)
    except asyncio.TimeoutError:
        process.kill()
        await process.wait()
