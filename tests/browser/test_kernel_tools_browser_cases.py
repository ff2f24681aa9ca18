"""The kernel tools' hard cases as a person meets them in JupyterLab (issue 35, point 8):

- Cancel turn while run_code waits for Allow: the turn ends cancelled (no RpcError), the request says it
  was withdrawn, the code never ran;
- the policy switched off and back on in one session: under off the tools answer that the user turned them
  off, and the session panel's line follows; back on, the same session reads the variable again;
- a figure the agent inspected: one card for the call (the agent's tool_call and the kernel's record merged)
  showing the image itself;
- a notebook saved while Allow waits, its page reloaded: the turn's output says how to answer; the
  reloaded page can neither run a cell nor open a subshell console while the cell runs (JupyterLab learns
  that the kernel has subshells from kernel_info, which waits behind the cell), so a second client of the
  kernel answers with ``%acp pending allow 1`` on a subshell; the code runs, the turn finishes, and the
  notebook saved again from the reloaded page no longer says "waiting".
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from typing import Any

from .jupyterlab import JupyterLabServer, LabPage, screenshot_dir, write_notebook
from .test_kernel_tools_browser import run_without_waiting
from .test_saved_notebook import save

OFF_WORDS = "off: the user turned kernel tools off"


def saved(lab_page: LabPage, server: JupyterLabServer, name: str) -> dict[str, Any]:
    """File > Save (test_saved_notebook.save), read once the file is whole: the server writes the file in place
    (its atomic writing keeps a backup copy, it does not replace the file), so a read may land mid-write."""
    try:
        return save(lab_page, server, name)
    except json.JSONDecodeError:
        deadline = time.monotonic() + 30
        while True:  # a file has no event to wait on
            with contextlib.suppress(json.JSONDecodeError):
                return json.loads((server.root_dir / name).read_text())
            assert time.monotonic() < deadline, f"{name} never held a whole notebook after File > Save"
            time.sleep(0.05)


def _ask_to_run(lab_page: LabPage, server: JupyterLabServer, name: str, extra: tuple[str, ...] = ()) -> None:
    """Open notebook ``name``, start the demo agent and a turn whose run_code waits for Allow."""
    write_notebook(server.root_dir / name, ["%load_ext acp_notebook\nx = 41", "%acp start demo",
                                            "%%acp\nrun y = x + 1", *extra])
    lab_page.open_notebook(name)
    lab_page.run_cell(0)
    lab_page.run_cell(1)
    run_without_waiting(lab_page, 2)
    turn = lab_page.output(2)
    lab_page.wait_for_selector(".acpnb-permission-option >> text=Allow", within=turn)
    lab_page.wait_for_selector(".acpnb-cancel", within=turn)


def test_cancel_while_allow_waits_ends_the_turn_cancelled(lab_page: LabPage,
                                                          jupyterlab_server: JupyterLabServer) -> None:
    _ask_to_run(lab_page, jupyterlab_server, "cancel_waiting.ipynb", ("print('y' in globals())",))
    turn = lab_page.output(2)
    lab_page.wait_for_selector(".acpnb-cancel", within=turn).click()
    lab_page.wait_for_selector(".acpnb-status-cancelled", within=turn)
    lab_page.wait_for_text("Withdrawn: the turn was cancelled.", within=turn)
    lab_page.wait_for_text("withdrawn", exact=True, within=turn.locator(".acpnb-kernel-call"))
    assert "RpcError" not in turn.inner_text() and "Internal error" not in turn.inner_text()
    lab_page.screenshot(screenshot_dir() / "kernel-tools-cancelled.png", of=lab_page.cell(2))
    lab_page.run_cell(3)
    lab_page.wait_for_text("False", exact=True, within=lab_page.output(3))


def test_policy_off_then_on_again_in_one_session(lab_page: LabPage, jupyterlab_server: JupyterLabServer) -> None:
    cells = ["%load_ext acp_notebook\ntotal = 41", "%acp start demo", "%config AcpMagics.kernel_tools = 'off'",
             "%%acp\nwhat is in total?", "%config AcpMagics.kernel_tools = 'ask'", "%%acp\nwhat is in total?"]
    write_notebook(jupyterlab_server.root_dir / "policy_live.ipynb", cells)
    lab_page.open_notebook("policy_live.ipynb")
    lab_page.run_cell(0)
    lab_page.run_cell(1)
    panel = lab_page.output(1)
    lab_page.wait_for_text("kernel tools: ask", within=panel)
    lab_page.run_cell(2)
    lab_page.wait_for_text("kernel tools: off", within=panel)  # the panel line follows at once
    lab_page.run_cell(3)
    off = lab_page.output(3)
    lab_page.wait_for_selector(".acpnb-status-done", within=off)
    lab_page.wait_for_text(OFF_WORDS, within=off)
    lab_page.run_cell(4)
    lab_page.wait_for_text("kernel tools: ask", within=panel)
    lab_page.run_cell(5)
    on = lab_page.output(5)
    lab_page.wait_for_selector(".acpnb-status-done", within=on)
    lab_page.wait_for_text("41", within=on.locator(".acpnb-reply"))
    assert OFF_WORDS not in on.inner_text()  # the same session's tools work again
    lab_page.screenshot(screenshot_dir() / "kernel-tools-off-and-on.png", of=lab_page.notebook)


def test_an_inspected_figure_shows_as_an_image_in_one_card(lab_page: LabPage,
                                                          jupyterlab_server: JupyterLabServer) -> None:
    cells = ["%load_ext acp_notebook\nimport matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
             "fig, ax = plt.subplots()\nbars = ax.bar(['north', 'south'], [3, 5])",
             "%acp start demo --kernel-tools read-only", "%%acp\ninspect fig"]
    write_notebook(jupyterlab_server.root_dir / "inspect_figure.ipynb", cells)
    lab_page.open_notebook("inspect_figure.ipynb")
    for index in range(3):
        lab_page.run_cell(index)
    turn = lab_page.output(2)
    lab_page.wait_for_selector(".acpnb-status-done", within=turn)
    image = lab_page.wait_for_selector("img.acpnb-kernel-image", within=turn)
    assert image.evaluate("(img) => img.complete && img.naturalWidth > 0")  # a picture, drawn
    cards = turn.locator(".acpnb-kernel-call").filter(has_text="inspect_variable")
    assert cards.count() == 1  # the agent's tool_call and the kernel's record of it: one card
    assert cards.first.locator("img.acpnb-kernel-image").count() == 1
    assert "[an image" not in cards.first.inner_text()  # the card shows the picture, not its name
    lab_page.screenshot(screenshot_dir() / "kernel-tools-figure.png", of=lab_page.cell(2))


def _terminal(server: JupyterLabServer, *args: str) -> subprocess.CompletedProcess[str]:
    """The command line a person runs in a terminal of this JupyterLab (its runtime directory, where the kernels'
    connection files are)."""
    env = {**os.environ, "JUPYTER_RUNTIME_DIR": str(server.runtime_dir)}
    return subprocess.run([sys.executable, "-m", "acp_notebook.magics.pending", *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def test_reopened_while_allow_waits_is_answered_with_acp_pending(lab_page: LabPage,
                                                                 jupyterlab_server: JupyterLabServer) -> None:
    name = "reopen_waiting.ipynb"
    _ask_to_run(lab_page, jupyterlab_server, name, ("print(y)",))
    first = saved(lab_page, jupyterlab_server, name)
    assert "Waiting for an answer: Allow | Reject" in json.dumps(first)

    lab_page.page.reload()  # the page is gone and back; the kernel still waits in the %%acp cell
    lab_page.notebook.locator(".jp-Notebook").wait_for(state="visible")
    turn = lab_page.output(2)
    lab_page.wait_for_text("answer with %acp pending", within=turn)
    assert turn.locator(".acpnb-permission-option").count() == 0  # no buttons: the widget view is gone
    lab_page.screenshot(screenshot_dir() / "kernel-tools-reopened-waiting.png", of=lab_page.cell(2))

    # The reloaded page can run no cell (the main shell runs the %%acp cell) nor open a subshell console (its
    # kernel_info waits behind that cell too): the saved output spells out a terminal's command, as it is run here.
    command = re.search(r"python -m acp_notebook\.magics\.pending --kernel (\S+) allow ([0-9a-f]{12})",
                        turn.inner_text())
    assert command is not None, turn.inner_text()
    listed = _terminal(jupyterlab_server, "--kernel", command.group(1))
    assert listed.returncode == 0 and "1. agent 'demo'" in listed.stdout and "y = x + 1" in listed.stdout, listed
    answered = _terminal(jupyterlab_server, "--kernel", command.group(1), "allow", command.group(2))
    assert answered.returncode == 0 and "You chose: Allow." in answered.stdout, answered
    again = _terminal(jupyterlab_server, "--kernel", command.group(1), "allow", command.group(2))
    assert again.returncode == 1 and "no waiting request" in again.stderr, again  # settled: not answered twice

    lab_page.wait_for_kernel_idle()  # the turn finished, and the page hears the kernel again
    lab_page.run_cell(3)
    lab_page.wait_for_text("42", exact=True, within=lab_page.output(3))  # the code the agent asked to run ran
    again = saved(lab_page, jupyterlab_server, name)
    text = json.dumps(again)
    assert "waiting" not in text.lower(), text
    assert "You chose: Allow." in "".join(again["cells"][2]["outputs"][-1]["data"]["text/html"])
