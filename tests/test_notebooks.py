"""notebooks/quickstart.ipynb and notebooks/teaching-the-protocol.ipynb run top to bottom in a real kernel.

nbclient saves the widget state the kernel sent, which is what a reader of the executed
notebook sees: the panel's dropdowns (with the thought level the smart model added), the
session title in the headers, the streamed replies.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def execute(name: str, workdir: Path) -> Any:
    shutil.copy(NOTEBOOKS / name, workdir / name)
    notebook = nbformat.read(workdir / name, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(workdir)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    nbformat.write(notebook, workdir / name)  # kept for a look when a test fails
    return notebook


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    return execute("quickstart.ipynb", tmp_path_factory.mktemp("quickstart"))


@pytest.fixture(scope="module")
def teaching(tmp_path_factory):
    return execute("teaching-the-protocol.ipynb", tmp_path_factory.mktemp("teaching"))


def widget_models(notebook: Any, model_name: str) -> list[dict[str, Any]]:
    state = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    return [m["state"] for m in state.values() if m["model_name"] == model_name]


def code_cell(notebook: Any, starts_with: str) -> Any:
    matches = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(starts_with)]
    assert len(matches) == 1, f"expected one code cell starting with {starts_with!r}"
    return matches[0]


def texts(cell: Any, mime: str = "text/html") -> str:
    parts = [o.get("text", "") for o in cell.outputs if o["output_type"] == "stream"]
    parts += [o["data"][mime] for o in cell.outputs if mime in o.get("data", {})]
    return "\n".join(parts)


def titles(notebook: Any) -> list[str]:
    return [re.search(r'class="acpnb-title"[^>]*>([^<]*)<', s["value"]).group(1)
            for s in widget_models(notebook, "HTMLModel") if 'class="acpnb-title"' in s["value"]]


def replies(notebook: Any) -> list[str]:
    return [o["data"]["text/markdown"] for s in widget_models(notebook, "OutputModel") for o in s["outputs"]]


@pytest.mark.parametrize("fixture", ["quickstart", "teaching"])
def test_no_cell_failed(fixture, request):
    notebook = request.getfixturevalue(fixture)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not [o for o in cell.outputs if o["output_type"] == "error"], cell.source


def test_quickstart_saves_the_panel_with_the_smart_model_and_its_thought_level(quickstart):
    dropdowns = widget_models(quickstart, "DropdownModel")
    models = [d for d in dropdowns if d["description"] == "Model"]
    assert models[0]["_options_labels"] == ["Everyday / Fast", "Deep thinking / Smart"]
    assert models[0]["index"] == 1  # `%acp set model=smart` reached the panel shown by `%acp start demo`
    (thought_level,) = [d for d in dropdowns if d["description"] == "Thought level"]
    assert thought_level["_options_labels"] == ["Low", "Medium", "High"] and thought_level["index"] == 1
    # Three panels: the first session, the session opened in a scratch directory, the pirate agent's.
    assert [d["description"] for d in dropdowns].count("Tone") == 3
    assert [c["description"] for c in widget_models(quickstart, "CheckboxModel")].count("Show thoughts") == 3


def test_quickstart_saves_the_title_headers_and_the_replies(quickstart):
    assert "Explain the agent client protocol…" in titles(quickstart)
    assert "What is a session" in titles(quickstart)
    answers = replies(quickstart)
    assert any(a.startswith('[smart] I thought it over at the medium level. You said: "Explain') for a in answers)
    assert "[fast] Read notes.txt: 2 lines." in answers
    assert any(a.startswith("[fast] Arr, ye said") for a in answers)
    tool_calls = [s["value"] for s in widget_models(quickstart, "HTMLModel") if "acpnb-tool-call" in s["value"]]
    assert any("allowed automatically" in html and ">completed<" in html for html in tool_calls)
    assert "model = Smart" in texts(code_cell(quickstart, "%acp set model=smart"))


def test_readers_without_the_widgets_still_see_the_title_and_the_reply(quickstart):
    """Untrusted notebooks and static renderers fall back to Markdown: the end of the turn refreshed it."""
    (output,) = code_cell(quickstart, "%%acp\nExplain").outputs
    markdown = output["data"]["text/markdown"]
    assert markdown.startswith("**Explain the agent client protocol…** · model: Smart · done")
    assert '[smart] I thought it over at the medium level. You said: "Explain' in markdown
    (panel,) = next(c for c in quickstart.cells if c.source == "%acp start demo").outputs
    assert panel["data"]["text/markdown"].startswith("**Demo agent** · acp-notebook-demo")


def test_quickstart_shows_the_inspector_filtered_to_set_config_option(quickstart):
    (frames,) = widget_models(quickstart, "SelectModel")
    labels = frames["_options_labels"]
    assert len(labels) == 2 and all("session/set_config_option" in label for label in labels)


def test_teaching_notebook_shows_each_step_of_the_protocol(teaching):
    steps = {
        "import tempfile": ["initialize", "protocolVersion", "clientCapabilities", "agentInfo"],
        "session = agent.new_session()": ["session/new", "configOptions", "_demo_style"],
        'session.set("model", "smart")': ["session/set_config_option", "thought_level", "model=&#x27;smart&#x27;"],
        'turn = session.prompt("What does a client do?")': ["session/prompt", "agent_thought_chunk",
                                                             "agent_message_chunk", "session_info_update",
                                                             "usage_update", "stopReason=end_turn"],
        '(workspace / "notes.txt")': ["session/request_permission", "fs/read_text_file", "allow_once"],
    }
    for source, expected in steps.items():
        shown = texts(code_cell(teaching, source))
        for fragment in expected:
            assert fragment in shown, (source, fragment)
    summary = texts(code_cell(teaching, 'print("reply:'))
    assert "stop reason: end_turn" in summary and "title:       What does a client do\n" in summary
    (frames,) = widget_models(teaching, "SelectModel")
    assert all("session/set_config_option" in label for label in frames["_options_labels"])
