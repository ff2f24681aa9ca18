"""Branches in a real kernel, driven as JupyterLab drives it: each execute request carries its cell's id
(``metadata.cellId``; nbclient sends none, so the client here adds it). Edit an earlier cell and run it again: it
answers from the conversation before its turn, the cell below is marked as on the other branch until it is run
again; checkout goes back; a three-model branch sweep from the same point."""

from __future__ import annotations

import pytest
from tests.kernels import notebook_client

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = [pytest.mark.kernel, pytest.mark.slow]


class Frontend:
    """An nbclient kernel whose execute requests say which cell they run, as JupyterLab's do."""

    def __init__(self, client):
        self.client = client
        self.cell_id = None
        kc = client.kc

        def execute(code, silent=False, store_history=True, user_expressions=None, allow_stdin=None,
                    stop_on_error=True):
            content = {"code": code, "silent": silent, "store_history": store_history,
                       "user_expressions": user_expressions or {}, "allow_stdin": False, "stop_on_error": stop_on_error}
            msg = kc.session.msg("execute_request", content, metadata={"cellId": self.cell_id})
            kc.shell_channel.send(msg)
            return msg["header"]["msg_id"]

        kc.execute = execute

    def run(self, notebook, index, source=None):
        cell = notebook.cells[index]
        if source is not None:
            cell.source = source
        self.cell_id = cell.id
        self.client.execute_cell(cell, index)
        return cell


def plain(cell):
    return "\n".join(o.get("text", "") if o["output_type"] == "stream" else o.get("data", {}).get("text/plain", "")
                     for o in cell.outputs)


def test_edit_and_rerun_an_earlier_cell_marks_the_cells_below_and_checkout(tmp_path):
    cells = ["%load_ext acp_notebook\n%config AcpMagics.permission = 'allow'\n%acp start demo\n"
             "%acp start demo --name second\n%acp use demo",
             "%%acp\napples", "%%acp\npears", "%%acp\nwhat did I say before?",
             "import acp_notebook as acpnb\nprint(acpnb.current().turns[-1].text)",
             "%acp branches", "%acp checkout main",
             "%%acp --models fast,smart,second:smart\nWhat is 6 x 7?"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    client = notebook_client(notebook, tmp_path, timeout=120)
    with client.setup_kernel():
        frontend = Frontend(client)
        for index in range(5):
            frontend.run(notebook, index)
        assert plain(notebook.cells[4]).strip().endswith('"apples", "pears".')
        rerun = frontend.run(notebook, 2, "%%acp\nplums")  # cell 2 edited and run again
        assert "branch b2 from main after 1 turn, forked" in plain(rerun)
        # the cell below still shows main's reply, and says it is not on the current branch
        assert "Not the current branch (b2)" in plain(notebook.cells[3])
        frontend.run(notebook, 3)
        assert "Not the current branch" not in plain(notebook.cells[3])
        assert plain(frontend.run(notebook, 4)).strip().endswith('"apples", "plums".')
        listed = plain(frontend.run(notebook, 5))
        assert "main" in listed and "b2" in listed and "plums" in listed
        assert "Now on branch main" in plain(frontend.run(notebook, 6))
        assert "Not the current branch (main)" in plain(notebook.cells[3])  # cell 3 now shows b2's reply
        assert plain(frontend.run(notebook, 4)).strip().endswith('"apples", "pears".')  # main's last turn
        sweep = plain(frontend.run(notebook, 7))
        assert sweep.index("== fast") < sweep.index("== smart") < sweep.index("== second:smart")
        assert "Answer: 43" in sweep and sweep.count("Answer: 42") == 2  # fast is off by one on x
