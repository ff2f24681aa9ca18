"""The grammar of ``%acp`` and ``%%acp``: text -> a command dataclass, and the help made from it.

One table, ``COMMANDS``, says for each command its arguments (argparse), how the parsed
arguments become a command, one line of help and its examples; ``parse_line`` and the help
text both read it, so they cannot drift apart. Parsing does no I/O and needs no agent: a bad
line raises a one-line ``UsageError`` in magic syntax. Pure functions; any thread.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Union

from IPython.core.error import UsageError

from .._argtypes import number
from .._protocol import parse_bool_word
from ..kernel_tools.policy import parse_policy
from ..launch import trust_workspace_env

__all__ = [
    "COMMANDS", "Authenticate", "Branches", "Cancel", "CellPrompt", "Checkout", "Command", "ForkSession", "Help", "ListSessions",
    "LoadSession", "Logout", "NewSession", "Pending", "Proxy", "Resume", "SetOptions", "ShowLog", "ShowPanel", "Start", "Stop",
    "Use",
    "default_alias", "help_text", "parse_bool", "parse_cell_line", "parse_line",
]


# --- commands: what a line asks for ------------------------------------------------
@dataclass(frozen=True)
class Start:
    spec: str | tuple[str, ...]
    alias: str | None = None
    cwd: str | None = None
    timeout: float | None = None
    env: tuple[tuple[str, str], ...] = ()
    obj: str | None = None  # --object: the variable holding an agent object, served in this kernel
    record: str | None = None  # --record FILE: every frame written to a recording
    replay: str | None = None  # --replay FILE: a recording answers in place of the agent
    speed: float | None = None  # --speed X: with --replay, X times the recorded pace
    kernel_tools: str | None = None  # --kernel-tools POLICY: this agent's kernel tools (None: AcpMagics.kernel_tools)
    sandbox: str | None = None  # --sandbox bwrap: the agent's process runs under bubblewrap (acp_notebook/sandbox.py)


@dataclass(frozen=True)
class Proxy:
    agents: tuple[tuple[str, str], ...]
    alias: str | None = None
    cwd: str | None = None
    timeout: float | None = None
    kernel_tools: str | None = None


@dataclass(frozen=True)
class ShowPanel:
    alias: str | None = None


@dataclass(frozen=True)
class SetOptions:
    assignments: tuple[tuple[str, str], ...]
    alias: str | None = None


@dataclass(frozen=True)
class NewSession:
    alias: str | None = None
    cwd: str | None = None


@dataclass(frozen=True)
class ForkSession:
    alias: str | None = None
    cwd: str | None = None


@dataclass(frozen=True)
class ListSessions:
    alias: str | None = None
    delete: tuple[str, ...] = ()  # --delete ID (repeatable): session/delete each, then list what is left


@dataclass(frozen=True)
class LoadSession:
    session_id: str
    alias: str | None = None


@dataclass(frozen=True)
class ShowLog:
    alias: str | None = None
    method: str | None = None
    session_only: bool = False
    file: str | None = None  # --file: a recording, studied without any agent


@dataclass(frozen=True)
class Stop:
    alias: str | None = None
    every: bool = False  # --all: every agent of the notebook


@dataclass(frozen=True)
class Use:
    alias: str


@dataclass(frozen=True)
class Cancel:
    alias: str | None = None


@dataclass(frozen=True)
class Authenticate:
    method_id: str | None = None  # None: list the agent's auth methods (terminal ones with their command)
    alias: str | None = None


@dataclass(frozen=True)
class Logout:
    alias: str | None = None


@dataclass(frozen=True)
class Resume:
    session_id: str | None = None  # None: the notebook's most recently used session
    notebook: str | None = None  # None: the notebook this kernel runs for
    alias: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    timeout: float | None = None
    listing: bool = False  # --list: show the resumable sessions instead


@dataclass(frozen=True)
class Branches:
    alias: str | None = None


@dataclass(frozen=True)
class Checkout:
    branch: str
    alias: str | None = None


@dataclass(frozen=True)
class Pending:
    answer: str | None = None  # allow / reject; None: list the waiting requests with their buttons (magics/pending.py)
    request: str | None = None  # N as listed, or the request's id


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class CellPrompt:
    alias: str | None = None
    wait: bool | None = None  # None: AcpMagics.wait decides
    new_session: bool = False
    attach: tuple[str, ...] = ()  # --attach REF (repeatable): notebook variables sent as content blocks
    cell: str | None = None  # --cell NAME: the cell's identity for branches, where the frontend sends no cell id
    models: tuple[str, ...] = ()  # --models A,B: the prompt to each model from the same point (a branch sweep)


Command = Union[Start, Proxy, ShowPanel, SetOptions, NewSession, ForkSession, ListSessions, LoadSession, ShowLog,
                Stop, Use, Cancel, Authenticate, Logout, Resume, Branches, Checkout, Pending, Help]


# --- the table -----------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad line as a one-line UsageError instead of exiting."""

    def __init__(self, prog: str, *, not_an_option: str = "") -> None:
        super().__init__(prog=prog, add_help=False, allow_abbrev=False)
        self.not_an_option = not_an_option  # what to say of an unknown option besides the known ones

    def error(self, message: str) -> None:  # type: ignore[override]
        unknown = message.removeprefix("unrecognized arguments: ").split()
        if message.startswith("unrecognized arguments: ") and unknown[0].startswith("-"):
            message += self._options_instead(unknown[0])
        raise UsageError(f"{self.prog}: {message} (see %acp?)")

    def _options_instead(self, word: str) -> str:
        """What to type instead of an unknown option: the closest one, and every option this command takes."""
        options = sorted({option for action in self._actions for option in action.option_strings
                          if option.startswith("--")})
        close = difflib.get_close_matches(word.split("=", 1)[0], options, n=1)
        said = f" (did you mean {close[0]}?)" if close else ""
        said += f"; its options are {', '.join(options)}" if options else "; it takes no options"
        # "--model" is close to "--models" (a branch sweep), yet most likely meant a setting: both are said.
        return said + (f"; {self.not_an_option}" if self.not_an_option and (not close or close[0] == "--models")
                       else "")


