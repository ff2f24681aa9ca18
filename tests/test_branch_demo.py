"""The demo agent shows what it saw: "what did I say before?" quotes every earlier prompt of the session, in order,
so a fork (and a branch of a notebook conversation) shows plainly which conversation it carries."""

from __future__ import annotations

import acp_notebook as acpnb
from acp_notebook.demo import DemoAgent
from acp_notebook.demo.options import SessionSettings
from acp_notebook.demo.replies import before_reply


def test_before_lists_the_earlier_prompts_and_a_fork_keeps_its_own(tmp_path):
    with acpnb.start(DemoAgent(), cwd=tmp_path) as agent:
        session = agent.new_session()
        assert "Nothing yet" in session.prompt("what did I say before?").text
        session.prompt("apples")
        assert session.prompt("What did I ask before?").text == \
            '[fast] You have sent 2 prompts before this one: "what did I say before?", "apples".'
        fork = session.fork()
        session.prompt("pears")
        fork.prompt("plums")
        assert fork.prompt("what did I say before?").text.endswith('"apples", "What did I ask before?", "plums".')
        assert '"apples", "What did I ask before?", "pears".' in session.prompt("what did I send before?").text


def test_a_long_history_is_counted_past_twenty_and_the_tone_applies():
    history = [f"prompt {i}" for i in range(23)]
    text = before_reply(history, SessionSettings())
    assert text.startswith("[fast] You have sent 23 prompts before this one: \"prompt 0\"")
    assert text.endswith('"prompt 19" and 3 more.') and '"prompt 20"' not in text
    pirate = SessionSettings()
    pirate.tone = "pirate"
    assert "Arr, ye sent 1 prompt before this one: \"x\"." in before_reply(["x"], pirate)
