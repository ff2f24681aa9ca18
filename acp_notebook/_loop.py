"""The one background event-loop thread that owns every connection, and the bridges to it."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from .errors import AcpTimeoutError

T = TypeVar("T")

# How long a cancelled call may take to clean up (send session/cancel, see the turn end) before we return.
CLEANUP_WAIT_S = 6.0

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_shutdown_hooks: list[Callable[[], Awaitable[None]]] = []


def get_loop() -> asyncio.AbstractEventLoop:
    """The background loop, started on first use. It lives until interpreter exit."""
    global _loop, _thread
    with _lock:
        if _loop is not None and _thread is not None and _thread.is_alive():
            return _loop
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=run, name="acp-notebook-loop", daemon=True)
        thread.start()
        ready.wait()
        _loop, _thread = loop, thread
        return loop


def run_main(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to its end on a fresh event loop in this thread: the loop of a process of ours
    that forwards frames (the proxy). uvloop's where it is installed (a dependency on Linux and
    macOS): here it takes about a quarter off the time a frame spends crossing a Python process;
    asyncio's otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


class _SwitchInterval:
    """The interpreter's thread switch interval while turns stream (``streaming``).

    The loop thread and the kernel's own threads (shell, iopub, control) share one interpreter
    lock. While a reply streams faster than the loop thread takes it, that thread always wants
    the lock, and every time a kernel thread needs it, it waits out the switch interval: Python's
    5 ms, and running one trivial cell takes dozens of such hand-overs. At 1 ms a cell run
    mid-stream waits a fifth as long (bench/README.md, benchmark 3) and the stream takes a few
    percent longer. The interval is lowered when the first turn starts and put back when the last
    one ends; it is never raised, and a value changed by someone else meanwhile is left alone.

    Threads: ``streaming`` is entered and left on the loop thread; ``target`` is set from any
    thread (the magics' configuration); a lock keeps the pair of them consistent.
    """

    def __init__(self, target: float) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._streaming = 0
        self._saved: float | None = None  # the value found when the first turn started
        self._set: float | None = None  # the value we put in its place

    @contextlib.contextmanager
    def streaming(self) -> Iterator[None]:
        with self._lock:
            self._streaming += 1
            if self._streaming == 1 and self.target > 0 and sys.getswitchinterval() > self.target:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(self.target)
                self._set = sys.getswitchinterval()  # as the interpreter rounded it
        try:
            yield
        finally:
            with self._lock:
                self._streaming -= 1
                if self._streaming == 0 and self._saved is not None:
                    if sys.getswitchinterval() == self._set:
                        sys.setswitchinterval(self._saved)
                    self._saved = self._set = None


switch_interval = _SwitchInterval(0.001)


def in_loop_thread() -> bool:
    return _thread is not None and threading.current_thread() is _thread


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Schedule ``coro`` on the background loop from any thread, in a fresh context.

    A task inherits the context of whoever scheduled it, and ipykernel (7+) keeps the request
    being executed in a context variable that stamps every message it sends. An agent started
    in cell 1 would carry cell 1's request for ever, so widget updates caused by its frames would
    claim that old cell, and tools that collect a cell's messages by parent (nbclient) would drop
    them. In an empty context ipykernel falls back to the request it is handling now.
    """
    return _fresh_context().run(asyncio.run_coroutine_threadsafe, coro, get_loop())


def _fresh_context() -> contextvars.Context:
    return contextvars.Context()


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None, *, what: str = "the request") -> T:
    """Run ``coro`` on the background loop and wait for it from a foreign thread.

    Works whatever the calling thread's loop is doing (a running kernel loop,
    nest_asyncio): the caller only blocks on a concurrent future. On timeout or
    KeyboardInterrupt the coroutine is cancelled on the loop before we return.
    """
    if in_loop_thread():
        coro.close()
        raise RuntimeError(
            "A blocking acp-notebook call was made on the background loop thread; use the async twin (a...)."
        )
    finished = threading.Event()

    async def tracked() -> T:
        try:
            return await coro
        finally:
            finished.set()

    future = submit(tracked())
    try:
        return future.result(timeout)
    except AcpTimeoutError:
        # The operation's own timeout, naming its cause: since Python 3.11 concurrent.futures.TimeoutError
        # is the builtin TimeoutError, which AcpTimeoutError is too, so the clause below would hide it.
        raise
    except concurrent.futures.TimeoutError:
        _cancel_and_settle(future, finished)
        raise AcpTimeoutError(f"{what} did not finish within {timeout:g} s") from None
    except KeyboardInterrupt:
        _cancel_and_settle(future, finished)
        raise


def _cancel_and_settle(future: concurrent.futures.Future[Any], finished: threading.Event) -> None:
    """Cancel the coroutine and give its cleanup (a session/cancel, say) a bounded moment to run."""
    future.cancel()
    finished.wait(CLEANUP_WAIT_S)


async def run_async(coro: Coroutine[Any, Any, T], timeout: float | None = None, *, what: str = "the request") -> T:
    """Await ``coro`` running on the background loop from any other loop (top-level await in a cell)."""
    if in_loop_thread():
        return await _with_timeout(coro, timeout, what)
    future = submit(_with_timeout(coro, timeout, what))
    wrapped = asyncio.wrap_future(future)
    try:
        return await wrapped
    except asyncio.CancelledError:
        future.cancel()
        raise


async def _with_timeout(coro: Coroutine[Any, Any, T], timeout: float | None, what: str) -> T:
    if timeout is None:
        return await coro
    try:
        return await asyncio.wait_for(coro, timeout)
    except AcpTimeoutError:
        raise  # the operation's own timeout, naming its cause (it is an asyncio.TimeoutError too)
    except asyncio.TimeoutError:
        raise AcpTimeoutError(f"{what} did not finish within {timeout:g} s") from None


def call_soon(callback: Callable[..., Any], *args: Any) -> None:
    """Run a plain callback on the loop thread (thread-safe)."""
    get_loop().call_soon_threadsafe(callback, *args, context=_fresh_context())


def on_shutdown(hook: Callable[[], Awaitable[None]]) -> None:
    """Register a coroutine function to run on the loop at interpreter exit (closing agents)."""
    _shutdown_hooks.append(hook)


def remove_shutdown_hook(hook: Callable[[], Awaitable[None]]) -> None:
    try:
        _shutdown_hooks.remove(hook)
    except ValueError:
        pass


@atexit.register
def _shutdown() -> None:
    loop = _loop
    if loop is None or not loop.is_running():
        return
    hooks = list(_shutdown_hooks)
    if hooks:

        async def close_all() -> None:
            await asyncio.gather(*(hook() for hook in hooks), return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(close_all(), loop).result(10)
        except Exception:  # noqa: BLE001 - at exit, a failed close must not mask the real exit status
            pass
    loop.call_soon_threadsafe(loop.stop)
