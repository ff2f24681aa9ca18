"""How to run each pinned third-party agent offline: its binary, arguments, environment and auth.

Measured against the versions `scripts/install-agents.sh` installs (see FINDINGS.md). With a
`ModelServer`, `env(server)` points the agent at it so full turns work without a network;
without one, `env(None)` is the minimum for initialize and session/new. Give every run a
fresh HOME: the agents write sessions, settings and (codex) the API key there.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from model_server import ModelServer

DUMMY_KEY = "dummy-key-for-offline-tests"


def agent_cache() -> Path:
    """Where scripts/install-agents.sh installs the agents."""
    default = Path.home() / ".cache" / "acp-notebook" / "agents"
    return Path(os.environ.get("ACP_NOTEBOOK_AGENT_CACHE", default))


def opencode_config(server: ModelServer) -> dict:
    """OPENCODE_CONFIG_CONTENT: one provider on the model server, nothing else."""
    return {
        "$schema": "https://opencode.ai/config.json",
        "model": "interop/interop-model",
        "small_model": "interop/interop-model",
        # Without this the bundled "OpenCode Zen" models are listed too.
        "enabled_providers": ["interop"],
        # The default is to allow edits and shell commands; "ask" makes opencode send
        # session/request_permission for them.
        "permission": {"edit": "ask", "bash": "ask"},
        "share": "disabled",
        "autoupdate": False,
        "provider": {
            "interop": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Interop model server",
                "options": {"baseURL": f"{server.url}/v1", "apiKey": DUMMY_KEY},
                "models": {
                    "interop-model": {"name": "Interop Model", "tool_call": True},
                    # reasoning=true gives the model effort variants: picking it adds the
                    # `effort` config option (category thought_level).
                    "interop-model-large": {"name": "Interop Model Large", "tool_call": True, "reasoning": True},
                },
            },
        },
    }


def _claude_env(server: ModelServer | None) -> dict[str, str]:
    env = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    if server is not None:
        env |= {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": DUMMY_KEY}
    return env


def _opencode_env(server: ModelServer | None) -> dict[str, str]:
    env = {"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"}
    if server is not None:
        env["OPENCODE_CONFIG_CONTENT"] = json.dumps(opencode_config(server))
    return env


def _codex_args(server: ModelServer | None) -> list[str]:
    if server is None:
        return []
    return [
        "-c", "model_provider=interop",
        # A model codex has metadata for: it then offers reasoning_effort and does not prefix
        # every reply with a "Model metadata not found" warning. The server ignores the name.
        "-c", "model=gpt-5.4",
        "-c", 'model_providers.interop.name="Interop model server"',
        "-c", f'model_providers.interop.base_url="{server.url}/v1"',
        "-c", 'model_providers.interop.wire_api="responses"',
        "-c", 'model_providers.interop.env_key="OPENAI_API_KEY"',
    ]


def _gemini_env(server: ModelServer | None) -> dict[str, str]:
    env = {"GEMINI_API_KEY": DUMMY_KEY}
    if server is not None:
        env["GOOGLE_GEMINI_BASE_URL"] = server.url
    return env


@dataclass(frozen=True)
class AgentSetup:
    name: str
    package: str
    version: str
    # Relative to the agent's prefix in the cache.
    binary: str
    fixed_args: tuple[str, ...] = ()
    server_args: Callable[[ModelServer | None], list[str]] = field(default=lambda server: [])
    server_env: Callable[[ModelServer | None], dict[str, str]] = field(default=lambda server: {})
    # authenticate must be called with this method before session/new (codex) or is
    # accepted and harmless (gemini); None: the agent lists no method it needs here.
    auth_method: str | None = None

    def executable(self) -> Path:
        return agent_cache() / self.name / self.binary

    def installed(self) -> bool:
        return self.executable().is_file()

    def command(self, server: ModelServer | None = None) -> list[str]:
        return [str(self.executable()), *self.fixed_args, *self.server_args(server)]

    def env(self, server: ModelServer | None = None) -> dict[str, str]:
        return self.server_env(server)


AGENTS: dict[str, AgentSetup] = {
    "claude": AgentSetup(
        name="claude", package="@zed-industries/claude-agent-acp", version="0.23.1",
        binary="node_modules/.bin/claude-agent-acp", server_env=_claude_env),
    "opencode": AgentSetup(
        name="opencode", package="opencode-ai", version="1.18.33",
        binary="node_modules/.bin/opencode", fixed_args=("acp",), server_env=_opencode_env),
    "codex": AgentSetup(
        name="codex", package="@zed-industries/codex-acp", version="0.16.0",
        # The native binary, not the node wrapper (which orphans it when killed).
        binary="node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp",
        server_args=_codex_args, server_env=lambda server: {"OPENAI_API_KEY": DUMMY_KEY},
        auth_method="openai-api-key"),
    "gemini": AgentSetup(
        name="gemini", package="@google/gemini-cli", version="0.61.0",
        binary="node_modules/.bin/gemini", fixed_args=("--acp",), server_env=_gemini_env,
        auth_method="gemini-api-key"),
}
