"""Benchmark 3: a 20,000-chunk turn rendered by a ``%%acp`` cell in a real kernel.

A kernel is started with jupyter_client (as JupyterLab would), the extension loaded and the
benchmark agent started with ``%acp start -- python bench/agent.py``. Each round then:

1. submits ``%%acp --no-wait`` with a prompt asking for ``--chunks`` chunks: the cell returns at once
   and the reply streams into its widgets from the package's background thread (a waiting cell
   would hold the kernel's queue until the turn ends, so no other cell could run meanwhile);
2. while the reply streams, submits a trivial cell (``1``) as soon as the first chunks show and again
   ``--gap`` seconds after each one is done, and times each from sending the request until the
   kernel is idle again: how long a user waits for a cell run mid-stream;
3. counts the widget messages the kernel sent for the turn (``comm_msg``: the updates of the view's
   widgets; ``comm_open`` / ``comm_close``: creating and closing them) until the view is replaced by
   its static form. Before each long turn a one-chunk turn measures what every cell costs (its first
   and last renders): the constant. ``comm_msg_per_s`` is (messages - constant) / the seconds the
   turn streamed (``turn.duration_s``, read from the kernel afterwards).

Then the bytes a turn sends to the frontend (issue 36), one waiting ``%%acp`` cell per case: every iopub
message's content from the cell's request until the kernel is idle again, counted as jupyter_client
packs it (comm messages and display updates together), against what the turn shows: its content (the
reply's text, the tool calls' diffs, the plan's rows) and its final HTML form. The cases: a 200 kB reply
streamed over 20 s and over 120 s, 300 tool calls each with a 2 kB diff and three status updates, 2,000
plan updates (``BYTE_CASES``; ``--byte-scale`` shrinks them). Each case also gives the size of its cell
as nbformat saves it.

Then whether the kernel's work per streamed chunk grows with the reply (issue 36, item 4): a 200 kB reply
streamed over 20 s (``--growth-chunks`` chunks of 50 characters) with a small cell run every ``--growth-gap``
seconds meanwhile, which reads how much of the reply has arrived; each such cell's wait, and the kernel
process's CPU time (user and system, from /proc through psutil) between two of them, are put against the
reply's progress. ``growth`` compares the first fifth of the reply with the last: the kernel's CPU per chunk
and the cells' waits (median, p90).

Usage: python bench/notebook.py [--chunks 20000] [--rounds 3] [--byte-cases reply_20s,...] [--byte-scale 1]
       [--growth-chunks 4000] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import queue
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import LoadMeter, bench_agent, emit, stats  # noqa: E402

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
TRIVIAL_CELL = "1"
# name -> the prompt's settings for the benchmark agent (bench/agent.py); counts and seconds are scaled.
BYTE_CASES: dict[str, dict[str, float]] = {
    "reply_20s": {"chunks": 4000, "size": 50, "reply": 20},  # 200 kB over 20 s
    "reply_120s": {"chunks": 4000, "size": 50, "reply": 120},  # the same over 120 s
    "tools": {"tools": 300, "diff": 2000, "reply": 30},  # 300 tool calls, a 2 kB diff each
    "plan": {"plan": 2000, "entries": 20, "reply": 20},  # 2,000 plan updates of a 20-row plan
}
SCALED = ("chunks", "reply", "tools", "plan")
CONTENT = ("import json, acp_notebook\n_t = acp_notebook.current().turns[-1]\n"
           "print(json.dumps({'reply_chars': len(_t.text), 'status': _t.status, 'duration_s': _t.duration_s,\n"
           "  'content_chars': len(_t.text) + len(_t.thoughts) + sum(len(d.get('newText') or '') for c in _t.tool_calls"
           " for d in c.diffs) + sum(len(str(e.get('content', ''))) for e in _t.plan)}))")


class Kernel:
    """A kernel and the one client that reads its messages (iopub only: every reply is timed from there)."""

    def __init__(self, cwd: str) -> None:
        import jupyter_client

        self.manager, self.client = jupyter_client.manager.start_new_kernel(kernel_name="python3", cwd=cwd)

    def run(self, code: str, timeout: float = 120) -> dict[str, Any]:
        """Execute ``code`` and wait until the kernel is idle again; its stdout, errors and expressions."""
        msg_id = self.client.execute(code, user_expressions={})
        out: dict[str, Any] = {"stdout": "", "errors": []}
        deadline = time.monotonic() + timeout
        while True:
            msg = self.client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out["stdout"] += msg["content"]["text"]
            elif msg["msg_type"] == "error":
                out["errors"].append(msg["content"]["evalue"])
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        if out["errors"]:
            raise RuntimeError(f"kernel cell failed: {out['errors']}")
        return out

    @property
    def pid(self) -> int:
        return int(self.manager.provisioner.pid)

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def _is_final(msg: dict[str, Any]) -> bool:
    """The turn's output in its static form: the reply's text and no widget (an update of the live view, or
    the first display itself when the turn ended before the view was shown)."""
    if msg["msg_type"] not in ("update_display_data", "display_data"):
        return False
    data = msg["content"].get("data") or {}
    return WIDGET_MIME not in data and "lorem" in str(data.get("text/markdown", ""))


def one_turn(kernel: Kernel, chunks: int, gap: float, timeout: float = 300) -> dict[str, Any]:
    """One streamed turn with trivial cells run meanwhile (see the module docstring)."""
    client = kernel.client
    counts = {"comm_msg": 0, "comm_open": 0, "comm_close": 0}
    waits: list[float] = []
    client.execute(f"%%acp --no-wait\nchunks={chunks}")
    streaming = False
    pending: tuple[str, float] | None = None
    next_at = 0.0
    deadline = time.monotonic() + timeout
    while True:
        now = time.monotonic()
        if now > deadline:
            raise RuntimeError(f"the {chunks}-chunk turn did not end within {timeout} s")
        # While a trivial cell is due, wait no longer than its time, so it is submitted when due.
        due = streaming and pending is None
        try:
            msg = client.get_iopub_msg(timeout=max(0.001, (next_at if due else deadline) - now))
        except queue.Empty:
            msg = None
        now = time.monotonic()
        if msg is None:
            if streaming and pending is None and now >= next_at:
                pending = (client.execute(TRIVIAL_CELL), time.monotonic())
            continue
        kind = msg["msg_type"]
        if kind in counts:
            counts[kind] += 1
            data = msg["content"].get("data") or {}
            # The reply's first chunks: the view's sections send their parts as custom messages.
            if not streaming and (data.get("state") or {}).get("outputs") or data.get("method") == "custom":
                streaming, next_at = True, now  # the first chunks are on screen: the first cell goes now
        if pending is not None and msg["parent_header"].get("msg_id") == pending[0] and kind == "status" \
                and msg["content"]["execution_state"] == "idle":
            waits.append(now - pending[1])
            pending, next_at = None, now + gap
        if _is_final(msg):
            break
        if streaming and pending is None and now >= next_at:
            pending = (client.execute(TRIVIAL_CELL), time.monotonic())
    if pending is not None:  # the last trivial cell still counts: wait for it
        while True:
            msg = client.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") == pending[0] and msg["msg_type"] == "status" \
                    and msg["content"]["execution_state"] == "idle":
                waits.append(time.monotonic() - pending[1])
                break
    facts = json.loads(kernel.run(
        "import json, acp_notebook\n_t = acp_notebook.current().turns[-1]\n"
        "print(json.dumps({'duration_s': _t.duration_s, 'chars': len(_t.text), 'status': _t.status}))")["stdout"])
    if facts["chars"] != chunks * 12 or facts["status"] != "done":
        raise RuntimeError(f"the turn did not complete as expected: {facts}")
    return {**counts, **facts, "waits": waits, "comm_msg_per_s": counts["comm_msg"] / facts["duration_s"]}


PROGRESS_CELL = "len(__import__('acp_notebook').current().turns[-1].text)"


def _progress_cell(kernel: Kernel, timeout: float = 60) -> tuple[float, int, bool]:
    """Run the progress cell: (its wait from request to idle, the reply's characters then, whether the turn's
    static output came meanwhile). The view's messages that come meanwhile are read and dropped."""
    client = kernel.client
    started = time.monotonic()
    msg_id = client.execute(PROGRESS_CELL)
    chars, final = -1, False
    while True:
        msg = client.get_iopub_msg(timeout=timeout)
        final = final or _is_final(msg)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "execute_result":
            chars = int(msg["content"]["data"]["text/plain"])
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return time.monotonic() - started, chars, final


