"""Edit-and-rerun in JupyterLab: an earlier %%acp cell, edited in the browser and run again, answers on a new
branch (its header says so), and the cell below, which still shows the other branch's reply, is marked as not on
the current branch until it runs again; run again, it answers on the new branch and the mark goes."""

from __future__ import annotations

from .jupyterlab import JupyterLabServer, LabPage, screenshot_dir, write_notebook

CELLS = [
    "%load_ext acp_notebook\n%config AcpMagics.permission = 'allow'\n%acp start demo",
    "%%acp\napples",
    "%%acp\npears",
    "%%acp\nwhat did I say before?",
]
OTHER_BRANCH = ".acpnb-branch[data-current='false']"


def edit(lab_page: LabPage, index: int, source: str) -> None:
    """Replace the index-th cell's text by typing, as a user does."""
    editor = lab_page.cell(index).locator(".cm-content")
    editor.click()
    lab_page.page.keyboard.press("Control+a")
    lab_page.page.keyboard.type(source)


def test_an_edited_earlier_cell_branches_and_the_cell_below_says_it_is_on_the_other_branch(
    lab_page: LabPage, jupyterlab_server: JupyterLabServer
) -> None:
    write_notebook(jupyterlab_server.root_dir / "branches_browser.ipynb", CELLS)
    lab_page.open_notebook("branches_browser.ipynb")
    lab_page.run_all_cells()
    below = lab_page.output(3)
    lab_page.wait_for_text('"apples", "pears".', within=below)
    assert below.locator(".acpnb-branch").count() == 0  # one branch: nothing to say yet

    edit(lab_page, 2, "%%acp\nplums")
    lab_page.run_cell(2)
    lab_page.wait_for_text("branch b2 from main after 1 turn, forked", within=lab_page.output(2))
    mark = lab_page.wait_for_selector(OTHER_BRANCH, within=below, timeout=60)
    assert "Not the current branch (b2)" in mark.inner_text()
    assert mark.get_attribute("data-branch") == "main"
    lab_page.screenshot(screenshot_dir() / "branches-other-branch.png", of=lab_page.cell(3))

    lab_page.run_cell(3)  # run again: it answers on b2, from apples and plums, and is no longer marked
    lab_page.wait_for_text('"apples", "plums".', within=below)
    current = lab_page.wait_for_selector(".acpnb-branch[data-current='true']", within=below, timeout=60)
    assert "b2" in current.inner_text()
    assert below.locator(OTHER_BRANCH).count() == 0
