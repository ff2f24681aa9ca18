"""Benchmark 7: the kernel tools (issue 24). Times taken in this process, whose main thread plays the
kernel thread (it runs the tools' work while it waits in ``_loop.run_sync``, the pump's blocking path):

- ``list_variables``: one call over ``--variables`` variables, ten of them DataFrames of ``--frame-rows``
  rows (target: under 100 ms for 1,000 variables with ten 1M-row frames);
- ``inspect_variable``: one call on a ``--inspect-rows`` x 20 float DataFrame (target: under 300 ms for 1M rows);
- ``bridge`` vs ``direct``: the same small call (``inspect_variable`` on a short list) through the official
  MCP client and the bridge process, against ``KernelTools.call`` in process, alternating (target: the
  bridge adds under 5 ms);
- ``start``: what the kernel tools add to starting a session: ``KernelTools.start()``, imports included,
  in a fresh process that has already started the demo agent and a session, so what a notebook has
  loaded by then is loaded (target: under 50 ms); and, reported, what the first connection still waits
  for (the rest of the MCP SDK's import, which ``start()`` begins in a worker thread).

Usage: python bench/kernel_tools.py [--variables 1000] [--frame-rows 1000000] [--inspect-rows 1000000]
       [--calls 200] [--rounds 7] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, ROOT, LoadMeter, alternate, emit, run_json, stats  # noqa: E402

sys.path.insert(0, str(ROOT))

_START = """
import json, sys, time
sys.path.insert(0, {root!r})
import acp_notebook as acpnb
from acp_notebook import _loop
agent = acpnb.start("demo")  # what a notebook has loaded by the time it starts a session
agent.new_session()
t0 = time.perf_counter()
from acp_notebook.kernel_tools import KernelTools
tools = KernelTools(policy="ask")
_loop.run_sync(tools.start(), 30)
started = time.perf_counter() - t0
t1 = time.perf_counter()
_loop.run_sync(tools._mcp_server(), 60)
first_connection = time.perf_counter() - t1
_loop.run_sync(tools.close(), 30)
agent.close()
print(json.dumps({{"start": started, "first_connection": first_connection}}))
"""


def namespace(variables: int, frame_rows: int, inspect_rows: int) -> dict[str, Any]:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    found: dict[str, Any] = {}
    for index in range(10):
        found[f"frame_{index}"] = pd.DataFrame({"a": rng.random(frame_rows), "b": rng.integers(0, 9, frame_rows),
                                                "c": rng.random(frame_rows)})
    for index in range(variables - 10):
        found[f"value_{index}"] = [index, str(index)] if index % 3 else {"n": index} if index % 2 else f"text {index}"
    found["wide"] = pd.DataFrame(rng.random((inspect_rows, 20)), columns=[f"col_{i}" for i in range(20)])
    found["small"] = [1, 2, 3]
    return found


def timed(call: Any) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def run(args: argparse.Namespace) -> dict[str, Any]:
    from acp_notebook import _loop
    from acp_notebook.kernel_tools import KernelTools
    from acp_notebook.kernel_tools.client import open_kernel_tools

    meter = LoadMeter()
    tools = KernelTools(policy="read-only", namespace=namespace(args.variables, args.frame_rows, args.inspect_rows))
    entry = _loop.run_sync(tools.start(), 30)

    def call(tool: str, arguments: dict[str, Any]) -> Any:
        answer = _loop.run_sync(tools.call(tool, arguments), 60)
        assert not answer.is_error, answer.text_of()
        return answer

    listing = [timed(lambda: call("list_variables", {})) for _ in range(args.rounds + 1)][1:]
    inspecting = [timed(lambda: call("inspect_variable", {"name": "wide"})) for _ in range(args.rounds + 1)][1:]

    async def through_bridge() -> list[float]:
        samples = []
        async with open_kernel_tools(entry) as session:
            for _ in range(args.calls + 5):
                started = time.perf_counter()
                await session.call_tool("inspect_variable", {"name": "small"})
                samples.append(time.perf_counter() - started)
        return samples[5:]

    def direct_calls() -> float:
        return statistics.median([timed(lambda: call("inspect_variable", {"name": "small"}))
                                  for _ in range(args.calls)])

    def bridge_calls() -> float:
        return statistics.median(_loop.run_sync(through_bridge(), 600))

    paired = alternate(args.rounds, {"direct": direct_calls, "bridge": bridge_calls})
    _loop.run_sync(tools.close(), 30)
    starts = [run_json([PYTHON, "-c", _START.format(root=str(ROOT))]) for _ in range(args.rounds)]
    return {"variables": args.variables, "frame_rows": args.frame_rows, "inspect_rows": args.inspect_rows,
            "calls": args.calls, "rounds": args.rounds,
            "list_variables": stats(listing), "inspect_variable": stats(inspecting),
            "direct_call": stats(paired["direct"]), "bridge_call": stats(paired["bridge"]),
            "bridge_added_s": statistics.median(paired["bridge"]) - statistics.median(paired["direct"]),
            "start": stats([found["start"] for found in starts]),
            "first_connection": stats([found["first_connection"] for found in starts]),
            "load": meter.done()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variables", type=int, default=1000)
    parser.add_argument("--frame-rows", type=int, default=1_000_000)
    parser.add_argument("--inspect-rows", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    emit(run(args), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
