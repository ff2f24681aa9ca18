"""Benchmark 5: start-up. ``import acp_notebook`` in a fresh interpreter, and ``acpnb.start("demo")`` to a ready session.

Each sample is a new Python process, so nothing is cached in memory (the files are in the OS's page
cache after the first run, as they are for a user who imports the package twice). Measured inside
the child with ``time.perf_counter``:

- ``import``: ``import acp_notebook`` (and whether it pulled in the SDK or pydantic);
- ``sdk_import``: ``import acp`` alone, the SDK's own cost, which the package defers until an
  agent is started;
- ``start``: after the import, ``acpnb.start("demo")`` and ``agent.new_session()``: the demo agent
  spawned, initialized, a session opened with its options (the SDK is imported on the way, so its
  import is part of this time).
- ``bare_sdk_start``: the same done by a bare SDK client in a fresh process, from ``import acp`` to the
  session opened, against ``import_and_start``: ours from ``import acp_notebook`` to the session.
- ``demo_agent_boot``: the demo agent alone, from spawning it to its answer to ``initialize`` (raw
  pipes, no client library): the floor under ``start``, since no client can have a session sooner.

Usage: python bench/startup.py [--rounds 9] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, ROOT, LoadMeter, alternate, emit, stats  # noqa: E402

_IMPORT = """
import time, json, sys
t0 = time.perf_counter()
import acp_notebook
t1 = time.perf_counter()
print(json.dumps({"import": t1 - t0, "sdk_loaded": "acp" in sys.modules, "pydantic_loaded": "pydantic" in sys.modules}))
"""

_SDK = """
import time, json
t0 = time.perf_counter()
import acp
print(json.dumps({"sdk_import": time.perf_counter() - t0}))
"""

_AGENT_BOOT = """
import json, subprocess, sys, time
t0 = time.perf_counter()
agent = subprocess.Popen([sys.executable, "-m", "acp_notebook.demo"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
agent.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,'
                  b'"clientCapabilities":{}}}\\n')
agent.stdin.flush()
agent.stdout.readline()
answered = time.perf_counter() - t0
agent.stdin.close()
agent.wait()
print(json.dumps({"agent_boot": answered}))
"""

_BARE_START = """
import time, json, os, sys, asyncio
t0 = time.perf_counter()
import acp
from acp.schema import ClientCapabilities


class Quiet:
    async def session_update(self, session_id, update, **kwargs):
        pass

    def on_connect(self, conn):
        pass


async def main():
    async with acp.spawn_agent_process(Quiet(), sys.executable, "-m", "acp_notebook.demo", cwd=os.getcwd()) as (c, _):
        await c.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        await c.new_session(cwd=os.getcwd(), mcp_servers=[])
        return time.perf_counter()

ready = asyncio.run(main())
print(json.dumps({"import_and_start": ready - t0}))
"""

_START = """
import time, json
t_import = time.perf_counter()
import acp_notebook as acpnb
t0 = time.perf_counter()
agent = acpnb.start("demo")
t1 = time.perf_counter()
session = agent.new_session()
t2 = time.perf_counter()
assert session.config.ids(), "the demo session has options"
agent.close()
print(json.dumps({"start": t2 - t0, "initialize": t1 - t0, "new_session": t2 - t1, "import_and_start": t2 - t_import}))
"""


def _child(code: str) -> dict[str, Any]:
    done = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    if done.returncode != 0:
        raise RuntimeError(f"start-up child failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(rounds: int = 9) -> dict[str, Any]:
    meter = LoadMeter()
    seen: dict[str, list[float]] = {"import": [], "sdk_import": [], "initialize": [], "new_session": [],
                                     "import_and_start": []}
    flags: dict[str, bool] = {}

    def importing() -> float:
        found = _child(_IMPORT)
        flags.update(sdk_loaded=found["sdk_loaded"], pydantic_loaded=found["pydantic_loaded"])
        seen["import"].append(found["import"])
        return found["import"]

    def sdk() -> float:
        found = _child(_SDK)
        seen["sdk_import"].append(found["sdk_import"])
        return found["sdk_import"]

    def starting() -> float:
        found = _child(_START)
        seen["initialize"].append(found["initialize"])
        seen["new_session"].append(found["new_session"])
        seen["import_and_start"].append(found["import_and_start"])
        return found["start"]

    def bare() -> float:
        return float(_child(_BARE_START)["import_and_start"])

    def agent_boot() -> float:
        return float(_child(_AGENT_BOOT)["agent_boot"])

    bare_started = time.perf_counter()
    subprocess.run([PYTHON, "-c", "pass"], check=True)
    interpreter = time.perf_counter() - bare_started
    samples = alternate(rounds, {"import": importing, "sdk_import": sdk, "start": starting, "bare_sdk_start": bare,
                                 "demo_agent_boot": agent_boot}, warmup=1)
    result: dict[str, Any] = {name: stats(values) for name, values in samples.items()}
    ours = seen["import_and_start"][-rounds:]
    result["import_and_start"] = stats(ours)
    result["import_and_start_vs_bare_sdk"] = statistics.median(ours) / statistics.median(samples["bare_sdk_start"])
    result["start_vs_demo_agent_boot"] = statistics.median(samples["start"]) / statistics.median(
        samples["demo_agent_boot"])
    result["start_phases"] = {"initialize": stats(seen["initialize"][-rounds:]),
                              "new_session": stats(seen["new_session"][-rounds:])}
    result.update(flags, rounds=rounds, interpreter_start_s=interpreter, load=meter.done())
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    result = run(args.rounds)
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
