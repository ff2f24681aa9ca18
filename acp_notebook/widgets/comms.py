"""Widget messages that reach the kernel in order, on its main thread, also while a ``%%acp`` cell awaits.

Two things in today's Jupyter stack would otherwise lose a person's input:

- **Order.** JupyterLab 4.6 sends widget messages on a kernel subshell by default (its kernels
  setting ``commsOverSubshells``), and
  ipykernel (7.x) routes each message of a comm to the subshell the comm last published from,
  else to the one the frontend named. A widget's first message goes to the main shell (it was
  created there); its echo is then published under the frontend's subshell, so its next messages
  go to that subshell's thread. A corrected field could then be handled after the Submit click
  that followed it, which still went to the main shell: the form was checked with the old value.
  ``handled_in_order(widget)`` routes every message of the widget to the main shell, so the
  kernel handles one frontend's messages in the order they were sent, on its main thread, as
  the package's views assume (ipykernel asks a comm's ``_reply_subshell_for``; there is no
  public switch). The price: while a cell that blocks the main thread runs (not an awaiting
  ``%%acp`` cell), these widgets' messages wait for it, as every widget's did before subshells.
- **Acknowledgement.** ipywidgets' frontend sends one change of a model at a time: a later change
  of the same model waits in a buffer until the kernel has reported "idle" for the previous one
  (an iopub ``status`` message whose parent is that change). ipykernel >= 7.4 handles comm
  messages during an awaiting cell (which is what keeps a ``%%acp`` cell's buttons clickable)
  but publishes no busy/idle for them. So while a cell awaits, each text field, dropdown or
  checkbox could send only its first change. ``follow_changes(widget)`` (which also routes the
  widget as above) makes the kernel acknowledge each change of ``widget`` handled while a
  ``%%acp`` cell awaits (``awaiting_cell``): it publishes the "idle" the frontend waits for, then
  "busy" again for the running cell, so the kernel's status stays busy in the frontend.

Threads: the kernel's main thread only (comm messages and the awaiting cell both run there); the
awaiting cell is kept under a lock anyway, since it is read from the comm handlers.

Process-wide, on purpose: ``_awaiting``, the cell of this process's one kernel that awaits its turn
(one per process because the kernel is, and ipykernel's comm handlers, which read it, get no cell).
It is set only inside ``awaiting_cell`` (the ``%%acp`` cell that awaits owns it for that time) and put
back as it was when that block ends; empty otherwise, and from import until the first such cell.
``_lock`` guards it: set on the kernel's main thread, read by the comm handlers.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["awaiting_cell", "follow_changes", "handled_in_order"]

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_awaiting: dict[str, Any] = {}  # "cell": the execute request of the %%acp cell that awaits, "kernel": its kernel


@contextlib.contextmanager
def awaiting_cell(kernel: Any) -> Iterator[None]:
    """While the body runs, the kernel's current cell awaits its turn (comm messages are handled meanwhile)."""
    parent = kernel.get_parent("shell") if kernel is not None and hasattr(kernel, "get_parent") else None
    with _lock:
        previous = dict(_awaiting)
        if parent:
            _awaiting.update(cell=parent, kernel=kernel)
    try:
        yield
    finally:
        with _lock:
            _awaiting.clear()
            _awaiting.update(previous)


def _acknowledge(msg: Mapping[str, Any]) -> None:
    with _lock:
        cell, kernel = _awaiting.get("cell"), _awaiting.get("kernel")
    session = getattr(kernel, "session", None)
    if cell is None or session is None or not msg.get("header"):
        return
    try:
        ident = kernel._topic("status") if hasattr(kernel, "_topic") else None
        session.send(kernel.iopub_socket, "status", {"execution_state": "idle"}, parent=dict(msg), ident=ident)
        session.send(kernel.iopub_socket, "status", {"execution_state": "busy"}, parent=cell, ident=ident)
    except Exception:  # noqa: BLE001 - an acknowledgement must never break the widget's own handling
        logger.debug("could not acknowledge a widget change", exc_info=True)


def _main_shell(_data: Any, _frontend_subshell: str | None) -> None:
    return None  # ipykernel's id of the main shell


def handled_in_order(widget: Any) -> Any:
    """Route every message of ``widget`` to the kernel's main shell (see the module docstring); returns the
    widget."""
    comm = getattr(widget, "comm", None)
    if comm is not None:
        comm._reply_subshell_for = _main_shell
    return widget


def follow_changes(widget: Any) -> Any:
    """Route every message of ``widget`` to the main shell and acknowledge each change it gets while a ``%%acp``
    cell awaits (see the module docstring); returns the widget."""
    handled_in_order(widget)
    comm = getattr(widget, "comm", None)
    if comm is None or not hasattr(comm, "on_msg"):
        return widget

    def handle(msg: Mapping[str, Any]) -> None:
        try:
            widget._handle_msg(msg)
        finally:
            if (msg.get("content") or {}).get("data", {}).get("method") == "update":
                _acknowledge(msg)

    comm.on_msg(handle)
    return widget
