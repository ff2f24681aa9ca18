"""Text for a terminal: its width, tables that fit it, help text wrapped to it, and whether to colour.

- ``width()``: the terminal's columns (``shutil.get_terminal_size``: ``$COLUMNS`` first, then the
  terminal of stdout, else 80 for a pipe or a file).
- ``table(header, rows, width)``: a text table no wider than ``width``. Columns of prose (commands,
  messages) are wrapped inside their cells; columns of figures are never broken: when they do not
  fit side by side the table continues in blocks below, each repeating the first column.
- ``ParagraphHelpFormatter``: argparse help whose description and epilog paragraphs are wrapped to
  the terminal, while indented lines (examples) are kept as written.
- ``colour_on(stream)``: colours only when nothing says no: ``$NO_COLOR`` unset, IPython's colour
  scheme not ``NoColor`` (``%colors NoColor``, ``ipython --colors=NoColor``), and the output a
  terminal or a Jupyter kernel's front end.

Pure functions of their arguments and the environment; any thread.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import textwrap
from collections.abc import Collection, Sequence
from typing import Any, TextIO

__all__ = ["ParagraphHelpFormatter", "colour_on", "table", "width", "wrap"]

GAP = "  "
MIN_WRAPPED = 12  # a wrapped column keeps at least this many characters a line


def width() -> int:
    return max(20, shutil.get_terminal_size().columns)


def wrap(text: str, columns: int | None = None, indent: str = "  ") -> str:
    """A line of prose wrapped to the terminal, continuation lines indented."""
    return textwrap.fill(text, columns or width(), subsequent_indent=indent, break_on_hyphens=False)


def table(header: Sequence[str], rows: Sequence[Sequence[str]], columns: int | None = None, *,
          wrapped: Collection[int] = (), right: Collection[int] = (), rule: bool = False) -> str:
    """``header`` and ``rows`` as aligned text within ``columns`` characters.

    ``wrapped``: indexes of prose columns, narrowed (widest first) and wrapped until the table fits;
    ``right``: indexes aligned right; ``rule``: a line of dashes under the header. What still does
    not fit continues in blocks of columns below, each starting with column 0."""
    limit = columns or width()
    grid = [list(header), *(list(row) for row in rows)]
    widths = [max(len(line[i]) for line in grid) for i in range(len(header))]
    _narrow(widths, [max(MIN_WRAPPED, len(header[i])) for i in range(len(header))], wrapped, limit)
    blocks: list[list[int]] = [[0]]
    for index in range(1, len(header)):
        if _span(widths, blocks[-1] + [index]) > limit and len(blocks[-1]) > 1:
            blocks.append([0])
        blocks[-1].append(index)
    return "\n\n".join(_render(grid, widths, block, wrapped, right, rule) for block in blocks)


def _span(widths: Sequence[int], indexes: Sequence[int]) -> int:
    return sum(widths[i] for i in indexes) + len(GAP) * (len(indexes) - 1)


def _narrow(widths: list[int], floors: Sequence[int], wrapped: Collection[int], limit: int) -> None:
    while _span(widths, range(len(widths))) > limit:
        candidates = [i for i in wrapped if widths[i] > floors[i]]
        if not candidates:
            return
        widths[max(candidates, key=lambda i: widths[i])] -= 1  # the widest first, so wrapped columns even out


def _render(grid: Sequence[Sequence[str]], widths: Sequence[int], block: Sequence[int],
            wrapped: Collection[int], right: Collection[int], rule: bool) -> str:
    lines = []
    for number, row in enumerate(grid):
        cells = {i: (textwrap.wrap(row[i], widths[i], break_on_hyphens=False) or [""]) if i in wrapped else [row[i]]
                 for i in block}
        for depth in range(max(len(c) for c in cells.values())):
            parts = []
            for i in block:
                text = cells[i][depth] if depth < len(cells[i]) else ""
                parts.append(text.rjust(widths[i]) if i in right else text.ljust(widths[i]))
            lines.append(GAP.join(parts).rstrip())
        if number == 0 and rule:
            lines.append(GAP.join("-" * widths[i] for i in block))
    return "\n".join(lines)


class ParagraphHelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Description and epilog wrapped to the help's width paragraph by paragraph; indented lines kept."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out: list[str] = []
        for paragraph in re.split(r"\n\s*\n", text.strip("\n")):
            lines = paragraph.splitlines()
            if any(line.startswith(" ") for line in lines[1:]) or paragraph.startswith(" "):
                kept = [line for line in lines if not line.startswith(" ")]
                head = textwrap.fill(" ".join(kept), width, initial_indent=indent, subsequent_indent=indent) \
                    if kept else ""
                out.append("\n".join(([head] if head else []) + [indent + line for line in lines
                                                                 if line.startswith(" ")]))
            else:
                out.append(textwrap.fill(" ".join(line.strip() for line in lines), width,
                                         initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False))
        return "\n\n".join(out)


def colour_on(stream: TextIO | Any = None) -> bool:
    """Whether ANSI colours may be written (see the module's docstring)."""
    if os.environ.get("NO_COLOR"):
        return False
    shell = _ipython()
    if shell is not None:
        if str(getattr(shell, "colors", "")).lower() == "nocolor":
            return False
        if getattr(shell, "kernel", None) is not None:
            return True  # a kernel's stdout is no terminal, but the front end renders the colours
    target = stream if stream is not None else sys.stdout
    isatty = getattr(target, "isatty", None)
    return bool(isatty and isatty())


def _ipython() -> Any:
    module = sys.modules.get("IPython")  # never imported here: only a running IPython has a setting
    getter = getattr(module, "get_ipython", None)
    return getter() if getter else None
