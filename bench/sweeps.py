"""Benchmark 4: sweeps. Concurrency (wall time vs the slowest single run) and the machinery's cost per trial.

- ``concurrency``: ``acpnb.sweep`` of 8 prompts on the demo agent answering in about 1 s (its
  ``--delay`` set so that the reply's chunks are spread over ``--reply`` seconds), concurrency 8,
  against a sweep of a single one of those prompts: wall times from the call to its return, the
  agent's start included in both. With perfect concurrency the ratio is 1. Also reported: the
  8-prompt sweep's wall time over its slowest trial (that trial's own start to end, from its row),
  which counts the agent's start and the sweep's set-up as overhead.
- ``per_trial``: ``--trials`` trials of the benchmark agent (no delay, 10 chunks per reply), one at a
  time (concurrency 1), against the same trials done by a bare SDK client: for each, a new session,
  the model set, the prompt, the session closed, as a sweep trial does. Both start their own agent
  (the sweep's pool starts one for all its trials, as it does for every trial of an agent). Rounds
  alternate; the overhead per trial is (sweep time - bare time) / trials, from the medians.

Usage: python bench/sweeps.py [--trials 1000] [--rounds 4] [--reply 1.0] [--concurrency-rounds 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import LoadMeter, alternate, bench_agent, compare, demo_agent, emit  # noqa: E402

PROMPTS = [f"Tell me about tide pools, question {i}, at some length please" for i in range(8)]


def _demo_chunks(prompt: str) -> int:
    """How many chunks the demo agent's fast model streams for ``prompt`` (a pause precedes all but the first)."""
    import acp_notebook as acpnb

    with acpnb.start(demo_agent(0)) as agent:
        session = agent.new_session()
        session.set("model", "fast")
        turn = session.prompt(prompt)
        return sum(1 for u in turn.updates if u.get("sessionUpdate") == "agent_message_chunk")


def concurrency(reply: float = 1.0, runs: int = 8, rounds: int = 3) -> dict[str, Any]:
    """A sweep of ``runs`` prompts at concurrency ``runs`` vs a sweep of one of them, alternating."""
    import acp_notebook as acpnb

    chunks = _demo_chunks(PROMPTS[0])
    delay = reply / max(1, chunks - 1)
    acpnb.register("benchdemo", demo_agent(delay))
    in_sweep: list[float] = []

    def sweep(prompts: list[str]) -> float:
        started = time.perf_counter()
        result = acpnb.sweep(prompts, models=["benchdemo:fast"], concurrency=len(prompts), progress=False,
                             timeout=60)
        wall = time.perf_counter() - started
        bad = [r for r in result.rows if r["status"] != "ok"]
        if bad:
            raise RuntimeError(f"sweep trials failed: {bad[0].get('error')}")
        if len(prompts) > 1:
            slowest = max(_seconds(r["ended_at"]) - _seconds(r["started_at"]) for r in result.rows)
            in_sweep.append(wall / slowest)
        return wall

    samples = alternate(rounds, {"single": lambda: sweep(PROMPTS[:1]), "concurrent": lambda: sweep(PROMPTS[:runs])})
    result = compare(samples, "single", "concurrent")
    result.update(runs=runs, reply_s=reply, demo_chunks=chunks, demo_delay_s=delay, rounds=rounds,
                  wall_vs_slowest_trial=sorted(in_sweep)[len(in_sweep) // 2])
    return result


def _seconds(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


async def _bare_trials(argv: list[str], prompts: list[str]) -> None:
    """What a sweep trial does, written on the SDK alone: new session, model, prompt, close; one at a time."""
    from acp import spawn_agent_process, text_block
    from acp.schema import ClientCapabilities

    class Quiet:
        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            pass

        def on_connect(self, conn: Any) -> None:
            pass

    async with spawn_agent_process(Quiet(), argv[0], *argv[1:], cwd=os.getcwd()) as (conn, _process):
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        for prompt in prompts:
            session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
            await conn.set_config_option(session_id=session.session_id, config_id="model", value="fast")
            await conn.prompt(session_id=session.session_id, prompt=[text_block(prompt)])
            await conn.close_session(session_id=session.session_id)


def per_trial(trials: int = 1000, rounds: int = 4) -> dict[str, Any]:
    import acp_notebook as acpnb

    acpnb.register("bench", bench_agent(chunks=10))
    per_round = max(1, trials // rounds)
    counter = iter(range(10**9))

    def prompts() -> list[str]:
        # Distinct prompts: a sweep keys its samples by content.
        return [f"chunks=10 trial {next(counter)}" for _ in range(per_round)]

    processes: list[int] = []

    def sweep_side() -> float:
        batch = prompts()
        started = time.perf_counter()
        result = acpnb.sweep(batch, models=["bench:fast"], concurrency=1, progress=False, timeout=60)
        elapsed = time.perf_counter() - started
        if any(r["status"] != "ok" for r in result.rows) or len(result.rows) != len(batch):
            raise RuntimeError("sweep trials failed")
        # How many agent processes served the trials: one, when the agent is reused across them.
        processes.append(sum(len(a.get("pids") or ()) for a in result.metadata["agents"].values()))
        return elapsed

    def bare_side() -> float:
        batch = prompts()
        started = time.perf_counter()
        asyncio.run(_bare_trials(bench_agent(chunks=10), batch))
        return time.perf_counter() - started

    samples = alternate(rounds, {"bare_sdk": bare_side, "sweep": sweep_side}, warmup=1)
    result = compare(samples, "bare_sdk", "sweep")
    result.update(trials_per_round=per_round, rounds=rounds, agent_processes_per_sweep=max(processes),
                  overhead_per_trial_s=result["added"] / per_round,
                  bare_per_trial_s=result["bare_sdk"]["median"] / per_round,
                  sweep_per_trial_s=result["sweep"]["median"] / per_round)
    return result


def run(trials: int = 1000, rounds: int = 4, reply: float = 1.0, concurrency_rounds: int = 3) -> dict[str, Any]:
    meter = LoadMeter()
    out = {"concurrency": concurrency(reply, 8, concurrency_rounds), "per_trial": per_trial(trials, rounds)}
    out["load"] = meter.done()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--reply", type=float, default=1.0)
    parser.add_argument("--concurrency-rounds", type=int, default=3)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    result = run(args.trials, args.rounds, args.reply, args.concurrency_rounds)
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
