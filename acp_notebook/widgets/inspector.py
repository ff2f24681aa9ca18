"""ProtocolInspector (``%acp log``): every frame of ``agent.log``, live, filterable by method, full JSON on demand."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import ipywidgets as widgets

from ._html import BORDER, MONO, MUTED, json_html, widget_bundle
from .chat import Throttle

__all__ = ["FrameSummary", "ProtocolInspector", "frames_html", "summarize_frames"]

ALL_METHODS = "all methods"
# The frame list is re-sent whole when it changes: refresh it less often than a streaming reply.
REFRESH_INTERVAL = 0.5
NBSP = "\u00a0"
ARROWS = {"send": "\u2192", "recv": "\u2190"}  # client -> agent, agent -> client


@dataclass(frozen=True)
class FrameSummary:
    """One wire frame as the inspector lists it."""

    index: int
    direction: str  # "send" (client -> agent) or "recv"
    t: float
    kind: str  # request, notification, result, error
    method: str  # the request's method; for results and errors, the method they answer
    session_id: str
    detail: str  # the update kind, stop reason or error message: the gist in a few words
    msg: Mapping[str, Any]

    @property
    def clock(self) -> str:
        return datetime.datetime.fromtimestamp(self.t).strftime("%H:%M:%S.%f")[:-3]

    @property
    def label(self) -> str:
        """A one-line, fixed-column label (non-breaking spaces: option text collapses plain ones)."""
        kind = {"request": "req", "notification": "note", "result": "result", "error": "ERROR"}[self.kind]
        columns = [f"{self.index:>4}", ARROWS.get(self.direction, "?"), self.clock, f"{kind:<6}",
                   f"{self.method:<28}", f"{self.session_id:<10}", self.detail]
        return "  ".join(columns).rstrip().replace(" ", NBSP)


def _gist(msg: Mapping[str, Any], method: str) -> str:
    params = msg.get("params") if isinstance(msg.get("params"), Mapping) else {}
    result = msg.get("result") if isinstance(msg.get("result"), Mapping) else {}
    if "error" in msg:
        error = msg.get("error") or {}
        return f"{error.get('code')} {error.get('message', '')}"[:80]
    if method == "session/update":
        update = params.get("update") or {}
        kind = str(update.get("sessionUpdate", ""))
        content = update.get("content") if isinstance(update.get("content"), Mapping) else {}
        if content.get("type") == "text":
            text = str(content.get("text", "")).replace("\n", " ")
            return f"{kind} {text[:40]!r}"
        if kind == "session_info_update" and "title" in update:
            return f"{kind} title={update.get('title')!r}"
        return kind
    if method == "session/set_config_option" and "configId" in params:
        return f"{params.get('configId')}={params.get('value')!r}"
    if method == "session/set_config_option" and "configOptions" in result:
        return f"{len(result['configOptions'])} options"
    if "stopReason" in result:
        return f"stopReason={result['stopReason']}"
    if method == "session/request_permission" and "toolCall" in params:
        return str((params.get("toolCall") or {}).get("title", ""))
    if method == "session/request_permission" and "outcome" in result:
        outcome = result.get("outcome") or {}
        return str(outcome.get("optionId") or outcome.get("outcome") or "")
    if method == "session/prompt" and isinstance(params.get("prompt"), list):
        texts = [str(b.get("text", "")) for b in params["prompt"] if isinstance(b, Mapping) and b.get("type") == "text"]
        return repr(" ".join(texts).replace("\n", " ")[:40])
    if method in ("fs/read_text_file", "fs/write_text_file") and "path" in params:
        return str(params["path"])
    return ""


class _Summarizer:
    """Turns log entries into FrameSummary rows, remembering which request each answer belongs to."""

    def __init__(self) -> None:
        self._requests: dict[tuple[str, Any], tuple[str, str]] = {}
        self.count = 0

    def add(self, entry: Mapping[str, Any]) -> FrameSummary:
        msg = entry.get("msg") or {}
        direction = str(entry.get("dir", "?"))
        params = msg.get("params") if isinstance(msg.get("params"), Mapping) else {}
        session_id = str(params.get("sessionId") or "")
        if "method" in msg:
            method = str(msg["method"])
            kind = "request" if "id" in msg else "notification"
            if kind == "request":
                self._requests[(direction, msg["id"])] = (method, session_id)
        else:
            # An answer travels the other way from its request.
            asked_by = "recv" if direction == "send" else "send"
            method, session_id = self._requests.pop((asked_by, msg.get("id")), ("?", ""))
            result = msg.get("result") if isinstance(msg.get("result"), Mapping) else {}
            session_id = session_id or str(result.get("sessionId") or "")
            kind = "error" if "error" in msg else "result"
        summary = FrameSummary(self.count, direction, float(entry.get("t", 0.0)), kind, method, session_id,
                               _gist(msg, method), msg)
        self.count += 1
        return summary


def summarize_frames(log: Iterable[Mapping[str, Any]]) -> list[FrameSummary]:
    summarizer = _Summarizer()
    return [summarizer.add(entry) for entry in log]


def frames_html(frames: Sequence[FrameSummary], *, open_json: bool = False) -> str:
    """A static list of frames, one line each with its JSON folded under it (for notebooks read without a kernel)."""

    def cell(text: str, width: str, style: str = "") -> str:
        return (f'<span style="display:inline-block;width:{width};vertical-align:top;overflow:hidden;'
                f'text-overflow:ellipsis;white-space:nowrap;{style}">{text}</span>')

    rows = []
    for frame in frames:
        opened = " open" if open_json else ""
        kind_color = "#c62828" if frame.kind == "error" else MUTED
        summary = "".join([
            cell(str(frame.index), "2.5em", f"color:{MUTED};text-align:right;padding-right:0.6em"),
            cell(ARROWS.get(frame.direction, "?"), "1.5em"),
            cell(frame.clock, "7.5em", f"color:{MUTED}"),
            cell(escape(frame.kind), "7em", f"color:{kind_color}"),
            cell(f"<b>{escape(frame.method)}</b>", "17em"),
            cell(escape(frame.session_id), "6em", f"color:{MUTED}"),
            cell(escape(frame.detail), "calc(100% - 48em)", f"color:{MUTED}"),
        ])
        rows.append(
            f'<details{opened} style="border-top:1px solid {BORDER};padding:1px 0">'
            f'<summary style="cursor:pointer;white-space:nowrap;font-family:{MONO};font-size:0.85em">'
            f"{summary}</summary>"
            f'<div style="margin:2px 0 6px 4em">{json_html(frame.msg)}</div></details>'
        )
    return (f'<div class="acpnb-frames" style="text-align:left;max-width:100%">'
            f'<div style="color:{MUTED};font-size:0.85em;margin-bottom:2px">{len(frames)} frames: '
            f"\u2192 client to agent, \u2190 agent to client; click a line for its JSON</div>{''.join(rows)}</div>")


_STYLE = (
    "<style>.acpnb-inspector select{font-family:%s;font-size:12px}</style>" % MONO  # noqa: UP031
)


class ProtocolInspector:
    """A live list of an agent's frames: pick one to see its JSON; filter by method or session."""

    def __init__(self, agent: Any, *, method: str | None = None, session_id: str | None = None,
                 rows: int = 10, interval: float = REFRESH_INTERVAL, limit: int = 500) -> None:
        self.agent = agent
        self.limit = limit
        self._lock = threading.RLock()
        self._applying = False
        self._summarizer = _Summarizer()
        self._frames: list[FrameSummary] = []
        self._seen = 0
        self.method = widgets.Dropdown(options=[ALL_METHODS], value=ALL_METHODS, description="Method",
                                       style={"description_width": "initial"}, layout=widgets.Layout(width="auto"))
        self.session = widgets.Text(value=session_id or "", placeholder="any session", description="Session",
                                    continuous_update=False, style={"description_width": "initial"},
                                    layout=widgets.Layout(width="16em"))
        self.follow = widgets.Checkbox(value=True, description="Follow newest", indent=False,
                                       layout=widgets.Layout(width="auto"))
        self.count = widgets.HTML()
        self.frames = widgets.Select(options=[], rows=rows, layout=widgets.Layout(width="100%"))
        self.detail = widgets.HTML()
        self.widget = widgets.VBox(
            [widgets.HTML(_STYLE),
             widgets.HBox([self.method, self.session, self.follow, self.count],
                          layout=widgets.Layout(grid_gap="12px", align_items="center")),
             self.frames, self.detail],
            layout=widgets.Layout(width="100%"),
        )
        self.widget.add_class("acpnb-inspector")
        self._wanted_method = method
        self._throttle = Throttle(self.refresh, interval)
        for control in (self.method, self.session, self.follow):
            control.observe(self._on_filter, names="value")
        self.frames.observe(self._on_pick, names="value")
        self.refresh()
        if method:
            self.method.value = method if method in self.method.options else ALL_METHODS
        self._unsubscribe = agent.on_frame(lambda _entry: self._throttle.request())

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        with self._lock:
            shown = self.visible()
        text = f"Protocol inspector of agent '{self.agent.name}': {len(shown)} of {len(self._frames)} frames"
        return {**widget_bundle(self.widget, **kwargs), "text/plain": text, "text/markdown": f"*{text}*"}

    def close(self) -> None:
        self._unsubscribe()
        self.widget.close()

    # --- data ------------------------------------------------------------------
    def _catch_up(self) -> None:
        log = self.agent.log
        if len(log) < self._seen:  # the agent trimmed its log's head: start over
            self._summarizer, self._frames, self._seen = _Summarizer(), [], 0
        for entry in list(log[self._seen:]):
            self._frames.append(self._summarizer.add(entry))
        self._seen = len(log)

    def visible(self) -> list[FrameSummary]:
        """The frames the filters let through, oldest first (at most ``limit``)."""
        method = self.method.value
        session_id = self.session.value.strip()
        shown = [f for f in self._frames
                 if (method == ALL_METHODS or f.method == method) and (not session_id or f.session_id == session_id)]
        return shown[-self.limit:]

    # --- rendering ---------------------------------------------------------------
    def refresh(self) -> None:
        with self._lock:
            self._catch_up()
            methods = [ALL_METHODS, *sorted({f.method for f in self._frames if f.method != "?"})]
            if self._wanted_method and self._wanted_method not in methods:
                methods.append(self._wanted_method)
            shown = self.visible()
            options = tuple((f.label, f.index) for f in shown)
            picked = self.frames.value
            if self.follow.value and shown:
                picked = shown[-1].index
            self._applying = True
            try:
                if tuple(self.method.options) != tuple(methods):
                    keep = self.method.value
                    self.method.options = methods
                    self.method.value = keep if keep in methods else ALL_METHODS
                if tuple(self.frames.options) != options:
                    self.frames.options = options
                valid = {f.index for f in shown}
                self.frames.value = picked if picked in valid else None
            finally:
                self._applying = False
            self.count.value = (f'<span style="color:{MUTED}">{len(shown)} of {len(self._frames)} frames</span>')
            self._show_detail()

    def _show_detail(self) -> None:
        index = self.frames.value
        frame = next((f for f in self._frames if f.index == index), None) if index is not None else None
        if frame is None:
            self.detail.value = f'<div style="color:{MUTED}">Pick a frame to see its JSON.</div>'
            return
        arrow = "client \u2192 agent" if frame.direction == "send" else "agent \u2192 client"
        self.detail.value = (
            f'<div style="color:{MUTED};font-size:0.9em;margin:4px 0">#{frame.index} &middot; {arrow} &middot; '
            f"{frame.clock} &middot; {escape(frame.kind)} &middot; <code>{escape(frame.method)}</code></div>"
            + json_html(frame.msg)
        )

    def _on_filter(self, _change: dict[str, Any]) -> None:
        with self._lock:
            if self._applying:
                return
            self._wanted_method = None
        self.refresh()

    def _on_pick(self, _change: dict[str, Any]) -> None:
        with self._lock:
            if self._applying:
                return
            # Picking an older frame by hand stops following the newest one.
            shown = self.visible()
            if shown and self.frames.value != shown[-1].index and self.follow.value:
                self._applying = True
                try:
                    self.follow.value = False
                finally:
                    self._applying = False
            self._show_detail()
