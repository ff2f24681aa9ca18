"""An ACP agent on stdio (frames by hand, no SDK) that needs a terminal login before it opens a session.

It offers one auth method, ``{"type": "terminal", "id": "tui", "args": ["--login"], "env": {"LOGIN_AGENT_MODE":
"terminal"}}``, and only to a client that says it handles terminal logins (``clientCapabilities.auth.terminal``),
as ACP requires. ``session/new`` is refused with "authentication required" until the credentials file
(``$LOGIN_AGENT_CREDENTIALS``) exists; a prompt is answered "Hello, NAME." with the name the login saved.
``authenticate`` is refused: a terminal method must never be sent to it.

Run with ``--login`` (the method's args), it is the login itself: login_flow.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

AUTH_REQUIRED = -32000  # ACP's "authentication required"
METHOD = {"type": "terminal", "id": "tui", "name": "Log in", "description": "Sign in from the terminal",
          "args": ["--login"], "env": {"LOGIN_AGENT_MODE": "terminal"}}


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def logged_in_as() -> str | None:
    path = Path(os.environ["LOGIN_AGENT_CREDENTIALS"])
    try:
        return str(json.loads(path.read_text())["name"])
    except (OSError, ValueError, KeyError):
        return None


def answer(method: str, params: dict[str, Any], capabilities: dict[str, Any]) -> dict[str, Any]:
    if method == "initialize":
        terminal = bool((params.get("clientCapabilities") or {}).get("auth", {}).get("terminal"))
        capabilities.update(params.get("clientCapabilities") or {})
        return {"result": {"protocolVersion": 1, "agentInfo": {"name": "login-agent", "version": "1"},
                           "agentCapabilities": {"loadSession": False}, "authMethods": [METHOD] if terminal else []}}
    if method == "authenticate":
        return {"error": {"code": -32602, "message": "a terminal login is not sent to authenticate"}}
    if method == "session/new":
        if logged_in_as() is None:
            return {"error": {"code": AUTH_REQUIRED, "message": "Authentication required"}}
        return {"result": {"sessionId": "login-1"}}
    if method == "session/prompt":
        text = f"Hello, {logged_in_as()}."
        send({"method": "session/update", "params": {"sessionId": params.get("sessionId"), "update": {
            "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
        return {"result": {"stopReason": "end_turn"}}
    return {"error": {"code": -32601, "message": f"Method not found: {method}"}}


def main() -> None:
    capabilities: dict[str, Any] = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None or method is None:
            continue
        send({"id": request_id, **answer(method, message.get("params") or {}, capabilities)})


if __name__ == "__main__":
    if sys.argv[1:] == ["--login"]:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from login_flow import main as login

        sys.exit(login())
    main()
