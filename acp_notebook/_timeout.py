"""Deadlines for async code, written once for every Python the package supports, and the one grace a
cancelled turn gets.

``deadline(seconds)`` is ``asyncio.timeout`` where Python has it (3.11+), else a stand-in that
cancels the task at the deadline and raises ``asyncio.TimeoutError`` in its place; ``within``
awaits one awaitable under it (without the extra task ``asyncio.wait_for`` makes: every request
of a connection goes through it).

Threads: the caller's event loop (the task that enters the block).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import Any, TypeVar

__all__ = ["CANCEL_GRACE_S", "deadline", "within"]

T = TypeVar("T")

# How long a cancelled turn may take to end (its agent answering session/cancel) before the caller stops waiting.
CANCEL_GRACE_S = 5.0


@contextlib.asynccontextmanager
async def _stand_in(seconds: float) -> AsyncIterator[None]:
    """`asyncio.timeout` for Python 3.10: cancels the body after `seconds`, raising TimeoutError."""
    task = asyncio.current_task()
    assert task is not None
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    handle = asyncio.get_running_loop().call_later(seconds, expire)
    try:
        yield
    except asyncio.CancelledError:
        if expired:
            raise asyncio.TimeoutError from None
        raise
    finally:
        handle.cancel()


def deadline(seconds: float) -> Any:
    """An async context manager: the block is cancelled after `seconds` and TimeoutError raised."""
    timeout = getattr(asyncio, "timeout", None)
    return timeout(seconds) if timeout is not None else _stand_in(seconds)


async def within(awaitable: Awaitable[T], seconds: float) -> T:
    """The awaitable's result, or TimeoutError after `seconds`."""
    async with deadline(seconds):
        return await awaitable
