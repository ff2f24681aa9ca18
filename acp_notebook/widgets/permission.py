"""Permission requests in a turn's view: PermissionPrompt (buttons resolving a concurrent Future),
KernelApprovalPrompt (the same for a kernel-tools run_code under "ask": it shows the code to run and
names the kernel call it decides, ``kernel_call``) and PermissionAsker (the per-turn policy that turns
each request into a prompt in the turn's view: the prompt's class follows the request's type,
``PermissionRequest`` or ``KernelApproval``).

A request that waits is findable without its view (``waiting_prompts``; ``%acp pending`` lists and answers
them: a notebook reopened on a kernel whose request still waits has no buttons left). Each prompt has a
``key``; its saved forms carry it (``STATE_CLASS`` in the HTML, ``Request KEY:`` in the text), and in a
Jupyter kernel the prompt writes its state, waiting or its outcome, to ``REQUESTS_FOLDER`` under Jupyter's
runtime directory: the server's pre-save hook (saving.py) reads it, so a file saved after the request was
settled never says it still waits. The kernel removes its state files as it exits.

Every prompt names who asks (``asker_label``: the agent and the session; through the multi-agent proxy,
the agent the session is bound to) and shows the request's text through ``visible``: control, bidi and
zero-width characters are written as escapes, and a note says the code holds such characters, so the code
a person reads is the code that would run.

Threads: a prompt is made on the background loop thread (the session calls the policy there);
a click arrives on the kernel thread (the comm handler); a timeout fires on the loop thread.
``future`` is resolved once, under the prompt's lock, and whatever resolved it disables the
buttons and writes the outcome.

Process-wide, on purpose: ``_waiting`` (the prompts of this process that wait for an answer, in the order
they came; written where a prompt is made and where it settles, under ``_registry_lock``), and ``_written``,
the state files this process wrote (removed at exit). A request waits in the kernel, not in a view or a
shell: whoever asks (a new frontend of the same kernel) must find it.
"""

from __future__ import annotations

import abc
import atexit
import concurrent.futures
import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any

import ipywidgets as widgets
from jupyter_core.paths import jupyter_runtime_dir

from .. import _loop
from .._permission import KernelApproval
from .._protocol import split_agent_model
from .._visible import has_hidden, visible
from ._html import BORDER, FG, MUTED
from .comms import handled_in_order
from .display import kernel_id
from .kernel import code_html

__all__ = ["KernelApprovalPrompt", "PermissionAsker", "PermissionPrompt", "asker_label", "describe_kernel_approval",
           "describe_request", "waiting_prompts"]

BUTTON_STYLES: dict[str, str] = {
    "allow_once": "success",
    "allow_always": "info",
    "reject_once": "danger",
    "reject_always": "danger",
}
# Where the proxy keeps its own facts in the model option's _meta (acp_notebook.proxy.models.META_KEY,
# as widgets/labels.py reads it; not imported from the proxy, so the views do not load it).
PROXY_META_KEY = "acp-notebook/proxy"
HIDDEN_NOTE = ("This request holds control, bidirectional or invisible characters; they are shown as escapes "
               "(such as \\u202e), so what you read is what would run.")
SHORT_ID = 8
# The saved forms' marks of a request and its state (saving.py matches them: keep the three in step).
STATE_CLASS = "acpnb-request-state"
REQUESTS_FOLDER = "acp-notebook-requests"  # under jupyter_runtime_dir(); the same name in saving.py
KEY_LENGTH = 12  # hex digits of a request's key
# Said while a request waits: a reopened notebook has no buttons, and while the cell that asked runs the main shell
# runs no other cell (nor can a reloaded JupyterLab open a subshell console: it learns of subshells from a
# kernel_info that waits behind the cell), so the one-line answer runs on a kernel subshell, from a terminal
# (magics/pending.py's command line); an interrupt withdraws the request.
TERMINAL_COMMAND = "python -m acp_notebook.magics.pending"
SHORT_KERNEL = 8  # characters of the kernel's id the command line is given (a unique prefix will do)

_registry_lock = threading.Lock()
_waiting: dict[str, PermissionPrompt] = {}
_written: set[Path] = set()


def waiting_prompts() -> list[PermissionPrompt]:
    """The permission prompts of this process that wait for an answer, oldest first (any thread)."""
    with _registry_lock:
        return list(_waiting.values())


