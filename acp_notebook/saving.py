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

Enabled for Jupyter Server (JupyterLab, Notebook 7) by the config file installed with the package
(``etc/jupyter/jupyter_server_config.d/acp_notebook.json``); by hand:
``jupyter lab --ServerApp.jpserver_extensions='{"acp_notebook.saving": True}'``. Frontends that
write the file themselves (VS Code) do not run it. Runs on the server's thread that saves; it only
edits the model it is given.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Callable, Collection, MutableMapping
from typing import Any

__all__ = ["strip_live_views"]

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
STATE_MIME = "application/vnd.jupyter.widget-state+json"
METADATA_KEY = "acp_notebook"
LIVE_FLAG = "live"


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


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "acp_notebook.saving"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    running = functools.partial(lambda manager: set(manager.list_kernel_ids()), serverapp.kernel_manager)
    serverapp.contents_manager.register_pre_save_hook(functools.partial(strip_live_views, running_kernels=running))
    serverapp.log.info("acp-notebook: notebooks are saved with the static forms of live acp-notebook views")