def stream_growth(kernel: Kernel, chunks: int = 4000, size: int = 50, seconds: float = 20, gap: float = 0.1,
                  timeout: float = 300) -> dict[str, Any]:
    """The kernel's CPU per chunk and a mid-stream cell's wait, at the start vs the end of a long reply (see the
    module docstring)."""
    import psutil

    process = psutil.Process(kernel.pid)
    client = kernel.client
    total = chunks * size
    client.execute(f"%%acp --no-wait\nchunks={chunks} size={size} reply={seconds}")
    deadline = time.monotonic() + timeout
    while True:  # the reply's first chunks: the view's sections send their parts as custom messages
        msg = client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if (msg["content"].get("data") or {}).get("method") == "custom":
            break
    samples: list[tuple[int, float, float]] = []  # (characters of the reply, the cell's wait, kernel CPU s)
    final = False
    while not final and time.monotonic() < deadline:
        wait, chars, final = _progress_cell(kernel)
        times = process.cpu_times()
        samples.append((chars, wait, times.user + times.system))
        if chars >= total:
            break
        time.sleep(gap)  # pacing of the benchmark's own cells, not a wait for the kernel
    while not final:  # let the turn end before the next benchmark
        final = _is_final(client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic())))
    return {"chunks": chunks, "size": size, "seconds": seconds, "gap_s": gap, "samples": len(samples),
            **{name: _window(samples, total, size, low, high)
               for name, low, high in (("start", 0.0, 0.2), ("end", 0.8, 1.0001))}}


