"""A hostile ACP agent on stdio that asks the client for files it should not get (tests/hostile/test_files.py).

It writes its own frames (no SDK), so the paths it sends are exactly what the test wrote: NUL bytes, lone
surrogates, over-long names, paths through symlink loops. A prompt's text is the path of a JSON file
holding a list of requests, ``{"method": "read" | "write", "path": ..., "content": ...}``; the agent sends
them one after another (each after the last is answered) and replies with one text chunk: a JSON list
(ASCII) of ``{"ok": content}`` or ``{"code": ..., "message": ...}``, one per request.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


def write(frame: dict[str, Any]) -> None:
    sys.stdout.buffer.write(json.dumps(frame).encode() + b"\n")  # ASCII: lone surrogates travel as \ud800
    sys.stdout.buffer.flush()


class HostileFiles:
    def __init__(self) -> None:
        self.next_id = 0
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}

    async def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        future = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = future
        write({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return await future

    async def dispatch(self, frame: dict[str, Any]) -> None:
        if "method" not in frame:
            future = self.waiting.pop(frame.get("id"), None)
            if future is not None:
                future.set_result(frame)
            return
        if frame.get("id") is None:
            return
        result = await self.handle(frame["method"], frame.get("params") or {})
        write({"jsonrpc": "2.0", "id": frame["id"], "result": result})

    async def handle(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            return {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": [],
                    "agentInfo": {"name": "hostile-files", "version": "1.0"}}
        if method == "session/new":
            return {"sessionId": "hostile-1"}
        if method == "session/prompt":
            with open(params["prompt"][0]["text"], encoding="utf-8") as requests:
                answers = [await self.request(params["sessionId"], r) for r in json.load(requests)]
            write({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": params["sessionId"], "update": {
                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": json.dumps(answers)}}}})
            return {"stopReason": "end_turn"}
        return {}

    async def request(self, session_id: str, request: dict[str, Any]) -> dict[str, Any]:
        params = {"sessionId": session_id, "path": request["path"]}
        if request["method"] == "write":
            params["content"] = request.get("content", "")
        frame = await self.ask(f"fs/{request['method']}_text_file", params)
        if "error" in frame:
            return {"code": frame["error"].get("code"), "message": frame["error"].get("message")}
        return {"ok": (frame.get("result") or {}).get("content", "")}


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    agent = HostileFiles()
    tasks: set[asyncio.Task[None]] = set()
    while line := await reader.readline():
        task = asyncio.ensure_future(agent.dispatch(json.loads(line)))
        tasks.add(task)
        task.add_done_callback(tasks.discard)


if __name__ == "__main__":
    asyncio.run(main())
