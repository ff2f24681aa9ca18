"""Things made once: SharedStart, an async start shared by concurrent callers; MadeOnFirstUse, a process-wide
object made on its first use from any thread.

SharedStart starts something (an agent) once, however many callers ask for it at the same time.

The proxy's backends (``proxy.backend.Backend.ensure_ready``) and a sweep's agents
(``sweep.trial.AgentPool.get``) both need the same thing: the first caller starts the agent in a
task of its own, everyone who asks meanwhile awaits that same start, and a caller that gives up
(its deadline, its cancellation) never aborts the start for the others. What differs is what
happens once a start has ended, and that is the caller's policy, ``renew``: whether the next
caller gets a fresh start or the finished one's outcome (its result, or its failure again).

MadeOnFirstUse holds one of the package's process-wide objects (the current-session default, the agent
registry) that importing the package must not make: the first ``get()`` makes it, under a lock so that two
threads asking first share one, and it lives until the interpreter exits.

Threads: a SharedStart belongs to one event loop and is used only on it; a MadeOnFirstUse is used from any.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

__all__ = ["MadeOnFirstUse", "SharedStart"]

T = TypeVar("T")


class MadeOnFirstUse(Generic[T]):
    """The object ``make()`` returns, made by the first ``get()`` (any thread) and the same ever after."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._made: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        with self._lock:
            if self._made is None:
                self._made = self._make()
            return self._made

    @property
    def made(self) -> bool:
        """Whether ``get()`` has made it yet (without making it)."""
        return self._made is not None


class SharedStart(Generic[T]):
    """One start at a time, shared by every caller that asks while it runs.

    ``renew(task)`` is asked, when a caller comes after a start has ended, whether to start again
    (True) or to hand that caller the ended start's outcome (False): e.g. "again if it failed", or
    "again only if what it started has died since". A cancelled start is always renewed. ``name``
    names the start's task (for debugging)."""

    def __init__(self, renew: Callable[[asyncio.Task[T]], bool], *, name: str = "start") -> None:
        self._renew = renew
        self._name = name
        self.task: asyncio.Task[T] | None = None  # the latest start, running or ended

    def begin(self, start: Callable[[], Coroutine[Any, Any, T]]) -> asyncio.Task[T]:
        """The running start, or the ended one to reuse, or a new one made now with ``start()``
        (on the running loop). Await it shielded (``get`` does), or a caller's cancellation cancels it."""
        task = self.task
        if task is None or (task.done() and (task.cancelled() or self._renew(task))):
            task = self.task = asyncio.get_running_loop().create_task(start(), name=self._name)
        return task

    async def get(self, start: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """The outcome of ``begin(start)``. Cancelling the caller leaves the start running for the others."""
        return await asyncio.shield(self.begin(start))

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def failure(self) -> BaseException | None:
        """The error the last start ended with; None while it runs, after a success, or before any start."""
        task = self.task
        if task is None or not task.done() or task.cancelled():
            return None
        return task.exception()

    async def settle(self) -> None:
        """Wait for a running start to end, whatever its outcome: the owner closes down and must know everything
        its starts opened. Cancelling this wait cancels the start too, and returns (the owner goes on closing)."""
        if self.task is not None and not self.task.done():
            with contextlib.suppress(BaseException):
                await self.task

    def cancel(self) -> None:
        """Abort a running start (the owner shuts down)."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
