"""Run every benchmark, write ``bench/results.json`` and the results table in ``bench/README.md``.

Each benchmark runs in a process of its own (so one's agents, logs and memory cannot colour the
next) and hands back JSON. ``--quick`` runs them with tiny sizes and a single round: the numbers
mean nothing then, but every code path runs; CI uses it (tests/test_bench.py) to keep the
benchmarks working, and it never touches the committed results unless ``--out`` says so.

Usage: python bench/run.py [--quick] [--only client,proxy,...] [--out FILE] [--readme FILE | --no-readme]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import HERE, PYTHON, machine, run_process  # noqa: E402
from report import render_table, update_readme  # noqa: E402

# name -> (script, full-size arguments, quick arguments)
BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    "client": ("client_stream.py", ["--chunks", "20000", "--rounds", "7"], ["--chunks", "300", "--rounds", "1"]),
    "proxy": ("proxy_latency.py", ["--turns", "200", "--delays", "0,0.02"],
              ["--turns", "3", "--warmup", "1", "--delays", "0"]),
    "load": ("proxy_load.py", ["--sessions", "200", "--backends", "4", "--chunks", "20", "--delay", "0.05",
                               "--rounds", "5"],
             ["--sessions", "8", "--backends", "2", "--chunks", "5", "--delay", "0.01", "--rounds", "1"]),
    "notebook": ("notebook.py", ["--chunks", "20000", "--rounds", "10"],
                 ["--chunks", "300", "--rounds", "1", "--byte-scale", "0.01", "--growth-chunks", "400"]),
    "sweeps": ("sweeps.py", ["--trials", "1000", "--rounds", "4", "--reply", "1.0"],
               ["--trials", "4", "--rounds", "1", "--reply", "0.05", "--concurrency-rounds", "1"]),
    "startup": ("startup.py", ["--rounds", "9"], ["--rounds", "1", "--warmup", "0"]),
    "memory": ("memory.py", ["--repeats", "3"], ["--scale", "0.002", "--repeats", "1"]),
    "kernel_tools": ("kernel_tools.py", ["--rounds", "7"],
                     ["--variables", "50", "--frame-rows", "1000", "--inspect-rows", "1000", "--calls", "5",
                      "--rounds", "1"]),
    "workspaces": ("workspaces.py", ["--mb", "100", "--files", "2000", "--trials", "10", "--samples", "100"],
                   ["--mb", "2", "--files", "40", "--trials", "1", "--samples", "2"]),
}
# Run only when named (--only browser): it needs Debian's chromium and starts a JupyterLab.
ON_REQUEST: dict[str, tuple[str, list[str], list[str]]] = {
    "browser": ("browser.py", [], ["--keys", "5", "--turns", "3", "--turn-chars", "500", "--rounds", "1"]),
}


def run_one(name: str, quick: bool, scratch: Path) -> dict[str, Any]:
    script, full, small = {**BENCHMARKS, **ON_REQUEST}[name]
    target = scratch / f"{name}.json"
    started = time.monotonic()
    run_process([PYTHON, str(HERE / script), *(small if quick else full), "--json", str(target)], timeout=3600)
    result = json.loads(target.read_text(encoding="utf-8"))
    result["command"] = f".venv/bin/python bench/{script} {' '.join(small if quick else full)}"
    result["wall_s"] = round(time.monotonic() - started, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one round: for CI, not for numbers")
    parser.add_argument("--only", default="", help=f"comma-separated subset of: {', '.join(BENCHMARKS)}; also "
                                                   f"{', '.join(ON_REQUEST)} (only when named)")
    parser.add_argument("--out", default=None, help="results file (default: bench/results.json; "
                                                    "with --quick, a temporary file unless given)")
    parser.add_argument("--readme", default=str(HERE / "README.md"))
    parser.add_argument("--no-readme", action="store_true")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(BENCHMARKS)
    unknown = sorted(set(names) - set(BENCHMARKS) - set(ON_REQUEST))
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    results: dict[str, Any] = {"mode": "quick" if args.quick else "full", "machine": machine(),
                               "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "benchmarks": {}}
    with tempfile.TemporaryDirectory(prefix="acpnb-bench-") as scratch:
        for name in names:
            print(f"== {name}", flush=True)
            results["benchmarks"][name] = run_one(name, args.quick, Path(scratch))
    out = Path(args.out) if args.out else (Path(scratch).with_suffix(".json") if args.quick
                                           else HERE / "results.json")
    if args.only and out.exists():
        # A partial run updates those benchmarks in the existing results and keeps the others.
        earlier = json.loads(out.read_text(encoding="utf-8"))
        if earlier.get("mode") == results["mode"]:
            results["benchmarks"] = {**earlier.get("benchmarks", {}), **results["benchmarks"]}
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    table = render_table(results)
    print(table)
    print(f"results: {out}")
    if not args.no_readme and not args.quick:
        update_readme(Path(args.readme), table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
