"""Restarts and saves lose nothing, in JupyterLab.

A notebook that was never saved after its chat has its kernel restarted twice from the Kernel menu;
each time ``%acp resume`` brings the session back from the local session store, with its title, and
the demo agent answers from the conversation's history.

A notebook saved while its agent runs and a turn waits for a permission click reopens in a fresh
browser with no kernel: no "Error displaying widget: model not found" anywhere, the panel and the
turn in their static forms saying what stood when it was saved (the pending request, "live in a
running kernel"). A turn whose kernel ends while it waits is saved ended: cancelled when the kernel
shuts down, interrupted when it restarts. What makes it so: the package's server extension
(acp_notebook/saving.py).
"""

from __future__ import annotations

import json
from typing import Any

from .jupyterlab import VIEWPORT, JupyterLabServer, LabPage, screenshot_dir, write_notebook
from .test_saved_notebook import _BROKEN_JS, menu, restart_kernel, save, start_cell

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
FIRST_PROMPT = "new topic: Owls and their nests"
TITLE = "Owls and their nests"

UNSAVED = "unsaved_owls.ipynb"
UNSAVED_CELLS = [
    "%load_ext acp_notebook\n%acp start demo",
    f"%%acp\n{FIRST_PROMPT}",
    "%load_ext acp_notebook\n%acp resume",
    "%%acp\nwhat did I say first?",
    "%acp stop --all",
]

RUNNING = "running_owls.ipynb"
RUNNING_CELLS = ["%load_ext acp_notebook\n%acp start demo", "%%acp\nread notes.txt"]


def test_restarts_without_saving_resume_with_the_title(chromium, lab_page: LabPage,
                                                       jupyterlab_server: JupyterLabServer) -> None:
    write_notebook(jupyterlab_server.root_dir / UNSAVED, UNSAVED_CELLS)
    lab_page.open_notebook(UNSAVED)
    lab_page.run_cell(0)
    lab_page.run_cell(1)
    lab_page.wait_for_text(TITLE, exact=True, within=lab_page.output(0))
    for restart in range(2):  # never saved: the records are in the session store only
        restart_kernel(lab_page)
        start_cell(lab_page, 2)
        resumed = lab_page.output(2)
        lab_page.wait_for_text("Resumed session demo-", within=resumed)
        lab_page.wait_for_text(f'"{TITLE}" of demo (session/resume)', within=resumed)
        title = lab_page.wait_for_selector(".acpnb-title", within=resumed)
        assert title.inner_text() == TITLE, restart
        start_cell(lab_page, 3)
        chat = lab_page.output(3)
        lab_page.wait_for_text(f'You first said: "{FIRST_PROMPT}"', within=chat)
        lab_page.wait_for_selector(".acpnb-status-done", within=chat)
        assert lab_page.wait_for_selector(".acpnb-title", within=chat).inner_text() == TITLE
    lab_page.screenshot(screenshot_dir() / "resumed-twice.png", of=lab_page.notebook)

    # Stopped and saved: every output, the first kernel's too, reopens static and true with no kernel.
    lab_page.run_cell(4)
    lab_page.wait_for_text("Stopped agent 'demo'", within=lab_page.output(4))
    saved = save(lab_page, jupyterlab_server, UNSAVED)
    assert not [o for c in saved["cells"] for o in c.get("outputs", []) if WIDGET_MIME in o.get("data", {})]
    first_panel = "".join(saved["cells"][0]["outputs"][-1]["data"]["text/plain"])
    assert first_panel.startswith(f"{TITLE} · ") and "closed" in first_panel and "the kernel stopped" in first_panel
    jupyterlab_server.shutdown_all_kernels()
    context = chromium.new_context(viewport=VIEWPORT)
    try:
        reopened = LabPage(context.new_page(), jupyterlab_server)
        reopened.open_notebook(UNSAVED)
        reopened.wait_for_text(f'You first said: "{FIRST_PROMPT}"', within=reopened.output(3))
        reopened.wait_for_text("the kernel stopped", within=reopened.output(0))
        assert reopened.page.evaluate(_BROKEN_JS, reopened.PANEL) == \
            {"widgetErrors": 0, "drawnIcons": 0, "blankOutputs": 0}
    finally:
        context.close()


def _wait_for_permission(lab_page: LabPage, server: JupyterLabServer, name: str) -> Any:
    """Open a new notebook ``name``, start the demo agent and a turn, and wait until the turn asks permission
    (its view laid out to its Cancel button); the turn's output."""
    root = server.root_dir
    (root / "notes.txt").write_text("first line\nsecond line\n")
    write_notebook(root / name, RUNNING_CELLS)
    lab_page.open_notebook(name)
    lab_page.run_cell(0)
    start_cell(lab_page, 1)
    turn = lab_page.output(1)
    lab_page.wait_for_selector(".acpnb-permission-option >> text=Allow once", within=turn)
    lab_page.wait_for_selector(".acpnb-cancel", within=turn)
    return turn


