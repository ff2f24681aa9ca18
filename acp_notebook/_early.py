"""Updates for a session not known yet, kept until it is: written once for the client and the proxy.

Agents may stream a session's updates before their session/new (load, resume) answer reaches us, and
the proxy gets updates for a probe session before the client uses it. ``EarlyUpdates`` keeps them by
session id, bounded both ways (the first ``per_session`` of each id, and at most ``sessions`` ids: a
new id past that drops the oldest id's), and hands them over once, in arrival order, with ``take``.

Users: ``Agent`` (client.py: updates for a session being opened), the proxy's ``Backend`` (an agent
session id not registered yet) and ``Candidate`` (a probe's updates, forwarded when it is bound).

Threads: an EarlyUpdates is mutated only on the event loop of the connection that owns it (the
background loop thread for the client, the proxy's loop for the proxy).
"""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["EarlyUpdates"]

T = TypeVar("T")


class EarlyUpdates(Generic[T]):
    """Items kept per session id until ``take``; bounded by ``per_session`` items and ``sessions`` ids."""

    def __init__(self, *, per_session: int, sessions: int = 1) -> None:
        self.per_session = per_session
        self.sessions = sessions
        self._held: dict[str, list[T]] = {}

    def hold(self, session_id: str, item: T) -> None:
        """Keep ``item`` for ``session_id`` (dropped when that id already holds ``per_session``)."""
        held = self._held.get(session_id)
        if held is None:
            if len(self._held) >= self.sessions:
                self._held.pop(next(iter(self._held)))  # the id held longest goes first
            held = self._held[session_id] = []
        if len(held) < self.per_session:
            held.append(item)

    def take(self, session_id: str) -> list[T]:
        """What was kept for ``session_id``, oldest first; nothing is kept for it any more."""
        return self._held.pop(session_id, [])

    def clear(self) -> None:
        self._held.clear()

