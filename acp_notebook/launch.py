"""Agent specs and the registry of known agents: name -> how to run it, which env vars it reads.

Process-wide: ``_registry``, the one AgentRegistry of the process (what ``acpnb.start("name")``, the magics,
the proxy's launcher and sweeps resolve names with; ``launch.registry`` and ``agent_registry()`` read it).
One per process because agent names are: a name registered anywhere starts the same agent everywhere.
It is built from the built-in specs on first use, not at import (a ``MadeOnFirstUse``: two threads asking
first share one); ``register`` adds to it for the rest of the process; tests undo theirs
with ``registry.overlay()``. It lives until the interpreter exits. Mutated on the caller's thread (the
kernel's, or a script's), read from any.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import shlex
import shutil
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from html import escape
from pathlib import Path
from typing import Any, Union

from ._once import MadeOnFirstUse
from ._process import EXIT_GRACE_S
from .errors import AgentStartError
from .remedies import Remedy, phrase

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["AgentRegistry", "AgentSpec", "AgentStatus", "AgentTable", "agents", "agent_cache_dir", "auth_hint",
           "agent_registry", "auto_auth_method", "register", "registry", "resolve_spec", "spec_for_agent_info",
           "spec_of", "trust_workspace_env", "unknown_agent", "user_agents_file"]


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
    # Env var -> auth method id: when the agent answers "authentication required" to a
    # session request and the variable is set (and the agent offers the method), the client
    # authenticates with it once and retries. Tried in order.
    auth_env: Mapping[str, str] = field(default_factory=dict)
    # Any one of these being set gives the agent what it needs to answer prompts (a key, or
    # for opencode a provider configuration); `login_files` (relative to HOME) mean a login.
    key_vars: tuple[str, ...] = ()
    login_files: tuple[str, ...] = ()
    # What to do when neither is there, in a few words ("set X, or log in with Y").
    login_hint: str = ""
    # Extra environment that keeps the agent off the network when it only starts and opens a
    # session (`acp-notebook agents --check`): no telemetry, no self-update, no plugin installs.
    offline_env: Mapping[str, str] = field(default_factory=dict)
    # Folders (and files) the agent keeps its own state in, writable inside a sandbox (acp_notebook/sandbox.py):
    # ~ and $VAR are expanded, an entry naming an unset variable is skipped. Override with register().
    state_dirs: tuple[str, ...] = ()
    # When the agent connects to the MCP servers a session offers (the notebook's ``kernel``): "start" as the
    # session opens (so a first turn that ends unconnected means it never will), "lazy" only once a prompt needs
    # one, "" not known. kernel_tools/connect.py tells the user when a "start" agent never connected.
    mcp_connect: str = ""
    # The agent's own remedy when it starts no server, in a sentence (``{cwd}``: the session's folder), and the
    # environment that applies it for one start, with the user's consent (``%acp start NAME --trust-workspace``).
    mcp_remedy: str = ""
    trust_env: Mapping[str, str] = field(default_factory=dict)
    # Its initialize's ``agentInfo.name``: to know the agent when it was started by a command line, not by name.
    info_name: str = ""
    # Seconds it gets to exit by itself once its stdin is closed, before SIGTERM: 0 for an agent known to stay
    # (every close would otherwise wait the whole grace for nothing).
    exit_grace: float = EXIT_GRACE_S

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
        raise AgentStartError(f"cannot start agent '{self.name}': {self.missing_package()}", command=self.command,
                              hint=self.install_hint() if self.npm_package else None,
                              remedy=None if self.npm_package else Remedy("program_on_path", {
                                  "program": self.program, "name": self.name}))

    def missing_package(self) -> str:
        if self.npm_package:
            return f"'{self.program}' (npm package {self.npm_package}) is not installed, and npx is not available"
        return f"'{self.program}' is not installed"

    def install_hint(self) -> str:
        if self.npm_package:
            return (f"Install it with `npm install -g {self.npm_package}` (Node.js 20 or newer), or in an "
                    f"acp-notebook checkout run `scripts/install-agents.sh {self.name}`; with Node.js installed, "
                    "npx fetches it on the first start.")
        return phrase(Remedy("program_on_path", {"program": self.program, "name": self.name}), "python") or ""

    def status(self) -> AgentStatus:
        installed = self.installed_command()
        if installed:
            return AgentStatus(self.name, self, True, "installed", installed)
        if self.npm_package and shutil.which("npx"):
            return AgentStatus(self.name, self, False, "npx (downloads on first start)",
                               ["npx", "-y", self.npm_package, *self.args])
        return AgentStatus(self.name, self, False, "missing", list(self.command))

    @property
    def version(self) -> str | None:
        """The pinned version of the npm package, if the spec names one (``pkg@1.2.3``)."""
        if not self.npm_package or "@" not in self.npm_package.lstrip("@"):
            return None
        return self.npm_package.rsplit("@", 1)[1]

    def key_found(self, env: Mapping[str, str] | None = None, home: Path | None = None) -> str | None:
        """Which key variable or login file gives this agent access to a model, or None.

        An agent without ``key_vars`` needs nothing (answers "none needed")."""
        if not self.key_vars and not self.login_files:
            return "none needed"
        env = os.environ if env is None else env
        for name in self.key_vars:
            if env.get(name):
                return f"${name}"
        home = home or Path(env.get("HOME") or Path.home())
        for rel in self.login_files:
            if (home / rel).is_file():
                return f"~/{rel}"
        return None

    def needs_key_message(self) -> str:
        """What to do so that the agent can answer prompts: the agent's own words, or its key variables."""
        if self.login_hint:
            return self.login_hint
        if self.key_vars:
            return "set " + " or ".join(self.key_vars)
        return "see the agent's documentation for how to log in"


