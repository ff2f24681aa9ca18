"""Progress display for sweeps: an ipywidgets bar in notebooks, a text bar on terminals, or nothing."""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from typing import Any, TextIO, Union

__all__ = ["NullProgress", "Progress", "TextProgress", "WidgetProgress", "make_progress"]


class Progress:
    """Counts finished and failed runs; subclasses draw them.

    ``start`` and ``close`` run on the caller's thread; ``finished`` runs on the
    background loop thread as each run ends, so drawing must be quick and must not block.
    """

    def __init__(self) -> None:
        self.total = 0
        self.skipped = 0
        self.done = 0
        self.failed = 0
        self._lock = threading.Lock()

    def start(self, total: int, skipped: int = 0) -> None:
        self.total, self.skipped, self.done, self.failed = total, skipped, 0, 0
        self._draw(None)

    def finished(self, row: Mapping[str, Any]) -> None:
        with self._lock:
            self.done += 1
            if row.get("status") != "ok":
                self.failed += 1
            self._draw(row)

    def close(self) -> None:
        """Called once the sweep is over (or was interrupted)."""

    def describe(self) -> str:
        text = f"{self.done}/{self.total} finished, {self.failed} failed"
        if self.skipped:
            text += f" ({self.skipped} already done)"
        return text

    def _draw(self, row: Mapping[str, Any] | None) -> None:
        """Show the counts; ``row`` is the run that just ended (None at the start)."""


class NullProgress(Progress):
    pass


class TextProgress(Progress):
    """A bar redrawn in place on a terminal; on a pipe or a log file, one line per finished run."""

    WIDTH = 24

    def __init__(self, stream: TextIO | None = None, *, live: bool | None = None) -> None:
        super().__init__()
        self.stream = stream if stream is not None else sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.live = live if live is not None else bool(isatty and isatty())
        self._drawn = False

    def _bar(self) -> str:
        filled = round(self.WIDTH * self.done / self.total) if self.total else self.WIDTH
        return "#" * filled + "-" * (self.WIDTH - filled)

    def _draw(self, row: Mapping[str, Any] | None) -> None:
        if self.live:
            last = f"  {row.get('model')}: {row.get('status')}" if row else ""
            self.stream.write(f"\rsweep [{self._bar()}] {self.describe()}{last}\x1b[K")
            self._drawn = True
        elif row is None:
            self.stream.write(f"sweep: {self.total} runs to do" + (f", {self.skipped} already done" if self.skipped
                                                                      else "") + "\n")
        else:
            outcome = row.get("status")
            if outcome == "ok" and isinstance(row.get("duration_s"), (int, float)):
                outcome = f"ok in {row['duration_s']:.2f} s"
            elif row.get("error"):
                outcome = f"{outcome}: {str(row['error'])[:120]}"
            self.stream.write(f"sweep [{self.done}/{self.total}] {row.get('model')} prompt {row.get('prompt_index')} "
                              f"repeat {row.get('repeat')}: {outcome}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.live and self._drawn:
            self.stream.write("\n")
            self.stream.flush()


class WidgetProgress(Progress):
    """An ipywidgets IntProgress with a label; displayed by ``start`` in the cell that runs the sweep."""

    def __init__(self) -> None:
        super().__init__()
        import ipywidgets as widgets

        self.bar = widgets.IntProgress(value=0, min=0, max=1, description="sweep", bar_style="info",
                                       layout=widgets.Layout(width="320px"))
        self.label = widgets.HTML(value="")
        self.box = widgets.HBox([self.bar, self.label])
        self._shown = False

    def start(self, total: int, skipped: int = 0) -> None:
        super().start(total, skipped)
        if not self._shown:
            from IPython.display import display

            display(self.box)
            self._shown = True

    def _draw(self, row: Mapping[str, Any] | None) -> None:
        # Widget traits may be set from the loop thread: ipykernel sends comm messages thread-safely.
        with self.bar.hold_sync():
            self.bar.max = max(self.total, 1)
            self.bar.value = self.done if self.total else 1
            if self.done >= self.total:
                self.bar.bar_style = "success" if self.failed == 0 else ("danger" if self.failed == self.total
                                                                         else "warning")
            elif self.failed:
                self.bar.bar_style = "warning"
        self.label.value = self.describe()


ProgressLike = Union[bool, str, Progress, None]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where widgets can render), False in a terminal IPython or plain Python."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def make_progress(progress: ProgressLike) -> Progress:
    """None: a widget in notebooks, a text bar elsewhere. False: none. True: the automatic choice.
    "widget" / "text" force one; a Progress instance is used as it is."""
    if isinstance(progress, Progress):
        return progress
    if progress is False:
        return NullProgress()
    if progress in (None, True):
        progress = "widget" if in_notebook() else "text"
    if progress == "widget":
        try:
            return WidgetProgress()
        except ImportError:
            return TextProgress()
    if progress == "text":
        return TextProgress()
    raise ValueError(f"progress must be True, False, None, 'widget', 'text' or a Progress, not {progress!r}")
