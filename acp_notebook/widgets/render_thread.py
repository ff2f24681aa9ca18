"""The render thread: where views draw their widgets and publish their outputs, off the protocol loop.

Every connection of the process is handled on the one background loop (``_loop``). A view that
drew there (a long reply turned into Markdown, a big table of frames, a slow frontend link)
would hold up every frame of every agent meanwhile. So the loop only notes what changed and asks
for a render; the renders run here, on one daemon thread ("acp-notebook-render"), started on
first use and kept for the life of the process. One thread, so renders of one view never overlap
and run in the order they were asked for at the same due time; a slow view delays other views'
renders, never a frame.

``call_later(delay, fn)`` runs ``fn`` here after ``delay`` seconds; ``submit(fn)`` as soon as
possible, with a future of its outcome. ``Throttle`` coalesces a view's render requests into at
most one render per interval. A callable that raises is logged and the thread goes on.

Threads: the queue of due callables is guarded by a condition; any thread may add to it, only
the render thread takes from it.

Process-wide, on purpose: ``_worker``, the one render thread (one, so renders keep their order and
a view never draws on two threads at once). The object is made at import and holds only an empty
queue and a condition: no thread runs and nothing of the interpreter changes until the first render
is asked for, which starts its daemon thread (again if that thread ever died). It is never dropped:
the thread waits for work until the interpreter exits. Any thread adds to its queue; only its own
thread takes from it.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Throttle", "call_later", "in_render_thread", "submit"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class _RenderThread:
    """A single worker running callables at their due time (monotonic clock), earliest first."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, Callable[[], Any]]] = []
        self._order = itertools.count()  # ties run in the order they were added
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def call_later(self, delay: float, fn: Callable[[], Any]) -> None:
        with self._changed:
            heapq.heappush(self._due, (time.monotonic() + max(0.0, delay), next(self._order), fn))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="acp-notebook-render", daemon=True)
                self._thread.start()
            self._changed.notify()

    def current(self) -> bool:
        return threading.current_thread() is self._thread

    def _next(self) -> Callable[[], Any]:
        with self._changed:
            while True:
                wait = self._due[0][0] - time.monotonic() if self._due else None
                if wait is not None and wait <= 0:
                    return heapq.heappop(self._due)[2]
                self._changed.wait(wait)

    def _run(self) -> None:
        while True:
            fn = self._next()
            try:
                fn()
            except Exception:  # noqa: BLE001 - one view's failure must not stop every other view's renders
                logger.exception("a render failed")
            # Not kept while waiting for the next: it may hold a whole view, its turn and its agent.
            del fn


_worker = _RenderThread()


def call_later(delay: float, fn: Callable[[], Any]) -> None:
    """Run ``fn`` on the render thread in ``delay`` seconds (any thread)."""
    _worker.call_later(delay, fn)


def submit(fn: Callable[[], T]) -> concurrent.futures.Future[T]:
    """Run ``fn`` on the render thread as soon as it is free; the future holds its result or error."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
            future.set_exception(exc)

    _worker.call_later(0.0, run)
    return future


def in_render_thread() -> bool:
    return _worker.current()


class Throttle:
    """Runs ``render`` on the render thread at most once per ``interval`` seconds.

    Requests made while a render is pending merge into it; the render after the last request
    always happens (the pending flag is cleared before the render reads anything), so the final
    state is never lost. ``request`` may be called from any thread and never blocks on a render.
    """

    def __init__(self, render: Callable[[], None], interval: float) -> None:
        self._render = render
        self.interval = max(0.0, float(interval))
        self._lock = threading.Lock()
        self._pending = False
        self._last = 0.0
        self.renders = 0

    def request(self) -> None:
        with self._lock:
            if self._pending:
                return
            self._pending = True
            delay = self._last + self.interval - time.monotonic()
        call_later(delay, self._fire)

    def _fire(self) -> None:
        with self._lock:
            self._pending = False
            self._last = time.monotonic()
            self.renders += 1
        self._render()