def _states_folder() -> Path | None:
    """Where this kernel writes its requests' states; None outside a Jupyter kernel (no server saves its
    notebook). Jupyter's runtime directory is the user's own (0700), shared by the server and its kernels."""
    if kernel_id() is None:
        return None
    return Path(jupyter_runtime_dir()) / REQUESTS_FOLDER


def _write_state(key: str, state: Mapping[str, Any]) -> None:
    """Write a request's state for the save hook (atomically: the server may read it at any moment)."""
    folder = _states_folder()
    if folder is None:
        return
    path = folder / f"{key}.json"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        scratch = folder / f".{key}.{os.getpid()}.tmp"
        scratch.write_text(json.dumps({**state, "pid": os.getpid(), "host": socket.gethostname()}), encoding="utf-8")
        os.replace(scratch, path)
    except OSError:  # the hook then treats the request as settled or unknown: it never claims "waiting"
        return
    with _registry_lock:
        first = not _written
        _written.add(path)
    if first:
        atexit.register(_remove_states)


def _remove_states() -> None:
    """At exit: this kernel's requests no longer wait (the hook reads a missing file as "the kernel ended")."""
    with _registry_lock:
        paths = list(_written)
        _written.clear()
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()


def _proxied_agent(session: Any) -> str | None:
    """Through the multi-agent proxy, the agent the session is bound to (from its model option), or None."""
    option = getattr(session, "model_option", None)
    raw = getattr(option, "raw", None)
    meta = ((raw or {}).get("_meta") or {}).get(PROXY_META_KEY) if isinstance(raw, Mapping) else None
    if not isinstance(meta, Mapping):
        return None
    parsed = split_agent_model(getattr(session, "model", None))
    if parsed is not None:
        return parsed[0]
    return str(meta["agent"]) if isinstance(meta.get("agent"), str) else None


def asker_label(session: Any) -> str:
    """Who asks, in words: ``agent 'claude' (session 'Sales report')``; through the proxy, ``agent 'b' through
    the proxy 'multi' (session ...)``. The session is named by its title, else by the start of its id."""
    if session is None:
        return "The agent"
    agent = getattr(session, "agent", None)
    name = str(getattr(agent, "name", None) or "agent")
    proxied = _proxied_agent(session)
    who = f"agent {proxied!r} through the proxy {name!r}" if proxied else f"agent {name!r}"
    title = getattr(session, "title", None) or getattr(session, "display_title", None)
    session_id = str(getattr(session, "id", "") or "")
    if title:
        which = f"session {str(title)!r}"
    elif session_id:
        which = f"session {session_id[:SHORT_ID]}" + ("..." if len(session_id) > SHORT_ID else "")
    else:
        which = "no session yet"
    return visible(f"{who} ({which})")


def _request_text(tool_call: Mapping[str, Any]) -> tuple[str, str]:
    """(title, code) of a request as they are shown: every hidden character spelled out."""
    title = str(tool_call.get("title") or tool_call.get("toolCallId") or "a tool call")
    raw = tool_call.get("rawInput")
    code = raw.get("code") if isinstance(raw, Mapping) else None
    return title, code if isinstance(code, str) else ""


def request_has_hidden(tool_call: Mapping[str, Any]) -> bool:
    """Whether the request's title, paths or code hold characters ``visible`` spells out."""
    title, code = _request_text(tool_call)
    paths = [str(loc.get("path")) for loc in tool_call.get("locations") or [] if isinstance(loc, Mapping)]
    return any(has_hidden(text) for text in (title, code, *paths))


def describe_request(tool_call: Mapping[str, Any], asker: str = "The agent") -> str:
    """Who asks and what it wants to do, in one line of HTML; code it wants to run (``rawInput.code``, as the
    kernel tools' run_code asks) follows, highlighted. Every text is shown through ``visible``."""
    title, code = _request_text(tool_call)
    kind = tool_call.get("kind")
    paths = [visible(str(loc.get("path"))) for loc in tool_call.get("locations") or []
             if isinstance(loc, Mapping) and loc.get("path")]
    where = f'<div style="color:{MUTED};font-size:0.9em">{escape(", ".join(paths))}</div>' if paths else ""
    kind_text = f' <span style="color:{MUTED}">({escape(visible(str(kind)))})</span>' if kind else ""
    shown = code_html(code) if code else ""
    hidden = (f'<div class="acpnb-hidden-characters" style="color:#c62828;font-size:0.9em">{escape(HIDDEN_NOTE)}</div>'
              if request_has_hidden(tool_call) else "")
    return (f'<div style="color:{FG}"><b>{escape(visible(asker))} asks permission:</b> {escape(visible(title))}'
            f"{kind_text}</div>{where}{hidden}{shown}")


