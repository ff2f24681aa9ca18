"""The agent in your kernel, as a person sees it in JupyterLab: under the default policy ("ask") the demo
agent's run_code shows its code with Allow / Reject in the running %%acp cell; a click on Allow runs it in
the kernel (the next cell uses the variable) and the cell shows what ran and what came out. A proposed cell
("plot df") appears as a new cell below the running one, not run. Screenshots go to the usual directory.
"""

from __future__ import annotations

from .jupyterlab import JupyterLabServer, LabPage, screenshot_dir, write_notebook

NOTEBOOK = "kernel_tools.ipynb"
CELLS = [
    "%load_ext acp_notebook\nimport pandas as pd\ndf = pd.DataFrame({'height_cm': [170, 182], 'city': ['Oslo', 'Lima']})",
    "%acp start demo",
    "%%acp\nrun answer = 41 + 1\nprint('answer is', answer)",
    "print(answer * 10)",
    "%%acp\nplot df",
]
SETUP, START, RUN, USE, PLOT = range(5)


def run_without_waiting(lab_page: LabPage, index: int) -> None:
    """Select a cell and run it with Ctrl+Enter, returning while it still runs (LabPage.run_cell waits)."""
    lab_page.cell(index).locator(".jp-InputPrompt").click()
    lab_page.page.keyboard.press("Control+Enter")


def test_allow_runs_the_agents_code_in_the_kernel(lab_page: LabPage, jupyterlab_server: JupyterLabServer) -> None:
    write_notebook(jupyterlab_server.root_dir / NOTEBOOK, CELLS)
    lab_page.open_notebook(NOTEBOOK)
    lab_page.run_cell(SETUP)
    lab_page.run_cell(START)

    run_without_waiting(lab_page, RUN)
    cell = lab_page.output(RUN)
    allow = lab_page.wait_for_selector(".acpnb-permission-option >> text=Allow", within=cell)
    prompt = lab_page.wait_for_selector(".acpnb-permission", within=cell)
    assert "answer = 41 + 1" in lab_page.wait_for_selector(".acpnb-kernel-code", within=prompt).inner_text()
    lab_page.wait_for_selector(".acpnb-cancel", within=cell)  # the view is laid out to its end
    lab_page.screenshot(screenshot_dir() / "kernel-tools-ask.png", of=lab_page.cell(RUN))
    allow.click()
    lab_page.wait_for_text("I ran it in your kernel.", within=cell)
    lab_page.wait_for_selector(".acpnb-status-done", within=cell)
    lab_page.wait_for_text("answer is 42", within=cell.locator(".acpnb-kernel-call"))
    lab_page.screenshot(screenshot_dir() / "kernel-tools-ran.png", of=lab_page.cell(RUN))

    lab_page.run_cell(USE)
    lab_page.wait_for_text("420", within=lab_page.output(USE))

    cells_before = lab_page.notebook.locator(".jp-Notebook-cell").count()
    lab_page.run_cell(PLOT)
    lab_page.wait_for_text("I proposed a cell", within=lab_page.output(PLOT))
    proposed = lab_page.cell(PLOT + 1)
    # A bar chart of the numeric column by the text column: what the demo proposes for a frame with both.
    proposed.locator(".jp-InputArea").get_by_text("df.plot.bar(x='city', y='height_cm')").wait_for(state="visible")
    assert lab_page.notebook.locator(".jp-Notebook-cell").count() == cells_before + 1
    assert proposed.locator(".jp-Cell-outputArea .jp-OutputArea-child").count() == 0  # not run
    lab_page.screenshot(screenshot_dir() / "kernel-tools-proposed.png", of=lab_page.notebook)