def terminal_login_command(command: Sequence[str], method: Mapping[str, Any]) -> str:
    """The shell command of a terminal auth method: the agent's own command with the method's arguments
    and environment (ACP's terminal authentication, run by the user, never sent to ``authenticate``)."""
    env = method.get("env") if isinstance(method.get("env"), Mapping) else {}
    words = [f"{k}={v}" for k, v in env.items()] + [str(c) for c in command] + [str(a) for a in method.get("args") or []]
    return shlex.join(words)


def auth_hint(spec: AgentSpec | None, auth_methods: Sequence[Mapping[str, Any]] = (), *,
              how: str = "agent.authenticate(method_id)", command: Sequence[str] = ()) -> str | None:
    """The hint for an "authentication required" answer: what this agent needs, in its terms.

    ``how`` names the call that authenticates where the user is (the magics say ``%acp auth METHOD``);
    terminal logins are named with the command to run (``command``: the agent's own command line)."""
    methods = [m for m in auth_methods if isinstance(m, Mapping) and m.get("id")]
    ids = [str(m["id"]) for m in methods if m.get("type") != "terminal"]
    offered = f"Its auth methods: {', '.join(ids)} ({how} picks one)." if ids else ""
    if spec is not None and (spec.login_hint or spec.key_vars):
        hint = f"Agent '{spec.name}' needs a key or a login: {spec.needs_key_message()}. {offered}".rstrip()
    else:
        hint = (f"The agent needs authentication; its auth methods: {', '.join(ids)} ({how} picks one)."
                if ids else "")
    terminal = [terminal_login_command(command, m) for m in methods if m.get("type") == "terminal"]
    if terminal:
        hint += f" {'Or log in' if hint else 'Log in'} from a terminal, then start the agent again: " + " ; ".join(terminal)
    return hint.strip() or None


def auto_auth_method(spec: AgentSpec | None, auth_methods: Sequence[Mapping[str, Any]],
                     env: Mapping[str, str]) -> tuple[str, str] | None:
    """``(method id, env var)`` to authenticate with on the agent's behalf, or None.

    The first ``spec.auth_env`` entry whose variable is set in the agent's environment and
    whose method the agent listed in ``initialize``."""
    if spec is None:
        return None
    offered = {m.get("id") for m in auth_methods if isinstance(m, Mapping)}
    for var, method_id in spec.auth_env.items():
        if env.get(var) and method_id in offered:
            return method_id, var
    return None


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

    @property
    def missing(self) -> str | None:
        """What this machine lacks to use the agent for real: the package, or a key or login; None when nothing."""
        if not self.can_start:
            return f"the package: {self.spec.install_hint()}"
        if self.spec.key_found() is None:
            return f"a key or login: {self.spec.needs_key_message()}"
        return None


