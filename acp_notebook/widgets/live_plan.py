"""PlanRows: the live plan of a turn, sent to the browser as a delta of the rows that changed.

ACP sends an agent's whole plan with each update, and an agent may update it a hundred times a second (a
progress note on the row it works on). The frontend keeps the rows (``rows``: ``[status, text]`` each, in the
model, so every view of it and widget state saved with a notebook show them all) and draws them itself; the
kernel sends, at most once per ``flush``, only the rows that changed: ``[index, status]`` when only the status
did, ``[index, status, start, end, text]`` when the text did too (the characters between its common head and tail,
offsets in UTF-16 code units as JavaScript counts them, ``parts.patch_op``), with the plan's length ``n``. So a row
completed costs its index and its status, and a progress note the few characters that changed.

As in ``parts.LiveParts``, each message names the version it applies to (``f``); a frontend holding another one
asks for all the rows (``{"sync": v}``), and a change of fewer than ``min_chars`` characters may wait up to
``max_age`` seconds for the next. ``value`` is the HTML the frontend shows (``plan_rows``), for the readers of the
view in Python; the saved form is ``_html.plan_html``. The rows' look is ``PLAN_CSS``, the widget's stylesheet,
sent once.

Threads: ``update`` and ``flush`` run under the turn view's lock (render thread, or the constructing thread once);
a frontend's sync request comes on the kernel's shell thread. What was last sent and its version are guarded by
``_lock``, held while a message is sent, so messages leave in version order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

import traitlets

from .._visible import visible
from ._deltas import VersionedCopy
from ._html import FG, MUTED, PLAN_MARKS
from .parts import patch_op

__all__ = ["PLAN_CSS", "PlanRows", "plan_entries", "plan_rows"]

# The rows carry only their status class and mark; the look is here (the saved form, plan_html, keeps inline styles).
PLAN_CSS = (
    ".acpnb-plan .acpnb-plan-row{line-height:1.5;padding:0 8px;color:" + FG + "}"
    ".acpnb-plan .acpnb-plan-row.acpnb-plan-completed{color:" + MUTED + ";text-decoration:line-through}"
    ".acpnb-plan .acpnb-plan-row.acpnb-plan-in_progress{font-weight:600}"
    ".acpnb-plan .acpnb-plan-mark{display:inline-block;width:1.4em}"
)
HEADING = f'<div style="color:{MUTED};font-size:0.85em;padding:2px 4px 0">Plan</div>'

_ESM = r"""
const MARKS = { completed: "\u2611", in_progress: "\u25d4", pending: "\u2610" };
function apply(model, msg) {
  if (msg.full) { model.set({ rows: msg.full, v: msg.v }); return; }
  if (msg.f !== model.get("v")) { model.send({ sync: model.get("v") }); return; }
  const rows = model.get("rows").slice(0, msg.n);
  for (const e of msg.e) {
    const old = rows[e[0]] || ["pending", ""];
    rows[e[0]] = [e[1], e.length > 2 ? old[1].slice(0, e[2]) + e[4] + old[1].slice(e[3]) : old[1]];
  }
  model.set({ rows, v: msg.f + 1 });
}
function initialize({ model }) {
  model.on("msg:custom", (msg) => apply(model, msg));
}
function render({ model, el }) {
  const box = document.createElement("div");
  box.className = "acpnb-plan";
  el.appendChild(box);
  const nodes = [], shown = [];
  const draw = () => {
    const rows = model.get("rows");
    if (rows.length && !box.firstChild) box.innerHTML = HEADING;
    while (nodes.length > rows.length) { nodes.pop().remove(); shown.pop(); }
    rows.forEach(([status, text], i) => {
      if (!nodes[i]) {
        const node = document.createElement("div"), mark = document.createElement("span");
        mark.className = "acpnb-plan-mark";
        node.append(mark, document.createTextNode(""));
        box.appendChild(node);
        nodes.push(node); shown.push(null);
      }
      if (shown[i] && shown[i][0] === status && shown[i][1] === text) return;
      const node = nodes[i];
      node.className = "acpnb-plan-row acpnb-plan-" + status;
      node.firstChild.textContent = MARKS[status] || MARKS.pending;
      node.lastChild.textContent = text;
      shown[i] = [status, text];
    });
    if (!rows.length) { box.replaceChildren(); }
  };
  model.on("change:rows", draw);
  draw();
  return () => model.off("change:rows", draw);
}
export default { initialize, render };
"""


def plan_entries(entries: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(status, text) of each entry, as the live plan shows it (the text made visible, see ``_visible``)."""
    return [(str(entry.get("status") or "pending"), visible(str(entry.get("content", "")))) for entry in entries
            if isinstance(entry, Mapping)]


