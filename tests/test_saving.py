"""Saved outputs stay true: a turn's output follows its structure while it runs (so a notebook saved
mid-turn holds its plan, tool calls and pending request), one whose kernel ends mid-turn says it was
interrupted, and the server's pre-save hook (acp_notebook/saving.py) leaves no widget reference that
a later JupyterLab would render as "model not found"."""

from __future__ import annotations

import copy
import os
import socket
import subprocess
import sys
from typing import Any

from acp_notebook.saving import strip_live_views
from acp_notebook.widgets.display import flush_all
from tests.test_widgets import comms, demo, outputs_of, run_turn, shown  # noqa: F401 - fixtures

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
TIMEOUT = 30


ENDED_FORMS = {"text/html": "<b>ended</b>", "text/plain": "ended"}


def output(model_id: str, *, ours: bool = True, pid: int | None = None, kernel: str | None = None) -> dict[str, Any]:
    live = {"host": socket.gethostname(), "pid": pid or os.getpid(), "kernel": kernel, "ended": ENDED_FORMS}
    metadata = {"acp_notebook": {"session": {"session_id": "s1"}, "live": live}} if ours else {}
    return {"output_type": "display_data", "metadata": metadata,
            "data": {WIDGET_MIME: {"model_id": model_id, "version_major": 2}, "text/html": "<b>static</b>",
                     "text/plain": "static"}}


def notebook_model(*outputs: dict[str, Any], saved_state: tuple[str, ...] = ()) -> dict[str, Any]:
    state = {"application/vnd.jupyter.widget-state+json": {"state": {m: {} for m in saved_state}}}
    return {"type": "notebook", "content": {"metadata": {"widgets": state} if saved_state else {},
                                            "cells": [{"cell_type": "code", "outputs": list(outputs)}]}}


def test_the_hook_takes_the_widget_out_of_live_outputs_only():
    model = notebook_model(output("a"), output("b"), output("c", ours=False), saved_state=("b",))
    strip_live_views(model, path="x.ipynb", contents_manager=None)
    stripped, kept, foreign = model["content"]["cells"][0]["outputs"]
    assert stripped["data"] == {"text/html": "<b>static</b>", "text/plain": "static"}  # its kernel (this process) runs
    assert stripped["metadata"] == {"acp_notebook": {"session": {"session_id": "s1"}}}
    assert WIDGET_MIME in kept["data"] and kept["metadata"]["acp_notebook"]["live"]  # its state is saved with it
    assert WIDGET_MIME in foreign["data"]  # not ours: left alone
    untouched = {"type": "file", "content": "text"}
    strip_live_views(copy.deepcopy(untouched))
    assert untouched == {"type": "file", "content": "text"}


def test_an_output_whose_kernel_ended_gets_its_forms_for_that():
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                           check=True)
    dead_pid = int(ended.stdout)
    model = notebook_model(output("a", pid=dead_pid), output("b", kernel="k-gone"), output("c", kernel="k-on"))
    strip_live_views(model, running_kernels=lambda: {"k-on"})
    restarted, shut_down, running = (o["data"] for o in model["content"]["cells"][0]["outputs"])
    assert restarted == ENDED_FORMS and shut_down == ENDED_FORMS
    assert running == {"text/html": "<b>static</b>", "text/plain": "static"}


def test_a_turn_waiting_for_permission_is_saved_as_it_stands_and_ends_interrupted(comms, demo, shown):
    session = demo.new_session()
    view = run_turn(session, "read notes.txt", ask=True)
    view.show()
    comms.wait_for(lambda: view.permissions.children)
    comms.wait_for(lambda: "waiting for your answer" in outputs_of(shown, view.live)[-1].data["text/plain"])
    flush_all()
    latest = outputs_of(shown, view.live)[-1]
    # The display itself or an update of it: the agent can ask before the view is shown, and then the first
    # display already holds the request.
    assert WIDGET_MIME in latest.data
    live = latest.metadata["acp_notebook"]["live"]
    assert live["pid"] == os.getpid() and live["host"] == socket.gethostname()
    ended = live["ended"]["text/plain"]  # what the server saves once this kernel is gone
    assert "· interrupted" in ended.splitlines()[0] and "interrupted: the kernel stopped" in ended
    text = latest.data["text/plain"]
    assert "waiting · live in a running kernel" in text and "Read notes.txt [read_text_file] (read, pending)" in text
    assert "The agent asks permission: Read notes.txt (waiting for your answer)" in text
    assert "Waiting for an answer: Allow once | Reject" in latest.data["text/html"]

    view.live.finalize("the kernel stopped")  # what happens to open outputs at kernel exit
    final = outputs_of(shown, view.live)[-1]
    assert WIDGET_MIME not in final.data
    lines = final.data["text/plain"].splitlines()
    assert "· interrupted" in lines[0] and "waiting" not in final.data["text/plain"]
    assert "Not answered: The agent asks permission: Read notes.txt" in lines
    assert "interrupted: the kernel stopped" in lines
    session.cancel()
    view.finished.exception(TIMEOUT)
