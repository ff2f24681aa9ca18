"""The magics and the newer parts of ACP, on a real IPython shell: the agent's forms in %%acp cells
(AcpMagics.elicitation), %acp sessions --delete, %acp logout, %acp auth and terminal logins.

Agents that do what the demo agent does not (logout, terminal logins, an authentication error) are
written here as recordings and replayed with %acp start --replay: a real transport under the real
client."""

from __future__ import annotations

import shlex
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output
from traitlets import TraitError

import acp_notebook as acpnb
from acp_notebook.magics import Authenticate, ListSessions, Logout, parse_line
from acp_notebook.widgets.static import turn_forms
from tests.recorded_agents import write_recording
from tests.test_magics import displayed, last_of_each_display, magics_of, run, shell  # noqa: F401 - fixture

pytest.importorskip("ipywidgets")

SID = "rec-1"


# --- forms in %%acp cells --------------------------------------------------------------------
def test_elicitation_is_configurable_and_asks_by_default(shell):
    magics = magics_of(shell)
    assert magics.elicitation == "ask" and magics.elicitation_timeout == 0.0
    run(shell, "%config AcpMagics.elicitation = 'Decline'")
    assert magics.elicitation == "decline"
    run(shell, "%config AcpMagics.elicitation = {'name': 'Ada'}")
    assert magics.elicitation == {"name": "Ada"}
    with pytest.raises(TraitError, match="'ask', 'decline', 'cancel'"):
        magics.elicitation = "maybe"
    with pytest.raises(TraitError, match="should not be less than 0"):
        magics.elicitation_timeout = -1.0
    assert magics.elicitation_timeout == 0.0


@pytest.mark.parametrize("value", [0.0, -5.0, float("nan")])
def test_the_request_timeout_must_be_some_seconds(shell, value):
    magics = magics_of(shell)
    with pytest.raises(TraitError, match=r"AcpMagics.timeout: seconds to wait for a start and each request, more "
                                         r"than 0, not .*%config AcpMagics.timeout = 60"):
        magics.timeout = value
    assert magics.timeout == 60.0
    for other in ("permission_timeout", "turn_timeout", "stream_interval"):
        with pytest.raises(TraitError, match="should not be less than 0"):
            setattr(magics, other, -1.0)
    with capture_output() as captured:
        run(shell, "%acp help")
    assert "elicitation ('ask' | 'decline' | 'cancel' | a dict of answers), elicitation_timeout" in captured.stdout


@pytest.mark.parametrize(("policy", "action", "reply"), [
    ("'decline'", "decline", "No problem, I will not ask."),
    ("'cancel'", "cancel", "The questions were cancelled, so I have no answers."),
    ("{'name': 'Ada', 'colour': 'blue', 'cups': 1}", "accept", "Thank you, Ada! Favourite colour: blue. 1 cup of tea"),
])
def test_unattended_cells_answer_forms_by_the_configured_policy(shell, policy, action, reply):
    run(shell, f"%config AcpMagics.elicitation = {policy}")
    with capture_output():
        run(shell, "%acp start demo")
    with capture_output() as captured:
        run(shell, "%%acp\nask me about tea")
    (turn,) = acpnb.current().turns
    assert reply in turn.text and [r.action for r in turn.elicitations] == [action]
    (final,) = [o for o in last_of_each_display(captured).values() if "acpnb-turn" in o.data["text/html"]]
    said = final.data["text/plain"]
    assert "The agent asked: A few questions from the demo agent." in said
    assert f"automatically by AcpMagics.elicitation = {policy}" in said


def test_a_form_nobody_answers_is_declined_after_elicitation_timeout(shell):
    run(shell, "%config AcpMagics.elicitation_timeout = 0.2")
    with capture_output():
        run(shell, "%acp start demo")
        run(shell, "%%acp\nask me")
    (turn,) = acpnb.current().turns
    assert "No problem, I will not ask." in turn.text and turn.elicitations[0].action == "decline"
    view = magics_of(shell).last_view
    assert "No answer within 0.2 s: declined." in turn_forms(view.snapshot())["text/plain"]


def test_forms_outside_a_cell_are_declined_when_the_cells_ask(shell):
    with capture_output():
        run(shell, "%acp start demo")
    turn = acpnb.current().prompt("ask me", timeout=30)  # code, not a cell: nobody to show the form to
    assert turn.elicitations[0].action == "decline"
    run(shell, "%config AcpMagics.elicitation = {'name': 'Bo', 'colour': 'red'}")
    assert "Thank you, Bo!" in acpnb.current().prompt("ask me", timeout=30).text


# --- the session lifecycle ---------------------------------------------------------------------
@pytest.mark.parametrize(("line", "expected"), [
    ("sessions --delete abc", ListSessions(delete=("abc",))),
    ("sessions -d a -d b --agent x", ListSessions(alias="x", delete=("a", "b"))),
    ("logout", Logout()),
    ("logout --agent x", Logout(alias="x")),
    ("auth", Authenticate()),
    ("auth tui -a x", Authenticate("tui", alias="x")),
])
def test_parse_lifecycle_lines(line, expected):
    assert parse_line(line) == expected


def test_bad_lifecycle_lines_are_usage_errors():
    for line, says in [("sessions --delete", "expected one argument"), ("logout now", "unrecognized arguments")]:
        with pytest.raises(UsageError, match=says):
            parse_line(line)


