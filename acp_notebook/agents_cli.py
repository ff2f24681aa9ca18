"""`acp-notebook agents [--check]`: the registry as a table, and a compatibility check of the installed agents."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from html import escape
from pathlib import Path

from . import _term
from ._argtypes import number
from .client import Agent, Session, start
from .errors import AcpError, ConfigOptionError, RpcError
from .launch import AgentSpec, agents, did_you_mean, registered

__all__ = ["CheckResult", "CheckTable", "check_agent", "check_agents", "main"]

DEFAULT_CHECK_TIMEOUT = 20.0

# Variables that move an agent's home or config somewhere else: dropped for the check, so each
# agent really starts from the fresh temporary HOME and nothing of the user's setup is touched.
RELOCATING_VARS = ("CODEX_HOME", "CLAUDE_CONFIG_DIR", "GEMINI_CLI_HOME", "OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR",
                   "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")


@dataclass
class CheckResult:
    """What `agents --check` found out about one agent; every field is short text for the table."""

    name: str
    installed: bool
    pinned: str = "-"
    version: str = "-"
    starts: str = "-"
    session_new: str = "-"
    config_options: list[str] = field(default_factory=list)
    set_works: str = "-"
    auth: str = "-"

    @property
    def ok(self) -> bool:
        """Installed, started, and opened a session (or said it needs a key for that)."""
        return self.installed and self.starts.startswith("yes") and (
            self.session_new.startswith("yes") or self.session_new == "auth required")

    def row(self) -> list[str]:
        return [self.name, self.version if self.version == self.pinned or self.pinned == "-"
                else f"{self.version} (pinned {self.pinned})", self.starts, self.session_new,
                ", ".join(self.config_options) or "-", self.set_works, self.auth]


HEADERS = ["agent", "version", "starts", "session/new", "config options", "set works", "auth"]


class CheckTable(list):
    """CheckResults, shown as a table (text in a terminal, HTML in a notebook)."""

    def rows(self) -> list[list[str]]:
        return [result.row() for result in self]

    def text(self, columns: int | None = None) -> str:
        """The table within ``columns`` characters (default: the terminal's width), long cells wrapped."""
        columns = columns or _term.width()
        lines = [_term.table(HEADERS, self.rows(), columns, wrapped=range(1, len(HEADERS)))]
        if any("*" in o for r in self for o in r.config_options):
            lines.append(_term.wrap("(* = from the old modes/models fields: mode through session/set_mode, "
                                    "model read-only)", columns))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{escape(h)}</th>" for h in HEADERS)
        body = "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in self.rows())
        return f"<table><tr>{head}</tr>{body}</table>"

    def to_json(self) -> list[dict[str, object]]:
        return [{**asdict(result), "ok": result.ok} for result in self]


def check_environment(spec: AgentSpec, home: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The user's environment (their keys decide what the agent can do) with HOME moved to `home`
    and the spec's offline settings (no telemetry, no self-update, no npm installs)."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in RELOCATING_VARS}
    env["HOME"] = str(home)
    env.update(spec.env)  # as acpnb.start(name) would: the registry's own settings over the user's
    env.update(spec.offline_env)
    return env


def _first_line(error: BaseException) -> str:
    message = getattr(error, "message", None) or str(error)
    return message.strip().splitlines()[0] if message.strip() else type(error).__name__


def _option_labels(session: Session) -> list[str]:
    return [option.id + ("*" if option.legacy_source else "") for option in session.config]


def _try_set(session: Session, timeout: float) -> str:
    """Set the first changeable select option to another of its values; refused values are reported."""
    for option in session.config:
        if option.type != "select" or option.read_only or len(option.values) < 2:
            continue
        refused = []
        for value in [v for v in option.values if v != option.value]:
            try:
                session.set(option.id, value, timeout=timeout)
            except ConfigOptionError:
                refused.append(str(value))
                continue
            if session.config.get(option.id) is None or session.config[option.id].value != value:
                return f"no: {option.id}={value} was answered but not applied"
            how = " via session/set_mode" if option.legacy_source == "modes" else ""
            return f"yes: {option.id}={value}{how}" + (f" (refused: {', '.join(refused)})" if refused else "")
        return f"no: every value of {option.id} was refused"
    return "no changeable option"


def _auth_summary(spec: AgentSpec, agent: Agent, env: Mapping[str, str]) -> str:
    if agent.auth_method:
        var = next((v for v, m in spec.auth_env.items() if m == agent.auth_method and env.get(v)), "")
        return f"authenticated: {agent.auth_method}" + (f" (from ${var})" if var else "")
    found = spec.key_found(env, home=Path.home())
    if found == "none needed":
        return "none needed"
    if found:
        return f"key: {found}"
    return f"prompts need a key or login: {spec.needs_key_message()}"


def check_agent(name: str, *, timeout: float = DEFAULT_CHECK_TIMEOUT,
                base_env: Mapping[str, str] | None = None) -> CheckResult:
    """Start one installed agent with a fresh temporary HOME, open a session, set an option, close it.

    Nothing is prompted, so no model is called; agents fetched through npx are not run (that would
    download them)."""
    spec = registered(name)
    if spec is None:
        raise ValueError(f"no agent named {name!r} in the registry")
    status = spec.status()
    result = CheckResult(name, installed=status.installed, pinned=spec.version or "-")
    if not status.installed:
        result.starts = f"not installed ({status.how})" if status.can_start else "not installed"
        return result
    with tempfile.TemporaryDirectory(prefix=f"acp-check-{name}-") as tmp:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        env = check_environment(spec, home, base_env)
        started = time.monotonic()
        try:
            agent = start(name, cwd=work, env=env, inherit_env=False, timeout=timeout)
        except AcpError as exc:
            result.starts = f"no: {_first_line(exc)}"
            return result
        try:
            result.version = str(agent.info.get("version") or "?")
            result.starts = f"yes ({time.monotonic() - started:.1f} s)"
            started = time.monotonic()
            try:
                session = agent.new_session(timeout=timeout)
            except RpcError as exc:
                if not exc.auth_required:
                    raise
                result.session_new = "auth required"
                result.auth = f"needed: {spec.needs_key_message()}"
                return result
            result.session_new = f"yes ({time.monotonic() - started:.1f} s)"
            result.config_options = _option_labels(session)
            result.set_works = _try_set(session, timeout)
            result.auth = _auth_summary(spec, agent, env)
        except AcpError as exc:
            if result.session_new == "-":
                result.session_new = f"no: {_first_line(exc)}"
            else:
                result.set_works = f"no: {_first_line(exc)}"
        finally:
            agent.close()
    return result


def check_agents(names: Iterable[str] | None = None, *, timeout: float = DEFAULT_CHECK_TIMEOUT,
                 base_env: Mapping[str, str] | None = None) -> CheckTable:
    """`check_agent` for each name (default: every registered agent), one after the other."""
    chosen = list(names) if names else list(agents())
    return CheckTable(check_agent(name, timeout=timeout, base_env=base_env) for name in chosen)


def _print_registry() -> None:
    rows = [[status.name, "yes" if status.installed else "no", status.how, shlex.join(status.command),
             status.missing or "-"] for status in agents().values()]
    print(_term.table(["name", "installed", "runs via", "command", "missing"], rows, wrapped={2, 3, 4}))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="acp-notebook agents",
        description="The known agents: installed or not, how they run, what is missing. With --check, start each "
                    "installed agent (fresh temporary HOME, no prompts, no network) and report what works.")
    parser.add_argument("names", nargs="*", metavar="NAME", help="agents to check (default: all)")
    parser.add_argument("--check", action="store_true", help="run the compatibility check")
    parser.add_argument("--timeout", type=number(zero=False, unit="seconds"), default=DEFAULT_CHECK_TIMEOUT,
                        metavar="SECONDS",
                        help=f"per start and per request (default {DEFAULT_CHECK_TIMEOUT:g})")
    parser.add_argument("--json", action="store_true", help="print the check as JSON")
    args = parser.parse_args(argv)
    if not args.check:
        if args.names or args.json:
            parser.error("NAME and --json go with --check")
        _print_registry()
        return 0
    unknown = [name for name in args.names if registered(name) is None]
    if unknown:
        named = ", ".join(name + did_you_mean(name) for name in unknown)
        parser.error(f"unknown agent(s): {named} (known: {', '.join(agents())})")
    table = check_agents(args.names, timeout=args.timeout)
    print(json.dumps(table.to_json(), indent=1) if args.json else table.text())
    failed = [r.name for r in table if r.installed and not r.ok]
    return 1 if failed else 0
