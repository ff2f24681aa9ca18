"""ProtocolInspector (``%acp log``, ``agent.inspector()``): an agent's frames as a live table that explains them.

Each row is one frame: time, direction, method or update kind, session, round trip and a
summary; it unfolds into what the frame means (with its spec page), the config options it
changed, the session info it left, what the ACP schema says about it and its JSON. The
analysis is ``acp_notebook.frames`` and the HTML ``._frames_html``: this module only wires
them to widgets and to the display's saved form.

Threads: the agent's background loop thread appends to ``agent.log`` (and trims its head);
the inspector reads it only through snapshots (``list(agent.log)``), from a ``Throttle``
on the render thread (``render_thread``: analyzing frames must not hold up the loop that
receives them) when frames arrive and from the kernel thread when a filter changes.
Both paths take ``self._lock`` around the analyzer and the widget updates. The saved form
(the display's text/html, text/markdown, text/plain) is marked stale from the loop thread once
a burst of frames has ended, and published on the render thread.

Process-wide: ``_SCHEMA_READY``, set once the ACP schema and its validators are loaded (they are
per process: _schema.py); unset at import, set by the thread that loads them (or the kernel thread,
when they were loaded already), never cleared.
"""

from __future__ import annotations

import difflib
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from html import escape
from typing import Any

import ipywidgets as widgets

from .. import _loop, _schema
from .._explain import METHODS, UPDATES
from ..frames import Analyzer, FrameRow, analyze, capabilities, check_rows
from ._frames_html import capabilities_html, frames_markdown, frames_text, table_html
from ._html import MUTED, widget_bundle
from .comms import handled_in_order
from .display import Bundle, LiveDisplay, close_widget_tree
from .render_thread import Throttle
from .scrollbox import FollowingBox

__all__ = ["ALL_METHODS", "ProtocolInspector", "frames_html", "method_filter", "summarize_frames"]

ALL_METHODS = ""  # the method filter's value that lets every frame through
ALL_SESSIONS = ""
# The table is re-sent whole when it changes: refresh it less often than a streaming reply,
# and the saved form (which may re-render the output in the browser) less often still.
REFRESH_INTERVAL = 0.5
SAVE_INTERVAL = 2.0  # quiet time before the saved form is refreshed
SAVE_AT_LEAST = 30.0  # ... or this long into a burst of frames that does not end
UPDATE_PREFIX = "session/update#"
# The live table (a FollowingBox) opens at the top, initialize first; it follows new frames once the
# reader scrolls to its end, and otherwise keeps the reader's place and opened rows across redraws.
SCROLL_HEIGHT = "32em"
# Checking a frame against the schema costs a few ms: a thousand of them held the table back for seconds. A render
# checks for this long at most (newest rows first); the rest are checked by the renders that follow.
CHECK_SLICE_S = 0.1
FEW_ROWS = 50  # so few rows are checked at once, even while the schema still loads


def method_filter(name: str) -> tuple[str, str]:
    """The Method filter's value for a name typed by a person, and a note when ACP has no such method: a
    session/update kind (``plan``) stands for session/update of that kind; an extension method (``_x``) is
    kept as given, since its frames may still come; a typo of a known name (``session/promt``) filters by
    that name, and the note says so; anything else is kept as given, with a note."""
    if name in UPDATES:
        return UPDATE_PREFIX + name, ""
    if name in METHODS or name.startswith(("_", UPDATE_PREFIX)):
        return name, ""
    close = difflib.get_close_matches(name, [*METHODS, *UPDATES], n=1)
    if close:
        meant = close[0]
        return method_filter(meant)[0], f"ACP has no method {name!r}; showing {meant!r}, the closest one"
    return name, (f"ACP has no method {name!r}; the inspector shows its frames if any come, and its "
                  "Method list names those that came")


def summarize_frames(log: Iterable[Mapping[str, Any]]) -> list[FrameRow]:
    """Every log entry as an analyzed row (not checked against the schema); see ``acp_notebook.frames``."""
    return analyze(log, check_schema=False)


def frames_html(frames: Sequence[FrameRow], *, open_json: bool = False) -> str:
    """A static frame table (for notebooks read without a kernel); ``open_json`` unfolds every row."""
    return table_html(frames, open_rows=open_json)


