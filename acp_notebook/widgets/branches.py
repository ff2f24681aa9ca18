"""How branches read: a turn's branch line (HTML and text), the ``%acp branches`` table, and a branch sweep's
replies side by side. Static outputs only (no widget): a saved notebook shows them as they were last published.

``branch_line(state)`` is what the turn view's header and the session panel should show of a turn's or session's
branch (``Turn.branch_state``, ``Session.branch``): the turn view (chat.py) shows it in its header and its saved
forms, and publishes its final form again when the conversation's current branch changes, so cells on another
branch say so until they are run again. ``with_branch`` puts the turn's branch on its output's metadata, under
``metadata["acp_notebook"]["branch"]``.

Threads: pure functions of plain values and of a turn's branch (read under the conversation's lock), safe from
any thread.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from .._visible import visible
from ._html import BORDER, MUTED, md_escape

__all__ = ["branch_line", "branch_record", "branches_forms", "sweep_forms", "with_branch"]

METADATA_KEY = "acp_notebook"
OTHER_BRANCH = "#b26a00"


def branch_line(state: Any) -> tuple[str, str]:
    """(text, HTML) of where a turn stands (a ``branching.BranchState``); ("", "") when there is nothing to say
    (one branch, no handover)."""
    if state is None or (state.branches < 2 and state.handover is None):
        return "", ""
    made = f" from {state.parent} after {state.fork_point} {'turn' if state.fork_point == 1 else 'turns'}, " \
           f"{state.how}" if state.parent is not None else ""
    text = f"⎇ branch {state.name}{made}"
    if state.handover:
        text += f"; {state.handover}"
    if not state.on_current:
        text += f". Not the current branch ({state.current}): this reply is from another conversation; run the " \
                f"cell again to answer on {state.current}"
    color = MUTED if state.on_current else OTHER_BRANCH
    weight = "" if state.on_current else "font-weight:600;"
    html = (f"<div class='acpnb-branch' data-branch='{escape(visible(state.name), quote=True)}' "
            f"data-current='{str(state.on_current).lower()}' style='color:{color};{weight}font-size:0.9em;"
            f"padding:2px 0'>{escape(visible(text))}</div>")
    return visible(text), html


def branch_record(turn: Any) -> dict[str, Any] | None:
    """What a turn's output metadata says of its branch (``metadata["acp_notebook"]["branch"]``: saved notebooks
    and ``%acp resume`` read it), or None outside a branched conversation."""
    state = turn.branch_state
    branch = turn.branch
    if state is None or branch is None:
        return None
    turns, keys = list(branch.turns), list(branch.keys)
    cell = next((key for held, key in zip(turns, keys) if held is turn), None)
    return {"name": state.name, "current": state.current, "on_current": state.on_current, "how": state.how,
            "parent": state.parent, "fork_point": state.fork_point, "cell": cell, "session_id": branch.session.id}


def with_branch(metadata: Mapping[str, Any], turn: Any) -> dict[str, Any]:
    """``metadata`` with the turn's branch record added under ``acp_notebook`` (unchanged outside a conversation)."""
    record = branch_record(turn)
    merged = dict(metadata)
    if record is not None:
        merged[METADATA_KEY] = {**dict(merged.get(METADATA_KEY) or {}), "branch": record}
    return merged


def _when(timestamp: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(timestamp))


def _branch_rows(branches: Sequence[Any], current: str, saved: Sequence[Any] = ()) -> list[list[str]]:
    rows = []
    for branch in branches:
        where, prompt = branch.first_own()
        origin = f"{branch.parent} after {branch.fork_at}" if branch.parent is not None else "-"
        rows.append(["*" if branch.name == current else "", visible(branch.name), origin, visible(where or "-"),
                     visible(prompt), visible(branch.session.title or ""), str(branch.turn_count),
                     branch.how, _when(branch.created_at)])
    for branch in saved:  # recorded by the saved notebook, its session not reopened yet (%acp checkout does)
        origin = f"{branch.parent} after {branch.fork_point}" if branch.parent is not None else "-"
        rows.append(["", visible(branch.name), origin, visible(branch.cell or "-"), visible(branch.prompt),
                     visible(branch.title or ""), str(branch.turns) if branch.turns else "-",
                     f"{branch.how}; saved, not reopened", _when(branch.at) if branch.at else "-"])
    return rows


BRANCH_HEADER = ["", "branch", "from", "cell", "prompt", "title", "turns", "how", "when"]


def branches_forms(branches: Sequence[Any], current: str, saved: Sequence[Any] = ()) -> dict[str, str]:
    """``%acp branches``: one row per branch (current marked *): where it came from, the cell that made it, its
    first prompt, its session's title, its turns, how it was made, when; then those a saved notebook recorded
    whose sessions are not reopened yet (``saved``: ``branching.SavedBranch``)."""
    rows = _branch_rows(branches, current, saved)
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(BRANCH_HEADER)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [BRANCH_HEADER, *rows]]
    head = "".join(f"<th>{escape(h)}</th>" for h in BRANCH_HEADER)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    markdown = "| " + " | ".join(BRANCH_HEADER) + " |\n|" + "---|" * len(BRANCH_HEADER) + "\n" + "\n".join(
        "| " + " | ".join(md_escape(c) for c in r) + " |" for r in rows)
    return {"text/plain": "\n".join(lines), "text/markdown": markdown,
            "text/html": f"<table class='acpnb-branches'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"}


def _measure(row: Mapping[str, Any]) -> str:
    parts = []
    if row.get("duration_s") is not None:
        parts.append(f"{row['duration_s']:.2f} s")
    if row.get("total_tokens") is not None:
        parts.append(f"{row['total_tokens']} tokens")
    if row.get("cost") is not None:
        parts.append(f"cost {row['cost']:.6g} {row.get('currency') or ''}".rstrip())
    scores = [f"{k.removeprefix('score_')} {v:g}" for k, v in row.items()
              if k.startswith("score_") and isinstance(v, (int, float))]
    return " · ".join(parts + scores)


def sweep_forms(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """A branch sweep's replies side by side (HTML) or one after another (text, Markdown), each with its model,
    time, tokens, cost and scores; an error row says what went wrong."""
    columns, texts, marks = [], [], []
    for row in rows:
        model = visible(str(row.get("model")))
        body = visible(str(row.get("text") or "")) if row.get("status") == "ok" else \
            f"{row.get('status')}: {visible(str(row.get('error') or ''))}"
        measure = _measure(row)
        columns.append(f"<div style='flex:1;min-width:14em;border:1px solid {BORDER};border-radius:4px;padding:6px'>"
                       f"<div style='font-weight:600'>{escape(model)}</div>"
                       f"<div style='color:{MUTED};font-size:0.9em'>{escape(measure)}</div>"
                       f"<div style='white-space:pre-wrap;margin-top:4px'>{escape(body)}</div></div>")
        texts.append(f"== {model} ({measure})\n{body}")
        marks.append(f"**{md_escape(model)}** ({md_escape(measure)})\n\n{md_escape(body)}")
    return {"text/plain": "\n\n".join(texts), "text/markdown": "\n\n".join(marks),
            "text/html": f"<div class='acpnb-branch-sweep' style='display:flex;gap:8px;flex-wrap:wrap'>"
                         f"{''.join(columns)}</div>"}
