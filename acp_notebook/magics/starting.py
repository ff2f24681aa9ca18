"""While ``%acp start`` waits for an agent: a line saying so, with the time spent and how to stop it.

An agent that never answers ``initialize`` used to leave the cell blank until the start timeout.
``starting(name, timeout, call)`` runs the blocking start ``call``; once it has taken longer than
``SHOW_AFTER`` (5) seconds a line appears in the cell ("Starting python... 12 s; Kernel > Interrupt
stops it, it gives up after 60 s"), updated in place once a second (``update_display``), and left
with its outcome when the start ends, so the saved notebook says what happened. A start that ends
sooner shows nothing. A kernel interrupt ends the start (its process is ended by the start's own
clean-up) and the cell with one line, not a KeyboardInterrupt traceback through the package.

Threads: ``starting`` runs on the kernel thread, which blocks in ``call``. The line is drawn by a
ticker thread of its own, in a copy of the cell's context, so ipykernel files its messages under
the cell. Only inside a kernel: a terminal IPython would print each update as a new line.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from html import escape
from typing import Any, TypeVar

from IPython.display import display

from ..errors import AgentStartError
from ..widgets._html import MUTED

__all__ = ["SHOW_AFTER", "starting"]

T = TypeVar("T")
SHOW_AFTER = 5.0  # seconds a start may take before the line appears (a demo start takes under one)
TICK = 1.0


class _Line:
    """The progress line of one start: shown on the first tick, then updated in place."""

    def __init__(self, name: str, timeout: float | None) -> None:
        self.name = name
        self.timeout = timeout
        self.began = time.monotonic()
        self.handle: Any = None
        self.lock = threading.Lock()  # the ticker and the kernel thread both draw

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def draw(self, text: str) -> None:
        bundle = {"text/plain": text, "text/markdown": f"*{text}*",
                  "text/html": f'<div class="acpnb-starting" style="color:{MUTED};padding:2px 4px">{escape(text)}</div>'}
        with self.lock:
            if self.handle is None:
                self.handle = display(bundle, raw=True, display_id=True)
            else:
                self.handle.update(bundle, raw=True)

    def running_text(self) -> str:
        limit = f"; it gives up after {self.timeout:g} s" if self.timeout else ""
        return f"Starting {self.name}... {self.elapsed():.0f} s (Kernel > Interrupt stops it{limit})"


def starting(name: str, timeout: float | None, call: Callable[[], T], *, in_kernel: bool) -> T:
    """``call()`` (a blocking agent start) with the progress line, and a kernel interrupt as one line."""
    line = _Line(name, timeout)
    stop = threading.Event()
    ticker = None
    if in_kernel:
        context = contextvars.copy_context()
        ticker = threading.Thread(target=context.run, args=(_tick, line, stop), name="acp-start-progress",
                                  daemon=True)
        ticker.start()
    outcome = "failed: see the error below"
    try:
        result = call()
        outcome = f"started in {line.elapsed():.0f} s"
        return result
    except KeyboardInterrupt:
        outcome = f"stopped by a kernel interrupt after {line.elapsed():.0f} s"
        raise AgentStartError(f"starting {name!r} was stopped by a kernel interrupt after {line.elapsed():.0f} s; "
                              "its process was ended") from None
    finally:
        stop.set()
        if ticker is not None:
            ticker.join()
            if line.handle is not None:
                line.draw(f"Starting {name}: {outcome}.")


def _tick(line: _Line, stop: threading.Event) -> None:
    if stop.wait(SHOW_AFTER):
        return
    while True:
        line.draw(line.running_text())
        if stop.wait(TICK):
            return
