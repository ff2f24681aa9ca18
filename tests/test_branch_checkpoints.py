"""Checkpoint sessions (a session/fork taken before each prompt of a branched conversation) are let go: when a
branch's session closes, those of its turns that no other open branch holds are deleted on the agent (the demo
offers session/delete; its store keeps one file per session, so the files are counted); when %acp stop ends the
agent, every checkpoint its sessions took goes. The demo agent as a real subprocess over pipes."""

from __future__ import annotations

import acp_notebook as acpnb
from acp_notebook.branching import Conversation
from tests.shells import run_captured as run
from tests.shells import shell  # noqa: F401 - fixture


def turn_on(conversation, prompt, key=None):
    turn = conversation.current.session.start_turn(prompt)
    conversation.record(turn, key)
    return turn.future.result(30)


def stored(state_dir, session_ids):
    return {sid for sid in session_ids if (state_dir / f"{sid}.json").exists()}


def test_closing_a_branch_deletes_the_checkpoints_no_open_branch_holds(tmp_path, demo_state_dir):
    with acpnb.start("demo", cwd=tmp_path) as agent:
        main = agent.new_session()
        conversation = Conversation(main)
        first, second, third = (turn_on(conversation, prompt, prompt) for prompt in ("apples", "pears", "figs"))
        checkpoints = [turn.checkpoint.fork.id for turn in (first, second, third)]
        assert stored(demo_state_dir, checkpoints) == set(checkpoints)  # one fork per prompt, in the store

        branch = conversation.branch_at(2)  # figs edited: b2 shares apples and pears with main
        plums = turn_on(conversation, "plums", "figs")
        own = plums.checkpoint.fork.id
        assert stored(demo_state_dir, [own]) == {own}

        main.close()  # figs' checkpoint goes; apples' and pears' stay, b2 holds those turns
        assert stored(demo_state_dir, checkpoints) == set(checkpoints[:2])
        deleted = [e["msg"]["params"]["sessionId"] for e in list(agent.log)
                   if e["dir"] == "send" and e["msg"].get("method") == "session/delete"]
        assert deleted == [checkpoints[2]]
        # b2 can still branch from pears' checkpoint, a fork: the same point again
        again = conversation.branch_at(1)
        assert again.how == "forked"
        assert turn_on(conversation, "what did I say before?").text.endswith('"apples".')

        again.session.close()
        branch.session.close()  # the last open branch: every checkpoint left goes
        remaining = [t.checkpoint.fork.id for b in conversation.branches for t in b.turns if t.checkpoint.fork]
        assert remaining and stored(demo_state_dir, remaining) == set()
        assert stored(demo_state_dir, [main.id, branch.session.id]) == {main.id, branch.session.id}  # kept


def test_acp_stop_deletes_the_checkpoints_of_the_agents_sessions(shell, demo_state_dir):  # noqa: F811
    run(shell, "%acp start demo")
    for cell, prompt in (("one", "apples"), ("two", "pears")):
        run(shell, f"%%acp --cell {cell}\n{prompt}")
    run(shell, "%%acp --cell two\nplums")  # cell two run again: branch b2
    session = acpnb.current()
    forks = [t.checkpoint.fork.id for b in session.branch.conversation.branches for t in b.turns
             if t.checkpoint is not None and t.checkpoint.fork is not None]
    assert len(set(forks)) == 3 and stored(demo_state_dir, forks) == set(forks)
    run(shell, "%acp stop")
    assert stored(demo_state_dir, forks) == set()
    assert stored(demo_state_dir, [session.id]) == {session.id}  # the branch's own session is kept
