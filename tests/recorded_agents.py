"""Agents written as recordings, for tests that need an agent to behave exactly so: replay them with
``acpnb.replay`` or ``%acp start --replay`` (the replay transport is a real transport under the real client)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_recording(path: Path, frames: list[tuple[str, dict[str, Any]]], *, capabilities: dict | None = None,
                    auth_methods: tuple | list = ()) -> Path:
    """A recording: the agent's initialize answer, then ``frames`` ((dir, msg) pairs, with request ids as the
    client numbers them: initialize is 0, the first request after it 1...)."""
    init = {"protocolVersion": 1, "agentCapabilities": capabilities or {}, "authMethods": list(auth_methods),
            "agentInfo": {"name": "scripted", "version": "1"}}
    lines = [{"acpRecording": 1, "date": "2026-01-01T00:00:00Z", "client": {"name": "acp-notebook"},
              "protocolVersion": 1, "agent": {"name": "scripted", "command": ["scripted-agent"], "cwd": "/rec"},
              "agentInfo": init["agentInfo"]},
             {"dir": "send", "t": 0, "msg": {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}},
             {"dir": "recv", "t": 0, "msg": {"jsonrpc": "2.0", "id": 0, "result": init}}]
    lines += [{"dir": d, "t": 0, "msg": {"jsonrpc": "2.0", **m}} for d, m in frames]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path
