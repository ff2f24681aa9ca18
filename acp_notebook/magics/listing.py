"""``%acp sessions`` (with ``--delete``) and ``%acp load``: an agent's sessions listed, deleted and loaded by id
or a unique prefix of it.

Given the Runner's registry and three of its settings as callables, so it reads the current ones. Threads:
the kernel thread, like every command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import RpcError
from ..session import Session
from ..widgets.sessions import SessionTable
from .registry import AgentEntry, NotebookAgents
from .session_ids import known_session_ids, resolve_session_id, unknown_session_id

__all__ = ["SessionListing"]


class SessionListing:
    """The commands about an agent's stored sessions."""

    def __init__(self, agents: NotebookAgents, *, timeout: Callable[[], float],
                 cwd: Callable[[str | None], str | None], open_session: Callable[[AgentEntry, Session], None]) -> None:
        self.agents = agents
        self._timeout = timeout
        self._cwd = cwd
        self._open = open_session

    def _listed(self, entry: AgentEntry) -> list[dict[str, Any]]:
        """The agent's sessions (session/list), or the ones open here when it cannot list them; the checkpoints
        branches keep here (branching.py) are left out."""
        checkpoints = {s.id for s in entry.agent.sessions if s.checkpoint_of is not None}
        if entry.agent.connection.supports("list"):
            listed = entry.agent.list_sessions(timeout=self._timeout())
        else:
            listed = [{"sessionId": s.id, "title": s.title, "updatedAt": s.updated_at, "cwd": s.cwd}
                      for s in entry.agent.sessions]
        return [s for s in listed if s.get("sessionId") not in checkpoints]

    def list_sessions(self, command: g.ListSessions) -> None:
        entry = self.agents.entry(command.alias)
        listed = self._listed(entry)
        if command.delete:
            for wanted in command.delete:
                self._delete_session(entry, wanted, listed)
            listed = self._listed(entry)
        open_here = {s.id: s for s in entry.agent.sessions}
        current = entry.session.id if entry.session is not None and not entry.session.closed else None
        table = SessionTable.build(listed, open_here, current,
                                   can_delete=entry.agent.connection.supports("delete"))
        table.show()

    def _delete_session(self, entry: AgentEntry, wanted: str, listed: list[dict[str, Any]]) -> None:
        """``%acp sessions --delete ID``: session/delete for the session named by ID or a unique prefix of it."""
        known = known_session_ids(listed, entry.agent.sessions)
        session_id = resolve_session_id(wanted, known, "%acp sessions --delete")
        if session_id is None:
            raise unknown_session_id(wanted, known, "%acp sessions --delete", f"the sessions of agent {entry.alias!r}",
                                     "%acp sessions lists them all.")
        title = known[session_id]
        entry.agent.delete_session(session_id, timeout=self._timeout())
        self.agents.forget_session(entry, session_id, "deleted with %acp sessions --delete")
        print(f"Deleted session {session_id}" + (f" ({title!r})" if title else "") + ".")

    def load_session(self, command: g.LoadSession) -> None:
        """``%acp load ID``: the session named by ID or a unique prefix of it, among the agent's (when it can
        list them; otherwise the id goes to the agent as typed)."""
        entry = self.agents.entry(command.alias)
        where, hint = f"the sessions of agent {entry.alias!r}", "%acp sessions lists them all."
        can_list = entry.agent.connection.supports("list")
        known = known_session_ids(self._listed(entry), entry.agent.sessions)
        session_id = resolve_session_id(command.session_id, known, "%acp load")
        if session_id is None and can_list:
            raise unknown_session_id(command.session_id, known, "%acp load", where, hint)
        session_id = session_id or command.session_id
        existing = next((s for s in entry.agent.sessions if s.id == session_id and not s.closed), None)
        if existing is None:
            try:
                existing = entry.agent.load_session(session_id, self._cwd(None), timeout=self._timeout())
            except RpcError as exc:
                if not exc.not_found:
                    raise
                raise unknown_session_id(session_id, known, "%acp load", where, hint) from None
        self._open(entry, existing)
