"""SessionPanel: a session's header and one control per config option, kept in step with the agent,
and its saved form kept current in the notebook.

Two directions, never mixed up:

- agent -> widgets: every ``config`` / ``info`` / ``status`` / ``usage`` event of the session's
  state (on the background loop thread) re-renders the panel there and marks its outputs
  stale (``LiveDisplay.refresh``); their static forms are published later on the render
  thread. The panel's own render stays on the loop: it is small, comes once per change of a
  setting, title or status (never per chunk of a reply), and so the controls already show a
  setting when ``session.set`` returns. Applying agent values to the controls must not look like a
  user change, or the panel would echo a ``set_config_option`` back to the agent: ipywidgets
  resets a Dropdown's value whenever its ``options`` change, and that reset fires the same
  observers a click does. ``_applying`` (held under the panel's lock) marks those changes as ours.
- widgets -> agent: a user change (kernel thread, from the comm) submits ``session.aset`` to
  the loop and returns at once. The control is disabled while the request is in flight; on
  refusal it goes back to the agent's value and the error shows under the controls.

The session's notices that came while no turn ran show under the controls (the latest few, hidden while a
turn runs: its cell shows its own), and so does a compaction that began outside any turn; the context meter
follows the latest compaction (``notice`` / ``compaction`` / ``status`` events, on the loop).

``close()`` (``%acp stop``, a closed session, kernel exit) disables the controls and replaces
every output of the panel with its static form, marked closed.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from html import escape
from typing import Any

import ipywidgets as widgets

from .. import _loop
from .._visible import visible
from ..errors import AcpError
from ..state import ConfigOption, ConfigOptions, StateEvent
from ._html import error_html, header_html, muted_html, usage_html, widget_bundle
from .comms import follow_changes
from .display import Bundle, LiveDisplay, close_widget_tree
from .kernel import kernel_tools_note
from .labels import bound_agent, choice_label, dropdown_options, session_header_info, value_label
from .notices import PANEL_NOTICES, outside_compaction, panel_compaction_html, panel_notices_html
from .static import LIVE_WORDS, PanelSnapshot, panel_forms

__all__ = ["SessionPanel", "binding_note", "choice_label", "dropdown_options", "session_header_info", "value_label"]

logger = logging.getLogger(__name__)

DESCRIPTION_STYLE = {"description_width": "initial"}
# Seconds between two refreshes of a panel's outputs: a refresh makes JupyterLab rebuild the view.
PANEL_REFRESH_INTERVAL = 1.0


def _kernel_tools_of(session: Any) -> Any:
    """The session's KernelTools (its link's ``tools``), or None when it was offered none."""
    return getattr(getattr(session, "kernel_tools", None), "tools", None)


def kernel_tools_problem(session: Any) -> str:
    """What keeps the session's kernel tools from serving (a failed MCP SDK import), in words; "" if nothing."""
    problem = getattr(_kernel_tools_of(session), "problem", "")
    return f"kernel tools not working: {problem}" if problem else ""


def binding_note(session: Any, proxy_agents: Sequence[str]) -> str:
    """What the panel says when a proxy session can no longer switch agents; "" otherwise."""
    agent = bound_agent(session, proxy_agents)
    if agent is None:
        return ""
    return (f"This session is tied to agent '{agent}' since its first prompt, so only its models are offered. "
            "To use another agent's models, open a new session: %acp new")


@dataclass
class _Control:
    option_id: str
    kind: str
    widget: widgets.Widget
    signature: tuple[Any, ...] = field(default=())


def _branch_html(session: Any) -> str:
    """Under the header: the session's branch when its conversation has more than one, and its handover if any."""
    branch, handover = getattr(session, "branch", None), getattr(session, "handover", None)
    words = [branch.describe()] if branch is not None and len(branch.conversation.branches) > 1 else []
    if handover is not None:
        words.append(handover.describe())
    text = visible("; ".join(words))
    return muted_html(escape(f"⎇ {text}"), css_class="acpnb-branch") if text else ""


