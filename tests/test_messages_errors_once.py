"""A failed %%acp turn shows its error once, in the turn view, and the cell still fails (issue 28, point 9).

Run in a real kernel (nbclient) and read back as saved: the turn view's static form carries the
error with its hint; the cell's error output is one line pointing at it, so "Run all" stops there
without the message printed a second time.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tests.test_cellagent_magics import TUTOR_CELL
from tests.kernels import notebook_client

ANSI = re.compile(r"\x1b\[[0-9;]*m")
RECORDING = Path(__file__).resolve().parents[1] / "notebooks" / "recordings" / "claude.acp.jsonl"


def _text(output) -> str:
    data = output.get("data", {})
    return data.get("text/plain", "") + data.get("text/markdown", "")


@pytest.mark.kernel
@pytest.mark.slow
def test_a_failed_turn_shows_its_error_once(tmp_path):
    cells = ["%load_ext acp_notebook", f"%acp start --replay {RECORDING}",
             "%%acp\nsomething the recording never saw", TUTOR_CELL, "%acp start --object tutor --name tutor",
             "%%acp tutor\nfail"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    notebook_client(notebook, tmp_path, timeout=120, allow_errors=True).execute()
    for index, ename, said in ((2, "ReplayMismatch", "recording"), (5, "RpcError", "Tutor.prompt raised KeyError")):
        outputs = notebook.cells[index].outputs
        errors = [o for o in outputs if o.output_type == "error"]
        assert [e.ename for e in errors] == [ename]  # the cell failed
        assert [ANSI.sub("", line) for line in errors[0].traceback] == [f"{ename}: shown in the reply above"]
        views = [o for o in outputs if o.output_type != "error"]
        shown = [_text(o) for o in views if said in _text(o)]
        assert shown, [_text(o) for o in views]  # the turn view's saved form has the error...
        assert "Hint:" in shown[0] or ename == "RpcError"  # ...with its hint where it has one
        assert "acpnb." not in shown[0]  # in the syntax of the magics
