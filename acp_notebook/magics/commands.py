"""Carrying out ``%acp`` commands: one method per command of the grammar, and ``begin_turn`` for ``%%acp``.

``Runner`` reads its settings from the AcpMagics it serves (timeouts, permission mode, cwd)
and keeps the notebook's agents in a ``NotebookAgents`` registry. Errors leave here in magic
syntax: bad input is a ``UsageError``; an agent's failure is an ``AcpError`` whose hint is
shown with its hint in magic syntax (``AcpError.in_terms_of("magic")``, see errors.py).

Threads: everything here runs on the kernel thread. The exceptions are the session policies
for permission requests and forms (``session_policy``, ``session_form_policy``), which the
session calls on the background loop thread; they only read ``AcpMagics.permission`` and
``AcpMagics.elicitation``.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from typing import Any

from IPython.core.error import UsageError
from IPython.display import display

from ..client import PermissionRequest, Session, replay
from ..starting import start as start_agent
from ..connection.core import auth_remedy
from ..errors import AcpError, RpcError
from ..proxy import start_proxy
from ..proxy.launcher import agents_left_out
from ..record import Recording, RecordingError
from ..remedies import phrase
from ..widgets.chat import TurnView
from ..widgets.forms import FormAsker
from ..widgets.inspector import ProtocolInspector, method_filter
from ..widgets.permission import PermissionAsker
from . import context
from . import grammar as g
from .records import notebook_path
from .login import TerminalLoginFlow, can_run_here, terminal_method
from .registry import AgentEntry, NotebookAgents, env_names, launch_of
from .restore import restore_options
from .resume import choose_record, reopen, restart_agent, resumable, resume_note
from .branches import BranchCommands
from .listing import SessionListing
from .pending import run_pending
from .settings import assign
from .starting import starting
from .system_prompt import tell_system_prompt

__all__ = ["Runner", "auth_methods_text"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnPolicies:
    """How a %%acp turn answers permission requests and forms: an asker that shows them in the cell
    ('ask'), or the configured answer and the note that says so in the cell."""

    permission: Any
    permission_asker: PermissionAsker | None
    permission_note: str
    elicitation: Any
    form_asker: FormAsker | None
    elicitation_note: str


def auth_methods_text(agent: Any, shell: Any = None) -> str:
    """The agent's auth methods, one per line; a terminal login shows its command, which ``%acp auth METHOD``
    runs in the cell where it can (``can_run_here``: in a kernel, for an agent started as a program)."""
    methods = [m for m in agent.auth_methods if isinstance(m, dict) and m.get("id")]
    if not methods:
        return f"Agent '{agent.name}' offers no auth methods."
    lines = [f"Auth methods of agent '{agent.name}':"]
    in_cell = can_run_here(agent, shell)
    for method in methods:
        method_id = str(method["id"])
        named = f"{method_id} ({method['name']})" if method.get("name") and method["name"] != method_id else method_id
        if method.get("type") == "terminal":
            how = (f"%acp auth {method_id} runs this login in the cell, then starts the agent again" if in_cell
                   else "log in from a terminal, then start the agent again")
            lines.append(f"  {named}: {how}:\n      {agent.terminal_login_command(method_id)}")
        else:
            lines.append(f"  {named}: %acp auth {method_id}")
        if method.get("description"):
            lines.append(f"      {method['description']}")
    return "\n".join(lines)


def _auth_hint(entry: AgentEntry, shell: Any = None) -> str:
    agent = entry.agent
    if not can_run_here(agent, shell):
        return phrase(auth_remedy(agent.registry_spec, agent.auth_methods, agent.command), "magic") or ""
    # Terminal logins run in the cell here: named as %acp auth commands, not as command lines for a terminal.
    terminal = [m for m in agent.auth_methods if isinstance(m, dict) and m.get("id") and m.get("type") == "terminal"]
    others = [m for m in agent.auth_methods if m not in terminal]
    hint = phrase(auth_remedy(agent.registry_spec, others, agent.command), "magic") or ""
    if terminal:
        runs = " or ".join(f"%acp auth {m['id']}" for m in terminal)
        hint += (f" {'Or log in' if hint else 'Log in'} with {runs}: it runs the agent's login in the cell "
                 "(you answer it there), then starts the agent again.")
    return hint.strip()


def _recording_inspector(command: g.ShowLog, method: str | None) -> Any:
    assert command.file is not None
    try:
        recording = Recording.load(command.file)
    except RecordingError as exc:
        raise UsageError(f"%acp log --file {command.file}: {exc.message}") from None
    return ProtocolInspector.of_frames([frame.as_log_entry() for frame in recording.frames],
                                       name=recording.agent_name, method=method)


def _log_method(command: g.ShowLog) -> str | None:
    """The inspector's Method filter for ``--method``, saying on stderr when ACP has no such method."""
    if command.method is None:
        return None
    method, note = method_filter(command.method)
    if note:
        print(f"%acp log --method: {note}.", file=sys.stderr)
    return method


