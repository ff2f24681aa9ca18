"""The session table of one agent: its open sessions and their states, by session id.

``Agent.session_table`` is the one place that knows which sessions an agent has open, what state
each is in, and which turn each is running: the update applier (_inbound.py), the permission code,
the kernel link and ``Session`` itself read and change it only through the methods here. A state may
exist before its session (a session being opened gets the updates the agent streams before it
answers), and updates for an id not known yet are held until its state is made (``EarlyUpdates``).

Threads: a table is read from any thread (``sessions()`` and ``get`` return what is there at that
moment) and changed only on the background loop thread.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from ._early import EarlyUpdates
from .state import SessionState

__all__ = ["EARLY_SESSIONS_KEPT", "EARLY_UPDATES_KEPT", "SessionTable", "TabledSession"]

# Updates kept for a session id we do not know yet (sent before its session/new answer).
EARLY_UPDATES_KEPT = 500
EARLY_SESSIONS_KEPT = 16


class TabledSession(Protocol):
    """What the table needs of a session."""

    @property
    def id(self) -> str: ...

    @property
    def running_turn(self) -> Any: ...


S = TypeVar("S", bound=TabledSession)


class SessionTable(Generic[S]):
    """Open sessions and session states by id; updates for ids not known yet held until their state exists."""

    def __init__(self) -> None:
        self._sessions: dict[str, S] = {}
        self._states: dict[str, SessionState] = {}
        self.early: EarlyUpdates[dict[str, Any]] = EarlyUpdates(per_session=EARLY_UPDATES_KEPT,
                                                                 sessions=EARLY_SESSIONS_KEPT)

    # --- reading (any thread) ---------------------------------------------------
    def sessions(self) -> list[S]:
        """The open sessions, in the order they were opened."""
        return list(self._sessions.values())

    def get(self, session_id: object) -> S | None:
        """The open session ``session_id`` names; None for an unknown id or one that is not a string."""
        return self._sessions.get(session_id) if isinstance(session_id, str) else None

    def state(self, session_id: object) -> SessionState | None:
        """The state of ``session_id`` if it has one (its session may still be opening)."""
        return self._states.get(session_id) if isinstance(session_id, str) else None

    def running_turn(self, session_id: object) -> Any:
        """The turn ``session_id``'s prompt is running (on the wire), or None."""
        session = self.get(session_id)
        return session.running_turn if session is not None else None

    def __len__(self) -> int:
        return len(self._sessions)

    # --- changing (loop thread) ---------------------------------------------------
    def state_for(self, session_id: str) -> SessionState:
        """The session's state, made on first use; updates held for it are applied now, in arrival order."""
        state = self._states.get(session_id)
        if state is None:
            state = self._states[session_id] = SessionState(session_id)
            for update in self.early.take(session_id):
                state.apply_update(update)
                state.keep_outside_turn(update)
        return state

    def add(self, session: S) -> S | None:
        """Make ``session`` the open session of its id; the one it replaces (a reopen), if any."""
        before = self._sessions.get(session.id)
        self._sessions[session.id] = session
        return before

    def forget(self, session_id: str, session: S | None = None) -> S | None:
        """Forget ``session_id`` and its state (only if its open session is ``session``, when given: a reopen
        may have replaced it); the session forgotten, if any."""
        current = self._sessions.get(session_id)
        if session is not None and current is not session:
            return None
        self._sessions.pop(session_id, None)
        self._states.pop(session_id, None)
        return current

    def hold(self, session_id: str, update: dict[str, Any]) -> None:
        """Keep an update for a session id whose state does not exist yet (see ``state_for``)."""
        self.early.hold(session_id, update)
