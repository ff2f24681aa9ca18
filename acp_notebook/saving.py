"""A Jupyter Server extension: notebooks are saved with the static forms of acp-notebook's live views.

A live view (session panel, ``%%acp`` turn, inspector, table) is one output holding an ipywidget
and, beside it, the view's HTML, Markdown and text, kept current by the kernel (widgets/display.py
marks such outputs ``metadata.acp_notebook.live``). JupyterLab renders the widget whenever its mime
type is in the output; once the kernel that owned the widget is gone it has no model for it and
shows "Error displaying widget: model not found", never the static forms beside it. The kernel
cannot always replace those outputs itself: a notebook saved while the agent runs holds them, and
JupyterLab drops what a restarting kernel sends last. So, as a notebook is saved, this hook takes
the widget out of every marked output whose widget state is not saved with the notebook
(JupyterLab's "Save Jupyter widget state in notebooks" setting keeps it: the view then reopens
greyed, saying "kernel gone"). The open notebook keeps its live widgets; the file gets the static
forms: those the output holds (the view as it stands, "live in a running kernel") while the kernel
process that owns the widget runs, else the forms the mark carries for a kernel that has ended
(a panel closed, a turn interrupted). A kernel has ended when the server no longer runs a kernel
of its id, or when its process (on this host) is gone, as after a restart.

A permission request still waiting when an output was drawn (a turn's, or ``%acp pending``'s) may be
settled by the time the notebook is saved, and a frontend that reopened the notebook no longer gets
that output's updates: its forms would say "waiting" for ever. So every output of ours that names a
request (widgets/permission.py marks its state in the forms with the request's key) is brought up to
date from the state the kernel wrote for it (``REQUESTS_FOLDER`` under Jupyter's runtime directory): a
settled request says its outcome; one whose state is gone (its kernel ended, or runs elsewhere) says it
was not answered here; the turn's header status "waiting" follows. A request that still waits keeps its
forms, which say how to answer it (``%acp pending``).

Enabled for Jupyter Server (JupyterLab, Notebook 7) by the config file installed with the package
(``etc/jupyter/jupyter_server_config.d/acp_notebook.json``); by hand:
``jupyter lab --ServerApp.jpserver_extensions='{"acp_notebook.saving": True}'``. Frontends that
write the file themselves (VS Code) do not run it. Runs on the server's thread that saves; it only
edits the model it is given.
"""

from __future__ import annotations

import functools
import json
import os
import re
import socket
from collections.abc import Callable, Collection, MutableMapping
from html import escape
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_runtime_dir  # Jupyter Server's own dependency, as jupyter_client is ours

__all__ = ["settle_requests", "strip_live_views"]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
STATE_MIME = "application/vnd.jupyter.widget-state+json"
METADATA_KEY = "acp_notebook"
LIVE_FLAG = "live"
# A request's marks in the saved forms and the folder of its states, as widgets/permission.py writes them.
REQUESTS_FOLDER = "acp-notebook-requests"
STATE_HTML = re.compile(r'(<div class="acpnb-request-state" data-acpnb-request="([0-9a-f]{12})"[^>]*>)(.*?)(</div>)',
                        re.S)
STATE_TEXT = re.compile(r"\(waiting for your answer\)\. Asked by ([^\n]*?)\. "
                        r"Request ([0-9a-f]{12}): reopened\?[^\n]*?Interrupt withdraws it\.")
HEADER_HTML = re.compile(r'<span class="acpnb-status acpnb-status-waiting"([^>]*)>waiting</span>')
HEADER_TEXT = re.compile(r"^(.*) · waiting( · |$)", re.M)  # the first line's "title · model · status · extra"
CARD_ASKING = "waiting for you"  # a kernel call's status while its approval is asked (widgets/kernel.py)
CARD_SETTLED = "settled after this was saved"
GONE = "Not answered here: the kernel that asked has ended, or runs where this server cannot see"


def _saved_widget_models(notebook: MutableMapping[str, Any]) -> set[str]:
    """The widget models whose state the frontend saved in the notebook's metadata."""
    widgets = (notebook.get("metadata") or {}).get("widgets") or {}
    state = (widgets.get(STATE_MIME) or {}).get("state") if isinstance(widgets, MutableMapping) else None
    return set(state) if isinstance(state, MutableMapping) else set()


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _kernel_ended(live: MutableMapping[str, Any], running: Collection[str] | None) -> bool:
    """Whether the kernel process that owns an output's widget is gone (see the module docstring)."""
    kernel = live.get("kernel")
    if isinstance(kernel, str) and running is not None and kernel not in running:
        return True
    pid = live.get("pid")
    return live.get("host") == socket.gethostname() and isinstance(pid, int) and not _process_alive(pid)


def strip_live_views(model: MutableMapping[str, Any], *, running_kernels: Callable[[], Collection[str]] | None = None,
                     **_kwargs: Any) -> None:
    """Pre-save hook: our marked outputs lose their widget unless its state is saved too; those whose kernel
    has ended get the forms for that. ``running_kernels``: the ids of the kernels the server runs."""
    notebook = model.get("content")
    if model.get("type") != "notebook" or not isinstance(notebook, MutableMapping):
        return
    saved = _saved_widget_models(notebook)
    running = running_kernels() if running_kernels is not None else None
    for cell in notebook.get("cells") or ():
        for output in (cell.get("outputs") or ()) if isinstance(cell, MutableMapping) else ():
            if not isinstance(output, MutableMapping):
                continue
            ours = (output.get("metadata") or {}).get(METADATA_KEY)
            data = output.get("data")
            if not isinstance(ours, MutableMapping) or not ours.get(LIVE_FLAG) or not isinstance(data, MutableMapping):
                continue
            view = data.get(WIDGET_MIME)
            if isinstance(view, MutableMapping) and view.get("model_id") in saved:
                continue
            live = ours.pop(LIVE_FLAG)
            data.pop(WIDGET_MIME, None)
            ended = live.get("ended") if isinstance(live, MutableMapping) else None
            if isinstance(ended, MutableMapping) and _kernel_ended(live, running):
                data.update({mime: text for mime, text in ended.items() if isinstance(text, str)})