class AgentTable(dict):
    """``name -> AgentStatus``, shown as a table in notebooks."""

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{escape(s.name)}</code></td><td>{escape(s.spec.description)}</td>"
            f"<td>{'yes' if s.installed else 'no'}</td><td>{escape(s.how)}</td>"
            f"<td><code>{escape(shlex.join(s.command))}</code></td>"
            f"<td>{escape(', '.join(s.spec.env_vars))}</td><td>{escape(s.missing or '-')}</td></tr>"
            for s in self.values()
        )
        return ("<table><tr><th>name</th><th>agent</th><th>installed</th><th>runs via</th>"
                f"<th>command</th><th>env vars</th><th>missing</th></tr>{rows}</table>")

    def __repr__(self) -> str:
        width = max((len(n) for n in self), default=4)
        lines = []
        for s in self.values():
            line = f"{s.name:<{width}}  {'installed' if s.installed else s.how:<12}  {shlex.join(s.command)}"
            lines.append(line + (f"\n{'':<{width}}  missing: {s.missing}" if s.missing else ""))
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


# Keeps an agent's own npm calls (opencode installs a plugin at every start) off the registry:
# nothing listens on the discard port, so they fail at once.
_DEAD_NPM_REGISTRY = "http://127.0.0.1:9/"


def _claude_env() -> dict[str, str]:
    """As root, claude-agent-acp takes any IS_SANDBOX value as "bypass mode allowed" and starts Claude
    Code so, but Claude Code exits unless the value is exactly "1" (every session/new then fails with
    "Query closed before response received"). Say "1" for a user who said they are in a sandbox."""
    value = os.environ.get("IS_SANDBOX")
    if hasattr(os, "geteuid") and os.geteuid() == 0 and value not in (None, "", "1"):
        return {"IS_SANDBOX": "1"}
    return {}


