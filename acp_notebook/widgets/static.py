"""The saved forms of the views: HTML, Markdown and plain text of a session panel and of a turn.

Each view takes a snapshot of what it shows (under its own lock) and these functions turn
the snapshot into text: no widgets, no I/O, callable from any thread. What they produce is
what a reader sees with no kernel: JupyterLab after a restart, nbconvert's HTML and Markdown
exports, GitHub and nbviewer.

A turn's reply is held whole once, in the HTML form (what JupyterLab, GitHub, nbviewer and nbconvert's
HTML export show). Its Markdown and plain-text forms hold a reply up to ``REPLY_CLIP`` characters
whole, and a longer one's beginning and a line saying where the rest is (``CLIPPED_MARK`` tells
``acp-markdown``, nbconvert.py, to export that output's HTML instead): a saved turn weighs about its
text once, not three times, and so does its final update on the wire.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from .._visible import visible
from .cardstyle import inline_styles
from ._html import (
    BORDER,
    FG,
    MUTED,
    HeaderInfo,
    context_words,
    error_html,
    header_html,
    markdown_html,
    md_escape,
    muted_html,
    plan_html,
    usage_html,
)
from .notices import (
    compaction_html,
    compaction_markdown,
    compaction_text,
    events_html,
    events_markdown,
    events_text,
    notices_html,
    notices_markdown,
    notices_text,
)

__all__ = ["CLIPPED_MARK", "LIVE_WORDS", "REPLY_CLIP", "PanelSnapshot", "TurnSnapshot", "clipped_reply", "head_line",
           "panel_forms", "turn_forms"]

REPLY_CLIP = 4000  # characters of a reply its Markdown and plain-text forms hold (the HTML form holds it whole)
CLIPPED_MARK = "<!-- acp-notebook: reply clipped -->"

# What the saved form of a view says while the view is live: true when saved, and after.
LIVE_WORDS = "live in a running kernel"

BOX_STYLE = "width:100%;margin:4px 0;box-sizing:border-box"
READABLE = f"white-space:pre-wrap;color:{FG};line-height:1.5;font-size:0.95em"


def head_line(info: HeaderInfo, *, with_agent: bool) -> tuple[str, str]:
    """The header as one line: (plain, Markdown). ``title · [agent ·] model: X · status[ · extra]``."""
    rest = [info.agent if with_agent else "", f"model: {info.model}" if info.model else "", info.status,
            info.extra]
    tail = " · ".join(p for p in rest if p)
    if info.title_source == "prompt":  # the client's stand-in title, marked as the live header marks it
        title = f"{info.title} (from the first prompt)"
        title_md = f"**_{md_escape(info.title)}_** (from the first prompt)"
    else:
        title, title_md = info.title, f"**{md_escape(info.title)}**"
    plain = " · ".join(p for p in (title, tail) if p)
    markdown = " · ".join(p for p in (title_md, md_escape(tail)) if p)
    return plain, markdown


# --- the session panel -----------------------------------------------------------
@dataclass(frozen=True)
class PanelSnapshot:
    """What a session panel shows at one moment."""

    header: HeaderInfo
    settings: tuple[tuple[str, str], ...]  # (option name, value label), in the agent's order
    note: str = ""  # the proxy's binding, or why the panel is closed
    error: str = ""
    usage: Mapping[str, Any] | None = None  # the session's latest usage_update: the context meter
    notices: Sequence[Any] = ()  # the session's notices the panel shows (none while a turn runs: it shows its own)
    compaction: Any = None  # a compaction that began outside any turn (a state.Compaction), else None
    meter_compaction: Any = None  # the compaction the context meter follows, else None


def _settings_html(settings: Sequence[tuple[str, str]], closed: bool) -> str:
    if not settings:
        return ""
    # The controls' final values, drawn as disabled fields: they read as settings, not as text.
    look = "opacity:.7" if closed else ""
    cells = "".join(
        f'<span class="acpnb-setting" style="display:inline-flex;gap:6px;align-items:center;{look}">'
        f'<span style="color:{MUTED}">{escape(name)}</span>'
        f'<span class="acpnb-setting-value" style="padding:1px 8px;border:1px solid {BORDER};border-radius:3px">'
        f"{escape(value)}</span></span>"
        for name, value in settings
    )
    return f'<div class="acpnb-settings" style="display:flex;flex-wrap:wrap;gap:4px 18px;padding:6px 2px">{cells}</div>'


def panel_forms(snapshot: PanelSnapshot) -> dict[str, str]:
    """text/html, text/markdown and text/plain of a panel."""
    closed = snapshot.header.status == "closed"
    plain_head, md_head = head_line(snapshot.header, with_agent=True)
    settings = " · ".join(f"{name}: {value}" for name, value in snapshot.settings)
    tail = [snapshot.note, snapshot.error]
    context = context_words(snapshot.usage, snapshot.meter_compaction)
    compaction = snapshot.compaction
    html = (
        f'<div class="acpnb-panel acpnb-static" style="{BOX_STYLE}">{header_html(snapshot.header)}'
        f"{_settings_html(snapshot.settings, closed)}"
        + (muted_html(escape(snapshot.note), css_class="acpnb-note") if snapshot.note else "")
        + error_html(snapshot.error) + notices_html(snapshot.notices)
        + (compaction_html(compaction) if compaction is not None else "")
        + usage_html(snapshot.usage, compaction=snapshot.meter_compaction) + "</div>"
    )
    events = [notices_markdown(snapshot.notices), compaction_markdown(compaction) if compaction is not None else ""]
    markdown = "\n\n".join(p for p in (md_head, md_escape(settings), *(f"*{md_escape(t)}*" for t in tail if t),
                                        *events, md_escape(context)) if p)
    events = [notices_text(snapshot.notices), compaction_text(compaction) if compaction is not None else ""]
    plain = "\n".join(p for p in (plain_head, settings, *tail, *events, context) if p)
    return {"text/html": html, "text/markdown": markdown, "text/plain": plain}


# --- a turn ----------------------------------------------------------------------
@dataclass(frozen=True)
class ToolSnapshot:
    title: str
    kind: str
    status: str
    html: str  # the tool call as the live view draws it (status, output, diff, decisions)
    name: str = ""  # the tool's programmatic name where it says more than the title (notices.tool_name_text)


@dataclass(frozen=True)
class TurnSnapshot:
    """What a turn view shows at one moment."""

    header: HeaderInfo
    text: str = ""
    thoughts: str = ""
    plan: Sequence[Mapping[str, Any]] = ()
    tools: Sequence[ToolSnapshot] = ()
    kernel: Sequence[tuple[str, str, str]] = ()  # what the agent did in the kernel: (text, Markdown, HTML) per call
    notes: Sequence[str] = ()  # permission decisions that belong to no tool call
    pending: Sequence[tuple[str, str]] = ()  # permission requests still waiting: (text, the prompt's HTML)
    forms: Sequence[tuple[str, str]] = ()  # the agent's forms, what was asked and answered: (text, HTML)
    error: str = ""
    usage: Mapping[str, Any] | None = None
    stop_reason: str | None = None
    attachments: Sequence[str] = ()  # what the prompt carried (attach=, --attach): one label each
    notices: Sequence[Any] = ()  # the agent's notices while the turn ran (state.Notice)
    compactions: Sequence[Any] = ()  # context compactions that began while it ran (copies of state.Compaction)
    branch: tuple[str, str] = ("", "")  # (text, HTML) of the turn's branch line (widgets/branches.py), under the header


SENT_SHOWN = 160  # characters of an attachment's or a {name}'s text shown in the cell


def sent_label(label: str, text: str) -> str:
    """What the prompt carried as one line: its label, then the start of the text sent (visible, on one line)."""
    if not text:
        return label
    flat = " ".join(visible(text).split())
    shown = flat if len(flat) <= SENT_SHOWN else flat[:SENT_SHOWN] + f"... ({len(text):,} characters)"
    return f"{label}: “{shown}”"


def attached_text(labels: Sequence[str]) -> str:
    return "Attached: " + " \u00b7 ".join(labels) if labels else ""


def attached_html(labels: Sequence[str]) -> str:
    """The line under a turn's header naming what its prompt carried (name, kind, size, what was cut)."""
    return muted_html(escape(attached_text(labels)), css_class="acpnb-attached") if labels else ""


