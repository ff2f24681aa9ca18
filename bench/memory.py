"""Benchmark 6: memory. RSS after a very long turn and after a long session, for the same text cut into few or many chunks.

If the client's memory grows with the text it keeps (the turns' text, which a user reads), a
reply cut into 200,000 small chunks costs about what the same reply in 2,000 large chunks costs. If
it grows with the number of chunks (a dict per frame in ``agent.log``, an update per chunk in the
turn), the small-chunk run costs many times more. Each case runs in a fresh process (RSS is a
process-wide figure, and Python rarely returns freed memory), three times; medians are reported.

Cases (same text in each pair):
- ``long_turn``: one turn of 200,000 chunks of 12 characters vs 2,000 chunks of 1,200 characters;
- ``long_session``: 1,000 turns of 200 chunks of 12 characters vs 1,000 turns of 2 chunks of 1,200.

Each child reports RSS before the first turn and after the last (after ``gc.collect()``), the text
kept, ``len(agent.log)`` and the log's own size estimate (``agent.log_bytes``, which its bound caps).
A last case, a 400,000-chunk turn, gives the marginal cost of a chunk once the log is at its bound:
what RSS outside the log grows by per further chunk, against the characters each one adds.

Usage: python bench/memory.py [--scale 1.0] [--json FILE]
       python bench/memory.py --child --chunks N --size S --turns T   (one measurement)
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import PYTHON, LoadMeter, bench_agent, emit, run_json  # noqa: E402

CASES = {
    "long_turn": [{"chunks": 200_000, "size": 12, "turns": 1}, {"chunks": 2_000, "size": 1_200, "turns": 1}],
    "long_session": [{"chunks": 200, "size": 12, "turns": 1_000}, {"chunks": 2, "size": 1_200, "turns": 1_000}],
}


def rss_bytes() -> int:
    """This process's resident set size, from /proc (Linux) or psutil."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import psutil

    return int(psutil.Process().memory_info().rss)


def child(chunks: int, size: int, turns: int) -> dict[str, Any]:
    """One measurement, in this (fresh) process."""
    import acp_notebook as acpnb
    from acp_notebook import client

    with acpnb.start(bench_agent(size=size)) as agent:
        session = agent.new_session()
        session.prompt("chunks=2")  # the first turn loads the code paths: not counted
        gc.collect()
        before = rss_bytes()
        for _ in range(turns):
            session.prompt(f"chunks={chunks}")
        gc.collect()
        after = rss_bytes()
        text = sum(len(turn.text) for turn in session.turns[1:])  # the warm-up turn is not counted
        log_bytes = getattr(agent, "log_bytes", None)
        result = {"chunks": chunks, "size": size, "turns": turns, "rss_before": before, "rss_after": after,
                  "growth": after - before, "text_chars": text, "log_entries": len(agent.log),
                  "log_bytes_estimate": log_bytes() if callable(log_bytes) else log_bytes,
                  "log_limit_entries": getattr(client, "LOG_LIMIT", None),
                  "log_limit_bytes": getattr(client, "LOG_LIMIT_BYTES", None)}
    return result


def run(scale: float = 1.0, repeats: int = 3) -> dict[str, Any]:
    """Both cases, each side ``repeats`` times (alternating); ``scale`` shrinks the chunk and turn counts (CI)."""
    meter = LoadMeter()
    out: dict[str, Any] = {}
    for name, sides in CASES.items():
        runs: list[list[dict[str, Any]]] = [[], []]
        for index in range(repeats):
            order = (0, 1) if index % 2 == 0 else (1, 0)
            for side in order:
                spec = sides[side]
                turns = max(1, int(spec["turns"] * scale)) if name == "long_session" else spec["turns"]
                chunks = max(2, int(spec["chunks"] * scale)) if name == "long_turn" else spec["chunks"]
                runs[side].append(run_json([PYTHON, __file__, "--child", "--chunks", str(chunks),
                                            "--size", str(spec["size"]), "--turns", str(turns)], timeout=1800))
        out[name] = _summary(*runs)
    out["long_turn"]["marginal"] = _marginal(out["long_turn"]["many_chunks"], scale, repeats)
    out["load"] = meter.done()
    return out


def _marginal(many: dict[str, Any], scale: float, repeats: int) -> dict[str, Any]:
    """A turn twice as long as the long turn: what each further chunk costs outside ``agent.log``, against
    the characters it adds. Once the log is at its bound, that should be the text and a few bytes."""
    chunks, size = many["chunks"], many["size"]
    runs = [run_json([PYTHON, __file__, "--child", "--chunks", str(2 * chunks), "--size", str(size), "--turns", "1"],
                     timeout=1800) for _ in range(repeats)]
    outside = statistics.median(r["growth"] - (r["log_bytes_estimate"] or 0) for r in runs)
    return {"chunks": 2 * chunks, "outside_log_median": outside,
            "bytes_per_chunk": (outside - many["outside_log_median"]) / chunks, "text_bytes_per_chunk": size}


def _summary(many: list[dict[str, Any]], few: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of each side, and what the many-chunk side costs more: in all, and outside ``agent.log``
    (which holds the latest frames up to its own bound, so beyond it a flood of chunks costs nothing more)."""
    def median(side: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in side)

    for side in (many, few):
        for r in side:
            r["outside_log"] = r["growth"] - (r["log_bytes_estimate"] or 0)
    chunks_many = many[0]["chunks"] * many[0]["turns"]
    chunks_few = few[0]["chunks"] * few[0]["turns"]
    extra_chunks = max(1, chunks_many - chunks_few)
    growth = (median(many, "growth"), median(few, "growth"))
    outside = (median(many, "outside_log"), median(few, "outside_log"))
    return {
        "many_chunks": many[-1] | {"growth_median": growth[0], "outside_log_median": outside[0]},
        "few_chunks": few[-1] | {"growth_median": growth[1], "outside_log_median": outside[1]},
        "text_chars": many[0]["text_chars"],
        "growth_ratio": growth[0] / growth[1] if growth[1] > 0 else None,
        "extra_bytes_per_chunk": (growth[0] - growth[1]) / extra_chunks,
        "outside_log_ratio": outside[0] / outside[1] if outside[1] > 0 else None,
        "outside_log_extra_bytes_per_chunk": (outside[0] - outside[1]) / extra_chunks,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", action="store_true", help="run one measurement in this process")
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--size", type=int, default=12)
    parser.add_argument("--turns", type=int, default=1)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.chunks, args.size, args.turns)))
        return 0
    result = run(args.scale, args.repeats)
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
