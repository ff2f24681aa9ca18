"""``%acp resume --list``: the sessions a kernel can resume, as one table (agent, title, when, where, model).

Rows come from the local session store (every notebook and directory), the notebook's saved
outputs and this kernel, one per session, newest first. The table is one output with HTML,
Markdown and plain text, so it reads the same saved, exported or in a terminal. Kernel thread.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from .records import SessionRecord, latest_records
from .store import StoredSession

__all__ = ["ResumableRow", "resumable_rows", "resumable_table"]

SHOWN_ROWS = 30
COLUMNS = ("Session", "Agent", "Title", "When", "Where", "Model", "State")


@dataclass(frozen=True)
class ResumableRow:
    record: SessionRecord
    where: str
    gone: bool = False

    def cells(self) -> tuple[str, ...]:
        record = self.record
        state = "gone from the agent" if self.gone else ("closed" if record.closed else "")
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.at)) if record.at else ""
        return (record.session_id, record.alias, record.title or "", when, self.where, record.model or "", state)


def resumable_rows(stored: Sequence[StoredSession], saved: Sequence[SessionRecord], known: Sequence[SessionRecord],
                   notebook: Path | None) -> list[ResumableRow]:
    """One row per session, newest first; ``notebook`` is where ``saved`` came from."""
    places = {row.record.session_id: row.notebook or row.workdir for row in stored}
    gone = {row.record.session_id for row in stored if row.gone}
    here = str(notebook) if notebook is not None else "this kernel"
    records = latest_records([*saved, *(row.record for row in stored), *known])
    rows = [ResumableRow(r, places.get(sid, here), sid in gone) for sid, r in records.items()]
    return sorted(rows, key=lambda row: -row.record.at)


def resumable_table(rows: Sequence[ResumableRow]) -> Mapping[str, Any]:
    """The mime bundle of the table (at most SHOWN_ROWS rows, and how many more there are)."""
    shown = [row.cells() for row in rows[:SHOWN_ROWS]]
    more = f"{len(rows) - SHOWN_ROWS} older sessions not shown. " if len(rows) > SHOWN_ROWS else ""
    tail = f"{more}Resume one with %acp resume ID (an id prefix will do)."
    if not rows:
        tail = "No session is recorded yet: sessions are recorded as they open (%acp start demo)."
    widths = [max([len(c)] + [len(r[i]) for r in shown]) for i, c in enumerate(COLUMNS)]
    plain = "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip()
                      for line in (COLUMNS, *shown)) + f"\n{tail}"

    def md(cell: str) -> str:
        return cell.replace("|", "\\|")

    markdown = "\n".join(["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS),
                          *("| " + " | ".join(md(c) for c in line) + " |" for line in shown)]) + f"\n\n{tail}"
    head = "".join(f"<th style='text-align:left'>{c}</th>" for c in COLUMNS)
    body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{escape(c)}</td>" for c in line) + "</tr>"
                   for line in shown)
    html = (f'<div class="acpnb-resumable"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
            f"<p>{escape(tail)}</p></div>")
    return {"text/html": html, "text/markdown": markdown, "text/plain": plain}
