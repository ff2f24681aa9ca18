"""A benchmark-only ACP agent on stdio: streams N chunks as fast as a pipe takes them, or at a set pace.

The demo agent cannot stream 20,000 chunks (its replies are a few words, and it speaks through the
SDK, whose own per-message cost would hide the client's). This one writes prebuilt NDJSON lines with
plain blocking I/O and no SDK, so a benchmark measures the client that reads them, not the agent.

What it answers:
- ``initialize``; ``session/new`` with two select options (``model``: fast/smart, ``mode``: ask/code);
  ``session/set_config_option`` (the complete list back); ``session/close``; ``session/cancel``
  (ends the running turn with ``cancelled``);
- ``session/prompt``: a turn of ``agent_message_chunk`` notifications, then ``end_turn``. Words of
  the form ``key=value`` in the prompt's text override the command line's settings for that turn:
  ``chunks=20000`` (how many), ``size=12`` (characters each), ``delay=0.02`` (seconds between two
  chunks; none before the first), ``reply=1.0`` (spread the chunks over this many seconds instead),
  ``tag=WORD`` (every chunk's text starts with ``[WORD]``: a load test tells whose chunk it got).
  ``tools=N`` (N tool calls instead of text: each a ``tool_call``, an ``in_progress`` update and a
  ``completed`` one carrying a diff of ``diff=BYTES`` of new text) and ``plan=N`` (N ``plan`` updates of
  one plan of ``entries=E`` rows, kept from the first update to the last: the rows are worked through in
  order, each set in progress, its progress noted on it several times, then completed) replace the text
  chunks, paced the same way (``reply=`` / ``delay=``).
- anything else: error -32601.

Usage: python bench/agent.py [--chunks 10] [--size 12] [--delay 0]
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from typing import Any

WRITE_BATCH = 64 * 1024  # bytes buffered before a write: a burst of chunks costs few system calls


class BenchAgent:
    """The agent's state: sessions and their options, the turn running in each (see the module docstring)."""

    def __init__(self, chunks: int, size: int, delay: float) -> None:
        self.defaults = {"chunks": chunks, "size": size, "delay": delay, "reply": 0.0, "tools": 0, "diff": 2000,
                         "plan": 0, "entries": 20}
        self.out = sys.stdout.buffer
        self.lock = threading.Lock()  # one writer at a time: replies and the turn thread share stdout
        self.sessions: dict[str, dict[str, str]] = {}
        self.cancelled: dict[str, threading.Event] = {}
        self.count = 0

    # --- writing -----------------------------------------------------------------
    def write(self, data: bytes) -> None:
        with self.lock:
            self.out.write(data)
            self.out.flush()

    def answer(self, request_id: Any, result: Any = None, error: dict[str, Any] | None = None) -> None:
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        if error is not None:
            frame["error"] = error
        else:
            frame["result"] = result
        self.write(json.dumps(frame, separators=(",", ":")).encode() + b"\n")

    # --- sessions ----------------------------------------------------------------
    def options(self, session_id: str) -> list[dict[str, Any]]:
        values = self.sessions[session_id]

        def select(option_id: str, category: str, choices: tuple[str, ...]) -> dict[str, Any]:
            return {"id": option_id, "name": option_id.title(), "category": category, "type": "select",
                    "currentValue": values[option_id], "options": [{"value": c, "name": c.title()} for c in choices]}

        return [select("model", "model", ("fast", "smart")), select("mode", "mode", ("ask", "code"))]

    def handle(self, frame: dict[str, Any]) -> None:
        method, params, request_id = frame.get("method"), frame.get("params") or {}, frame.get("id")
        if method == "initialize":
            self.answer(request_id, {"protocolVersion": 1, "agentInfo": {"name": "bench-agent", "version": "1"},
                                     "agentCapabilities": {"sessionCapabilities": {"close": {}}}, "authMethods": []})
        elif method == "session/new":
            self.count += 1
            session_id = f"bench-{self.count}"
            self.sessions[session_id] = {"model": "fast", "mode": "ask"}
            self.answer(request_id, {"sessionId": session_id, "configOptions": self.options(session_id)})
        elif method == "session/set_config_option":
            session_id = params.get("sessionId")
            self.sessions[session_id][params["configId"]] = params["value"]
            self.answer(request_id, {"configOptions": self.options(session_id)})
        elif method == "session/close":
            self.sessions.pop(params.get("sessionId"), None)
            self.answer(request_id, {})
        elif method == "session/cancel":
            event = self.cancelled.get(params.get("sessionId"))
            if event is not None:
                event.set()
        elif method == "session/prompt":
            event = self.cancelled[params["sessionId"]] = threading.Event()
            threading.Thread(target=self.turn, args=(request_id, params, event), daemon=True).start()
        elif request_id is not None:
            self.answer(request_id, error={"code": -32601, "message": f"method not found: {method}"})

    # --- a turn --------------------------------------------------------------------
    def settings(self, params: dict[str, Any]) -> tuple[dict[str, float], str]:
        """The turn's numeric settings and its tag ("" unless the prompt says ``tag=WORD``)."""
        settings, tag = dict(self.defaults), ""
        for block in params.get("prompt") or []:
            for word in str(block.get("text", "")).split():
                key, _, value = word.partition("=")
                if key == "tag":
                    tag = value
                elif key in settings and value:
                    settings[key] = float(value)
        return settings, tag

    def turn(self, request_id: Any, params: dict[str, Any], cancelled: threading.Event) -> None:
        settings, tag = self.settings(params)
        if settings["tools"] or settings["plan"]:
            self.shaped_turn(request_id, params["sessionId"], settings, cancelled)
            return
        chunks, size = int(settings["chunks"]), int(settings["size"])
        delay = settings["reply"] / max(1, chunks - 1) if settings["reply"] else settings["delay"]
        text = (f"[{tag}]" if tag else "") + ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]
        line = (json.dumps({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": params["sessionId"],
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}},
            separators=(",", ":")) + "\n").encode()
        stop = "end_turn"
        if delay > 0:
            for index in range(chunks):
                if index and cancelled.wait(delay):
                    stop = "cancelled"
                    break
                self.write(line)
        else:
            per_batch = max(1, WRITE_BATCH // len(line))
            for start in range(0, chunks, per_batch):
                if cancelled.is_set():
                    stop = "cancelled"
                    break
                self.write(line * min(per_batch, chunks - start))
        self.answer(request_id, {"stopReason": stop})

    def shaped_turn(self, request_id: Any, session_id: str, settings: dict[str, float],
                    cancelled: threading.Event) -> None:
        """A turn of tool calls or plan updates (see the module docstring), paced like the text chunks."""
        updates = list(_tool_updates(int(settings["tools"]), int(settings["diff"]))) + list(
            _plan_updates(int(settings["plan"]), max(1, int(settings["entries"]))))
        delay = settings["reply"] / max(1, len(updates) - 1) if settings["reply"] else settings["delay"]
        stop = "end_turn"
        for index, update in enumerate(updates):
            if index and delay > 0 and cancelled.wait(delay):
                stop = "cancelled"
                break
            frame = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}
            self.write(json.dumps(frame, separators=(",", ":")).encode() + b"\n")
        self.answer(request_id, {"stopReason": stop})

    def serve(self) -> None:
        for raw in sys.stdin.buffer:
            if raw.strip():
                self.handle(json.loads(raw))