class _WhenQuiet:
    """Runs ``action`` on the loop thread once requests stop for ``quiet`` seconds (or ``longest`` after the first).

    The saved form is refreshed with the display's ``update``, and JupyterLab answers an
    update by building the widget's view anew (open rows fold, the table's scroll resets).
    So it waits for a burst of frames to end rather than refreshing in the middle of it.
    """

    def __init__(self, action: Callable[[], None], quiet: float, longest: float) -> None:
        self._action, self.quiet, self.longest = action, max(0.0, quiet), max(quiet, longest)
        self._lock = threading.Lock()
        self._first: float | None = None  # when the pending burst began (None: nothing pending)
        self._last = 0.0

    def request(self) -> None:
        now = time.monotonic()
        with self._lock:
            self._last = now
            if self._first is not None:
                return
            self._first = now
        _loop.call_soon(self._arm, self.quiet)

    def _arm(self, delay: float) -> None:
        _loop.get_loop().call_later(delay, self._check)

    def _check(self) -> None:
        with self._lock:
            assert self._first is not None
            wait = min(self._last + self.quiet, self._first + self.longest) - time.monotonic()
            if wait <= 0:
                self._first = None
        if wait > 0:
            self._arm(wait)
        else:
            self._action()


_SCHEMA_READY = threading.Event()  # the schema and its validators are loaded (seconds, the first time)


def _warm_up() -> None:
    try:
        _schema.warm_up()
    finally:
        _SCHEMA_READY.set()


def _check_some(rows: Sequence[FrameRow]) -> bool:
    """Check the rows not checked yet against the schema, newest first, for ``CHECK_SLICE_S`` at most (none while the
    schema is still loading, unless they are few); whether all are checked now."""
    unchecked = sum(1 for row in rows if not row.checked)
    if not _SCHEMA_READY.is_set() and unchecked > FEW_ROWS:  # a big log shows first, and gets its marks after
        return unchecked == 0
    deadline = time.monotonic() + CHECK_SLICE_S
    for row in reversed(rows):
        if row.checked:
            continue
        if time.monotonic() > deadline:
            return False
        check_rows([row])
    return True


def _since(entries: list[Any], last: Any) -> list[Any]:
    """The entries after ``last`` (the newest already read); all of them if it was trimmed away or is None."""
    if last is None:
        return entries
    start = next((i + 1 for i in range(len(entries) - 1, -1, -1) if entries[i] is last), 0)
    return entries[start:]


class _FrameList:
    """A fixed list of log entries standing in for an agent (a recording, or frames made by hand)."""

    def __init__(self, entries: Iterable[Mapping[str, Any]], name: str) -> None:
        self.log = list(entries)
        self.name = name


def _kernel_policy(agent: Any) -> str | None:
    """The policy of the agent's kernel tools (its ``kernel_tools``), None for a list of frames."""
    policy = getattr(agent, "kernel_tools", None)
    return policy if isinstance(policy, str) else None


