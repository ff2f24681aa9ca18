"""The branch tree after a kernel restart: a notebook whose earlier cell was edited and run again (two
branches) is saved; a new kernel, told the notebook's path as Jupyter Server tells it, runs `%acp resume`
(the current branch's session), and `%acp branches` still lists both branches from what the saved
notebook recorded; `%acp checkout main` reopens main's session, whose answers show its own history."""

from __future__ import annotations

import os

import pytest

from acp_notebook.widgets.branches import BRANCH_HEADER
from tests.test_branch_kernel import Frontend, plain
from tests.kernels import notebook_client

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = [pytest.mark.kernel, pytest.mark.slow]


def column(listing, line, name):
    """One field of a row of the %acp branches text table, cut where its header's column begins."""
    header = listing.splitlines()[0]
    names = [n for n in BRANCH_HEADER if n]
    at = [header.index(n) for n in names]
    index = names.index(name)
    end = at[index + 1] if index + 1 < len(at) else None
    return line[at[index]:end].strip()


def run_cells(notebook, path, cells, edits=None):
    """Run ``cells`` (indexes; ``edits``: index -> new source, run after the first pass) in a new kernel that knows
    the notebook's path, then save it."""
    client = notebook_client(notebook, path.parent, timeout=120)
    with client.setup_kernel(env={**os.environ, "JPY_SESSION_NAME": str(path)}):
        frontend = Frontend(client)
        for index in cells:
            frontend.run(notebook, index)
        for index, source in (edits or {}).items():
            frontend.run(notebook, index, source)
    nbformat.write(notebook, path)


def test_resume_lists_the_recorded_branches_and_checkout_reopens_one(tmp_path):
    path = tmp_path / "fruit.ipynb"
    first = ["%load_ext acp_notebook\n%config AcpMagics.permission = 'allow'\n%acp start demo",
             "%%acp\napples", "%%acp\npears"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in first])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    run_cells(notebook, path, range(3), edits={2: "%%acp\nplums"})  # cell 2 edited and run again: branch b2
    assert "branch b2 from main after 1 turn, forked" in plain(notebook.cells[2])

    later = ["%load_ext acp_notebook\n%config AcpMagics.permission = 'allow'\n%acp resume", "%acp branches",
             "%%acp --cell q1\nwhat did I say before?", "%acp checkout main", "%%acp --cell q2\nwhat did I say before?",
             "%acp branches"]
    start = len(notebook.cells)
    notebook.cells += [nbformat.v4.new_code_cell(source) for source in later]
    run_cells(notebook, path, range(start, len(notebook.cells)))
    resumed, listed, on_b2, checkout, on_main, relisted = (plain(notebook.cells[start + i]) for i in range(6))
    assert "It carries branch b2 of its conversation" in resumed
    rows = {line[1:].split()[0]: line for line in listed.splitlines()[1:] if line.strip()}
    assert set(rows) == {"b2", "main"} and rows["b2"].startswith("*")  # b2 current: the resumed session's
    assert "main after 1" in rows["b2"] and "plums" in rows["b2"] and "forked" in rows["b2"]
    assert "saved, not reopened" in rows["main"]
    # apples and pears on main, apples and plums on b2 (main's count from its record, rewritten when b2 was made)
    assert column(listed, rows["main"], "turns") == "2" and column(listed, rows["b2"], "turns") == "2"
    assert '"apples", "plums"' in on_b2  # the resumed session is b2's
    assert "Now on branch main" in checkout
    assert '"apples", "pears"' in on_main and "plums" not in on_main  # main's session, reopened by its id
    relisted_rows = {line[1:].split()[0]: line for line in relisted.splitlines()[1:] if line.strip()}
    assert relisted_rows["main"].startswith("*") and not relisted_rows["b2"].startswith("*")
    assert column(relisted, relisted_rows["main"], "turns") == "3"  # 2 recorded, 1 since it was reopened
    assert column(relisted, relisted_rows["b2"], "turns") == "3"
    assert "saved, not reopened" not in relisted
