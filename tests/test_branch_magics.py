"""Branches through the magics on a real IPython shell (no kernel): a %%acp cell run again answers from the
conversation before its turn on a new branch, %acp branches and %acp checkout, the rerun setting, and the
grammar of the new commands and cell options. Cells are named with --cell here (a shell without a kernel gets no
cell id); tests/test_branch_kernel.py runs the same with the cell ids a frontend sends."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

import acp_notebook as acpnb
from acp_notebook.magics.grammar import Branches, CellPrompt, Checkout, help_text, parse_cell_line, parse_line
from acp_notebook.magics.records import SessionRecord
from tests.shells import run_captured as run
from tests.shells import shell  # noqa: F401 - fixture


def reply(ip):
    return acpnb.current().turns[-1].text


def test_grammar_of_branches_checkout_cell_and_models():
    assert parse_line("branches") == Branches() and parse_line("checkout b2 --agent a") == Checkout("b2", "a")
    assert parse_cell_line("--cell intro") == CellPrompt(cell="intro")
    assert parse_cell_line("--models demo:fast,demo:smart").models == ("demo:fast", "demo:smart")
    with pytest.raises(UsageError, match="named more than once"):
        parse_cell_line("--models a:x,a:x")
    with pytest.raises(UsageError, match="not with --new"):
        parse_cell_line("--models a:x --new")
    text = help_text()
    assert "%acp branches" in text and "%acp checkout b2" in text and "--models" in text and "rerun" in text


def test_running_a_cell_again_branches_and_checkout_goes_back(shell):
    run(shell, "%acp start demo")
    main = acpnb.current()
    run(shell, "%%acp --cell one\napples")
    run(shell, "%%acp --cell two\npears")
    run(shell, "%%acp --cell three\nwhat did I say before?")
    assert reply(shell).endswith('"apples", "pears".')
    edited = run(shell, "%%acp --cell two\nplums")  # cell two edited and run again
    branch = acpnb.current()
    assert branch is not main and branch.branch.name == "b2" and branch.branch.how == "forked"
    assert "branch b2 from main after 1 turn, forked" in edited.outputs[0].data["text/plain"]
    run(shell, "%%acp --cell three\nwhat did I say before?")
    assert reply(shell).endswith('"apples", "plums".')
    listed = run(shell, "%acp branches").outputs[0].data["text/plain"].splitlines()
    assert listed[0].split()[:3] == ["branch", "from", "cell"]
    assert listed[1].split()[:2] == ["main", "-"] and listed[2].split()[:4] == ["*", "b2", "main", "after"]
    assert "plums" in listed[2]
    said = run(shell, "%acp checkout main")
    assert acpnb.current() is main and "Now on branch main" in said.stdout
    run(shell, "%%acp --cell four\nwhat did I say before?")
    assert reply(shell).endswith('"pears", "what did I say before?".')
    # the record of each branch's session names its branch: %acp resume reopens the current one
    records = {r.session_id: r for r in shell.magics_manager.registry["AcpMagics"].runner.agents.records()}
    saved = records[branch.id].branch
    assert {k: saved[k] for k in ("name", "parent", "fork_point", "how")} == \
        {"name": "b2", "parent": "main", "fork_point": 1, "how": "forked"}
    # ...and what lists it again after a restart: its conversation, its parent's session, its first own turn
    assert saved["conversation"] == branch.branch.conversation.id and saved["parent_session"] == main.id
    assert saved["prompt"] == "plums" and saved["turns"] == 3
    assert SessionRecord.from_json(records[branch.id].to_json()).branch["name"] == "b2"
    assert max(records.values(), key=lambda r: r.at).session_id == main.id
    # the checkpoints are sessions of the agent, left out of %acp sessions
    checkpoints = [s.id for s in main.agent.sessions if s.checkpoint_of is not None]
    assert len(checkpoints) == 6  # one before each of the six prompts
    shown = str([output.data for output in run(shell, "%acp sessions").outputs])
    assert main.id in shown and branch.id in shown and not any(c in shown for c in checkpoints)
    with pytest.raises(UsageError, match="no branch 'b9'.*branches: main, b2"):
        run(shell, "%acp checkout b9")


def test_append_keeps_the_old_behaviour_and_takes_no_checkpoints(shell):
    run(shell, "%config AcpMagics.rerun = 'append'")
    run(shell, "%acp start demo")
    session = acpnb.current()
    run(shell, "%%acp --cell one\napples")
    run(shell, "%%acp --cell one\npears")
    assert acpnb.current() is session and session.turns[-1].checkpoint is None
    run(shell, "%%acp --cell two\nwhat did I say before?")
    assert reply(shell).endswith('"apples", "pears".')


def _outputs_of(captured, view):
    """The outputs ``view`` published while ``captured`` ran: its display, then its updates."""
    return [o for o in captured.outputs if (o.transient or {}).get("display_id") == view.live.display_id]


def test_a_rerun_cells_header_shows_its_branch_and_the_cell_below_says_it_is_on_another(shell):
    run(shell, "%acp start demo")
    magics = shell.magics_manager.registry["AcpMagics"]
    run(shell, "%%acp --cell one\napples")
    first = run(shell, "%%acp --cell two\npears")
    assert len([o for o in first.outputs if not o.update]) == 1  # one branch: no branch line
    assert "⎇" not in first.outputs[-1].data["text/plain"] and "acpnb-branch" not in first.outputs[-1].data["text/html"]
    run(shell, "%%acp --cell three\nwhat did I say before?")
    below = magics.last_view  # cell three, on main
    edited = run(shell, "%%acp --cell two\nplums")  # cell two edited and run again: branch b2
    rerun = magics.last_view
    # One output for the cell: the turn itself, whose header carries the branch line (no separate label).
    shown = [o for o in edited.outputs if not o.update]
    assert len(shown) == 1 and shown[0].transient == {"display_id": rerun.live.display_id}
    final = _outputs_of(edited, rerun)[-1]
    assert final.data["text/plain"].splitlines()[1] == "⎇ branch b2 from main after 1 turn, forked"
    assert "class='acpnb-branch' data-branch='b2' data-current='true'" in final.data["text/html"]
    assert "*⎇ branch b2 from main after 1 turn, forked*" in final.data["text/markdown"]
    assert final.metadata["acp_notebook"]["branch"] == {
        "name": "b2", "current": "b2", "on_current": True, "how": "forked", "parent": "main", "fork_point": 1,
        "cell": "two", "session_id": acpnb.current().id}
    # The cell below, still main's reply, was published again during the re-run: it says it is on another branch.
    updated = _outputs_of(edited, below)
    assert updated and updated[-1].update
    assert "Not the current branch (b2)" in updated[-1].data["text/plain"]
    assert "data-current='false'" in updated[-1].data["text/html"]
    assert updated[-1].metadata["acp_notebook"]["branch"]["on_current"] is False
    # Checking out main again: what the re-run cell publishes now says it is not on the current branch.
    said = run(shell, "%acp checkout main")
    assert "Not the current branch (main)" in _outputs_of(said, rerun)[-1].data["text/plain"]  # sent before it ends
    assert "Not the current branch" not in _outputs_of(said, below)[-1].data["text/plain"]
    data, metadata = rerun._repr_mimebundle_()
    assert "Not the current branch (main)" in data["text/plain"]
    assert metadata["acp_notebook"]["branch"]["on_current"] is False


def test_the_session_panel_header_names_the_branch_once_there_are_two(shell):
    from acp_notebook.widgets.panel import SessionPanel

    run(shell, "%acp start demo")
    run(shell, "%%acp --cell one\napples")
    main = acpnb.current()
    alone = SessionPanel(main)
    assert "acpnb-branch" not in alone.header.value  # one branch: nothing to say
    alone.close()
    run(shell, "%%acp --cell one\npears")  # run again: branch b2, from before its only turn
    panel = SessionPanel(acpnb.current())
    assert "⎇ branch b2 from main after 0 turns (forked)" in panel.header.value
    panel.close()
