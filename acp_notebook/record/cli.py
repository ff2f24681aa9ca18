"""``acp-notebook replay FILE``: a recording served on stdio as an ACP agent, for any ACP client.

The client's frames are matched against the recording (record/engine.py); a frame that diverges
gets a JSON-RPC error answer naming the recording's line and what it expected, and the same
message on stderr. The process ends when the client closes stdin.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Sequence
from typing import Any

from .._argtypes import number
from .._ndjson import DroppedFrame, LineReader, LineWriter
from .._stdio import StdioError, open_stdio
from ..errors import ReplayMismatch
from .engine import ReplayEngine
from .format import Recording, RecordingError
from .transport import Pacer

__all__ = ["main", "serve"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-notebook replay",
        description="Serve a recorded ACP session on stdin/stdout, as the agent that was recorded.")
    parser.add_argument("file", help="a recording (acpnb.start(..., record=FILE) or %%acp start --record FILE)")
    parser.add_argument("--speed", type=number(zero=False), default=None, metavar="X",
                        help="replay at X times the recorded pace (default: as fast as possible)")
    return parser


async def serve(recording: Recording, *, speed: float | None = None) -> int:
    """Answer one client on this process's stdin/stdout from ``recording``; returns the number of mismatches."""
    reader, writer = await open_stdio("the replay", "such as acpx or Zed, with acp-notebook replay FILE as the agent")
    real_stdout, sys.stdout = sys.stdout, sys.stderr  # the protocol owns stdout now
    try:
        return await _answer(recording, speed, reader, writer)
    finally:
        sys.stdout = real_stdout


async def _answer(recording: Recording, speed: float | None, reader: Any, writer: Any) -> int:
    frames = LineWriter(writer, closed="the client's end (stdout) is closed")
    lines = LineReader(reader, on_bad=lambda reason, excerpt: print(
        f"acp-notebook replay: ignoring a line that is {reason}: {excerpt[:120]!r}", file=sys.stderr))
    def deliver(frame: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionError):  # the client left: what it would have got is moot
            frames.write(frame)

    engine = ReplayEngine(recording)
    pacer = Pacer(deliver, speed)
    pacer.push(engine.opening())
    mismatches = 0
    while (frame := await lines.read()) is not None:
        if isinstance(frame, DroppedFrame):
            continue  # reported; the recording's next frame is still expected
        try:
            pacer.push(engine.receive(frame))
        except ReplayMismatch as mismatch:
            mismatches += 1
            print(f"acp-notebook replay: {mismatch.message}", file=sys.stderr)
            answers = engine.failure_answers(mismatch)
            if "method" in frame and "id" in frame:
                answers.insert(0, {"jsonrpc": "2.0", "id": frame["id"], "error": {
                    "code": mismatch.code, "message": mismatch.message, "data": mismatch.data}})
            for answer in answers:
                deliver(answer)
        await frames.drain()
    pacer.close()
    return mismatches


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        recording = Recording.load(args.file)
    except RecordingError as exc:
        print(f"acp-notebook replay: {exc.in_terms_of('cli')}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(recording, speed=args.speed))
    except KeyboardInterrupt:
        return 130
    except (StdioError, ValueError) as exc:
        print(f"acp-notebook replay: {exc}", file=sys.stderr)
        return 2
    return 0
