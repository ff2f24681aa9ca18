"""notebooks/agentic-evals.ipynb runs top to bottom, offline, in a real kernel, and shows what it says it shows:
three Harbor-layout tasks on two demo models, one passing all and one failing on purpose, diffs kept, resume,
checks of its own, and logs that atif and inspect_ai read back."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

import acp_notebook as acpnb
from test_sweep_notebook import code_cell
from tests.kernels import notebook_client

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
if importlib.util.find_spec("inspect_ai") is None:  # looked up, not imported: the kernel imports it (a second's work)
    pytest.skip("the notebook reads its logs back with inspect_ai: pip install 'acp-notebook[eval]'",
                allow_module_level=True)

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
pytestmark = [pytest.mark.kernel, pytest.mark.slow]


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("agentic-notebook")
    shutil.copy(NOTEBOOKS / "agentic-evals.ipynb", workdir / "agentic-evals.ipynb")
    shutil.copytree(NOTEBOOKS / "tasks", workdir / "tasks")  # beside the notebook, as in the repository
    notebook = nbformat.read(workdir / "agentic-evals.ipynb", as_version=4)
    client = notebook_client(notebook, workdir, timeout=300)
    client.execute()  # raises CellExecutionError on the first failing cell
    return notebook, workdir


def printed(code_cell, name: str = "stdout") -> str:
    return "".join(o.get("text", "") for o in code_cell.outputs if o["output_type"] == "stream" and o["name"] == name)


def test_no_cell_failed(executed):
    notebook, _ = executed
    for code_cell in (c for c in notebook.cells if c.cell_type == "code"):
        assert not [o for o in code_cell.outputs if o["output_type"] == "error"], code_cell.source


def test_six_graded_rows_with_diffs_one_model_passing_and_one_failing_on_purpose(executed):
    notebook, workdir = executed
    run = workdir / "runs" / "agentic"
    rows = [json.loads(line) for line in (run / "rows.jsonl").read_text().splitlines()]
    assert {(r["model"], r["sample_id"]): r["score_tests"] for r in rows} == {
        ("demo:fast", "add-notes"): 1.0, ("demo:smart", "add-notes"): 1.0, ("demo:fast", "enable-debug"): 0.0,
        ("demo:smart", "enable-debug"): 1.0, ("demo:fast", "fix-add"): 0.0, ("demo:smart", "fix-add"): 1.0}
    assert all((run / r["diff"]).read_text() and (run / r["trajectory"]).is_file() for r in rows)
    assert "no container runtime" in printed(code_cell(notebook, "data = tasks(TASKS)"), "stderr")
    careless = printed(code_cell(notebook, "fast_fix = "))
    assert "tests: 0.0" in careless and "+return a + b" in careless and "-def add(a, b):" in careless
    right = printed(code_cell(notebook, "smart_fix = "))
    assert "tests: 1.0" in right and "-    return a - b\n+    return a + b" in right
    assert printed(code_cell(notebook, "again = ")).strip() == "6 trials resumed, 0 run"


def test_own_checks_and_the_exported_logs(executed):
    notebook, workdir = executed
    table = code_cell(notebook, 'project = Path("runs/project")').outputs[0]["data"]["text/plain"]
    assert table.split("\n")[1].split() == ["0", "demo:fast", "0.0", "1.0", "1.0"]
    assert table.split("\n")[2].split() == ["1", "demo:smart", "1.0", "1.0", "1.0"]
    exported = printed(code_cell(notebook, "atif_files = "))
    assert "agentic-demo_smart.eval demo:smart mean 1.0" in exported and "6 ATIF trajectories" in exported
    assert len(list((workdir / "runs" / "atif").glob("*.json"))) == 6


def test_the_notebooks_sweeps_left_nothing_in_the_demo_agents_session_list(executed):
    _, workdir = executed
    ids = {json.loads(line)["session_id"] for run in ("agentic", "checks")
           for line in (workdir / "runs" / run / "rows.jsonl").read_text().splitlines()}
    with acpnb.start("demo") as agent:  # the same state directory the notebook's kernel used
        assert not ids & {s["sessionId"] for s in agent.list_sessions()}