def _window(samples: list[tuple[int, float, float]], total: int, size: int, low: float, high: float) -> Any:
    """What the samples whose reply progress is in [low, high) of ``total`` say: the cells' waits, and the kernel's
    CPU per chunk over the intervals that end there."""
    waits = [wait for chars, wait, _cpu in samples if low * total <= chars < high * total]
    cpu = chunks = 0.0
    for (chars0, _w0, cpu0), (chars1, _w1, cpu1) in zip(samples, samples[1:], strict=False):
        if low * total <= chars1 < high * total and chars1 > chars0:
            cpu, chunks = cpu + cpu1 - cpu0, chunks + (chars1 - chars0) / size
    if not waits:
        return None
    ordered = sorted(waits)
    return {"cells": len(waits), "wait_median_s": statistics.median(waits),
            "wait_p90_s": ordered[int(0.9 * (len(ordered) - 1))],
            "kernel_cpu_ms_per_chunk": 1000 * cpu / chunks if chunks else None, "chunks": chunks}


def _is_final_turn(msg: dict[str, Any]) -> bool:
    """Any turn's output in its static form (whatever the turn said)."""
    if msg["msg_type"] not in ("update_display_data", "display_data"):
        return False
    data = msg["content"].get("data") or {}
    return WIDGET_MIME not in data and "acpnb-turn acpnb-static" in str(data.get("text/html", ""))


def shown_text_chars(html: str) -> int:
    """How many characters a person reads in ``html``: its text, without tags, with entities as the characters they
    stand for (a tool card's title, kind, status and path, its diff's lines with their marks and headers)."""
    from html.parser import HTMLParser

    class Text(HTMLParser):
        chars = 0

        def handle_data(self, data: str) -> None:
            self.chars += len(data)

    reader = Text(convert_charrefs=True)
    reader.feed(html)
    reader.close()
    return reader.chars


def saved_cell_bytes(output: dict[str, Any]) -> int:
    """The bytes one cell holding ``output`` adds to a notebook file, as nbformat writes it."""
    import nbformat

    def written(outputs: list[Any]) -> int:
        notebook = nbformat.v4.new_notebook()
        notebook.cells = [nbformat.v4.new_code_cell("%%acp\nprompt", outputs=outputs)]
        return len(nbformat.writes(notebook).encode())

    made = nbformat.v4.new_output("display_data", data=output["data"], metadata=output["metadata"])
    return written([made]) - written([])


def turn_bytes(kernel: Kernel, prompt: str, timeout: float = 900) -> dict[str, Any]:
    """The bytes of every iopub message a waiting ``%%acp`` cell causes (see the module docstring)."""
    from jupyter_client.session import json_packer

    msg_id = kernel.client.execute(f"%%acp\n{prompt}")
    by_type: dict[str, int] = {}
    final: dict[str, Any] | None = None
    deadline = time.monotonic() + timeout
    while True:
        msg = kernel.client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        kind = msg["msg_type"]
        by_type[kind] = by_type.get(kind, 0) + len(json_packer(msg["content"]))
        if kind == "error":
            raise RuntimeError(f"the %%acp cell failed: {msg['content'].get('evalue')}")
        if _is_final_turn(msg):
            final = msg["content"]
        if kind == "status" and msg["parent_header"].get("msg_id") == msg_id \
                and msg["content"]["execution_state"] == "idle":
            break
    if final is None:
        raise RuntimeError("the turn's output never turned static")
    facts = json.loads(kernel.run(CONTENT)["stdout"])
    if facts["status"] != "done":
        raise RuntimeError(f"the turn did not complete: {facts}")
    total = sum(by_type.values())
    html = final["data"]["text/html"]
    shown = len(html.encode())
    saved = saved_cell_bytes(final)
    return {**facts, "bytes": total, "by_type": by_type, "shown_html_bytes": shown, "saved_cell_bytes": saved,
            "shown_text_chars": shown_text_chars(html),
            "bytes_per_content_byte": total / max(1, facts["content_chars"]),
            "bytes_per_reply_byte": total / facts["reply_chars"] if facts["reply_chars"] else None,
            "bytes_per_shown_byte": total / max(1, shown),
            "saved_per_content_byte": saved / max(1, facts["content_chars"])}


