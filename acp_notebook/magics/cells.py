"""The ``%%acp`` cell machinery: waiting for a turn without freezing the widgets, and interrupts.

While a cell runs, ipykernel does not handle comm messages (clicks) for it, except when the
cell is a coroutine awaiting on the kernel's own event loop (ipykernel >= 7.4 dispatches
widget messages then). So a ``%%acp`` cell is rewritten, before IPython compiles it, into
``await acp_cell(line, body)`` (``transform_cell``; ``acp_cell`` is in magic.py): the cell waits
for the turn on the kernel loop, the Cancel and permission buttons keep working, and a kernel interrupt cancels
the await, which sends ``session/cancel`` and ends the cell promptly. Where that is
impossible (older kernels) ``AcpMagics.wait = "auto"`` lets the cell return at once while the
reply streams into its widgets from the background loop. While a cell awaits, the kernel
acknowledges each change of its fields (``widgets.comms``), which ipykernel does not do for comm
messages it handles during a cell, so a form's second edit reaches the kernel too.

Threads: everything here runs on the kernel thread (the blocking path) or on the kernel's
own event loop (the awaiting path). The turn view resolves ``view.finished`` from the
background loop thread; the waits below only read it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import re
from typing import Any

from IPython import get_ipython

from .. import _loop, _timeout
from ..errors import AcpError
from ..widgets.comms import awaiting_cell

__all__ = ["CANCEL_GRACE_S", "TurnInterrupted", "async_cells_supported", "kernel_takes_comms_while_awaiting",
           "transform_cell", "wait_for_view", "await_view"]

CANCEL_GRACE_S = _timeout.CANCEL_GRACE_S
INTERRUPT_POLL_S = 0.1
CELL_MAGIC = re.compile(r"^%%acp(?:[ \t]|$)")


class TurnInterrupted(AcpError):
    """A ``%%acp`` cell was interrupted; the agent was sent ``session/cancel``."""

    hint = "The reply so far is above. Run the cell again to ask anew."


def kernel_takes_comms_while_awaiting() -> bool:
    """ipykernel >= 7.4 dispatches widget messages while an async cell awaits on its loop."""
    try:
        # ipykernel is not there in a terminal IPython (it is no dependency), and costs a kernel's imports.
        import ipykernel
    except ImportError:
        return False
    numbers = [int(n) for n in re.findall(r"\d+", ipykernel.__version__)[:2]]
    return tuple(numbers) >= (7, 4)


def async_cells_supported(shell: Any) -> bool:
    """Whether ``%%acp`` cells can await their turn on the kernel's loop (see the module docstring)."""
    if getattr(shell, "kernel", None) is None or not getattr(shell, "autoawait", False):
        return False
    # The shell's own table of loop runners names asyncio's (IPython's module keeps it under a private name).
    asyncio_runner = (getattr(shell, "loop_runner_map", None) or {}).get("asyncio", (None,))[0]
    return asyncio_runner is not None and shell.loop_runner is asyncio_runner and kernel_takes_comms_while_awaiting()


def transform_cell(lines: list[str], supported: bool) -> list[str]:
    """IPython input transformer: a ``%%acp`` cell becomes ``await acp_cell(line, body)`` where supported."""
    if not lines or not CELL_MAGIC.match(lines[0]) or not supported:
        return lines
    line = lines[0][len("%%acp"):].strip()
    body = "".join(lines[1:])
    return [f"await __import__('acp_notebook.magics').magics.acp_cell({line!r}, {body!r})\n"]


def _raise_failure(view: Any) -> None:
    """The cell fails when its turn did; an AcpError is already shown in full in the turn view (message and
    hint), so the cell's error output is a one-line pointer to it rather than the same text again."""
    error = view.finished.exception()
    if isinstance(error, AcpError):
        raise error.in_terms_of("magic").shown_elsewhere("in the reply above") from None
    if error is not None:
        raise error


@contextlib.contextmanager
def _cell_waits(view: Any) -> Any:
    """While the cell waits for its turn, the view may put a proposed cell below it (an execute reply's payload)."""
    view.cell_waiting = True
    try:
        yield
    finally:
        view.cell_waiting = False


def wait_for_view(view: Any) -> None:
    """The blocking path (no async cells here): wait, and turn Ctrl-C into session/cancel."""
    try:
        with _cell_waits(view):
            # _loop.wait runs the kernel tools' work meanwhile (this thread is the kernel thread they need).
            with contextlib.suppress(Exception):  # the turn's failure is raised below, as the view saw it
                _loop.wait(view.finished)
    except KeyboardInterrupt:
        _loop.submit(view.session.acancel())
        concurrent.futures.wait([view.finished], CANCEL_GRACE_S)
        raise TurnInterrupted("the turn was cancelled by a keyboard interrupt (session/cancel sent)") from None
    _raise_failure(view)


def _awaitable(future: concurrent.futures.Future[Any]) -> asyncio.Future[None]:
    """An asyncio future on the running loop that completes with ``future``; cancelling it leaves ``future`` alone."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_done: concurrent.futures.Future[Any]) -> None:
        loop.call_soon_threadsafe(lambda: waiter.done() or waiter.set_result(None))

    future.add_done_callback(wake)
    return waiter


async def _wait_interruptibly(future: concurrent.futures.Future[Any]) -> None:
    """Await ``future`` while keeping the kernel loop ticking.

    ipykernel's SIGINT handler schedules the cancellation of the cell with a plain
    ``call_soon`` from inside the signal handler, which does not wake a loop asleep in
    ``select()``; a loop with nothing else to do would only see the interrupt when the
    turn ends. A short timer keeps it responsive.
    """
    waiter = _awaitable(future)
    while not waiter.done():
        await asyncio.wait([waiter], timeout=INTERRUPT_POLL_S)


async def await_view(view: Any) -> None:
    """The awaiting path: widgets stay clickable; a kernel interrupt cancels the turn."""
    try:
        # Changes of the cell's fields (a form, the panel) are acknowledged while it awaits: see widgets.comms.
        with awaiting_cell(getattr(get_ipython(), "kernel", None)), _cell_waits(view):
            await _wait_interruptibly(view.finished)
    except asyncio.CancelledError:
        _loop.submit(view.session.acancel())
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(_awaitable(view.finished), CANCEL_GRACE_S)
        raise TurnInterrupted("the turn was cancelled by a kernel interrupt (session/cancel sent)") from None
    _raise_failure(view)

