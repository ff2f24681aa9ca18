"""How each pinned third-party agent runs offline in the interop tests: the registry's entry plus the
arguments and environment that point it at our model server, a fresh HOME and no network.

The registry (`acp_notebook.launch`) is the one source of the packages, versions, binaries and
auth rules; this module only adds what a test run needs. `setup.spec(home, server)` is an
`AgentSpec` that `acpnb.start` and `acpnb.start_proxy` take as it is. Measured facts behind it:
FINDINGS.md. Give every run a fresh HOME: the agents write sessions, settings and (codex) the API
key there.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from acp_notebook import launch
from acp_notebook.launch import AgentSpec

if TYPE_CHECKING:
    from model_server import ModelServer

DUMMY_KEY = "dummy-key-for-offline-tests"

# Nothing listens on the discard port: npm calls an agent makes (opencode installs a plugin at every
# start, claude runs `npm root --global`) fail at once instead of reaching the registry.
DEAD_NPM_REGISTRY = "http://127.0.0.1:9/"


def agent_cache() -> Path:
    """Where scripts/install-agents.sh installs the agents (the registry looks there too)."""
    return launch.agent_cache_dir()


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
                    # attachment + image input: the model takes the images a prompt carries (else opencode
                    # replaces each with a note that the model cannot read it).
                    "interop-model": {"name": "Interop Model", "tool_call": True, "attachment": True,
                                      "modalities": {"input": ["text", "image"], "output": ["text"]}},
                    # reasoning=true gives the model effort variants: picking it adds the
                    # `effort` config option (category thought_level).
                    "interop-model-large": {"name": "Interop Model Large", "tool_call": True, "reasoning": True},
                },
            },
        },
    }


def _claude_env(server: ModelServer | None) -> dict[str, str]:
    if server is None:
        return {}
    # Claude Code (in claude-agent-acp 0.101.0) defers MCP tools behind its ToolSearch tool by default: the
    # model request carries ToolSearch, not the kernel's tools, and a real model looks them up first. The
    # scripted model does not, so the tests turn tool search off and get the tools in every request.
    return {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": DUMMY_KEY, "ENABLE_TOOL_SEARCH": "false"}


def _opencode_env(server: ModelServer | None) -> dict[str, str]:
    if server is None:
        return {}
    return {"OPENCODE_CONFIG_CONTENT": json.dumps(opencode_config(server))}


def codex_config(server: ModelServer | None) -> dict:
    """CODEX_CONFIG (codex-acp 2.x reads its codex config as JSON from this variable and ignores `-c`
    arguments): a model provider of our own on the model server. Codex asks for no `authenticate` then:
    the provider reads its key from OPENAI_API_KEY at each request."""
    if server is None:
        return {}
    return {
        "model_provider": "interop",
        # A model codex lists; it has no metadata for it, so each turn starts with a warning notice
        # (the recordings keep one). The server ignores the name.
        "model": "gpt-5.4",
        "model_providers": {"interop": {"name": "Interop model server", "base_url": f"{server.url}/v1",
                                        "wire_api": "responses", "env_key": "OPENAI_API_KEY"}},
    }


def codex_openai_env(server: ModelServer, home: Path) -> dict[str, str]:
    """Codex's built-in OpenAI provider, moved onto the model server: this one wants `authenticate`
    (api-key) before session/new, as with a real key against api.openai.com.

    The base URL goes in `home`'s `~/.codex/config.toml`, where a user puts it, not in CODEX_CONFIG:
    codex-acp applies CODEX_CONFIG to its threads only, and codex's own model catalogue, read at each
    session/new and turn, would then still be fetched from chatgpt.com (five tries, about 3 s offline).
    """
    (home / ".codex").mkdir(parents=True, exist_ok=True)
    (home / ".codex" / "config.toml").write_text(f'openai_base_url = "{server.url}/v1"\n', encoding="utf-8")
    return {**home_env(home), "CODEX_CONFIG": json.dumps({"model": "gpt-5.4"})}


def _codex_env(server: ModelServer | None) -> dict[str, str]:
    if server is None:
        return {}
    return {"OPENAI_API_KEY": DUMMY_KEY, "CODEX_CONFIG": json.dumps(codex_config(server))}


def _gemini_env(server: ModelServer | None) -> dict[str, str]:
    if server is None:
        return {}
    return {"GEMINI_API_KEY": DUMMY_KEY, "GOOGLE_GEMINI_BASE_URL": server.url}


def home_env(home: Path) -> dict[str, str]:
    """HOME and every XDG directory under it, so nothing of the user's own config is read or written."""
    return {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }


@dataclass(frozen=True)
class AgentSetup:
    name: str
    server_args: Callable[[ModelServer | None], list[str]] = field(default=lambda server: [])
    server_env: Callable[[ModelServer | None], dict[str, str]] = field(default=lambda server: {})
    # For the raw exploration harness, which does not authenticate on its own as our client does:
    # the method to call before session/new, if the agent needs one with the setup above.
    auth_method: str | None = None

    @property
    def registry(self) -> AgentSpec:
        spec = launch.registered(self.name)
        assert spec is not None, f"{self.name} is not in the registry"
        return spec

    @property
    def package(self) -> str:
        return (self.registry.npm_package or "").rsplit("@", 1)[0]

    @property
    def version(self) -> str:
        return self.registry.version or ""

    def executable(self) -> Path:
        """The binary scripts/install-agents.sh put in the cache (the registry's first cache path)."""
        return agent_cache() / self.name / self.registry.cache_paths[0]

    def installed_version(self) -> str | None:
        """The version of the package in the cache, or None when it is not there."""
        manifest = agent_cache() / self.name / "node_modules" / self.package / "package.json"
        if not manifest.is_file() or not os.access(self.executable(), os.X_OK):
            return None
        return str(json.loads(manifest.read_text()).get("version") or "") or None

    def installed(self) -> bool:
        return self.installed_version() == self.version

    def command(self, server: ModelServer | None = None, extra_args: list[str] | None = None) -> list[str]:
        registry = self.registry
        return [str(self.executable()), *registry.command[1:], *self.server_args(server), *(extra_args or [])]

    def env(self, server: ModelServer | None = None) -> dict[str, str]:
        """The registry's offline env, a dead npm registry and the model server's settings (no HOME)."""
        return {**self.registry.offline_env, "npm_config_registry": DEAD_NPM_REGISTRY, **self.server_env(server)}

    def spec(self, home: Path, server: ModelServer | None = None, *, env: Mapping[str, str] | None = None,
             extra_args: list[str] | None = None) -> AgentSpec:
        """The registry's AgentSpec (auth rules and all) with the test's arguments and environment."""
        registry = self.registry
        command = (registry.command[0], *registry.command[1:], *self.server_args(server), *(extra_args or []))
        return replace(registry, command=command,
                       env={**registry.env, **self.env(server), **home_env(home), **(env or {})})


AGENTS: dict[str, AgentSetup] = {
    "claude": AgentSetup(name="claude", server_env=_claude_env),
    "opencode": AgentSetup(name="opencode", server_env=_opencode_env),
    "codex": AgentSetup(name="codex", server_env=_codex_env),
    "gemini": AgentSetup(name="gemini", server_env=_gemini_env),
}
