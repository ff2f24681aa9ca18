"""Progress display for sweeps: an ipywidgets bar in notebooks, a text bar on terminals, or nothing.

Every display says how many trials are done and failed, per model too, the time elapsed and an
estimate of the time left; when the sweep ends, one summary line. In a notebook the bar is shown
through ``LiveDisplay``: its saved form is that line (text and HTML), not the widget's repr, and
once the sweep is over the output is the final summary alone.

Threads: ``start`` and ``close`` run on the caller's thread, ``finished``/``stopped`` on the
background loop thread; each bar's own lock orders the counters and redraws between them.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from html import escape
from typing import Any, TextIO, Union

from ..widgets._html import widget_bundle

__all__ = ["NullProgress", "Progress", "TextProgress", "WidgetProgress", "make_progress"]


def clock(seconds: float) -> str:
    """1:05, 12:00, 1:02:03."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Progress:
    """Counts finished and failed trials, per model too, and the time; subclasses draw them.

    ``start`` and ``close`` run on the caller's thread; ``finished`` and ``stopped`` run on the
    background loop thread as each trial ends, so drawing must be quick and must not block.
    """

    def __init__(self) -> None:
        self.total = 0
        self.skipped = 0
        self.done = 0
        self.failed = 0
        self.stop_reason: str | None = None
        self.per_model: dict[str, list[int]] = {}  # model -> [ok, failed]
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self._lock = threading.Lock()

    def start(self, total: int, skipped: int = 0) -> None:
        self.total, self.skipped, self.done, self.failed = total, skipped, 0, 0
        self.per_model = {}
        self.started_at, self.ended_at = time.monotonic(), None
        self._draw(None)

    def finished(self, row: Mapping[str, Any]) -> None:
        with self._lock:
            self.done += 1
            counts = self.per_model.setdefault(str(row.get("model", "?")), [0, 0])
            if row.get("status") != "ok":
                self.failed += 1
                counts[1] += 1
            else:
                counts[0] += 1
            self._draw(row)

    def stopped(self, reason: str) -> None:
        """No new trials will start (e.g. the cost budget is spent); those running still finish."""
        with self._lock:
            self.stop_reason = reason
            self._draw(None)

    def close(self) -> None:
        """Called once the sweep is over (or was interrupted)."""
        self.ended_at = time.monotonic()

    @property
    def elapsed(self) -> float:
        if self.started_at is None:
            return 0.0
        return (self.ended_at if self.ended_at is not None else time.monotonic()) - self.started_at

    @property
    def eta(self) -> float | None:
        """Seconds left at the pace so far; None before the first trial ends."""
        if not self.done or self.done >= self.total:
            return None
        return self.elapsed / self.done * (self.total - self.done)

    def models_line(self) -> str:
        parts = []
        for model, (ok, failed) in self.per_model.items():
            parts.append(f"{model} {ok} ok" + (f" {failed} failed" if failed else ""))
        return ", ".join(parts)

    def describe(self) -> str:
        text = f"{self.done}/{self.total} finished, {self.failed} failed"
        if self.skipped:
            text += f" ({self.skipped} already done)"
        if self.stop_reason:
            text += f"; stopped: {self.stop_reason}"
        return text

    def timing(self) -> str:
        eta = self.eta
        return f"{clock(self.elapsed)} elapsed" + (f", about {clock(eta)} left" if eta is not None else "")

    def summary(self) -> str:
        """The one line that stays when the sweep is over."""
        ran = f"{self.done} of {self.total} trial{'s' if self.total != 1 else ''} in {clock(self.elapsed)}"
        if self.done < self.total:
            ran += f" ({self.total - self.done} not run)"
        parts = [f"sweep: {ran}", self.models_line()]
        if self.skipped:
            parts.append(f"{self.skipped} already done before")
        if self.stop_reason:
            parts.append(f"stopped: {self.stop_reason}")
        return " · ".join(p for p in parts if p)

    def _draw(self, row: Mapping[str, Any] | None) -> None:
        """Show the counts; ``row`` is the trial that just ended (None at the start or when stopped)."""


