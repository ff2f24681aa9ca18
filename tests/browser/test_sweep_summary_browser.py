"""A sweep's summary in JupyterLab at 1280 px: the whole table fits in the output area, with three scorers,
tokens and cost, and every interval stays on one line."""

from __future__ import annotations

from .jupyterlab import JupyterLabServer, LabPage, screenshot_dir, write_notebook

# The same rows as tests/test_sweep_extras.py's wide_result: three scorers, long model ids, tokens and cost.
SUMMARY_CELL = """\
from acp_notebook.sweep import SweepResult
from acp_notebook.sweep.columns import FIXED_COLUMNS

models = ["claude:sonnet-4.5", "codex:gpt-5-codex"]
rows = []
for model in models:
    for i in range(7):
        row = dict.fromkeys(FIXED_COLUMNS)
        row.update(trial_id=f"{model}-{i}", model=model, sample_id=f"s{i}", repeat=0, status="ok",
                   score_exact=float(i % 2), score_tests=float(i % 2), score_style=0.5, duration_s=12.5,
                   ttft_s=1.5, total_tokens=123456, cost=0.0123, currency="USD", text="t", prompt="p")
        rows.append(row)
SweepResult(rows, {"models": models, "scorers": [{"name": "exact"}, {"name": "tests"}, {"name": "style"}]})"""

# Lines a cell's text is laid out on: its text's line boxes, counted by their distinct tops.
MEASURE_JS = """(output) => {
  const table = output.querySelector('table.acp-sweep-summary');
  const area = output.querySelector('.jp-OutputArea-output');
  const lines = (cell) => {
    const range = document.createRange();
    range.selectNodeContents(cell);
    return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
  };
  const cells = [...table.querySelectorAll('td')];
  return {right: table.getBoundingClientRect().right, areaRight: area.getBoundingClientRect().right,
          scroll: area.scrollWidth, client: area.clientWidth,
          wrapped: cells.filter(c => lines(c) > 1).map(c => c.innerText),
          whiteSpace: getComputedStyle(table.querySelector('td')).whiteSpace,
          intervals: cells.map(c => c.innerText).filter(t => t.includes('] n='))};
}"""


def test_the_summary_fits_1280_px_with_each_interval_on_one_line(
    lab_page: LabPage, jupyterlab_server: JupyterLabServer
) -> None:
    write_notebook(jupyterlab_server.root_dir / "sweep_summary.ipynb", [SUMMARY_CELL])
    lab_page.open_notebook("sweep_summary.ipynb")
    lab_page.hide_left_sidebar()  # the notebook as it opens in a 1280 px window with the file browser folded
    lab_page.run_all_cells()
    output = lab_page.output(0)
    lab_page.wait_for_selector("table.acp-sweep-summary", within=output)
    measured = output.evaluate(MEASURE_JS)
    lab_page.screenshot(screenshot_dir() / "sweep-summary-1280.png", of=output)
    assert measured["whiteSpace"] == "nowrap", measured["whiteSpace"]
    assert len(measured["intervals"]) == 6, measured
    assert measured["wrapped"] == [], measured  # every value, intervals included, on one line
    assert measured["right"] <= measured["areaRight"] and measured["scroll"] <= measured["client"], measured
