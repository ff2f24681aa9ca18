"""The one background event-loop thread that owns every connection, and the bridges to it.

Also the kernel-thread pump: work that must run on the kernel thread (the main thread; the only
one that touches the user's namespace), handed over from the background loop by
``on_kernel_thread``. The kernel thread picks such work up wherever it waits: inside our own
blocking waits (``run_sync`` / ``wait``), or, when the kernel is idle or a cell awaits, from the
kernel's own event loop. While a user's cell computes, the work waits its turn. A stop (a timeout,
a cancellation, the user's interrupt) is SIGINT handled by ``_kernelstop`` (work that marks its code with
``run_region``, as run_code does, is stopped there even when it swallows interrupts); work that still
runs after the stop's grace is reported as holding the kernel (``KernelWorkHeld``), and new work is
refused with ``KernelHeld`` until it ends.

Threads: the work queue and each item's state are guarded by locks; items run only on the main
thread; their outcome is handed to the background loop with ``call_soon_threadsafe``.

Process-wide, on purpose (each one per process, none started or changed at import):

- ``_loop`` and ``_thread``: the background loop and its thread. One per process, so that every
  connection's frames are handled in one order. Started by the first call that needs one
  (``get_loop``, under ``_lock``), never at import; stopped at interpreter exit by ``_shutdown``, an
  atexit hook registered at import (so that it runs after the exit hooks of everything imported
  later, which still need the loop) that does nothing if the loop never started. Set only under
  ``_lock``, by the thread that starts the loop.
- ``_shutdown_hooks``: what closes at exit (agents register theirs with ``on_shutdown`` when they
  start and remove it when they close), from any thread; run once, on the loop, by ``_shutdown``.
- The kernel-work pump: ``_kernel_work`` (the queue), ``_kernel_waiters`` (the kernel thread's blocking
  waits to wake), ``_kernel_running`` (the items it has taken, innermost last) and ``_kernel_held`` (work
  that outlived its stop, until it ends). One per process because the kernel (main) thread is; all four
  are guarded by ``_kernel_lock``: appended to from the loop thread, taken and emptied on the kernel thread.
- ``_stopping``: the detached stop tasks, kept (the loop holds only weak references to tasks) until they
  end; changed on the loop thread only.
- ``switch_interval``: the interpreter's thread switch interval is process-wide, so its keeper is too;
  shortened only while turns stream and put back after, on the loop thread (its target is set from the
  magics' configuration, on the kernel thread); importing this module leaves the interval as it is.
"""

from __future__ import annotations

import _thread as low_level_thread  # the module; `_thread` below is the loop thread
import asyncio
import atexit
import concurrent.futures
import contextlib
import contextvars
import queue
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

from ._kernelstop import Stop, give_back_sigint, restore_handled_exception, take_sigint
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
        # uvloop only in a process that runs run_main (the proxy's); no build of it on some platforms.
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
        return wait(future, timeout)
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


# ----------------------------------------------------------------------------------------------
# The kernel-thread pump

# How long a waiter sleeps between looks at its future when nothing wakes it (a safety net only:
# every state change that matters wakes it at once).
_PUMP_POLL_S = 1.0
# How long stopped work may take to end before it is reported as holding the kernel, and how long a late
# interrupt may take to land.
INTERRUPT_GRACE_S = 5.0
_LATE_INTERRUPT_S = 0.05
# A stop signal can be spent before it stops anything: it lands while the kernel thread waits for the
# interpreter lock, and the code then enters a blocking call (a sleep) before Python looks at it. So a
# stop repeats its signal at this interval until the work ends or the grace runs out.
_RESEND_S = 0.2

_PENDING, _RUNNING, _DONE, _WITHDRAWN = "pending", "running", "done", "withdrawn"


class KernelBusy(Exception):
    """The kernel thread did not take the work within its wait: a cell of the user's is running."""


class KernelHeld(Exception):
    """The work was not run: the kernel thread is taken by earlier kernel work (the message says which,
    and whether it ignored a stop)."""


