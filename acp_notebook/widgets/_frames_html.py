"""The protocol inspector's renderings of analyzed frames: an HTML table with foldable rows, Markdown and plain text.

Pure functions of ``FrameRow``s (``acp_notebook.frames``): no widgets and no agent, so the
same table serves the live inspector, the saved notebook and a recording opened from a
file. Styles are inline because saved notebooks are shown by renderers that drop
``<style>`` blocks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from ..frames import CapabilityUse, FrameRow
from ._html import BORDER, FG, MONO, MUTED, PANEL_BG, md_escape, seconds

__all__ = ["capabilities_html", "frames_markdown", "frames_text", "json_tree_html", "row_html", "table_html"]

SEND_COLOR = "#1565c0"  # client -> agent
RECV_COLOR = "#2e7d32"  # agent -> client
ERROR_COLOR = "#c62828"
WARN_COLOR = "#b26a00"
ERROR_BG = "rgba(198, 40, 40, 0.08)"
ARROWS = {"send": "\u2192", "recv": "\u2190", "mcp-in": "\u21e2", "mcp-out": "\u21e0"}
# Who talks to whom, per direction: ACP between client and agent, MCP between the agent and the kernel tools.
DIRECTIONS = {"send": "client \u2192 agent", "recv": "agent \u2192 client", "mcp-in": "MCP: agent \u2192 kernel",
              "mcp-out": "MCP: kernel \u2192 agent"}
MCP_COLOR = "#6a1b9a"
# Fixed widths that hold each label on one line ("← notification", "↪ #123 · 12.3 s"), which also
# never wrap (white-space:nowrap): header and rows are separate grids and must line up.
COLUMNS = "3.4em 7.2em 9.8em minmax(8em, 16em) 6.5em 9.8em minmax(8em, 1fr)"
NOWRAP = "white-space:nowrap"
# An opened row turns its marker down; without the stylesheet (GitHub) it stays a plain ▸.
MARKER_STYLE = ("<style>.acpnb-frame > summary .acpnb-marker{display:inline-block;transition:transform .1s}"
                ".acpnb-frame[open] > summary .acpnb-marker{transform:rotate(90deg)}</style>")
# ipywidgets' HTML widget sets a tall line height meant for one-line labels: set our own.
LINE = "line-height:1.45"
HEADERS = ("#", "time", "direction", "method / update", "session", "round trip", "summary")
# JupyterLab's editor colours (they follow the theme), with light-theme fallbacks.
JSON_COLORS = {
    "key": "var(--jp-mirror-editor-property-color, #05a)",
    "string": "var(--jp-mirror-editor-string-color, #a11)",
    "number": "var(--jp-mirror-editor-number-color, #080)",
    "literal": "var(--jp-mirror-editor-keyword-color, #708)",
}
MAX_STRING = 2000  # characters of one JSON string shown before it is cut


# --- JSON ---------------------------------------------------------------------------------------------
def _scalar(value: Any) -> str:
    if isinstance(value, str):
        text = value if len(value) <= MAX_STRING else value[:MAX_STRING] + f"\u2026 ({len(value) - MAX_STRING} more)"
        return f'<span style="color:{JSON_COLORS["string"]}">{escape(json.dumps(text, ensure_ascii=False))}</span>'
    if value is None or isinstance(value, bool):
        return f'<span style="color:{JSON_COLORS["literal"]}">{json.dumps(value)}</span>'
    if isinstance(value, (int, float)):
        return f'<span style="color:{JSON_COLORS["number"]}">{escape(json.dumps(value))}</span>'
    return escape(json.dumps(str(value)))


def _node(value: Any, key: str | None, depth: int, open_depth: int, last: bool) -> str:
    label = (f'<span style="color:{JSON_COLORS["key"]}">{escape(json.dumps(key, ensure_ascii=False))}</span>: '
             if key is not None else "")
    comma = "" if last else ","
    if not isinstance(value, (Mapping, list)) or not value:
        shown = ("{}" if isinstance(value, Mapping) else "[]") if isinstance(value, (Mapping, list)) else _scalar(value)
        return f"<div>{label}{shown}{comma}</div>"
    items = list(value.items()) if isinstance(value, Mapping) else list(enumerate(value))
    opener, closer = ("{", "}") if isinstance(value, Mapping) else ("[", "]")
    count = f"{len(items)} {'key' if isinstance(value, Mapping) else 'item'}{'s' if len(items) != 1 else ''}"
    children = "".join(_node(v, k if isinstance(value, Mapping) else None, depth + 1, open_depth, i == len(items) - 1)
                       for i, (k, v) in enumerate(items))
    opened = " open" if depth < open_depth else ""
    return (f'<details{opened} style="margin:0"><summary style="cursor:pointer;list-style-position:outside">'
            f'{label}{opener}<span style="color:{MUTED};font-size:0.9em"> {count}</span></summary>'
            f'<div style="padding-left:1.4em;border-left:1px dotted {BORDER}">{children}</div>'
            f"<div>{closer}{comma}</div></details>")


def json_tree_html(value: Any, *, open_depth: int = 4) -> str:
    """Highlighted JSON whose objects and arrays fold (open down to ``open_depth`` levels)."""
    return (f'<div class="acpnb-json" style="font-family:{MONO};font-size:1em;line-height:1.45;color:{FG};'
            f'padding:4px 8px;border:1px solid {BORDER};border-radius:4px;max-height:28em;overflow:auto;'
            f'white-space:pre-wrap;word-break:break-word">{_node(value, None, 0, open_depth, True)}</div>')


# --- one row -------------------------------------------------------------------------------------------
def short_session(session_id: str) -> str:
    return session_id if len(session_id) <= 12 else "\u2026" + session_id[-8:]


def _pair_text(row: FrameRow) -> str:
    if row.kind == "request":
        return f"\u21aa #{row.pair} \u00b7 {seconds(row.rtt or 0.0)}" if row.pair is not None else "waiting\u2026"
    if row.kind in ("result", "error") and row.pair is not None:
        return f"\u21a9 #{row.pair} \u00b7 {seconds(row.rtt or 0.0)}"
    return ""


def _badges(row: FrameRow) -> str:
    out = []
    if row.protocol == "mcp":
        out.append(("MCP", MCP_COLOR, "acpnb-mcp"))
    if row.violations:
        out.append(("schema \u2717", ERROR_COLOR, "acpnb-schema-error"))
    if row.unknown_fields:
        out.append(("unknown field", WARN_COLOR, "acpnb-schema-unknown"))
    if row.config is not None and not row.config.initial and not row.config.empty:
        out.append(("config changed", SEND_COLOR, "acpnb-config-changed"))
    return "".join(f'<span class="{cls}" style="display:inline-block;margin-right:6px;padding:0 6px;border-radius:8px;'
                   f'font-size:0.85em;color:#fff;background:{color}">{escape(text)}</span>' for text, color, cls in out)


def _title(tip: str) -> str:
    return f' title="{escape(tip, quote=True)}"' if tip else ""


def _summary_line(row: FrameRow) -> str:
    color = MCP_COLOR if row.protocol == "mcp" else SEND_COLOR if row.direction == "send" else RECV_COLOR
    kind_color = ERROR_COLOR if row.kind == "error" else color
    direction = DIRECTIONS.get(row.direction, row.direction)
    waiting = row.kind == "request" and row.pair is None
    cells = [
        (str(row.index), f"color:{MUTED};text-align:right;padding-right:0.6em;{NOWRAP}", ""),
        (row.clock, f"color:{MUTED};{NOWRAP}", ""),
        (f"{ARROWS[row.direction]} {row.kind_word}", f"color:{kind_color};font-weight:600;{NOWRAP}", direction),
        (row.label, "font-weight:600;overflow-wrap:anywhere", row.method if row.update else ""),
        (short_session(row.session_id), f"color:{MUTED};{NOWRAP}", row.session_id),
        (_pair_text(row), f"color:{WARN_COLOR if waiting else MUTED};{NOWRAP}", ""),
    ]
    html = "".join(f'<span style="{style}"{_title(tip)}>{escape(text)}</span>' for text, style, tip in cells)
    html = html.replace(">", '><span class="acpnb-marker">\u25b8</span> ', 1)  # in the first cell, before the index
    html += f'<span style="color:{FG};word-break:break-word">{_badges(row)}{escape(row.summary)}{_link_text(row)}</span>'
    return html


def _link_text(row: FrameRow) -> str:
    """An MCP tools/call (and its answer) and the agent's tool_call of it point at each other: ``↔ #12``."""
    if row.link is None:
        return ""
    what = "the agent's tool_call" if row.protocol == "mcp" else "the kernel's MCP call"
    return (f' <a class="acpnb-frame-link" href="#acpnb-frame-{row.link}" title="{what}" '
            f'style="color:{MCP_COLOR};text-decoration:none">\u2194 #{row.link}</a>')


