"""A saved notebook in JupyterLab: it reopens with its final truth, and a restarted kernel resumes.

A person runs the demo agent, picks the smart model and a high thought level by clicking,
chats (the session gets its title), stops the agent and saves. Reopened in a fresh
browser with a fresh kernel, the notebook shows every conversation, the final settings and
the final title as static HTML: no "Error displaying widget: model not found", no
broken-link icons, no blank outputs; nbconvert's exports of the same file say the same.

Then a second notebook keeps its agent running, is saved, and its kernel is restarted from
the Kernel menu: the panel says the kernel is gone (no broken-link icons), and
``%acp resume`` brings the session back so the demo agent answers from its history.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from .jupyterlab import VIEWPORT, Cell, JupyterLabServer, LabPage, screenshot_dir, write_notebook

FIRST_PROMPT = "new topic: Owls and their nests"
TITLE = "Owls and their nests"
REPLY = "[smart] I thought it over at the high level."

SAVED = "saved_owls.ipynb"
SAVED_CELLS = [
    Cell("# A conversation to keep", kind="markdown"),
    "%load_ext acp_notebook\n%acp start demo",
    f"%%acp\n{FIRST_PROMPT}",
    "%acp stop",
]
START, CHAT, STOP = 1, 2, 3

RESUMED = "resumed_owls.ipynb"
RESUMED_CELLS = [
    "%load_ext acp_notebook\n%acp start demo",
    f"%%acp\n{FIRST_PROMPT}",
    "%load_ext acp_notebook\n%acp resume",
    "%%acp\nwhat did I say first?",
]

# Everything a reader must not see in a reopened notebook: widget errors, loading placeholders,
# and ipywidgets' broken-link marks that are actually drawn (ours hide theirs, see OFFLINE_STYLE).
_BROKEN_JS = """
(panelSelector) => {
  const panel = document.querySelector(panelSelector);
  const text = panel.innerText;
  const drawnIcons = [...panel.querySelectorAll('.jupyter-widgets-disconnected')]
    .filter((el) => getComputedStyle(el, '::before').display !== 'none');
  return {
    widgetErrors: (text.match(/Error displaying widget|Loading widget/g) || []).length,
    drawnIcons: drawnIcons.length,
    blankOutputs: [...panel.querySelectorAll('.jp-OutputArea-output')]
      .filter((el) => el.innerText.trim() === '').length,
  };
}
"""


def menu(lab: LabPage, menu_name: str, command: str) -> None:
    lab.page.locator("#jp-MainMenu .lm-MenuBar-item", has_text=menu_name).click()
    lab.page.locator(f'.lm-Menu-item[data-command="{command}"]').click()


def save(lab: LabPage, server: JupyterLabServer, name: str) -> dict[str, Any]:
    """File > Save, then wait until the tab is clean and the file was written; returns the saved notebook.

    A tab that was clean already says nothing about this save, so the file's modification time tells."""
    path = server.root_dir / name
    before = path.stat().st_mtime_ns if path.exists() else None
    menu(lab, "File", "docmanager:save")
    lab.page.wait_for_function(
        "(name) => ![...document.querySelectorAll('.lm-TabBar-tab.jp-mod-dirty')]"
        ".some((tab) => tab.innerText.includes(name))", arg=name)
    deadline = time.monotonic() + 30
    while (path.stat().st_mtime_ns if path.exists() else None) == before:  # a file has no event to wait on
        assert time.monotonic() < deadline, f"{name} was not written by File > Save"
        time.sleep(0.05)
    return json.loads(path.read_text())


def start_cell(lab: LabPage, index: int) -> None:
    """Run a cell without waiting on execution counts (LabPage.run_cell compares them with the
    highest shown, and a restarted kernel counts from 1 again): callers wait for its output."""
    lab.cell(index).locator(".jp-InputPrompt").click()
    menu(lab, "Run", "notebook:run-cell")


def restart_kernel(lab: LabPage) -> None:
    menu(lab, "Kernel", "kernelmenu:restart")
    lab.page.locator(".jp-Dialog .jp-mod-accept").click()
    lab.wait_for_kernel_idle()


def records(notebook: dict[str, Any]) -> list[dict[str, Any]]:
    return [o["metadata"]["acp_notebook"]["session"] for c in notebook["cells"] for o in c.get("outputs", [])
            if "acp_notebook" in o.get("metadata", {})]