class ProtocolInspector:
    """A live, filterable table of an agent's frames; rows unfold into explanations, changes and JSON."""

    def __init__(self, agent: Any, *, method: str | None = None, session_id: str | None = None,
                 interval: float = REFRESH_INTERVAL, save_interval: float = SAVE_INTERVAL,
                 limit: int = 500, save_limit: int = 200) -> None:
        self.agent = agent
        self.limit, self.save_limit = limit, save_limit
        self.displays: list[LiveDisplay] = []  # appended on the kernel thread (show), read from any thread
        self._lock = threading.RLock()
        self._applying = False  # set while the inspector itself changes its controls
        self._analyzer = Analyzer(kernel_policy=lambda: _kernel_policy(agent))
        self._last_entry: Any = None
        self._checking = False  # rows shown are still being checked against the schema, a slice per render
        self._last_mcp: dict[int, Any] = {}  # per session's kernel tools (by id of its link): the last MCP entry read
        self._held = 0  # frames that arrived while the table was held still
        self._wanted = (method or ALL_METHODS, session_id or ALL_SESSIONS)
        self._build_widgets()
        self._throttle = Throttle(self.refresh, interval)
        self._saver = _WhenQuiet(self.save, save_interval, SAVE_AT_LEAST)
        self.refresh()
        if "jsonschema" not in sys.modules:  # nothing was checked yet: load it now, off the loop thread
            threading.Thread(target=_warm_up, name="acp-notebook-schema", daemon=True).start()
        else:
            _SCHEMA_READY.set()
        on_frame = getattr(agent, "on_frame", None)
        self._unsubscribe = on_frame(lambda _entry: self._throttle.request()) if callable(on_frame) else (lambda: None)

    @classmethod
    def of_frames(cls, entries: Iterable[Mapping[str, Any]], *, name: str = "frames",
                  **options: Any) -> ProtocolInspector:
        """An inspector over a fixed list of log entries (``{"dir", "t", "msg"}``), no agent needed."""
        return cls(_FrameList(entries, name), **options)

    def _build_widgets(self) -> None:
        auto = widgets.Layout(width="auto")
        style = {"description_width": "initial"}
        self.method = widgets.Dropdown(options=[("all methods", ALL_METHODS)], value=ALL_METHODS,
                                       description="Method", style=style, layout=auto)
        self.session = widgets.Dropdown(options=[("all sessions", ALL_SESSIONS)], value=ALL_SESSIONS,
                                        description="Session", style=style, layout=auto)
        self.follow = widgets.Checkbox(value=True, description="Follow newest", indent=False, layout=auto,
                                       tooltip="New frames join the table as they arrive (scrolled to its end, it "
                                               "follows them); untick to hold the table still")
        self.status = widgets.HTML()
        self.table = FollowingBox(max_height=SCROLL_HEIGHT, layout=widgets.Layout(width="100%"))
        for control in (self.method, self.session, self.follow, self.table):
            handled_in_order(control)
        self.capabilities = widgets.HTML(layout=widgets.Layout(width="100%"))
        bar = widgets.HBox([self.method, self.session, self.follow, self.status],
                           layout=widgets.Layout(grid_gap="12px", align_items="center", flex_flow="row wrap"))
        self.widget = widgets.VBox([bar, self.table, self.capabilities], layout=widgets.Layout(width="100%"))
        self.widget.add_class("acpnb-inspector")
        for control in (self.method, self.session, self.follow):
            control.observe(self._on_control, names="value")

    # --- display -----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return str(getattr(self.agent, "name", "") or "agent")

    def _static(self, complete: bool = False) -> dict[str, str]:
        """The saved form: what a notebook shows without a kernel (HTML table, Markdown, plain text). Its rows' schema
        marks are those checked so far (the live table's renders check the rest, then save again); ``complete``
        (the last form, the kernel going) checks them all first."""
        with self._lock:
            shown = self.visible()
            saved = shown[-self.save_limit:]
            if complete:
                check_rows(saved)
            total = len(self._analyzer.rows)
            title = f"Protocol inspector of agent '{self.name}': {len(shown)} of {total} frames"
            if len(saved) < len(shown):
                title += f" (the last {len(saved)} saved)"
            uses = capabilities(self._analyzer.rows)
        html = (f'<div class="acpnb-inspector-static"><div style="font-weight:600">{title}</div>'
                f"{table_html(saved, total=total, max_height='32em')}"
                f"{capabilities_html(uses)}</div>")
        return {"text/html": html, "text/markdown": frames_markdown(saved, title=title),
                "text/plain": frames_text(saved, title=title)}

    def _bundle(self, final: bool, reason: str) -> Bundle:
        static = self._static(complete=final)
        return Bundle(static if final else {**widget_bundle(self.widget), **static})

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return {**widget_bundle(self.widget, **kwargs), **self._static()}

    def show(self) -> LiveDisplay:
        """Display the inspector in the running cell (kernel thread); its saved form follows new frames."""
        live = LiveDisplay(self._bundle)
        with self._lock:
            self.displays.append(live)
        live.show()
        return live

    def _ipython_display_(self) -> None:
        # display(inspector) and a cell ending in agent.inspector() both come here.
        self.show()

    def save(self) -> None:
        """Have every display of the inspector republish its saved form (after a burst of frames)."""
        with self._lock:
            displays = list(self.displays)
        for live in displays:
            live.refresh()

    def close(self) -> None:
        """Stop following the agent; each display keeps the table as it is now, in its static form."""
        self._unsubscribe()
        with self._lock:
            displays = list(self.displays)
        for live in displays:
            live.finalize()
        close_widget_tree(self.widget)

    # --- data --------------------------------------------------------------------------------
    def _catch_up(self) -> int:
        """Analyze the entries logged since the last call, the agent's ACP frames and the MCP messages its sessions'
        kernel tools saw, in time order; returns how many there were."""
        log = list(self.agent.log)  # a snapshot: the loop thread appends to the live list and trims its head
        fresh = _since(log, self._last_entry)
        if log:
            self._last_entry = log[-1]
        mcp = []
        for session in list(getattr(self.agent, "sessions", None) or ()):
            link = getattr(session, "kernel_tools", None)
            if link is None:
                continue
            frames = link.mcp_frames()
            new = _since(frames, self._last_mcp.get(id(link)))
            if frames:
                self._last_mcp[id(link)] = frames[-1]
            mcp += [{**entry, "session": session.id} for entry in new]
        if mcp:  # interleaved with the ACP frames by time (each source is in order already)
            fresh = sorted(fresh + mcp, key=lambda entry: float(entry.get("t") or 0.0))
        for entry in fresh:
            self._analyzer.add(entry)
        return len(fresh)

    def visible(self) -> list[FrameRow]:
        """The frames the filters let through, oldest first (at most ``limit``)."""
        method, session_id = self.method.value, self.session.value
        update = method[len(UPDATE_PREFIX):] if method.startswith(UPDATE_PREFIX) else None
        shown = [r for r in self._analyzer.rows
                 if (method == ALL_METHODS or (r.update == update if update is not None else r.method == method))
                 and (session_id == ALL_SESSIONS or r.session_id == session_id)]
        return shown[-self.limit:]

    # --- rendering ---------------------------------------------------------------------------
    def refresh(self) -> None:
        """Take in new frames and redraw; while the table is held still, only count them."""
        with self._lock:
            arrived = self._catch_up()
            self._apply_filter_options()
            if not self.follow.value and arrived and self.table.value:
                self._held += arrived
                self._render_status()
                return
            self._render()
        if arrived:
            self._saver.request()

    def _method_options(self) -> list[tuple[str, str]]:
        rows = self._analyzer.rows
        methods = sorted({r.method for r in rows if r.method != "?"})
        options = [("all methods", ALL_METHODS)]
        for method in methods:
            options.append((method, method))
            if method == "session/update":
                kinds = sorted({r.update for r in rows if r.update})
                options += [(f"\u2003\u00b7 {kind}", UPDATE_PREFIX + kind) for kind in kinds]
        wanted = self._wanted[0]
        if wanted and wanted not in {value for _label, value in options}:
            options.append((wanted.replace(UPDATE_PREFIX, "session/update \u00b7 "), wanted))
        return options

    def _apply_filter_options(self) -> None:
        sessions = [("all sessions", ALL_SESSIONS), *((s, s) for s in self._analyzer.sessions)]
        if self._wanted[1] and self._wanted[1] not in self._analyzer.sessions:
            sessions.append((self._wanted[1], self._wanted[1]))
        self._applying = True
        try:
            for control, options, wanted in ((self.method, self._method_options(), self._wanted[0]),
                                             (self.session, sessions, self._wanted[1])):
                if tuple(control.options) != tuple(options):
                    with control.hold_sync():
                        keep = control.value if control.value is not None else wanted
                        control.options = options
                        control.value = keep if keep in {v for _l, v in options} else ALL_METHODS
                if wanted and control.value != wanted and wanted in {v for _l, v in options}:
                    control.value = wanted  # the filter asked for at construction
        finally:
            self._applying = False

    def _render(self) -> None:
        rows = self.visible()
        if not _check_some(rows):
            self._checking = True
            self._throttle.request()  # the next render checks the next slice and shows its marks
        elif self._checking:  # every row shown is checked now: the saved form gets their marks too
            self._checking = False
            self._saver.request()
        self._held = 0
        self.table.value = table_html(rows, total=len(self._analyzer.rows))
        self.capabilities.value = capabilities_html(capabilities(self._analyzer.rows))
        self._render_status()

    def _render_status(self) -> None:
        notes = []
        if self._held:
            notes.append(f"{self._held} new frames held back: tick Follow newest to see them")
        if not _schema.available():
            notes.append(f"schema checks are off: {_schema.INSTALL_HINT}")
        text = escape("; ".join(notes), quote=False)
        self.status.value = f'<span style="color:{MUTED}">{text}</span>' if notes else ""

    def _on_control(self, change: dict[str, Any]) -> None:
        with self._lock:
            if self._applying:
                return
            if change["owner"] is self.method:
                self._wanted = (change["new"] or ALL_METHODS, self._wanted[1])
            elif change["owner"] is self.session:
                self._wanted = (self._wanted[0], change["new"] or ALL_SESSIONS)
            self._render()
        # No save here: refreshing the saved form rebuilds the view under the reader's hands; the
        # next frame to arrive carries the new filter into it.
