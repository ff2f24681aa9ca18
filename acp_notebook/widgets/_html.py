"""HTML fragments shared by the views and their saved forms: header, badges, tool calls, plans, diffs,
usage, Markdown replies. Pure functions of plain values; safe from any thread.

Process-wide: ``_renderer``, the Markdown renderer (mistune), made on first use, or False when
mistune is missing; one per process because it holds no state per text; set on the first rendering
thread (a race makes the same renderer twice, harmlessly), never dropped.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

__all__ = [
    "BORDER", "FG", "MONO", "MUTED", "PANEL_BG", "PROMPT_TITLE_TIP", "HeaderInfo", "OFFLINE_STYLE", "badge", "chip",
    "clock", "context_meter_html", "context_words", "diff_html", "error_html", "header_html", "json_html",
    "markdown_html", "md_escape", "money", "muted_html", "plan_html", "seconds", "tool_call_html", "usage_html",
    "widget_bundle",
]

# JupyterLab's theme variables, with fallbacks for other frontends (classic, VS Code). Written tight: a saved
# turn carries them in every card's style (cardstyle.py), and each byte of them is one per card.
FG = "var(--jp-ui-font-color1,#1f1f1f)"
MUTED = "var(--jp-ui-font-color2,#616161)"
BORDER = "var(--jp-border-color2,#e0e0e0)"
PANEL_BG = "var(--jp-layout-color2,#f5f5f5)"
MONO = "var(--jp-code-font-family,monospace)"

STATUS_COLORS: dict[str, str] = {
    "idle": "#2e7d32",
    "done": "#2e7d32",
    "working": "#b26a00",
    "waiting": "#6a1b9a",
    "queued": "#616161",
    "cancelled": "#616161",
    "closed": "#616161",
    "error": "#c62828",
}

TOOL_STATUS_COLORS: dict[str, str] = {
    "pending": "#616161",
    "in_progress": "#b26a00",
    "completed": "#2e7d32",
    "failed": "#c62828",
}

PLAN_MARKS: dict[str, str] = {"completed": "&#9745;", "in_progress": "&#9684;", "pending": "&#9744;"}

# The tooltip of a title the client made from the first prompt (shown in italics until the agent names the session).
PROMPT_TITLE_TIP = "from the first prompt; the agent has not titled this session"


def badge(text: str, color: str, *, css_class: str = "") -> str:
    """A small rounded label (status, kind)."""
    cls = f' class="{escape(css_class)}"' if css_class else ""
    return (
        f'<span{cls} style="display:inline-block;padding:0 7px;border-radius:9px;font-size:0.85em;'
        f'line-height:1.6;color:#fff;background:{color};white-space:nowrap">{escape(text)}</span>'
    )


def chip(text: str, *, css_class: str = "", title: str = "") -> str:
    """A quiet outlined label (model name, agent version)."""
    cls = f' class="{escape(css_class)}"' if css_class else ""
    tip = f' title="{escape(title)}"' if title else ""
    return (
        f'<span{cls}{tip} style="display:inline-block;padding:0 7px;border:1px solid {BORDER};'
        f'border-radius:9px;font-size:0.85em;line-height:1.6;color:{MUTED};white-space:nowrap">'
        f"{escape(text)}</span>"
    )


@dataclass(frozen=True)
class HeaderInfo:
    """What a session header shows."""

    title: str
    agent: str  # the agent's name and version, e.g. "acp-notebook-demo 0.1.0"
    model: str | None
    status: str
    detail: str = ""
    extra: str = ""  # one more quiet chip (a cell's elapsed time, the session id)
    title_source: str = "agent"  # "prompt": made here from the first prompt, shown as such (PROMPT_TITLE_TIP)


def header_html(info: HeaderInfo, *, live: bool = False) -> str:
    """The title bar: title on the left; agent, model and status on the right.

    ``live``: the header of a widget, which says "kernel gone" instead of its status once the
    kernel is gone (see OFFLINE_STYLE)."""
    status_color = STATUS_COLORS.get(info.status, MUTED)
    parts = [chip(info.agent, css_class="acpnb-agent")]
    if info.model:
        parts.append(chip(f"model: {info.model}", css_class="acpnb-model"))
    if info.extra:
        parts.append(chip(info.extra, css_class="acpnb-extra"))
    parts.append(badge(info.status, status_color, css_class=f"acpnb-status acpnb-status-{info.status}"))
    if live:
        parts.append(badge("kernel gone", MUTED, css_class="acpnb-offline") + OFFLINE_STYLE)
    detail = (
        f'<div class="acpnb-status-detail" style="color:{MUTED};font-size:0.85em;margin-top:2px">'
        f"{escape(info.detail)}</div>"
        if info.detail
        else ""
    )
    # The class stays exactly "acpnb-title" (readers of saved notebooks look for it); a prompt's title is marked
    # by an attribute, italics and a tooltip.
    marked = (f' data-title-source="prompt" title="{escape(PROMPT_TITLE_TIP)}"'
              if info.title_source == "prompt" else "")
    slant = "font-style:italic;" if info.title_source == "prompt" else ""
    return (
        f'<div class="acpnb-header" style="display:flex;flex-wrap:wrap;align-items:center;gap:6px 10px;'
        f"padding:6px 10px;border:1px solid {BORDER};border-radius:6px;background:{PANEL_BG};color:{FG}\">"
        f'<span class="acpnb-title"{marked} '
        f'style="font-weight:600;font-size:1.1em;flex:1 1 auto;min-width:12em;{slant}">'
        f"{escape(info.title)}</span>"
        f'<span style="display:flex;flex-wrap:wrap;gap:6px;align-items:center">{"".join(parts)}</span>'
        f"</div>{detail}"
    )


def error_html(message: str) -> str:
    """One clear line for a failure shown inside a widget (the panel, a cell)."""
    if not message:
        return ""
    return (
        f'<div class="acpnb-error" style="color:#c62828;padding:2px 4px;white-space:pre-wrap">'
        f"&#9888; {escape(message)}</div>"
    )


def muted_html(text: str, *, css_class: str = "") -> str:
    cls = f' class="{escape(css_class)}"' if css_class else ""
    return f'<div{cls} style="color:{MUTED};font-size:0.9em;padding:2px 4px">{text}</div>'


def plan_html(entries: Sequence[Mapping[str, Any]]) -> str:
    """The agent's plan as a checklist. What every row shares is styled once on the list; a row carries only what
    its status changes (a saved plan of short rows weighs about its words, not its markup)."""
    if not entries:
        return ""
    looks = {"completed": f' style="color:{MUTED};text-decoration:line-through"',
             "in_progress": ' style="font-weight:600"'}
    rows = []
    for entry in entries:
        status = str(entry.get("status") or "pending")
        mark = PLAN_MARKS.get(status, PLAN_MARKS["pending"])
        rows.append(f'<li class="acpnb-plan-{escape(status)}"{looks.get(status, "")}>{mark}&nbsp; '
                    f'{escape(str(entry.get("content", "")))}</li>')
    return (
        f'<div class="acpnb-plan" style="padding:2px 4px"><div style="color:{MUTED};font-size:0.85em">Plan</div>'
        f'<ul style="list-style:none;margin:2px 0;padding-left:4px;line-height:1.5;color:{FG}">{"".join(rows)}</ul>'
        "</div>"
    )


def diff_html(diff: Mapping[str, Any], *, max_lines: int = 80) -> str:
    """A unified diff of one ``diff`` content block, coloured per line."""
    path = str(diff.get("path") or "")
    old = diff.get("oldText")
    new = str(diff.get("newText") or "")
    old_lines = [] if old is None else str(old).splitlines()
    lines = list(
        difflib.unified_diff(old_lines, new.splitlines(), fromfile="a" + path if old is not None else "/dev/null",
                             tofile="b" + path, lineterm="")
    )
    # One coloured span per run of lines of one colour (not per line): a diff's HTML stays near its text's size.
    # Colours are classes (cardstyle.py: the live card's stylesheet, written inline in the saved forms).
    runs: list[tuple[str, list[str]]] = []
    for line in lines[:max_lines]:
        if line.startswith("+") and not line.startswith("+++"):
            color = "add"
        elif line.startswith("-") and not line.startswith("---"):
            color = "del"
        elif line.startswith("@@"):
            color = "hunk"
        else:
            color = "ctx"
        if runs and runs[-1][0] == color:
            runs[-1][1].append(line)
        else:
            runs.append((color, [line]))
    if len(lines) > max_lines:
        runs.append(("ctx", [f"... {len(lines) - max_lines} more lines"]))
    shown = "\n".join(f'<span class="acpnb-d-{color}">{escape(chr(10).join(run), quote=False)}</span>'
                      for color, run in runs)
    return f'<pre class="acpnb-diff">{shown}</pre>'


def _content_text(block: Mapping[str, Any]) -> str | None:
    if block.get("type") == "content":
        inner = block.get("content") or {}
        if inner.get("type") == "text":
            return str(inner.get("text") or "")
        return f"[{inner.get('type', 'content')}]"
    if block.get("type") == "terminal":
        return f"[terminal {block.get('terminalId', '')}]"
    return None


def tool_call_html(call: Any, decisions: Sequence[str] = (), *, max_text: int = 600, timing: str = "",
                   name_html: str = "") -> str:
    """One tool call: title, its programmatic name (``name_html``: notices.tool_name_html), kind, status (and
    ``timing``, e.g. "2 s" while it runs), locations, its text output and diffs, permission decisions."""
    status = str(call.status or "pending")
    key = status if status in TOOL_STATUS_COLORS else "other"
    # Classes, not inline styles: a live card is sent as HTML and its look once (cardstyle.py).
    head = [
        f'<span class="acpnb-card-title">{escape(str(call.title or call.id))}</span>', name_html,
        f'<span class="acpnb-chip acpnb-tool-kind">{escape(str(call.kind or "other"))}</span>',
        f'<span class="acpnb-badge acpnb-b-{key} acpnb-tool-status">{escape(status.replace("_", " "))}</span>',
    ]
    if timing:
        head.append(f'<span class="acpnb-tool-time">{escape(timing)}</span>')
    body = []
    paths = [str(loc.get("path")) for loc in call.locations or [] if isinstance(loc, Mapping) and loc.get("path")]
    if paths:
        body.append(f'<div class="acpnb-card-muted">{escape(", ".join(paths))}</div>')
    for decision in decisions:
        body.append(f'<div class="acpnb-card-muted acpnb-permission-decision">{escape(decision)}</div>')
    for block in call.content or []:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "diff":
            body.append(diff_html(block))
            continue
        text = _content_text(block)
        if text:
            clipped = text if len(text) <= max_text else text[:max_text] + " ..."
            body.append(f'<pre class="acpnb-card-text">{escape(clipped)}</pre>')
    for block in _withdrawn_diffs(call):
        body.append('<div class="acpnb-card-muted acpnb-proposed-diff">the change it proposed, not applied:</div>'
                    + diff_html(block))
    return (f'<div class="acpnb-tool-call acpnb-l-{key}"><div class="acpnb-card-head">{"".join(head)}</div>'
            f'{"".join(body)}</div>')


def _withdrawn_diffs(call: Any) -> list[Mapping[str, Any]]:
    """Diffs an earlier update of the tool call carried that its content no longer has.

    A later update's content replaces the earlier one (the protocol's rule), so a write the user
    rejected would lose the change it proposed to the "denied" message; the view keeps showing it."""
    current = [block for block in call.content or [] if isinstance(block, Mapping)]
    withdrawn: list[Mapping[str, Any]] = []
    for update in getattr(call, "updates", None) or ():
        for block in update.get("content") or () if isinstance(update, Mapping) else ():
            if isinstance(block, Mapping) and block.get("type") == "diff" and block not in current \
                    and block not in withdrawn:
                withdrawn.append(block)
    return withdrawn


def money(cost: Any) -> str:
    """A ``Cost`` ({amount, currency}) for people: $0.0123 for USD, else "12.5 EUR"; "" when there is none."""
    if not isinstance(cost, Mapping) or cost.get("amount") is None:
        return ""
    amount, currency = cost["amount"], cost.get("currency") or ""
    if currency == "USD" and isinstance(amount, (int, float)):
        return f"${amount:.4f}" if amount == 0 or amount >= 0.0001 else "under $0.0001"
    return f"{amount} {currency}".strip()


def _context(usage: Mapping[str, Any]) -> tuple[int, int] | None:
    """(used, size) of a usage_update, when both are whole numbers and the window is not empty."""
    used, size = usage.get("used"), usage.get("size")
    if isinstance(used, int) and isinstance(size, int) and not isinstance(used, bool) and size > 0:
        return used, size
    return None


# How the context meter follows a compaction: (words, CSS class) by its status.
COMPACTION_METER = {"in_progress": ("compacting context\u2026", "acpnb-context-compacting"),
                    "completed": ("compacted", "acpnb-context-compacted"),
                    "failed": ("compaction failed", "acpnb-context-compaction-failed")}


def _compaction_words(compaction: Any) -> tuple[str, str]:
    """What the meter says of ``compaction`` (a state.Compaction, or None): "compacting context…" while it runs,
    "compacted from 120,000" once done (the context it held before), and its CSS class; ("", "") for none."""
    if compaction is None or compaction.status not in COMPACTION_METER:
        return "", ""
    words, css = COMPACTION_METER[compaction.status]
    before = (compaction.usage_before or {}).get("used")
    if compaction.status == "completed" and isinstance(before, int) and not isinstance(before, bool):
        words += f" from {before:,}"
    return words, css


def context_words(usage: Mapping[str, Any] | None, compaction: Any = None) -> str:
    """The context meter as text: "context 1,234 of 200,000 tokens (1%) · session cost $0.0012"; "" without usage.
    ``compaction``: the latest compaction it follows ("· compacted from 120,000", "· compacting context…")."""
    usage = usage or {}
    parts = []
    context = _context(usage)
    if context is not None:
        used, size = context
        parts.append(f"context {used:,} of {size:,} tokens ({used / size:.0%})")
    elif usage.get("used") is not None:
        used = usage["used"]
        parts.append(f"context {used:,} tokens" if isinstance(used, int) else f"context {used} tokens")
    if money(usage.get("cost")):
        # usage_update's cost is cumulative over the session (ACP: "Total cumulative cost for session").
        parts.append(f"session cost {money(usage.get('cost'))}")
    compacted, _css = _compaction_words(compaction)
    if compacted and (parts or compaction.status == "in_progress"):
        parts.append(compacted)
    return " · ".join(parts)


def context_meter_html(usage: Mapping[str, Any] | None, compaction: Any = None) -> str:
    """How full the agent's context window is (usage_update ``used`` / ``size``) as a small bar with its
    numbers, and the session's cost when the agent gives it; "" when the agent sent no usage. ``compaction``:
    the latest compaction, which the meter follows (marked while it runs, the context it freed once done)."""
    words = context_words(usage, compaction)
    if not words:
        return ""
    _words, compacting = _compaction_words(compaction)
    context = _context(usage or {})
    bar = ""
    if context is not None:
        share = min(1.0, context[0] / context[1])
        color = "#2e7d32" if share < 0.5 else "#b26a00" if share < 0.8 else "#c62828"
        bar = (f'<span class="acpnb-context-bar" style="display:inline-block;width:90px;height:7px;'
               f'border-radius:4px;background:{BORDER};overflow:hidden;vertical-align:middle;margin-right:6px">'
               f'<span style="display:block;height:100%;width:{share * 100:.1f}%;background:{color}"></span></span>')
    css = f"acpnb-context {compacting}".strip()
    if compacting == "acpnb-context-compacting":
        bar = bar.replace("acpnb-context-bar\" style=\"", "acpnb-context-bar\" style=\"opacity:.5;", 1)
    return (f'<span class="{css}" title="tokens in the agent\'s context / its context window" '
            f'style="white-space:nowrap">{bar}{escape(words)}</span>')


def usage_html(usage: Mapping[str, Any] | None, *, duration_s: float | None = None,
               stop_reason: str | None = None, compaction: Any = None) -> str:
    """A quiet footer: the context meter (tokens in context, window, session cost; ``compaction``: the latest
    compaction, which it follows), this turn's token counts, duration, stop reason."""
    usage = usage or {}
    parts = []
    for key in ("inputTokens", "outputTokens", "totalTokens"):
        if isinstance(usage.get(key), int):
            label = {"inputTokens": "in", "outputTokens": "out", "totalTokens": "total"}[key]
            parts.append(f"{usage[key]:,} {label}")
    if duration_s is not None:
        parts.append(seconds(duration_s))
    if stop_reason and stop_reason != "end_turn":
        parts.append(f"stopped: {stop_reason.replace('_', ' ')}")
    meter = context_meter_html(usage, compaction)
    if not parts and not meter:
        return ""
    return muted_html(" &middot; ".join([meter, *(escape(p) for p in parts)] if meter else
                                        [escape(p) for p in parts]), css_class="acpnb-usage")


