"""The agent in a real kernel (nbclient): ``%acp start demo``, a DataFrame ``df``, and ``%%acp`` prompts that
reach the kernel through the MCP server ``kernel``; what the cells show is saved with the notebook.

- "what is in df?" answers with df's real columns, obtained over MCP (the demo agent is a subprocess that
  runs the bridge, which reaches this kernel's channel);
- under ``allow``, "run x = 41 + 1" defines x and the next cell uses it; under ``read-only`` it is refused
  and the cell says so; under ``ask`` with ``AcpMagics.permission = 'allow'`` (an unattended run) it runs
  and the cell says it was allowed automatically;
- the saved notebook's static outputs show the run_code block (the code and what came out);
- a CellAgent served in the kernel calls the tools over MCP from its hook.
"""

from __future__ import annotations

from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("pandas")

from tests.test_saved_notebook import execute  # noqa: E402

pytestmark = pytest.mark.kernel

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
CELLS = [
    "%load_ext acp_notebook\nimport pandas as pd\n"
    "df = pd.DataFrame({'height_cm': [170, 182, 165], 'city': ['Oslo', 'Lima', 'Pune']})",
    "%acp start demo --kernel-tools allow",
    "%%acp\nwhat is in df?",
    "%%acp\nrun x = 41 + 1\nprint('x is', x)",
    "print(x + 1)",
    "%acp start demo --name careful --kernel-tools read-only",
    "%%acp careful\nrun y = 1",
    "print('y' in globals())",
    "%config AcpMagics.permission = 'allow'\n%acp start demo --name asker --kernel-tools ask",
    "%%acp asker\ncompute z = 6 * 7",
    "print(z)",
    "from acp_notebook.cellagent import CellAgent\n\nclass Peek(CellAgent):\n    def prompt(self, text):\n"
    "        return self.inspect_variable(text.strip())\n\npeek = Peek()",
    "%acp start --object peek --kernel-tools read-only",
    "%%acp peek\ndf",
    "%acp stop --all",
]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Any:
    path = tmp_path_factory.mktemp("kernel-tools") / "kernel.ipynb"
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    execute(notebook, path)  # a kernel that knows the notebook's path, as Jupyter Server tells it; then saved
    return nbformat.read(path, as_version=4)


def outputs(notebook: Any, source: str) -> list[Any]:
    (cell,) = [c for c in notebook.cells if c.source == source]
    assert not [o for o in cell.outputs if o.output_type == "error"], cell.outputs
    return cell.outputs


def static(notebook: Any, source: str, mime: str = "text/plain") -> str:
    """The saved output of a %%acp cell in one format: static, with no widget left in it."""
    shown = [o for o in outputs(notebook, source) if o.output_type == "display_data"]
    assert shown and not [o for o in shown if WIDGET_MIME in o.data]
    return "\n".join(o.data.get(mime, "") for o in shown)


def stdout(notebook: Any, source: str) -> str:
    return "".join(o.text for o in outputs(notebook, source) if o.output_type == "stream")


def test_a_prompt_about_df_answers_with_its_real_columns_over_mcp(saved):
    text = static(saved, "%%acp\nwhat is in df?")
    assert "height_cm" in text and "city" in text and "Oslo" in text
    assert "kernel: inspect_variable" in text  # the agent's own tool call, as ACP reported it
    assert "inspect_variable(name='df')" in text  # and what the kernel saw


def test_under_allow_run_code_defines_a_variable_the_next_cell_uses(saved):
    source = "%%acp\nrun x = 41 + 1\nprint('x is', x)"
    assert stdout(saved, "print(x + 1)").strip() == "43"
    plain, html = static(saved, source), static(saved, source, "text/html")
    # The saved cell shows the run_code block: the code, highlighted, and what it printed.
    assert "Ran code in your kernel [kernel, done]" in plain and "x is 42" in plain
    assert "acpnb-kernel-call" in html and "acpnb-kernel-code" in html and "x is 42" in html
    assert "```python\nx = 41 + 1\nprint('x is', x)\n```" in static(saved, source, "text/markdown")


def test_under_read_only_run_code_is_refused_and_the_cell_says_so(saved):
    assert stdout(saved, "print('y' in globals())").strip() == "False"
    plain = static(saved, "%%acp careful\nrun y = 1")
    assert "The code did not run" in plain and "read-only" in plain
    assert "Run code in your kernel [kernel, refused]" in plain


def test_under_ask_an_unattended_run_follows_the_permission_setting(saved):
    assert stdout(saved, "print(z)").strip() == "42"
    plain = static(saved, "%%acp asker\ncompute z = 6 * 7")
    assert "permission: allowed automatically (AcpMagics.permission = 'allow')" in plain



def test_a_cell_agent_in_the_kernel_reads_a_variable_over_mcp(saved):
    plain = static(saved, "%%acp peek\ndf")
    assert "height_cm" in plain and "Pune" in plain
    assert "inspect_variable(name='df', rows=10)" in plain
