"""Naming a session by its id or a prefix of it, alike in ``%acp resume``, ``%acp load`` and
``%acp sessions --delete``; and the short messages for an id that names no session or several.

``known`` maps each candidate id to a few words about it (its title, agent, when), newest first:
messages list at most ``SHOWN`` of them, never the whole list. Pure; kernel thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from IPython.core.error import UsageError

__all__ = ["SHOWN", "known_session_ids", "resolve_session_id", "unknown_session_id", "usage_error"]

SHOWN = 5


def usage_error(message: str) -> Exception:
    """IPython's UsageError: what the magics raise for input they refuse."""
    return UsageError(message)


def _listed(ids: list[str], known: Mapping[str, str], limit: int = SHOWN) -> str:
    shown = [f"{sid} ({known[sid]})" if known.get(sid) else sid for sid in ids[:limit]]
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return "; ".join(shown) + more


def resolve_session_id(wanted: str, known: Mapping[str, str], command: str) -> str | None:
    """The id ``wanted`` names among ``known``: itself, or the one id it is a prefix of; None when it names
    none. A prefix of several ids raises a UsageError listing them (``command`` opens the message)."""
    if wanted in known:
        return wanted
    matches = [sid for sid in known if sid.startswith(wanted)]
    if len(matches) > 1:
        raise usage_error(f"{command}: {wanted!r} is the start of {len(matches)} session ids: "
                         f"{_listed(matches, known)}. Give more of the id.")
    return matches[0] if matches else None


def unknown_session_id(wanted: str, known: Mapping[str, str], command: str, where: str, hint: str, *,
                       shown: int = SHOWN) -> Exception:
    """The error for an id that names no session ``where`` (e.g. "the sessions of agent 'demo'"): the newest
    ``shown`` ids, and ``hint`` (a magic that lists them all)."""
    newest = f"; the newest: {_listed(list(known), known, shown)}" if known else "; there are none yet"
    return usage_error(f"{command}: no session {wanted!r} in {where}{newest}." + (f" {hint}" if hint else ""))


def known_session_ids(listed: Iterable[Mapping[str, Any]], open_here: Iterable[Any]) -> dict[str, str]:
    """An agent's sessions, newest first: those it listed (session/list), then those open here; id -> title."""
    rows = sorted(listed, key=lambda s: str(s.get("updatedAt") or ""), reverse=True)
    known = {str(s.get("sessionId")): str(s.get("title") or "") for s in rows if s.get("sessionId")}
    for session in open_here:
        known.setdefault(session.id, session.title or "")
    return known
