"""PermissionPrompt: an agent's ``session/request_permission`` as buttons that resolve a concurrent Future."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Mapping
from html import escape
from typing import Any

import ipywidgets as widgets

from .. import _loop
from ._html import BORDER, FG, MUTED

__all__ = ["PermissionPrompt", "describe_request"]

BUTTON_STYLES: dict[str, str] = {
    "allow_once": "success",
    "allow_always": "info",
    "reject_once": "danger",
    "reject_always": "danger",
}


def describe_request(tool_call: Mapping[str, Any]) -> str:
    """What the agent wants to do, in one line of HTML."""
    title = str(tool_call.get("title") or tool_call.get("toolCallId") or "a tool call")
    kind = tool_call.get("kind")
    paths = [str(loc.get("path")) for loc in tool_call.get("locations") or []
             if isinstance(loc, Mapping) and loc.get("path")]
    where = f'<div style="color:{MUTED};font-size:0.9em">{escape(", ".join(paths))}</div>' if paths else ""
    kind_text = f' <span style="color:{MUTED}">({escape(str(kind))})</span>' if kind else ""
    return f'<div style="color:{FG}"><b>The agent asks permission:</b> {escape(title)}{kind_text}</div>{where}'


class PermissionPrompt:
    """Shows the agent's options as buttons; ``future`` resolves to the clicked option id.

    ``future`` resolves to None when the request is withdrawn (the turn was cancelled:
    the session cancels the future), and to ``fallback`` when nobody answered within
    ``timeout`` seconds (unattended runs).
    """

    def __init__(self, tool_call: Mapping[str, Any], options: list[Mapping[str, Any]], *,
                 timeout: float | None = None, fallback: str | None = None) -> None:
        self.tool_call = dict(tool_call)
        self.options = [dict(o) for o in options]
        self.future: concurrent.futures.Future[str | None] = concurrent.futures.Future()
        self.future.set_running_or_notify_cancel()
        self._lock = threading.Lock()
        self.decision: str = ""
        self.label = widgets.HTML(describe_request(self.tool_call))
        self.buttons: list[widgets.Button] = []
        for option in self.options:
            button = widgets.Button(description=str(option.get("name") or option.get("optionId")),
                                    button_style=BUTTON_STYLES.get(str(option.get("kind")), ""),
                                    tooltip=str(option.get("kind") or ""),
                                    layout=widgets.Layout(width="auto"))
            button.add_class("acpnb-permission-option")
            option_id = option.get("optionId")
            button.on_click(lambda _button, option_id=option_id: self.choose(option_id))
            self.buttons.append(button)
        self.outcome = widgets.HTML()
        self.widget = widgets.VBox(
            [self.label, widgets.HBox(self.buttons, layout=widgets.Layout(grid_gap="6px")), self.outcome],
            layout=widgets.Layout(border=f"1px solid {BORDER}", padding="6px 10px", margin="4px 0"),
        )
        self.widget.add_class("acpnb-permission")
        self.future.add_done_callback(self._settled)
        if timeout:
            _loop.call_soon(_loop.get_loop().call_later, timeout, self._expire, timeout, fallback)

    def choose(self, option_id: str | None) -> None:
        """Answer the request (a click, or code); later answers are ignored."""
        with self._lock:
            if not self.future.done():
                self.future.set_result(option_id)

    def _expire(self, timeout: float, fallback: str | None) -> None:
        with self._lock:
            if self.future.done():
                return
            self.decision = f"no answer within {timeout:g} s"
            self.future.set_result(fallback)

    def _name_of(self, option_id: str | None) -> str:
        for option in self.options:
            if option.get("optionId") == option_id:
                return str(option.get("name") or option_id)
        return str(option_id)

    def _settled(self, future: concurrent.futures.Future[str | None]) -> None:
        if future.cancelled() or future.result() is None:
            text = "Withdrawn: the turn was cancelled."
        else:
            chosen = self._name_of(future.result())
            why = self.decision[:1].upper() + self.decision[1:]  # set by _expire: "no answer within N s"
            text = f"{why}: {chosen}." if why else f"You chose: {chosen}."
        self.decision = text
        for button in self.buttons:
            button.disabled = True
        self.outcome.value = f'<div style="color:{MUTED};font-size:0.9em">{escape(text)}</div>'
