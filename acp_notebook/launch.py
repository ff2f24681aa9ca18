"""Agent specs and the registry of known agents: name -> how to run it, which env vars it reads."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Union

from .errors import AgentStartError

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["AgentSpec", "AgentStatus", "AgentTable", "agents", "agent_cache_dir", "register", "resolve_spec",
           "user_agents_file"]


@dataclass(frozen=True)
class AgentSpec:
    """How to start one ACP agent.

    ``command`` is tried first when its program is installed (on PATH or in the
    agent cache that ``scripts/install-agents.sh`` fills); otherwise, for npm
    agents, ``npx -y PACKAGE@VERSION`` with ``args``.
    """

    name: str
    command: tuple[str, ...]
    npm_package: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    env_vars: tuple[str, ...] = ()
    auth_methods: tuple[str, ...] = ()
    cache_paths: tuple[str, ...] = ()
    description: str = ""
    homepage: str = ""

    @property
    def program(self) -> str:
        return self.command[0]

    def installed_command(self) -> list[str] | None:
        """The full command when the agent's own program can be found here, else None."""
        program = self.program
        if os.path.isabs(program):
            return [program, *self.command[1:]] if os.access(program, os.X_OK) else None
        cache = agent_cache_dir() / self.name
        for rel in self.cache_paths:
            candidate = cache / rel
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return [str(candidate), *self.command[1:]]
        found = shutil.which(program)
        return [found, *self.command[1:]] if found else None

    def resolve(self) -> list[str]:
        """The command to run now: the installed program, or npx; AgentStartError saying what is missing."""
        command = self.installed_command()
        if command:
            return command
        if self.npm_package and shutil.which("npx"):
            return ["npx", "-y", self.npm_package, *self.args]
        missing = f"'{self.program}' is not installed"
        if self.npm_package:
            hint = (f"Install it with `npm install -g {self.npm_package}` (or run scripts/install-agents.sh), "
                    "or install Node.js so that npx can fetch it.")
        else:
            hint = f"Put '{self.program}' on PATH, or register the agent with its full command."
        raise AgentStartError(f"cannot start agent '{self.name}': {missing}", command=self.command, hint=hint)

    def status(self) -> AgentStatus:
        installed = self.installed_command()
        if installed:
            return AgentStatus(self.name, self, True, "installed", installed)
        if self.npm_package and shutil.which("npx"):
            return AgentStatus(self.name, self, False, "npx (downloads on first start)",
                               ["npx", "-y", self.npm_package, *self.args])
        return AgentStatus(self.name, self, False, "missing", list(self.command))

    def missing_env(self) -> list[str]:
        """Env vars the agent reads for keys that are not set here (informational: some agents log in instead)."""
        return [name for name in self.env_vars if not os.environ.get(name)]


@dataclass(frozen=True)
class AgentStatus:
    name: str
    spec: AgentSpec
    installed: bool
    how: str
    command: list[str]

    @property
    def can_start(self) -> bool:
        return self.how != "missing"


class AgentTable(dict):
    """``name -> AgentStatus``, shown as a table in notebooks."""

    def _repr_html_(self) -> str:
        from html import escape

        rows = "".join(
            f"<tr><td><code>{escape(s.name)}</code></td><td>{escape(s.spec.description)}</td>"
            f"<td>{'yes' if s.installed else 'no'}</td><td>{escape(s.how)}</td>"
            f"<td><code>{escape(shlex.join(s.command))}</code></td>"
            f"<td>{escape(', '.join(s.spec.env_vars))}</td></tr>"
            for s in self.values()
        )
        return ("<table><tr><th>name</th><th>agent</th><th>installed</th><th>runs via</th>"
                f"<th>command</th><th>env vars</th></tr>{rows}</table>")

    def __repr__(self) -> str:
        width = max((len(n) for n in self), default=4)
        lines = [f"{s.name:<{width}}  {'installed' if s.installed else s.how:<12}  {shlex.join(s.command)}"
                 for s in self.values()]
        return "\n".join(lines)


def agent_cache_dir() -> Path:
    """Where scripts/install-agents.sh puts npm agents (one prefix per agent)."""
    return Path(os.environ.get("ACP_NOTEBOOK_AGENT_CACHE") or Path.home() / ".cache" / "acp-notebook" / "agents")