def _details(row: FrameRow, *, json_open_depth: int) -> str:
    url = row.explanation.url
    page = url.split("/protocol/", 1)[-1] if "/protocol/" in url else "MCP " + url.rstrip("/").rsplit("/", 2)[-1]
    parts = [f'<div class="acpnb-explain">{escape(row.explanation.text)} '
             f'<a href="{escape(row.explanation.url, quote=True)}" target="_blank" rel="noopener" '
             f'style="color:{SEND_COLOR}">spec: {escape(page)} \u2197</a></div>']
    if row.servers:
        items = "".join(f"<li>{escape(line)}</li>" for line in row.servers)
        parts.append(f'<div class="acpnb-mcp-servers">MCP servers offered to the session:'
                     f'<ul style="margin:2px 0">{items}</ul></div>')
    if row.link is not None:
        which = "the agent's own tool_call of this call" if row.protocol == "mcp" else "the MCP tools/call the kernel saw"
        parts.append(f'<div class="acpnb-link">Linked: <a href="#acpnb-frame-{row.link}" style="color:{MCP_COLOR}">'
                     f"#{row.link}</a>, {which}</div>")
    if row.pair is not None:
        verb = "answered by" if row.kind == "request" else "answers"
        parts.append(f'<div class="acpnb-pair">{verb} #{row.pair} after {seconds(row.rtt or 0.0)}</div>')
    if row.config is not None:
        title = "the session's first settings" if row.config.initial else "compared with the previous settings"
        items = "".join(f"<li>{escape(line)}</li>" for line in row.config.lines())
        parts.append(f'<div class="acpnb-config-diff">Config options, {title}:'
                     f'<ul style="margin:2px 0">{items}</ul></div>')
    if row.info is not None:
        meta = json.dumps(row.info.get("_meta") or {}, ensure_ascii=False)
        parts.append(f'<div class="acpnb-info">Session info after this update (omitted fields unchanged, null '
                     f'clears, _meta merged): title={escape(repr(row.info.get("title")))}, updatedAt='
                     f'{escape(repr(row.info.get("updatedAt")))}, _meta=<code style="font-size:1em">{escape(meta)}'
                     "</code></div>")
    for issue in row.issues or ():
        color = ERROR_COLOR if issue.level == "violation" else WARN_COLOR
        word = {"violation": "breaks the schema", "unstable": "unstable"}.get(issue.level, "unknown field")
        where = escape(issue.path or "(frame)")
        parts.append(f'<div class="acpnb-issue acpnb-issue-{issue.level}" style="color:{color}">\u26a0 {word} at '
                     f"<code style='font-size:1em'>{where}</code>: {escape(issue.message)}</div>")
    if row.note:
        parts.append(f'<div style="color:{MUTED}">note: {escape(row.note)}</div>')
    parts.append(json_tree_html(row.msg, open_depth=json_open_depth))
    return "".join(parts)


