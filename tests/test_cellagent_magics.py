"""``%acp start --object VARIABLE``: an agent written in a cell, driven by the magics on a real IPython shell."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import acp_notebook as acpnb
from acp_notebook.magics import Start, parse_line
from acp_notebook.widgets.inspector import ProtocolInspector
from acp_notebook.widgets.panel import SessionPanel
from tests.test_magics import WIDGET_MIME, displayed, magics_of, run, shell  # noqa: F401 - shell is a fixture

TUTOR_CELL = '''
from acp_notebook.cellagent import CellAgent, select

class Tutor(CellAgent):
    options = [select("model", ["fast", "smart"], category="model")]

    def set_config_option(self, option_id, value):
        if option_id == "model" and value == "smart":
            self.add_option(select("thought_level", ["low", "high"], category="thought_level"))
        elif option_id == "model":
            self.remove_option("thought_level")

    def prompt(self, text):
        if text.strip() == "fail":
            raise KeyError("lesson")
        self.say(f"[{self.values['model']}] ")
        self.set_title(text.strip().title())
        return text.strip()[::-1]

tutor = Tutor()
'''


@pytest.mark.parametrize(("line", "expected"), [
    ("start --object tutor", Start("", obj="tutor")),
    ("start -o lessons.tutor --name t --timeout 5", Start("", alias="t", timeout=5.0, obj="lessons.tutor")),
])
def test_parse_object_start(line, expected):
    assert parse_line(line) == expected


@pytest.mark.parametrize(("line", "says"), [
    ("start demo --object tutor", "give no NAME or command with it"),
    ("start --object tutor -- python agent.py", "give no NAME or command with it"),
    ("start --object tutor --env KEY=1", "--env does not apply"),
    ("start --object", "expected one argument"),
])
def test_bad_object_starts_are_usage_errors(line, says):
    with pytest.raises(UsageError, match=says):
        parse_line(line)


def test_an_agent_written_in_a_cell_answers_the_magics(shell):
    run(shell, TUTOR_CELL)
    with capture_output() as captured:
        run(shell, "%acp start --object tutor")
    assert WIDGET_MIME in displayed(captured)[0]
    magics = magics_of(shell)
    session = acpnb.current()
    assert session.agent.name == "tutor" and list(magics.agents) == ["tutor"]
    assert isinstance(magics.panel(session), SessionPanel)
    assert session.config.ids() == ["model"]

    with capture_output() as captured:
        run(shell, "%acp set model=smart")
    assert "model = Smart" in captured.stdout and "new option: thought_level = Low" in captured.stdout

    with capture_output():
        run(shell, "%%acp\nreverse me\n")
    turn = magics.last_view.turn
    assert turn.text == "[smart] em esrever" and turn.stop_reason == "end_turn"
    assert session.title == "Reverse Me"

    with capture_output() as captured:
        run(shell, "%acp log")
    methods = {e["msg"].get("method") for e in session.agent.log}
    assert {"initialize", "session/new", "session/set_config_option", "session/prompt", "session/update"} <= methods
    assert {e["dir"] for e in session.agent.log} == {"send", "recv"}  # the inspector's table has both sides
    assert WIDGET_MIME in displayed(captured)[0]


def test_the_agents_error_ends_the_cell_with_its_message(shell):
    run(shell, TUTOR_CELL)
    with capture_output():
        run(shell, "%acp start --object tutor --name mine")
    with capture_output(), pytest.raises(acpnb.RpcError, match=r"Tutor.prompt raised KeyError: 'lesson'"):
        run(shell, "%%acp mine\nfail\n")
    with capture_output():  # the agent and the session go on
        run(shell, "%%acp mine\nagain\n")
    assert magics_of(shell).last_view.turn.text == "[fast] niaga"


def test_object_start_errors_speak_magic_syntax(shell):
    with pytest.raises(UsageError, match=r"no variable 'nobody' in this notebook; run the cell that defines it"):
        run(shell, "%acp start --object nobody")
    run(shell, "number = 5")
    with pytest.raises(UsageError, match=r"holds an object of type int, not an agent object"):
        run(shell, "%acp start --object number")
    with pytest.raises(UsageError, match=r"number has no attribute path 'number.agent'"):
        run(shell, "%acp start --object number.agent")
    assert not magics_of(shell).agents


def test_the_inspector_of_a_cell_agent_shows_both_sides(shell):
    run(shell, TUTOR_CELL)
    with capture_output():
        run(shell, "%acp start --object tutor")
    session = acpnb.current()
    inspector = ProtocolInspector(session.agent)
    rows = inspector.visible()
    assert [r.sender for r in rows[:4]] == ["client", "agent", "client", "agent"]
    assert rows[0].method == "initialize" and rows[1].pair == 0 and rows[3].config is not None
    inspector.close()