def user_agents_file() -> Path:
    explicit = os.environ.get("ACP_NOTEBOOK_AGENTS_FILE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "acp-notebook" / "agents.toml"


def _builtin() -> dict[str, AgentSpec]:
    demo = AgentSpec(
        name="demo",
        command=(sys.executable, "-m", "acp_notebook.demo"),
        description="the built-in demo agent (offline, deterministic)",
    )
    claude = AgentSpec(
        name="claude",
        command=("claude-agent-acp",),
        npm_package="@zed-industries/claude-agent-acp@0.23.1",
        env_vars=("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_OAUTH_TOKEN"),
        cache_paths=("node_modules/.bin/claude-agent-acp",),
        description="Claude Code through claude-agent-acp",
    )
    codex = AgentSpec(
        name="codex",
        command=("codex-acp",),
        npm_package="@zed-industries/codex-acp@0.16.0",
        env_vars=("OPENAI_API_KEY", "CODEX_API_KEY"),
        auth_methods=("openai-api-key", "codex-api-key", "chatgpt"),
        cache_paths=("node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp", "node_modules/.bin/codex-acp"),
        description="OpenAI Codex through codex-acp",
    )
    gemini = AgentSpec(
        name="gemini",
        command=("gemini", "--acp"),
        npm_package="@google/gemini-cli@0.61.0",
        args=("--acp",),
        env_vars=("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"),
        auth_methods=("gemini-api-key", "oauth-personal", "vertex-ai"),
        cache_paths=("node_modules/.bin/gemini",),
        description="Google Gemini CLI in ACP mode",
    )
    opencode = AgentSpec(
        name="opencode",
        command=("opencode", "acp"),
        npm_package="opencode-ai@1.18.33",
        args=("acp",),
        env_vars=("OPENCODE_CONFIG_CONTENT", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"),
        cache_paths=("node_modules/.bin/opencode",),
        description="OpenCode in ACP mode",
    )
    return {spec.name: spec for spec in (demo, claude, codex, gemini, opencode)}


_registry: dict[str, AgentSpec] = _builtin()

SpecLike = Union[str, Sequence[str], AgentSpec]


def register(name: str, spec: SpecLike | Mapping[str, Any], *, env: Mapping[str, str] | None = None,
             description: str = "") -> AgentSpec:
    """Add (or replace) a named agent: a command line, an argv list, a mapping as in the TOML file, or an AgentSpec."""
    if not name or not isinstance(name, str) or ":" in name or any(c.isspace() for c in name):
        raise ValueError(f"agent names are single words without ':' (got {name!r})")
    if isinstance(spec, AgentSpec):
        made = replace(spec, name=name)
    elif isinstance(spec, Mapping):
        made = _spec_from_mapping(name, spec)
    else:
        made = AgentSpec(name=name, command=tuple(_argv(spec)), env=dict(env or {}), description=description)
    _registry[name] = made
    return made


def _argv(command: str | Sequence[str]) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
    if not argv:
        raise ValueError("an agent command cannot be empty")
    return argv


def _spec_from_mapping(name: str, data: Mapping[str, Any]) -> AgentSpec:
    if "command" not in data:
        raise ValueError(f"agent {name!r}: 'command' is required (a string or a list)")
    return AgentSpec(
        name=name,
        command=tuple(_argv(data["command"])),
        npm_package=data.get("npm_package"),
        args=tuple(data.get("args") or ()),
        env={str(k): str(v) for k, v in (data.get("env") or {}).items()},
        env_vars=tuple(data.get("env_vars") or ()),
        auth_methods=tuple(data.get("auth_methods") or ()),
        description=str(data.get("description") or ""),
    )


def load_user_agents(path: Path | None = None) -> list[str]:
    """Read ``[agents.NAME]`` tables from the user's TOML file into the registry; returns the names added."""
    path = path or user_agents_file()
    if not path.is_file():
        return []
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from exc
    added = []
    for name, table in (data.get("agents") or {}).items():
        if not isinstance(table, Mapping):
            raise ValueError(f"{path}: [agents.{name}] must be a table")
        register(name, table)
        added.append(name)
    return added


_user_file_loaded: Path | None = None


def _ensure_user_agents() -> None:
    global _user_file_loaded
    path = user_agents_file()
    if _user_file_loaded != path:
        _user_file_loaded = path
        load_user_agents(path)


def agents() -> AgentTable:
    """Every registered agent with whether (and how) it can start on this machine."""
    _ensure_user_agents()
    return AgentTable((name, spec.status()) for name, spec in _registry.items())


def registered(name: str) -> AgentSpec | None:
    _ensure_user_agents()
    return _registry.get(name)


def resolve_spec(spec: SpecLike, env: Mapping[str, str] | None = None) -> tuple[str, list[str], dict[str, str]]:
    """``(display name, argv, extra env)`` for a registry name, a command line, an argv list or an AgentSpec."""
    if isinstance(spec, AgentSpec):
        return spec.name, spec.resolve(), {**spec.env, **(env or {})}
    if isinstance(spec, str) and not any(c.isspace() for c in spec.strip()):
        found = registered(spec.strip())
        if found is not None:
            return found.name, found.resolve(), {**found.env, **(env or {})}
        if shutil.which(spec.strip()) is None:
            known = ", ".join(sorted(_registry))
            raise AgentStartError(
                f"unknown agent {spec!r}",
                command=[spec],
                hint=f"Use a registered name ({known}), a command list such as ['python', 'agent.py'], "
                     "or acpnb.register(name, command).",
            )
    argv = _argv(spec)  # type: ignore[arg-type]
    return Path(argv[0]).name, argv, dict(env or {})


def known_names() -> Iterable[str]:
    _ensure_user_agents()
    return list(_registry)
