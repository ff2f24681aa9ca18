"""TurnView: what a ``%%acp`` cell shows: header, thoughts, plan, tool calls, permission prompts, reply, usage.

The view follows one prompt turn. Updates arrive on the background loop thread, as fast
as the agent sends them; the view only marks itself dirty and a ``Throttle`` renders at
most once per ``interval`` seconds, so a flood of chunks costs a few widget messages a
second, not one per chunk. When the turn ends the view renders once more, freezes its
header (later titles belong to later cells; the session panel shows the live one) and
resolves ``finished``.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections.abc import Callable
from html import escape
from typing import Any

import ipywidgets as widgets

from .. import _loop
from ..errors import AcpError
from ..state import StateEvent
from ..turn import Turn
from ._html import (
    MONO,
    MUTED,
    error_html,
    header_html,
    md_escape,
    plan_html,
    seconds,
    tool_call_html,
    usage_html,
    widget_bundle,
)
from .panel import session_header_info, value_label
from .permission import PermissionPrompt

__all__ = ["Throttle", "TurnView", "markdown_output"]

DEFAULT_INTERVAL = 0.1


class Throttle:
    """Runs ``render`` on the loop thread at most once per ``interval`` seconds.

    Requests made while a render is pending merge into it; the render after the last
    request always happens, so the final state is never lost.
    """

    def __init__(self, render: Callable[[], None], interval: float) -> None:
        self._render = render
        self.interval = max(0.0, float(interval))
        self._lock = threading.Lock()
        self._pending = False
        self._last = 0.0
        self.renders = 0

    def request(self) -> None:
        with self._lock:
            if self._pending:
                return
            self._pending = True
        _loop.call_soon(self._schedule)

    def _schedule(self) -> None:
        delay = max(0.0, self._last + self.interval - time.monotonic())
        _loop.get_loop().call_later(delay, self._fire)

    def _fire(self) -> None:
        with self._lock:
            self._pending = False
        self._last = time.monotonic()
        self.renders += 1
        self._render()


def markdown_output(text: str) -> dict[str, Any]:
    """An Output widget entry that the frontend renders as Markdown."""
    return {"output_type": "display_data", "data": {"text/markdown": text, "text/plain": text}, "metadata": {}}


class TurnView:
    """The widgets of one ``%%acp`` cell; ``attach(future)`` ties it to a turn started with ``start_prompt``."""

    def __init__(self, session: Any, prompt: str, *, interval: float = DEFAULT_INTERVAL) -> None:
        self.session = session
        self.prompt = prompt
        self.turn: Turn | None = None
        self._armed = False  # set when our prompt is about to be sent: updates before it are not ours
        self.status = "working"
        self.error_message = ""
        self._lock = threading.RLock()
        self._frozen_title: str | None = None
        self._model = self._model_label()
        self._prompts: list[PermissionPrompt] = []
        self._decisions: dict[str, list[str]] = {}
        self.display_handle: Any = None  # set by whoever displays the view with a display_id
        self.finished: concurrent.futures.Future[Turn | None] = concurrent.futures.Future()
        self.finished.set_running_or_notify_cancel()

        self.header = widgets.HTML(layout=widgets.Layout(width="100%"))
        self.thoughts_text = widgets.HTML()
        self.thoughts = widgets.Accordion(children=[self.thoughts_text], titles=("Thoughts",),
                                          selected_index=None, layout=widgets.Layout(display="none"))
        self.plan = widgets.HTML()
        self.tools = widgets.HTML()
        self.permissions = widgets.VBox()
        self.reply = widgets.Output(layout=widgets.Layout(padding="0 4px"))
        self.footer = widgets.HTML()
        self.cancel_button = widgets.Button(description="Cancel", icon="stop", tooltip="Send session/cancel",
                                            layout=widgets.Layout(width="auto"))
        self.cancel_button.add_class("acpnb-cancel")
        self.cancel_button.on_click(lambda _button: self.cancel())
        self.error = widgets.HTML()
        self.widget = widgets.VBox(
            [self.header, self.thoughts, self.plan, self.tools, self.permissions, self.reply, self.error,
             widgets.HBox([self.footer, self.cancel_button],
                          layout=widgets.Layout(justify_content="space-between", align_items="center"))],
            layout=widgets.Layout(width="100%", margin="4px 0"),
        )
        self.widget.add_class("acpnb-turn")
        self.reply.add_class("acpnb-reply")
        self._throttle = Throttle(self.render, interval)
        self._unobserve = session.state.observe(self._on_event)
        self.render()

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # Plain text and Markdown for readers without the live widgets (untrusted notebooks, GitHub);
        # ``display_handle`` refreshes them when the turn ends.
        with self._lock:
            turn = self.turn
            title = self._frozen_title if self._frozen_title is not None else self.session.title
            info = session_header_info(self.session, title=title, status=self.status, model=self._model)
            head = " · ".join(p for p in (info.title, f"model: {info.model}" if info.model else "", info.status) if p)
            text = turn.text if turn is not None else ""
            calls = [f"- {c.title or c.id} ({c.kind or 'other'}, {c.status or 'pending'})"
                     for c in (turn.tool_calls if turn is not None else [])]
            tail = self.error_message or ""
        markdown = "\n\n".join(p for p in (f"**{md_escape(info.title)}** · {md_escape(head[len(info.title) + 3:])}",
                                            "\n".join(md_escape(c) for c in calls), text,
                                            f"*{md_escape(tail)}*" if tail else "") if p)
        plain = "\n".join(p for p in (head, *calls, text, tail) if p)
        return {**widget_bundle(self.widget, **kwargs), "text/plain": plain, "text/markdown": markdown}

    def _model_label(self) -> str | None:
        option = self.session.model_option
        if option is None:
            return None
        return value_label(option)

    # --- following the turn (loop thread) -------------------------------------
    def arm(self) -> None:
        """Call right before sending the prompt: the next turn that streams into the session is this view's."""
        with self._lock:
            self._armed = True

    def attach(self, future: concurrent.futures.Future[Turn]) -> None:
        """Follow the turn that ``future`` (from ``session.start_prompt``) runs."""
        future.add_done_callback(self._on_done)

    def _on_event(self, event: StateEvent) -> None:
        if event.kind == "update":
            turn = (event.data or {}).get("turn")
            if turn is None:
                return
            with self._lock:
                if self.turn is None and self._armed and not self.finished.done():
                    self.turn = turn
                elif turn is not self.turn:
                    return
        elif event.kind not in ("info", "config", "usage"):
            return
        self._throttle.request()

    def _on_done(self, future: concurrent.futures.Future[Turn]) -> None:
        error: BaseException | None
        if future.cancelled():
            turn, error = None, None
        else:
            error = future.exception()
            turn = future.result() if error is None else None
        with self._lock:
            self._unobserve()
            if turn is not None:
                self.turn = turn
            if error is not None:
                self.status = "error"
                self.error_message = (error.message if isinstance(error, AcpError)
                                      else f"{type(error).__name__}: {error}")
            elif turn is None or turn.stop_reason == "cancelled":
                self.status = "cancelled"
            else:
                self.status = "done"
            self._frozen_title = self.session.title
            for prompt in self._prompts:
                prompt.choose(None)  # nobody can answer a prompt of a finished turn
            self.render()
        if self.display_handle is not None:
            self.display_handle.update(self)  # the static fallback now carries the reply
        if error is not None:
            self.finished.set_exception(error)
        else:
            self.finished.set_result(self.turn)

    # --- actions -------------------------------------------------------------
    def cancel(self) -> None:
        """Ask the agent to stop (the Cancel button); returns at once."""
        with self._lock:
            if self.finished.done():
                return
            self.cancel_button.disabled = True
            self.cancel_button.description = "Cancelling..."
        _loop.submit(self.session.acancel())

    def ask_permission(self, request: Any, *, timeout: float | None = None,
                       fallback: str | None = None) -> concurrent.futures.Future[str | None]:
        """Show the request's options as buttons; the future resolves on a click (for a permission policy)."""
        prompt = PermissionPrompt(request.tool_call, request.options, timeout=timeout, fallback=fallback)
        call_id = str(request.tool_call.get("toolCallId") or "")
        with self._lock:
            self._prompts.append(prompt)
            self.permissions.children = (*self.permissions.children, prompt.widget)
            self.status = "waiting"
        self._throttle.request()

        def settled(_future: concurrent.futures.Future[str | None]) -> None:
            with self._lock:
                self._decisions.setdefault(call_id, []).append(f"permission: {prompt.decision}")
                if self.status == "waiting" and not any(not p.future.done() for p in self._prompts):
                    self.status = "working"
            self._throttle.request()

        prompt.future.add_done_callback(settled)
        return prompt.future

    def note_permission(self, request: Any, decision: str) -> None:
        """Record a decision made without asking (the unattended policy), shown under its tool call."""
        call_id = str(request.tool_call.get("toolCallId") or "")
        with self._lock:
            self._decisions.setdefault(call_id, []).append(f"permission: {decision}")
        self._throttle.request()

    # --- rendering -------------------------------------------------------------
    def render(self) -> None:
        """Bring every widget up to date with the turn (any thread; cheap when nothing changed)."""
        with self._lock:
            turn = self.turn
            running = not self.finished.done() and self.status in ("working", "waiting")
            extra = ""
            if turn is not None and turn.duration_s is not None:
                extra = seconds(turn.duration_s)
            title = self._frozen_title if self._frozen_title is not None else self.session.title
            header = header_html(session_header_info(self.session, title=title, status=self.status,
                                                     detail="", model=self._model, extra=extra))
            thoughts = turn.thoughts if turn is not None else ""
            text = turn.text if turn is not None else ""
            tools = "".join(tool_call_html(call, self._decisions.get(call.id, ()))
                            for call in (turn.tool_calls if turn is not None else []))
            unmatched = [d for call_id, ds in self._decisions.items()
                         if turn is None or call_id not in turn.tool_calls_by_id for d in ds]
            if unmatched:
                tools += "".join(f'<div style="color:{MUTED};font-size:0.9em">{escape(d)}</div>' for d in unmatched)
            footer = ""
            if not running and turn is not None:
                footer = usage_html(turn.usage, stop_reason=turn.stop_reason)

            if self.header.value != header:
                self.header.value = header
            if thoughts:
                thoughts_html = (f'<div class="acpnb-thoughts" style="white-space:pre-wrap;color:{MUTED};'
                                 f'font-family:{MONO};font-size:0.85em">{escape(thoughts)}</div>')
                if self.thoughts_text.value != thoughts_html:
                    self.thoughts_text.value = thoughts_html
                if self.thoughts.layout.display != "":
                    self.thoughts.layout.display = ""
            plan = plan_html(turn.plan) if turn is not None else ""
            if self.plan.value != plan:
                self.plan.value = plan
            if self.tools.value != tools:
                self.tools.value = tools
            outputs = (markdown_output(text),) if text else ()
            if tuple(self.reply.outputs) != outputs:
                self.reply.outputs = outputs
            error = error_html(self.error_message)
            if self.error.value != error:
                self.error.value = error
            if self.footer.value != footer:
                self.footer.value = footer
            display = "" if running else "none"
            if self.cancel_button.layout.display != display:
                self.cancel_button.layout.display = display

    @property
    def renders(self) -> int:
        """How many coalesced renders ran (for tests and benchmarks)."""
        return self._throttle.renders
