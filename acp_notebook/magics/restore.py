"""Putting back the option values a reopened session lost.

Agents often reopen a session (``session/resume``, ``session/load``) on their defaults: the
model the person chose is silently gone. The record (records.py) keeps the values in force, in
the agent's order; after the reopen, each value that differs is set again in that order, so a
dependent option comes back after the one that brings it (a model before its thought level).
A value the agent no longer offers, or an option it no longer has, is reported and left alone:
never guessed. Kernel thread (``session.set`` waits on the background loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..client import Session
from ..errors import AcpError

__all__ = ["Restored", "restore_options"]


@dataclass
class Restored:
    """What ``restore_options`` did: ``applied`` were set again; ``left`` could not be, with why."""

    applied: list[tuple[str, str | bool]] = field(default_factory=list)
    left: list[tuple[str, str | bool, str]] = field(default_factory=list)

    def line(self) -> str:
        """One line for the cell ("" when the agent kept every value)."""
        parts = []
        if self.applied:
            parts.append("Re-applied " + ", ".join(f"{o}={_word(v)}" for o, v in self.applied)
                         + " (the agent reopened the session without them).")
        if self.left:
            parts.append("Not restored: " + "; ".join(f"{o}={_word(v)} ({why})" for o, v, why in self.left) + ".")
        return " ".join(parts)


def _word(value: str | bool) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def restore_options(session: Session, wanted: Sequence[tuple[str, str | bool]], timeout: float) -> Restored:
    """Set again, in order, each recorded value that differs from the reopened session's."""
    done = Restored()
    for option_id, value in wanted:
        option = session.config.get(option_id)
        if option is None:
            done.left.append((option_id, value, "the agent no longer has this option"))
            continue
        if option.value == value or option.read_only:
            continue
        if option.type == "boolean" and not isinstance(value, bool) or \
                option.type != "boolean" and value not in option.values:
            offered = ", ".join(_word(v) for v in option.values)
            done.left.append((option_id, value, f"no longer offered; it offers {offered}"))
            continue
        try:
            session.set(option_id, value, timeout=timeout)
        except AcpError as exc:
            done.left.append((option_id, value, f"refused: {exc.message}"))
            continue
        done.applied.append((option_id, value))
    return done