class SessionPanel:
    """The live view of one session: ``show()`` displays it (as often as asked); it follows the agent
    until ``close()``.

    ``title_hint`` stands in until the agent names the session; ``proxy_agents`` (the proxy's
    agent names) lets the panel say when the session is tied to one of them; ``metadata()`` is
    put on every output (the notebook's record of its sessions).
    """

    def __init__(self, session: Any, *, title_hint: str | None = None, proxy_agents: Sequence[str] = (),
                 metadata: Callable[[], Mapping[str, Any]] | None = None) -> None:
        self.session = session
        self.title_hint = title_hint
        self.proxy_agents = tuple(proxy_agents)
        self._metadata = metadata
        self._lock = threading.RLock()
        self._settled = threading.Condition(self._lock)
        self._applying = False
        self._inflight: dict[str, concurrent.futures.Future[Any]] = {}
        self._unsettled = 0  # changes submitted whose outcome is not applied yet
        self._controls: dict[str, _Control] = {}
        self.displays: list[LiveDisplay] = []  # appended on the kernel thread, read anywhere (copied)
        self.closed_reason: str | None = None
        self.header = widgets.HTML(layout=widgets.Layout(width="100%"))
        self.controls = widgets.Box(
            layout=widgets.Layout(display="flex", flex_flow="row wrap", align_items="center",
                                  grid_gap="4px 18px", padding="6px 2px 2px 2px", width="100%")
        )
        self.note = widgets.HTML()
        self.error = widgets.HTML()
        self.notices = widgets.HTML()
        self.notices.add_class("acpnb-panel-notices")
        self.footer = widgets.HTML()
        self.widget = widgets.VBox([self.header, self.controls, self.note, self.error, self.notices, self.footer],
                                   layout=widgets.Layout(width="100%", margin="4px 0"))
        self.widget.add_class("acpnb-panel")
        self.widget.add_class("acpnb-live")
        self.last_error: str = ""
        self.footer.add_class("acpnb-panel-usage")
        self.apply_config(session.config)
        self.render_header()
        self.render_footer()  # a reopened session may have reported its usage already
        self.render_notices()
        self._unobserve = session.state.observe(self._on_event)
        tools = _kernel_tools_of(session)  # a failure of the kernel tools shows in the note, and its end too
        self._unobserve_tools = tools.observe_problem(self._on_tools_problem) if tools is not None else None
        link = getattr(session, "kernel_tools", None)  # and the note follows every change of their policy
        self._unobserve_policy = link.observe_policy(self._on_tools_problem) if link is not None else None

    # --- display ---------------------------------------------------------
    def show(self) -> LiveDisplay:
        """Display the panel in the running cell (kernel thread); the output is kept current."""
        live = LiveDisplay(self._bundle, interval=PANEL_REFRESH_INTERVAL)
        with self._lock:
            self.displays.append(live)
        live.show()
        return live

    def _bundle(self, final: bool, reason: str) -> Bundle:
        snapshot = self.snapshot(closed=final, reason=reason)
        if not final and snapshot.header.status != "closed":
            # What a notebook saved now reopens with: the settings as they are, and no status that a turn
            # in another cell may already have made untrue.
            snapshot = replace(snapshot, header=replace(snapshot.header, status="open", extra=LIVE_WORDS))
        forms = panel_forms(snapshot)
        metadata = dict(self._metadata()) if self._metadata is not None else {}
        return Bundle({**({} if final else widget_bundle(self.widget)), **forms}, metadata)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = self._bundle(self.closed_reason is not None, self.closed_reason or "")
        return bundle.data, bundle.metadata

    def snapshot(self, *, closed: bool = False, reason: str = "") -> PanelSnapshot:
        """What the panel shows now, as plain data; ``closed`` forces the closed look (its last form)."""
        with self._lock:
            info = self._header_info()
            if closed and info.status != "closed":
                info = session_header_info(self.session, status="closed", detail="", title_hint=self.title_hint)
            elif info.status == "working":
                # A turn's own output says it is working; the panel's saved form should not flip at
                # every turn (each refresh rebuilds the live view in JupyterLab).
                info = session_header_info(self.session, status="idle", detail="", title_hint=self.title_hint)
            settings = tuple((o.name, value_label(o)) for o in self.session.config)
            note = reason if closed and reason else self._note()
            busy = self.session.busy
            return PanelSnapshot(header=info, settings=settings, note=note, error=self.last_error,
                                 usage=self.session.usage,
                                 notices=() if busy else tuple(self.session.state.notices[-PANEL_NOTICES:]),
                                 compaction=self._outside_compaction(), meter_compaction=self._meter_compaction())

    def _refresh_displays(self) -> None:
        with self._lock:
            displays = list(self.displays)
        for live in displays:
            live.refresh()

    def close(self, reason: str = "") -> None:
        """The session is over: stop following it, disable the controls, and turn every output of the
        panel into its static form, marked closed (``reason`` is said under it)."""
        with self._lock:
            if self.closed_reason is not None:
                return
            self.closed_reason = reason
            self._unobserve()
            if self._unobserve_tools is not None:
                self._unobserve_tools()
            if self._unobserve_policy is not None:
                self._unobserve_policy()
            for control in self._controls.values():
                control.widget.disabled = True
            self.render_header()
            displays = list(self.displays)
        for live in displays:
            live.finalize(reason)
        if displays:
            close_widget_tree(self.widget)  # every output is static now: free the widget models

    # --- agent -> widgets --------------------------------------------------
    def _on_event(self, event: StateEvent) -> None:
        if event.kind == "config":
            self.apply_config(event.data)
            self.render_header()
        elif event.kind in ("info", "status", "mode"):
            self.render_header()
            self.render_notices()  # a turn began or ended: the notices show while none runs
        elif event.kind == "usage":
            self.render_footer()
        elif event.kind in ("notice", "compaction"):
            # A compaction's every summary chunk comes here, a turn's too: the outputs only when the panel changed.
            if not (self.render_notices() | self.render_footer()):
                return
        else:
            return
        self._refresh_displays()

    def _on_tools_problem(self, _problem: str) -> None:
        self.render_header()
        self._refresh_displays()

    def kernel_tools_changed(self) -> None:
        """The agent's kernel tools policy changed (any thread): the note says so at once, also for a session
        that has no server of its own."""
        self._on_tools_problem("")

    def _header_info(self) -> Any:
        if self.closed_reason is not None:
            return session_header_info(self.session, status="closed", detail="", title_hint=self.title_hint)
        return session_header_info(self.session, title_hint=self.title_hint)

    def _note(self) -> str:
        """The proxy's binding and the session's kernel tools, in words."""
        return " · ".join(n for n in (binding_note(self.session, self.proxy_agents), kernel_tools_note(self.session),
                                      kernel_tools_problem(self.session)) if n)

    def render_header(self) -> None:
        with self._lock:
            header = header_html(self._header_info(), live=True) + _branch_html(self.session)
            if self.header.value != header:
                self.header.value = header
            note = self._note()
            note_html = muted_html(escape(note), css_class="acpnb-note") if note else ""
            if self.note.value != note_html:
                self.note.value = note_html

    def render_footer(self) -> bool:
        """The context meter: tokens in the agent's context of its window, and the session's cost; whether it
        changed."""
        with self._lock:
            footer = usage_html(self.session.usage, compaction=self._meter_compaction())
            changed = self.footer.value != footer
            if changed:
                self.footer.value = footer
            return changed

    # --- notices and compactions (loop thread; the constructor once) ------------------
    def _outside_compaction(self) -> Any:
        """The session's latest compaction when it began outside any turn, else None."""
        return outside_compaction(list(self.session.state.compactions.values()), list(self.session.turns))

    def _meter_compaction(self) -> Any:
        """The compaction the context meter follows: the latest, while it runs or until the agent reports usage
        again after the first report that followed it."""
        compactions = self.session.state.compactions
        latest = next(reversed(compactions.values()), None) if compactions else None
        if latest is None:
            return None
        usage = self.session.usage
        return latest if not latest.finished or (usage is not None and usage is latest.usage_after) else None

    def render_notices(self) -> bool:
        """The session's latest notices while no turn runs, and a compaction that began outside any turn; whether
        that changed."""
        with self._lock:
            state = self.session.state
            html = panel_notices_html(state.notices, busy=self.session.busy) + panel_compaction_html(
                self._outside_compaction())
            changed = self.notices.value != html
            if changed:
                self.notices.value = html
            return changed

    def apply_config(self, config: ConfigOptions) -> None:
        """Show ``config``: reuse, update, create or drop controls, in the agent's order."""
        with self._lock:
            self._applying = True
            try:
                children = []
                for option in config:
                    control = self._controls.get(option.id)
                    if control is None or control.kind != option.type:
                        if control is not None:
                            close_widget_tree(control.widget)
                        control = self._make_control(option)
                        self._controls[option.id] = control
                    else:
                        self._update_control(control, option)
                    children.append(control.widget)
                for gone in set(self._controls) - set(config.ids()):
                    close_widget_tree(self._controls.pop(gone).widget)
                if tuple(children) != tuple(self.controls.children):
                    self.controls.children = tuple(children)
            finally:
                self._applying = False

    def _make_control(self, option: ConfigOption) -> _Control:
        disabled = option.read_only or option.id in self._inflight or self.closed_reason is not None
        tooltip = option.description or None
        if option.type == "boolean":
            widget: widgets.Widget = widgets.Checkbox(value=bool(option.value), description=option.name,
                                                      indent=False, disabled=disabled, tooltip=tooltip,
                                                      layout=widgets.Layout(width="auto"))
            signature: tuple[Any, ...] = ()
        else:
            pairs = dropdown_options(option)
            widget = widgets.Dropdown(options=pairs, value=option.value, description=option.name,
                                      disabled=disabled, tooltip=tooltip, style=DESCRIPTION_STYLE,
                                      layout=widgets.Layout(width="auto"))
            signature = pairs
        widget.add_class(f"acpnb-option-{option.id}")
        follow_changes(widget)  # a second pick while a %%acp cell awaits must reach the kernel too
        widget.observe(lambda change, option_id=option.id: self._on_user_change(option_id, change), names="value")
        return _Control(option.id, option.type, widget, signature)

    def _update_control(self, control: _Control, option: ConfigOption) -> None:
        widget = control.widget
        disabled = option.read_only or option.id in self._inflight or self.closed_reason is not None
        with widget.hold_sync():
            if option.type == "select":
                pairs = dropdown_options(option)
                if pairs != control.signature:
                    # Resets the value to the first choice (ipywidgets does that on new options);
                    # _applying keeps that reset from being sent to the agent.
                    widget.options = pairs
                    control.signature = pairs
                if widget.value != option.value:
                    widget.value = option.value
            elif widget.value != bool(option.value):
                widget.value = bool(option.value)
            if widget.description != option.name:
                widget.description = option.name
            if widget.disabled != disabled:
                widget.disabled = disabled
            tooltip = option.description or None
            if widget.tooltip != tooltip:
                widget.tooltip = tooltip

    # --- widgets -> agent --------------------------------------------------
    def _on_user_change(self, option_id: str, change: dict[str, Any]) -> None:
        with self._lock:
            if self._applying or self.closed_reason is not None:
                return
            option = self.session.config.get(option_id)
            value = change["new"]
            if option is None or option.value == value or option_id in self._inflight:
                return
            control = self._controls[option_id]
            control.widget.disabled = True
            self.error.value = ""
            self.last_error = ""
            future = _loop.submit(self.session.aset(option_id, value))
            self._inflight[option_id] = future
            self._unsettled += 1
        future.add_done_callback(lambda done: self._on_set_done(option_id, done))

    def _on_set_done(self, option_id: str, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._inflight.pop(option_id, None)
            error = None if future.cancelled() else future.exception()
            if error is not None:
                message = error.message if isinstance(error, AcpError) else str(error)
                self.last_error = message
                self.error.value = error_html(message)
                if not isinstance(error, AcpError):
                    logger.debug("set_config_option %s failed: %r", option_id, error)
            # Back to the agent's values: the new list on success, the unchanged one on refusal.
            self.apply_config(self.session.config)
            self.render_header()
            self._unsettled -= 1
            self._settled.notify_all()
        self._refresh_displays()

    # --- introspection (tests, notebooks) ------------------------------------
    def control(self, option_id: str) -> widgets.Widget:
        """The widget showing option ``option_id``."""
        return self._controls[option_id].widget

    @property
    def option_ids(self) -> list[str]:
        with self._lock:
            return [next(c.option_id for c in self._controls.values() if c.widget is w)
                    for w in self.controls.children]

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until every submitted change has been answered and shown (for scripts and tests)."""
        with self._settled:
            return self._settled.wait_for(lambda: self._unsettled == 0, timeout)
