"""The agent's notices, its context compactions and a tool call's programmatic name, as a turn's view, the
session panel and their saved forms (HTML, Markdown, plain text) show them.

- Notices (``state.Notice``) by severity: ``info`` quietly (one muted line), ``warning`` and ``error`` as such
  (a coloured mark and bar, the title in bold, the description under it). A severity ACP does not name (a
  custom ``_`` one) is shown quietly, with its name. In a turn: the turn's ``notices``; in the panel: the
  session's ``state.notices``, the latest ``PANEL_NOTICES``, while no turn runs.
- A compaction (``state.Compaction``) as a marked, foldable block: "context compacted" (or "compacting
  context", "compaction failed"...) with the context before and after it, its summary folded inside.
- A tool call's ``name`` as a quiet chip beside its title (left out when it says what the title says).
- A turn's notices and compactions together, in the order they came (``events_in_order``): the live view's
  parts (``event_parts``, each notice's HTML made once) and the saved forms (``events_html`` / ``_markdown`` /
  ``_text``).

Text from the agent is made visible (``_visible.visible``) and escaped. Pure functions of plain values (the
records are read, never changed); safe from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from .._visible import visible
from ._html import BORDER, FG, MUTED, chip, md_escape

__all__ = ["PANEL_NOTICES", "compaction_html", "compaction_markdown", "compaction_text", "event_parts", "events_html",
           "events_in_order", "events_markdown", "events_text", "notice_html", "notices_html", "notices_markdown",
           "notices_text", "outside_compaction", "panel_compaction_html", "panel_notices_html", "severity_of",
           "tool_name_html", "tool_name_text"]

PANEL_NOTICES = 3  # the session's latest notices a panel shows
SUMMARY_SHOWN = 6000  # characters of a compaction summary shown (the whole is on state.compactions)
# severity -> (mark, colour); info is quiet (muted, no bar)
SEVERITIES: dict[str, tuple[str, str]] = {
    "info": ("\u2139", MUTED),
    "warning": ("\u26a0", "#b26a00"),
    "error": ("\u2716", "#c62828"),
}
COMPACTION_WORDS: dict[str, tuple[str, str]] = {
    "in_progress": ("compacting context\u2026", "#b26a00"),
    "completed": ("context compacted", "#1565c0"),
    "failed": ("context compaction failed", "#c62828"),
    "cancelled": ("context compaction cancelled", MUTED),
}


def _shown(text: Any) -> str:
    return visible(str(text))


def severity_of(notice: Any) -> str:
    """How a notice is shown: its own severity when ACP names it (info, warning, error), else info."""
    return notice.severity if notice.severity in SEVERITIES else "info"


def _label(notice: Any) -> str:
    """The severity word shown: a custom severity keeps its own name."""
    return _shown(notice.severity) if notice.severity not in SEVERITIES else notice.severity


def notice_html(notice: Any) -> str:
    """One notice: quiet for info, marked for warnings and errors."""
    kind = severity_of(notice)
    mark, color = SEVERITIES[kind]
    title, label = escape(_shown(notice.title)), escape(_label(notice))
    description = escape(_shown(notice.description)) if notice.description else ""
    if kind == "info":
        rest = f" \u2014 {description}" if description else ""
        return (f'<div class="acpnb-notice acpnb-notice-info" data-severity="{label}" style="color:{MUTED};'
                f'font-size:0.9em;padding:1px 4px;white-space:pre-wrap">{mark} {title}{rest}</div>')
    under = (f'<div class="acpnb-notice-description" style="color:{FG};white-space:pre-wrap">{description}</div>'
             if description else "")
    return (f'<div class="acpnb-notice acpnb-notice-{kind}" role="status" data-severity="{label}" '
            f'style="border-left:3px solid {color};padding:2px 8px;margin:4px 0">'
            f'<span style="color:{color};font-weight:600">{mark} {label}:</span> '
            f'<span class="acpnb-notice-title" style="font-weight:600;color:{FG};white-space:pre-wrap">{title}</span>'
            f"{under}</div>")


def notices_html(notices: Sequence[Any]) -> str:
    """A list of notices in arrival order; "" when there are none."""
    if not notices:
        return ""
    return f'<div class="acpnb-notices">{"".join(notice_html(n) for n in notices)}</div>'


def _notice_line(notice: Any) -> str:
    mark, _color = SEVERITIES[severity_of(notice)]
    description = f" \u2014 {_shown(notice.description)}" if notice.description else ""
    return f"{mark} {_label(notice)}: {_shown(notice.title)}{description}"


def notices_text(notices: Sequence[Any]) -> str:
    """Plain text, one line per notice: ``⚠ warning: Rate limited — retrying in 2 s``."""
    return "\n".join(_notice_line(n) for n in notices)


def notices_markdown(notices: Sequence[Any]) -> str:
    """Markdown, one paragraph per notice; warnings and errors in bold, info in italics."""
    lines = []
    for notice in notices:
        mark, _color = SEVERITIES[severity_of(notice)]
        head = f"{mark} {md_escape(_label(notice))}: {md_escape(_shown(notice.title))}"
        head = f"*{head}*" if severity_of(notice) == "info" else f"**{head}**"
        description = f" \u2014 {md_escape(_shown(notice.description))}" if notice.description else ""
        lines.append(head + description)
    return "\n\n".join(lines)


def panel_notices_html(notices: Sequence[Any], *, busy: bool, shown: int = PANEL_NOTICES) -> str:
    """What the session panel shows of the session's notices: the latest ``shown`` while no turn runs
    (``busy``: a turn runs, and shows its own); "" otherwise."""
    if busy or not notices:
        return ""
    return notices_html(list(notices)[-shown:])


# --- compaction ---------------------------------------------------------------------------------------
def _compaction_head(compaction: Any) -> tuple[str, str]:
    """(words, colour): "context compacted · 120,000 → 9,000 tokens" and the colour of its mark."""
    words, color = COMPACTION_WORDS.get(compaction.status, (f"context compaction: {_shown(compaction.status)}",
                                                            MUTED))
    before = (compaction.usage_before or {}).get("used")
    after = (compaction.usage_after or {}).get("used")
    if isinstance(before, int) and isinstance(after, int):
        words += f" \u00b7 {before:,} \u2192 {after:,} tokens"
    return words, color


def _summary(compaction: Any) -> str:
    text = _shown(compaction.summary_text)
    return text if len(text) <= SUMMARY_SHOWN else text[:SUMMARY_SHOWN] + " \u2026"


def compaction_html(compaction: Any, *, open_: bool = False) -> str:
    """A compaction as a marked, foldable block: its state in the summary line, the agent's summary (and
    error) folded inside. ``open_``: unfolded."""
    words, color = _compaction_head(compaction)
    body = []
    summary = _summary(compaction)
    if summary:
        body.append(f'<div class="acpnb-compaction-summary" style="white-space:pre-wrap;color:{FG}">'
                    f"{escape(summary)}</div>")
    elif compaction.finished:
        body.append(f'<div style="color:{MUTED}">no summary</div>')
    if compaction.error:
        body.append(f'<div class="acpnb-compaction-error" style="color:#c62828;white-space:pre-wrap">'
                    f"{escape(_shown(compaction.error))}</div>")
    return (f'<details class="acpnb-compaction" data-status="{escape(_shown(compaction.status))}"'
            f'{" open" if open_ else ""} style="border-left:3px solid {color};border-top:1px dashed {BORDER};'
            f'padding:2px 8px;margin:6px 0">'
            f'<summary style="cursor:pointer;color:{color};font-weight:600">\u27f2 {escape(words)}</summary>'
            f'{"".join(body)}</details>')


def compaction_text(compaction: Any) -> str:
    """Plain text: the state line, then the summary and any error, indented."""
    words, _color = _compaction_head(compaction)
    lines = [f"\u27f2 {words}"]
    lines += [f"  {line}" for line in _summary(compaction).splitlines()]
    if compaction.error:
        lines.append(f"  error: {_shown(compaction.error)}")
    return "\n".join(lines)


def compaction_markdown(compaction: Any) -> str:
    """Markdown: the state line in bold, the summary as a quote (what the agent kept of the conversation)."""
    words, _color = _compaction_head(compaction)
    parts = [f"**\u27f2 {md_escape(words)}**"]
    summary = _summary(compaction)
    if summary:
        parts.append("\n".join(f"> {md_escape(line)}" if line else ">" for line in summary.splitlines()))
    if compaction.error:
        parts.append(f"error: {md_escape(_shown(compaction.error))}")
    return "\n\n".join(parts)


# --- a tool call's programmatic name ------------------------------------------------------------------
def tool_name_text(call: Any) -> str:
    """The tool's programmatic name where the agent gave one that the title does not already say; else ""."""
    name = getattr(call, "name", None)
    if not name or name == (call.title or ""):
        return ""
    return _shown(name)