def byte_cases(kernel: Kernel, names: list[str], scale: float) -> dict[str, Any]:
    """Each case of ``BYTE_CASES`` (scaled), after a one-chunk turn: the constant every cell costs."""
    results: dict[str, Any] = {"one_chunk_turn": turn_bytes(kernel, "chunks=1 size=50")}
    for name in names:
        settings = {key: (value * scale if key in SCALED else value) for key, value in BYTE_CASES[name].items()}
        words = " ".join(f"{key}={max(1, round(value)) if key != 'reply' else round(value, 3)}"
                         for key, value in settings.items())
        results[name] = {"prompt": words, **turn_bytes(kernel, words)}
    return results


def run(chunks: int = 20_000, rounds: int = 3, gap: float = 0.02, byte_names: list[str] | None = None,
        byte_scale: float = 1.0, growth_chunks: int = 4000, growth_gap: float = 0.1) -> dict[str, Any]:
    """``rounds`` long turns, each after a one-chunk turn that measures the messages every cell costs."""
    meter = LoadMeter()
    with tempfile.TemporaryDirectory(prefix="acpnb-bench-") as cwd:
        kernel = Kernel(cwd)
        try:
            kernel.run("%load_ext acp_notebook\n%acp start --name bench -- " + shlex.join(bench_agent()))
            one_turn(kernel, min(chunks, 2000), gap)  # warm-up: the view's code paths loaded
            constants, turns = [], []
            for _ in range(rounds):
                constants.append(one_turn(kernel, 1, gap))
                turns.append(one_turn(kernel, chunks, gap))
            growth = stream_growth(kernel, growth_chunks, seconds=20 * growth_chunks / 4000, gap=growth_gap) \
                if growth_chunks else None
            sizes = byte_cases(kernel, list(BYTE_CASES) if byte_names is None else byte_names, byte_scale)
        finally:
            kernel.close()
    waits = [w for t in turns for w in t["waits"]]
    constant = statistics.median(c["comm_msg"] for c in constants)
    streaming = [(t["comm_msg"] - constant) / t["duration_s"] for t in turns]
    return {
        "chunks": chunks, "rounds": rounds, "gap_s": gap,
        "duration_s": stats([t["duration_s"] for t in turns]),
        "comm_msg": stats([t["comm_msg"] for t in turns]),
        "comm_msg_one_chunk_turn": constant,
        "comm_open_close": stats([t["comm_open"] + t["comm_close"] for t in turns]),
        "comm_msg_per_s_all": stats([t["comm_msg_per_s"] for t in turns]),
        "comm_msg_per_s": stats(streaming),
        "trivial_cell_wait_s": stats(waits) if waits else None,
        "trivial_cell_wait_p90_s": sorted(waits)[int(0.9 * (len(waits) - 1))] if waits else None,
        "trivial_cells": len(waits),
        "median_trivial_cells_per_turn": statistics.median(len(t["waits"]) for t in turns),
        "bytes": sizes,
        "growth": growth,
        "load": meter.done(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gap", type=float, default=0.02, help="seconds between two trivial cells")
    parser.add_argument("--byte-cases", default=",".join(BYTE_CASES),
                        help=f"comma-separated, of: {', '.join(BYTE_CASES)} ('' for none)")
    parser.add_argument("--byte-scale", type=float, default=1.0, help="counts and seconds of the byte cases times this")
    parser.add_argument("--growth-chunks", type=int, default=4000,
                        help="chunks of 50 characters of the reply whose start and end are compared (0: none)")
    parser.add_argument("--growth-gap", type=float, default=0.1, help="seconds between two progress cells")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.byte_cases.split(",") if n.strip()]
    unknown = sorted(set(names) - set(BYTE_CASES))
    if unknown:
        parser.error(f"unknown byte case(s): {', '.join(unknown)}")
    result = run(args.chunks, args.rounds, args.gap, names, args.byte_scale, args.growth_chunks, args.growth_gap)
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