class KernelWorkInterrupted(Exception):
    """The work was stopped by KeyboardInterrupt; ``reason`` is ours ("timeout", "cancelled") or None
    when the interrupt came from elsewhere (the user interrupted the kernel)."""

    def __init__(self, reason: str | None) -> None:
        super().__init__(reason or "interrupted")
        self.reason = reason


class KernelWorkHeld(Exception):
    """The work was asked to stop and still runs after the grace: it holds the kernel thread.

    ``work`` is its KernelWork: ``work.done`` resolves when it ends at last.
    """

    def __init__(self, work: KernelWork) -> None:
        super().__init__(f"{work.what} did not stop")
        self.work = work
        self.reason = work.stop.reason


class KernelWork:
    """One piece of kernel-thread work, and what its requester can follow of it.

    ``state`` moves pending -> running -> done, or pending -> withdrawn (its requester gave up before the
    kernel thread took it), always under ``lock``. ``done`` resolves (on the loop) when ``fn`` returned
    or raised on the kernel thread, and only then; ``held`` resolves when a stop's grace ran out while it
    still ran. ``stop`` (_kernelstop.Stop): its stop; with ``in_region`` the work marks the code to stop
    with ``run_region`` and nothing else of it is interrupted. ``what``: its name in messages.
    Made on the loop that awaits it.
    """

    def __init__(self, fn: Callable[[], Any], *, what: str = "earlier kernel work", in_region: bool = False) -> None:
        self.fn = fn
        self.what = what
        self.loop = asyncio.get_running_loop()
        self.lock = threading.Lock()
        self.state = _PENDING
        self.claimed: asyncio.Future[None] = self.loop.create_future()
        self.done: asyncio.Future[Any] = self.loop.create_future()
        self.done.add_done_callback(_retrieved)  # a requester that gave up never reads it
        self.held: asyncio.Future[None] = self.loop.create_future()
        self.stop = Stop(in_region=in_region)
        self.started_at: float | None = None
        self.interrupt_sent = False

    @property
    def running(self) -> bool:
        return self.state == _RUNNING

    def running_for(self) -> float:
        return time.monotonic() - self.started_at if self.started_at is not None else 0.0

    def claim(self) -> bool:
        with self.lock:
            if self.state != _PENDING:
                return False
            self.state = _RUNNING
            self.started_at = time.monotonic()
        self.loop.call_soon_threadsafe(_resolve, self.claimed, None, None)
        return True

    def withdraw(self) -> bool:
        with self.lock:
            if self.state != _PENDING:
                return False
            self.state = _WITHDRAWN
            return True

    def interrupt(self, reason: str) -> None:
        """Stop the work with ``reason`` (the first one is kept): SIGINT to the kernel thread, only while it runs."""
        with self.lock:
            if self.state != _RUNNING:
                return
            self.stop.request(reason)
            self.interrupt_sent = True
            _interrupt_main_thread()

    def finish(self) -> bool:
        """Mark the work done (no interrupt is sent after this); whether any was sent before."""
        while True:
            try:
                with self.lock:
                    self.state = _DONE
                    self.stop.finished = True
                    return self.interrupt_sent
            except KeyboardInterrupt:  # our own interrupt, landing late: the outcome stands
                pass

    async def run(self, *, wait_timeout: float, run_timeout: float) -> Any:
        """Queue the work for the kernel thread and return its result (see ``on_kernel_thread``)."""
        _queue(self)
        try:
            await asyncio.wait_for(asyncio.shield(self.claimed), wait_timeout)
        except asyncio.TimeoutError:
            if self.withdraw():
                raise _not_taken(wait_timeout) from None
        except asyncio.CancelledError:
            if not self.withdraw():
                _stop_detached(self, "cancelled")
            raise
        try:
            return await asyncio.wait_for(asyncio.shield(self.done), run_timeout)
        except asyncio.TimeoutError:
            await asyncio.shield(_stop_detached(self, "timeout"))
            if not self.done.done():
                raise KernelWorkHeld(self) from None
            return self.done.result()  # KernelWorkInterrupted("timeout") unless it finished meanwhile
        except asyncio.CancelledError:
            _stop_detached(self, "cancelled")
            raise


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def _resolve(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


_kernel_lock = threading.Lock()
_kernel_work: deque[KernelWork] = deque()
_kernel_waiters: list[queue.SimpleQueue[None]] = []
_kernel_running: list[KernelWork] = []  # taken by the kernel thread and not done, innermost last
_kernel_held: KernelWork | None = None  # work that outlived its stop's grace, until it ends
# Captured at import: the agent's code may find signal's attributes replaced while it runs (the refusals).
_pthread_kill = getattr(signal, "pthread_kill", None)


def _interrupt_main_thread() -> None:
    # A real signal to the main thread also ends a blocking call there (time.sleep, a socket read),
    # which _thread.interrupt_main's simulated one does not.
    if _pthread_kill is not None:
        _pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)
    else:  # pragma: no cover - Windows
        low_level_thread.interrupt_main()


