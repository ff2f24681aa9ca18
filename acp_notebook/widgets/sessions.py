"""SessionTable: what ``%acp sessions`` shows, one row per session, kept current while the kernel runs.

The rows are what the agent listed (``session/list``: id, title, last update) or, for agents
without it, the sessions open here. A session open here that the agent has not titled shows the
title the client made from its first prompt, marked as such. Sessions open in this kernel are
followed: a new title, or the session closing, updates the table's output (``LiveDisplay``), so
the saved notebook shows the last known titles. Deleting is a command, not a button
(``%acp sessions --delete ID``): a cell that says what it deleted is a record a notebook keeps;
the table says so under its rows when the agent can delete sessions.

Observers run on the background loop thread; the rows are replaced whole under the table's
lock, never edited in place.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from html import escape
from typing import Any

from ._html import MUTED, PROMPT_TITLE_TIP, md_escape
from .display import Bundle, LiveDisplay

__all__ = ["Row", "SessionTable"]

HEADINGS = ("session", "title", "updated", "")
DELETE_HINT = "Delete one for good: %acp sessions --delete ID (an id prefix will do)"


@dataclass(frozen=True)
class Row:
    session_id: str
    title: str
    updated: str
    mark: str  # "current" / "open" / "closed" / ""
    title_source: str = "agent"  # "prompt": the client's title from the first prompt (no agent title yet)

    @property
    def cells(self) -> tuple[str, str, str, str]:
        title = f"{self.title} (from the first prompt)" if self.title_source == "prompt" else self.title
        return self.session_id, title, self.updated, self.mark


def _title_of(session: Any, listed_title: str) -> tuple[str, str]:
    """(title, source) of a row of a session open here: the agent's (live, else listed), else the prompt's."""
    if session.title:
        return str(session.title), "agent"
    if listed_title:
        return listed_title, "agent"
    if getattr(session.state, "title_source", None) == "prompt" and session.display_title:
        return str(session.display_title), "prompt"
    return "", "agent"


class SessionTable:
    """One row per session; ``show()`` displays it and follows the sessions open here."""

    def __init__(self, rows: Sequence[Row], open_here: Mapping[str, Any] | None = None, *,
                 can_delete: bool = False) -> None:
        self._lock = threading.Lock()
        self.rows: tuple[Row, ...] = tuple(rows)
        self._open = dict(open_here or {})
        self.can_delete = can_delete
        self._unobserve: list[Any] = []
        self.live = LiveDisplay(self._bundle)

    @classmethod
    def build(cls, listed: list[dict[str, Any]], open_here: dict[str, Any], current_id: str | None, *,
              can_delete: bool = False) -> SessionTable:
        rows = []
        for info in listed:
            session_id = str(info.get("sessionId", ""))
            mark = "current" if session_id == current_id else "open" if session_id in open_here else ""
            title, source = str(info.get("title") or ""), "agent"
            if session_id in open_here:
                title, source = _title_of(open_here[session_id], title)
            rows.append(Row(session_id, title, str(info.get("updatedAt") or ""), mark, source))
        return cls(rows, {k: v for k, v in open_here.items() if any(r.session_id == k for r in rows)},
                   can_delete=can_delete)

    def show(self) -> None:
        """Display the table (kernel thread) and follow the open sessions it lists."""
        self.live.show()
        for session_id, session in self._open.items():
            self._unobserve.append(session.state.observe(
                lambda event, sid=session_id, s=session: self._on_event(sid, s, event)))

    def _on_event(self, session_id: str, session: Any, event: Any) -> None:
        if event.kind not in ("info", "status"):
            return
        closed = getattr(session, "closed", False) or getattr(session.agent, "status", "") in ("closed", "exited")
        with self._lock:
            rows = []
            for row in self.rows:
                if row.session_id == session_id:
                    title, source = _title_of(session, row.title if row.title_source == "agent" else "")
                    row = replace(row, title=title, title_source=source, updated=session.updated_at or row.updated,
                                  mark="closed" if closed else row.mark)
                rows.append(row)
            self.rows = tuple(rows)
        self.live.refresh()

    def close(self) -> None:
        """Stop following; the output keeps the last rows, as static text."""
        for stop in self._unobserve:
            stop()
        self.live.finalize()

    # --- the forms ---------------------------------------------------------------
    def _bundle(self, _final: bool, _reason: str) -> Bundle:
        return Bundle({"text/html": self._repr_html_(), "text/markdown": self._repr_markdown_(),
                       "text/plain": repr(self)})

    def _hint(self) -> str:
        return DELETE_HINT if self.can_delete and self.rows else ""

    def __repr__(self) -> str:
        rows = [row.cells for row in self.rows]
        if not rows:
            return "No sessions."
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, [*widths, 0], strict=True)).rstrip()
                 for row in rows]
        return "\n".join([*lines, self._hint()] if self._hint() else lines)

    @staticmethod
    def _title_html(row: Row) -> str:
        if row.title_source == "prompt":
            return f'<i data-title-source="prompt" title="{escape(PROMPT_TITLE_TIP)}">{escape(row.title)}</i>'
        return escape(row.title)

    def _repr_html_(self) -> str:
        rows = self.rows
        if not rows:
            return "<i>No sessions.</i>"
        body = "".join(f"<tr><td>{escape(r.session_id)}</td><td>{self._title_html(r)}</td><td>{escape(r.updated)}</td>"
                       f"<td>{escape(r.mark)}</td></tr>" for r in rows)
        head = "<tr>" + "".join(f"<th>{h}</th>" for h in HEADINGS) + "</tr>"
        hint = f'<div style="color:{MUTED};font-size:0.9em">{escape(self._hint())}</div>' if self._hint() else ""
        return f'<table class="acpnb-sessions">{head}{body}</table>{hint}'

    def _repr_markdown_(self) -> str:
        rows = self.rows
        if not rows:
            return "*No sessions.*"
        lines = ["| session | title | updated | |", "|---|---|---|---|"]
        for row in rows:
            title = f"*{md_escape(row.title)}* (from the first prompt)" if row.title_source == "prompt" \
                else md_escape(row.title)
            cells = (md_escape(row.session_id), title, md_escape(row.updated), md_escape(row.mark))
            lines.append("| " + " | ".join(cells) + " |")
        if self._hint():
            lines += ["", f"*{md_escape(self._hint())}*"]
        return "\n".join(lines)