def _builtin() -> dict[str, AgentSpec]:
    """The demo agent and the four third-party agents, pinned to the versions the interop tests run
    (tests/interop/FINDINGS.md has what each needs and does)."""
    demo = AgentSpec(
        name="demo",
        command=(sys.executable, "-m", "acp_notebook.demo"),
        description="the built-in demo agent (offline, deterministic)",
        state_dirs=("$ACP_NOTEBOOK_DEMO_STATE", "$XDG_DATA_HOME/acp-notebook/demo-sessions",
                    "~/.local/share/acp-notebook/demo-sessions"),
        mcp_connect="lazy",  # only a prompt that needs the kernel connects (demo/kernelwork.py)
    )
    claude = AgentSpec(
        name="claude",
        command=("claude-agent-acp",),
        npm_package="@agentclientprotocol/claude-agent-acp@0.101.0",
        env=_claude_env(),
        env_vars=("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_BASE_URL"),
        cache_paths=("node_modules/.bin/claude-agent-acp",),
        description="Claude Code through claude-agent-acp",
        homepage="https://github.com/agentclientprotocol/claude-agent-acp",
        # It opens sessions without a key and answers the first prompt "Authentication required".
        key_vars=("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"),
        login_files=(".claude/.credentials.json",),
        login_hint="set ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN, from `claude setup-token`), "
                   "or log in once with Claude Code (`claude`, then /login)",
        offline_env={"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
        state_dirs=("~/.claude", "~/.claude.json", "$CLAUDE_CONFIG_DIR", "~/.npm"),
        # 0.101.0 had not reached a session's MCP servers by the end of a first plain turn (0.23.1 had).
        mcp_connect="lazy",
        info_name="@agentclientprotocol/claude-agent-acp",
    )
    codex = AgentSpec(
        name="codex",
        # A node adapter over `codex app-server` (its @openai/codex dependency), which it ends when
        # its stdin closes.
        command=("codex-acp",),
        npm_package="@agentclientprotocol/codex-acp@2.6.0",
        env_vars=("OPENAI_API_KEY", "CODEX_API_KEY"),
        auth_methods=("api-key", "chat-gpt"),
        cache_paths=("node_modules/.bin/codex-acp",),
        description="OpenAI Codex through codex-acp",
        homepage="https://github.com/agentclientprotocol/codex-acp",
        # session/new answers "Authentication required" until `authenticate` (or a saved login in
        # ~/.codex/auth.json); its api-key method reads CODEX_API_KEY, else OPENAI_API_KEY.
        auth_env={"CODEX_API_KEY": "api-key", "OPENAI_API_KEY": "api-key"},
        key_vars=("OPENAI_API_KEY", "CODEX_API_KEY"),
        login_files=(".codex/auth.json",),
        login_hint="set OPENAI_API_KEY or CODEX_API_KEY before starting it (acp-notebook authenticates with "
                   "the key when codex asks), or log in with ChatGPT (auth method 'chat-gpt')",
        state_dirs=("~/.codex", "$CODEX_HOME", "~/.npm"),
        # 2.6.0 connects to a session's MCP servers in the background: in about one run in three here it had not
        # by the end of a first plain turn, so "never connected" cannot be judged from that turn.
        mcp_connect="lazy",
        info_name="@agentclientprotocol/codex-acp",
        # 2.6.0 stays after its stdin closes (tests/interop/FINDINGS.md): SIGTERM at once, not after 2 s.
        exit_grace=0.0,
    )
    gemini = AgentSpec(
        name="gemini",
        command=("gemini", "--acp"),
        npm_package="@google/gemini-cli@0.61.0",
        args=("--acp",),
        env_vars=("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_MODEL"),
        auth_methods=("gemini-api-key", "oauth-personal", "vertex-ai", "gateway"),
        cache_paths=("node_modules/.bin/gemini",),
        description="Google Gemini CLI in ACP mode",
        homepage="https://github.com/google-gemini/gemini-cli",
        # With GEMINI_API_KEY set it needs no `authenticate`; without a key or a Google login,
        # session/new answers "Gemini API key is missing or not configured".
        key_vars=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        login_files=(".gemini/oauth_creds.json",),
        login_hint="set GEMINI_API_KEY, or log in with Google once in the gemini CLI (`gemini`)",
        state_dirs=("~/.gemini", "~/.npm"),
        # It starts MCP servers only in a folder it trusts (tests/interop/FINDINGS.md, section 10), and says nothing.
        mcp_connect="start",
        mcp_remedy="Gemini CLI starts MCP servers only in a folder it trusts, and says nothing otherwise. Trust "
                   "{cwd} (run `gemini` there once and answer its question), or start the agent with "
                   "GEMINI_CLI_TRUST_WORKSPACE=true: `%acp start gemini --trust-workspace` sets it (in Python, "
                   "acpnb.start(\"gemini\", env={\"GEMINI_CLI_TRUST_WORKSPACE\": \"true\"})), and the agent then "
                   "trusts the folders of its sessions. https://geminicli.com/docs/cli/trusted-folders/",
        trust_env={"GEMINI_CLI_TRUST_WORKSPACE": "true"},
        info_name="gemini-cli",
    )
    opencode = AgentSpec(
        name="opencode",
        command=("opencode", "acp"),
        npm_package="opencode-ai@1.18.33",
        args=("acp",),
        env_vars=("OPENCODE_CONFIG_CONTENT", "ANTHROPIC_API_KEY", "OPENAI_API_KEY"),
        cache_paths=("node_modules/.bin/opencode",),
        description="OpenCode in ACP mode",
        # Without a provider it offers OpenCode Zen's free models, which need the network.
        key_vars=("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY",
                  "OPENCODE_CONFIG_CONTENT"),
        login_files=(".local/share/opencode/auth.json",),
        login_hint="set a provider key (ANTHROPIC_API_KEY, OPENAI_API_KEY...), run `opencode auth login`, or "
                   "describe a provider in OPENCODE_CONFIG_CONTENT; its default free models need the network",
        offline_env={"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
                     "npm_config_registry": _DEAD_NPM_REGISTRY},
        state_dirs=("~/.local/share/opencode", "~/.local/state/opencode", "~/.cache/opencode", "~/.config/opencode",
                    "~/.npm"),
        mcp_connect="start",
        info_name="OpenCode",
    )
    return {spec.name: spec for spec in (demo, claude, codex, gemini, opencode)}


class AgentRegistry:
    """The named agents: the built-in ones, the user's TOML file's (read on first use, and again when
    the file's path changes) and those registered at run time. One per process (``registry``);
    ``overlay()`` undoes what is registered inside it (for tests)."""

    def __init__(self, specs: Mapping[str, AgentSpec]) -> None:
        self._specs = dict(specs)
        self._user_file: Path | None = None

    def add(self, spec: AgentSpec) -> AgentSpec:
        self._specs[spec.name] = spec
        return spec

    def get(self, name: str) -> AgentSpec | None:
        self._read_user_file()
        return self._specs.get(name)

    def items(self) -> list[tuple[str, AgentSpec]]:
        self._read_user_file()
        return list(self._specs.items())

    def names(self) -> list[str]:
        self._read_user_file()
        return list(self._specs)

    def _read_user_file(self) -> None:
        path = user_agents_file()
        if self._user_file != path:
            self._user_file = path
            load_user_agents(path)

    @contextlib.contextmanager
    def overlay(self) -> Iterator[AgentRegistry]:
        """Agents registered (or replaced, or read from a user file) inside the block are forgotten after it."""
        saved, user_file = dict(self._specs), self._user_file
        try:
            yield self
        finally:
            self._specs.clear()
            self._specs.update(saved)
            self._user_file = user_file


_registry: MadeOnFirstUse[AgentRegistry] = MadeOnFirstUse(lambda: AgentRegistry(_builtin()))


def agent_registry() -> AgentRegistry:
    """The process's AgentRegistry, built from the built-in specs on the first call."""
    return _registry.get()


def __getattr__(name: str) -> Any:
    # ``launch.registry`` stays a readable name (tests: ``with launch.registry.overlay():``) without being
    # built at import: it is the process's AgentRegistry, built on first read.
    if name == "registry":
        return agent_registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
        made = AgentSpec(name=name, command=tuple(_argv(spec)), env=environment(env, where='acpnb.register'),
                         description=description)
    return agent_registry().add(made)


def environment(env: Mapping[str, str] | None, *, where: str) -> dict[str, str]:
    """``env`` as a dict of strings, or a TypeError naming the entry to fix: the spawn's own error names no
    variable ("expected str, bytes or os.PathLike object, not int"). A value is never shown: it may be a key."""
    if env is None:
        return {}
    if not isinstance(env, Mapping):
        raise TypeError(f"{where}: env maps variable names to string values (a dict), not {type(env).__name__}")
    for key, value in env.items():
        if not isinstance(key, str) or not key or "=" in key or "\0" in key:
            raise TypeError(f"{where}: env has the name {key!r}; a variable's name is a non-empty string "
                            "without '=' or NUL")
        if value is None:
            raise TypeError(f"{where}: env[{key!r}] is None; leave {key!r} out to not set it, or give a string")
        if not isinstance(value, str):
            raise TypeError(f"{where}: env[{key!r}] is of type {type(value).__name__}; environment values are "
                            f"strings, so pass str() of it")
    return dict(env)


def _argv(command: str | Sequence[str]) -> list[str]:
    if not isinstance(command, (str, Sequence)) or isinstance(command, (bytes, bytearray)):
        raise TypeError(f"an agent command is a command line (str) or an argv list, not {type(command).__name__}")
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
        state_dirs=tuple(str(d) for d in data.get("state_dirs") or ()),
        mcp_connect=_mcp_connect(name, data.get("mcp_connect")),
        mcp_remedy=str(data.get("mcp_remedy") or ""),
        trust_env={str(k): str(v) for k, v in (data.get("trust_env") or {}).items()},
        info_name=str(data.get("info_name") or ""),
        exit_grace=_exit_grace(name, data.get("exit_grace", EXIT_GRACE_S)),
    )


