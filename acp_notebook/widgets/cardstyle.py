"""The look of tool cards and kernel-call cards, written once as CSS classes.

A live turn sends each card to the browser as HTML (parts.py); with its look written inline, every card
carried about 1.3 kB of the same ``style`` attributes, most of what 300 tool calls cost. So the cards
name classes, and the look is:

- live: ``CARD_CSS``, the stylesheet of the card sections' widget (turn_sections.CardParts, anywidget's ``_css``),
  sent once per section when its widget opens;
- saved: ``inline_styles(html)`` writes each class's declarations back into a ``style`` attribute, since
  a saved notebook (GitHub, nbviewer, nbconvert, JupyterLab with no kernel) has no stylesheet to lean on.
  Each property is written once, resolved as the stylesheet would, and a class that only carries a look is
  left out once its look is written (a saved turn of 300 cards carries every byte of a card's markup 300 times).

Classes are prefixed ``acpnb-``; a card's colours by status are classes too (``acpnb-l-failed`` the card's
left border, ``acpnb-b-failed`` its badge). Pure data and functions; safe from any thread.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ._html import BORDER, FG, MONO, MUTED, TOOL_STATUS_COLORS

__all__ = ["CARD_CSS", "STYLES", "inline_styles", "status_classes"]

# Colours a card's status may take, by class suffix: the agent's tool statuses and the kernel calls' own.
STATUS_COLORS: dict[str, str] = {
    **TOOL_STATUS_COLORS,
    "asking": "#6a1b9a", "running": TOOL_STATUS_COLORS["in_progress"], "held": "#e65100",
    "done": TOOL_STATUS_COLORS["completed"], "refused": TOOL_STATUS_COLORS["failed"], "proposed": "#1565c0",
    "withdrawn": MUTED, "other": BORDER,
}

STYLES: dict[str, str] = {
    "acpnb-tool-call": "padding:2px 8px;margin:4px 0",
    "acpnb-kernel-call": "padding:2px 8px;margin:4px 0",
    "acpnb-card-head": "display:flex;gap:8px;align-items:center;flex-wrap:wrap",
    "acpnb-card-title": "font-weight:600",
    # A chip and a badge stand in a card's head, a flex box: each is a block of its own there without saying so.
    "acpnb-chip": (f"padding:0 7px;border:1px solid {BORDER};border-radius:9px;font-size:0.85em;"
                   f"line-height:1.6;color:{MUTED};white-space:nowrap"),
    "acpnb-badge": ("padding:0 7px;border-radius:9px;font-size:0.85em;line-height:1.6;color:#fff;"
                    f"white-space:nowrap;background:{MUTED}"),
    "acpnb-card-muted": f"color:{MUTED};font-size:0.9em",
    "acpnb-tool-time": f"color:{MUTED};font-size:0.85em",
    "acpnb-card-text": f"margin:2px 0;padding:2px 6px;font-family:{MONO};font-size:0.85em;white-space:pre-wrap;color:{FG}",
    "acpnb-diff": (f"margin:4px 0;padding:4px 6px;border:1px solid {BORDER};border-radius:4px;font-family:{MONO};"
                   "font-size:0.85em;white-space:pre-wrap"),
    "acpnb-d-add": "color:#2e7d32",
    "acpnb-d-del": "color:#c62828",
    "acpnb-d-hunk": "color:#1565c0",
    "acpnb-d-ctx": f"color:{MUTED}",
    "acpnb-kernel-code": (f"margin:2px 0;padding:4px 8px;font-family:{MONO};font-size:0.85em;white-space:pre-wrap;"
                          f"color:{FG};border:1px solid {BORDER};border-radius:3px"),
    "acpnb-kernel-output": f"margin:2px 0;padding:2px 8px;font-family:{MONO};font-size:0.85em;white-space:pre-wrap;color:{FG}",
    "acpnb-kernel-error": (f"margin:2px 0;padding:2px 8px;font-family:{MONO};font-size:0.85em;white-space:pre-wrap;"
                           "color:#c62828"),
    "acpnb-kernel-image": "max-width:100%;margin:2px 0",
    "acpnb-kernel-held": "color:#e65100;font-weight:600;padding:2px 0",
    "acpnb-kernel-explanation": f"color:{FG};padding:2px 0",
    "acpnb-kernel-args": f"margin:2px 0;font-family:{MONO};font-size:0.85em;white-space:pre-wrap;color:{FG}",
    **{f"acpnb-l-{status}": f"border-left:3px solid {color}" for status, color in STATUS_COLORS.items()},
    **{f"acpnb-b-{status}": f"background:{color}" for status, color in STATUS_COLORS.items()},
}

_ORDER = {name: index for index, name in enumerate(STYLES)}  # the stylesheet's order: which class wins
CARD_CSS = "\n".join(f".{name}{{{declarations}}}" for name, declarations in STYLES.items())

# An element up to its class attribute (its tag the second group), then the classes; one with a style of its own
# keeps it.
_CLASS = re.compile(r'(<(\w+)\b[^<>]*?\b)class="([^"]*)"(?! style=)')


def status_classes(status: str) -> tuple[str, str]:
    """(the card's border class, its badge's class) for a status; an unknown one gets the quiet colour."""
    key = status if status in STATUS_COLORS else "other"
    return f"acpnb-l-{key}", f"acpnb-b-{key}"


# Left out of a saved ``<pre>``'s style: every renderer of a saved notebook sets a pre in a code font (JupyterLab's
# output styles its own code font), and a saved turn of 300 diffs carries the declaration 300 times. A live card
# keeps it: a widget's view is outside the styles JupyterLab gives rendered HTML.
_SAVED_PRE_DROPS = frozenset({"font-family"})


@lru_cache(maxsize=256)
def _style_of(classes: str, tag: str = "") -> str:
    """The declarations of ``classes``, one per property: as in the stylesheet, the class written later there wins
    (each status class comes after the base it overrides), and the overridden one is not written (a byte per card)."""
    declared: dict[str, str] = {}
    for name in sorted((name for name in set(classes.split()) if name in STYLES), key=_ORDER.__getitem__):
        for declaration in STYLES[name].split(";"):
            prop, _, value = declaration.partition(":")
            if value and not (tag == "pre" and prop in _SAVED_PRE_DROPS):
                declared.pop(prop, None)  # re-inserted last: the order stays that of the stylesheet's cascade
                declared[prop] = value
    return ";".join(f"{prop}:{value}" for prop, value in declared.items())


# Classes that only carry a look: a saved element trades them for its style (a saved turn of 300 cards carries each
# of them 300 times, and nothing finds a saved element by its look). The classes that say what an element is (a tool
# call, its kind and status, a diff) and its status colours stay, for a reader's own CSS and for finding them.
_SAVED_LOOK_ONLY = frozenset({"acpnb-card-head", "acpnb-card-title", "acpnb-chip", "acpnb-badge", "acpnb-card-muted",
                              "acpnb-d-add", "acpnb-d-del", "acpnb-d-hunk", "acpnb-d-ctx"})


def inline_styles(html: str) -> str:
    """``html`` with each element's card classes' declarations written into a ``style`` attribute, its look-only
    classes left out (for the saved forms). An element whose ``class`` is followed by a ``style`` of its own is left
    as it is."""
    def styled(match: re.Match[str]) -> str:
        start, tag, classes = match.groups()
        style = _style_of(classes, tag)
        if not style:
            return match.group(0)
        kept = " ".join(name for name in classes.split() if name not in _SAVED_LOOK_ONLY)
        return f'{start}class="{kept}" style="{style}"' if kept else f'{start}style="{style}"'

    return _CLASS.sub(styled, html)