def _thoughts_html(thoughts: str) -> str:
    if not thoughts:
        return ""
    lines = len(thoughts.strip().splitlines())
    return (
        f'<details class="acpnb-thoughts-static" style="margin:4px 0"><summary style="color:{MUTED};cursor:pointer">'
        f"Thoughts ({lines} line{'s' if lines != 1 else ''})</summary>"
        f'<div class="acpnb-thoughts" style="{READABLE};padding:4px 10px;border-left:3px solid {BORDER}">'
        f"{escape(thoughts)}</div></details>"
    )


def clipped_reply(text: str, *, markdown: bool) -> str:
    """A reply for the Markdown or plain-text form: whole up to ``REPLY_CLIP`` characters, else its beginning (cut at
    a line break or a space) and where the rest is."""
    if len(text) <= REPLY_CLIP:
        return text
    cut = text.rfind("\n", 0, REPLY_CLIP)
    if cut < REPLY_CLIP // 2:
        cut = text.rfind(" ", 0, REPLY_CLIP)
    head = text[:cut if cut > REPLY_CLIP // 2 else REPLY_CLIP]
    if markdown and sum(line.lstrip().startswith(("```", "~~~")) for line in head.splitlines()) % 2:
        head += "\n```"  # the beginning ends inside a fenced block: close it, so the note reads as text
    note = f"[... {len(text) - len(head):,} more characters of the reply: this output's HTML form holds it whole]"
    return f"{head}\n\n*{md_escape(note)}*\n{CLIPPED_MARK}" if markdown else f"{head}\n{note}"


def turn_forms(snapshot: TurnSnapshot) -> dict[str, str]:
    """text/html, text/markdown and text/plain of a turn (the reply whole in the HTML only: see the module
    docstring)."""
    plain_head, md_head = head_line(snapshot.header, with_agent=False)
    # The cards' look is classes live (cardstyle.py); a saved form has no stylesheet, so it is written inline.
    tools = inline_styles("".join(t.html for t in snapshot.tools) + "".join(html for _, _, html in snapshot.kernel))
    notes = "".join(muted_html(escape(n)) for n in snapshot.notes) + "".join(html for _, html in snapshot.pending)
    notes += "".join(html for _, html in snapshot.forms)
    events = events_html(snapshot.notices, snapshot.compactions)
    compaction = snapshot.compactions[-1] if snapshot.compactions else None
    # MathJax leaves the reply alone (as the live view does): a reopened notebook does not scan every reply for
    # math, which cost JupyterLab about half a second for 2 MB of replies, nor make "$5 and $10" a formula.
    reply = (f'<div class="acpnb-reply" style="padding:0 4px"><div class="mathjax_ignore tex2jax_ignore">'
             f"{markdown_html(visible(snapshot.text))}</div></div>" if snapshot.text else "")
    html = (
        f'<div class="acpnb-turn acpnb-static" style="{BOX_STYLE}">{header_html(snapshot.header)}{snapshot.branch[1]}'
        f"{attached_html(snapshot.attachments)}{_thoughts_html(snapshot.thoughts)}{plan_html(snapshot.plan)}{tools}{events}{notes}"
        f"{reply}{error_html(snapshot.error)}"
        f"{usage_html(snapshot.usage, stop_reason=snapshot.stop_reason, compaction=compaction)}</div>"
    )
    calls = [f"- {t.title}{f' [{t.name}]' if t.name else ''} ({t.kind}, {t.status})" for t in snapshot.tools]
    notes_text = [*snapshot.notes, *(text for text, _ in snapshot.pending), *(text for text, _ in snapshot.forms)]
    tail = [snapshot.error] if snapshot.error else []
    context = context_words(snapshot.usage, compaction)
    attached = attached_text(snapshot.attachments)
    branch = snapshot.branch[0]
    markdown = "\n\n".join(p for p in (md_head, branch and f"*{md_escape(branch)}*", attached and f"*{md_escape(attached)}*",
                                        "\n".join(md_escape(c) for c in calls),
                                        *(md for _, md, _ in snapshot.kernel),
                                        events_markdown(snapshot.notices, snapshot.compactions),
                                        "\n".join(f"*{md_escape(n)}*" for n in notes_text),
                                        clipped_reply(snapshot.text, markdown=True),
                                        *(f"*{md_escape(t)}*" for t in tail), md_escape(context)) if p)
    plain = "\n".join(p for p in (plain_head, branch, attached, *calls, *(text for text, _, _ in snapshot.kernel),
                                   events_text(snapshot.notices, snapshot.compactions), *notes_text, clipped_reply(snapshot.text, markdown=False), *tail, context) if p)
    return {"text/html": html, "text/markdown": markdown, "text/plain": plain}
