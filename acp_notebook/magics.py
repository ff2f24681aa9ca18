"""%acp and %%acp: start agents, show live session panels, chat in cells, inspect the protocol.

Parsing (``parse_line`` / ``parse_cell_line``: text -> a command dataclass, UsageError on bad
input) is kept apart from execution (``AcpMagics.run``), so each can be tested alone.

Waiting for a turn without freezing the widgets: while a cell runs, ipykernel does not
handle comm messages (clicks) for it, except when the cell is a coroutine awaiting on the
kernel's own event loop (ipykernel >= 7.4 dispatches widget messages then). So a ``%%acp``
cell is rewritten, before IPython compiles it, into ``await acp_cell(line, body)``: the
cell waits for the turn on the kernel loop, the Cancel and permission buttons keep
working, and a kernel interrupt cancels the await, which sends ``session/cancel`` and ends
the cell promptly. Where that is impossible (older kernels) ``AcpMagics.wait = "auto"``
lets the cell return at once while the reply streams into its widgets from the
background loop.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import os
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html import escape
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display
from traitlets import CaselessStrEnum, Float, Unicode

from . import _loop
from .client import Agent, PermissionRequest, Session, set_current
from .client import start as start_agent
from .errors import AcpError, RpcError
from .launch import auth_hint
from .widgets.chat import TurnView
from .widgets.inspector import ProtocolInspector
from .widgets.panel import SessionPanel, value_label

__all__ = [
    "AcpMagics",
    "TurnInterrupted",
    "acp_cell",
    "load_ipython_extension",
    "parse_cell_line",
    "parse_line",
    "unload_ipython_extension",
]

logger = logging.getLogger(__name__)

CANCEL_GRACE_S = 5.0
INTERRUPT_POLL_S = 0.1
BOOLEAN_WORDS = {"true": True, "on": True, "yes": True, "1": True, "false": False, "off": False, "no": False,
                 "0": False}
_CELL_MAGIC = re.compile(r"^%%acp(?:[ \t]|$)")


class TurnInterrupted(AcpError):
    """A ``%%acp`` cell was interrupted; the agent was sent ``session/cancel``."""

    hint = "The reply so far is above. Run the cell again to ask anew."


# --- commands: what a line asks for ------------------------------------------------
@dataclass(frozen=True)
class Start:
    spec: str | tuple[str, ...]
    alias: str | None = None
    cwd: str | None = None
    timeout: float | None = None
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Proxy:
    agents: tuple[tuple[str, str], ...]
    alias: str | None = None
    cwd: str | None = None
    timeout: float | None = None


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
class ListSessions:
    alias: str | None = None


@dataclass(frozen=True)
class LoadSession:
    session_id: str
    alias: str | None = None


@dataclass(frozen=True)
class ShowLog:
    alias: str | None = None
    method: str | None = None
    session_only: bool = False


@dataclass(frozen=True)
class Stop:
    alias: str | None = None


@dataclass(frozen=True)
class Use:
    alias: str


@dataclass(frozen=True)
class Cancel:
    alias: str | None = None


@dataclass(frozen=True)
class Authenticate:
    method_id: str
    alias: str | None = None


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class CellPrompt:
    alias: str | None = None
    wait: bool | None = None  # None: AcpMagics.wait decides
    new_session: bool = False


Command = Any  # one of the dataclasses above


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad line as a one-line UsageError instead of exiting."""

    def __init__(self, command: str, **kwargs: Any) -> None:
        super().__init__(prog=f"%acp {command}".strip(), add_help=False, allow_abbrev=False, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see %acp?)")