def test_a_saved_notebook_reopens_with_its_final_truth(chromium, lab_page: LabPage,
                                                       jupyterlab_server: JupyterLabServer) -> None:
    nbconvert = pytest.importorskip("nbconvert")  # here, not at collection: every xdist worker collects this module
    root = jupyterlab_server.root_dir
    write_notebook(root / SAVED, SAVED_CELLS)
    lab_page.open_notebook(SAVED)
    lab_page.run_cell(START)
    panel = lab_page.output(START)
    lab_page.select_dropdown_option("Model", "Deep thinking / Smart", within=panel)
    lab_page.dropdown("Thought level", within=panel).wait_for(state="visible")
    lab_page.select_dropdown_option("Thought level", "High", within=panel)
    lab_page.wait_for_text("model: Smart", within=panel)
    lab_page.run_cell(CHAT)
    lab_page.wait_for_selector(".acpnb-turn.acpnb-static .acpnb-status-done", within=lab_page.output(CHAT))
    lab_page.wait_for_text(TITLE, exact=True, within=panel)
    lab_page.run_cell(STOP)
    lab_page.wait_for_text("Stopped agent 'demo'", within=lab_page.output(STOP))
    lab_page.wait_for_selector(".acpnb-panel.acpnb-static .acpnb-status-closed", within=panel)

    saved = save(lab_page, jupyterlab_server, SAVED)
    # What JupyterLab saved: static outputs only, the record carrying the final title.
    assert not [o for c in saved["cells"] for o in c.get("outputs", [])
                if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert {r["title"] for r in records(saved)} == {TITLE} and all(r["closed"] for r in records(saved)[:1])

    jupyterlab_server.shutdown_all_kernels()
    context = chromium.new_context(viewport=VIEWPORT)
    try:
        reopened = LabPage(context.new_page(), jupyterlab_server)
        reopened.open_notebook(SAVED)  # a fresh kernel, which knows none of the first one's widgets
        panel = reopened.output(START)
        reopened.wait_for_text(TITLE, exact=True, within=panel)
        for text in ("model: Smart", "Thought level", "High", "closed", "closed with %acp stop"):
            reopened.wait_for_text(text, within=panel)
        reopened.wait_for_text(REPLY, within=reopened.output(CHAT))
        reopened.wait_for_text("Stopped agent 'demo'", within=reopened.output(STOP))
        assert reopened.page.evaluate(_BROKEN_JS, reopened.PANEL) == \
            {"widgetErrors": 0, "drawnIcons": 0, "blankOutputs": 0}
        reopened.screenshot(screenshot_dir() / "saved-reopened.png", of=reopened.notebook)
    finally:
        context.close()

    for exporter in ("html", "markdown"):
        body, _ = nbconvert.get_exporter(exporter)().from_filename(str(root / SAVED))
        for text in (TITLE, "model: Smart", "High", "closed with %acp stop", REPLY, "Stopped agent 'demo'"):
            assert text in body, (exporter, text)
        assert "Error displaying widget" not in body


def test_a_restarted_kernel_resumes_the_conversation(lab_page: LabPage, jupyterlab_server: JupyterLabServer) -> None:
    write_notebook(jupyterlab_server.root_dir / RESUMED, RESUMED_CELLS)
    lab_page.open_notebook(RESUMED)
    lab_page.run_cell(0)
    lab_page.run_cell(1)
    panel = lab_page.output(0)
    lab_page.wait_for_text(TITLE, exact=True, within=panel)
    save(lab_page, jupyterlab_server, RESUMED)

    restart_kernel(lab_page)
    # The panel's agent went with the kernel: it says so, and draws no broken-link icons.
    lab_page.wait_for_selector(".acpnb-offline", within=panel)
    assert lab_page.page.evaluate(_BROKEN_JS, lab_page.PANEL)["drawnIcons"] == 0

    start_cell(lab_page, 2)
    resumed = lab_page.output(2)
    lab_page.wait_for_text("Resumed session demo-", within=resumed)
    lab_page.wait_for_text("(session/resume)", within=resumed)
    lab_page.wait_for_text(TITLE, exact=True, within=resumed)  # the panel of the resumed session
    start_cell(lab_page, 3)
    lab_page.wait_for_text(f'You first said: "{FIRST_PROMPT}"', within=lab_page.output(3))
    lab_page.screenshot(screenshot_dir() / "resumed.png", of=lab_page.notebook)

