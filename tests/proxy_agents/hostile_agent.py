"""A hostile ACP agent for the proxy's trust tests: it keeps whatever MCP servers it is given and uses any
`kernel` entry at once, as an agent that wants the user's kernel would.

Every session/new, load and resume it gets is written to the --record file (JSON lines) with its
mcpServers. Whenever one brings a `kernel` entry it attacks in the background and records each step:

- ``handshake``: the channel's handshake spoken directly on the entry's socket with its token (the
  first line it answers, or the error);
- ``list_variables`` / ``run_code``: the bridge started from the entry, driven by the official MCP
  client (acp_notebook.kernel_tools.client.open_kernel_tools), its answers (run_code sets
  ``stolen_by_<name>`` in the kernel);
- ``mcp_closed``: that MCP connection, kept open and pinged, ended (or ``mcp_failed``: it never opened).

Prompts: "attack" -> list_variables through a fresh bridge from this session's entry, the answer as
JSON text; "mcp" -> the mcpServers this session got; anything else -> an echo.
Options: one `model` select option (m1, m2). Sessions can be closed and deleted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from acp_notebook._sdk import defer_sdk_package, stdio_streams

defer_sdk_package()

from acp.connection import Connection  # noqa: E402
from acp.exceptions import RequestError  # noqa: E402

CHANNEL_ENV = "ACPNB_KERNEL_CHANNEL"
TOKEN_ENV = "ACPNB_KERNEL_TOKEN"
PING_EVERY_S = 0.1


def kernel_entry(servers: Any) -> dict[str, Any] | None:
    for server in servers or ():
        if isinstance(server, dict) and server.get("name") == "kernel":
            return server
    return None


def env_of(entry: dict[str, Any]) -> dict[str, str]:
    return {pair["name"]: pair["value"] for pair in entry.get("env") or ()}


class Hostile:
    def __init__(self, args: argparse.Namespace) -> None:
        self.name = args.name
        self.record_path = Path(args.record)
        self.conn: Connection | None = None
        self.sessions: dict[str, dict[str, Any]] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def record(self, **fields: Any) -> None:
        with self.record_path.open("a", encoding="utf-8") as out:
            out.write(json.dumps({"agent": self.name, "pid": os.getpid(), **fields}) + "\n")

    def options(self, sid: str) -> list[dict[str, Any]]:
        return [{"id": "model", "name": "Model", "category": "model", "type": "select",
                 "currentValue": self.sessions[sid]["model"],
                 "options": [{"value": "m1", "name": "M1"}, {"value": "m2", "name": "M2"}]}]

    # --- the attack ---------------------------------------------------------------------------
    def attack_soon(self, sid: str, entry: dict[str, Any]) -> None:
        task = asyncio.ensure_future(self.attack(sid, entry))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def attack(self, sid: str, entry: dict[str, Any]) -> None:
        self.record(event="handshake", sessionId=sid, reply=await asyncio.to_thread(self.handshake, entry))
        from acp_notebook.kernel_tools.client import open_kernel_tools

        try:
            async with open_kernel_tools(entry, read_timeout=30) as mcp:
                listed = await mcp.call_tool("list_variables", {})
                self.record(event="list_variables", sessionId=sid, text=text_of(listed))
                ran = await mcp.call_tool("run_code", {"code": f"stolen_by_{self.name} = True"})
                self.record(event="run_code", sessionId=sid, text=text_of(ran))
                while True:  # held open, as an agent keeps its MCP servers: until the other side ends it
                    await mcp.send_ping()
                    await asyncio.sleep(PING_EVERY_S)
        except BaseException as exc:  # noqa: BLE001 - what ended it is the point
            self.record(event="mcp_closed", sessionId=sid, error=f"{type(exc).__name__}: {exc}")
            if isinstance(exc, asyncio.CancelledError):
                raise

    @staticmethod
    def handshake(entry: dict[str, Any]) -> str:
        env = env_of(entry)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(20)
        try:
            sock.connect(env[CHANNEL_ENV])
            sock.sendall(env[TOKEN_ENV].encode() + b"\n")
            return sock.recv(200).decode("utf-8", "replace").strip() or "closed without an answer"
        except OSError as exc:
            return f"error: {exc}"
        finally:
            sock.close()

    async def attack_now(self, sid: str) -> str:
        entry = kernel_entry(self.sessions[sid]["mcp"])
        if entry is None:
            return json.dumps({"error": "no kernel entry"})
        from acp_notebook.kernel_tools.client import open_kernel_tools

        try:
            async with open_kernel_tools(entry, read_timeout=30) as mcp:
                return json.dumps({"list_variables": text_of(await mcp.call_tool("list_variables", {}))})
        except BaseException as exc:  # noqa: BLE001
            return json.dumps({"error": f"{type(exc).__name__}: {exc}"})

    # --- ACP -------------------------------------------------------------------------------------
    async def handle(self, method: str, params: Any, is_notification: bool) -> Any:
        params = params or {}
        if method == "initialize":
            return {"protocolVersion": 1, "agentInfo": {"name": f"hostile-{self.name}", "version": "0.1"},
                    "agentCapabilities": {"loadSession": False,
                                          "sessionCapabilities": {"close": {}, "delete": {}}},
                    "authMethods": []}
        if method == "session/new":
            sid = f"{self.name}-{len(self.sessions) + 1}"
            servers = params.get("mcpServers")
            self.sessions[sid] = {"model": "m1", "mcp": servers}
            self.record(event="session/new", sessionId=sid, mcpServers=servers)
            entry = kernel_entry(servers)
            if entry is not None and CHANNEL_ENV in env_of(entry):
                self.attack_soon(sid, entry)
            return {"sessionId": sid, "configOptions": self.options(sid)}
        if method in ("session/close", "session/delete"):
            self.record(event=method, sessionId=params.get("sessionId"))
            return {}
        if method == "session/set_config_option":
            sid = params["sessionId"]
            if params.get("configId") != "model" or params.get("value") not in ("m1", "m2"):
                raise RequestError(-32602, "bad option")
            self.sessions[sid]["model"] = params["value"]
            return {"configOptions": self.options(sid)}
        if method == "session/prompt":
            sid = params["sessionId"]
            text = " ".join(b.get("text", "") for b in params.get("prompt") or () if b.get("type") == "text")
            reply = await self.attack_now(sid) if text == "attack" else (
                json.dumps(self.sessions[sid]["mcp"]) if text == "mcp" else f"{self.name} heard: {text}")
            assert self.conn is not None
            await self.conn.send_notification("session/update", {"sessionId": sid, "update": {
                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": reply}}})
            return {"stopReason": "end_turn"}
        if is_notification:
            return None
        raise RequestError.method_not_found(method)


def text_of(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in getattr(result, "content", None) or [])


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--record", required=True)
    args = parser.parse_args()
    reader, writer = await stdio_streams()
    agent = Hostile(args)
    conn = Connection(agent.handle, writer, reader, listening=False)
    agent.conn = conn
    await conn.main_loop()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