def test_sessions_delete_removes_a_session_by_id_or_prefix_and_closes_its_panel(shell, tmp_path):
    magics = magics_of(shell)
    with capture_output():  # a demo agent whose list holds this test's sessions only
        run(shell, f"%acp start demo --env ACP_NOTEBOOK_DEMO_STATE={tmp_path / 'demo-state'}")
        first = acpnb.current()
        run(shell, "%%acp\nnew topic: Owls")
        run(shell, "%acp new")
        second = acpnb.current()
        run(shell, "%%acp\nnew topic: Wrens")
    panel = magics.panel(first)
    with capture_output() as captured:
        run(shell, "%acp sessions")
    assert "Delete one for good: %acp sessions --delete ID" in displayed(captured)[0]["text/plain"]

    with capture_output() as captured:
        run(shell, f"%acp sessions --delete {first.id[:-3]}")  # a unique prefix
    assert f"Deleted session {first.id} ('Owls')." in captured.stdout
    (table,) = [o.data["text/plain"] for o in captured.outputs if not o.update]  # the table; the panel updates
    assert first.id not in table and second.id in table
    assert first.closed and first.id not in [s["sessionId"] for s in first.agent.list_sessions()]
    assert panel.closed_reason == "deleted with %acp sessions --delete"
    assert [e["msg"]["params"] for e in first.agent.log if e["msg"].get("method") == "session/delete"] == [
        {"sessionId": first.id}]
    assert first.id not in [r.session_id for r in magics.runner.agents.records()]

    with pytest.raises(UsageError, match=f"no session {first.id!r} in the sessions of agent 'demo'"):
        run(shell, f"%acp sessions --delete {first.id}")
    with capture_output():
        run(shell, "%acp new")
    third = acpnb.current()
    with pytest.raises(UsageError, match="'demo-' is the start of 2 session ids"):
        run(shell, "%acp sessions --delete demo-")
    with capture_output() as captured:
        run(shell, f"%acp sessions --delete {third.id}")  # the agent's current session
    assert f"Deleted session {third.id}." in captured.stdout and not second.closed
    with pytest.raises(UsageError, match="has no open session: %acp new"):
        run(shell, "%%acp\nhello")


def session_new(request_id: int, answer: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("send", {"id": request_id, "method": "session/new", "params": {"cwd": "/rec", "mcpServers": []}}),
            ("recv", {"id": request_id, **answer})]


TERMINAL = {"type": "terminal", "id": "tui", "name": "Log in", "description": "Opens the agent's login screen",
            "args": ["--login"], "env": {"LOGIN_MODE": "tty"}}
TOKEN = {"id": "token", "name": "API token"}


def test_auth_lists_methods_with_the_terminal_command_and_logout_is_sent(shell, tmp_path):
    path = write_recording(tmp_path / "auth.acp.jsonl", [
        *session_new(1, {"result": {"sessionId": SID}}),
        ("send", {"id": 2, "method": "logout", "params": {}}), ("recv", {"id": 2, "result": {}}),
    ], capabilities={"auth": {"logout": {}}}, auth_methods=[TERMINAL, TOKEN])
    with capture_output():
        run(shell, f"%acp start --replay {path} --name scripted")
    agent = acpnb.current().agent
    command = shlex.join(["LOGIN_MODE=tty", *agent.command, "--login"])
    with capture_output() as captured:
        run(shell, "%acp auth")
    assert captured.stdout.splitlines() == [
        "Auth methods of agent 'scripted':",
        "  tui (Log in): log in from a terminal, then start the agent again:",
        f"      {command}",
        "      Opens the agent's login screen",
        "  token (API token): %acp auth token",
    ]
    with pytest.raises(acpnb.AcpError) as raised:
        run(shell, "%acp auth tui")
    assert "is a login you do in a terminal" in raised.value.message and command in raised.value.hint
    with capture_output() as captured:
        run(shell, "%acp logout")
    assert "Logged out of agent 'scripted'." in captured.stdout
    assert [e["msg"]["method"] for e in agent.log if e["dir"] == "send"][-1] == "logout"


def test_an_agent_that_wants_a_terminal_login_says_the_command(shell, tmp_path):
    refused = {"error": {"code": -32000, "message": "Authentication required"}}
    path = write_recording(tmp_path / "locked.acp.jsonl", session_new(1, refused), auth_methods=[TERMINAL, TOKEN])
    with capture_output(), pytest.raises(acpnb.AcpError) as raised:
        run(shell, f"%acp start --replay {path} --name locked")
    agent = magics_of(shell).entry("locked").agent
    assert "asks you to authenticate before it opens a session" in raised.value.message
    hint = raised.value.hint
    assert "The agent needs authentication; its auth methods: token (%acp auth METHOD picks one)." in hint
    assert f"Or log in from a terminal, then start the agent again: {agent.terminal_login_command('tui')}" in hint


def test_an_agent_with_terminal_logins_only_says_the_command(shell, tmp_path):
    refused = {"error": {"code": -32000, "message": "Authentication required"}}
    path = write_recording(tmp_path / "tui.acp.jsonl", session_new(1, refused), auth_methods=[TERMINAL])
    with capture_output(), pytest.raises(acpnb.AcpError) as raised:
        run(shell, f"%acp start --replay {path} --name tui")
    command = magics_of(shell).entry("tui").agent.terminal_login_command("tui")
    assert raised.value.hint == f"Log in from a terminal, then start the agent again: {command}"


def test_logout_where_the_agent_offers_none_says_so_in_magics(shell):
    with capture_output():
        run(shell, "%acp start demo")
    with pytest.raises(acpnb.AcpError) as raised:
        run(shell, "%acp logout")
    assert "does not offer logout" in raised.value.message
    assert raised.value.hint == "%acp log --method initialize shows what the agent offers."
    with capture_output() as captured:
        run(shell, "%acp auth")
    assert captured.stdout.strip() == "Agent 'demo' offers no auth methods."