def tool_name_html(call: Any) -> str:
    """The name as a quiet chip, for beside a tool call's title; "" when there is none to show."""
    name = tool_name_text(call)
    return chip(name, css_class="acpnb-tool-name", title="the tool's programmatic name") if name else ""


# --- a turn's notices and compactions together ------------------------------------------------------------
def events_in_order(notices: Sequence[Any], compactions: Sequence[Any]) -> list[tuple[str, Any]]:
    """("notice", Notice) and ("compaction", Compaction) in the order they came (a notice's arrival, a
    compaction's start; a stable sort, so each list keeps its own order)."""
    tagged = [(n.time, "notice", n) for n in notices] + [(c.started_at, "compaction", c) for c in compactions]
    return [(kind, item) for _when, kind, item in sorted(tagged, key=lambda t: t[0])]


def _event_forms(kind: str, item: Any) -> tuple[str, str, str]:
    """(text, Markdown, HTML) of one notice or compaction."""
    if kind == "notice":
        return notices_text([item]), notices_markdown([item]), notice_html(item)
    return compaction_text(item), compaction_markdown(item), compaction_html(item)


def event_parts(notices: Sequence[Any], compactions: Sequence[Any],
                cache: dict[Any, tuple[Any, str, Any]]) -> list[tuple[str, str]]:
    """The live view's parts: (key, HTML) per notice and compaction, in order. ``cache`` (the caller's, kept
    between calls) holds each one's HTML with what it was made from, so a render makes again only the
    compaction that changed (a notice never changes)."""
    parts = []
    for index, (kind, item) in enumerate(events_in_order(notices, compactions)):
        key = (kind, id(item))
        made_from = (item.status, len(item.summary), item.error, item.usage_after is not None) \
            if kind == "compaction" else None
        kept = cache.get(key)
        if kept is None or kept[2] is not item or kept[0] != made_from:
            kept = (made_from, _event_forms(kind, item)[2], item)
            cache[key] = kept
        parts.append((f"{kind[0]}{index}", kept[1]))
    return parts