def _on_kernel_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def held_message(work: KernelWork) -> str:
    """Why new kernel work is refused while ``work`` holds the kernel thread after its stop failed."""
    return (f"the kernel is held by {work.what}, still running after {work.running_for():.0f} s: it did not stop "
            "when interrupted (it ignores interrupts, or is stuck in a call that does), and nothing else can run "
            "in the kernel until it ends; the user can interrupt the kernel again or restart it")


def _not_taken(waited: float) -> Exception:
    """What a wait for the kernel thread that ran out says: the kernel ran the user's cell, or earlier
    kernel work of ours (then it is named)."""
    with _kernel_lock:
        held, running = _kernel_held, list(_kernel_running)
    if held is not None:
        return KernelHeld(held_message(held))
    if running:
        return KernelHeld(f"the kernel is still running {running[-1].what} (for {running[-1].running_for():.0f} s); "
                          f"waited {waited:g} s for it to finish")
    return KernelBusy(f"the kernel thread did not take the work within {waited:g} s")


def _queue(item: KernelWork) -> None:
    """Hand ``item`` to the kernel thread: its next wait of ours or its own loop's next turn runs it."""
    with _kernel_lock:
        if _kernel_held is not None:
            raise KernelHeld(held_message(_kernel_held))
        _kernel_work.append(item)
        waiters = list(_kernel_waiters)
    for waiter in waiters:
        waiter.put(None)
    kernel_loop = _kernel_event_loop()
    if kernel_loop is not None:
        with contextlib.suppress(RuntimeError):  # closed meanwhile: the kernel is going away
            kernel_loop.call_soon_threadsafe(run_kernel_work, context=_fresh_context())


def _hold(item: KernelWork) -> None:
    """``item`` outlived its stop (loop thread): new work is refused until it ends, and so is work waiting."""
    global _kernel_held
    with _kernel_lock:
        if item.state != _RUNNING:
            return
        _kernel_held = item
        waiting = [work for work in _kernel_work if work.withdraw()]
        _kernel_work.clear()
    message = held_message(item)
    for work in waiting:
        work.loop.call_soon_threadsafe(_resolve, work.claimed, None, KernelHeld(message))
    _resolve(item.held, None, None)


def run_kernel_work() -> None:
    """Run the kernel-thread work queued so far (a no-op off the kernel thread)."""
    if not _on_kernel_thread():
        return
    while True:
        with _kernel_lock:
            if not _kernel_work:
                return
            item = _kernel_work.popleft()
        _run_item(item)


def _run_item(item: KernelWork) -> None:
    global _kernel_held
    if not item.claim():
        return
    previous = take_sigint(item.stop)
    handled = sys.exc_info()[1]
    with _kernel_lock:
        _kernel_running.append(item)
    result: Any = None
    error: BaseException | None = None
    try:
        try:
            result = item.fn()
        except KeyboardInterrupt:
            error = KernelWorkInterrupted(item.stop.reason)
        except BaseException as exc:  # noqa: BLE001 - handed to the requester, never raised here
            error = exc
        if item.finish():
            _absorb_late_interrupts()
    finally:
        give_back_sigint(item.stop, previous)
        with _kernel_lock:
            _kernel_running.remove(item)
            if _kernel_held is item:
                _kernel_held = None
    restore_handled_exception(handled)
    item.loop.call_soon_threadsafe(_resolve, item.done, result, error)


