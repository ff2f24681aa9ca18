"""notebooks/sweeps.ipynb runs top to bottom in a real kernel and shows what it says it shows."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from tests.kernels import notebook_client

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

# The set-up of whichever test comes first runs the notebook and may start the suite's Ray cluster (10 to 100 s on
# a loaded machine, tests/conftest.py): more than the suite's 300 s for one test.
pytestmark = [pytest.mark.kernel, pytest.mark.timeout(900)]

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "sweeps.ipynb"


def outputs_of(cell) -> list[dict]:
    return list(cell.get("outputs") or [])


def data_of(cell, mime: str) -> list:
    return [o["data"][mime] for o in outputs_of(cell) if mime in o.get("data", {})]


def printed(cell) -> str:
    return "".join(o.get("text", "") for o in outputs_of(cell) if o["output_type"] == "stream")


@pytest.fixture(scope="module")
def executed(tmp_path_factory, ray_cluster):
    # The notebook's last part runs the sweep on the Ray cluster RAY_ADDRESS names: the suite's own (started once,
    # with retries for a slow raylet), not one more started by the kernel on a loaded machine.
    workdir = tmp_path_factory.mktemp("sweeps-notebook")
    shutil.copy(NOTEBOOK, workdir / NOTEBOOK.name)
    notebook = nbformat.read(workdir / NOTEBOOK.name, as_version=4)
    client = notebook_client(notebook, workdir, timeout=300)
    with pytest.MonkeyPatch.context() as patch:  # the kernel inherits this process's environment
        patch.setenv("RAY_ADDRESS", ray_cluster.get_runtime_context().gcs_address)
        client.execute()  # raises CellExecutionError on the first failing cell
    return notebook, workdir


def code_cell(notebook, starts_with: str):
    matches = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(starts_with)]
    assert len(matches) == 1, f"expected one code cell starting with {starts_with!r}"
    return matches[0]


def test_no_cell_failed_or_warned(executed):
    notebook, _ = executed
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not [o for o in outputs_of(cell) if o["output_type"] == "error"], cell.source
            assert "WARNING" not in printed(cell), cell.source


def test_the_sweep_shows_progress_and_known_accuracies_with_intervals(executed):
    notebook, workdir = executed
    cell = code_cell(notebook, 'acpnb.register("px"')
    # The progress bar was live while the sweep ran; what the notebook keeps is its one-line summary.
    assert not data_of(cell, "application/vnd.jupyter.widget-view+json"), "a saved output still needs the widget"
    (progress,) = [text for text in data_of(cell, "text/plain") if text.startswith("sweep: ")]
    assert progress.startswith("sweep: 120 of 120 trials in ")
    assert all(f"{model} 40 ok" in progress for model in ("demo:fast", "demo:smart", "px:d:smart")), progress
    (html,) = [html for html in data_of(cell, "text/html") if "acp-sweep-summary" in html]
    assert "120 trials, 120 ok, 0 failed" in html
    (summary,) = data_of(code_cell(notebook, "res.summary()"), "text/plain")
    # A wide summary continues in blocks below (each repeats the model column); the scores are in the first.
    lines = {line.split()[0]: line for line in summary.split("\n\n")[0].splitlines()[2:]}
    assert "0.500 [0.352, 0.648] n=40" in lines["demo:fast"]
    assert "1.000 [0.912, 1.000] n=40" in lines["demo:smart"] and "1.000 [0.912, 1.000]" in lines["px:d:smart"]
    (comparison,) = data_of(code_cell(notebook, "res.compare("), "text/plain")
    assert "better on 20" in comparison and "exact McNemar p = 1.91e-06" in comparison


def test_plots_rows_and_where_columns_come_from(executed):
    notebook, _ = executed
    for source in ("res.plot()", 'res.plot("cost")', 'res.plot("latency")'):
        assert data_of(code_cell(notebook, source), "image/png"), source
    (frame,) = data_of(code_cell(notebook, "df = res.to_pandas()"), "text/html")
    header = frame[frame.index("<thead>"):frame.index("</thead>")]
    assert header.index("model") < header.index("sample_id") < header.index("score_exact") < header.index("cost")
    assert "confirmed_model" not in header and "input_tokens" not in header
    columns = printed(code_cell(notebook, "print(list(res.to_pandas(full=True)"))
    assert "'confirmed_model'" in columns and "'explanation_exact'" in columns
    sources = printed(code_cell(notebook, "from acp_notebook.sweep import COLUMN_SOURCES"))
    assert "total_tokens     usage.totalTokens of the prompt response; if absent, usage_update.used" in sources


def test_run_directory_resume_scorers_budget_and_failures(executed):
    notebook, workdir = executed
    listing = printed(code_cell(notebook, 'print(sorted(os.listdir("runs/arithmetic"))'))
    assert "['manifest.json', 'rows.jsonl', 'trajectories'] 120 trajectories" in listing
    # a trial's trajectory is a recording of its session: the agent, then initialize, session/new...
    assert "acp-notebook-demo ['initialize', '(answer)', 'session/new', '(answer)'" in listing
    assert "120 trials resumed, 0 run" in printed(code_cell(notebook, "again = acpnb.sweep("))
    graded = printed(code_cell(notebook, "import re")).splitlines()
    assert len(graded) == 8 and graded[2].startswith("q02 * 1.0 0.0 | grader says ['36'], reply says ['37']")
    assert "the budget of 0.002 is spent" in printed(code_cell(notebook, "capped = acpnb.sweep("))
    smart, fast, turbo = printed(code_cell(notebook, "checked = acpnb.sweep(")).splitlines()
    assert smart.startswith("demo:smart  ok") and fast.startswith("demo:fast   error")
    assert "'turbo' is not a choice" in turbo


def test_proxy_ray_cli_and_async(executed):
    notebook, _ = executed
    cell = code_cell(notebook, "proxy = acpnb.start_proxy(")
    assert "the proxy offers: a:fast, a:smart, b:fast, b:smart" in printed(cell)
    (table,) = data_of(cell, "text/plain")
    assert {line.split()[0]: line.split()[1:3] for line in table.split("\n\n")[0].splitlines()[2:]} == {
        "a:fast": ["2", "2"], "b:smart": ["2", "2"]}
    on_ray = printed(code_cell(notebook, "from acp_notebook.sweep.ray_executor import ray_installed"))
    workers = re.search(r"workers: \[(.*?)\]", on_ray)
    assert workers and len(workers[1].split(", ")) == 2, on_ray  # one per CPU of the cluster's worker node
    assert on_ray.rstrip().endswith("same rows as the local executor: True")
    cli = printed(code_cell(notebook, "!{sys.executable}"))
    assert "80 trials: 80 ok, 0 failed; results in runs/cli" in cli and "exact McNemar" in cli
    (quick,) = data_of(code_cell(notebook, "from acp_notebook.sweep import asweep"), "text/html")
    assert "demo:smart" in quick
