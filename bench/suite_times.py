"""Where a pytest run's time goes: per test module, the wall time of its tests, the CPU its worker spent
in them and the CPU of the processes they started (agents, proxies, kernels, CLIs).

    .venv/bin/python bench/suite_times.py [--top N] [pytest arguments ...]
    .venv/bin/python bench/suite_times.py -n 4 -m "not browser and not interop and not kernel and not slow"

Runs pytest with this file as a plugin (``-p suite_times``; xdist workers load it too). Each worker
appends one line per test to a temporary file: wall seconds from setup to teardown, the worker's own
CPU seconds, and the CPU of its child processes reaped meanwhile (``RUSAGE_CHILDREN``: an agent closed
by its test counts there; one reaped later counts for the test that reaped it). At the end the table
goes to stdout, the heaviest modules first, with the totals and the whole run's wall and CPU time.

Nothing here is asserted: timings belong in bench/, and docs/DEVELOPING.md ("Where the time goes")
says what the numbers led to. The plugin and the report run in the pytest and the calling process;
nothing is shared between threads.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

LOG_ENV = "ACPNB_SUITE_TIMES_LOG"  # the file workers append to; unset: the plugin does nothing
ROOT = Path(__file__).resolve().parent.parent


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    log = os.environ.get(LOG_ENV)
    if not log:
        yield
        return
    wall, own, children = time.monotonic(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    yield
    line = (f"{time.monotonic() - wall:.3f}\t{_cpu(resource.RUSAGE_SELF) - own:.3f}\t"
            f"{_cpu(resource.RUSAGE_CHILDREN) - children:.3f}\t{item.nodeid}\n")
    with open(log, "a", encoding="utf-8") as out:  # one short append per test: lines from workers do not mix
        out.write(line)


def module_table(lines: list[str]) -> list[tuple[str, int, float, float, float]]:
    """(module, tests, wall, own CPU, children's CPU) per module, the most CPU first."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for line in lines:
        wall, own, children, nodeid = line.rstrip("\n").split("\t", 3)
        row = totals[nodeid.split("::")[0]]
        row[0] += 1
        row[1] += float(wall)
        row[2] += float(own)
        row[3] += float(children)
    rows = [(module, int(r[0]), r[1], r[2], r[3]) for module, r in totals.items()]
    return sorted(rows, key=lambda row: -(row[3] + row[4]))


def report(lines: list[str], top: int, wall: float, cpu: float) -> str:
    rows = module_table(lines)
    out = [f"{'tests':>5} {'wall s':>8} {'own CPU':>8} {'children':>8}  module"]
    for module, tests, test_wall, own, children in rows[:top]:
        out.append(f"{tests:5d} {test_wall:8.1f} {own:8.1f} {children:8.1f}  {module}")
    tests = sum(row[1] for row in rows)
    own = sum(row[3] for row in rows)
    children = sum(row[4] for row in rows)
    out.append(f"{tests:5d} {sum(row[2] for row in rows):8.1f} {own:8.1f} {children:8.1f}  all {len(rows)} modules")
    out.append(f"the run: {wall:.1f} s wall, {cpu:.1f} s CPU (pytest, its workers and everything they started; "
               f"outside the tests, collection and start-up: {cpu - own - children:.1f} s)")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     usage="%(prog)s [--top N] [pytest arguments ...]")
    parser.add_argument("--top", type=int, default=25, help="modules to list (default 25)")
    args, pytest_args = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "times.tsv"
        log.touch()
        path = os.pathsep.join(p for p in (str(ROOT), str(ROOT / "bench"), os.environ.get("PYTHONPATH")) if p)
        env: dict[str, Any] = {**os.environ, LOG_ENV: str(log), "PYTHONPATH": path}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as the Makefile does
        started, cpu_before = time.monotonic(), _cpu(resource.RUSAGE_CHILDREN)
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "suite_times", "-p", "no:cacheprovider", "-q",
                               *pytest_args], cwd=ROOT, env=env, check=False)
        wall, cpu = time.monotonic() - started, _cpu(resource.RUSAGE_CHILDREN) - cpu_before
        print(report(log.read_text(encoding="utf-8").splitlines(), args.top, wall, cpu))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
