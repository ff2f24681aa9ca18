"""Permission requests in a turn's view: PermissionPrompt (buttons resolving a concurrent Future) and
PermissionAsker (the per-turn policy that turns each request into a prompt in the turn's view).

Threads: a prompt is made on the background loop thread (the session calls the policy there);
a click arrives on the kernel thread (the comm handler); a timeout fires on the loop thread.
``future`` is resolved once, under the prompt's lock, and whatever resolved it disables the
buttons and writes the outcome.
"""

from __future__ import annotations

import abc
import concurrent.futures
import threading
from collections.abc import Mapping
from html import escape
from typing import Any

import ipywidgets as widgets

from .. import _loop
from ._html import BORDER, FG, MUTED
from .comms import handled_in_order
from .kernel import code_html

__all__ = ["PermissionAsker", "PermissionPrompt", "describe_request"]

BUTTON_STYLES: dict[str, str] = {
    "allow_once": "success",
    "allow_always": "info",
    "reject_once": "danger",
    "reject_always": "danger",
}


def describe_request(tool_call: Mapping[str, Any]) -> str:
    """What the agent wants to do, in one line of HTML; code it wants to run (``rawInput.code``, as the kernel
    tools' run_code asks) follows, highlighted."""
    title = str(tool_call.get("title") or tool_call.get("toolCallId") or "a tool call")
    kind = tool_call.get("kind")
    paths = [str(loc.get("path")) for loc in tool_call.get("locations") or []
             if isinstance(loc, Mapping) and loc.get("path")]
    where = f'<div style="color:{MUTED};font-size:0.9em">{escape(", ".join(paths))}</div>' if paths else ""
    kind_text = f' <span style="color:{MUTED}">({escape(str(kind))})</span>' if kind else ""
    raw = tool_call.get("rawInput")
    code = raw.get("code") if isinstance(raw, Mapping) else None
    shown = code_html(code) if isinstance(code, str) and code else ""
    return (f'<div style="color:{FG}"><b>The agent asks permission:</b> {escape(title)}{kind_text}</div>{where}'
            f"{shown}")


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
        self._lock = threading.RLock()  # re-entered: resolving the future runs _settled in the same thread
        self.decision: str = ""
        self.label = widgets.HTML(describe_request(self.tool_call))
        self.buttons: list[widgets.Button] = []
        for option in self.options:
            button = widgets.Button(description=str(option.get("name") or option.get("optionId")),
                                    button_style=BUTTON_STYLES.get(str(option.get("kind")), ""),
                                    tooltip=str(option.get("kind") or ""),
                                    layout=widgets.Layout(width="auto"))
            button.add_class("acpnb-permission-option")
            handled_in_order(button)
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
        with self._lock:
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

    @property
    def call_id(self) -> str:
        return str(self.tool_call.get("toolCallId") or "")

    def static_html(self) -> str:
        """The prompt as a saved notebook shows it: the request, its options, and the answer or "waiting"."""
        names = " | ".join(str(o.get("name") or o.get("optionId")) for o in self.options)
        with self._lock:
            outcome = self.decision if self.future.done() else f"Waiting for an answer: {names}"
        return (f'<div class="acpnb-permission" style="border:1px solid {BORDER};padding:6px 10px;margin:4px 0">'
                f'{describe_request(self.tool_call)}<div style="color:{MUTED};font-size:0.9em">{escape(outcome)}</div>'
                "</div>")


class ViewAsker(abc.ABC):
    """A turn's policy that asks the user in the turn's view: the base of PermissionAsker and FormAsker.

    The turn exists before its view, and the agent may ask as soon as the prompt is sent, so what
    arrives before ``attach(view)`` waits here and is shown when the view attaches. Called on the
    loop thread; ``attach`` on the kernel thread; the lock orders the two.
    """

    def __init__(self, *, timeout: float | None = None) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._view: Any = None
        self._waiting: list[Any] = []

    @abc.abstractmethod
    def _prompt_for(self, request: Any) -> Any:
        """The widget that asks (it has a ``future``)."""

    @abc.abstractmethod
    def _show(self, view: Any, prompt: Any) -> None:
        """Add the prompt to the view."""

    def __call__(self, request: Any) -> concurrent.futures.Future[Any]:
        """The policy: a prompt whose future the client awaits."""
        prompt = self._prompt_for(request)
        with self._lock:
            view = self._view
            if view is None:
                self._waiting.append(prompt)
        if view is not None:
            self._show(view, prompt)
        return prompt.future

    def attach(self, view: Any) -> None:
        """Show what is asked in ``view``, what already waits first."""
        with self._lock:
            self._view = view
            waiting, self._waiting = self._waiting, []
        for prompt in waiting:
            self._show(view, prompt)


class PermissionAsker(ViewAsker):
    """Permission requests as buttons in the turn's view (``AcpMagics.permission = 'ask'``); ``timeout``:
    seconds to wait for a click before answering with the reject option."""

    def _prompt_for(self, request: Any) -> PermissionPrompt:
        reject = request.option_for("reject_once", "reject_always")
        return PermissionPrompt(request.tool_call, request.options, timeout=self.timeout, fallback=reject)

    def _show(self, view: Any, prompt: Any) -> None:
        view.add_prompt(prompt)
