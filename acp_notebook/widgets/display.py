"""LiveDisplay: one notebook output that stays true after the kernel is gone.

Every view the package shows (session panel, ``%%acp`` turn, session table) is displayed
through a LiveDisplay: a display id, a bundle with the live widget *and* its static forms
(text/html, text/markdown, text/plain), and ``update_display`` whenever what it shows
changes. ``finalize()`` replaces the output with the static forms alone, so a saved
notebook renders with no kernel and no widget manager (JupyterLab, nbconvert, GitHub).

An output that still holds the live widget is marked ``metadata["acp_notebook"]["live"]``: a
notebook saved then (the agent running, or the kernel gone before it could send the static
forms: JupyterLab drops a restarting kernel's last messages) would otherwise keep a widget
reference that a later JupyterLab renders as "Error displaying widget: model not found"
instead of the static forms beside it. The mark says which kernel process holds the widget
(host, pid, kernel id) and carries the forms the output takes when that process is gone
(``ENDED``): the server extension in saving.py drops the widget from marked outputs as the
notebook is saved, and puts those forms in when the kernel has ended meanwhile.

Threads and ordering:

- ``show()`` runs on the kernel thread, inside the cell, so the output belongs to that cell.
- ``refresh()`` may be called from any thread (usually the background loop thread, from a
  state or turn observer); it only marks the display stale and asks for a publish
  ``interval`` seconds later on the loop thread, so a burst of changes costs one message.
  A publish whose static forms and metadata did not change is skipped: JupyterLab rebuilds
  a widget's view on every update of its output, which must not happen for nothing.
- ``flush_all()`` runs on the kernel thread after every cell (IPython's ``post_run_cell``):
  stale displays are published while the cell is still the kernel's current request.
  Headless runners (nbclient, ``jupyter execute``) only record messages that belong to the
  running cell, so this is what makes a change made by ``%acp set`` reach the saved panel.
- Publishing holds the display's lock, so two threads never interleave an older bundle
  after a newer one. The registry of open displays (for ``finalize_all`` at kernel exit)
  is guarded by a module lock; it is written by the kernel thread (show) and by whichever
  thread finalizes.

A terminal IPython prints every display as text: there, updates are skipped (they would
print again, from a background thread, into whatever runs then).
"""

from __future__ import annotations

import functools
import os
import socket
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

from .. import _loop

__all__ = ["Bundle", "LiveDisplay", "close_widget_tree", "finalize_all", "flush_all", "kernel_id", "open_displays"]

REFRESH_INTERVAL = 0.25
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
STATIC_MIMES = ("text/html", "text/markdown", "text/plain")
METADATA_KEY = "acp_notebook"  # as in magics/records.py
LIVE_FLAG = "live"
ENDED = "the kernel stopped"  # the reason a live output's forms for a gone kernel give


@dataclass
class Bundle:
    """A mime bundle and its output metadata."""

    data: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)

    def static(self) -> Bundle:
        """The same output without the live widget (nor the mark of one)."""
        metadata = dict(self.metadata)
        ours = metadata.get(METADATA_KEY)
        if isinstance(ours, dict) and LIVE_FLAG in ours:
            rest = {k: v for k, v in ours.items() if k != LIVE_FLAG}
            if rest:
                metadata[METADATA_KEY] = rest
            else:
                metadata.pop(METADATA_KEY)
        return Bundle({k: v for k, v in self.data.items() if k in STATIC_MIMES}, metadata)

    def marked(self, ended: dict[str, Any]) -> Bundle:
        """The bundle, its output marked live when it holds a widget (see the module docstring); ``ended``:
        the static forms for when this kernel is gone."""
        if WIDGET_MIME not in self.data:
            return self
        ours = self.metadata.get(METADATA_KEY)
        mark = {**(ours if isinstance(ours, dict) else {}), LIVE_FLAG: {**_kernel_process(), "ended": ended}}
        return Bundle(self.data, {**self.metadata, METADATA_KEY: mark})


@functools.cache
def kernel_id() -> str | None:
    """This kernel's id (its connection file is kernel-ID.json), when it runs under Jupyter. A process
    that has not imported ipykernel's kernel app is no kernel: nothing is imported for the question (importing
    the app imports ipykernel's kernel, which replaces the ``comm`` package's manager for the whole process,
    so widgets made before it could no longer close)."""
    if "ipykernel.kernelapp" not in sys.modules:
        return None
    try:
        from ipykernel.connect import get_connection_file

        name = Path(get_connection_file()).stem
    except Exception:  # an IPython without a kernel app: there is no id to record
        return None
    return name.removeprefix("kernel-") or None


@functools.cache
def _kernel_process() -> dict[str, Any]:
    return {"host": socket.gethostname(), "pid": os.getpid(), "kernel": kernel_id()}


_registry_lock = threading.Lock()
_open: dict[str, LiveDisplay] = {}


def open_displays() -> list[LiveDisplay]:
    """The displays shown and not finalized yet, oldest first."""
    with _registry_lock:
        return list(_open.values())


