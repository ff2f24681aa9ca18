"""%acp start --record FILE, %acp start --replay FILE and %acp log --file FILE, on a real IPython shell."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import acp_notebook as acpnb
from acp_notebook.magics.grammar import ShowLog, Start, parse_line
from acp_notebook.record import Recording
from tests.test_magics import run, shell  # noqa: F401 - the shell fixture

pytest.importorskip("ipywidgets")


def test_the_grammar_of_record_replay_and_log_file():
    assert parse_line("start demo --record s.acp.jsonl") == Start(spec="demo", record="s.acp.jsonl")
    assert parse_line("start --replay s.acp.jsonl --speed 2") == Start(spec="", replay="s.acp.jsonl", speed=2.0)
    assert parse_line("log --file s.acp.jsonl -m session/update") == ShowLog(method="session/update",
                                                                            file="s.acp.jsonl")
    for line, problem in [("start demo --replay s.jsonl", "the recording is the agent"),
                          ("start --replay s.jsonl --record t.jsonl", "give no NAME, command"),
                          ("start demo --speed 2", "--speed X goes with --replay"),
                          ("start --replay s.jsonl --speed 0", "positive number"),
                          ("log demo --file s.jsonl", "give no NAME or --session")]:
        with pytest.raises(UsageError, match=problem):
            parse_line(line)


@pytest.mark.slow
def test_a_notebook_recorded_then_replayed_then_studied(shell, tmp_path):
    path = tmp_path / "demo.acp.jsonl"
    with capture_output():
        run(shell, f"%acp start demo --record {path}")
        run(shell, "%acp set model=smart")
        run(shell, "%%acp\nTell me about tide pools")
        recorded = acpnb.current().turns[-1].text
        run(shell, "%acp stop")
    assert Recording.load(path).header["agentInfo"]["name"] == "acp-notebook-demo"

    with capture_output():
        run(shell, f"%acp start --replay {path}")
        assert acpnb.current().agent.name == "demo"
        run(shell, "%acp set model=smart")
        run(shell, "%%acp\nTell me about tide pools")
        assert acpnb.current().turns[-1].text == recorded
        with pytest.raises(acpnb.ReplayMismatch, match="recording has ended"):
            run(shell, "%%acp\nsomething never recorded")
        run(shell, "%acp stop --all")

    with capture_output() as captured:
        run(shell, f"%acp log --file {path} --method session/set_config_option")
    (shown,) = [output.data for output in captured.outputs]
    assert "set_config_option" in shown["text/plain"] and "session/prompt" not in shown["text/plain"]
    assert not captured.stderr
    with capture_output() as captured:  # an update kind stands for session/update of that kind
        run(shell, f"%acp log --file {path} --method agent_message_chunk")
    (shown,) = [output.data for output in captured.outputs]
    assert "agent_message_chunk" in shown["text/plain"] and "session/prompt" not in shown["text/plain"]
    assert not captured.stderr
    with capture_output() as captured:  # a typo is said, and the table shows the method meant, not nothing
        run(shell, f"%acp log --file {path} --method session/promt")
    assert captured.stderr == ("%acp log --method: ACP has no method 'session/promt'; showing 'session/prompt', "
                               "the closest one.\n")
    (shown,) = [output.data for output in captured.outputs]
    assert "session/prompt" in shown["text/plain"] and "set_config_option" not in shown["text/plain"]
    with capture_output() as captured:  # nothing close: kept as typed, and said
        run(shell, f"%acp log --file {path} --method zzz/qqq")
    assert captured.stderr == ("%acp log --method: ACP has no method 'zzz/qqq'; the inspector shows its frames if "
                               "any come, and its Method list names those that came.\n")
    with pytest.raises(UsageError, match="no recording at"):
        run(shell, f"%acp log --file {tmp_path / 'missing.jsonl'}")
    with pytest.raises(UsageError, match="no recording at"):
        run(shell, f"%acp start --replay {tmp_path / 'missing.jsonl'}")