def _pairs(words: Sequence[str], what: str, command: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for word in words:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise UsageError(f"%acp {command}: expected {what}, got {word!r} (see %acp?)")
        pairs.append((key, value))
    return tuple(pairs)


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%acp: cannot parse the line: {exc}") from None


def _agent_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent", "-a", dest="alias", metavar="NAME", help="the agent to act on (default: current)")


def parse_line(line: str) -> Command:
    """Turn the text after ``%acp`` into a command; raises UsageError on bad input."""
    words = _split(line)
    if not words:
        return ShowPanel()
    command, rest = words[0], words[1:]
    if command == "start":
        argv: tuple[str, ...] | None = None
        if "--" in rest:
            cut = rest.index("--")
            rest, argv = rest[:cut], tuple(rest[cut + 1:])
            if not argv:
                raise UsageError("%acp start --: the command is missing, e.g. %acp start -- my-agent --acp")
        parser = _Parser("start")
        if argv is None:
            parser.add_argument("spec", nargs="?", metavar="NAME")
        parser.add_argument("--name", "-n", dest="alias")
        parser.add_argument("--cwd")
        parser.add_argument("--timeout", type=float)
        parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
        args = parser.parse_args(rest)
        spec = argv if argv is not None else args.spec
        return Start(spec=spec or "", alias=args.alias, cwd=args.cwd, timeout=args.timeout,
                     env=_pairs(args.env, "KEY=VALUE", "start"))
    if command == "proxy":
        parser = _Parser("proxy")
        parser.add_argument("agents", nargs="*", metavar="NAME=SPEC")
        parser.add_argument("--name", "-n", dest="alias")
        parser.add_argument("--cwd")
        parser.add_argument("--timeout", type=float)
        args = parser.parse_args(rest)
        if not args.agents:
            raise UsageError("%acp proxy: name at least one agent, e.g. %acp proxy demo=demo claude=claude")
        pairs = _pairs(args.agents, "NAME=SPEC", "proxy")
        if any(not spec for _, spec in pairs):
            raise UsageError("%acp proxy: every NAME needs a SPEC (a registry name or a quoted command line)")
        return Proxy(agents=pairs, alias=args.alias, cwd=args.cwd, timeout=args.timeout)
    if command == "set":
        parser = _Parser("set")
        parser.add_argument("assignments", nargs="*", metavar="ID=VALUE")
        _agent_option(parser)
        args = parser.parse_args(rest)
        if not args.assignments:
            raise UsageError("%acp set: give at least one ID=VALUE, e.g. %acp set model=smart")
        return SetOptions(_pairs(args.assignments, "ID=VALUE", "set"), alias=args.alias)
    simple: dict[str, Callable[[argparse.Namespace], Command]] = {
        "new": lambda a: NewSession(alias=a.alias, cwd=a.cwd),
        "sessions": lambda a: ListSessions(alias=a.alias),
        "cancel": lambda a: Cancel(alias=a.alias),
        "show": lambda a: ShowPanel(alias=a.alias),
    }
    if command in simple:
        parser = _Parser(command)
        _agent_option(parser)
        if command == "new":
            parser.add_argument("--cwd")
        return simple[command](parser.parse_args(rest))
    if command in ("load", "auth"):
        parser = _Parser(command)
        parser.add_argument("target", metavar="ID" if command == "load" else "METHOD")
        _agent_option(parser)
        args = parser.parse_args(rest)
        return LoadSession(args.target, args.alias) if command == "load" else Authenticate(args.target, args.alias)
    if command == "log":
        parser = _Parser("log")
        parser.add_argument("alias", nargs="?", metavar="NAME")
        parser.add_argument("--method", "-m")
        parser.add_argument("--session", action="store_true", dest="session_only",
                            help="only the current session's frames")
        args = parser.parse_args(rest)
        return ShowLog(alias=args.alias, method=args.method, session_only=args.session_only)
    if command in ("stop", "use"):
        parser = _Parser(command)
        parser.add_argument("alias", nargs="?" if command == "stop" else None, metavar="NAME")
        args = parser.parse_args(rest)
        return Stop(args.alias) if command == "stop" else Use(args.alias)
    if command == "help":
        return Help()
    raise UsageError(f"%acp: unknown command {command!r}; commands: start, proxy, set, new, sessions, load, log, "
                     "use, cancel, auth, stop, help (see %acp?)")


def parse_cell_line(line: str) -> CellPrompt:
    """The ``%%acp`` line: ``[NAME] [--wait | --no-wait] [--new]``."""
    parser = _Parser("")
    parser.prog = "%%acp"
    parser.add_argument("alias", nargs="?", metavar="NAME")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--wait", dest="wait", action="store_const", const=True, default=None)
    group.add_argument("--no-wait", dest="wait", action="store_const", const=False)
    parser.add_argument("--new", dest="new_session", action="store_true")
    args = parser.parse_args(_split(line))
    return CellPrompt(alias=args.alias, wait=args.wait, new_session=args.new_session)


def parse_bool(text: str, option_id: str) -> bool:
    try:
        return BOOLEAN_WORDS[text.strip().lower()]
    except KeyError:
        raise UsageError(f"%acp set: {option_id} is on/off: use true/false, on/off, yes/no or 1/0, not {text!r}") \
            from None


def default_alias(argv: Sequence[str]) -> str:
    """A short name for an agent started from a command: the module, script or package it runs."""
    program = os.path.basename(argv[0])
    rest = list(argv[1:])
    if program.startswith("python"):
        if "-m" in rest[:-1]:
            return rest[rest.index("-m") + 1].split(".")[-1]
        script = next((a for a in rest if not a.startswith("-")), None)
        if script:
            return os.path.splitext(os.path.basename(script))[0]
    if program in ("npx", "bunx", "pnpx", "uvx", "pipx"):
        package = next((a for a in rest if not a.startswith("-") and a != "run"), None)
        if package:
            return package.rsplit("/", 1)[-1].split("@")[0] or package
    return program


# --- state: the agents this notebook started -----------------------------------------
@dataclass
class AgentEntry:
    alias: str
    agent: Agent
    session: Session | None = None
    panels: dict[str, SessionPanel] = field(default_factory=dict)


def _kernel_takes_comms_while_awaiting() -> bool:
    """ipykernel >= 7.4 dispatches widget messages while an async cell awaits on its loop."""
    try:
        import ipykernel
    except ImportError:
        return False
    numbers = [int(n) for n in re.findall(r"\d+", ipykernel.__version__)[:2]]
    return tuple(numbers) >= (7, 4)


def _awaitable(future: concurrent.futures.Future[Any]) -> asyncio.Future[None]:
    """An asyncio future on the running loop that completes with ``future``; cancelling it leaves ``future`` alone."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_done: concurrent.futures.Future[Any]) -> None:
        loop.call_soon_threadsafe(lambda: waiter.done() or waiter.set_result(None))

    future.add_done_callback(wake)
    return waiter


async def _wait_interruptibly(future: concurrent.futures.Future[Any]) -> None:
    """Await ``future`` while keeping the kernel loop ticking.

    ipykernel's SIGINT handler schedules the cancellation of the cell with a plain
    ``call_soon`` from inside the signal handler, which does not wake a loop asleep in
    ``select()``; a loop with nothing else to do would only see the interrupt when the
    turn ends. A short timer keeps it responsive.
    """
    waiter = _awaitable(future)
    while not waiter.done():
        await asyncio.wait([waiter], timeout=INTERRUPT_POLL_S)


@magics_class
class AcpMagics(Magics):
    """The ``%acp`` / ``%%acp`` magics; configure with ``%config AcpMagics.<option> = value``."""

    default_agent = Unicode("demo", help="The agent `%acp start` starts when no NAME is given.").tag(config=True)
    permission = CaselessStrEnum(
        ["ask", "allow", "deny"], default_value="ask",
        help="Answer to the agent's permission requests in %%acp cells: 'ask' shows buttons and waits for a "
             "click; 'allow' or 'deny' answer at once (for unattended runs such as nbclient or CI).",
    ).tag(config=True)
    permission_timeout = Float(
        0.0, help="With permission='ask': seconds to wait for a click before rejecting (0 waits until the turn "
                  "is cancelled).",
    ).tag(config=True)
    wait = CaselessStrEnum(
        ["auto", "always", "never"], default_value="auto",
        help="Whether a %%acp cell waits for the turn to end. 'auto' waits where the kernel keeps widgets "
             "clickable meanwhile (ipykernel >= 7.4) or has no widgets (terminal), else returns at once and "
             "the reply keeps streaming into the cell.",
    ).tag(config=True)
    stream_interval = Float(
        0.1, help="Seconds between two renders of a streaming reply: chunks arriving faster are coalesced.",
    ).tag(config=True)
    timeout = Float(60.0, help="Seconds to wait for an agent to start and for each request.").tag(config=True)
    turn_timeout = Float(0.0, help="Seconds a %%acp turn may take before it is cancelled (0: no limit).").tag(
        config=True)
    cwd = Unicode("", help="Working directory for agents and sessions (default: the kernel's).").tag(config=True)

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.agents: dict[str, AgentEntry] = {}
        self.current_alias: str | None = None
        self._live_views: dict[str, TurnView] = {}
        self._last_turn: dict[str, concurrent.futures.Future[Any]] = {}
        self._in_async_cell = False
        self.last_view: TurnView | None = None  # the view of the latest %%acp cell

    # --- the magic --------------------------------------------------------------
    @line_cell_magic
    def acp(self, line: str, cell: str | None = None) -> None:
        """Talk to ACP agents from this notebook.

        Commands::

          %acp start demo                     start an agent (a name from acpnb.agents()) and open a session
          %acp start demo --name second       another agent under its own name (several may run at once)
          %acp start -- my-agent --acp        any command that speaks ACP on stdio
          %acp proxy demo=demo claude=claude  several agents behind the multi-agent proxy (models: agent:model)
          %acp                                the session panel: title, agent, model, status, one control per option
          %%acp                               the cell is the prompt; the reply streams in under the session title
          %%acp second --no-wait              this cell goes to agent 'second'; do not wait for the turn to end
          %%acp --new                         open a new session first
          %acp set model=smart                change config options (booleans: true/false, on/off)
          %acp set show_thoughts=on mode=code
          %acp new                            a new session with the current agent
          %acp sessions                       the agent's sessions
          %acp load demo-1                    reopen a past session (the agent replays it)
          %acp log                            the protocol inspector: every frame, live, JSON on demand
          %acp log --method session/update    ... only one method
          %acp use second                     switch the agent the other commands use
          %acp cancel                         cancel the running turn
          %acp auth METHOD_ID                 authenticate with the agent (see its auth methods)
          %acp stop [NAME]                    stop an agent (default: the current one)

        Options of %acp start / proxy: --name NAME, --cwd DIR, --timeout SECONDS, --env KEY=VALUE (start).
        Most commands take --agent NAME to act on an agent other than the current one.

        Configuration (``%config AcpMagics.<option> = value``): default_agent, permission ('ask' | 'allow' |
        'deny'), permission_timeout, wait ('auto' | 'always' | 'never'), stream_interval, timeout,
        turn_timeout, cwd.

        A running %%acp cell stops at a kernel interrupt: the agent is sent session/cancel.
        """
        if cell is None:
            return self.run(parse_line(line))
        return self.run_cell(parse_cell_line(line), cell)

    # --- execution --------------------------------------------------------------
    def run(self, command: Command) -> None:
        """Carry out one parsed ``%acp`` command."""
        handlers: dict[type, Callable[[Any], None]] = {
            Start: self._start, Proxy: self._proxy, ShowPanel: self._show_panel, SetOptions: self._set,
            NewSession: self._new_session, ListSessions: self._list_sessions, LoadSession: self._load_session,
            ShowLog: self._show_log, Stop: self._stop, Use: self._use, Cancel: self._cancel,
            Authenticate: self._authenticate, Help: lambda _c: print(inspect.getdoc(AcpMagics.acp)),
        }
        handlers[type(command)](command)

    def entry(self, alias: str | None = None) -> AgentEntry:
        """The named agent, or the current one; UsageError when there is none."""
        if alias is None:
            alias = self.current_alias
            if alias is None:
                raise UsageError(f"no agent is running: start one with %acp start {self.default_agent}")
        try:
            return self.agents[alias]
        except KeyError:
            names = ", ".join(self.agents) or "none"
            raise UsageError(f"no agent named {alias!r} (running: {names})") from None

    def session_of(self, entry: AgentEntry) -> Session:
        if entry.session is None or entry.session.closed:
            raise UsageError(f"agent {entry.alias!r} has no open session: %acp new --agent {entry.alias}")
        return entry.session

    def _cwd(self, explicit: str | None) -> str | None:
        chosen = explicit or self.cwd or None
        return os.path.expanduser(chosen) if chosen else None

    def _adopt(self, alias: str, agent: Agent) -> AgentEntry:
        old = self.agents.pop(alias, None)
        if old is not None:  # re-running a start cell replaces that agent
            self._close_entry(old)
        entry = AgentEntry(alias, agent)
        self.agents[alias] = entry
        self.current_alias = alias
        set_current(None)  # until its session is open; a failed session/new must not leave the old one current
        return entry

    def _open_first_session(self, entry: AgentEntry, timeout: float) -> None:
        try:
            session = entry.agent.new_session(timeout=timeout)
        except RpcError as exc:
            methods = [str(m.get("id")) for m in entry.agent.auth_methods]
            if exc.code != -32000 or not methods:
                raise
            hint = auth_hint(entry.agent.registry_spec, entry.agent.auth_methods, how="%acp auth METHOD")
            raise AcpError(f"agent {entry.alias!r} asks you to authenticate before it opens a session",
                           hint=hint) from None
        self._open(entry, session)

    def _open(self, entry: AgentEntry, session: Session, *, show: bool = True) -> None:
        session.permission = self._permission_policy
        entry.session = session
        if self.current_alias == entry.alias:
            set_current(session)
        if show:
            display(self.panel(session, entry))

    def panel(self, session: Session | None = None, entry: AgentEntry | None = None) -> SessionPanel:
        """The (one) panel of a session, made on first use."""
        entry = entry or self.entry()
        session = session or self.session_of(entry)
        if session.id not in entry.panels:
            entry.panels[session.id] = SessionPanel(session)
        return entry.panels[session.id]

    def _start(self, command: Start) -> None:
        spec: Any = command.spec or self.default_agent
        alias = command.alias
        if isinstance(spec, tuple):
            spec = list(spec)
            alias = alias or default_alias(spec)
        agent = start_agent(spec, cwd=self._cwd(command.cwd), env=dict(command.env) or None,
                            timeout=command.timeout or self.timeout, name=alias)
        entry = self._adopt(alias or agent.name, agent)
        self._open_first_session(entry, command.timeout or self.timeout)

    def _proxy(self, command: Proxy) -> None:
        from .proxy import start_proxy

        alias = command.alias or "proxy"
        agent = start_proxy(dict(command.agents), cwd=self._cwd(command.cwd),
                            timeout=command.timeout or self.timeout, name=alias)
        entry = self._adopt(alias, agent)
        self._open_first_session(entry, command.timeout or self.timeout)

    def _show_panel(self, command: ShowPanel) -> None:
        display(self.panel(entry=self.entry(command.alias)))

    def _set(self, command: SetOptions) -> None:
        session = self.session_of(self.entry(command.alias))
        before = set(session.config.ids())
        changed = []
        for option_id, text in command.assignments:
            option = session.config.get(option_id)
            value: str | bool = parse_bool(text, option_id) if option is not None and option.type == "boolean" \
                else text
            session.set(option_id, value, timeout=self.timeout)
            changed.append(option_id)
        config = session.config
        lines = [f"{option_id} = {value_label(config[option_id])}" for option_id in changed if option_id in config]
        lines += [f"new option: {o.id} = {value_label(o)}" for o in config if o.id not in before]
        lines += [f"option gone: {gone}" for gone in sorted(before - set(config.ids()))]
        print("\n".join(lines))

    def _new_session(self, command: NewSession) -> None:
        entry = self.entry(command.alias)
        self._open(entry, entry.agent.new_session(self._cwd(command.cwd), timeout=self.timeout))

    def _list_sessions(self, command: ListSessions) -> None:
        entry = self.entry(command.alias)
        open_here = {s.id: s for s in entry.agent.sessions}
        if (entry.agent.capabilities.get("sessionCapabilities") or {}).get("list") is not None:
            listed = entry.agent.list_sessions(timeout=self.timeout)
        else:
            listed = [{"sessionId": s.id, "title": s.title, "updatedAt": s.updated_at, "cwd": s.cwd}
                      for s in open_here.values()]
        display(SessionTable.build(listed, open_here, entry.session.id if entry.session else None))

    def _load_session(self, command: LoadSession) -> None:
        entry = self.entry(command.alias)
        existing = next((s for s in entry.agent.sessions if s.id == command.session_id), None)
        session = existing or entry.agent.load_session(command.session_id, self._cwd(None), timeout=self.timeout)
        self._open(entry, session)

    def _show_log(self, command: ShowLog) -> None:
        entry = self.entry(command.alias)
        session_id = self.session_of(entry).id if command.session_only else None
        display(ProtocolInspector(entry.agent, method=command.method, session_id=session_id))

    def _stop(self, command: Stop) -> None:
        entry = self.entry(command.alias)
        del self.agents[entry.alias]
        self._close_entry(entry)
        if self.current_alias == entry.alias:
            self.current_alias = next(iter(self.agents), None)
            set_current(self.agents[self.current_alias].session if self.current_alias else None)

    def _close_entry(self, entry: AgentEntry) -> None:
        try:
            entry.agent.close()
        finally:
            for panel in entry.panels.values():
                panel.render_header()  # shows "closed"

    def _use(self, command: Use) -> None:
        entry = self.entry(command.alias)
        self.current_alias = entry.alias
        set_current(entry.session)

    def _cancel(self, command: Cancel) -> None:
        self.session_of(self.entry(command.alias)).cancel()

    def _authenticate(self, command: Authenticate) -> None:
        entry = self.entry(command.alias)
        entry.agent.authenticate(command.method_id, timeout=self.timeout)
        if entry.session is None:
            self._open(entry, entry.agent.new_session(timeout=self.timeout))

    # --- permission requests ----------------------------------------------------------
    def _permission_policy(self, request: PermissionRequest) -> Any:
        """The policy of every session opened here (runs on the loop thread)."""
        view = self._live_views.get(request.session.id)
        mode = self.permission
        if mode == "ask" and view is not None and not view.finished.done():
            reject = request.option_for("reject_once", "reject_always")
            return view.ask_permission(request, timeout=self.permission_timeout or None, fallback=reject)
        if mode == "ask":
            # Nobody to ask: the turn was not started by a %%acp cell (e.g. session.prompt() in code).
            # Not a warning: from this thread it would print into whichever cell runs now.
            logger.info("permission request outside a %%acp cell: rejected (%s)", request.tool_call.get("title"))
            mode = "deny"
        if view is not None:
            verb = "allowed" if mode == "allow" else "rejected"
            view.note_permission(request, f"{verb} automatically (AcpMagics.permission = {mode!r})")
        return mode

    # --- %%acp --------------------------------------------------------------------
    def begin_turn(self, command: CellPrompt, body: str) -> TurnView:
        """Show the cell's view and start the turn (after any earlier turn of the session); returns at once."""
        prompt = body.strip()
        if not prompt:
            raise UsageError("%%acp: the cell is empty: write the prompt under the %%acp line")
        entry = self.entry(command.alias)
        if command.new_session:
            self._open(entry, entry.agent.new_session(self._cwd(None), timeout=self.timeout), show=False)
        session = self.session_of(entry)
        view = TurnView(session, prompt, interval=self.stream_interval)
        self.last_view = view
        view.display_handle = display(view, display_id=True)
        previous = self._last_turn.get(session.id)
        timeout = self.turn_timeout or None

        async def run() -> Any:
            if previous is not None and not previous.done():
                with contextlib.suppress(BaseException):
                    await asyncio.wrap_future(previous)
            self._live_views[session.id] = view
            view.arm()
            return await session.aprompt(prompt, timeout=timeout)

        future = _loop.submit(run())
        self._last_turn[session.id] = future
        view.attach(future)
        view.finished.add_done_callback(
            lambda _f: self._live_views.get(session.id) is view and self._live_views.pop(session.id, None))
        return view

    def should_wait(self, command: CellPrompt) -> bool:
        if command.wait is not None:
            return command.wait
        if self.wait != "auto":
            return self.wait == "always"
        has_kernel = getattr(self.shell, "kernel", None) is not None
        return self._in_async_cell or not has_kernel

    def run_cell(self, command: CellPrompt, body: str) -> None:
        """The blocking path (no async cells here): wait, and turn Ctrl-C into session/cancel."""
        view = self.begin_turn(command, body)
        if not self.should_wait(command):
            return
        try:
            concurrent.futures.wait([view.finished])
        except KeyboardInterrupt:
            _loop.submit(view.session.acancel())
            concurrent.futures.wait([view.finished], CANCEL_GRACE_S)
            raise TurnInterrupted("the turn was cancelled by a keyboard interrupt (session/cancel sent)") from None
        _raise_failure(view)

    async def run_cell_async(self, line: str, body: str) -> None:
        """The awaiting path: widgets stay clickable; a kernel interrupt cancels the turn."""
        command = parse_cell_line(line)
        self._in_async_cell = True
        try:
            view = self.begin_turn(command, body)
            if not self.should_wait(command):
                return
        finally:
            self._in_async_cell = False
        try:
            await _wait_interruptibly(view.finished)
        except asyncio.CancelledError:
            _loop.submit(view.session.acancel())
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(_awaitable(view.finished), CANCEL_GRACE_S)
            raise TurnInterrupted("the turn was cancelled by a kernel interrupt (session/cancel sent)") from None
        _raise_failure(view)

    # --- the cell transformer --------------------------------------------------------
    def async_cells_supported(self) -> bool:
        shell = self.shell
        if getattr(shell, "kernel", None) is None or not getattr(shell, "autoawait", False):
            return False
        try:
            from IPython.core.interactiveshell import _asyncio_runner  # type: ignore[attr-defined]
        except ImportError:
            return False
        return shell.loop_runner is _asyncio_runner and _kernel_takes_comms_while_awaiting()

    def transform_cell(self, lines: list[str]) -> list[str]:
        """IPython input transformer: a ``%%acp`` cell becomes ``await acp_cell(line, body)`` where supported."""
        if not lines or not _CELL_MAGIC.match(lines[0]) or not self.async_cells_supported():
            return lines
        line = lines[0][len("%%acp"):].strip()
        body = "".join(lines[1:])
        return [f"await __import__('acp_notebook.magics').magics.acp_cell({line!r}, {body!r})\n"]

    # --- teardown ---------------------------------------------------------------------
    def close_all(self) -> None:
        for entry in list(self.agents.values()):
            with contextlib.suppress(Exception):
                self._close_entry(entry)
        self.agents.clear()
        self.current_alias = None
        set_current(None)


def _raise_failure(view: TurnView) -> None:
    error = view.finished.exception()
    if error is not None:
        raise error


@dataclass(frozen=True)
class SessionTable:
    """What ``%acp sessions`` shows: one row per session (HTML in notebooks, text in terminals)."""

    rows: tuple[tuple[str, str, str, str], ...]  # id, title, updated, mark ("current" / "open" / "")

    @classmethod
    def build(cls, listed: list[dict[str, Any]], open_here: dict[str, Session], current_id: str | None) -> SessionTable:
        rows = []
        for info in listed:
            session_id = str(info.get("sessionId", ""))
            mark = "current" if session_id == current_id else "open" if session_id in open_here else ""
            rows.append((session_id, str(info.get("title") or ""), str(info.get("updatedAt") or ""), mark))
        return cls(tuple(rows))

    def __repr__(self) -> str:
        if not self.rows:
            return "No sessions."
        widths = [max(len(row[i]) for row in self.rows) for i in range(3)]
        return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, [*widths, 0], strict=True)).rstrip()
                         for row in self.rows)

    def _repr_html_(self) -> str:
        if not self.rows:
            return "<i>No sessions.</i>"
        body = "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in self.rows)
        head = "<tr><th>session</th><th>title</th><th>updated</th><th></th></tr>"
        return f'<table class="acpnb-sessions">{head}{body}</table>'