def run_region(fn: Callable[[], T]) -> T:
    """Run ``fn`` as the part of the running kernel work that a stop stops (kernel thread; see _kernelstop).
    Outside kernel work (a direct call) it just runs."""
    running = _kernel_running[-1] if _kernel_running and _on_kernel_thread() else None
    if running is None or not running.stop.in_region:
        return fn()
    return running.stop.run_region(fn)


def _absorb_late_interrupts() -> None:
    """A stop signal sent just as the work finished lands here, not in the user's next code: a
    signal already handled at C level raises at the loop's next turn, one still in flight ends a
    sleep."""
    deadline = time.monotonic() + _LATE_INTERRUPT_S
    while time.monotonic() < deadline:
        try:
            time.sleep(0.001)
        except KeyboardInterrupt:
            pass


def _kernel_event_loop() -> asyncio.AbstractEventLoop | None:
    """The kernel's own event loop on the main thread (ipykernel), or None outside a kernel."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    shell = ipython.get_ipython()
    io_loop = getattr(getattr(shell, "kernel", None), "io_loop", None)
    loop = getattr(io_loop, "asyncio_loop", None)
    return loop if isinstance(loop, asyncio.AbstractEventLoop) and not loop.is_closed() else None


async def on_kernel_thread(fn: Callable[[], T], *, wait_timeout: float, run_timeout: float) -> T:
    """Run ``fn()`` on the kernel thread, awaited from the background loop, and return its result.

    The kernel thread takes it in its next blocking wait of ours, or from its own event loop when
    that loop turns. Raises KernelBusy when it was not taken within ``wait_timeout`` (the kernel is
    running a cell), KernelHeld when earlier kernel work holds the kernel thread, KernelWorkInterrupted
    when stopped (``run_timeout``, cancellation, the user's interrupt), KernelWorkHeld when it was asked
    to stop and still runs, and whatever ``fn`` raised. Never blocks the background loop.
    """
    return await KernelWork(fn).run(wait_timeout=wait_timeout, run_timeout=run_timeout)  # type: ignore[no-any-return]


async def _stop(item: KernelWork, reason: str) -> None:
    """Interrupt a taken item until it ends; past the grace, it holds the kernel (``_hold``)."""
    await item.claimed
    loop = asyncio.get_running_loop()
    deadline = loop.time() + INTERRUPT_GRACE_S
    while not item.done.done() and loop.time() < deadline:
        item.interrupt(reason)
        await asyncio.wait([item.done], timeout=_RESEND_S)
    if not item.done.done():
        _hold(item)


_stopping: set[asyncio.Task[None]] = set()


def _stop_detached(item: KernelWork, reason: str) -> asyncio.Task[None]:
    """``_stop`` in a task of its own: a cancelled caller (an anyio cancel scope cancels every await
    it makes) still gets its work stopped."""
    task = asyncio.get_running_loop().create_task(_stop(item, reason))
    _stopping.add(task)
    task.add_done_callback(_stopping.discard)
    task.add_done_callback(lambda done: done.cancelled() or done.exception())
    return task


def wait(future: concurrent.futures.Future[T], timeout: float | None = None) -> T:
    """``future.result(timeout)`` that, on the kernel thread, also runs queued kernel-thread work.

    Every blocking wait of ours on the kernel thread goes through here, so a tool call that needs
    the kernel thread while a cell blocks on a turn (``session.prompt()``) runs instead of
    deadlocking. Raises concurrent.futures.TimeoutError like ``result`` does.
    """
    if not _on_kernel_thread():
        return future.result(timeout)
    wake: queue.SimpleQueue[None] = queue.SimpleQueue()
    future.add_done_callback(lambda _done: wake.put(None))
    with _kernel_lock:
        _kernel_waiters.append(wake)
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while not future.done():
            run_kernel_work()
            remaining = _PUMP_POLL_S if deadline is None else min(_PUMP_POLL_S, deadline - time.monotonic())
            if remaining <= 0:
                raise concurrent.futures.TimeoutError
            with contextlib.suppress(queue.Empty):
                wake.get(timeout=remaining)
    finally:
        with _kernel_lock:
            _kernel_waiters.remove(wake)
    return future.result(0)