def _tool_updates(count: int, diff: int) -> Any:
    """Each tool call: announced pending, then in progress, then completed with a diff of ``diff`` bytes."""
    line = "    value = compute(value, 'lorem ipsum dolor')\n"
    new_text = (line * (diff // len(line) + 1))[:diff]
    for index in range(count):
        call = f"call-{index}"
        yield {"sessionUpdate": "tool_call", "toolCallId": call, "title": f"Edit file_{index}.py", "kind": "edit",
               "status": "pending", "locations": [{"path": f"/work/file_{index}.py"}]}
        yield {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "in_progress"}
        yield {"sessionUpdate": "tool_call_update", "toolCallId": call, "status": "completed",
               "content": [{"type": "diff", "path": f"/work/file_{index}.py", "oldText": None, "newText": new_text}]}


def _plan_updates(count: int, entries: int) -> Any:
    """``count`` updates of one plan of ``entries`` rows (ACP sends the whole plan each time), as an agent working
    through it: the first sends every row pending; then each row in turn is set in progress, has its progress
    noted on it ("3 of 9 tests pass") an even share of the updates, and is completed. No row is dropped or
    rebuilt: each update changes one row's status or its note."""
    base = [f"Step {row + 1}: change module {row + 1} and run its tests" for row in range(entries)]
    rows = [{"content": text, "priority": "medium", "status": "pending"} for text in base]
    schedule: list[tuple[int, int, int]] = []  # (row, step, the row's share) of each update after the first
    left = count - 1
    for row in range(entries):
        share = left // (entries - row)
        left -= share
        schedule += [(row, step, share) for step in range(share)]
    for index in range(count):
        if index:
            row, step, share = schedule[index - 1]
            if step == share - 1:
                rows[row] = {**rows[row], "content": base[row], "status": "completed"}
            elif step == 0:
                rows[row] = {**rows[row], "status": "in_progress"}
            else:
                rows[row] = {**rows[row], "content": f"{base[row]} ({step} of {share - 2} tests pass)"}
        yield {"sessionUpdate": "plan", "entries": [dict(entry) for entry in rows]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10)
    parser.add_argument("--size", type=int, default=12, help="characters per chunk")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between two chunks")
    args = parser.parse_args(argv)
    try:
        BenchAgent(args.chunks, args.size, args.delay).serve()
    except (BrokenPipeError, KeyboardInterrupt):
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
