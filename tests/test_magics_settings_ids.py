"""``%acp set`` with several assignments is all or nothing where it can be known beforehand, and says exactly
what was applied when the agent refuses one midway; session ids may be shortened to a unique prefix in
``%acp load``, ``%acp resume`` and ``%acp sessions --delete`` alike, with short messages for ids that
name none or several. On a real IPython shell with real agents."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import acp_notebook as acpnb
from tests.test_magics import magics_of, run, shell  # noqa: F401 - fixture

AGENTS = Path(__file__).parent / "agents"


def test_a_bad_value_anywhere_in_the_line_changes_nothing(shell):
    with capture_output():
        run(shell, "%acp start demo")
    session = acpnb.current()
    before = session.config.values()
    sent = len([e for e in session.agent.log if e["msg"].get("method") == "session/set_config_option"])
    with pytest.raises(acpnb.ConfigOptionError, match="'pirat' is not a choice of 'tone'") as raised:
        run(shell, "%acp set mode=code tone=pirat")
    assert "Did you mean 'pirate'?" in raised.value.hint
    with pytest.raises(UsageError, match="show_thoughts is on/off"):
        run(shell, "%acp set mode=code show_thoughts=maybe")
    with pytest.raises(acpnb.ConfigOptionError, match="no config option 'modell'"):
        run(shell, "%acp set modell=smart mode=code")
    assert session.config.values() == before
    assert len([e for e in session.agent.log if e["msg"].get("method") == "session/set_config_option"]) == sent


def test_an_option_brought_by_an_earlier_assignment_is_checked_in_its_turn(shell):
    with capture_output():
        run(shell, "%acp start demo")
    session = acpnb.current()
    with capture_output() as captured:
        run(shell, "%acp set model=smart thought_level=high")  # thought_level appears with the smart model
    assert captured.stdout.splitlines() == ["model = Smart", "thought_level = High"]
    with capture_output():
        run(shell, "%acp set model=fast")
    with capture_output() as captured, pytest.raises(acpnb.ConfigOptionError) as raised:
        run(shell, "%acp set model=smart thought_level=extreme")
    message = raised.value.message
    assert message.startswith("%acp set applied model=smart, then stopped: 'extreme' is not a choice of "
                              "'thought_level'") and message.endswith("Not applied: thought_level=extreme")
    assert "The panel shows the settings in force." in raised.value.hint
    assert captured.stdout.splitlines()[:2] == ["model = Smart", "new option: thought_level = High"]
    assert session.model == "smart" and session.config["thought_level"].value == "high"


def test_a_refusal_midway_reports_what_was_applied(shell):
    with capture_output():
        run(shell, f"%acp start --name edge -- {sys.executable} {AGENTS}/edge_agent.py edge")
    session = acpnb.current()
    with capture_output() as captured, pytest.raises(acpnb.ConfigOptionError) as raised:
        run(shell, "%acp set style=b model=forbidden")  # offered, but the agent refuses it
    assert raised.value.message.startswith("%acp set applied style=b, then stopped: agent 'edge' refused "
                                           "model='forbidden'")
    assert raised.value.message.endswith("Not applied: model=forbidden")
    assert "unchanged" not in raised.value.hint
    assert captured.stdout.splitlines()[0] == "style = B" and "model = " not in captured.stdout
    assert session.config.values()["style"] == "b" and session.model == "m1"
    panel = magics_of(shell).panel(session)
    assert ("Style", "B") in panel.snapshot().settings  # the panel shows the true state


def test_load_takes_a_prefix_and_says_briefly_when_an_id_names_none_or_several(shell, tmp_path):
    with capture_output():  # an agent whose session list holds this test's sessions only
        run(shell, f"%acp start demo --env ACP_NOTEBOOK_DEMO_STATE={tmp_path / 'demo-state'}")
        first = acpnb.current()
        run(shell, "%%acp\nnew topic: Owls")
        run(shell, "%acp new")
        run(shell, "%%acp\nnew topic: Wrens")
    first.close()
    with capture_output():
        run(shell, f"%acp load {first.id[:10]}")
    loaded = acpnb.current()
    assert loaded.id == first.id and loaded.title == "Owls"

    with pytest.raises(UsageError) as raised:
        run(shell, "%acp load demo-")
    text = str(raised.value)
    assert text.startswith("%acp load: 'demo-' is the start of 2 session ids: ") and "Give more of the id." in text
    assert "(Owls)" in text and "(Wrens)" in text
    with pytest.raises(UsageError) as raised:
        run(shell, "%acp load demo-4939")
    text = str(raised.value)
    assert text.startswith("%acp load: no session 'demo-4939' in the sessions of agent 'demo'; the newest: ")
    assert text.endswith("%acp sessions lists them all.") and "acpnb" not in text and "list_sessions" not in text
    for sid in (first.id, acpnb.current().id):
        assert text.count(sid) == 1


def test_load_passes_an_unlisted_id_to_an_agent_that_cannot_list(shell):
    with capture_output():
        run(shell, f"%acp start --name faulty -- {sys.executable} {AGENTS}/fault_agent.py normal")
    with pytest.raises(acpnb.CapabilityError):  # it cannot load either: the agent's own answer, unchanged
        run(shell, "%acp load some-session")


@pytest.mark.slow
def test_resume_takes_a_prefix_and_lists_few_candidates(shell):
    with capture_output():
        run(shell, "%acp start demo")
        first = acpnb.current()
        run(shell, "%%acp\nnew topic: Otters")
        run(shell, "%acp new")
        second = acpnb.current()
        run(shell, "%acp stop")
    with pytest.raises(UsageError, match="%acp resume: 'demo-' is the start of .* session ids: .*Give more"):
        run(shell, "%acp resume demo-")
    with capture_output() as captured:
        run(shell, f"%acp resume {second.id[:9]}")
    assert acpnb.current().id == second.id and captured.stdout.startswith(f"Resumed session {second.id}")
    assert first.id != second.id
