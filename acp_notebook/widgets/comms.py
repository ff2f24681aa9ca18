"""Widget changes that keep reaching the kernel while a ``%%acp`` cell awaits its turn.

ipywidgets' frontend sends one change of a model at a time: a later change of the same model
waits in a buffer until the kernel has reported "idle" for the previous one (an iopub ``status``
message whose parent is that change). ipykernel >= 7.4 handles comm messages during an awaiting
cell (which is what keeps a ``%%acp`` cell's buttons clickable) but publishes no busy/idle for
them. So while a cell awaits, each text field, dropdown or checkbox could send only its first
change: a name typed key by key arrived as its first letter, and a corrected number never came.

``follow_changes(widget)`` makes the kernel acknowledge each change of ``widget`` handled while a
``%%acp`` cell awaits (``awaiting_cell``): it publishes the "idle" the frontend waits for, then
"busy" again for the running cell, so the kernel's status stays busy in the frontend.

Threads: the kernel thread only (comm messages and the awaiting cell both run there); the
awaiting cell is kept under a lock anyway, since it is read from the comm handlers.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["awaiting_cell", "follow_changes"]

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


def follow_changes(widget: Any) -> Any:
    """Acknowledge every message ``widget`` gets while a ``%%acp`` cell awaits (see the module docstring);
    returns the widget."""
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