class Runner:
    """The commands of one AcpMagics (``magics``: its settings)."""

    def __init__(self, magics: Any) -> None:
        self.magics = magics
        self.agents = NotebookAgents(lambda: magics.default_agent,
                                     notebook=lambda: notebook_path(getattr(getattr(magics, "shell", None),
                                                                            "user_ns", None)))
        self.listing = SessionListing(self.agents, timeout=self._timeout, cwd=self._cwd, open_session=self.open)
        self.branches = BranchCommands(self.agents, magics, timeout=self._timeout, open_session=self.open)
        self._handlers = {
            g.Start: self.start, g.Proxy: self.proxy, g.ShowPanel: self.show_panel, g.SetOptions: self.set_options,
            g.NewSession: self.new_session, g.ListSessions: self.listing.list_sessions,
            g.LoadSession: self.listing.load_session,
            g.ForkSession: self.fork_session,
            g.ShowLog: self.show_log, g.Stop: self.stop, g.Use: self.use, g.Cancel: self.cancel,
            g.Authenticate: self.authenticate, g.Logout: self.logout,
            g.Resume: lambda c: display(resumable(c.notebook, self.agents.records(),
                                                  getattr(getattr(magics, "shell", None), "user_ns", None)), raw=True)
            if c.listing else self.resume(c),
            g.Branches: self.branches.list_branches, g.Checkout: self.branches.checkout,
            g.Pending: run_pending,
            g.Help: lambda _c: print(g.help_text()),
        }

    def run(self, command: g.Command) -> None:
        self._handlers[type(command)](command)

    # --- helpers ---------------------------------------------------------------------
    def _timeout(self, explicit: float | None = None) -> float:
        return explicit if explicit is not None else self.magics.timeout

    def _cwd(self, explicit: str | None) -> str | None:
        chosen = explicit or self.magics.cwd or None
        return os.path.expanduser(chosen) if chosen else None

    def _kernel_tools(self, explicit: str | None) -> str:
        """The kernel tools' policy of an agent about to start: its --kernel-tools, else AcpMagics.kernel_tools
        (which it then follows when the setting changes: see follow_kernel_tools)."""
        return explicit or self.magics.kernel_tools

    @staticmethod
    def _note_own_kernel_tools(entry: AgentEntry, explicit: str | None) -> None:
        entry.own_kernel_tools = explicit is not None

    def follow_kernel_tools(self, policy: str) -> None:
        """``AcpMagics.kernel_tools`` changed: agents started without --kernel-tools take the new policy."""
        for entry in self.agents.agents.values():
            if not entry.own_kernel_tools:
                entry.agent.kernel_tools = policy

    def session_policy(self, request: PermissionRequest) -> str:
        """The policy of sessions opened here, for turns not started by a %%acp cell (loop thread)."""
        mode = self.magics.permission
        if mode == "ask":
            # Nobody to ask: e.g. session.prompt() in code. Not a warning: from this thread it would
            # print into whichever cell runs now.
            logger.info("permission request outside a %%acp cell: rejected (%s)", request.title)
            return "deny"
        return str(mode)

    def session_form_policy(self, request: Any) -> Any:
        """How sessions opened here answer forms outside a %%acp cell (loop thread)."""
        mode = self.magics.elicitation
        if mode == "ask":
            # Nobody to ask (e.g. session.prompt() in code); logged, not printed, for the reason above.
            logger.info("a form outside a %%acp cell: declined (%s)", request.message)
            return "decline"
        return mode

    def turn_policies(self) -> TurnPolicies:
        permission, form = self.magics.permission, self.magics.elicitation
        asker = PermissionAsker(timeout=self.magics.permission_timeout or None) if permission == "ask" else None
        form_asker = FormAsker(timeout=self.magics.elicitation_timeout or None) if form == "ask" else None
        return TurnPolicies(asker or permission, asker, "" if asker else f"AcpMagics.permission = {permission!r}",
                            form_asker or form, form_asker, "" if form_asker else f"AcpMagics.elicitation = {form!r}")

    def open(self, entry: AgentEntry, session: Session, *, show: bool = True, title_hint: str | None = None) -> None:
        session.permission = self.session_policy
        session.elicitation = self.session_form_policy
        self.agents.open(entry, session, title_hint=title_hint)
        if show:
            self.agents.panel(entry, session).show()

    def _new_session(self, entry: AgentEntry, cwd: str | None, timeout: float) -> Session:
        """session/new; an agent that wants authentication first says how, in magics."""
        try:
            return entry.agent.new_session(cwd, timeout=timeout)
        except RpcError as exc:
            if not exc.auth_required or not entry.agent.auth_methods:
                raise
            raise AcpError(f"agent {entry.alias!r} asks you to authenticate before it opens a session",
                           hint=_auth_hint(entry, getattr(self.magics, "shell", None))) from None

    def _open_first_session(self, entry: AgentEntry, timeout: float) -> None:
        tell_system_prompt(entry.agent, self.magics)
        self.open(entry, self._new_session(entry, None, timeout))

    # --- starting agents -------------------------------------------------------------
    def _starting(self, name: str, timeout: float | None, call: Any) -> Any:
        """A blocking start with its progress line in the cell and an interrupt as one line (see starting.py)."""
        in_kernel = getattr(getattr(self.magics, "shell", None), "kernel", None) is not None
        return starting(name, self._timeout(timeout), call, in_kernel=in_kernel)

    def start(self, command: g.Start) -> None:
        if command.replay is not None:
            return self._start_replay(command)
        if command.obj is not None:
            return self._start_object(command)
        spec: Any = command.spec or self.magics.default_agent
        alias = command.alias
        if isinstance(spec, tuple):
            spec = list(spec)
            alias = alias or g.default_alias(spec)
        agent = self._starting(alias or str(spec), command.timeout, lambda: start_agent(
            spec, cwd=self._cwd(command.cwd), env=dict(command.env) or None, timeout=self._timeout(command.timeout),
            name=alias, record=command.record, kernel_tools=self._kernel_tools(command.kernel_tools),
            sandbox=command.sandbox))
        entry = self.agents.adopt(alias or agent.name, agent, launch_of(spec, command.sandbox),
                                  env_names(command.env))
        self._note_own_kernel_tools(entry, command.kernel_tools)
        self._open_first_session(entry, self._timeout(command.timeout))

    def _start_replay(self, command: g.Start) -> None:
        """``%acp start --replay FILE``: the recording answers as the agent it was made with, offline."""
        assert command.replay is not None
        try:
            agent = replay(command.replay, speed=command.speed, cwd=self._cwd(command.cwd),
                           timeout=self._timeout(command.timeout), name=command.alias)
        except RecordingError as exc:
            raise UsageError(f"%acp start --replay {command.replay}: {exc.message}") from None
        # Not a launch a later kernel repeats by resuming: a replay answers its recording from the start.
        entry = self.agents.adopt(command.alias or agent.name, agent, {"replay": command.replay})
        self._open_first_session(entry, self._timeout(command.timeout))

    def _start_object(self, command: g.Start) -> None:
        """``%acp start --object VARIABLE``: the agent object (or class) in a variable of the notebook, in memory."""
        assert command.obj is not None
        namespace = getattr(getattr(self.magics, "shell", None), "user_ns", None) or {}
        head, *attributes = command.obj.split(".")
        if head not in namespace:
            raise UsageError(f"%acp start --object {command.obj}: no variable {head!r} in this notebook; run the cell "
                             f"that defines it first (e.g. {head} = MyAgent())")
        obj = namespace[head]
        for attribute in attributes:
            if not hasattr(obj, attribute):
                raise UsageError(f"%acp start --object {command.obj}: {head} has no attribute path {command.obj!r}")
            obj = getattr(obj, attribute)
        if not isinstance(obj, type) and not callable(getattr(obj, "initialize", None)):
            raise UsageError(f"%acp start --object {command.obj}: it holds an object of type {type(obj).__name__}, "
                             "not an agent object (one with the SDK's agent methods initialize, new_session, prompt: "
                             "e.g. an acpnb.CellAgent subclass or an instance of it)")
        alias = command.alias or command.obj
        agent = start_agent(obj, cwd=self._cwd(command.cwd), timeout=self._timeout(command.timeout), name=alias,
                            kernel_tools=self._kernel_tools(command.kernel_tools))
        # Not a launch a later kernel can repeat: the object lives in this kernel only (see _restart).
        entry = self.agents.adopt(alias, agent, {"object": command.obj})
        self._note_own_kernel_tools(entry, command.kernel_tools)
        self._open_first_session(entry, self._timeout(command.timeout))

    def proxy(self, command: g.Proxy) -> None:
        alias = command.alias or "proxy"
        agent = self._starting(alias, command.timeout, lambda: start_proxy(
            dict(command.agents), cwd=self._cwd(command.cwd), timeout=self._timeout(command.timeout), name=alias,
            kernel_tools=self._kernel_tools(command.kernel_tools)))
        entry = self.agents.adopt(alias, agent, {"proxy": dict(command.agents)})
        self._note_own_kernel_tools(entry, command.kernel_tools)
        self._open_first_session(entry, self._timeout(command.timeout))
        try:
            left_out = agents_left_out(agent)
        except AcpError:  # an older proxy, or one busy past the timeout: nothing to add
            left_out = {}
        for name, why in left_out.items():
            print(f"Agent '{name}' could not start and is left out of the proxy ({why}). The others are ready; fix "
                  f"its SPEC and run %acp proxy again.", file=sys.stderr)

    def resume(self, command: g.Resume) -> Session:
        """Restart the agent of one of the notebook's sessions, reopen the session and put back the option
        values the agent lost (see resume.py, restore.py)."""
        shell = getattr(self.magics, "shell", None)
        record = choose_record(command.session_id, command.notebook, self.agents.records(),
                               getattr(shell, "user_ns", None))
        alias = command.alias or record.alias
        entry = self.agents.agents.get(alias)
        open_here = entry.sessions.get(record.session_id) if entry is not None else None
        restored = ""
        if entry is not None and entry.agent.running and open_here is not None and not open_here.closed:
            how = "already open here"
            session = open_here
        else:
            if entry is not None and entry.agent.running and dict(entry.launch) != dict(record.launch):
                raise UsageError(f"%acp resume: the name {alias!r} belongs to another running agent; give the "
                                 f"resumed one its own: %acp resume {record.session_id} --name {alias}2")
            if entry is None or not entry.agent.running:
                agent = restart_agent(record, alias, env=dict(command.env) or None,
                                      timeout=self._timeout(command.timeout), kernel_tools=self._kernel_tools(None))
                entry = self.agents.adopt(alias, agent, dict(record.launch), record.env_names)
                tell_system_prompt(agent, self.magics)
            session, how = reopen(entry.agent, record, self._timeout(command.timeout), gone=self.agents.mark_gone)
            self.branches.restore(session, record, command.notebook)  # the branches the notebook recorded
            restored = restore_options(session, record.options, self._timeout(command.timeout)).line()
        self.agents.use(alias)
        self.open(entry, session, title_hint=record.title, show=False)
        print("\n".join(line for line in (resume_note(record, how, dict(command.env)), restored) if line))
        self.agents.panel(entry, session).show()
        return session

    # --- the session panel and settings ----------------------------------------------
    def show_panel(self, command: g.ShowPanel) -> None:
        entry = self.agents.entry(command.alias)
        self.agents.panel(entry, self.agents.session_of(entry)).show()

    def set_options(self, command: g.SetOptions) -> None:
        entry = self.agents.entry(command.alias)
        session = self.agents.session_of(entry)
        lines = assign(session, command.assignments, proxy_agents=entry.proxy_agents, timeout=self._timeout(),
                       applied=lambda: self.agents.touch(entry, session))
        print("\n".join(lines))

    # --- sessions --------------------------------------------------------------------
    def new_session(self, command: g.NewSession) -> None:
        entry = self.agents.entry(command.alias)
        self.open(entry, self._new_session(entry, self._cwd(command.cwd), self._timeout()))

    def fork_session(self, command: g.ForkSession) -> None:
        """``%acp fork``: session/fork of the current session; the fork becomes current, with its panel."""
        entry = self.agents.entry(command.alias)
        source = self.agents.session_of(entry)
        cwd = os.path.expanduser(command.cwd) if command.cwd else None  # default: the source's directory
        self.open(entry, source.fork(cwd, timeout=self._timeout()), title_hint=source.display_title)

    def show_log(self, command: g.ShowLog) -> None:
        method = _log_method(command)
        if command.file is not None:
            display(_recording_inspector(command, method))
            return
        entry = self.agents.entry(command.alias)
        session_id = self.agents.session_of(entry).id if command.session_only else None
        display(ProtocolInspector(entry.agent, method=method, session_id=session_id))

    def stop(self, command: g.Stop) -> None:
        entries = list(self.agents.agents.values()) if command.every else [self.agents.entry(command.alias)]
        if not entries:
            print("No agent is running.")
        for entry in entries:
            line = self.agents.describe_stop(entry)
            self.branches.release_checkpoints(entry)  # the checkpoint sessions its branches took, deleted
            self.agents.remove(entry)
            self.agents.close_entry(entry, "closed with %acp stop")
            print(line)

    def use(self, command: g.Use) -> None:
        entry = self.agents.use(command.alias)
        session = entry.session
        if session is None or session.closed:
            where = "no session open"
        else:
            where = f"session {session.title!r}" if session.title else f"session {session.id}"
        print(f"The other commands now use agent '{entry.alias}' ({where}).")

    def cancel(self, command: g.Cancel) -> None:
        session = self.agents.session_of(self.agents.entry(command.alias))
        # Sent either way: after an interrupt's grace the turn is over here, yet the agent may still be at it.
        busy = session.busy
        session.cancel()
        print(f"Asked the agent to cancel the running turn of session {session.id} (session/cancel)." if busy else
              f"No turn of session {session.id} is running here; session/cancel was sent anyway, in case the "
              "agent is still at one.")

    def authenticate(self, command: g.Authenticate) -> None:
        entry = self.agents.entry(command.alias)
        if command.method_id is None:
            print(auth_methods_text(entry.agent, getattr(self.magics, "shell", None)))
            return
        if terminal_method(entry.agent, command.method_id) is not None:
            return TerminalLoginFlow(self, entry, command.method_id).start()  # in the cell; reconnects after
        entry.agent.authenticate(command.method_id, timeout=self._timeout())
        if entry.session is None:
            self.open(entry, self._new_session(entry, None, self._timeout()))

    def logout(self, command: g.Logout) -> None:
        entry = self.agents.entry(command.alias)
        entry.agent.logout(timeout=self._timeout())
        print(f"Logged out of agent '{entry.alias}'. A new session may ask you to authenticate again "
              "(%acp auth lists the ways).")

    # --- %%acp -----------------------------------------------------------------------
    def _place_cell(self, code: str) -> None:
        """A cell the agent proposed, below the running %%acp cell (IPython's set_next_input payload, which
        JupyterLab turns into a new cell when the cell's execution ends). Called on the loop thread."""
        shell = getattr(self.magics, "shell", None)
        if shell is None:
            raise RuntimeError("no IPython shell to put the cell in")
        shell.set_next_input(code, replace=False)

    def begin_turn(self, command: g.CellPrompt, body: str) -> TurnView | None:
        """Start the cell's turn (after any earlier turn of the session) and show its view; returns at once. A
        ``--models`` cell runs a branch sweep instead, shown when it ends (None: nothing to wait for)."""
        prompt = body.strip()
        if not prompt:
            raise UsageError("%%acp: the cell is empty: write the prompt under the %%acp line")
        namespace = getattr(getattr(self.magics, "shell", None), "user_ns", None) or {}
        entry = self.agents.entry(command.alias)
        # Every reference is looked up before anything is sent: a bad one sends nothing.
        filled: list[tuple[str, str]] = []  # shown in the cell as sent (the view lists them)
        prompt = context.expand(prompt, namespace, redactor=entry.agent.redactor, filled=filled)
        attach = context.attached(command.attach, namespace)
        if command.models:
            self.branches.sweep(entry, command, prompt)  # blocking: the replies side by side once all have come
            return None
        if command.new_session:
            self.open(entry, self._new_session(entry, self._cwd(None), self._timeout()), show=False)
        session = self.branches.session_for(entry, command)  # a new branch when the cell is run again
        policies = self.turn_policies()
        turn = session.start_turn(prompt, attach=attach or None, permission=policies.permission,
                                  elicitation=policies.elicitation, timeout=self.magics.turn_timeout or None)
        self.branches.started(session, turn, command)
        self.agents.touch(entry, session)
        view = TurnView(turn, interval=self.magics.stream_interval, asker=policies.permission_asker,
                        permission_note=policies.permission_note, form_asker=policies.form_asker,
                        elicitation_note=policies.elicitation_note, title_hint=self.agents.title_hint(session),
                        metadata=self.agents.metadata_for(session), place_cell=self._place_cell, filled=filled)
        self.agents.last_view = view
        view.show()
        return view
