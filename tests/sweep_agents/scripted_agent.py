"""An ACP agent whose misbehaviour is scripted by the prompt, for the sweep tests (built on the SDK's Agent).

Models "fast" and "smart" (a model option that switches as asked). Prompts:

- ``ratelimit KEY N``: the first N attempts with this KEY fail with a rate-limit error, then it answers.
- ``exit KEY N``: the first N attempts with this KEY make the process exit mid-turn, then it answers.
- a grading prompt (one with ``[Answer to grade]``): "GRADE: C" when the reference answer occurs in the
  graded answer's last line, else "GRADE: I".
- anything else: ``[MODEL] ok: PROMPT``.

Attempts are counted in files under ``--state DIR``, so they survive the process exits. Every turn
reports usage (input/output/total tokens) and a usage_update with ``--cost`` USD.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, run_agent
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
_SCRIPT = re.compile(r"^(ratelimit|exit)\s+(\w+)\s+(\d+)$")
_SECTION = re.compile(r"\[(Reference answer|Answer to grade)\]\n(.*?)(?=\n\[|\Z)", re.DOTALL)


def model_option(current: str) -> SessionConfigOptionSelect:
    return SessionConfigOptionSelect(
        id="model", name="Model", category="model", type="select", current_value=current,
        options=[SessionConfigSelectOption(value=v, name=v.title()) for v in MODEL_VALUES],
    )


def grade(prompt: str) -> str:
    sections = {name: body.strip() for name, body in _SECTION.findall(prompt)}
    reference = sections.get("Reference answer", "")
    last_line = (sections.get("Answer to grade", "").splitlines() or [""])[-1]
    verdict = "C" if reference and reference in last_line else "I"
    return f"The reference is {reference!r}; the answer ends with {last_line!r}.\nGRADE: {verdict}"


class ScriptedAgent:
    def __init__(self, state: Path, cost: float) -> None:
        self.state = state
        self.cost = cost
        self.conn: Any = None
        self.models: dict[str, str] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None,
                         **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=PROTOCOL_VERSION, agent_capabilities=AgentCapabilities(),
                                  agent_info=Implementation(name="scripted-agent", version="1.0"))

    async def new_session(self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None,
                          **kwargs: Any) -> NewSessionResponse:
        session_id = f"scripted-{os.getpid()}-{len(self.models) + 1}"
        self.models[session_id] = "fast"
        return NewSessionResponse(session_id=session_id, config_options=[model_option("fast")])

    async def set_config_option(self, config_id: str, session_id: str, value: str | bool,
                                **kwargs: Any) -> SetSessionConfigOptionResponse:
        if value not in MODEL_VALUES:
            raise RequestError.invalid_params({"valid": list(MODEL_VALUES)})
        self.models[session_id] = str(value)
        return SetSessionConfigOptionResponse(config_options=[model_option(str(value))])

    def _attempt(self, key: str) -> int:
        """Counts this attempt for KEY in the state directory and returns its number (1 for the first)."""
        counter = self.state / f"{key}.count"
        number = int(counter.read_text()) + 1 if counter.exists() else 1
        counter.write_text(str(number))
        return number

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        text = " ".join(getattr(block, "text", "") for block in prompt).strip()
        script = _SCRIPT.match(text)
        if script and self._attempt(script[2]) <= int(script[3]):
            if script[1] == "exit":
                print(f"scripted-agent: exiting on purpose ({script[2]})", file=sys.stderr, flush=True)
                os._exit(3)
            raise RequestError(-32603, "Rate limit exceeded (429): try again later")
        reply = grade(text) if "[Answer to grade]" in text else f"[{self.models[session_id]}] ok: {text}"
        await self.conn.session_update(session_id=session_id, update=update_agent_message(text_block(reply)))
        await self.conn.session_update(session_id=session_id, update={
            "sessionUpdate": "usage_update", "used": 10, "size": 1000,
            "cost": {"amount": self.cost, "currency": "USD"}})
        words = len(text.split())
        return PromptResponse(stop_reason="end_turn",
                              usage=Usage(input_tokens=words, output_tokens=words + 2, total_tokens=2 * words + 2))

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", required=True, type=Path)
    parser.add_argument("--cost", type=float, default=0.01)
    args = parser.parse_args()
    args.state.mkdir(parents=True, exist_ok=True)
    asyncio.run(run_agent(ScriptedAgent(args.state, args.cost), use_unstable_protocol=True))


if __name__ == "__main__":
    main()
