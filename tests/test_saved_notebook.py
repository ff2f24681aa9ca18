"""What a saved notebook keeps, in real kernels (nbclient): final static outputs, and sessions that
come back after a kernel restart with ``%acp resume``.

A notebook is run and changed (model, thought level, a new title, stop) and saved; every ACP
output in the file is then static HTML/Markdown/text that tells the final truth, which is
what nbconvert's exports show too. A second kernel, told the notebook's path the way Jupyter
Server tells it (``JPY_SESSION_NAME``), resumes the session from the records in the saved
outputs and the demo agent answers from the conversation's history.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from tests.kernels import notebook_client

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.kernel
nbconvert = pytest.importorskip("nbconvert")

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
FIRST_PROMPT = "new topic: Owls and their nests"
RUN = [
    "%load_ext acp_notebook",
    "%acp start demo",
    "%acp set model=smart",
    "%acp set thought_level=high",
    f"%%acp\n{FIRST_PROMPT}",
    "%acp stop",
]
RESUME = [
    "%load_ext acp_notebook",
    "%acp resume",
    "%%acp\nwhat did I say first?",
]


def execute(notebook: Any, path: Path, cells: range | None = None) -> Any:
    """Run the notebook's cells (or only ``cells``) in a new kernel that knows the notebook's path."""
    client = notebook_client(notebook, path.parent, timeout=120)
    env = {**os.environ, "JPY_SESSION_NAME": str(path)}
    if cells is None:
        client.execute(env=env)
    else:
        with client.setup_kernel(env=env):
            for index in cells:
                client.execute_cell(notebook.cells[index], index)
    nbformat.write(notebook, path)
    return notebook


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("saved") / "owls.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in RUN]
    execute(notebook, path)
    return path


def outputs_of(notebook: Any, source: str) -> list[Any]:
    (cell,) = [c for c in notebook.cells if c.source == source]
    return cell.outputs


def views_of(notebook: Any, source: str) -> list[Any]:
    """The cell's outputs that show a session (a slow start also leaves its progress line)."""
    return [o for o in outputs_of(notebook, source) if "acp_notebook" in o.get("metadata", {})]


def test_every_output_of_a_stopped_session_is_static_and_final(saved):
    notebook = nbformat.read(saved, as_version=4)
    for cell in notebook.cells:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.source
        assert not [o for o in cell.outputs if WIDGET_MIME in o.get("data", {})], cell.source
    (panel,) = views_of(notebook, "%acp start demo")
    markdown = panel.data["text/markdown"]
    # The panel shown by the first cell ends with the last title, model, thought level and status.
    assert markdown.startswith("**Owls and their nests** · acp-notebook-demo") and "model: Smart · closed" in markdown
    assert "Thought level: High" in markdown and "closed with %acp stop" in markdown
    assert 'class="acpnb-panel acpnb-static"' in panel.data["text/html"]
    assert "acpnb-status-closed" in panel.data["text/html"] and ">High<" in panel.data["text/html"]
    (turn,) = outputs_of(notebook, RUN[4])
    assert turn.data["text/markdown"].startswith("**Owls and their nests** · model: Smart · done")
    assert "[smart] I thought it over at the high level." in turn.data["text/html"]
    (stopped,) = outputs_of(notebook, "%acp stop")
    assert stopped.text.count("\n") == 1 and stopped.text.startswith("Stopped agent 'demo' (acp-notebook-demo")
    # (nbclient still saves the state of every widget that ever existed, closed or not; no output
    # refers to them, so nothing renders them.)


def test_the_outputs_remember_the_session(saved):
    notebook = nbformat.read(saved, as_version=4)
    records = [o.metadata["acp_notebook"]["session"] for c in notebook.cells for o in c.outputs
               if "acp_notebook" in o.get("metadata", {})]
    assert len(records) == 2  # the panel and the turn
    panel_record = records[0]
    assert panel_record["launch"] == {"spec": "demo"} and panel_record["cwd"] == str(saved.parent)
    assert panel_record["title"] == "Owls and their nests" and panel_record["closed"] is True
    assert {r["session_id"] for r in records} == {panel_record["session_id"]}


@pytest.mark.parametrize("exporter", ["html", "markdown"])
def test_nbconvert_exports_show_the_final_truth(saved, exporter):
    body, _resources = nbconvert.get_exporter(exporter)().from_filename(str(saved))
    for text in ("Owls and their nests", "model: Smart", "High", "closed",
                 "I thought it over at the high level", "Stopped agent 'demo'"):
        assert text in body, text
    assert "Error displaying widget" not in body and "model not found" not in body


def test_a_new_kernel_resumes_the_conversation(saved):
    notebook = nbformat.read(saved, as_version=4)
    first_new = len(notebook.cells)
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in RESUME]
    execute(notebook, saved, range(first_new, len(notebook.cells)))

    (note, panel) = outputs_of(notebook, "%acp resume")
    assert note.text.startswith("Resumed session demo-") and "(session/resume)" in note.text
    # The agent's config came back with the session; the title from the notebook's record.
    assert panel.data["text/markdown"].startswith("**Owls and their nests** · acp-notebook-demo")
    assert "model: Smart" in panel.data["text/markdown"] and "Thought level: High" in panel.data["text/markdown"]
    (turn,) = outputs_of(notebook, RESUME[2])
    assert f'You first said: \\"{FIRST_PROMPT}\\"' in json.dumps(turn.data["text/markdown"])
    record = turn.metadata["acp_notebook"]["session"]
    assert record["session_id"] == panel.metadata["acp_notebook"]["session"]["session_id"]


def test_resume_with_nothing_recorded_says_what_to_do(tmp_path):
    path = tmp_path / "empty.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell("%load_ext acp_notebook\n%acp resume")]
    nbformat.write(notebook, path)
    with pytest.raises(nbclient.exceptions.CellExecutionError) as raised:
        execute(notebook, path)
    assert "no session to resume: none is recorded in" in str(raised.value)
    assert "%acp start demo" in str(raised.value)


def test_a_new_kernel_resumes_a_session_through_the_proxy(tmp_path):
    path = tmp_path / "herons.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in (
        "%load_ext acp_notebook", "%acp proxy a=demo b=demo", "%acp set model=b:smart",
        "%%acp\nnew topic: Herons at dawn")]
    execute(notebook, path)
    (panel,) = views_of(notebook, "%acp proxy a=demo b=demo")
    assert panel.metadata["acp_notebook"]["session"]["launch"] == {"proxy": {"a": "demo", "b": "demo"}}

    first_new = len(notebook.cells)
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in RESUME]
    execute(notebook, path, range(first_new, len(notebook.cells)))
    (note, panel) = outputs_of(notebook, "%acp resume")
    assert note.text.startswith("Resumed session ") and '"Herons at dawn" of proxy' in note.text
    # Still with agent b, on b's model (a's models stay offered: a pick of one hands the conversation over).
    assert "model: b / Smart" in panel.data["text/plain"] and "tied to agent" not in panel.data["text/plain"]
    (turn,) = outputs_of(notebook, RESUME[2])
    assert 'You first said: "new topic: Herons at dawn"' in turn.data["text/plain"]
