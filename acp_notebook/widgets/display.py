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
  state or turn observer, or the render thread, from a view's render); it only marks the
  display stale and asks for a publish ``interval`` seconds later on the render thread
  (``render_thread``: rendering the static forms of a long reply must not hold up the
  protocol loop), so a burst of changes costs one message. ``publish_now()`` publishes on
  the thread that calls it (a view about to ask the person for input, from the loop: the
  output must reach the frontend before the request's buttons, sent on that same thread).
  A publish whose static forms and metadata did not change is skipped: JupyterLab rebuilds
  a widget's view on every update of its output, which must not happen for nothing.
- ``flush_all()`` runs on the kernel thread after every cell (IPython's ``post_run_cell``):
  stale displays are published while the cell is still the kernel's current request.
  Headless runners (nbclient, ``jupyter execute``) only record messages that belong to the
  running cell, so this is what makes a change made by ``%acp set`` reach the saved panel.
  A display another thread has been publishing for ``FLUSH_WAIT_S`` is left to that thread's
  next scheduled publish: the kernel never waits long on a slow view.
- ``finalize()`` runs on the thread that ends the view (the render thread for a turn, the
  kernel or loop thread for a panel, table or inspector); ``finalize_all()`` on the kernel
  thread at exit, waiting at most ``FINALIZE_WAIT_S`` in all for displays busy publishing
  (those are finalized by the render thread once it is free, if the process still lives; a
  saved notebook's outputs that stayed live get their forms for a gone kernel, see above).
- Publishing holds the display's lock, so two threads never interleave an older bundle
  after a newer one. The registry of open displays (for ``finalize_all`` at kernel exit)
  is guarded by a module lock; it is written by the kernel thread (show) and by whichever
  thread finalizes.

The registry of open displays (``_open``) is one per process, on purpose: it stands for the outputs
this kernel process has shown and not yet made static, and the kernel's exit (magic.py's exit hook)
and ``post_run_cell`` must reach every one of them, whoever made it (the magics of any shell, a
sweep's progress bar, an inspector displayed from plain Python). An entry lives from ``show()`` to
``finalize()``; the registry is empty before anything is shown, and importing this module changes
no state outside it. ``_registry_lock`` guards it (displays are shown and finalized from any thread).

A terminal IPython prints every display as text: there, updates are skipped (they would
print again, from a background thread, into whatever runs then).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any

from IPython import get_ipython
from IPython.core.displaypub import DisplayPublisher
from IPython.display import display

from . import render_thread

__all__ = ["Bundle", "LiveDisplay", "close_widget_tree", "finalize_all", "flush_all", "kernel_id", "open_displays"]

REFRESH_INTERVAL = 0.25
FLUSH_WAIT_S = 2.0  # the longest flush_all waits in all for displays another thread is publishing
FINALIZE_WAIT_S = 5.0  # the same for finalize_all, at kernel exit
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
        # Only once the kernel app is loaded (checked above): ipykernel is no dependency, and see the docstring.
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


def flush_all(wait: float = FLUSH_WAIT_S) -> None:
    """Publish every stale display now (kernel thread, after each cell; see the module docstring), waiting at
    most ``wait`` seconds in all for displays that another thread is publishing."""
    deadline = time.monotonic() + wait
    for live in open_displays():
        live.publish_within(deadline - time.monotonic())


def finalize_all(reason: str = "", wait: float = FINALIZE_WAIT_S) -> None:
    """Turn every open display into its static form (the kernel is going away), waiting at most ``wait``
    seconds in all for displays that another thread is publishing."""
    deadline = time.monotonic() + wait
    for live in open_displays():
        live.finalize(reason, wait=deadline - time.monotonic())


def _can_update(shell: Any) -> bool:
    """False for the terminal's publisher, which prints every update instead of replacing an output."""
    if shell is None:
        return False
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
        self._sending = threading.RLock()  # re-entered by publish_within
        self._stale = False
        self._scheduled = False
        self.shown = False
        self.final = False
        self.shell: Any = None
        self.published = 0  # update messages sent (tests, benchmarks)
        self.sent_bytes = 0  # what the display and its updates carried (JSON of data and metadata): a view's budget

    def show(self) -> None:
        """Display the output in the running cell (kernel thread). An output finalized before it was
        shown (a turn that ended at once) is shown in its static form."""
        with self._sending:
            self.shell = get_ipython()
            with self._flags:
                final = self.final
            bundle = self._render(True, "").static() if final else self._live_bundle()
            display(bundle.data, raw=True, metadata=bundle.metadata, display_id=self.display_id)
            self.sent_bytes += _size(bundle)
            self._last = (bundle.static().data, bundle.metadata)
            with self._flags:
                self.shown = True
        if not final:
            self.publish()  # a publish_now that came while the bundle above was drawn (sent only if it differs)
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
        render_thread.call_later(self.interval, self._scheduled_publish)

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

    def publish_within(self, wait: float) -> bool:
        """``publish()``, unless another thread is still publishing this display after ``wait`` seconds: then
        False, and that thread's next scheduled publish sends what changed meanwhile."""
        with self._turn_to_send(wait) as held:
            if held:
                self.publish()
            return held

    def finalize(self, reason: str = "", *, wait: float | None = None) -> bool:
        """Replace the output with its static form for good; ``reason`` says why (shown by some views).

        ``wait``: the longest to wait for a publish running on another thread (None: as long as it
        takes); past it the render thread finalizes once it is free and this returns False at once."""
        with self._turn_to_send(wait) as held:
            if not held:
                render_thread.call_later(0.0, lambda: self.finalize(reason))
                return False
            with self._flags:
                if self.final:
                    return True
                self.final = True
                shown = self.shown
            if shown:
                self._send(self._render(True, reason).static())
        with _registry_lock:
            _open.pop(self.display_id, None)
        return True

    def resend_final(self) -> None:
        """Send the static form again (any thread): what a final output shows changed after it was made final
        (code that held the kernel past its turn's end has ended)."""
        with self._sending:
            with self._flags:
                if not (self.final and self.shown):
                    return
            self._send(self._render(True, "").static())

    @contextlib.contextmanager
    def _turn_to_send(self, wait: float | None) -> Iterator[bool]:
        """Hold the sending lock, waiting at most ``wait`` seconds for it (None: no limit); yields whether held."""
        held = self._sending.acquire(timeout=-1 if wait is None else max(0.0, wait))
        try:
            yield held
        finally:
            if held:
                self._sending.release()

    def _send(self, bundle: Bundle) -> None:
        if not _can_update(self.shell):
            return
        self.shell.display_pub.publish(bundle.data, bundle.metadata, transient={"display_id": self.display_id},
                                       update=True)
        self.published += 1
        self.sent_bytes += _size(bundle)


def _size(bundle: Bundle) -> int:
    """About what a bundle weighs on the wire (its JSON, as jupyter_client packs messages)."""
    return len(json.dumps(bundle.data, ensure_ascii=False, default=str)) + len(
        json.dumps(bundle.metadata, ensure_ascii=False, default=str))


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