def row_html(row: FrameRow, *, opened: bool = False, json_open_depth: int = 4) -> str:
    """One frame: a summary line (a table row) that unfolds into its explanation, changes, issues and JSON. Made
    once per state of the row (its answer, link and schema check can come later): a table is redrawn whole."""
    key = (opened, json_open_depth, row.pair, row.link, row.checked, row.summary)
    if row.rendered is not None and row.rendered[0] == key:
        return row.rendered[1]
    html = _row_html(row, opened=opened, json_open_depth=json_open_depth)
    row.rendered = (key, html)
    return html


def _row_html(row: FrameRow, *, opened: bool, json_open_depth: int) -> str:
    background = ERROR_BG if row.kind == "error" else "transparent"
    edge = ERROR_COLOR if row.violations else (WARN_COLOR if row.unknown_fields else "transparent")
    classes = " ".join(["acpnb-frame", f"acpnb-{row.direction}", f"acpnb-{row.kind}",
                        "acpnb-invalid" if row.violations else ""]).strip()
    return (f'<details class="{classes}" id="acpnb-frame-{row.index}" data-index="{row.index}"{" open" if opened else ""} '
            f'style="border-top:1px solid {BORDER};border-left:3px solid {edge};background:{background}">'
            f'<summary style="display:grid;grid-template-columns:{COLUMNS};gap:0 8px;cursor:pointer;'
            f'padding:2px 4px;align-items:baseline">{_summary_line(row)}</summary>'
            f'<div style="padding:4px 8px 8px 3.8em;display:flex;flex-direction:column;gap:4px">'
            f"{_details(row, json_open_depth=json_open_depth)}</div></details>")