def _exit_grace(name: str, value: Any) -> float:
    """An agent's ``exit_grace`` as the TOML file gives it: seconds, 0 or more."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < float("inf"):
        return float(value)
    raise ValueError(f"agent {name!r}: exit_grace is the seconds it gets to exit after its stdin closes "
                     f"(a number, 0 or more), not {value!r}")


def _mcp_connect(name: str, value: Any) -> str:
    """An agent's ``mcp_connect`` as the TOML file or register() gives it: "start", "lazy" or nothing."""
    if value in (None, "", "start", "lazy"):
        return str(value or "")
    raise ValueError(f"agent {name!r}: mcp_connect is \"start\" (it connects to MCP servers as a session opens) "
                     f"or \"lazy\" (only when a prompt needs one), not {value!r}")


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


def agents() -> AgentTable:
    """Every registered agent with whether (and how) it can start on this machine."""
    return AgentTable((name, spec.status()) for name, spec in agent_registry().items())


def registered(name: str) -> AgentSpec | None:
    return agent_registry().get(name)


def resolve_spec(spec: SpecLike, env: Mapping[str, str] | None = None) -> tuple[str, list[str], dict[str, str]]:
    """``(display name, argv, extra env)`` for a registry name, a command line, an argv list or an AgentSpec."""
    if isinstance(spec, AgentSpec):
        return spec.name, spec.resolve(), {**spec.env, **(env or {})}
    if isinstance(spec, str) and not any(c.isspace() for c in spec.strip()):
        found = registered(spec.strip())
        if found is not None:
            return found.name, found.resolve(), {**found.env, **(env or {})}
        if shutil.which(spec.strip()) is None:
            raise unknown_agent(spec)
    argv = _argv(spec)  # type: ignore[arg-type]
    return Path(argv[0]).name, argv, dict(env or {})


