"""An ACP agent (built on the SDK's typed Agent interface) that accepts every model pick and ignores it.

Its model option offers "fast" and "smart" but always reports "fast" in force, the way an agent
that silently falls back to its default would. A prompt "crash" makes the process exit mid-turn;
any other prompt gets "[fast] ok: PROMPT" in two chunks, and a usage report with token counts.
"""

from __future__ import annotations

import asyncio
import os
import sys
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
    Usage,
)

MODEL_VALUES = ("fast", "smart")
IN_FORCE = "fast"


def model_option() -> SessionConfigOptionSelect:
    return SessionConfigOptionSelect(
        id="model", name="Model", category="model", type="select", current_value=IN_FORCE,
        options=[SessionConfigSelectOption(value=v, name=v.title()) for v in MODEL_VALUES],
    )


class StubbornAgent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.sessions = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities(),
                                  agent_info=Implementation(name="stubborn-agent", version="1.0"))

    async def new_session(self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None,
                          **kwargs: Any) -> NewSessionResponse:
        self.sessions += 1
        return NewSessionResponse(session_id=f"stubborn-{self.sessions}", config_options=[model_option()])

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool,
                                **kwargs: Any) -> SetSessionConfigOptionResponse:
        # Accepted without complaint, and ignored: the option still says "fast".
        return SetSessionConfigOptionResponse(config_options=[model_option()])

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = " ".join(getattr(block, "text", "") for block in prompt)
        if text.strip() == "crash":
            print("stubborn-agent: crashing on purpose", file=sys.stderr, flush=True)
            os._exit(3)
        for piece in (f"[{IN_FORCE}] ok: ", text):
            await self.conn.session_update(session_id=session_id, update=update_agent_message(text_block(piece)))
        words = len(text.split())
        return PromptResponse(stop_reason="end_turn",
                              usage=Usage(input_tokens=words, output_tokens=words + 2, total_tokens=2 * words + 2))

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


if __name__ == "__main__":
    asyncio.run(run_agent(StubbornAgent(), use_unstable_protocol=True))
