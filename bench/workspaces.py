"""Benchmark 7: per-trial workspaces. Set-up of a large repository per trial, and a workspace sweep's own cost.

- ``setup``: a repository of ``--mb`` MB (``--files`` files of text) made once, committed; then, per
  trial, what a trial waits for before its session opens (the copy made and its starting state noted:
  ``Workspace.create`` + ``mark_start``) and what follows the turn (``diff`` + ``remove``), for a git
  worktree of the repository and for a plain copy of the same files (``cp --reflink=auto``, a real copy
  on filesystems without copy-on-write, such as ext4 here). Medians over ``--trials``.
- ``overhead``: ``acpnb.sweep`` of ``--samples`` prompts x 3 models (two demo models and the demo agent
  registered under a second name) at concurrency 8, each trial in its own copy of a small project,
  writing a file through the client and graded by ``command("true")``. Per trial, its time from start
  to end minus the turn's own time (``duration_s``) and the check's own time (``true`` run alone, the
  median of 20): what the sweep adds for the workspace, the session, the diff, the check's plumbing and
  the clean-up. Also reported: wall time x 8 / trials minus the same, which adds the waits between trials,
  and the same per-trial measure for a fifth of the samples on one model at concurrency 1 (no trial
  competing for the CPU: the machinery's own cost).

Usage: python bench/workspaces.py [--mb 100] [--files 2000] [--trials 10] [--samples 100] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import LoadMeter, demo_agent, emit, stats  # noqa: E402


def make_repository(root: Path, megabytes: float, files: int) -> Path:
    """``files`` text files adding up to ``megabytes`` MB in nested folders, committed to a git repository."""
    repo = root / "repo"
    size = int(megabytes * 1024 * 1024 / files)
    line = "the quick brown fox jumps over the lazy dog 0123456789\n"
    for index in range(files):
        folder = repo / f"pkg{index % 20}" / f"mod{index % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        text = (f"# file {index}\n" + line * (size // len(line) + 1))[:size]
        (folder / f"file{index}.py").write_text(text)
    git = ["git", "-c", "user.email=bench@example.com", "-c", "user.name=bench"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    subprocess.run([*git, "add", "."], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-qm", "bench"], cwd=repo, check=True)
    return repo


async def _one(source: str, root: Path, name: str) -> tuple[float, float, str]:
    from acp_notebook.sweep.workspace import Workspace

    started = time.perf_counter()
    workspace = await Workspace.create(source, root, name)
    await workspace.mark_start(after_setup=False)
    ready = time.perf_counter()
    (workspace.path / "pkg0" / "mod0" / "file0.py").write_text("changed\n")
    await workspace.diff()
    await workspace.remove()
    return ready - started, time.perf_counter() - ready, workspace.method


def setup(megabytes: float, files: int, trials: int) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="acpnb-bench-ws-"))
    try:
        repo = make_repository(scratch, megabytes, files)
        plain = scratch / "plain"
        shutil.copytree(repo, plain, ignore=shutil.ignore_patterns(".git"))
        out: dict[str, Any] = {"megabytes": megabytes, "files": files, "trials": trials}
        for label, source in (("worktree", repo), ("copy", plain)):
            made, after, method = [], [], None
            for index in range(trials):
                ready_s, end_s, method = asyncio.run(_one(str(source), scratch / "work", f"{label}{index}"))
                made.append(ready_s)
                after.append(end_s)
            out[label] = {"method": method, "setup_s": stats(made), "diff_and_remove_s": stats(after)}
        return out
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _check_time() -> float:
    from acp_notebook.sweep.workspace import run_command

    async def runs() -> list[float]:
        return [(await run_command("true", ".", timeout=10)).duration_s for _ in range(20)]

    return statistics.median(asyncio.run(runs()))


def _seconds(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def overhead(samples: int, concurrency: int = 8, models: tuple[str, ...] = ("demo:fast", "demo:smart", "demo2:fast"),
             label: str = "c8") -> dict[str, Any]:
    import acp_notebook as acpnb
    from acp_notebook.sweep import command

    acpnb.register("demo2", demo_agent(0))
    project = Path(tempfile.mkdtemp(prefix="acpnb-bench-project-"))
    try:
        for index in range(10):
            (project / f"module{index}.py").write_text(f"VALUE = {index}\n" * 20)
        prompts = [f"write {label} trial {index} to out{index % 5}.txt" for index in range(samples)]
        check_s = _check_time()
        started = time.perf_counter()
        result = acpnb.sweep(prompts, list(models), workspace=project,
                             scorers=[command("true", name="check")], concurrency=concurrency, progress=False,
                             timeout=60)
        wall = time.perf_counter() - started
    finally:
        shutil.rmtree(project, ignore_errors=True)
    bad = [r for r in result.rows if r["status"] != "ok" or r["score_check"] != 1.0 or r["files_changed"] != 1]
    if bad:
        raise RuntimeError(f"{len(bad)} trials failed: {bad[0].get('error')}")
    extra = [_seconds(r["ended_at"]) - _seconds(r["started_at"]) - r["duration_s"] - check_s for r in result.rows]
    turn = statistics.median(r["duration_s"] for r in result.rows)
    return {"trials": len(result.rows), "concurrency": concurrency, "check_s": check_s, "turn_s": stats(
        [r["duration_s"] for r in result.rows]), "overhead_per_trial_s": stats(extra), "wall_s": wall,
            "wall_per_slot_minus_turn_and_check_s": wall * concurrency / len(result.rows) - turn - check_s}


def run(megabytes: float, files: int, trials: int, samples: int) -> dict[str, Any]:
    meter = LoadMeter()
    out = {"setup": setup(megabytes, files, trials), "overhead": overhead(samples),
           "overhead_one_at_a_time": overhead(max(2, samples // 5), 1, ("demo:fast",), "c1")}
    out["load"] = meter.done()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    os.environ.setdefault("ACP_NOTEBOOK_DEMO_STATE", tempfile.mkdtemp(prefix="acpnb-bench-demo-"))
    emit(run(args.mb, args.files, args.trials, args.samples), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