def seconds(value: float) -> str:
    """A duration for people: 45 ms, 2.3 s, 1 min 5 s."""
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.1f} s"
    return f"{int(value // 60)} min {value % 60:.0f} s"


def clock(value: float) -> str:
    """Elapsed time on a running clock, in whole seconds: 0 s, 42 s, 1 min 05 s."""
    whole = max(0, int(value))
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"


def md_escape(text: str) -> str:
    """Text shown literally inside Markdown (titles, labels)."""
    return "".join("\\" + c if c in "\\`*_[]<>#|" else c for c in text)


def widget_bundle(widget: Any, **kwargs: Any) -> dict[str, Any]:
    """The widget's own display data (empty once the widget is closed: ipywidgets drops it then)."""
    render = getattr(widget, "_repr_mimebundle_", None)
    return dict(render(**kwargs) or {}) if callable(render) else {}


def json_html(value: Any) -> str:
    """Pretty JSON in a scrollable monospace block."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return (
        f'<pre class="acpnb-json" style="margin:0;padding:6px 8px;max-height:320px;overflow:auto;'
        f'border:1px solid {BORDER};border-radius:4px;font-family:{MONO};font-size:0.85em;color:{FG}">'
        f"{escape(text)}</pre>"
    )


def markdown_html(text: str) -> str:
    """Markdown (an agent's reply) as HTML for a saved form. Raw HTML in the text is escaped: a
    reply is the agent's words, and a trusted notebook would otherwise run its scripts.

    Uses mistune (installed with nbconvert, so in nearly every Jupyter setup); without it the
    text keeps its line breaks, escaped."""
    renderer = _markdown_renderer()
    if renderer is None:
        return f'<div style="white-space:pre-wrap">{escape(text)}</div>'
    return str(renderer(text))


_renderer: Any = None


def _markdown_renderer() -> Any:
    global _renderer
    if _renderer is None:
        try:
            # mistune on the first Markdown reply only: the many modules that draw HTML from here (session
            # tables, saved forms, the sweep's views) and the processes that import them never need it.
            import mistune
        except ImportError:
            _renderer = False
        else:
            _renderer = mistune.create_markdown(escape=True, plugins=["strikethrough", "table", "url"])
    return _renderer or None


# Put inside a live view's HTML: when the kernel is gone (a restart, or widget state saved with the
# notebook), ipywidgets marks every view "disconnected" and draws a broken-link icon on each. In our
# views that says nothing useful: hide the icons, grey the controls and show "kernel gone" instead
# of a status that is no longer true.
OFFLINE_STYLE = (
    "<style>"
    ".acpnb-live.jupyter-widgets-disconnected::before,"
    ".acpnb-live .jupyter-widgets-disconnected::before{display:none!important}"
    ".acpnb-live .acpnb-offline{display:none!important}"
    ".acpnb-live.jupyter-widgets-disconnected .acpnb-offline{display:inline-block!important}"
    ".acpnb-live.jupyter-widgets-disconnected .acpnb-status{display:none!important}"
    ".acpnb-live.jupyter-widgets-disconnected .widget-dropdown,"
    ".acpnb-live.jupyter-widgets-disconnected .widget-checkbox,"
    ".acpnb-live.jupyter-widgets-disconnected .widget-button{pointer-events:none;opacity:.55}"
    "</style>"
)
