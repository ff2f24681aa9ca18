"""How kernel work is stopped on the kernel thread, code that swallows interrupts included.

A stop (a tool's timeout, a cancelled call, the user's kernel interrupt) reaches the kernel thread as
SIGINT: a real signal also ends a blocking call (``time.sleep``, a socket read), and our handler runs on
the kernel thread at the next point Python checks for signals. Work that marks the code to stop as a
*region* (``Stop.run_region``: the agent's code, not our bookkeeping around it) is stopped there only:

- the handler raises ``Stopped`` (a KeyboardInterrupt) only in a frame of the region; one that lands in our
  own code before the region starts is kept for it, one after it ends is absorbed, so a stop never leaks
  into the user's next cell;
- and it installs a trace function on the kernel thread, set as the local tracer of every frame of the
  region on the stack: from then on every line and call in the region raises ``Stopped`` again, so code
  that catches it (``except BaseException: pass``, a loop in ``finally:``) meets it at its next line,
  outside the ``try`` that caught it. CPython drops a trace function that raises; a ``Stopped`` that is
  caught and let go puts the tracer back when it is freed (``__del__``), and each signal does too.

Nothing is installed until a stop is asked: the code runs at full speed (no trace function) until then.
Work without a region (the reading tools) gets a plain KeyboardInterrupt wherever it is.
What cannot be stopped here: a call in C that neither returns on a signal nor checks for one (the stop
lands when it returns), threads and processes the code started.

Threads: a ``Stop`` is made by the requester, ``request`` is called from the background loop (under its
work's lock); ``run_region``, the signal handler and the tracer run on the kernel thread (the main
thread), where ``current`` (the innermost work running there) is set and reset by the pump.

Process-wide: ``_running``, the stops of the work running on the kernel thread, innermost last.
One per process because the kernel (main) thread and its SIGINT handler are. Empty at import and
whenever no agent work runs; pushed and popped on the kernel thread as ``run_region`` blocks start and
end (``take_sigint`` and ``give_back_sigint``), read by the signal handler there.
"""

from __future__ import annotations

import _signal
import ctypes
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

__all__ = ["Stop", "Stopped", "give_back_sigint", "restore_handled_exception", "take_sigint"]

T = TypeVar("T")

# Captured at import: the agent's code may find these module attributes replaced while it runs (the exit
# refusals guard signal's and _signal's), and an agent that replaced sys.settrace must not keep the tracer
# out. signal.signal looks _signal.signal up when called, so the C functions themselves are kept.
_settrace = sys.settrace
_gettrace = sys.gettrace
_set_signal = _signal.signal
_get_signal = _signal.getsignal


class Stopped(KeyboardInterrupt):
    """Raised in a region's code by its stop. When code catches it and lets it go, the stop's tracer is put
    back (CPython removed it when it raised), so the next line raises again."""

    def __init__(self, stop: Stop | None = None) -> None:
        super().__init__("stopped")
        self._stop = stop

    def __del__(self) -> None:
        stop = self._stop
        if stop is not None and stop.region_active and stop.requested and _on_kernel_thread():
            stop.arm(sys._getframe(1))