# --- the table -------------------------------------------------------------------------------------------
def header_html() -> str:
    cells = "".join(f'<span style="{NOWRAP}">{escape(h)}</span>' for h in HEADERS)
    return (f'<div class="acpnb-frames-head" style="display:grid;grid-template-columns:{COLUMNS};gap:0 8px;'
            f"padding:3px 4px 3px 7px;font-weight:600;color:{MUTED};background:{PANEL_BG};"
            f'border-bottom:1px solid {BORDER}">{cells}</div>')


def legend_html(rows: Sequence[FrameRow], total: int | None = None) -> str:
    """The counts line: how many frames, and how many need a look (errors, unanswered, schema problems)."""
    parts = [f"{len(rows)} frames" if total is None or total == len(rows) else f"{len(rows)} of {total} frames"]
    flagged = (
        (sum(r.kind == "error" for r in rows), "errors", ERROR_COLOR),
        (sum(bool(r.violations) for r in rows), "breaking the schema", ERROR_COLOR),
        (sum(bool(r.unknown_fields) for r in rows), "with unknown fields", WARN_COLOR),
        (sum(r.kind == "request" and r.pair is None for r in rows), "unanswered", WARN_COLOR),
    )
    parts += [f'<span style="color:{color}">{count} {word}</span>' for count, word, color in flagged if count]
    dot = " \u00b7 "
    return (f'<span class="acpnb-frames-count">{dot.join(parts)}</span>'
            f'<span style="color:{MUTED}">{dot}<span style="color:{SEND_COLOR}">\u2192 client to agent</span>, '
            f'<span style="color:{RECV_COLOR}">\u2190 agent to client</span>; click a row for what it means and '
            "its JSON</span>")


def table_html(rows: Sequence[FrameRow], *, total: int | None = None, open_rows: bool = False,
               max_height: str | None = None, json_open_depth: int = 4) -> str:
    """The frame table: a counts line, column headers and one foldable row per frame (oldest first)."""
    body = "".join(row_html(r, opened=open_rows, json_open_depth=json_open_depth) for r in rows)
    if not rows:
        body = f'<div style="color:{MUTED};padding:4px 8px">No frames match.</div>'
    scroll = f"max-height:{max_height};overflow-y:auto;" if max_height else ""
    return (f'{MARKER_STYLE}<div class="acpnb-frames" style="text-align:left;{LINE};color:{FG}">'
            f'<div style="margin-bottom:3px">{legend_html(rows, total)}</div>'
            f'<div style="border:1px solid {BORDER};border-radius:4px">{header_html()}'
            f'<div class="acpnb-frames-body" style="{scroll}font-family:{MONO};font-size:0.92em">{body}</div>'
            "</div></div>")


