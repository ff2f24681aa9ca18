"""A saved notebook exported to Markdown reads as Markdown (issue 28, point 11).

An executed notebook (a real kernel, the demo agent) is exported with the documented command,
`jupyter nbconvert --to acp-markdown`, and with the stock `--to markdown` for contrast.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from tests.kernels import notebook_client

ROOT = Path(__file__).resolve().parents[1]
CELLS = ["%load_ext acp_notebook\n%config AcpMagics.permission = 'allow'", "%acp start demo",
         "%%acp\nTell me about tide pools", "%acp log --method initialize"]


def _export(notebook: Path, to: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", to, "--stdout", str(notebook)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.kernel
@pytest.mark.slow
def test_markdown_export_writes_our_outputs_as_markdown(tmp_path):
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in CELLS])
    notebook_client(notebook, tmp_path, timeout=120).execute()
    saved = tmp_path / "saved.ipynb"
    nbformat.write(notebook, saved)
    ours = [o for cell in notebook.cells[1:] for o in cell.outputs if "text/markdown" in o.get("data", {})]
    assert len(ours) >= 3 and all("text/html" in o["data"] for o in ours)  # panel, turn, inspector: both forms

    stock = _export(saved, "markdown")
    assert "style=" in stock  # the stock exporter prefers text/html

    text = _export(saved, "acp-markdown")
    assert "style=" not in text and "<div" not in text
    for output in ours:
        assert output["data"]["text/markdown"].strip() in text
    assert "Tell me about tide pools" in text and "initialize" in text
