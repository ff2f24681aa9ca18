"""SessionPanel: a session's header and one control per config option, kept in step with the agent.

Two directions, never mixed up:

- agent -> widgets: every ``config`` / ``info`` / ``status`` / ``usage`` event of the session's
  state (on the background loop thread) re-renders the panel. Applying agent values to the
  controls must not look like a user change, or the panel would echo a ``set_config_option``
  back to the agent: ipywidgets resets a Dropdown's value whenever its ``options`` change,
  and that reset fires the same observers a click does. ``_applying`` (held under a lock)
  marks those changes as ours.
- widgets -> agent: a user change submits ``session.aset`` to the loop and returns at once.
  The control is disabled while the request is in flight; on refusal it goes back to the
  agent's value and the error shows under the controls.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets

from .. import _loop
from ..errors import AcpError
from ..state import ConfigOption, ConfigOptions, StateEvent
from ._html import HeaderInfo, error_html, header_html, md_escape, usage_html, widget_bundle

__all__ = ["SessionPanel", "choice_label", "dropdown_options", "session_header_info", "value_label"]

logger = logging.getLogger(__name__)

DESCRIPTION_STYLE = {"description_width": "initial"}


def choice_label(option: ConfigOption, value: str) -> str:
    choice = option.choice(value)
    if choice is None:
        return value
    return f"{choice.group} / {choice.name}" if option.grouped and choice.group else choice.name


def value_label(option: ConfigOption) -> str:
    """The current value for a header: the choice's name, with its group when another group has that name too."""
    if option.type != "select":
        return option.value_name
    choice = option.choice(str(option.value))
    if choice is None:
        return str(option.value)
    twins = [c for c in option.choices if c.name == choice.name]
    return f"{choice.group} / {choice.name}" if len(twins) > 1 and choice.group else choice.name


def dropdown_options(option: ConfigOption) -> tuple[tuple[str, str], ...]:
    """(label, value) pairs for a select option; grouped choices read "Group / Choice"."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for choice in option.choices:
        label = f"{choice.group} / {choice.name}" if option.grouped and choice.group else choice.name
        if label in seen:  # two choices with one name: keep both selectable
            label = f"{label} ({choice.value})"
        seen.add(label)
        pairs.append((label, choice.value))
    current = option.value
    if isinstance(current, str) and current not in option.values:
        # The agent reports a value it does not list; show it rather than fail.
        pairs.append((current, current))
    return tuple(pairs)


def agent_label(session: Any) -> str:
    info = session.agent.info or {}
    name = info.get("name") or session.agent.name or "agent"
    version = info.get("version")
    return f"{name} {version}" if version else str(name)


def session_status(session: Any) -> tuple[str, str]:
    """(status, detail) for a header: the agent's lifecycle wins over the session's turn status."""
    agent_status = getattr(session.agent, "status", "running")
    if agent_status == "closed" or getattr(session, "closed", False):
        return "closed", ""
    if agent_status == "exited":
        return "error", f"the agent exited (code {session.agent.exit_code})"
    return session.state.status or "idle", session.state.status_detail or ""


def session_header_info(session: Any, *, title: str | None = None, status: str | None = None,
                        detail: str | None = None, model: str | None = None, extra: str = "") -> HeaderInfo:
    info = session.agent.info or {}
    fallback = info.get("title") or info.get("name") or session.agent.name or "ACP session"
    option = session.model_option
    live_status, live_detail = session_status(session)
    return HeaderInfo(
        title=title if title is not None else (session.title or fallback),
        agent=agent_label(session),
        model=model if model is not None else (value_label(option) if option is not None else None),
        status=status or live_status,
        detail=live_detail if detail is None else detail,
        extra=extra,
    )


@dataclass
class _Control:
    option_id: str
    kind: str
    widget: widgets.Widget
    signature: tuple[Any, ...] = field(default=())


class SessionPanel:
    """The live view of one session: ``display(panel)`` shows it; it follows the agent until closed."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self._lock = threading.RLock()
        self._settled = threading.Condition(self._lock)
        self._applying = False
        self._inflight: dict[str, concurrent.futures.Future[Any]] = {}
        self._unsettled = 0  # changes submitted whose outcome is not applied yet
        self._controls: dict[str, _Control] = {}
        self.header = widgets.HTML(layout=widgets.Layout(width="100%"))
        self.controls = widgets.Box(
            layout=widgets.Layout(display="flex", flex_flow="row wrap", align_items="center",
                                  grid_gap="4px 18px", padding="6px 2px 2px 2px", width="100%")
        )
        self.error = widgets.HTML()
        self.footer = widgets.HTML()
        self.widget = widgets.VBox([self.header, self.controls, self.error, self.footer],
                                   layout=widgets.Layout(width="100%", margin="4px 0"))
        self.widget.add_class("acpnb-panel")
        self.last_error: str = ""
        self.apply_config(session.config)
        self.render_header()
        self._unobserve = session.state.observe(self._on_event)

    # --- display ---------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # Plain text and Markdown for readers without the live widgets (untrusted notebooks, GitHub).
        info = session_header_info(self.session)
        settings = " · ".join(f"{o.name}: {value_label(o)}" for o in self.session.config)
        line = " · ".join(p for p in (info.title, info.agent, f"model: {info.model}" if info.model else "",
                                      info.status) if p)
        return {**widget_bundle(self.widget, **kwargs), "text/plain": f"{line}\n{settings}".rstrip(),
                "text/markdown": f"**{md_escape(info.title)}** · {md_escape(line[len(info.title) + 3:])}\n\n"
                                 f"{md_escape(settings)}".rstrip()}

    def close(self) -> None:
        """Stop following the session and close the widgets."""
        self._unobserve()
        self.widget.close()
        for control in self._controls.values():
            control.widget.close()

    # --- agent -> widgets --------------------------------------------------
    def _on_event(self, event: StateEvent) -> None:
        if event.kind == "config":
            self.apply_config(event.data)
            self.render_header()
        elif event.kind in ("info", "status", "mode"):
            self.render_header()
        elif event.kind == "usage":
            self.render_footer()

    def render_header(self) -> None:
        with self._lock:
            self.header.value = header_html(session_header_info(self.session))

    def render_footer(self) -> None:
        with self._lock:
            self.footer.value = usage_html(self.session.usage)

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
                            control.widget.close()
                        control = self._make_control(option)
                        self._controls[option.id] = control
                    else:
                        self._update_control(control, option)
                    children.append(control.widget)
                for gone in set(self._controls) - set(config.ids()):
                    self._controls.pop(gone).widget.close()
                if tuple(children) != tuple(self.controls.children):
                    self.controls.children = tuple(children)
            finally:
                self._applying = False

    def _make_control(self, option: ConfigOption) -> _Control:
        disabled = option.read_only or option.id in self._inflight
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
        widget.observe(lambda change, option_id=option.id: self._on_user_change(option_id, change), names="value")
        return _Control(option.id, option.type, widget, signature)

    def _update_control(self, control: _Control, option: ConfigOption) -> None:
        widget = control.widget
        disabled = option.read_only or option.id in self._inflight
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
            if self._applying:
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
