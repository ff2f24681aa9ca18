"""An ACP agent on stdio that misbehaves on purpose; the fault is picked by argv[1].

It writes its own frames (no SDK) so that it can break the wire itself: wrong ids, lines that
are not JSON, a 64 MB line. It behaves well until the fault fires, so a test can first build
session state and a transcript, then check both survive the fault:

- a session has one option, ``model`` (m1, m2); a prompt is answered "echo: TEXT";
- the prompt ``go`` fires the turn faults; ``session/set_config_option`` fires the request faults;
- ``play FILE`` writes the lines of FILE as they are (``$SID`` replaced by the session's id), then
  ends the turn (for the property tests of the proxy);
- ``read PATH`` / ``write PATH TEXT`` send fs requests with PATH exactly as given and answer with
  "ok: ..." or "error CODE: MESSAGE" (for the fs confinement tests);
- ``--leak VAR`` (any fault): the value of $VAR goes into the reply, a thought, the title, a tool
  call's output, stderr and error answers (for the secrets tests).

Startup faults:  exit-before-initialize, silent (never answers anything).
Request faults (set_config_option):  no-answer, wrong-id, twice, malformed-error.
Turn faults (prompt "go"):  exit-mid-turn, hang-mid-turn (ignores session/cancel), non-json,
  huge-line [MB] (the prompt's answer as one line of that size, default 64), huge-request [MB]
  (an fs/write_text_file request of that size), stderr-flood [MB] (default 20), flood [N]
  (N agent_message_chunk notifications, default 50000), unknown-updates, permission (a
  request_permission, then the tool call settles on the answer), spawn-child (starts a
  grandchild that lives until its process group is killed, then answers).
Session faults:  odd-config (the model option's currentValue is not among its choices).
Other modes: normal.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from typing import Any

ARGS = sys.argv[1:]
LEAK = ARGS[ARGS.index("--leak") + 1] if "--leak" in ARGS else None
ARGS = [a for i, a in enumerate(ARGS) if a != "--leak" and (i == 0 or ARGS[i - 1] != "--leak")]
FAULT = ARGS[0] if ARGS else "normal"
AMOUNT = float(ARGS[1]) if len(ARGS) > 1 else None
SECRET = os.environ.get(LEAK, "") if LEAK else ""


def write(frame: dict[str, Any] | str) -> None:
    """One line on stdout, at once (blocking: as fast as the client reads)."""
    line = frame if isinstance(frame, str) else json.dumps(frame)
    sys.stdout.buffer.write(line.encode() + b"\n")
    sys.stdout.buffer.flush()


def options(current: str = "m1") -> list[dict[str, Any]]:
    return [{"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": current,
             "options": [{"value": "m1", "name": "M1"}, {"value": "m2", "name": "M2"}]}]


class FaultAgent:
    def __init__(self) -> None:
        self.sessions: dict[str, str] = {}  # session id -> model
        self.next_id = 0
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}

    # --- plumbing -----------------------------------------------------------
    def update(self, session_id: str, update: dict[str, Any]) -> None:
        write({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}})

    def chunk(self, session_id: str, text: str, kind: str = "agent_message_chunk") -> None:
        self.update(session_id, {"sessionUpdate": kind, "content": {"type": "text", "text": text}})

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request to the client; its whole answer frame."""
        self.next_id += 1
        future = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = future
        write({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return await future

    def answer(self, request_id: Any, result: Any = None, error: dict[str, Any] | None = None) -> None:
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
        frame.update({"error": error} if error is not None else {"result": result})
        write(frame)

    async def dispatch(self, frame: dict[str, Any]) -> None:
        if "method" not in frame:
            future = self.waiting.pop(frame.get("id"), None)
            if future is not None and not future.done():
                future.set_result(frame)
            return
        method, params, request_id = frame["method"], frame.get("params") or {}, frame.get("id")
        if request_id is None:
            return  # notifications (session/cancel): every turn here ends by itself or never
        try:
            result = await self.handle(method, params, request_id)
        except LookupError as exc:
            self.answer(request_id, error={"code": -32002, "message": str(exc)})
            return
        if result is not None:
            self.answer(request_id, result)

    # --- methods ----------------------------------------------------------------
    async def handle(self, method: str, params: dict[str, Any], request_id: Any) -> Any:
        if method == "initialize":
            return {"protocolVersion": 1, "agentCapabilities": {"sessionCapabilities": {"close": {}}},
                    "agentInfo": {"name": "fault-agent", "version": "1.0"}, "authMethods": []}
        if method == "session/new":
            session_id = f"fault-{len(self.sessions) + 1}"
            self.sessions[session_id] = "m9" if FAULT == "odd-config" else "m1"
            return {"sessionId": session_id, "configOptions": options(self.sessions[session_id])}
        if method == "session/close":
            (session_id,) = self.session(params)
            del self.sessions[session_id]
            return {}
        if method == "session/set_config_option":
            return self.set_option(params, request_id)
        if method == "session/prompt":
            return await self.prompt(params, request_id)
        self.answer(request_id, error={"code": -32601, "message": f"method not found: {method}"})
        return None

    def session(self, params: dict[str, Any]) -> list[str]:
        session_id = params.get("sessionId")
        if session_id not in self.sessions:
            raise LookupError(f"unknown session {session_id!r}")
        return [session_id]

    def set_option(self, params: dict[str, Any], request_id: Any) -> Any:
        (session_id,) = self.session(params)
        if SECRET:
            self.answer(request_id, error={"code": -32602, "message": f"bad key {SECRET}", "data": {"key": SECRET}})
            return None
        if FAULT == "no-answer":
            return None
        if FAULT == "malformed-error":
            write({"jsonrpc": "2.0", "id": request_id, "error": "no such value"})
            return None
        self.sessions[session_id] = str(params.get("value"))
        result = {"configOptions": options(self.sessions[session_id])}
        if FAULT == "wrong-id":
            write({"jsonrpc": "2.0", "id": request_id + 1000, "result": result})
            return None
        if FAULT == "twice":
            self.answer(request_id, result)
            self.answer(request_id, {"configOptions": options("m1")})
            return None
        return result

    async def prompt(self, params: dict[str, Any], request_id: Any) -> Any:
        (session_id,) = self.session(params)
        blocks = params.get("prompt") or [{}]
        text = str(blocks[0].get("text", ""))
        if text.startswith("play "):  # the lines of a file, as they are ($SID: this session's id)
            with open(text[5:], encoding="utf-8") as script:
                for line in script.read().split("\n")[:-1]:  # not splitlines(): a form feed is no line end here
                    write(line.replace("$SID", session_id))
            return {"stopReason": "end_turn"}
        if text.startswith(("read ", "write ")):
            self.chunk(session_id, await self.file_request(session_id, text))
            return {"stopReason": "end_turn"}
        if text != "go":
            self.chunk(session_id, f"echo: {text}")
            return {"stopReason": "end_turn"}
        if SECRET:
            self.leak(session_id)
        return await TURN_FAULTS.get(FAULT, FaultAgent.normal_turn)(self, session_id, request_id)

    async def file_request(self, session_id: str, text: str) -> str:
        verb, _, rest = text.partition(" ")
        path, _, content = rest.partition(" ")
        if verb == "read":
            frame = await self.ask("fs/read_text_file", {"sessionId": session_id, "path": path})
        else:
            frame = await self.ask("fs/write_text_file", {"sessionId": session_id, "path": path, "content": content})
        if "error" in frame:
            return f"error {frame['error'].get('code')}: {frame['error'].get('message')}"
        content_back = (frame.get("result") or {}).get("content", "")
        return f"ok: {len(content_back)} chars: {content_back[:100]}"

    def leak(self, session_id: str) -> None:
        self.chunk(session_id, f"your key is {SECRET}")
        self.chunk(session_id, f"thinking about {SECRET}", "agent_thought_chunk")
        self.update(session_id, {"sessionUpdate": "session_info_update", "title": f"Key {SECRET}"})
        self.update(session_id, {"sessionUpdate": "tool_call", "toolCallId": "env", "title": "Run env",
                                 "kind": "execute", "status": "completed",
                                 "rawOutput": {"stdout": f"{LEAK}={SECRET}\n"}})
        print(f"fault-agent: using key {SECRET}", file=sys.stderr, flush=True)

    # --- turn faults ------------------------------------------------------------------
    async def normal_turn(self, session_id: str, request_id: Any) -> Any:
        self.chunk(session_id, "echo: go")
        return {"stopReason": "end_turn"}

    async def exit_mid_turn(self, session_id: str, request_id: Any) -> Any:
        self.chunk(session_id, "about to fail")
        print(f"fault-agent: simulated crash in the model client {SECRET}".rstrip(), file=sys.stderr, flush=True)
        os._exit(3)

    async def hang_mid_turn(self, session_id: str, request_id: Any) -> Any:
        self.chunk(session_id, "thinking...")
        await asyncio.Event().wait()  # never answers, and ignores session/cancel

    async def non_json(self, session_id: str, request_id: Any) -> Any:
        for line in ("this is not json", "[1, 2, 3]", "{broken", '"a string"', "\x00\xff garbage",
                     '{"id": [1], "result": {}}', '{"method": 5}', '{"jsonrpc": "2.0"}', '{"id": true, "result": 1}',
                     "[" * 100_000 + "]" * 100_000):
            write(line)
        self.chunk(session_id, "still here")
        return {"stopReason": "end_turn"}

    async def huge_line(self, session_id: str, request_id: Any) -> Any:
        size = int((AMOUNT or 64) * 1024 * 1024)
        write({"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": "end_turn", "_meta": {"pad": "x" * size}}})
        return None

    async def huge_request(self, session_id: str, request_id: Any) -> Any:
        size = int((AMOUNT or 64) * 1024 * 1024)
        frame = await self.ask("fs/write_text_file", {"sessionId": session_id, "path": "/tmp/x", "content": "x" * size})
        error = frame.get("error") or {}
        self.chunk(session_id, f"the client said {error.get('code')}: {error.get('message')}")
        return {"stopReason": "end_turn"}

    async def stderr_flood(self, session_id: str, request_id: Any) -> Any:
        line = "x" * 1023 + "\n"
        for _ in range(int((AMOUNT or 20) * 1024)):
            sys.stderr.write(line)
        sys.stderr.write("fault-agent: flood done\n")
        sys.stderr.flush()
        self.chunk(session_id, "flooded")
        return {"stopReason": "end_turn"}

    async def flood(self, session_id: str, request_id: Any) -> Any:
        def chunk(i: int) -> str:
            update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"{i},"}}
            return json.dumps({"jsonrpc": "2.0", "method": "session/update",
                               "params": {"sessionId": session_id, "update": update}})

        lines = [chunk(i) for i in range(int(AMOUNT or 50_000))]
        for start in range(0, len(lines), 1000):
            sys.stdout.buffer.write(("\n".join(lines[start:start + 1000]) + "\n").encode())
        sys.stdout.buffer.flush()
        return {"stopReason": "end_turn"}

    async def unknown_updates(self, session_id: str, request_id: Any) -> Any:
        self.chunk("nobody", "not for you")
        self.update(session_id, {"sessionUpdate": "hologram", "payload": 1})
        self.update(session_id, {"sessionUpdate": "agent_message_chunk", "content": 5})
        self.update(session_id, {"sessionUpdate": "config_option_update", "configOptions": "all of them"})
        self.chunk(session_id, "done")
        return {"stopReason": "end_turn"}

    async def permission(self, session_id: str, request_id: Any) -> Any:
        call = {"toolCallId": "p1", "title": "Delete everything", "kind": "delete", "status": "pending"}
        self.update(session_id, {"sessionUpdate": "tool_call", **call})
        frame = await self.ask("session/request_permission", {"sessionId": session_id, "toolCall": call, "options": [
            {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
            {"optionId": "no", "name": "No", "kind": "reject_once"}]})
        outcome = (frame.get("result") or {}).get("outcome") or {}
        reason = ((frame.get("result") or {}).get("_meta") or {}).get("acp-notebook/permission", {}).get("reason", "")
        status = "completed" if outcome.get("optionId") == "yes" else "failed"
        self.update(session_id, {"sessionUpdate": "tool_call_update", "toolCallId": "p1", "status": status,
                                 "content": [{"type": "content", "content": {
                                     "type": "text", "text": f"permission {outcome.get('outcome')} {reason}"}}]})
        return {"stopReason": "end_turn"}

    async def spawn_child(self, session_id: str, request_id: Any) -> Any:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        self.chunk(session_id, f"child {child.pid}")
        return {"stopReason": "end_turn"}


TURN_FAULTS = {name.replace("_", "-"): getattr(FaultAgent, name) for name in (
    "exit_mid_turn", "hang_mid_turn", "non_json", "huge_line", "huge_request", "stderr_flood", "flood",
    "unknown_updates", "permission", "spawn_child")}


async def main() -> None:
    if FAULT == "exit-before-initialize":
        print(f"fault-agent: cannot find my config file {SECRET}".rstrip(), file=sys.stderr, flush=True)
        sys.exit(7)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=128 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    agent = FaultAgent()
    tasks: set[asyncio.Task[None]] = set()
    while line := await reader.readline():
        if FAULT == "silent" or not line.strip():
            continue
        task = asyncio.ensure_future(agent.dispatch(json.loads(line)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


if __name__ == "__main__":
    asyncio.run(main())
