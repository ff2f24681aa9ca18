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
- ``demo_agent_boot``: the demo agent alone (``acp-notebook demo-agent``), from spawning it to its answer to
  ``initialize`` (raw pipes, no client library): the floor under ``start``, since no client can have a session
  sooner; with whether it loaded the SDK's schema models (``demo_schema_loaded``).
- ``proxy_boot`` and ``replay_boot``: the same for ``acp-notebook proxy --agent d=demo`` and
  ``acp-notebook replay FILE`` (a recording of one demo turn, made once before the rounds), with
  whether the SDK's schema models were loaded in them by the time they exited (``*_schema_loaded``).

Usage: python bench/startup.py [--rounds 9] [--warmup 1] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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

# Spawn a server (the JSON list in argv[1]), send it initialize on raw pipes, time its answer. A server of
# ours started through _REPORTING says at exit whether it loaded the SDK's schema models.
_BOOT = """
import json, subprocess, sys, time
command, reports = json.loads(sys.argv[1]), sys.argv[2] == "reports"
t0 = time.perf_counter()
server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE if reports else subprocess.DEVNULL)
server.stdin.write(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,'
                   b'"clientCapabilities":{}}}\\n')
server.stdin.flush()
server.stdout.readline()
answered = time.perf_counter() - t0
server.stdin.close()
schema = json.loads(server.stderr.read().strip().splitlines()[-1]) if reports else None
server.wait()
print(json.dumps({"boot": answered, "schema_loaded": schema}))
"""

_REPORTING = ("import atexit, json, sys; atexit.register(lambda: print(json.dumps('acp.schema' in sys.modules), "
              "file=sys.stderr)); from acp_notebook.cli import main; sys.exit(main(sys.argv[1:]))")

_RECORD = """
import json, sys
import acp_notebook as acpnb
with acpnb.start("demo", cwd=sys.argv[1]) as agent:
    agent.record(sys.argv[2])
    agent.new_session().prompt("hello")
print(json.dumps({}))
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


def _child(code: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([PYTHON, "-c", code, *args], capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    if done.returncode != 0:
        raise RuntimeError(f"start-up child failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(rounds: int = 9, warmup: int = 1) -> dict[str, Any]:
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

    def server_boot(name: str, argv: list[str]) -> Callable[[], float]:
        def boot() -> float:
            found = _child(_BOOT, json.dumps([PYTHON, "-c", _REPORTING, *argv]), "reports")
            flags[f"{name}_schema_loaded"] = found["schema_loaded"]
            return float(found["boot"])
        return boot

    folder = Path(tempfile.mkdtemp(prefix="startup-bench-"))
    recording = folder / "demo.acp.jsonl"
    _child(_RECORD, str(folder), str(recording))

    bare_started = time.perf_counter()
    subprocess.run([PYTHON, "-c", "pass"], check=True)
    interpreter = time.perf_counter() - bare_started
    samples = alternate(rounds, {"import": importing, "sdk_import": sdk, "start": starting, "bare_sdk_start": bare,
                                 "demo_agent_boot": server_boot("demo", ["demo-agent", "--state-dir", str(folder)]),
                                 "proxy_boot": server_boot("proxy", ["proxy", "--agent", "d=demo"]),
                                 "replay_boot": server_boot("replay", ["replay", str(recording)])}, warmup=warmup)
    shutil.rmtree(folder, ignore_errors=True)
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
    parser.add_argument("--warmup", type=int, default=1, help="rounds run first and not kept (the quick run keeps none)")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    result = run(args.rounds, args.warmup)
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