CAPABILITY_COLORS = {"used": RECV_COLOR, "used but not offered": ERROR_COLOR, "offered, not used": MUTED}


def capabilities_html(uses: Sequence[CapabilityUse], *, opened: bool = False) -> str:
    """Each side's capabilities, offered (in initialize) against used (by later frames); foldable."""
    if all(u.offered is None for u in uses):
        return ""
    shown = [u for u in uses if u.offered or u.used_by]
    absent = [f"{u.side}: {u.name}" for u in uses if not (u.offered or u.used_by)]
    rows = []
    for use in shown:
        frames = ", ".join(f"#{i}" for i in use.used_by[:8]) + (" \u2026" if len(use.used_by) > 8 else "")
        color = CAPABILITY_COLORS.get(use.status, MUTED)
        rows.append(f"<tr><td>{escape(use.side)}</td><td><code>{escape(use.name)}</code></td>"
                    f'<td style="color:{color}">{escape(use.status)}</td><td style="color:{MUTED}">{frames}</td></tr>')
    misused = sum(u.status == "used but not offered" for u in uses)
    head = f"Capabilities: {sum(bool(u.used_by) for u in shown)} used of {sum(bool(u.offered) for u in uses)} offered"
    if misused:
        head += f' \u00b7 <span style="color:{ERROR_COLOR}">{misused} used but not offered</span>'
    missing = f'<div style="color:{MUTED}">not offered: {escape(", ".join(absent))}</div>' if absent else ""
    return (f'<details class="acpnb-capabilities"{" open" if opened else ""} style="margin-top:6px;{LINE}">'
            f'<summary style="cursor:pointer">{head}</summary>'
            f'<table style="border-collapse:collapse;margin:4px 0 0 1em;font-size:0.9em">'
            f'<tr style="color:{MUTED};text-align:left"><th>offered by</th><th>capability</th><th>status</th>'
            f"<th>frames</th></tr>{''.join(rows)}</table>{missing}</details>")


# --- Markdown and plain text (saved notebooks without the widgets) ------------------------------------
def _cell(text: str) -> str:
    return md_escape(text).replace("\n", " ")


def frames_markdown(rows: Sequence[FrameRow], *, title: str = "") -> str:
    """A Markdown table of the frames (what GitHub and untrusted notebooks show)."""
    lines = [f"**{md_escape(title)}**\n" if title else "",
             "| # | time | direction | method / update | session | round trip | summary |",
             "|--:|---|---|---|---|---|---|"]
    for r in rows:
        flags = " \u2717 schema" if r.violations else ""
        lines.append(f"| {r.index} | {r.clock} | {ARROWS[r.direction]} {r.kind_word} | {_cell(r.label)} | "
                     f"{_cell(short_session(r.session_id))} | {_pair_text(r)} | {_cell(r.summary)}{flags} |")
    return "\n".join(line for line in lines if line)


def frames_text(rows: Sequence[FrameRow], *, title: str = "") -> str:
    """A fixed-column plain-text table of the frames."""
    lines = [title] if title else []
    lines.append(f"{'#':>4}  {'time':<12}  {'direction':<16}  {'method / update':<28}  {'session':<10}  "
                 f"{'round trip':<14}  summary")
    for r in rows:
        flags = "  [breaks the schema]" if r.violations else ""
        lines.append(f"{r.index:>4}  {r.clock:<12}  {ARROWS[r.direction] + ' ' + r.kind_word:<16}  {r.label:<28}  "
                     f"{short_session(r.session_id):<10}  {_pair_text(r):<14}  {r.summary}{flags}".rstrip())
    return "\n".join(lines)
