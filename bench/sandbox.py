"""Benchmark 8b: what sandbox="bwrap" adds to a workspace sweep's trials (issue 39 point 5).

The workspace sweep of benchmark 8 (``workspaces.py``'s ``overhead``: a small project copied per trial, a
file written through the client, graded by ``command("true")``), ``--trials`` trials of the demo agent at
concurrency 8, four ways in one go, rotating over ``--rounds``: without the sandbox; ``sandbox="bwrap"`` (one
sandboxed agent process per concurrency slot, its folder emptied and refilled between trials);
``sandbox="bwrap-trial"`` (an agent process per trial); ``sandbox="bwrap-shared"`` (one sandboxed agent for the
sweep, writable in all its workspaces). Per trial: its time from start to end minus the turn's own time and
the check's own time (``true`` run alone, unsandboxed): the trial's overhead, which includes what the sandbox
costs (a slot's emptying, a process start per trial for ``bwrap-trial``, the check's bwrap). Reported: each
side's median overhead and its ratio to the plain sweep, the wall times, the load average around each side,
and the demo agent's start alone (spawn to initialize answered) with and without bwrap.

Usage: python bench/sandbox.py [--trials 500] [--rounds 1] [--modes plain,bwrap,...] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import LoadMeter, emit, stats  # noqa: E402
from workspaces import _check_time, _seconds  # noqa: E402

MODELS = ("demo:fast", "demo:smart")


def sweep_overhead(trials: int, sandbox: str | None, concurrency: int = 8) -> dict[str, Any]:
    import acp_notebook as acpnb
    from acp_notebook.sweep import command

    meter = LoadMeter()
    project = Path(tempfile.mkdtemp(prefix="acpnb-bench-sandbox-", dir="/var/tmp"))
    try:
        for index in range(10):
            (project / f"module{index}.py").write_text(f"VALUE = {index}\n" * 20)
        prompts = [f"write trial {index} to out{index % 5}.txt" for index in range(trials // len(MODELS))]
        check_s = _check_time()
        started = time.perf_counter()
        result = acpnb.sweep(prompts, list(MODELS), workspace=project, scorers=[command("true", name="check")],
                             concurrency=concurrency, progress=False, timeout=120, sandbox=sandbox)
        wall = time.perf_counter() - started
    finally:
        shutil.rmtree(project, ignore_errors=True)
    bad = [r for r in result.rows if r["status"] != "ok" or r["score_check"] != 1.0 or r["files_changed"] != 1]
    if bad:
        raise RuntimeError(f"{len(bad)} of {len(result.rows)} trials failed: {bad[0].get('error')}")
    extra = [_seconds(r["ended_at"]) - _seconds(r["started_at"]) - r["duration_s"] - check_s for r in result.rows]
    return {"trials": len(result.rows), "sandbox": sandbox, "overhead_per_trial_s": stats(extra), "wall_s": wall,
            "agent_processes": result.metadata["agents"]["demo"]["processes"], "load": meter.done()}


def agent_start(sandbox: str | None, rounds: int = 9) -> dict[str, Any]:
    """``acpnb.start("demo")`` to initialize answered, then closed: the per-trial cost the sandbox brings."""
    import acp_notebook as acpnb

    cwd = tempfile.mkdtemp(prefix="acpnb-bench-start-", dir="/var/tmp")
    times = []
    try:
        for _ in range(rounds):
            started = time.perf_counter()
            agent = acpnb.start("demo", cwd=cwd, sandbox=sandbox)
            times.append(time.perf_counter() - started)
            agent.close()
    finally:
        shutil.rmtree(cwd, ignore_errors=True)
    return stats(times)


MODES = ("plain", "bwrap", "bwrap-trial", "bwrap-shared")


def run(trials: int, rounds: int, names: tuple[str, ...] = MODES) -> dict[str, Any]:
    meter = LoadMeter()
    sides: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for index in range(rounds):
        for side in names[index % len(names):] + names[:index % len(names)]:  # the ways rotate
            sides[side].append(sweep_overhead(trials, None if side == "plain" else side))
    medians = {side: statistics.median(r["overhead_per_trial_s"]["median"] for r in runs)
               for side, runs in sides.items()}
    return {"trials": trials, "rounds": rounds, **sides, "overhead_median_s": medians,
            "ratio": {side: medians[side] / medians["plain"] for side in names[1:]},
            "agent_start_s": {"plain": agent_start(None), "bwrap": agent_start("bwrap")}, "load": meter.done()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, plain first (default: {MODES})")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    names = tuple(args.modes.split(","))
    if names[0] != "plain" or not set(names) <= set(MODES):
        parser.error(f"--modes: plain first, then some of {MODES[1:]}")
    os.environ.setdefault("ACP_NOTEBOOK_DEMO_STATE", tempfile.mkdtemp(prefix="acpnb-bench-demo-", dir="/var/tmp"))
    emit(run(args.trials, args.rounds, names), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
