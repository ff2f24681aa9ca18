"""The notebook experience end to end: JupyterLab in chromium, the demo agent, real clicks.

A person loads the extension, starts the demo agent, picks "smart" in the model dropdown
by clicking, sees the thought-level dropdown appear, runs a %%acp cell and sees the reply
stream in under a header with the session title; then answers a permission request with
a button while the cell is still running, and opens the protocol inspector. Screenshots
of each step go to docs/img/.
"""

from __future__ import annotations

import re
from pathlib import Path

from .jupyterlab import Cell, JupyterLabServer, LabPage, write_notebook

REPO_ROOT = Path(__file__).resolve().parents[2]
IMG = REPO_ROOT / "docs" / "img"

NOTEBOOK = "acp_e2e.ipynb"
CELLS = [
    Cell("# Talking to an ACP agent", kind="markdown"),
    "%env ACP_DEMO_DELAY=0.15",  # the demo agent pauses between chunks: the reply visibly streams
    "%load_ext acp_notebook\n%acp start demo",
    "%%acp\nExplain the agent client protocol in one line",
    "%%acp\nread notes.txt",
    "%acp log --method session/set_config_option",
]
PACE, START, CHAT, PERMISSION, LOG = 1, 2, 3, 4, 5


def run_without_waiting(lab_page: LabPage, index: int) -> None:
    """Select a cell and run it with Ctrl+Enter, returning while it still runs (LabPage.run_cell waits)."""
    lab_page.cell(index).locator(".jp-InputPrompt").click()
    lab_page.page.keyboard.press("Control+Enter")


def test_pick_a_model_by_clicking_then_chat(lab_page: LabPage, jupyterlab_server: JupyterLabServer) -> None:
    root = jupyterlab_server.root_dir
    (root / "notes.txt").write_text("first line\nsecond line\n")
    write_notebook(root / NOTEBOOK, CELLS)
    lab_page.open_notebook(NOTEBOOK)
    lab_page.run_cell(PACE)

    # %acp start demo: the panel shows the agent's name until the first title arrives.
    lab_page.run_cell(START)
    panel = lab_page.output(START)
    lab_page.wait_for_selector(".acpnb-panel .acpnb-title", within=panel)
    assert lab_page.wait_for_selector(".acpnb-title", within=panel).inner_text() == "Demo agent"
    assert lab_page.dropdown("Model", within=panel).input_value() == "Everyday / Fast"
    assert lab_page.dropdown("Thought level", within=panel).count() == 0

    # ipywidgets' <select> options carry the labels: grouped choices read "Group / Choice".
    # A click on the dropdown sends set_config_option; the agent's answer adds the thought level.
    lab_page.select_dropdown_option("Model", "Deep thinking / Smart", within=panel)
    thought_level = lab_page.dropdown("Thought level", within=panel)
    thought_level.wait_for(state="visible")
    assert thought_level.input_value() == "Medium"
    assert lab_page.dropdown("Model", within=panel).input_value() == "Deep thinking / Smart"
    lab_page.wait_for_text("model: Smart", within=panel)
    lab_page.screenshot(IMG / "panel.png", of=panel)

    # A %%acp cell: the reply streams in under the header, which takes the session's title.
    run_without_waiting(lab_page, CHAT)
    chat = lab_page.output(CHAT)
    lab_page.wait_for_selector(".acpnb-status-working", within=chat)
    reply = lab_page.wait_for_selector(".acpnb-reply", within=chat)
    partial = lab_page.wait_for_text(re.compile(r"^\[smart\] I thought"), within=reply).inner_text()
    lab_page.screenshot(IMG / "streaming.png", of=lab_page.cell(CHAT))
    lab_page.wait_for_text("the same way every time.", within=reply)
    assert len(partial) < len(reply.inner_text()), "the reply arrived in one piece, not streamed"
    title = lab_page.wait_for_selector(".acpnb-title", within=chat)
    assert title.inner_text() == "Explain the agent client protocol…"
    lab_page.wait_for_text("Thoughts", within=chat)
    lab_page.wait_for_selector(".acpnb-status-done", within=chat)
    # The panel follows the live session: the title arrived there too.
    lab_page.wait_for_text("Explain the agent client protocol…", within=panel)
    lab_page.screenshot(IMG / "chat.png", of=lab_page.cell(CHAT))
    lab_page.cell(0).scroll_into_view_if_needed()
    lab_page.screenshot(IMG / "notebook.png")

    # A permission request while the cell runs: the buttons must reach the busy kernel.
    run_without_waiting(lab_page, PERMISSION)
    permission = lab_page.output(PERMISSION)
    allow = lab_page.wait_for_selector(".acpnb-permission-option >> text=Allow once", within=permission)
    lab_page.wait_for_selector(".acpnb-cancel", within=permission)  # the view is laid out to its end
    lab_page.screenshot(IMG / "permission.png", of=lab_page.cell(PERMISSION))
    allow.click()
    lab_page.wait_for_text("Read notes.txt: 2 lines.", within=permission)
    lab_page.wait_for_text("You chose: Allow once.", within=permission)
    lab_page.wait_for_selector(".acpnb-status-done", within=permission)

    # The protocol inspector, filtered to set_config_option: the one change made by clicking.
    lab_page.run_cell(LOG)
    inspector = lab_page.output(LOG)
    lab_page.wait_for_text("2 of", within=inspector)
    lab_page.wait_for_text('"currentValue": "smart"', within=inspector)
    lab_page.screenshot(IMG / "inspector.png", of=inspector)
