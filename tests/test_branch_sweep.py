"""Several models from the same point: acpnb.branch_sweep(session, prompt, models=[...]) forks the conversation once per
model of its agent (a handover for a model of another agent), sends the prompt to each, and returns a sweep result
(rows, to_pandas, scorers, compare) shown side by side; the %%acp --models cell does the same and makes each answer
a branch that %acp checkout continues. The demo agent in memory."""

from __future__ import annotations

import pytest

import acp_notebook as acpnb
from acp_notebook.branch_sweeps import branch_sweep
from acp_notebook.branching import HANDOVER_META
from acp_notebook.demo import DemoAgent
from acp_notebook.sweep import SweepResult
from tests.shells import run_captured as run
from tests.shells import shell  # noqa: F401 - fixture


def sent(agent, method):
    return [e["msg"]["params"] for e in list(agent.log) if e["dir"] == "send" and e["msg"].get("method") == method]


def test_three_models_from_the_same_point_as_a_sweep_result(tmp_path):
    with acpnb.start(DemoAgent(), cwd=tmp_path) as agent, acpnb.start(DemoAgent(), cwd=tmp_path, name="b") as other:
        session = agent.new_session()
        session.prompt("apples")
        result = branch_sweep(session, "What is 6 x 7?", models=["fast", "smart", "b:smart"], agents={"b": other},
                                      scorers=["includes"], target="42")
        assert isinstance(result, SweepResult) and result.models == ["fast", "smart", "b:smart"]
        by_model = {row["model"]: row for row in result.rows}
        # fast is off by one on x, smart is right: the scorer and the paired comparison see it
        assert by_model["fast"]["score_includes"] == 0.0 and by_model["smart"]["score_includes"] == 1.0
        assert by_model["b:smart"]["score_includes"] == 1.0 and by_model["b:smart"]["agent"] == "b"
        comparison = result.compare("smart", "fast")
        assert comparison.samples == 1 and comparison.a_better == 1
        frame = result.to_pandas()
        assert list(frame["model"]) == ["fast", "smart", "b:smart"] and (frame["status"] == "ok").all()
        assert all(row["total_tokens"] > 0 and row["cost"] > 0 and row["duration_s"] is not None
                   for row in result.rows)
        # the source goes on unchanged; each answer is in a session of its own that goes on from there
        assert len(session.turns) == 1
        assert result.sessions["smart"].forked_from == session.id and result.sessions["smart"].model == "smart"
        assert result.sessions["smart"].prompt("what did I say before?").text.endswith('"apples", "What is 6 x 7?".')
        # another agent's model gets the conversation handed over, marked as such
        (handed,) = [p for p in sent(other, "session/prompt") if "_meta" in p]
        assert handed["_meta"][HANDOVER_META]["turns"] == 1 and "[1] User: apples" in handed["prompt"][0]["text"]
        forms = result._repr_mimebundle_()
        assert "display:flex" in forms["text/html"] and forms["text/html"].count("acpnb-branch-sweep") == 1
        assert "== smart (" in forms["text/plain"] and "tokens" in forms["text/plain"]


def test_a_model_nobody_offers_is_refused_before_anything_is_sent(tmp_path):
    with acpnb.start(DemoAgent(), cwd=tmp_path) as agent:
        session = agent.new_session()
        with pytest.raises(acpnb.ConfigOptionError, match="'huge' is neither a model of this session"):
            branch_sweep(session, "hi", models=["fast", "huge"])
        assert sent(agent, "session/fork") == [] and sent(agent, "session/prompt") == []
        with pytest.raises(ValueError, match="named more than once"):
            branch_sweep(session, "hi", models=["fast", "fast"])


@pytest.mark.slow
def test_the_models_cell_makes_each_answer_a_branch(shell):
    run(shell, "%acp start demo")
    run(shell, "%acp start demo --name second")
    run(shell, "%acp use demo")
    main = acpnb.current()
    run(shell, "%%acp --cell one\napples")
    shown = run(shell, "%%acp --models fast,smart,second:smart\nWhat is 6 x 7?")
    (text,) = [o.data["text/plain"] for o in shown.outputs if "== fast" in o.data.get("text/plain", "")]
    assert text.index("== fast") < text.index("== smart") < text.index("== second:smart")
    assert acpnb.current() is main and len(main.turns) == 1
    listed = run(shell, "%acp branches").outputs[0].data["text/plain"]
    assert "forked for smart" in listed and "handed over, not forked for second:smart" in listed
    said = run(shell, "%acp checkout second:smart")
    assert "Now on branch second:smart" in said.stdout and acpnb.current().agent.name == "second"
    run(shell, "%%acp\nand then?")
    assert acpnb.current().turns[-1].text.startswith("[smart]")
