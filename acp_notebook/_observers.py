"""Observers: a list of callbacks that any thread may join or leave while the loop thread emits.

Used by SessionState and Turn, whose changes happen on the background loop thread while
views subscribe from the kernel thread. ``emit`` calls a snapshot of the callbacks, so a
callback may unsubscribe itself, and one that raises is logged without stopping the others.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Observers"]

logger = logging.getLogger(__name__)

E = TypeVar("E")


class Observers(Generic[E]):
    def __init__(self) -> None:
        self._callbacks: list[Callable[[E], None]] = []
        self._lock = threading.Lock()

    def add(self, callback: Callable[[E], None]) -> Callable[[], None]:
        """Subscribe; returns the function that unsubscribes (safe to call twice)."""
        with self._lock:
            self._callbacks.append(callback)

        def remove() -> None:
            with self._lock:
                if callback in self._callbacks:
                    self._callbacks.remove(callback)

        return remove

    def emit(self, event: E) -> None:
        with self._lock:
            callbacks = list(self._callbacks)
        for callback in callbacks:
            try:
                callback(event)
            except Exception:  # noqa: BLE001 - a broken view must not break the protocol loop
                logger.exception("an observer failed on %r", event)

    def __len__(self) -> int:
        return len(self._callbacks)
