"""TerminalLoginView: an agent's terminal login in a cell: its output as it comes, a box for what it asks, Cancel.

The login runs in a pseudo-terminal (acp_notebook/auth_terminal.py); this view shows what the terminal prints
(already stripped of escapes and made visible there) in an ``Output`` widget, appended as it arrives, and types
what the person sends into the terminal. While the terminal echoes, the box is a plain text field; while the
login has echo turned off (a password, a code read with ``getpass``) it is a password field, and what is sent
is never echoed into the output nor kept in the saved form. Send (or Enter) types the box's text and Enter;
Cancel asks the login to end (its whole process group). ``finish(message, ok=)`` says how it ended and turns
the output into its static form (the header, the terminal's text, the result), which a saved notebook shows.

The live output is published once, when shown, and once more when finished: updating it in between would make
JupyterLab rebuild the widget's view and take the focus out of the box the person types in.

Threads: ``append`` and ``set_secret`` run on the login's reader thread, clicks and Enter on the kernel thread
(comm handlers, routed to the main shell by widgets.comms), ``finish`` on the background loop; the transcript
and the state are guarded by the view's lock. ``show()`` runs on the kernel thread, in the cell.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from html import escape
from typing import Any

import ipywidgets as widgets

from .._visible import visible
from ._html import BORDER, FG, MONO, MUTED, error_html, widget_bundle
from .comms import follow_changes, handled_in_order
from .display import Bundle, LiveDisplay, close_widget_tree

__all__ = ["OUTPUT_LIMIT", "TerminalLoginView", "as_shown"]

OUTPUT_LIMIT = 64_000  # characters of the terminal's text shown and kept; a login says far less
CUT_NOTE = "\n[the login's output goes on; the rest is not shown]\n"
ENDED_NOTE = "The login was not finished: the kernel stopped."


class TerminalLoginView:
    """The view of one terminal login. ``on_send(text)`` gets what the person sends, ``on_cancel()`` Cancel."""

    def __init__(self, *, agent_name: str, method: str, command_line: str,
                 on_send: Callable[[str], None] = lambda _text: None,
                 on_cancel: Callable[[], None] = lambda: None) -> None:
        self.agent_name, self.method, self.command_line = visible(agent_name), visible(method), visible(command_line)
        self.on_send, self.on_cancel = on_send, on_cancel
        self._lock = threading.Lock()
        self._text: list[str] = []
        self._size = 0
        self.cut = False
        self.secret = False  # the terminal's echo is off: the box is a password field
        self.result: tuple[str, bool] | None = None  # (message, ok) once finished
        # Resolved with ``result`` once the static form is out (tests and callers wait on it).
        self.finished: concurrent.futures.Future[tuple[str, bool]] = concurrent.futures.Future()
        self._note = ""
        self.header = widgets.HTML(self._header_html())
        self.output = widgets.Output(layout=widgets.Layout(max_height="320px", overflow="auto",
                                                           border=f"1px solid {BORDER}", padding="2px 6px"))
        self.field = follow_changes(widgets.Text(placeholder="Type what the login asks for, then Enter or Send",
                                                 layout=widgets.Layout(width="420px")))
        self.password = follow_changes(widgets.Password(placeholder="Hidden input (the login turned echo off)",
                                                        layout=widgets.Layout(width="420px")))
        for box in (self.field, self.password):
            box.on_msg(self._on_box_message)
        self.send_button = handled_in_order(widgets.Button(description="Send", layout=widgets.Layout(width="auto")))
        self.cancel_button = handled_in_order(widgets.Button(description="Cancel login", button_style="danger",
                                                             layout=widgets.Layout(width="auto")))
        self.send_button.on_click(lambda _button: self.send())
        self.cancel_button.on_click(lambda _button: self.cancel())
        self.input_row = widgets.HBox([self.field, self.send_button, self.cancel_button],
                                      layout=widgets.Layout(grid_gap="6px"))
        self.status = widgets.HTML(self._status_html())
        self.widget = widgets.VBox([self.header, self.output, self.input_row, self.status],
                                   layout=widgets.Layout(border=f"1px solid {BORDER}", padding="6px 10px"))
        self.widget.add_class("acpnb-terminal-login")
        self.live = LiveDisplay(self._bundle)

    def show(self) -> None:
        """Display the view in the running cell (kernel thread)."""
        self.live.show()

    # --- what the terminal says (reader thread) ---------------------------------------
    def append(self, text: str) -> None:
        """Show ``text`` (already made visible) as the terminal printed it; past ``OUTPUT_LIMIT``, one note."""
        with self._lock:
            if self.cut or self.result is not None:
                return
            room = OUTPUT_LIMIT - self._size
            if len(text) > room:
                text, self.cut = text[:room] + CUT_NOTE, True
            self._text.append(text)
            self._size += len(text)
        self.output.append_stdout(text)

    def set_secret(self, secret: bool) -> None:
        """The terminal's echo went off (``secret``) or on again: swap the box for a password field or back."""
        with self._lock:
            if secret == self.secret or self.result is not None:
                return
            self.secret = secret
            shown, hidden = (self.password, self.field) if secret else (self.field, self.password)
        hidden.value = ""
        self.input_row.children = (shown, self.send_button, self.cancel_button)
        self.status.value = self._status_html()

    @property
    def transcript(self) -> str:
        with self._lock:
            return "".join(self._text)

    # --- what the person does (kernel thread) -------------------------------------------
    def _on_box_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("event") == "submit":  # Enter in the box
            self.send()

    def send(self) -> None:
        """Type the box's text and Enter into the terminal, and empty the box (a password is not kept)."""
        with self._lock:
            if self.result is not None:
                return
            box = self.password if self.secret else self.field
        text = box.value
        box.value = ""
        self.on_send(text)

    def cancel(self) -> None:
        with self._lock:
            if self.result is not None:
                return
            self._note = "Cancelling: the login's processes are being ended."
        self.cancel_button.disabled = True
        self.status.value = self._status_html()
        self.on_cancel()

    # --- the end (loop thread) ------------------------------------------------------------
    def note(self, text: str) -> None:
        """A line under the box about what happens now (the login ended, the agent is started again...)."""
        with self._lock:
            self._note = text
        self.status.value = self._status_html()

    def finish(self, message: str, *, ok: bool) -> None:
        """Say how it ended; the output becomes its static form and the widgets are closed."""
        with self._lock:
            if self.result is not None:
                return
            self.result = (message, ok)
            self._note = ""
        for box in (self.field, self.password):
            box.value = ""
        self.live.finalize()
        close_widget_tree(self.widget)
        for box in (self.field, self.password):  # the one not shown at the end is in no tree
            close_widget_tree(box)
        self.finished.set_result((message, ok))

    # --- the forms ----------------------------------------------------------------------------
    def _header_html(self) -> str:
        return (f'<div style="color:{FG}"><b>Terminal login {escape(self.method)}</b> of agent '
                f'{escape(self.agent_name)}</div><div style="color:{MUTED};font-size:0.9em">Running: '
                f'<code>{escape(self.command_line)}</code></div>')

    def _status_html(self) -> str:
        with self._lock:
            note, secret, result = self._note, self.secret, self.result
        if result is not None:
            message, ok = result
            return (f'<div style="color:#2e7d32;padding:2px 4px">{escape(message)}</div>' if ok
                    else error_html(message))
        mode = ("Hidden input: the login turned echo off, what you type is not shown." if secret
                else "Send types the box's text and Enter into the login's terminal.")
        return f'<div style="color:{MUTED};font-size:0.9em">{escape(note or mode)}</div>'

    def _bundle(self, final: bool, reason: str) -> Bundle:
        with self._lock:
            transcript, finished = as_shown("".join(self._text)), self.result
        if finished is not None:
            status, status_html = finished[0], self._status_html()
        elif final:
            status = ENDED_NOTE if reason else "The login was not finished."
            status_html = error_html(status)
        else:
            status, status_html = "The login is running.", self._status_html()
        html = (f'<div class="acpnb-terminal-login" style="border:1px solid {BORDER};padding:6px 10px">'
                f'{self._header_html()}<pre style="margin:4px 0;max-height:320px;overflow:auto;font-family:{MONO};'
                f'font-size:0.85em">{escape(transcript)}</pre>{status_html}</div>')
        plain = (f"Terminal login {self.method} of agent {self.agent_name}\nRunning: {self.command_line}\n"
                 f"{transcript.rstrip()}\n{status}")
        data: dict[str, Any] = {"text/html": html, "text/plain": plain}
        if not final:
            data.update(widget_bundle(self.widget))
        return Bundle(data)


def as_shown(text: str) -> str:
    """Terminal text as its screen ends up: on each line, what follows a carriage return overwrites the start of
    the line (a progress line redrawn in place), so a saved form holds no carriage return to hide text behind."""
    lines = []
    for line in text.split("\n"):
        shown = ""
        for part in line.split("\r"):
            shown = part + shown[len(part):]
        lines.append(shown)
    return "\n".join(lines)
