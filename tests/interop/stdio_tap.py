"""A transparent tap on an ACP agent's stdio: runs the agent, passes both streams through unchanged and writes
every line, each way, to a trace file of its own. It lets a test check the frames of our agents that have no
--trace option (the demo agent, the replay server) under a third-party client.

    python stdio_tap.py TRACE_DIR COMMAND [ARG ...]

Writes TRACE_DIR/<tap pid>.jsonl: one {"from": "client" | "agent", "msg": {...}} per line ("raw": text for
a line that is not JSON). An ARG "{trace}" becomes TRACE_DIR/<tap pid>.proxy.jsonl, for the proxy's own
--trace: a client that starts a process per call (acpx) gets files of their own for each.
Signals are passed on to the agent; the tap ends when the agent does, with its exit code.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any


class Trace:
    """One JSON line per frame; written and flushed under a lock, since both pumps write."""

    def __init__(self, path: Path) -> None:
        self._stream = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def record(self, side: str, line: bytes) -> None:
        text = line.decode("utf-8", errors="replace").strip()
        if not text:
            return
        try:
            entry: dict[str, Any] = {"from": side, "msg": json.loads(text)}
        except ValueError:
            entry = {"from": side, "raw": text}
        with self._lock:
            self._stream.write(json.dumps(entry) + "\n")
            self._stream.flush()  # a tap killed mid-session keeps what it saw

    def close(self) -> None:
        with self._lock:
            self._stream.close()


def pump(source: IO[bytes], target: IO[bytes], side: str, trace: Trace) -> None:
    """Copy lines until the source ends, then close the target so the other end sees EOF too."""
    for line in iter(source.readline, b""):
        trace.record(side, line)
        try:
            target.write(line)
            target.flush()
        except (BrokenPipeError, ValueError):
            break
    with contextlib.suppress(OSError, ValueError):
        target.close()


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    trace_dir, command = Path(argv[0]), argv[1:]
    own = trace_dir / str(os.getpid())
    command = [arg.replace("{trace}", f"{own}.proxy.jsonl") for arg in command]
    trace = Trace(Path(f"{own}.jsonl"))
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # stderr: the client's
    assert child.stdin is not None and child.stdout is not None
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: child.send_signal(number))
    # The client side may never close (a client killed hard): a daemon thread, not waited for.
    threading.Thread(target=pump, args=(sys.stdin.buffer, child.stdin, "client", trace), daemon=True).start()
    agent_side = threading.Thread(target=pump, args=(child.stdout, sys.stdout.buffer, "agent", trace))
    agent_side.start()
    code = child.wait()
    agent_side.join()
    trace.close()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