def describe_kernel_approval(code: str, asker: str = "The agent") -> str:
    """Who asks to run which code in the user's kernel (a kernel-tools run_code), in HTML: the code highlighted,
    shown through ``visible``, with the note when it holds hidden characters."""
    hidden = (f'<div class="acpnb-hidden-characters" style="color:#c62828;font-size:0.9em">{escape(HIDDEN_NOTE)}</div>'
              if has_hidden(code) else "")
    return (f'<div style="color:{FG}"><b>{escape(visible(asker))} asks to run code in your kernel:</b></div>'
            f"{hidden}{code_html(code)}")


class PermissionPrompt:
    """Shows the agent's options as buttons; ``future`` resolves to the clicked option id.

    ``future`` resolves to None when the request is withdrawn (the turn was cancelled:
    the session cancels the future), and to ``fallback`` when nobody answered within
    ``timeout`` seconds (unattended runs).
    """

    kind_class = ""  # an extra CSS class of the prompt's box (a subclass's kind of request)
    kernel_call: Any = None  # the KernelCall a kernel approval decides; None for an ACP permission request

    def __init__(self, tool_call: Mapping[str, Any], options: list[Mapping[str, Any]], *,
                 timeout: float | None = None, fallback: str | None = None, asker: str = "The agent") -> None:
        self.tool_call = dict(tool_call)
        self.options = [dict(o) for o in options]
        self.asker = asker
        self.key = uuid.uuid4().hex[:KEY_LENGTH]
        self.asked_at = time.time()
        self.future: concurrent.futures.Future[str | None] = concurrent.futures.Future()
        self.future.set_running_or_notify_cancel()
        self._lock = threading.RLock()  # re-entered: resolving the future runs _settled in the same thread
        self.decision: str = ""
        self.label = widgets.HTML(self._describe())
        self.buttons: list[widgets.Button] = []
        for option in self.options:
            button = widgets.Button(description=visible(str(option.get("name") or option.get("optionId"))),
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
        if self.kind_class:
            self.widget.add_class(self.kind_class)
        with _registry_lock:
            _waiting[self.key] = self
        _write_state(self.key, {"state": "waiting"})
        self.future.add_done_callback(self._settled)
        if timeout:
            _loop.call_soon(_loop.get_loop().call_later, timeout, self._expire, timeout, fallback)

    def choose(self, option_id: str | None) -> None:
        """Answer the request (a click, or code); later answers are ignored."""
        with self._lock:
            if not self.future.done():
                self.future.set_result(option_id)

    def option_of_kind(self, *kinds: str) -> str | None:
        """The id of the first option of one of ``kinds`` (in the order given), or None."""
        for kind in kinds:
            for option in self.options:
                if option.get("kind") == kind and option.get("optionId") is not None:
                    return str(option["optionId"])
        return None

    @property
    def waiting(self) -> bool:
        return not self.future.done()

    def pending_hint(self) -> str:
        """How to answer the request once its buttons are gone (saving.py's pattern ends at its last words)."""
        kernel = kernel_id()
        terminal = (f"in a terminal: {TERMINAL_COMMAND} --kernel {kernel[:SHORT_KERNEL]} allow {self.key} "
                    f"(or reject {self.key}); " if kernel else "")
        return f"reopened? answer with %acp pending on a kernel subshell, or {terminal}Kernel > Interrupt withdraws it"

    # What is asked, as the prompt's forms show it (a KernelApprovalPrompt has no tool call: it overrides these).
    def _asked(self) -> tuple[str, str]:
        """(title, code) of the request, as sent."""
        return _request_text(self.tool_call)

    def _describe(self) -> str:
        return describe_request(self.tool_call, self.asker)

    def _asks_words(self) -> str:
        return f"asks permission: {visible(self._asked()[0])}"

    def _has_hidden(self) -> bool:
        return request_has_hidden(self.tool_call)

    @property
    def title(self) -> str:
        """The request's title as shown (hidden characters spelled out)."""
        return visible(self._asked()[0])

    @property
    def code(self) -> str:
        """The code the request would run (a tool call's ``rawInput.code``, a kernel approval's code), as shown;
        empty for other requests."""
        return visible(self._asked()[1])

    def _expire(self, timeout: float, fallback: str | None) -> None:
        with self._lock:
            if self.future.done():
                return
            self.decision = f"no answer within {timeout:g} s"
            self.future.set_result(fallback)

    def _name_of(self, option_id: str | None) -> str:
        for option in self.options:
            if option.get("optionId") == option_id:
                return visible(str(option.get("name") or option_id))
        return visible(str(option_id))

    def _settled(self, future: concurrent.futures.Future[str | None]) -> None:
        with self._lock:
            withdrawn = None if future.cancelled() else future.exception()  # PermissionWithdrawn says why
            if withdrawn is not None:
                text = f"Withdrawn: {withdrawn}."
            elif future.cancelled() or future.result() is None:
                text = "Withdrawn: the turn was cancelled."
            else:
                chosen = self._name_of(future.result())
                why = self.decision[:1].upper() + self.decision[1:]  # set by _expire: "no answer within N s"
                text = f"{why}: {chosen}." if why else f"You chose: {chosen}."
            self.decision = text
        with _registry_lock:
            _waiting.pop(self.key, None)
        _write_state(self.key, {"state": "settled", "outcome": text})
        for button in self.buttons:
            button.disabled = True
        self.outcome.value = f'<div style="color:{MUTED};font-size:0.9em">{escape(text)}</div>'

    @property
    def call_id(self) -> str:
        """The agent's tool call this request is about ("" when none: a kernel approval has ``kernel_call``)."""
        return str(self.tool_call.get("toolCallId") or "")

    def static_html(self) -> str:
        """The prompt as a saved notebook shows it: the request, its options, and the answer or "waiting" (in an
        element marked with the request's key, which the save hook brings up to date: saving.py)."""
        names = visible(" | ".join(str(o.get("name") or o.get("optionId")) for o in self.options))
        with self._lock:
            waiting = f"Waiting for an answer: {names} ({self.pending_hint()})."
            outcome = self.decision if self.future.done() else waiting
        classes = f"acpnb-permission {self.kind_class}".strip()
        return (f'<div class="{classes}" style="border:1px solid {BORDER};padding:6px 10px;margin:4px 0">'
                f'{self._describe()}<div class="{STATE_CLASS}" data-acpnb-request='
                f'"{self.key}" style="color:{MUTED};font-size:0.9em">{escape(outcome)}</div></div>')

    def pending_text(self) -> str:
        """The prompt waiting for an answer, as the saved notebook's plain text says it (with the request's key: the
        save hook puts the outcome in once the request is settled, saving.py)."""
        code = self._asked()[1]
        lines = [f"The agent {self._asks_words()} (waiting for your answer). Asked by {self.asker}. "
                 f"Request {self.key}: {self.pending_hint()}."]
        if code:
            lines.extend(f"    {line}" for line in visible(code).splitlines())
        if self._has_hidden():
            lines.append(HIDDEN_NOTE)
        return "\n".join(lines)


class KernelApprovalPrompt(PermissionPrompt):
    """A kernel-tools run_code waiting for Allow / Reject (a ``KernelApproval``): the code it would run, and the
    kernel call it decides (``kernel_call``, whose card in the turn's view takes the answer). Waits, is listed by
    ``%acp pending``, saved and settled as a permission prompt is."""

    kind_class = "acpnb-kernel-approval"

    def __init__(self, approval: KernelApproval, *, timeout: float | None = None, fallback: str | None = None,
                 asker: str = "The agent") -> None:
        self.kernel_call = approval.call
        self.approval_code = approval.code
        self.approval_title = approval.title
        super().__init__({}, approval.options, timeout=timeout, fallback=fallback, asker=asker)

    def _asked(self) -> tuple[str, str]:
        return self.approval_title, self.approval_code

    def _describe(self) -> str:
        return describe_kernel_approval(self.approval_code, self.asker)

    def _asks_words(self) -> str:
        return "asks to run code in your kernel"

    def _has_hidden(self) -> bool:
        return has_hidden(self.approval_code)


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
        """A prompt of the request's own kind: a KernelApproval shows the code for the kernel, a PermissionRequest
        the agent's tool call."""
        reject = request.option_for("reject_once", "reject_always")
        asker = asker_label(getattr(request, "session", None))
        if isinstance(request, KernelApproval):
            return KernelApprovalPrompt(request, timeout=self.timeout, fallback=reject, asker=asker)
        return PermissionPrompt(request.tool_call, request.options, timeout=self.timeout, fallback=reject,
                                asker=asker)

    def _show(self, view: Any, prompt: Any) -> None:
        view.add_prompt(prompt)
