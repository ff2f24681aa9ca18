"""How long the protocol inspector takes to open on a 1,000-frame session with its kernel tools' MCP messages
(issue 35, point 6: under 1 s).

A demo-agent session (in memory) asks about a variable over and over, each turn a few ACP frames and four MCP
messages, until the agent's log and the session's MCP log together hold ``--frames`` entries; then, timed each
``--rounds`` times: what ``%acp log`` does before the table shows: ``ProtocolInspector(agent)`` (catch up, analyze,
draw the table) and its first saved form (``_static``: the output it publishes); then how long the schema checks
left to the renders that follow take to finish (the table's marks fill in meanwhile). Prints JSON (``--json FILE``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def fill(agent, frames: int) -> int:
    session = agent.new_session()
    vars(sys.modules["__main__"])["bench_total"] = 1491
    while len(agent.log) + len(session.kernel_tools.mcp_frames()) < frames:
        session.prompt("what is in bench_total?", timeout=60)
    return len(agent.log) + len(session.kernel_tools.mcp_frames())


def run(frames: int = 1000, rounds: int = 5) -> dict:
    import acp_notebook as acpnb
    from acp_notebook.demo.agent import DemoAgent
    from acp_notebook.widgets.inspector import ProtocolInspector

    with tempfile.TemporaryDirectory() as cwd, acpnb.start(DemoAgent(), kernel_tools="read-only", cwd=cwd,
                                                            timeout=60) as agent:
        total = fill(agent, frames)
        opens, checked, mcp = [], [], 0
        for _ in range(rounds):
            began = time.perf_counter()
            inspector = ProtocolInspector(agent)  # as %acp log opens it (the newest 500 rows shown)
            inspector._static()
            opens.append(time.perf_counter() - began)
            shown = inspector.visible()  # the rows the table shows: those its renders check
            while not all(row.checked for row in shown) and time.perf_counter() - began < 120:
                time.sleep(0.05)
            rows = inspector._analyzer.rows
            checked.append(time.perf_counter() - began)
            mcp = sum(1 for row in rows if row.protocol == "mcp")
            inspector.close()
    return {"entries": total, "mcp_rows": mcp, "open_s": {"median": statistics.median(opens), "max": max(opens)},
            "all_checked_s": {"median": statistics.median(checked), "max": max(checked)}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    result = run(args.frames, args.rounds)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