def _request_outcome(folder: Path | None, key: str) -> str | None:
    """What a request came to, from the state its kernel wrote; None while it waits."""
    try:
        state = json.loads((folder / f"{key}.json").read_text(encoding="utf-8")) if folder is not None else None
    except (OSError, ValueError):
        state = None
    if not isinstance(state, dict):
        return GONE
    if state.get("state") == "waiting":
        # A kernel killed outside its exit left its file: on this host its process says whether it still asks.
        pid = state.get("pid")
        gone = state.get("host") == socket.gethostname() and isinstance(pid, int) and not _process_alive(pid)
        return GONE if gone else None
    return str(state.get("outcome") or "Settled")


def _settle_output(data: MutableMapping[str, Any], folder: Path | None) -> None:
    """Bring the request marks of one output's forms up to date (see the module docstring)."""
    outcomes: dict[str, str | None] = {}

    def outcome(key: str) -> str | None:
        if key not in outcomes:
            outcomes[key] = _request_outcome(folder, key)
        return outcomes[key]

    def html_state(match: re.Match[str]) -> str:
        said = outcome(match.group(2))
        return match.group(0) if said is None else f"{match.group(1)}{escape(said.rstrip('.'))}.{match.group(4)}"

    def text_state(match: re.Match[str]) -> str:
        said = outcome(match.group(2))
        if said is None:
            return match.group(0)
        return f"(request {match.group(2)}: {said.rstrip('.')}). Asked by {match.group(1)}."

    for mime, replace in (("text/html", html_state), ("text/markdown", text_state), ("text/plain", text_state)):
        text = data.get(mime)
        if isinstance(text, str):
            data[mime] = (STATE_HTML if mime == "text/html" else STATE_TEXT).sub(replace, text)
    if not outcomes or any(said is None for said in outcomes.values()):
        return  # a request still waits: the turn does too
    _settle_header(data, outcomes)


def _settle_header(data: MutableMapping[str, Any], outcomes: dict[str, str | None]) -> None:
    """Every request of the output was settled: its header and kernel cards stop saying they wait."""
    status = "withdrawn" if any(said.startswith("Withdrawn") for said in outcomes.values() if said) else "answered"
    status = "not answered" if all(said == GONE for said in outcomes.values()) else status
    badge = f'<span class="acpnb-status acpnb-status-{status.replace(" ", "-")}"'
    if isinstance(data.get("text/html"), str):
        data["text/html"] = HEADER_HTML.sub(lambda m: f"{badge}{m.group(1)}>{status}</span>", data["text/html"],
                                            count=1)
    for mime in ("text/markdown", "text/plain"):
        if isinstance(data.get(mime), str):
            data[mime] = HEADER_TEXT.sub(lambda m: f"{m.group(1)} · {status}{m.group(2)}", data[mime], count=1)
    for mime in ("text/html", "text/markdown", "text/plain"):
        if isinstance(data.get(mime), str):
            data[mime] = data[mime].replace(CARD_ASKING, CARD_SETTLED)


def _states_folder() -> Path:
    return Path(jupyter_runtime_dir()) / REQUESTS_FOLDER


def settle_requests(model: MutableMapping[str, Any], *, folder: Path | None = None, **_kwargs: Any) -> None:
    """Pre-save hook: every output that names a permission request says what came of it, once it no longer
    waits (see the module docstring). ``folder``: where the kernels write their requests' states (default:
    under Jupyter's runtime directory)."""
    notebook = model.get("content")
    if model.get("type") != "notebook" or not isinstance(notebook, MutableMapping):
        return
    folder = folder if folder is not None else _states_folder()
    for cell in notebook.get("cells") or ():
        for output in (cell.get("outputs") or ()) if isinstance(cell, MutableMapping) else ():
            data = output.get("data") if isinstance(output, MutableMapping) else None
            html = data.get("text/html") if isinstance(data, MutableMapping) else None
            # Cheap test first: only outputs that name a request are read further.
            if isinstance(html, (str, list)) and "acpnb-request-state" in "".join(html):
                if isinstance(html, list):  # nbformat may split a text into lines
                    for mime in ("text/html", "text/markdown", "text/plain"):
                        if isinstance(data.get(mime), list):
                            data[mime] = "".join(data[mime])
                _settle_output(data, folder)


def _pre_save(model: MutableMapping[str, Any], *, running_kernels: Callable[[], Collection[str]],
              **kwargs: Any) -> None:
    strip_live_views(model, running_kernels=running_kernels, **kwargs)
    settle_requests(model, **kwargs)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "acp_notebook.saving"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    running = functools.partial(lambda manager: set(manager.list_kernel_ids()), serverapp.kernel_manager)
    serverapp.contents_manager.register_pre_save_hook(functools.partial(_pre_save, running_kernels=running))
    serverapp.log.info("acp-notebook: notebooks are saved with the static forms of live acp-notebook views")
