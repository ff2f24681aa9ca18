"""The sections of a live turn view that grow with the turn: header, thoughts, plan, tool cards, kernel calls
and the reply, each a ``LiveParts`` widget, so the frontend is sent what changed and nothing else.

- header: one part; the running clock changes a few characters of it each second;
- thoughts: plain text in pieces (``ThoughtPieces``), finished lines frozen;
- plan: a part per row (its look a stylesheet sent once, so a status change patches a class and a mark);
- tool cards: a part per tool call, its HTML made again only when the call, its permission decisions or
  its shown time changed; the permission decisions that belong to no tool call as one part after them;
- kernel calls: a part per call;
- notices and compactions: a part per notice or compaction, in the order they came (notices.py), a
  compaction's made again only when it changed (its status, a chunk of its summary);
- reply: a part per Markdown block (``ReplyBlocks``), finished blocks rendered once.

So a render costs the kernel the changed parts and the open block, not the whole turn, and a finished
paragraph or tool card is sent once. ``draw`` is called under the turn view's lock (render thread, or the
view's constructor once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from ._html import FG, MUTED, PLAN_MARKS
from .blocks import ReplyBlocks, ThoughtPieces
from .cardstyle import CARD_CSS
from .notices import event_parts
from .parts import LiveParts

__all__ = ["PLAN_CSS", "THOUGHTS_STYLE", "TurnSections", "plan_rows"]

THOUGHTS_STYLE = f"white-space:pre-wrap;color:{FG};line-height:1.5;font-size:0.95em"
# A section's change of fewer characters than this waits (at most HOLD_S seconds) to go with the next: a
# message's envelope is about 150 bytes, so a reply streamed slowly is sent a few times a second, not ten.
HOLD_CHARS = 256
HOLD_S = 0.5


# The live plan's look, the stylesheet of its widget (sent once, when it opens): a row carries only its status
# class and mark, so a row whose status changed is patched by those few characters (the saved form, plan_html,
# keeps inline styles).
PLAN_CSS = (
    ".acpnb-plan .acpnb-plan-row{line-height:1.5;padding:0 8px;color:" + FG + "}"
    ".acpnb-plan .acpnb-plan-row.acpnb-plan-completed{color:" + MUTED + ";text-decoration:line-through}"
    ".acpnb-plan .acpnb-plan-row.acpnb-plan-in_progress{font-weight:600}"
    ".acpnb-plan .acpnb-plan-mark{display:inline-block;width:1.4em}"
)


def plan_rows(entries: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The plan as parts: a heading, then one row per entry (the live form of ``_html.plan_html``; its look is
    ``PLAN_CSS``)."""
    if not entries:
        return []
    rows = [("p", f'<div style="color:{MUTED};font-size:0.85em;padding:2px 4px 0">Plan</div>')]
    for index, entry in enumerate(entries):
        status = str(entry.get("status") or "pending")
        mark = PLAN_MARKS.get(status, PLAN_MARKS["pending"])
        rows.append((f"p{index}", f'<div class="acpnb-plan-row acpnb-plan-{escape(status)}">'
                                  f'<span class="acpnb-plan-mark">{mark}</span>'
                                  f'{escape(str(entry.get("content", "")))}</div>'))
    return rows


class PlanParts(LiveParts):
    """The plan's section: its widget carries the rows' stylesheet, once."""

    _css = PLAN_CSS


class CardParts(LiveParts):
    """A section of cards (tool calls, kernel calls): its widget carries the cards' stylesheet, once."""

    _css = CARD_CSS


class TurnSections:
    """The growing sections' widgets and what each last showed (see the module docstring)."""

    def __init__(self) -> None:
        self.header = LiveParts()
        self.thoughts_text = LiveParts(box_class="acpnb-thoughts", box_style=THOUGHTS_STYLE)
        self.plan = PlanParts(box_class="acpnb-plan")
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
    def widgets(self) -> tuple[LiveParts, ...]:
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
        self.plan.update(plan_rows(plan))
        noted = "".join(f'<div style="color:{MUTED};font-size:0.9em">{escape(note)}</div>' for note in notes)
        self.tools.update([*((f"c{key}", html) for key, html in cards), *([("n", noted)] if noted else [])])
        self.kernel.update((f"k{key}", html) for key, html in kernel)
        self.notices.update(event_parts(notices, compactions, self._events))
        self._blocks.update(text)
        self.reply.update(self._blocks.parts())
        if send:
            for widget in self.widgets:
                widget.flush(HOLD_CHARS, HOLD_S) if hold else widget.flush()