def test_saved_while_a_permission_waits_reopens_true_without_a_kernel(chromium, lab_page: LabPage,
                                                                      jupyterlab_server: JupyterLabServer) -> None:
    root = jupyterlab_server.root_dir
    turn = _wait_for_permission(lab_page, jupyterlab_server, RUNNING)

    # The output took the request before its buttons showed: one save holds it.
    saved = save(lab_page, jupyterlab_server, RUNNING)
    outputs = [o for c in saved["cells"] for o in c.get("outputs", []) if "acp_notebook" in o.get("metadata", {})]
    assert len(outputs) == 2 and not [o for o in outputs if WIDGET_MIME in o["data"]]
    panel_text, turn_text = ("".join(o["data"]["text/plain"]) for o in outputs)
    assert "· open · live in a running kernel" in panel_text
    assert "· waiting · live in a running kernel" in turn_text and "Read notes.txt [read_text_file] (read, pending)" in turn_text
    assert "The agent asks permission: Read notes.txt (waiting for your answer)" in turn_text
    # The open notebook keeps its live view: the request can still be answered.
    lab_page.wait_for_selector(".acpnb-permission-option >> text=Allow once", within=turn).click()
    lab_page.wait_for_text("Read notes.txt: 2 lines.", within=turn)

    jupyterlab_server.shutdown_all_kernels()
    context = chromium.new_context(viewport=VIEWPORT)
    try:
        reopened = LabPage(context.new_page(), jupyterlab_server)
        reopened.open_notebook(RUNNING)
        turn = reopened.output(1)
        reopened.wait_for_text("Waiting for an answer: Allow once | Reject", within=turn)
        reopened.wait_for_text("live in a running kernel", within=turn)
        reopened.wait_for_text("live in a running kernel", within=reopened.output(0))
        assert reopened.page.evaluate(_BROKEN_JS, reopened.PANEL) == \
            {"widgetErrors": 0, "drawnIcons": 0, "blankOutputs": 0}
        reopened.screenshot(screenshot_dir() / "saved-mid-permission.png", of=reopened.notebook)
    finally:
        context.close()
    assert json.loads((root / RUNNING).read_text()) == saved  # reopening wrote nothing


def _saved_turn_after(lab_page: LabPage, server: JupyterLabServer, name: str, command: str) -> str:
    """Run a turn until it waits for a permission click, end the kernel with the Kernel menu's ``command``,
    save: the text of the turn's saved output."""
    _wait_for_permission(lab_page, server, name)
    # The request reached the output before its buttons showed, so the output can say it went unanswered.
    if command == "kernelmenu:restart":
        restart_kernel(lab_page)
    else:
        menu(lab_page, "Kernel", command)
        lab_page.page.get_by_text("No Kernel").first.wait_for()
    saved = save(lab_page, server, name)
    outputs = saved["cells"][1]["outputs"]
    (output,) = [o for o in outputs if "acp_notebook" in o.get("metadata", {})]
    assert WIDGET_MIME not in output["data"]
    # Shutting a kernel down interrupts it first: when the cell's error reached the page, it is the turn's
    # interruption and nothing else.
    others = [o for o in outputs if o is not output]
    assert [(o["output_type"], o.get("ename")) for o in others] in ([], [("error", "TurnInterrupted")]), others
    return "".join(output["data"]["text/plain"])


def test_a_turn_whose_kernel_shuts_down_is_saved_ended(lab_page: LabPage, jupyterlab_server: JupyterLabServer) -> None:
    text = _saved_turn_after(lab_page, jupyterlab_server, "shut_down_owls.ipynb", "kernelmenu:shutdown")
    # Cancelled when the cell's cancellation reached the page before the kernel went, else interrupted.
    assert any(f"· {word}" in text.splitlines()[0] for word in ("cancelled", "interrupted")), text
    assert "waiting" not in text and "live in" not in text


def test_a_turn_whose_kernel_restarts_is_saved_interrupted(lab_page: LabPage,
                                                          jupyterlab_server: JupyterLabServer) -> None:
    """JupyterLab drops what a kernel it restarts sends last, so the outputs still hold their live forms;
    the server sees the kernel process is gone as it saves, and saves the forms for that."""
    text = _saved_turn_after(lab_page, jupyterlab_server, "restarted_owls.ipynb", "kernelmenu:restart")
    lines = text.splitlines()
    assert "· interrupted" in lines[0] and "waiting" not in text and "live in" not in text
    assert "Not answered: The agent asks permission: Read notes.txt" in lines
    assert "interrupted: the kernel stopped" in lines
    saved = json.loads((jupyterlab_server.root_dir / "restarted_owls.ipynb").read_text())
    panel = "".join(saved["cells"][0]["outputs"][-1]["data"]["text/plain"])
    assert "· closed" in panel.splitlines()[0] and "the kernel stopped" in panel
