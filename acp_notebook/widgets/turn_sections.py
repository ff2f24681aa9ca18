"""The sections of a live turn view that grow with the turn: header, thoughts, plan, tool cards, kernel calls
and the reply, each a ``LiveParts`` widget, so the frontend is sent what changed and nothing else.

- header: one part; its running clock ticks in the browser (parts.py), so it changes when the turn's status does;
- thoughts: plain text in pieces (``ThoughtPieces``), finished lines frozen;
- plan: its rows, of which the frontend is sent those that changed (live_plan.py: a status, a few characters);
- tool cards: a part per tool call, its HTML made again only when the call or its permission decisions
  changed (a running call's clock ticks in the browser, as the header's); the permission decisions that belong
  to no tool call as one part after them;
- kernel calls: a part per call;
- notices and compactions: a part per notice or compaction, in the order they came (notices.py), a
  compaction's made again only when it changed (its status, a chunk of its summary);
- reply: a part per Markdown block (``ReplyBlocks``), finished blocks rendered once.

So a render costs the kernel the changed parts and the open block, not the whole turn, and a finished
paragraph or tool card is sent once. ``Republishes`` says when the turn's output (its static forms, each carrying
the whole turn) is published again while the turn runs. ``draw`` and ``Republishes`` are called under the turn
view's lock (render thread, or the view's constructor once).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from ._html import FG, MUTED, clock
from .blocks import ReplyBlocks, ThoughtPieces
from .cardstyle import CARD_CSS
from .live_plan import PLAN_CSS, PlanRows, plan_rows
from .notices import event_parts
from .parts import CLOCK_ATTRIBUTE, ClockParts, LiveParts, clock_attribute

__all__ = ["PLAN_CSS", "THOUGHTS_STYLE", "Republishes", "TurnSections", "plan_rows", "stopped_clocks", "ticking",
           "tool_ticking"]

THOUGHTS_STYLE = f"white-space:pre-wrap;color:{FG};line-height:1.5;font-size:0.95em"
# A section's change of fewer characters than this waits (at most HOLD_S seconds) to go with the next: a
# message's envelope is about 150 bytes, so a reply streamed slowly is sent a few times a second, not ten.
HOLD_CHARS = 256
HOLD_S = 0.5
# A plan may be updated a hundred times a second (a progress note on a row); people read it at a slower pace, and
# each message's envelope costs more than what changed in it, so the plan's small changes wait up to a second.
PLAN_HOLD_S = 1.0
# While the turn runs, its output's static forms are published again when its structure changes (so a notebook
# saved mid-turn holds the turn as it stood); each such publish carries the whole turn so far. Once they have
# cost this many bytes, the output waits for the turn's end: what a long turn sends then grows with the turn,
# not with its square. A turn that shows little (a plan updated two thousand times) may spend only
# REPUBLISH_FLOOR and half of what its live sections sent: its republishes stay in proportion to the turn.
REPUBLISH_BUDGET = 128 * 1024
REPUBLISH_FLOOR = 16 * 1024
# A change of the turn's structure waits until the output was last published this many seconds ago (a request for
# the person, its answer, an error or a branch change go at once): a notebook is saved now and then (JupyterLab
# autosaves every two minutes), and a turn of a few seconds costs its first and last forms only.
REPUBLISH_GAP_S = 30.0


def ticking(header: str, since: float | None) -> str:
    """The live header with its clock chip counting from ``since`` in the browser (parts.ClockParts): its text stays
    put in the kernel, so the running clock costs no message."""
    return header if since is None else _clocked(header, "acpnb-extra", since)


def tool_ticking(card: str, since: float) -> str:
    """A running tool card whose time counts from ``since`` in the browser, as the header's does (``ticking``)."""
    return _clocked(card, "acpnb-tool-time", since)


def _clocked(html: str, element_class: str, since: float) -> str:
    """``html`` with its first element of ``element_class`` made a running clock from ``since``."""
    return html.replace(f'class="{element_class}"', f'class="{element_class}" {clock_attribute(since)}', 1)


_RUNNING_CLOCK = re.compile(rf'(<[^<>]*?) {CLOCK_ATTRIBUTE}="([0-9.]+)"([^<>]*>)[^<]*')


def stopped_clocks(html: str, now: float | None = None) -> str:
    """``html`` with each running clock stopped at ``now`` (epoch seconds; the time it is): its text the time since
    its start, the attribute that made it tick gone. For the saved forms, which no frontend code redraws."""
    at = time.time() if now is None else now
    return _RUNNING_CLOCK.sub(lambda m: f"{m[1]}{m[3]}{clock(at - float(m[2]))}", html)


