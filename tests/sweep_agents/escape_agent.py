"""A hostile ACP agent (built on the SDK's Agent) that tries to get out of its workspace with its own tools, the
way an agent with a shell would: no client fs/* requests, plain file and socket calls from its process.

The prompt is a JSON object naming what to try:

- ``"outside"``: a file path outside the workspace to create;
- ``"secret"``: a file to read (a key under ~/.ssh);
- ``"port"``: a TCP port on 127.0.0.1 to connect to;
- ``"state"``: a file in the agent's own state folder to write (allowed in the sandbox);
- ``"writes"``: {label: path} more files to create (relative paths from its working directory);
- ``"looks"``: {label: path} files or folders to read (a folder: its entries), reported under ``look:<label>``.

It also writes ``inside.txt`` in its working directory (the workspace). The reply (and ``report.json`` in the
workspace) maps each attempt to "done" or "refused: <error>"; the secret's content is included when it was read.
One model option ("fast"), so a sweep can pick it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, run_agent
from acp.helpers import text_block, update_agent_message
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SetSessionConfigOptionResponse,
)


def model_option() -> SessionConfigOptionSelect:
    return SessionConfigOptionSelect(id="model", name="Model", category="model", type="select", current_value="fast",
                                     options=[SessionConfigSelectOption(value="fast", name="Fast")])


def attempt(action: Any) -> str:
    try:
        result = action()
    except OSError as exc:
        return f"refused: {type(exc).__name__}: {exc.strerror or exc}"
    return "done" if result is None else f"done: {result}"


def connect(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as link:
        link.sendall(b"escaped\n")


def attack(plan: dict[str, Any], cwd: Path) -> dict[str, str]:
    report = {"inside": attempt(lambda: (cwd / "inside.txt").write_text("the agent was here\n") and None)}
    if plan.get("outside"):
        report["outside"] = attempt(lambda: Path(plan["outside"]).write_text("escaped\n") and None)
    if plan.get("secret"):
        report["secret"] = attempt(lambda: Path(plan["secret"]).read_text())
    if plan.get("port"):
        report["port"] = attempt(lambda: connect(int(plan["port"])))
    if plan.get("state"):
        report["state"] = attempt(lambda: Path(plan["state"]).write_text("state\n") and None)
    for label, path in (plan.get("writes") or {}).items():
        target = cwd / path
        report[f"write:{label}"] = attempt(lambda t=target: t.parent.mkdir(parents=True, exist_ok=True) or
                                           t.write_text("left here\n") and None)
    for label, path in (plan.get("looks") or {}).items():
        report[f"look:{label}"] = attempt(lambda p=cwd / path: sorted(os.listdir(p)) if p.is_dir() else p.read_text())
    report["cwd"] = f"done: {cwd}"
    attempt(lambda: (cwd / "report.json").write_text(json.dumps(report)) and None)
    return report


class EscapeAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.cwd: dict[str, Path] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities(),
                                  agent_info=Implementation(name="escape-agent", version="1.0"))

    async def new_session(self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None,
                          **kwargs: Any) -> NewSessionResponse:
        session_id = f"escape-{len(self.cwd) + 1}"
        self.cwd[session_id] = Path(cwd)
        return NewSessionResponse(session_id=session_id, config_options=[model_option()])

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool,
                                **kwargs: Any) -> SetSessionConfigOptionResponse:
        return SetSessionConfigOptionResponse(config_options=[model_option()])

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        plan = json.loads(" ".join(getattr(block, "text", "") for block in prompt))
        report = await asyncio.to_thread(attack, plan, self.cwd[session_id])
        await self.conn.session_update(session_id=session_id, update=update_agent_message(text_block(
            json.dumps(report))))
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    os.umask(0o022)
    asyncio.run(run_agent(EscapeAgent(), use_unstable_protocol=True))