def events_html(notices: Sequence[Any], compactions: Sequence[Any]) -> str:
    """A turn's notices and compactions in the order they came, for its saved form; "" when there are none."""
    events = events_in_order(notices, compactions)
    if not events:
        return ""
    return f'<div class="acpnb-turn-notices">{"".join(_event_forms(k, i)[2] for k, i in events)}</div>'


def events_markdown(notices: Sequence[Any], compactions: Sequence[Any]) -> str:
    return "\n\n".join(_event_forms(k, i)[1] for k, i in events_in_order(notices, compactions))


def events_text(notices: Sequence[Any], compactions: Sequence[Any]) -> str:
    return "\n".join(_event_forms(k, i)[0] for k, i in events_in_order(notices, compactions))


# --- the session panel's compaction ------------------------------------------------------------------------
def outside_compaction(compactions: Sequence[Any], turns: Sequence[Any]) -> Any:
    """The session's latest compaction when it began outside any turn (``turns``: the session's, each with its
    ``compactions``), else None: a turn shows its own."""
    if not compactions:
        return None
    latest = compactions[-1]
    in_turns = any(c is latest for turn in reversed(turns) for c in getattr(turn, "compactions", ()))
    return None if in_turns else latest


def panel_compaction_html(compaction: Any) -> str:
    """The panel's block for a compaction that began outside any turn; "" for None."""
    return compaction_html(compaction) if compaction is not None else ""