@dataclass(frozen=True)
class Verb:
    """One ``%acp`` command: its arguments, how they become a Command, its help."""

    name: str
    arguments: Callable[[argparse.ArgumentParser], None]
    build: Callable[[argparse.Namespace], Command]
    examples: tuple[tuple[str, str], ...]
    takes_command: bool = False  # words after "--" are a command line (start)


def _pairs(words: Sequence[str], what: str, command: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise UsageError(f"%acp {command}: expected {what}, got {word!r} (see %acp?)")
        pairs.append((key, value))
    return tuple(pairs)


def _given_once(values: Sequence[str], refusal: str) -> None:
    """UsageError (``refusal`` with the repeated values in its ``{}``) when a value comes more than once."""
    repeated = sorted({value for value in values if values.count(value) > 1}, key=values.index)
    if repeated:
        raise UsageError(refusal.format(", ".join(repeated)))


# More than 0: no request could be answered within 0 s (the API's own check would raise a ValueError).
_seconds = number(zero=False, unit="seconds")


def _policy(text: str) -> str:
    try:
        return parse_policy(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a policy: use ask, read-only, allow or off") from None


def _kernel_tools_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kernel-tools", dest="kernel_tools", type=_policy, metavar="POLICY")


def _agent_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent", "-a", dest="alias", metavar="NAME")


def _start_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", nargs="?", metavar="NAME")
    parser.add_argument("--name", "-n", dest="alias")
    parser.add_argument("--cwd")
    parser.add_argument("--timeout", type=_seconds, metavar="SECONDS")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--object", "-o", dest="obj", metavar="VARIABLE")
    parser.add_argument("--record", metavar="FILE")
    parser.add_argument("--replay", metavar="FILE")
    parser.add_argument("--speed", type=float, metavar="X")
    parser.add_argument("--sandbox", choices=("bwrap",))
    parser.add_argument("--trust-workspace", dest="trust_workspace", action="store_true")
    _kernel_tools_option(parser)


def _build_start(args: argparse.Namespace) -> Start:
    spec = args.argv if args.argv is not None else (args.spec or "")
    if args.argv is not None and args.spec:
        raise UsageError(f"%acp start: give a NAME or a command after --, not both ({args.spec!r} and --)")
    if args.obj is not None:
        if spec:
            raise UsageError("%acp start: --object VARIABLE starts the agent object in that variable: give no NAME "
                             "or command with it")
        if args.env:
            raise UsageError("%acp start --object: --env does not apply (the agent runs in this kernel, with its "
                             "environment)")
    if args.replay is not None and (spec or args.obj is not None or args.env or args.record is not None
                                    or args.kernel_tools is not None):
        raise UsageError("%acp start --replay FILE: the recording is the agent: give no NAME, command, --object, "
                         "--env, --record or --kernel-tools with it")
    if args.speed is not None and args.replay is None:
        raise UsageError("%acp start: --speed X goes with --replay FILE (X times the recorded pace)")
    if args.speed is not None and args.speed <= 0:
        raise UsageError(f"%acp start --speed: give a positive number (1 is the recorded pace), not {args.speed:g}")
    env = _pairs(args.env, "KEY=VALUE", "start")
    if args.trust_workspace:  # the user's consent to the agent's own "trust this folder" (launch.trust_env)
        try:
            env += tuple(trust_workspace_env(spec or "").items())
        except ValueError as exc:
            raise UsageError(f"%acp start {exc}") from None
    return Start(spec=spec, alias=args.alias, cwd=args.cwd, timeout=args.timeout,
                 env=env, obj=args.obj, record=args.record,
                 replay=args.replay, speed=args.speed, kernel_tools=args.kernel_tools, sandbox=args.sandbox)


def _proxy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("agents", nargs="*", metavar="NAME=SPEC")
    parser.add_argument("--name", "-n", dest="alias")
    parser.add_argument("--cwd")
    parser.add_argument("--timeout", type=_seconds, metavar="SECONDS")
    _kernel_tools_option(parser)


def _build_proxy(args: argparse.Namespace) -> Proxy:
    if not args.agents:
        raise UsageError("%acp proxy: name at least one agent, e.g. %acp proxy demo=demo claude=claude")
    pairs = _pairs(args.agents, "NAME=SPEC", "proxy")
    if any(not spec for _, spec in pairs):
        raise UsageError("%acp proxy: every NAME needs a SPEC (a registry name or a quoted command line)")
    _given_once([name for name, _ in pairs], "%acp proxy: {} named more than once; give each agent its own name")
    return Proxy(agents=pairs, alias=args.alias, cwd=args.cwd, timeout=args.timeout, kernel_tools=args.kernel_tools)


def _set_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("assignments", nargs="*", metavar="ID=VALUE")
    _agent_option(parser)


def _build_set(args: argparse.Namespace) -> SetOptions:
    if not args.assignments:
        raise UsageError("%acp set: give at least one ID=VALUE, e.g. %acp set model=smart")
    pairs = _pairs(args.assignments, "ID=VALUE", "set")
    _given_once([option_id for option_id, _ in pairs], "%acp set: {} given more than once; give each option one value")
    return SetOptions(pairs, alias=args.alias)


def _new_arguments(parser: argparse.ArgumentParser) -> None:
    _agent_option(parser)
    parser.add_argument("--cwd")


def _sessions_arguments(parser: argparse.ArgumentParser) -> None:
    _agent_option(parser)
    parser.add_argument("--delete", "-d", action="append", default=[], metavar="ID")


def _auth_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", nargs="?", metavar="METHOD")
    _agent_option(parser)


def _log_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("alias", nargs="?", metavar="NAME")
    parser.add_argument("--method", "-m")
    parser.add_argument("--session", action="store_true", dest="session_only")
    parser.add_argument("--file", metavar="FILE")


def _build_log(args: argparse.Namespace) -> ShowLog:
    if args.file is not None and (args.alias or args.session_only):
        raise UsageError("%acp log --file FILE shows a recording: give no NAME or --session with it "
                         "(filter by session in the inspector)")
    return ShowLog(alias=args.alias, method=args.method, session_only=args.session_only, file=args.file)


def _resume_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", nargs="?", metavar="ID")
    parser.add_argument("--notebook", metavar="PATH")
    parser.add_argument("--name", "-n", dest="alias")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--timeout", type=_seconds, metavar="SECONDS")
    parser.add_argument("--list", dest="listing", action="store_true")


def _build_resume(args: argparse.Namespace) -> Resume:
    if args.listing and (args.session_id or args.alias or args.env):
        raise UsageError("%acp resume --list shows the resumable sessions: give no ID, --name or --env with it")
    return Resume(args.session_id, args.notebook, args.alias, _pairs(args.env, "KEY=VALUE", "resume"), args.timeout,
                  listing=args.listing)


def _stop_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("alias", nargs="?", metavar="NAME")
    parser.add_argument("--agent", "-a", dest="agent_option", metavar="NAME")  # as the other commands take it
    parser.add_argument("--all", dest="every", action="store_true")


def _build_stop(args: argparse.Namespace) -> Stop:
    if args.alias and args.agent_option and args.alias != args.agent_option:
        raise UsageError(f"%acp stop: two agents named ({args.alias!r} and --agent {args.agent_option!r}); give one")
    alias = args.alias or args.agent_option
    if args.every and alias:
        raise UsageError(f"%acp stop: give a NAME or --all, not both ({alias!r} and --all)")
    return Stop(alias, every=args.every)


def _pending_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("answer", nargs="?", choices=("allow", "reject"), metavar="allow|reject")
    parser.add_argument("request", nargs="?", metavar="N")


def _one(metavar: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target", metavar=metavar)
    return add


def _one_with_agent(metavar: str) -> Callable[[argparse.ArgumentParser], None]:
    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("target", metavar=metavar)
        _agent_option(parser)
    return add


COMMANDS: tuple[Verb, ...] = (
    Verb("start", _start_arguments, _build_start, (
        ("%acp start demo", "start an agent (a name from acpnb.agents()) and open a session"),
        ("%acp start demo --name second", "another agent under its own name (several may run at once)"),
        ("%acp start -- my-agent --acp", "any command that speaks ACP on stdio"),
        ("%acp start -- python agent.py", "... such as an agent script of your own"),
        ("%acp start --object tutor", "the agent object in variable tutor (e.g. an acpnb.CellAgent), in this kernel"),
        ("%acp start claude --record claude.acp.jsonl", "... writing every frame to a recording (secrets masked)"),
        ("%acp start --replay claude.acp.jsonl", "a recording answers in place of the agent, offline"),
        ("%acp start claude --kernel-tools read-only", "... its kernel tools: ask, read-only, allow or off"),
    ), takes_command=True),
    Verb("proxy", _proxy_arguments, _build_proxy, (
        ("%acp proxy demo=demo claude=claude", "several agents behind the multi-agent proxy (models: agent:model)"),
    )),
    Verb("show", _agent_option, lambda a: ShowPanel(alias=a.alias), (
        ("%acp", "the session panel: title, agent, model, status, one control per option"),
    )),
    Verb("set", _set_arguments, _build_set, (
        ("%acp set model=smart", "change config options (booleans: true/false, on/off)"),
        ("%acp set show_thoughts=on mode=code", ""),
    )),
    Verb("new", _new_arguments, lambda a: NewSession(alias=a.alias, cwd=a.cwd), (
        ("%acp new", "a new session with the current agent"),
    )),
    Verb("fork", _new_arguments, lambda a: ForkSession(alias=a.alias, cwd=a.cwd), (
        ("%acp fork", "a new session with the current one's history (session/fork, where the agent offers it)"),
    )),
    Verb("sessions", _sessions_arguments, lambda a: ListSessions(alias=a.alias, delete=tuple(a.delete)), (
        ("%acp sessions", "the agent's sessions (session/list), with their titles"),
        ("%acp sessions --delete ID", "delete a session for good (session/delete; an id prefix will do)"),
    )),
    Verb("load", _one_with_agent("ID"), lambda a: LoadSession(a.target, a.alias), (
        ("%acp load ID", "reopen a past session (the agent replays it; an id prefix will do)"),
    )),
    Verb("resume", _resume_arguments, _build_resume, (
        ("%acp resume", "after a kernel restart (saved or not): restart the agent and reopen this notebook's last "
                        "session, with the settings it had"),
        ("%acp resume ID", "... or the session ID (an id prefix will do)"),
        ("%acp resume --list", "the sessions you can resume: agent, title, when, where, model"),
    )),
    Verb("log", _log_arguments, _build_log, (
        ("%acp log", "the protocol inspector: every frame, live, JSON on demand"),
        ("%acp log --method session/update", "... only one method"),
        ("%acp log --method tool_call", "... only one kind of session/update"),
        ("%acp log --file session.acp.jsonl", "... of a recording, with no agent running"),
    )),
    Verb("use", _one("NAME"), lambda a: Use(a.target), (
        ("%acp use second", "switch the agent the other commands use"),
    )),
    Verb("cancel", _agent_option, lambda a: Cancel(alias=a.alias), (
        ("%acp cancel", "cancel the running turn"),
    )),
    Verb("auth", _auth_arguments, lambda a: Authenticate(a.target, a.alias), (
        ("%acp auth METHOD_ID", "authenticate with the agent; a terminal login runs in the cell, then the agent restarts"),
        ("%acp auth", "list the agent's auth methods (a terminal login with its command)"),
    )),
    Verb("logout", _agent_option, lambda a: Logout(alias=a.alias), (
        ("%acp logout", "log out of the agent, where it offers logout"),
    )),
    Verb("stop", _stop_arguments, _build_stop, (
        ("%acp stop [NAME]", "stop an agent (default: the current one; or --agent NAME); its panels show it closed"),
        ("%acp stop --all", "stop every agent (before saving: every panel is saved closed)"),
    )),
    Verb("branches", _agent_option, lambda a: Branches(alias=a.alias), (
        ("%acp branches", "the branches of this conversation (re-running an earlier %%acp cell opens one): cell, "
                          "prompt, title, when"),
    )),
    Verb("checkout", _one_with_agent("BRANCH"), lambda a: Checkout(a.target, a.alias), (
        ("%acp checkout b2", "make a branch current: the next %%acp cells continue it"),
    )),
    Verb("pending", _pending_arguments, lambda a: Pending(a.answer, a.request), (
        ("%acp pending", "the permission requests this kernel waits on, with their buttons (after a reopen)"),
        ("%acp pending allow 1", "... answer request 1 (or reject 1; a request's id will do)"),
    )),
    Verb("help", lambda _parser: None, lambda _a: Help(), (("%acp help", "this help"),)),
)
VERBS = {verb.name: verb for verb in COMMANDS}

CELL_EXAMPLES = (
    ("%%acp", "the cell is the prompt; the reply streams in under the session title"),
    ("%%acp second --no-wait", "this cell goes to agent 'second'; do not wait for the turn to end"),
    ("%%acp --new", "open a new session first"),
    ("%%acp --attach df --attach fig", "send variables with the prompt (a table as CSV, a figure as an image)"),
    ("%%acp ... {df.shape} ...", "{name} in the cell inserts a variable's value as text ({{ and }}: braces)"),
    ("%%acp --models demo:fast,demo:smart", "the prompt to each model from this point, replies side by side (a "
                                            "branch sweep; each answer becomes a branch)"),
    ("%%acp --cell NAME", "name the cell for branches where the frontend sends no cell id (nbclient, console)"),
)

OPTIONS_HELP = """\
Options of %acp start / proxy: --name NAME, --cwd DIR, --timeout SECONDS, --env KEY=VALUE (start, resume),
--object VARIABLE (start: an agent object of this notebook instead of a NAME or command), --record FILE,
--replay FILE [--speed X] (start: write a recording; answer from one), --kernel-tools POLICY (start, proxy:
what the agent may do in this kernel through the MCP server "kernel": ask | read-only | allow | off),
--sandbox bwrap (start: the agent's process under bubblewrap, writable only in its cwd, /tmp and its state),
--trust-workspace (start: let the agent trust its sessions' folders, e.g. gemini's GEMINI_CLI_TRUST_WORKSPACE=true).
Most commands take --agent NAME to act on an agent other than the current one.

Configuration (%config AcpMagics.<option> = value): default_agent, permission ('ask' | 'allow' | 'deny'),
permission_timeout, elicitation ('ask' | 'decline' | 'cancel' | a dict of answers), elicitation_timeout,
wait ('auto' | 'always' | 'never'), stream_interval, timeout, turn_timeout, cwd, switch_interval,
kernel_tools ('ask' | 'read-only' | 'allow' | 'off': the kernel tools of agents started without --kernel-tools),
system_prompt (None: a note that the agent runs in this notebook, where it takes a system prompt; '': none; or
your text), system_prompt_mode ('append' | 'override'), rerun ('branch': running a %%acp cell again answers from
the conversation just before its turn, on a new branch | 'append': as a new turn at the end).

A running %%acp cell stops at a kernel interrupt: the agent is sent session/cancel."""


def help_text() -> str:
    """The help of %acp (``%acp?`` and ``%acp help``), made from the table."""
    examples = [example for verb in COMMANDS for example in verb.examples[:1]] + list(CELL_EXAMPLES)
    examples += [example for verb in COMMANDS for example in verb.examples[1:]]
    width = max(len(line) for line, _ in examples) + 2
    lines = [f"  {line.ljust(width)}{what}".rstrip() for line, what in examples]
    return "Talk to ACP agents from this notebook.\n\nCommands::\n\n" + "\n".join(lines) + "\n\n" + OPTIONS_HELP


# --- parsing --------------------------------------------------------------------------
def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%acp: cannot parse the line: {exc}") from None


def parse_line(line: str) -> Command:
    """Turn the text after ``%acp`` into a command; raises UsageError on bad input."""
    words = _split(line)
    if not words:
        return ShowPanel()
    name, rest = words[0], words[1:]
    verb = VERBS.get(name)
    if verb is None:
        raise UsageError(f"%acp: unknown command {name!r}; commands: {', '.join(VERBS)} (see %acp?)")
    argv: tuple[str, ...] | None = None
    if verb.takes_command and "--" in rest:
        cut = rest.index("--")
        rest, argv = rest[:cut], tuple(rest[cut + 1:])
        if not argv:
            raise UsageError(f"%acp {name} --: the command is missing, e.g. %acp {name} -- python agent.py")
    parser = _Parser(f"%acp {name}")
    verb.arguments(parser)
    args = parser.parse_args(rest)
    args.argv = argv
    return verb.build(args)


def parse_cell_line(line: str) -> CellPrompt:
    """The ``%%acp`` line: ``[NAME] [--wait | --no-wait] [--new] [--attach REF ...]``."""
    parser = _Parser("%%acp", not_an_option="settings such as the model change with %acp set ID=VALUE before the cell")
    parser.add_argument("alias", nargs="?", metavar="NAME")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--wait", dest="wait", action="store_const", const=True, default=None)
    group.add_argument("--no-wait", dest="wait", action="store_const", const=False)
    parser.add_argument("--new", dest="new_session", action="store_true")
    parser.add_argument("--attach", action="append", default=[], metavar="NAME")
    parser.add_argument("--cell", metavar="NAME")
    parser.add_argument("--models", metavar="A,B,...")
    args = parser.parse_args(_split(line))
    _given_once(args.attach, "%%acp: --attach {} given more than once; attach each once")
    models = tuple(m.strip() for m in (args.models or "").split(",") if m.strip())
    if args.models is not None and len(models) < 1:
        raise UsageError("%%acp --models: name the models, comma-separated, e.g. --models demo:fast,demo:smart")
    _given_once(list(models), "%%acp --models: {} named more than once; name each model once")
    if models and (args.new_session or args.attach):
        raise UsageError("%%acp --models asks each model from this conversation's current point: not with --new or "
                         "--attach")
    return CellPrompt(alias=args.alias, wait=args.wait, new_session=args.new_session, attach=tuple(args.attach),
                      cell=args.cell, models=models)


def parse_bool(text: str, option_id: str) -> bool:
    """An on/off word typed for a boolean option; UsageError naming the words otherwise."""
    value = parse_bool_word(text)
    if value is None:
        raise UsageError(f"%acp set: {option_id} is on/off: use true/false, on/off, yes/no or 1/0, not {text!r}")
    return value


def default_alias(argv: Sequence[str]) -> str:
    """A short name for an agent started from a command: the module, script or package it runs."""
    program = os.path.basename(argv[0])
    rest = list(argv[1:])
    if program.startswith("python"):
        if "-m" in rest[:-1]:
            return rest[rest.index("-m") + 1].split(".")[-1]
        if "-c" in rest:  # the code given to -c is no name: the agent is the program
            return program
        script = next((a for a in rest if not a.startswith("-")), None)
        if script:
            return os.path.splitext(os.path.basename(script))[0]
    if program in ("npx", "bunx", "pnpx", "uvx", "pipx"):
        package = next((a for a in rest if not a.startswith("-") and a != "run"), None)
        if package:
            return package.rsplit("/", 1)[-1].split("@")[0] or package
    return program