def plan_rows(entries: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The live plan as HTML parts: a heading, then one row per entry (what the frontend of ``PlanRows`` draws)."""
    rows = plan_entries(entries)
    if not rows:
        return []
    parts = [("p", HEADING)]
    for index, (status, text) in enumerate(rows):
        mark = PLAN_MARKS.get(status, PLAN_MARKS["pending"])
        parts.append((f"p{index}", f'<div class="acpnb-plan-row acpnb-plan-{escape(status)}">'
                                   f'<span class="acpnb-plan-mark">{mark}</span>{escape(text)}</div>'))
    return parts


class PlanRows(VersionedCopy):
    """The live plan (see the module docstring). ``value`` is the HTML it shows now."""

    _esm = _ESM.replace("= HEADING;", f"= {json.dumps(HEADING)};", 1)
    _css = PLAN_CSS
    _copy_trait = "rows"
    rows = traitlets.List().tag(sync=True)  # the frontend's copy; sent whole only at open and on request

    def __init__(self, **kwargs: Any) -> None:
        self._wanted: list[tuple[str, str]] = []
        self._sent: list[tuple[str, str]] = []
        self._flushed_at = 0.0
        self.sent_bytes = 0  # the statuses and text of the changes sent (a measure for the view's republish budget)
        super().__init__(**kwargs)

    @property
    def value(self) -> str:
        return "".join(html for _key, html in plan_rows([{"status": s, "content": t} for s, t in self._wanted]))

    def update(self, entries: Sequence[Mapping[str, Any]]) -> None:
        """The plan as it stands; sent by the next ``flush``."""
        self._wanted = plan_entries(entries)

    def changes(self) -> list[list[Any]]:
        """The rows that differ from what was sent (see the module docstring for their form)."""
        found: list[list[Any]] = []
        for index, (status, text) in enumerate(self._wanted):
            old = self._sent[index] if index < len(self._sent) else None
            if old == (status, text):
                continue
            if old is not None and old[1] == text:
                found.append([index, status])
            else:
                found.append([index, status, *patch_op("", old[1] if old else "", text)[2:]])
        return found

    def flush(self, min_chars: int = 0, max_age: float = 0.0) -> None:
        """Send the rows that changed since the last flush, as one message (nothing when none did); a change of
        fewer than ``min_chars`` characters waits until the last message is ``max_age`` seconds old."""
        with self._lock:
            found = self.changes()
            if not found and len(self._wanted) == len(self._sent):
                return
            size = sum(len(change[1]) + (len(change[4]) if len(change) > 2 else 0) + 8 for change in found)
            now = time.monotonic()
            if size < min_chars and now - self._flushed_at < max_age:
                return
            message = {"f": self._version, "n": len(self._wanted), "e": found}
            self._version += 1
            self._flushed_at = now
            self._sent = list(self._wanted)
            self.sent_bytes += size
            self.send(message)

    def _send_whole(self) -> None:
        """Under the lock: every row, for a frontend that asked."""
        self._version += 1
        self._sent = list(self._wanted)
        self.sent_bytes += sum(len(status) + len(text) for status, text in self._sent)
        self.send({"full": [list(row) for row in self._sent], "v": self._version})

    def _snapshot(self) -> list[list[Any]]:
        return [list(row) for row in self._sent]