class Republishes:
    """When a running turn's output is published again (chat.py's module docstring): its structure, as
    (what must go at once, what may wait), changed since the output was last published; what may wait waits for
    ``REPUBLISH_GAP_S``; and the publishes have not spent their budget. Under the turn view's lock."""

    def __init__(self) -> None:
        self.shape: tuple[Any, ...] = ((), ())  # what the saved form last showed of the turn's structure
        self.at = time.monotonic()  # when the output was last shown or published

    def published(self, shape: tuple[Any, ...] | None = None) -> None:
        """The output was shown or published (with ``shape``, when known)."""
        if shape is not None:
            self.shape = shape
        self.at = time.monotonic()

    def due(self, shape: tuple[Any, ...], published_bytes: int, sections_bytes: int) -> bool:
        """Whether to publish now, given the structure, what the output's publishes and the live sections sent."""
        # About what the next publish would carry: the turn so far, twice (its forms, and those for a gone kernel).
        budget = min(REPUBLISH_BUDGET, REPUBLISH_FLOOR + sections_bytes // 2)
        if published_bytes + 2 * sections_bytes > budget or shape == self.shape:
            return False
        now = time.monotonic()
        if shape[0] == self.shape[0] and now - self.at < REPUBLISH_GAP_S:
            return False  # seen again by a later render (one a second while the turn runs)
        self.shape, self.at = shape, now
        return True


class CardParts(ClockParts):
    """A section of cards (tool calls, kernel calls): its widget carries the cards' stylesheet, once, and a running
    tool call's clock ticks in the browser (``tool_ticking``)."""

    _css = CARD_CSS


class TurnSections:
    """The growing sections' widgets and what each last showed (see the module docstring)."""

    def __init__(self) -> None:
        self.header = ClockParts()  # its running clock ticks in the browser
        self.thoughts_text = LiveParts(box_class="acpnb-thoughts", box_style=THOUGHTS_STYLE)
        self.plan = PlanRows()
        # Tool and kernel cards: classes, their look sent once with the tools section (cardstyle.py); the kernel
        # section's cards are in the same view, so they share it.
        self.tools = CardParts()
        self.kernel = LiveParts()
        self.notices = LiveParts(box_class="acpnb-turn-notices")
        self.reply = LiveParts(box_class="acpnb-reply-body")
        self._blocks = ReplyBlocks()
        self._thoughts = ThoughtPieces()
        self._cards: dict[str, tuple[Any, str]] = {}  # call id -> (what its HTML was made from, the HTML)
        self._events: dict[Any, tuple[Any, str, Any]] = {}  # notices' and compactions' HTML (notices.event_parts)

    @property
    def widgets(self) -> tuple[LiveParts | PlanRows, ...]:
        return self.header, self.thoughts_text, self.plan, self.tools, self.kernel, self.notices, self.reply

    @property
    def sent_bytes(self) -> int:
        """What the sections sent so far (their parts' HTML and keys)."""
        return sum(widget.sent_bytes for widget in self.widgets)

    def card(self, call_id: str, made_from: Any, make: Callable[[], str]) -> str:
        """A tool card's HTML, made again only when ``made_from`` changed."""
        kept = self._cards.get(call_id)
        if kept is not None and kept[0] == made_from:
            return kept[1]
        html = make()
        self._cards[call_id] = (made_from, html)
        return html

    def draw(self, *, header: str, thoughts: str, plan: Sequence[Mapping[str, Any]], cards: Sequence[tuple[str, str]],
             notes: Sequence[str], kernel: Sequence[tuple[str, str]], text: str, notices: Sequence[Any] = (),
             compactions: Sequence[Any] = (), send: bool = True, hold: bool = True) -> None:
        """Bring every section up to date and send what changed (``send``: False once the output is static; ``hold``:
        small changes may wait for the next draw, see HOLD_CHARS)."""
        self.header.update([("h", header)])
        self._thoughts.update(thoughts)
        self.thoughts_text.update(self._thoughts.parts())
        self.plan.update(plan)
        noted = "".join(f'<div style="color:{MUTED};font-size:0.9em">{escape(note)}</div>' for note in notes)
        self.tools.update([*((f"c{key}", html) for key, html in cards), *([("n", noted)] if noted else [])])
        self.kernel.update((f"k{key}", html) for key, html in kernel)
        self.notices.update(event_parts(notices, compactions, self._events))
        self._blocks.update(text)
        self.reply.update(self._blocks.parts())
        if send:
            for widget in self.widgets:
                if not hold:
                    widget.flush()
                else:
                    widget.flush(HOLD_CHARS, PLAN_HOLD_S if widget is self.plan else HOLD_S)
