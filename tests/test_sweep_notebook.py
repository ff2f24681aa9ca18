"""notebooks/sweeps.ipynb runs top to bottom in a real kernel and shows the progress bar, tables and plots."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "sweeps.ipynb"


def outputs_of(cell) -> list[dict]:
    return list(cell.get("outputs") or [])


def data_of(cell, mime: str) -> list:
    return [o["data"][mime] for o in outputs_of(cell) if mime in o.get("data", {})]


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("sweeps-notebook")
    shutil.copy(NOTEBOOK, workdir / NOTEBOOK.name)
    notebook = nbformat.read(workdir / NOTEBOOK.name, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(workdir)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    return notebook, workdir


def code_cell(notebook, starts_with: str):
    matches = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(starts_with)]
    assert len(matches) == 1, f"expected one code cell starting with {starts_with!r}"
    return matches[0]


def test_no_cell_failed(executed):
    notebook, _ = executed
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not [o for o in outputs_of(cell) if o["output_type"] == "error"], cell.source


def test_the_sweep_cell_shows_a_progress_bar_that_reached_the_end_and_the_result(executed):
    notebook, workdir = executed
    cell = code_cell(notebook, "prompts = [")
    assert data_of(cell, "application/vnd.jupyter.widget-view+json"), "no progress widget displayed"
    (html,) = data_of(cell, "text/html")
    assert "18 runs, 18 ok, 0 failed" in html and "acp-sweep-summary" in html
    # The bar was driven from the background thread; its final state reached the kernel's widget state.
    state = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    bars = [m["state"] for m in state.values() if m["model_name"] == "IntProgressModel"]
    assert any(b["value"] == b["max"] == 18 and b["bar_style"] == "success" for b in bars), bars
    from acp_notebook.sweep import SweepResult

    saved = SweepResult.load(workdir / "sweep-results.csv")
    assert len(saved) == 18 and all(r["confirmed_model"] == r["model"] for r in saved.rows)


def test_dataframe_summary_and_plots_are_shown(executed):
    notebook, workdir = executed
    (frame,) = data_of(code_cell(notebook, "df = result.to_pandas()"), "text/html")
    assert "confirmed_model" in frame and "demo:smart" in frame
    (summary,) = data_of(code_cell(notebook, "result.summary()"), "text/html")
    assert "latency_median_s" in summary and "demo:fast" in summary
    assert data_of(code_cell(notebook, "result.plot()"), "image/png")
    assert data_of(code_cell(notebook, 'result.plot(metric="ttft_s")'), "image/png")
    # With the demo pausing between chunks, the smart model (more chunks) is the slower one.
    from acp_notebook.sweep import SweepResult

    summary_rows = {s["model"]: s for s in SweepResult.load(workdir / "sweep-results.csv").summary()}
    assert summary_rows["demo:smart"]["latency_median_s"] > summary_rows["demo:fast"]["latency_median_s"]


def test_the_proxy_cell(executed):
    notebook, _ = executed
    cell = code_cell(notebook, "proxy = acpnb.start_proxy(")
    printed = "".join(o.get("text", "") for o in outputs_of(cell))
    assert "the proxy offers: a:fast, a:smart, b:fast, b:smart" in printed
    (table,) = data_of(cell, "text/plain")
    rows = {line.split()[0]: line.split()[1:5] for line in table.splitlines()[2:]}
    assert rows == {"a:fast": ["2", "2", "0", "0"], "b:smart": ["2", "2", "0", "0"]}  # runs ok errors timeouts


def test_failures_cli_and_async_cells(executed):
    notebook, _ = executed
    checked = "".join(o.get("text", "") for o in outputs_of(code_cell(notebook, "checked = acpnb.sweep(")))
    smart, fast, turbo = checked.splitlines()
    assert smart.startswith("demo:smart  ok") and "Thought 3 of 3" in smart
    assert fast.startswith("demo:fast   error") and "thought_level" in fast
    assert turbo.startswith("demo:turbo  error") and "'turbo' is not a choice" in turbo
    cli_text = "".join(o.get("text", "") for o in outputs_of(code_cell(notebook, "import sys\n\n!")))
    assert "4 runs: 4 ok, 0 failed" in cli_text
    (quick,) = data_of(code_cell(notebook, "from acp_notebook.sweep import asweep"), "text/html")
    assert "demo:smart" in quick