# --- extension hooks -------------------------------------------------------------------
_registered: dict[int, AcpMagics] = {}


def _magics_for_current_shell() -> AcpMagics:
    from IPython import get_ipython

    shell = get_ipython()
    magics = _registered.get(id(shell))
    if magics is None:
        raise UsageError("the acp_notebook extension is not loaded: %load_ext acp_notebook")
    return magics


async def acp_cell(line: str, body: str) -> None:
    """What a ``%%acp`` cell runs as when the kernel supports awaiting cells (see the module docstring)."""
    await _magics_for_current_shell().run_cell_async(line, body)


def load_ipython_extension(ipython: Any) -> None:
    magics = AcpMagics(shell=ipython, parent=ipython)
    ipython.register_magics(magics)
    ipython.configurables.append(magics)
    ipython.input_transformers_cleanup.append(magics.transform_cell)
    _registered[id(ipython)] = magics


def unload_ipython_extension(ipython: Any) -> None:
    magics = _registered.pop(id(ipython), None)
    if magics is None:
        return
    magics.close_all()
    with contextlib.suppress(ValueError):
        ipython.input_transformers_cleanup.remove(magics.transform_cell)
    with contextlib.suppress(ValueError):
        ipython.configurables.remove(magics)
    manager = ipython.magics_manager
    for kind in ("line", "cell"):
        manager.magics[kind].pop("acp", None)
    manager.registry.pop(type(magics).__name__, None)
