"""Branches in the client (acp_notebook/branching.py): a checkpoint before each prompt (a session/fork without kernel
tools where the agent forks, else the exchanges above), a branch opened from a turn's checkpoint answers from the
conversation as it stood before that turn, and an agent that cannot fork is handed the conversation instead, marked
as such in the prompt's _meta. The demo agent in memory (fork) and in its legacy form (no fork)."""

from __future__ import annotations

import acp_notebook as acpnb
from acp_notebook.branching import HANDOVER_META, Conversation, Exchange, handover_text
from acp_notebook.demo import DemoAgent


def sent(agent, method):
    return [e["msg"]["params"] for e in list(agent.log) if e["dir"] == "send" and e["msg"].get("method") == method]


def run(conversation, prompt, key=None):
    turn = conversation.current.session.start_turn(prompt)
    conversation.record(turn, key)
    return turn.future.result(30)


def test_a_branch_answers_from_the_checkpoint_before_its_turn(tmp_path):
    with acpnb.start(DemoAgent(), cwd=tmp_path, kernel_tools="read-only") as agent:
        session = agent.new_session()
        conversation = Conversation(session)
        for prompt in ("apples", "pears"):
            run(conversation, prompt, prompt)
        last = run(conversation, "what did I say before?", "ask")
        assert last.text.endswith('"apples", "pears".')
        # every prompt had a checkpoint: a fork taken before it went, with no kernel tools
        forks = sent(agent, "session/fork")
        assert len(forks) == 3 and all(f["mcpServers"] == [] for f in forks)
        assert conversation.position("pears") == 1 and conversation.position("nowhere") is None
        branch = conversation.branch_at(1)  # "pears" edited
        assert conversation.current is branch and branch.session is not session and branch.how == "forked"
        run(conversation, "plums", "pears")
        assert run(conversation, "what did I say before?", "ask").text.endswith('"apples", "plums".')
        # the live branch has kernel tools of its own; the old branch's turns are marked as not current
        assert branch.session.kernel_tools is not None
        assert conversation.state_of(last).on_current is False and conversation.state_of(last).name == "main"
        assert [(b.name, b.parent, b.fork_point, len(b.turns)) for b in conversation.branches] == \
            [("main", None, 0, 3), ("b2", "main", 1, 3)]
        # the same point again: the checkpoint was not used up
        conversation.branch_at(1)
        assert run(conversation, "what did I say before?").text.endswith('"apples".')
        conversation.checkout("main")
        assert conversation.state_of(last).on_current and \
            run(conversation, "what did I say before?").text.endswith('"pears", "what did I say before?".')


def test_without_fork_the_conversation_above_is_handed_over_and_marked(tmp_path):
    with acpnb.start(DemoAgent(legacy=True), cwd=tmp_path) as agent:
        session = agent.new_session()
        session.set("mode", "code")
        conversation = Conversation(session)
        for prompt in ("apples", "pears", "figs"):
            turn = run(conversation, prompt, prompt)
        assert "cannot fork" in turn.checkpoint.note and turn.checkpoint.fork is None
        branch = conversation.branch_at(2)
        assert branch.how == "handed over, not forked" and branch.session.config["mode"].value == "code"
        first = run(conversation, "plums")
        assert first.handover.describe() == "handed over from DemoAgent after 2 turns, not forked"
        prompt = sent(agent, "session/prompt")[-1]
        assert prompt["_meta"][HANDOVER_META] == {"from": "DemoAgent", "turns": 2, "reason": "handed over, not forked",
                                                  "capped": False}
        assert "[1] User: apples" in prompt["prompt"][0]["text"] and prompt["prompt"][1]["text"] == "plums"
        assert conversation.state_of(first).handover == first.handover.describe()
        # the demo agent takes the prompts handed over as its history
        assert run(conversation, "what did I say before?").text.endswith('"apples", "pears", "plums".')
        # a branch of the handed-over branch hands over what it was handed, and what came after
        run(conversation, "dates")
        again = conversation.branch_at(3)
        assert again.how == "handed over, not forked"
        run(conversation, "kiwis")
        text = sent(agent, "session/prompt")[-1]["prompt"][0]["text"]
        assert "[2] User: pears" in text and "[3] User: plums" in text and "[4] User" not in text
        assert "figs" not in text and "dates" not in text


def test_a_long_conversation_is_cut_from_its_oldest_turns_and_says_so():
    exchanges = [Exchange(f"prompt {i}", "x" * 1_500, ("read_text_file (completed): notes",)) for i in range(40)]
    text, capped = handover_text(exchanges, "a:fast", limit=10_000)
    assert capped and "the 34 earliest turns are left out" in text and "[40] User: prompt 39" in text
    assert "[34] User" not in text and "[35] User: prompt 34" in text and "Tool call: read_text_file (completed)" in text
    hidden, _ = handover_text([Exchange("a\u202eb", "ok")], "a:fast")
    assert "a\\u202eb" in hidden