def unknown_agent(spec: str, proxy_name: str | None = None) -> AgentStartError:
    """The error for a one-word spec that is neither a registered name nor a program on PATH (``proxy_name``:
    the name it was given in a proxy)."""
    known = ", ".join(sorted(agent_registry().names()))
    guess = did_you_mean(spec)
    where = "" if proxy_name is None else f" (for {proxy_name!r} in the proxy)"
    return AgentStartError(f"unknown agent {spec!r}{where}{guess}", command=[spec],
                           remedy=Remedy("known_agent", {"known": known, "proxy_name": proxy_name}))


def did_you_mean(word: str) -> str:
    """`` (did you mean 'demo'?)`` for the registered name closest to a mistyped one (case aside), else ""."""
    by_folded = {name.lower(): name for name in agent_registry().names()}
    close = difflib.get_close_matches(word.strip().lower(), list(by_folded), n=1)
    return f" (did you mean {by_folded[close[0]]!r}?)" if close else ""


def spec_of(spec: SpecLike) -> AgentSpec | None:
    """The AgentSpec behind a spec: itself, or the registry's entry for a name; None for a plain command."""
    if isinstance(spec, AgentSpec):
        return spec
    if isinstance(spec, str) and not any(c.isspace() for c in spec.strip()):
        return registered(spec.strip())
    return None


def trust_workspace_env(spec: SpecLike) -> dict[str, str]:
    """The environment that makes the agent ``spec`` trust its sessions' folders (``%acp start NAME
    --trust-workspace``: the user's consent); ValueError naming the agents that have one when it has none."""
    found = spec_of(spec)
    if found is not None and found.trust_env:
        return dict(found.trust_env)
    having = ", ".join(name for name, each in agent_registry().items() if each.trust_env) or "none"
    if not spec:
        raise ValueError(f"--trust-workspace: name the agent it is for (agents that have one: {having})")
    shown = spec if isinstance(spec, str) else " ".join(spec) if isinstance(spec, (list, tuple)) else spec.name
    raise ValueError(f"--trust-workspace: agent {shown!r} has no setting for trusting a folder "
                     f"(agents that have one: {having})")


def spec_for_agent_info(name: str | None) -> AgentSpec | None:
    """The registered spec whose agent calls itself ``name`` in its initialize (``agentInfo.name``), or None."""
    if not name:
        return None
    return next((spec for _key, spec in agent_registry().items() if spec.info_name == name), None)


def known_names() -> Iterable[str]:
    return agent_registry().names()