class NullProgress(Progress):
    pass


class TextProgress(Progress):
    """A bar redrawn in place on a terminal; on a pipe or a log file, one line per finished trial."""

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
            self.stream.write(f"\rsweep [{self._bar()}] {self.describe()}, {self.timing()}{last}\x1b[K")
            self._drawn = True
        elif row is None and self.stop_reason:
            self.stream.write(f"sweep: stopped starting trials: {self.stop_reason}\n")
        elif row is None:
            self.stream.write(f"sweep: {self.total} trials to do" + (f", {self.skipped} already done" if self.skipped
                                                                        else "") + "\n")
        else:
            outcome = row.get("status")
            if outcome == "ok" and isinstance(row.get("duration_s"), (int, float)):
                outcome = f"ok in {row['duration_s']:.2f} s"
            elif row.get("error"):
                outcome = f"{outcome}: {str(row['error'])[:120]}"
            self.stream.write(f"sweep [{self.done}/{self.total}] {row.get('model')} sample {row.get('sample_id')} "
                              f"repeat {row.get('repeat')}: {outcome}\n")
        self.stream.flush()

    def close(self) -> None:
        super().close()
        if self.live and self._drawn:
            self.stream.write("\n")
        self.stream.write(self.summary() + "\n")
        self.stream.flush()


class WidgetProgress(Progress):
    """An ipywidgets IntProgress with a label; displayed by ``start`` in the cell that runs the sweep.

    Shown through a LiveDisplay: the output also carries the progress line as text and HTML, kept
    current, and ``close`` leaves the one-line summary as the saved output."""

    def __init__(self) -> None:
        super().__init__()
        # ipywidgets (and IPython's display below) only for a bar drawn in a notebook: a sweep run from a
        # terminal never loads them.
        import ipywidgets as widgets

        self.bar = widgets.IntProgress(value=0, min=0, max=1, description="sweep", bar_style="info",
                                       layout=widgets.Layout(width="320px"))
        self.label = widgets.HTML(value="")
        self.box = widgets.HBox([self.bar, self.label])
        self.live: Any = None

    def start(self, total: int, skipped: int = 0) -> None:
        super().start(total, skipped)
        if self.live is None:
            from ..widgets.display import LiveDisplay  # IPython's display machinery: see __init__

            self.live = LiveDisplay(self._bundle)
            self.live.show()

    def _lines(self) -> list[str]:
        return [self.describe(), self.models_line(), self.timing()]

    def _bundle(self, final: bool, reason: str) -> Any:
        from ..widgets.display import Bundle  # IPython's display machinery: see __init__

        text = self.summary() if final else " · ".join(p for p in self._lines() if p)
        forms = {"text/plain": text, "text/html": f'<div class="acpnb-sweep-progress">{escape(text)}</div>'}
        return Bundle({**({} if final else widget_bundle(self.box)), **forms})

    def _draw(self, row: Mapping[str, Any] | None) -> None:
        # Widget traits may be set from the loop thread: ipykernel sends comm messages thread-safely.
        with self.bar.hold_sync():
            self.bar.max = max(self.total, 1)
            self.bar.value = self.done if self.total else 1
            if self.done >= self.total:
                self.bar.bar_style = "success" if self.failed == 0 else ("danger" if self.failed == self.total
                                                                         else "warning")
            elif self.failed or self.stop_reason:
                self.bar.bar_style = "warning"
        self.label.value = escape(" · ".join(p for p in self._lines() if p))
        if self.live is not None:
            self.live.refresh()

    def close(self) -> None:
        super().close()
        if self.live is not None:
            self.live.finalize()
            from ..widgets.display import close_widget_tree  # IPython's display machinery: see __init__

            close_widget_tree(self.box)


ProgressLike = Union[bool, str, Progress, None]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where widgets can render), False in a terminal IPython or plain Python."""
    try:
        # Asked by every sweep, in a terminal too: IPython is loaded only to ask it.
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
