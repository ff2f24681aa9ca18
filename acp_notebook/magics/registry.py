"""The notebook's agents: which agents this kernel started, under which names, their sessions, their
panels, and the records that let a later kernel reopen those sessions.

Every record is also written at once to the local session store (store.py), and again when
the session's title or option values change, so a later kernel can resume it unsaved.

One NotebookAgents per IPython shell (its AcpMagics' Runner holds it): its current agent's session
is what ``acpnb.current()`` answers in that shell (``current_session``; current_scope.py's CurrentSession asks it).
A stopped agent is dropped whole (its frame log, turns and panels can be freed): what later
cells still show of it, its sessions' last titles, is in their records, which outlive it.

Threads: every method that changes the agents runs on the kernel thread (the magics);
``current_session`` is read on any thread. The session records are read on the background
loop thread while outputs are published (``metadata_for``) and rewritten there when the agent
changes a title or an option (``_watch``); they, and the title hints, live in dicts guarded by
``_lock`` and are replaced, never mutated.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from ..client import Agent, Session
from ..widgets.display import kernel_id
from ..widgets.labels import agent_label
from ..widgets.panel import SessionPanel
from .records import SessionRecord
from .store import SessionStore, open_store

if TYPE_CHECKING:
    from ..widgets.chat import TurnView

__all__ = ["AgentEntry", "NotebookAgents", "env_names", "launch_of"]


@dataclass
class AgentEntry:
    """One agent started here: its name in the magics, how it was launched, its open session."""

    alias: str
    agent: Agent
    launch: dict[str, Any]  # see SessionRecord.launch
    env_names: tuple[str, ...] = ()
    session: Session | None = None
    sessions: dict[str, Session] = field(default_factory=dict)  # every session opened here, by id
    panels: dict[str, SessionPanel] = field(default_factory=dict)
    own_kernel_tools: bool = False  # started with --kernel-tools: AcpMagics.kernel_tools does not apply

    @property
    def proxy_agents(self) -> tuple[str, ...]:
        return tuple(self.launch.get("proxy") or ())


class NotebookAgents:
    """The agents of this notebook, the current one, and a record of every session opened here."""

    def __init__(self, default_agent: Callable[[], str], notebook: Callable[[], Path | None] = lambda: None) -> None:
        self._default_agent = default_agent
        self._notebook = notebook  # the notebook this kernel runs for, when it knows
        self._store: SessionStore | None = None
        self._watched: dict[str, Callable[[], None]] = {}  # session id -> stop observing its state
        self.agents: dict[str, AgentEntry] = {}
        self.current_alias: str | None = None
        self._lock = threading.Lock()
        self._records: dict[str, SessionRecord] = {}
        self._title_hints: dict[str, str] = {}
        self.last_view: TurnView | None = None  # the view of the latest %%acp cell, while its agent runs

    # --- lookup ----------------------------------------------------------------------
    def entry(self, alias: str | None = None) -> AgentEntry:
        """The named agent, or the current one; UsageError when there is none."""
        if alias is None:
            alias = self.current_alias
            if alias is None:
                raise UsageError(f"no agent is running: start one with %acp start {self._default_agent()} "
                                 "(or %acp resume to reopen this notebook's last session)")
        try:
            return self.agents[alias]
        except KeyError:
            names = ", ".join(self.agents) or "none"
            raise UsageError(f"no agent named {alias!r} (running: {names})") from None

    @property
    def current_session(self) -> Session | None:
        """The current agent's session (None until it has one): ``acpnb.current()`` in this shell."""
        entry = self.agents.get(self.current_alias) if self.current_alias is not None else None
        return entry.session if entry is not None else None

    def session_of(self, entry: AgentEntry) -> Session:
        if entry.session is None or entry.session.closed:
            raise UsageError(f"agent {entry.alias!r} has no open session: %acp new --agent {entry.alias}")
        return entry.session

    def entry_of(self, session: Session) -> AgentEntry | None:
        return next((e for e in self.agents.values() if e.agent is session.agent), None)

    # --- agents ----------------------------------------------------------------------
    def adopt(self, alias: str, agent: Agent, launch: dict[str, Any], env_names: tuple[str, ...] = ()) -> AgentEntry:
        """Make ``agent`` the current one under ``alias`` (re-running a start cell replaces that agent)."""
        old = self.agents.pop(alias, None)
        if old is not None:
            self.close_entry(old, "replaced by a new %acp start")
        entry = AgentEntry(alias, agent, launch, env_names)
        self.agents[alias] = entry
        self.current_alias = alias  # no current session until it opens one: a failed session/new leaves none
        return entry

    def use(self, alias: str) -> AgentEntry:
        entry = self.entry(alias)
        self.current_alias = entry.alias
        return entry

    def remove(self, entry: AgentEntry) -> None:
        """Forget a stopped agent; the next one (if any) becomes current."""
        self.agents.pop(entry.alias, None)
        if self.current_alias == entry.alias:
            self.current_alias = next(iter(self.agents), None)

    def close_entry(self, entry: AgentEntry, reason: str) -> None:
        """Stop the agent and show its panels closed (they keep their last settings, disabled). Nothing here
        refers to the agent afterwards: its sessions' records, marked closed, keep their last titles."""
        try:
            entry.agent.close()
        finally:
            for session_id, session in entry.sessions.items():
                unwatch = self._watched.pop(session_id, None)
                if unwatch is not None:
                    unwatch()
                self._mark_closed(session_id, title=session.title)
            for panel in entry.panels.values():
                panel.close(reason)
            if self.last_view is not None and self.last_view.turn.session.agent is entry.agent:
                self.last_view = None

    def close_all(self, reason: str) -> None:
        for entry in list(self.agents.values()):
            with contextlib.suppress(Exception):
                self.close_entry(entry, reason)
        self.agents.clear()
        self.current_alias = None

    # --- sessions --------------------------------------------------------------------
    def open(self, entry: AgentEntry, session: Session, *, title_hint: str | None = None) -> None:
        """``session`` becomes the agent's session (and the notebook's, if the agent is current)."""
        entry.session = session
        entry.sessions[session.id] = session
        if title_hint:
            with self._lock:
                self._title_hints = {**self._title_hints, session.id: title_hint}
        self._store = open_store()  # here, on the kernel thread: a warning lands in this cell
        self.touch(entry, session, title=title_hint)
        self._watch(entry, session)

    def panel(self, entry: AgentEntry, session: Session) -> SessionPanel:
        """The (one) panel of a session, made on first use."""
        panel = entry.panels.get(session.id)
        if panel is None:
            panel = SessionPanel(session, title_hint=self.title_hint(session), proxy_agents=entry.proxy_agents,
                                 metadata=self.metadata_for(session))
            entry.panels[session.id] = panel
        return panel

    def touch(self, entry: AgentEntry, session: Session, *, title: str | None = None) -> None:
        """Record that the session was used now (opened, prompted, changed)."""
        self._record(entry, session, at=time.time(), title=title, closed=False)

    def _record(self, entry: AgentEntry, session: Session, *, at: float | None = None, title: str | None = None,
                closed: bool | None = None) -> None:
        """Rewrite the session's record from its state (any thread); the store gets it too. The title is the
        agent's, else the one recorded before (a resumed session keeps its name until the agent sends one)."""
        with self._lock:
            known = self._records.get(session.id)
            record = SessionRecord(
                session_id=session.id, alias=entry.alias, launch=entry.launch, cwd=session.cwd,
                agent_cwd=entry.agent.cwd, env_names=entry.env_names,
                title=session.title or title or (known.title if known else None),
                closed=closed if closed is not None else bool(known and known.closed),
                at=at if at is not None else (known.at if known else time.time()),
                options=tuple((o.id, o.value) for o in session.config if not o.read_only),
                branch=_branch_of(session))
            self._records = {**self._records, session.id: record}
        self._save(record)

    def _save(self, record: SessionRecord) -> None:
        if self._store is not None:
            notebook = self._notebook()
            self._store.save(record, notebook=str(notebook) if notebook else None, workdir=os.getcwd(),
                             kernel_id=kernel_id())

    def _watch(self, entry: AgentEntry, session: Session) -> None:
        """Rewrite the record when the agent changes the session's title or options (loop thread)."""
        if session.id in self._watched:
            self._watched.pop(session.id)()

        def changed(event: Any) -> None:
            if event.kind in ("config", "info") and not session.closed:
                self._record(entry, session)

        self._watched[session.id] = session.state.observe(changed)

    def forget_session(self, entry: AgentEntry, session_id: str, reason: str) -> None:
        """The agent deleted a session: its record is dropped (``%acp resume`` will not pick it, here or in the
        store, and the panel's last output no longer carries it) and its panel shows it closed, saying ``reason``.
        The agent's current session, if it was this one, stays closed: the magics then say to open a new one."""
        with self._lock:
            record = self._records.get(session_id)
            self._records = {sid: r for sid, r in self._records.items() if sid != session_id}
        store = self._store or open_store()
        if store is not None:  # also a session recorded by an earlier kernel: its row is keyed by agent and id
            store.forget(record or SessionRecord(session_id, entry.alias, entry.launch, "", ""))
        panel = entry.panels.get(session_id)
        if panel is not None:
            panel.close(reason)

    def mark_gone(self, record: SessionRecord) -> None:
        """The record's agent no longer has its session: the store stops offering it first."""
        store = self._store or open_store()
        if store is not None:
            store.mark_gone(record)

    def _mark_closed(self, session_id: str, *, title: str | None = None) -> None:
        with self._lock:
            record = self._records.get(session_id)
            if record is None:
                return
            record = replace(record, closed=True, title=title or record.title)
            self._records = {**self._records, session_id: record}
        self._save(record)

    def title_hint(self, session: Session) -> str | None:
        with self._lock:
            return self._title_hints.get(session.id)

    def record_of(self, session_id: str) -> SessionRecord | None:
        """The record of a session opened here (any thread)."""
        with self._lock:
            return self._records.get(session_id)

    def records(self) -> list[SessionRecord]:
        """The record of every session opened in this kernel, with its latest title (a stopped agent's
        sessions: the title they had when it stopped, kept in their records)."""
        with self._lock:
            records = list(self._records.values())
        sessions = {sid: s for entry in self.agents.values() for sid, s in entry.sessions.items()}
        return [replace(r, title=sessions[r.session_id].title or r.title) if r.session_id in sessions else r
                for r in records]

    def metadata_for(self, session: Session) -> Callable[[], Mapping[str, Any]]:
        """What the outputs of ``session`` carry (called on any thread when they are published)."""

        def metadata() -> Mapping[str, Any]:
            with self._lock:
                record = self._records.get(session.id)
            if record is None:
                return {}
            closed = record.closed or session.closed or session.agent.status in ("closed", "exited")
            return replace(record, title=session.title or record.title, closed=closed).metadata()

        return metadata

    def describe_stop(self, entry: AgentEntry) -> str:
        """The one line ``%acp stop`` prints: the agent, and the sessions it closes (by title, else id)."""
        sessions = list(entry.sessions.values())
        named = [repr(s.title) if s.title else s.id for s in sessions]
        what = {0: "no session", 1: f"its session {named[0] if named else ''}"}.get(
            len(named), f"its {len(named)} sessions ({', '.join(named)})")
        label = agent_label(sessions[0]) if sessions else entry.agent.name
        return f"Stopped agent '{entry.alias}' ({label}) and closed {what}; its panels show it closed."


def _branch_of(session: Session) -> dict[str, Any] | None:
    """The branch a session carries, as records keep it (branching.Branch), or None outside a branched one."""
    branch = session.branch
    if branch is None or branch.conversation.size < 2:
        return None
    return branch.record()


def launch_of(spec: Any, sandbox: str | None = None) -> dict[str, Any]:
    """How to start an agent again, as saved in records: a registry name or a command line, and the sandbox
    it ran in (``--sandbox bwrap``), so that a resume starts it sandboxed again."""
    launch: dict[str, Any] = {"argv": [str(a) for a in spec]} if isinstance(spec, (list, tuple)) else {"spec": str(spec)}
    if sandbox is not None:
        launch["sandbox"] = sandbox
    return launch


def env_names(pairs: Any) -> tuple[str, ...]:
    return tuple(sorted({str(k) for k, _ in pairs}))
