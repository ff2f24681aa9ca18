"""An ACP agent on stdio, frames written by hand, that takes the `kernel` MCP server of session/new and either
connects to it as the session opens (as claude-agent-acp, codex-acp, opencode and a trusting gemini-cli do) or
never does (gemini-cli in a folder it does not trust: it says nothing).

    python mcp_agent.py MODE [RECORDING]

MODE: ``never`` (takes the entry, starts nothing), ``connect`` (starts the entry's command with its env, sends
MCP ``initialize``, waits for the answer, sends ``notifications/initialized``, before answering session/new),
``trust`` (``connect`` when GEMINI_CLI_TRUST_WORKSPACE=true is in its environment, else ``never``: gemini-cli's
rule), ``bridge`` (starts the server and sends only an MCP ping, which is answered before initialize: a bridge
that reached the kernel and never began MCP). RECORDING: a recording (notebooks/recordings/...) whose agent's initialize answer this agent gives as its
own, so the client knows it as that agent (agentInfo and all); without it, "mcp-test-agent".

A prompt is answered "Hello." with end_turn; a prompt starting with "cancel" is answered with stopReason
cancelled. Runs until stdin closes, then ends the servers it started.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from typing import Any, TextIO

MCP_PROTOCOL = "2025-06-18"


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def recorded_initialize(path: str) -> dict[str, Any]:
    """The agent's answer to initialize in a recording."""
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            entry = json.loads(line)
            msg = entry.get("msg") or {}
            if entry.get("dir") == "recv" and msg.get("id") == 0 and "result" in msg:
                return msg["result"]
    raise SystemExit(f"no initialize answer in {path}")


def mcp_call(stdin: TextIO, stdout: TextIO, message: dict[str, Any]) -> dict[str, Any] | None:
    """Send one MCP message; for a request, its answer (lines that are not it are skipped)."""
    stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    stdin.flush()
    if "id" not in message:
        return None
    for line in stdout:
        answer = json.loads(line)
        if answer.get("id") == message["id"]:
            return answer
    raise SystemExit("the kernel MCP server ended before answering initialize")


def connect(entry: dict[str, Any], *, initialize: bool = True) -> subprocess.Popen[str]:
    """Start the entry's server and begin MCP with it, as an agent's MCP client does (``initialize=False``: only
    a ping, answered once the bridge is through to the kernel)."""
    env = {**os.environ, **{pair["name"]: pair["value"] for pair in entry.get("env") or []}}
    server = subprocess.Popen([entry["command"], *entry.get("args", [])], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, env=env, text=True)
    assert server.stdin is not None and server.stdout is not None
    if not initialize:
        answer = mcp_call(server.stdin, server.stdout, {"id": 0, "method": "ping"})
        assert answer is not None and "result" in answer, answer
        return server
    answer = mcp_call(server.stdin, server.stdout, {"id": 0, "method": "initialize", "params": {
        "protocolVersion": MCP_PROTOCOL, "capabilities": {}, "clientInfo": {"name": "mcp-test-agent", "version": "1"}}})
    assert answer is not None and "result" in answer, answer
    mcp_call(server.stdin, server.stdout, {"method": "notifications/initialized"})
    return server


def main() -> None:
    mode = sys.argv[1]
    if mode == "trust":
        mode = "connect" if os.environ.get("GEMINI_CLI_TRUST_WORKSPACE") == "true" else "never"
    initialized = recorded_initialize(sys.argv[2]) if len(sys.argv) > 2 else {
        "protocolVersion": 1, "agentInfo": {"name": "mcp-test-agent", "version": "1"},
        "agentCapabilities": {"loadSession": False}, "authMethods": []}
    servers: list[subprocess.Popen[str]] = []
    session_ids = (f"mcp-{n}" for n in itertools.count(1))
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, request_id, params = message.get("method"), message.get("id"), message.get("params") or {}
        if request_id is None or method is None:
            continue  # notifications and answers: nothing to do
        if method == "initialize":
            send({"id": request_id, "result": initialized})
        elif method == "session/new":
            kernel = [s for s in params.get("mcpServers") or [] if s.get("name") == "kernel"]
            if mode in ("connect", "bridge") and kernel:
                servers.append(connect(kernel[0], initialize=mode == "connect"))
            send({"id": request_id, "result": {"sessionId": next(session_ids)}})
        elif method == "session/prompt":
            text = " ".join(b.get("text", "") for b in params.get("prompt") or [] if b.get("type") == "text")
            if text.startswith("cancel"):
                send({"id": request_id, "result": {"stopReason": "cancelled"}})
                continue
            send({"method": "session/update", "params": {"sessionId": params["sessionId"], "update": {
                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hello."}}}})
            send({"id": request_id, "result": {"stopReason": "end_turn"}})
        else:
            send({"id": request_id, "error": {"code": -32601, "message": f"Method not found: {method}"}})
    for server in servers:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
