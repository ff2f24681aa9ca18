"""Where a long streamed turn spends its time in acp-notebook's client: cProfile on the loop thread.

cProfile only sees the thread it is enabled on, and the frames of a turn are read and applied on the
package's background loop thread, so the profiler is switched on and off there (through
``_loop.call_soon``) around one turn prompted from this thread.

Usage: python bench/profile_client.py [--chunks 20000] [--sort tottime] [--top 35] [--out FILE.prof]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import bench_agent  # noqa: E402


def _on_loop(function: object) -> None:
    from acp_notebook import _loop

    done = threading.Event()

    def call() -> None:
        function()  # type: ignore[operator]
        done.set()

    _loop.call_soon(call)
    done.wait(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--sort", default="tottime")
    parser.add_argument("--top", type=int, default=35)
    parser.add_argument("--out", metavar="FILE", help="also save the raw profile (for snakeviz, pstats)")
    args = parser.parse_args(argv)
    import acp_notebook as acpnb

    with acpnb.start(bench_agent()) as agent:
        session = agent.new_session()
        session.prompt(f"chunks={min(args.chunks, 2000)}")  # warm-up
        profile = cProfile.Profile()
        _on_loop(profile.enable)
        started = time.perf_counter()
        turn = session.prompt(f"chunks={args.chunks}")
        elapsed = time.perf_counter() - started
        _on_loop(profile.disable)
    print(f"{args.chunks} chunks, {len(turn.text)} characters in {elapsed:.3f} s (under the profiler)")
    stats = pstats.Stats(profile)
    if args.out:
        stats.dump_stats(args.out)
    stats.sort_stats(args.sort).print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
