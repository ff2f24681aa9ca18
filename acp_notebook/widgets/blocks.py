"""A streamed reply cut into Markdown blocks as it grows, each finished block rendered once.

Rendering a whole reply as Markdown on every render costs the kernel time that grows with the
reply, and sending it costs the browser as much. ``ReplyBlocks`` reads only the text that came
since its last call: it finds where blocks end (a blank line outside a fenced code block, a fence
that closes, a fence that opens after a paragraph) and renders each finished block once; the block
still open is rendered again on each call, and it is kept short: past ``OPEN_LIMIT`` characters it
is cut at its last line break (in a fenced block, which goes on under the same fence) or, with none,
at its last space. The pieces are the parts of a ``LiveParts`` section (``parts()``), so the
frontend is sent each finished block once. How a reply reads live may differ from its saved form
only where a block was cut that way (a paragraph of thousands of characters shows breaks); the
saved form renders the whole text at once.

``ThoughtPieces`` does the same for the agent's thoughts, shown as plain text: finished lines are
frozen in pieces of about ``OPEN_LIMIT`` characters.

Text from the agent is made visible (``_visible.visible``) before it is rendered. Not thread-safe:
one owner (a turn view, under its lock).
"""

from __future__ import annotations

import re
from html import escape

from .._visible import visible
from ._html import markdown_html

__all__ = ["OPEN_LIMIT", "ReplyBlocks", "ThoughtPieces"]

OPEN_LIMIT = 4000  # characters an open block may reach before it is cut
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")


def _fence_of(line: str) -> str | None:
    """The fence a line opens or closes with (its run of backticks or tildes), or None."""
    found = _FENCE.match(line)
    return found.group(1) if found else None


class ReplyBlocks:
    """The reply's blocks (see the module docstring): ``update(text)`` then ``parts()``."""

    def __init__(self, key: str = "b") -> None:
        self._key = key
        self._done: list[tuple[str, str]] = []  # (key, HTML) of the finished blocks
        self._start = 0  # where the open block starts in the text
        self._scanned = 0  # where the next unread line starts
        self._fence: str | None = None  # the fence of the fenced block the open block is in
        self._fence_line = ""  # that fence's opening line, put back before a cut fenced block's rest
        self._text = ""
        self._open_html = ""
        self._open_source = ""

    def update(self, text: str) -> None:
        """Read what came since the last call (``text`` is the whole reply so far; it only grows)."""
        seen = self._text[max(0, self._scanned - 64):self._scanned]
        if len(text) < self._scanned or text[max(0, self._scanned - 64):self._scanned] != seen:
            self.__init__(self._key)  # not the text read so far, grown: start over
        self._text = text
        while True:
            end = text.find("\n", self._scanned)
            if end < 0:
                break
            self._read_line(self._scanned, end + 1)
        while len(text) - self._start > OPEN_LIMIT:
            self._cut()

    def _read_line(self, start: int, end: int) -> None:
        line = self._text[start:end]
        self._scanned = end
        fence = _fence_of(line)
        if self._fence is not None:
            if fence is not None and fence[0] == self._fence[0] and len(fence) >= len(self._fence) \
                    and not line.strip()[len(fence):].strip():
                self._finish(end)  # the fence closed: the whole fenced block is done
                self._fence = None
            return
        if fence is not None:
            self._finish(start)  # a paragraph before the fence is done
            self._fence, self._fence_line = fence, line
            return
        if not line.strip():
            self._finish(end)

    def _finish(self, end: int) -> None:
        """The text from the open block's start to ``end`` is a finished block."""
        source = self._text[self._start:end]
        self._start = end
        if source.strip():
            prefix = self._fence_line if self._fence is not None and not source.lstrip().startswith(
                self._fence_line.strip()) else ""
            self._done.append((f"{self._key}{len(self._done)}", _render(prefix + source)))

    def _cut(self) -> None:
        """The open block is too long to render on every call: freeze it up to its last line break or space."""
        text, start = self._text, self._start
        limit = start + OPEN_LIMIT
        cut = text.rfind("\n", start, limit)
        if cut < 0:
            cut = text.rfind(" ", start, limit)
        cut = limit if cut < 0 else cut + 1
        self._finish(cut)  # in a fenced block, the rest is rendered under the same fence
        if self._scanned < cut:
            self._scanned = cut

    def parts(self) -> list[tuple[str, str]]:
        """(key, HTML) of every block, the open one last."""
        source = self._text[self._start:]
        if source != self._open_source:
            self._open_source = source
            prefix = self._fence_line if self._fence is not None and not source.lstrip().startswith(
                self._fence_line.strip()) else ""
            self._open_html = _render(prefix + source) if source.strip() else ""
        opened = [(f"{self._key}{len(self._done)}", self._open_html)] if self._open_html else []
        return [*self._done, *opened]


def _render(source: str) -> str:
    return markdown_html(visible(source))


class ThoughtPieces:
    """The thoughts as escaped plain text in pieces: finished lines frozen, about ``OPEN_LIMIT`` at a time."""

    def __init__(self, key: str = "t") -> None:
        self._key = key
        self._done: list[tuple[str, str]] = []
        self._start = 0
        self._text = ""

    def update(self, text: str) -> None:
        seen = self._text[max(0, self._start - 64):self._start]
        if len(text) < self._start or text[max(0, self._start - 64):self._start] != seen:
            self.__init__(self._key)
        self._text = text
        while len(text) - self._start > OPEN_LIMIT:
            limit = self._start + OPEN_LIMIT
            cut = text.rfind("\n", self._start, limit)
            cut = limit if cut < 0 else cut + 1
            self._done.append((f"{self._key}{len(self._done)}", _plain(text[self._start:cut])))
            self._start = cut

    def parts(self) -> list[tuple[str, str]]:
        rest = self._text[self._start:]
        return [*self._done, *([(f"{self._key}{len(self._done)}", _plain(rest))] if rest else [])]


def _plain(text: str) -> str:
    return f'<span style="white-space:pre-wrap">{escape(visible(text))}</span>'