class Stop:
    """The stop of one piece of kernel work: whether one was asked and why, and its region.

    ``requested``/``reason``: set once by the first ``request`` (``reason`` None: the user's interrupt).
    ``finished``: the work is over; later signals are absorbed.
    """

    def __init__(self, *, in_region: bool) -> None:
        self.in_region = in_region
        self.requested = False
        self.reason: str | None = None
        self.finished = False
        self.region_active = False
        self._base: FrameType | None = None  # the frame that runs the region (kernel thread)
        self._armed = False

    def request(self, reason: str | None) -> None:
        """Ask for the stop (any thread); the first reason is kept."""
        if not self.requested:
            self.reason, self.requested = reason, True

    def run_region(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` as the code this stop stops (kernel thread)."""
        self._base = sys._getframe()
        previous = _gettrace()
        self.region_active = True
        try:
            if self.requested:  # asked before the region began: its first call raises
                self.arm(None)
            return fn()
        finally:
            self.region_active = False  # first: nothing raises from here on
            if self._armed:
                _settrace(previous)
                self._armed = False
            self._base = None  # the frame holds this object: no cycle left behind

    def inside(self, frame: FrameType | None) -> bool:
        """Whether ``frame`` runs the region's code (above its base; our own handler and finalizer are not)."""
        base = self._base
        if not self.region_active or base is None or frame is base:
            return False
        while frame is not None:
            if frame.f_code in _OURS:
                return False
            if frame is base:
                return True
            frame = frame.f_back
        return False

    def arm(self, frame: FrameType | None) -> None:
        """Install the tracer on the kernel thread and on the region's frames from ``frame`` down (kernel
        thread; ``frame`` None: only the tracer, for calls made from the region's base)."""
        base = self._base
        if not self.region_active or base is None:
            return
        frames = []
        while frame is not None and frame is not base:
            frames.append(frame)
            frame = frame.f_back
        if frames and frame is None:
            return  # not the region's stack
        self._armed = True
        _settrace(self._trace)
        for each in frames:
            if each.f_code not in _OURS:
                each.f_trace = self._trace

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if not self.region_active or not self.requested or not self.inside(frame):
            return None
        if event == "exception":
            # The exception being raised is (most often) our own: raising here would spend the tracer before
            # the line that catches it, where raising again is what gets out of the ``try``.
            return self._trace
        raise Stopped(self)

    def on_sigint(self, frame: FrameType | None) -> None:
        """What SIGINT does while this work runs (kernel thread): stop the region, or the whole work."""
        if self.finished:
            return  # landed after the work: absorbed
        self.request(None)  # the user's interrupt, unless one of ours came first
        if not self.in_region:
            raise KeyboardInterrupt
        if not self.region_active:
            return  # before the region: it raises when it starts; after it: absorbed
        self.arm(frame)
        if self.inside(frame):
            raise Stopped(self)


def restore_handled_exception(handled: BaseException | None) -> None:
    """Put back the exception the kernel thread was handling when its work began (kernel thread; call it
    outside any ``except`` or ``finally`` block, where the handled exception is the caller's own).

    Seen with ``contextlib.suppress(BaseException)`` in a loop: a stop raised by the tracer while the
    ``with`` statement hands the previous stop to the context manager's ``__exit__`` leaves CPython 3.11's handled
    exception set to that ``Stopped`` after the region has ended: every later ``except`` and traceback on
    the thread would chain to it ("During handling of the above exception..."), the user's next cells'
    included. Python code cannot reset it; the C API's PyErr_SetHandledException (3.11+) can.
    """
    if sys.exc_info()[1] is handled or sys.version_info < (3, 11):
        return
    set_handled = ctypes.pythonapi.PyErr_SetHandledException
    set_handled.argtypes, set_handled.restype = [ctypes.py_object], None
    set_handled(handled)  # None clears it


# The work running on the kernel thread now, innermost last (a tool call can run inside our wait inside
# another's code). Kernel thread only.
_running: list[Stop] = []


def _on_sigint(_signum: int, frame: FrameType | None) -> None:
    if _running:
        _running[-1].on_sigint(frame)


_OURS = {Stopped.__del__.__code__, _on_sigint.__code__, Stop.on_sigint.__code__, Stop.arm.__code__}


def _on_kernel_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def take_sigint(stop: Stop) -> Any:
    """Route SIGINT to ``stop`` while its work runs (kernel thread); what to hand ``give_back_sigint``.

    A handler Python did not install (None) cannot be put back: then SIGINT is left alone, as before."""
    previous = _get_signal(signal.SIGINT)
    _running.append(stop)
    if previous is None:
        return None
    if previous is not _on_sigint:
        _set_signal(signal.SIGINT, _on_sigint)
    return previous


def give_back_sigint(stop: Stop, previous: Any) -> None:
    """Undo ``take_sigint`` once ``stop``'s work is over (kernel thread)."""
    stop.finished = True
    if _running and _running[-1] is stop:
        _running.pop()
    elif stop in _running:
        _running.remove(stop)
    if previous is not None and previous is not _on_sigint:
        _set_signal(signal.SIGINT, previous)