def flush_all() -> None:
    """Publish every stale display now (kernel thread, after each cell; see the module docstring)."""
    for live in open_displays():
        live.publish()


def finalize_all(reason: str = "") -> None:
    """Turn every open display into its static form (the kernel is going away)."""
    for live in open_displays():
        live.finalize(reason)


def _can_update(shell: Any) -> bool:
    """False for the terminal's publisher, which prints every update instead of replacing an output."""
    if shell is None:
        return False
    from IPython.core.displaypub import DisplayPublisher

    return type(shell.display_pub) is not DisplayPublisher


class LiveDisplay:
    """One output of ``render(final, reason)``: ``final=False`` gives the live bundle, ``final=True`` the
    static one. ``render`` runs while this display publishes, so it must not call ``refresh``.

    Two locks, so that a view may call ``refresh`` while holding its own lock: ``_flags`` guards
    the stale/scheduled flags and is never held while calling out; ``_sending`` is held while a
    bundle is rendered and sent, which keeps publishes in order.
    """

    def __init__(self, render: Callable[[bool, str], Bundle], *, interval: float = REFRESH_INTERVAL) -> None:
        self._render = render
        self.interval = interval
        self._last: tuple[dict[str, Any], dict[str, Any]] | None = None  # static forms and metadata last sent
        self.display_id = uuid.uuid4().hex
        self._flags = threading.Lock()
        self._sending = threading.Lock()
        self._stale = False
        self._scheduled = False
        self.shown = False
        self.final = False
        self.shell: Any = None
        self.published = 0  # update messages sent (tests, benchmarks)

    def show(self) -> None:
        """Display the output in the running cell (kernel thread). An output finalized before it was
        shown (a turn that ended at once) is shown in its static form."""
        from IPython import get_ipython
        from IPython.display import display

        with self._sending:
            self.shell = get_ipython()
            with self._flags:
                final = self.final
            bundle = self._render(True, "").static() if final else self._live_bundle()
            display(bundle.data, raw=True, metadata=bundle.metadata, display_id=self.display_id)
            self._last = (bundle.static().data, bundle.metadata)
            with self._flags:
                self.shown = True
        if not final:
            self.publish()  # a publish_now that came while the bundle above was drawn (sent only if it differs)
        if not final:
            with _registry_lock:
                _open[self.display_id] = self
            if self.final:  # finalized meanwhile, before it was registered: do not keep it
                with _registry_lock:
                    _open.pop(self.display_id, None)

    def _live_bundle(self) -> Bundle:
        bundle = self._render(False, "")
        if WIDGET_MIME not in bundle.data:
            return bundle
        ended = self._render(True, ENDED).static().data
        return bundle.marked({} if ended == bundle.static().data else ended)  # {}: the same forms, not sent twice

    def refresh(self) -> None:
        """Mark the output stale and publish it soon (any thread)."""
        with self._flags:
            if self.final or not self.shown:
                return
            self._stale = True
            if self._scheduled:
                return
            self._scheduled = True
        _loop.call_soon(lambda: _loop.get_loop().call_later(self.interval, self._scheduled_publish))

    def publish_now(self) -> None:
        """Publish the live bundle at once on the calling thread, without waiting for ``interval`` (a view
        about to ask the person for input). Before the output is shown, ``show`` publishes it instead."""
        with self._flags:
            if self.final:
                return
            self._stale = True
            if not self.shown:
                return
        self.publish()

    def _scheduled_publish(self) -> None:
        with self._flags:
            self._scheduled = False
        self.publish()

    def publish(self) -> None:
        """Send the live bundle now if it is stale."""
        with self._sending:
            with self._flags:
                if self.final or not self._stale:
                    return
                self._stale = False
            bundle = self._live_bundle()
            seen = (bundle.static().data, bundle.metadata)
            if seen == self._last:
                return
            self._last = seen
            self._send(bundle)

    def finalize(self, reason: str = "") -> None:
        """Replace the output with its static form for good; ``reason`` says why (shown by some views)."""
        with self._sending:
            with self._flags:
                if self.final:
                    return
                self.final = True
                shown = self.shown
            if shown:
                self._send(self._render(True, reason).static())
        with _registry_lock:
            _open.pop(self.display_id, None)

    def _send(self, bundle: Bundle) -> None:
        if not _can_update(self.shell):
            return
        self.shell.display_pub.publish(bundle.data, bundle.metadata, transient={"display_id": self.display_id},
                                       update=True)
        self.published += 1


def close_widget_tree(widget: Any) -> None:
    """Close a widget, its children and their layout and style models.

    ``Widget.close()`` leaves children, layouts and styles open, and a notebook that saves
    widget state would keep every one of them. Once an output is static none is needed."""
    for child in getattr(widget, "children", ()) or ():
        close_widget_tree(child)
    for part in ("layout", "style"):
        model = getattr(widget, part, None)
        if model is not None and hasattr(model, "close"):
            model.close()
    widget.close()
