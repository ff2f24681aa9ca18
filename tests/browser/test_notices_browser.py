"""Notices and compactions in JupyterLab (issue 37): notices show by severity (info as a quiet line, warnings
and errors marked with a coloured bar), and a compaction is a folded "context compacted" block that opens and
closes with a click, in the live view while its summary streams (a fold the person opened stays open as the
summary grows) and in the cell's final output.

The live part uses a CellAgent written in the notebook that holds its compaction open until a later cell lets
it go on (its turn runs with ``--no-wait``, so other cells run meanwhile).
"""

from __future__ import annotations

from .jupyterlab import JupyterLabServer, LabPage, screenshot_dir, write_notebook

NOTEBOOK = "acp_notices.ipynb"
HOLDER = """\
import threading
import acp_notebook as acpnb

class Holder(acpnb.CellAgent):
    steps = [threading.Event(), threading.Event()]

    def prompt(self, text):
        def chunk(words):
            self.send_update({"sessionUpdate": "compaction_summary_chunk", "compactionId": "c1",
                              "content": {"type": "text", "text": words}})
        self.send_update({"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "in_progress"})
        chunk("We agreed on the first half")
        assert self.steps[0].wait(120)
        chunk(" and then the second half.")
        assert self.steps[1].wait(120)
        self.send_update({"sessionUpdate": "compaction_update", "compactionId": "c1", "status": "completed"})
        return "Compacted."

holder = Holder()"""
CELLS = [
    "%load_ext acp_notebook\n%acp start demo",
    "%%acp\nhello there",
    "%%acp\nnotices",
    "%%acp\ncompact our conversation",
    HOLDER,
    "%acp start --object holder",
    "%%acp --no-wait\ncompact",
    "1",
    "holder.steps[0].set()",
    "holder.steps[1].set()",
]
START, HELLO, NOTICES, COMPACT, DEFINE, START_HOLDER, LIVE, SETTLE, STEP1, STEP2 = range(10)
BORDER_AND_WEIGHT_JS = """(el) => {
  const title = el.querySelector('.acpnb-notice-title');
  return [getComputedStyle(el).borderLeftWidth, title ? getComputedStyle(title).fontWeight : null];
}"""


def test_notices_by_severity_and_a_compaction_that_folds(lab_page: LabPage,
                                                          jupyterlab_server: JupyterLabServer) -> None:
    write_notebook(jupyterlab_server.root_dir / NOTEBOOK, CELLS)
    lab_page.open_notebook(NOTEBOOK)
    lab_page.hide_left_sidebar()
    for index in (START, HELLO, NOTICES, COMPACT):
        lab_page.run_cell(index)

    notices = lab_page.output(NOTICES)
    info = lab_page.wait_for_selector(".acpnb-notice-info", within=notices)
    warning = lab_page.wait_for_selector(".acpnb-notice-warning", within=notices)
    error = lab_page.wait_for_selector(".acpnb-notice-error", within=notices)
    assert "Using the cached index" in info.inner_text() and "Rate limited" in warning.inner_text()
    assert info.evaluate(BORDER_AND_WEIGHT_JS)[0] == "0px"  # quiet: no bar, no bold title
    for marked in (warning, error):
        bar, weight = marked.evaluate(BORDER_AND_WEIGHT_JS)
        assert bar == "3px" and int(weight) >= 600
    assert warning.get_attribute("role") == "status" and "warning:" in warning.inner_text()
    lab_page.screenshot(screenshot_dir() / "notices.png", of=notices)

    # The finished compaction, in the cell's final output: folded, opened by a click, folded again.
    compacted = lab_page.output(COMPACT)
    block = lab_page.wait_for_selector(".acpnb-compaction", within=compacted)
    summary = block.locator(".acpnb-compaction-summary")
    assert "context compacted" in block.locator("summary").inner_text()
    assert not summary.is_visible()
    block.locator("summary").click()
    summary.wait_for(state="visible")
    assert 'You first said: "hello there"' in summary.inner_text()
    lab_page.screenshot(screenshot_dir() / "compaction.png", of=compacted)
    block.locator("summary").click()
    summary.wait_for(state="hidden")

    # Live: the compaction streams into the running view; a fold opened stays open as its summary grows.
    for index in (DEFINE, START_HOLDER, LIVE):
        lab_page.run_cell(index)
    live = lab_page.output(LIVE)
    lab_page.wait_for_selector('.acpnb-compaction[data-status="in_progress"]', within=live)
    lab_page.run_cell(SETTLE)  # the cell's end publishes what the view had pending: the live view is built by now
    opened = lab_page.wait_for_selector(".acpnb-compaction", within=live)
    assert "compacting context" in opened.locator("summary").inner_text()
    opened.locator("summary").click()
    lab_page.wait_for_text("We agreed on the first half", within=live)
    lab_page.run_cell(STEP1)
    lab_page.wait_for_text("and then the second half.", within=live)
    assert live.locator(".acpnb-compaction").first.evaluate("(el) => el.open")
    lab_page.run_cell(STEP2)
    final = lab_page.wait_for_selector('.acpnb-compaction[data-status="completed"]', within=live)
    assert "context compacted" in final.locator("summary").inner_text()
    assert lab_page.console_errors == [] or all("acpnb" not in e for e in lab_page.console_errors)
