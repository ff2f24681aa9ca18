"""ACP terminal logins: the agent's login run in a pseudo-terminal, its view in the cell, the reconnect after it.

The agent is tests/agents/login_agent.py (a real subprocess over real pipes): it offers a terminal auth method
and refuses session/new until its credentials file exists; its login (the same program with ``--login``,
tests/agents/login_flow.py) prints a URL, asks a name with ``input`` and a code with ``getpass`` (echo off),
checks it and writes that file. The widgets run headless against a comm that records what the frontend would
get; user actions are delivered as the browser sends them (tests/test_widgets.py's CommRecorder).
"""

from __future__ import annotations

import json
import os
import select
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from IPython.utils.capture import capture_output

import acp_notebook as acpnb
from acp_notebook import _loop
from acp_notebook._redact import Redactor
from acp_notebook.auth_terminal import TerminalLogin, TerminalText, login_command, shown_command
from acp_notebook.starting import arelaunch
from acp_notebook.magics import login as login_magics
from acp_notebook.magics import commands as commands_magics
from tests.test_magics import magics_of, run, shell  # noqa: F401 - fixture
from tests.test_widgets import CommRecorder, comms  # noqa: F401 - fixture

AGENTS = Path(__file__).resolve().parent / "agents"
LOGIN_AGENT = [sys.executable, str(AGENTS / "login_agent.py")]
SECRET = "sk-live-0123456789abcdef"
TIMEOUT = 30.0


@pytest.fixture
def login_env(tmp_path) -> dict[str, str]:
    return {"LOGIN_AGENT_CREDENTIALS": str(tmp_path / "credentials.json"),
            "LOGIN_AGENT_CHILD_PID_FILE": str(tmp_path / "child.pid"), "MY_API_KEY": SECRET}


class Screen:
    """What a login printed so far, and its echo changes; waits re-check whenever something arrives."""

    def __init__(self) -> None:
        self.text = ""
        self.echo: list[bool] = []
        self._changed = threading.Condition()

    def output(self, text: str) -> None:
        with self._changed:
            self.text += text
            self._changed.notify_all()

    def echoes(self, echo: bool) -> None:
        with self._changed:
            self.echo.append(echo)
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[], bool]) -> None:
        with self._changed:
            assert self._changed.wait_for(predicate, TIMEOUT), f"not seen in time; the screen says {self.text!r}"


def _pid_gone(pid_file: Path) -> Callable[[], bool]:
    """A check that the pid in ``pid_file`` has ended, made now (a pidfd: no pid reuse can fool it)."""
    fd = os.pidfd_open(int(pid_file.read_text()))

    def gone() -> bool:
        try:
            return bool(select.select([fd], [], [], TIMEOUT)[0])
        finally:
            os.close(fd)

    return gone


# --- the terminal's text ---------------------------------------------------------------------------
def test_terminal_text_drops_escapes_even_cut_between_reads_and_spells_out_hidden_characters():
    text = TerminalText()
    shown = [text.feed(b"\x1b]0;title\x07\x1b[1;3"), text.feed(b"2mgreen\x1b[0m ok\r"), text.feed(b"\n"),
             text.feed("caf\u00e9 \u202e".encode()[:-1]), text.feed("caf\u00e9 \u202e".encode()[-1:]),
             text.feed(b" \x1b]8;;https://x.example\x1b\\link\x1b]8;;\x1b\\ \x07\x00\xff", final=True)]
    assert "".join(shown) == "green ok\ncafé \\u202e link \\x00\\udcff"
    assert shown[0] == ""  # an escape cut in two is held back, never shown in halves


def test_a_lone_carriage_return_is_kept_for_a_line_redrawn_in_place():
    from acp_notebook.widgets.terminal import as_shown

    shown = TerminalText().feed(b"1/3\r2/3\rdone\n", final=True)
    assert shown == "1/3\r2/3\rdone\n" and as_shown(shown) == "done\n"
    assert as_shown("abcdef\rXY") == "XYcdef"


# --- what to run ------------------------------------------------------------------------------------
def test_the_command_line_names_secret_variables_and_never_holds_their_values():
    method = {"type": "terminal", "id": "tui", "args": ["--login", "--as", "me too"],
              "env": {"MODE": "tty", "API_TOKEN": "short", "HOSTILE": f"x{SECRET}x"}}
    line = shown_command(["agent", f"--key={SECRET}"], method, launch_env_names=["MY_API_KEY", "MODE"],
                         redactor=Redactor([("MY_API_KEY", SECRET)]))
    assert SECRET not in line
    assert line == ("MODE=tty API_TOKEN=\"$API_TOKEN\" HOSTILE=\"$HOSTILE\" MY_API_KEY=\"$MY_API_KEY\" "
                    "agent '--key=***MY_API_KEY***' --login --as 'me too'")


def test_a_script_is_told_the_command_line_and_nothing_is_sent_to_authenticate(login_env):
    with acpnb.start(LOGIN_AGENT, env=login_env, name="login") as agent:
        with pytest.raises(acpnb.RpcError) as refused:
            agent.new_session()
        assert refused.value.auth_required
        with pytest.raises(acpnb.AcpError) as raised:
            agent.authenticate("tui")
        hint = raised.value.hint
        assert "is a login you do in a terminal" in raised.value.message
        assert hint.startswith("Run this in a terminal, then start the agent again: LOGIN_AGENT_MODE=terminal ")
        assert 'MY_API_KEY="$MY_API_KEY"' in hint and hint.endswith("login_agent.py --login") and SECRET not in hint
        assert "authenticate" not in [e["msg"].get("method") for e in agent.log if e["dir"] == "send"]
        command = login_command(agent, "tui")
        assert command.argv == (*LOGIN_AGENT, "--login") and command.cwd == agent.cwd
        assert command.env["LOGIN_AGENT_MODE"] == "terminal" and command.env["MY_API_KEY"] == SECRET
        assert SECRET not in repr(command)


def test_an_agent_that_is_no_program_here_has_no_login_to_run(tmp_path):
    from tests.recorded_agents import write_recording

    method = {"type": "terminal", "id": "tui", "name": "Log in", "args": ["--login"]}
    path = write_recording(tmp_path / "tui.acp.jsonl", [], auth_methods=[method])
    with acpnb.replay(path) as agent:
        with pytest.raises(acpnb.AcpError) as raised:
            login_command(agent, "tui")
        assert "is not a program started here" in raised.value.message and "--login" in raised.value.hint


# --- the login in a pseudo-terminal -----------------------------------------------------------------------
def _start_login(agent, screen: Screen) -> TerminalLogin:
    login = TerminalLogin(login_command(agent, "tui"), on_output=screen.output, on_echo=screen.echoes)
    login.start()
    return login


def test_a_login_reads_a_name_and_a_hidden_code_then_the_agent_started_again_opens_a_session(login_env):
    screen = Screen()
    with acpnb.start(LOGIN_AGENT, env=login_env, name="login") as agent:
        login = _start_login(agent, screen)
        screen.wait_for(lambda: screen.text.endswith("Your name: "))
        login.write_line("Ada")
        screen.wait_for(lambda: screen.text.endswith("Code shown after you sign in: "))
        assert screen.echo == [False] and not login.echo  # getpass turned echo off before it asked
        login.write_line("4321")
        outcome = login.done.result(TIMEOUT)
        assert outcome.ok and outcome.describe() == "exit status 0"
        assert json.loads(Path(login_env["LOGIN_AGENT_CREDENTIALS"]).read_text()) == {"name": "Ada"}
        assert screen.echo == [False, True]
        assert "\x1b" not in screen.text and "Welcome to the login agent \\u202e!" in screen.text
        assert "Open https://login.example/device?user_code=WXYZ-0042 and sign in." in screen.text
        assert "Your name: Ada\n" in screen.text and "4321" not in screen.text  # echoed, then not
        assert screen.text.endswith("Logged in as Ada.\n")
        again = _loop.run_sync(arelaunch(agent), TIMEOUT)  # ACP v1: reconnect after the login
        try:
            assert again is not agent and again.name == "login" and again.extra_env == agent.extra_env
            session = again.new_session()
            assert session.prompt("hi").text == "Hello, Ada."
        finally:
            again.close()


def test_a_wrong_code_fails_the_login_and_writes_nothing(login_env):
    screen = Screen()
    with acpnb.start(LOGIN_AGENT, env={**login_env, "LOGIN_AGENT_CODE": "9999"}) as agent:
        login = _start_login(agent, screen)
        screen.wait_for(lambda: screen.text.endswith("Your name: "))
        login.write_line("Ada")
        screen.wait_for(lambda: screen.text.endswith("sign in: "))
        login.write_line("4321")
        outcome = login.done.result(TIMEOUT)
        assert not outcome.ok and outcome.describe() == "exit status 1"
        assert screen.text.endswith("That code is not right.\n")
        assert not Path(login_env["LOGIN_AGENT_CREDENTIALS"]).exists()


def test_cancel_ends_the_logins_whole_process_group(login_env):
    screen = Screen()
    with acpnb.start(LOGIN_AGENT, env=login_env) as agent:
        login = _start_login(agent, screen)
        screen.wait_for(lambda: screen.text.endswith("Your name: "))
        child_gone = _pid_gone(Path(login_env["LOGIN_AGENT_CHILD_PID_FILE"]))  # a child the login started
        login.cancel()
        outcome = login.done.result(TIMEOUT)
        assert outcome.cancelled and not outcome.ok and outcome.describe() == "cancelled"
        assert child_gone()
        login.write_line("late")  # typing into an ended login does nothing
        assert agent.running  # the agent itself is not the login: it runs on


# --- %acp auth METHOD in a cell -----------------------------------------------------------------------------
START = "%acp start --name login --env LOGIN_AGENT_CREDENTIALS={c} --env LOGIN_AGENT_CHILD_PID_FILE={p} -- {argv}"


def _start_locked(shell, login_env) -> None:
    line = START.format(c=login_env["LOGIN_AGENT_CREDENTIALS"], p=login_env["LOGIN_AGENT_CHILD_PID_FILE"],
                        argv=" ".join(LOGIN_AGENT))
    with capture_output(), pytest.raises(acpnb.AcpError) as raised:
        run(shell, line)
    return raised.value


@pytest.fixture
def in_a_kernel(monkeypatch):
    """The magics as in a kernel, where the login's view can be shown (the shell here has no kernel)."""
    def here(agent, _shell):
        return bool(agent.connection.transport.command)

    monkeypatch.setattr(login_magics, "can_run_here", here)
    monkeypatch.setattr(commands_magics, "can_run_here", here)


def _begin(shell) -> tuple:
    old = acpnb_entry(shell).agent
    with capture_output():
        run(shell, "%acp auth tui")
    flow = login_magics.running_login(old)
    assert flow is not None and flow.view is not None
    return old, flow.view


def acpnb_entry(shell):
    return magics_of(shell).entry("login")


def test_acp_auth_runs_the_login_in_the_cell_then_the_agent_again_with_a_session(shell, comms, login_env,
                                                                                 in_a_kernel):
    error = _start_locked(shell, login_env)
    assert "asks you to authenticate before it opens a session" in error.message
    assert error.hint == ("Log in with %acp auth tui: it runs the agent's login in the cell (you answer it there), "
                          "then starts the agent again.")
    with capture_output() as listed:
        run(shell, "%acp auth")
    assert "  tui (Log in): %acp auth tui runs this login in the cell, then starts the agent again:" in listed.stdout
    old, view = _begin(shell)
    comms.wait_for(lambda: view.transcript.endswith("Your name: "))
    comms.user_sets(view.field, value="Ada")
    comms.from_frontend(view.field, {"method": "custom", "content": {"event": "submit"}})  # Enter
    comms.wait_for(lambda: view.input_row.children[0] is view.password and "sign in: " in view.transcript)
    assert comms.updates_of(view.input_row, "children")[-1][0] == f"IPY_MODEL_{view.password.model_id}"
    password_id = view.password.model_id
    comms.user_sets(view.password, value="4321")
    comms.click(view.send_button)
    message, ok = _loop.wait(view.finished, TIMEOUT)  # runs the registry's change, due on this (kernel) thread
    new = acpnb_entry(shell).agent
    assert ok and message == (f"Logged in: agent 'login' was started again and session login-1 opened on it "
                              "(%acp panel shows it).")
    assert new is not old and old.status == "closed" and acpnb.current().agent is new
    assert view.password.value == "" and view.password.comm is None and view.field.comm is None  # both closed
    assert [m.state["value"] for m in comms.sent if m.comm_id == password_id and "value" in m.state][-1] == ""
    forms = view._bundle(True, "")
    assert "Logged in as Ada." in forms.data["text/plain"] and "4321" not in json.dumps(forms.data)
    assert "\\u202e" in forms.data["text/html"] and "\u202e" not in json.dumps(forms.data, ensure_ascii=False)
    for agent in (old, new):
        assert "authenticate" not in [e["msg"].get("method") for e in agent.log if e["dir"] == "send"]
    with capture_output():
        run(shell, "%%acp\nhello")
    assert acpnb.current().turns[-1].text == "Hello, Ada."


def test_cancel_in_the_cell_ends_the_login_and_leaves_the_agent_as_it_was(shell, comms, login_env, in_a_kernel):
    _start_locked(shell, login_env)
    old, view = _begin(shell)
    comms.wait_for(lambda: view.transcript.endswith("Your name: "))
    child_gone = _pid_gone(Path(login_env["LOGIN_AGENT_CHILD_PID_FILE"]))
    with pytest.raises(acpnb.AcpError, match="a terminal login of agent 'login' is already running"):
        run(shell, "%acp auth tui")
    cancel_id = view.cancel_button.model_id  # the widgets are closed once the login ended
    comms.click(view.cancel_button)
    message, ok = _loop.wait(view.finished, TIMEOUT)
    assert not ok and message == "The login did not work (cancelled); nothing changed. %acp auth tui runs it again."
    assert child_gone() and acpnb_entry(shell).agent is old and old.running
    disabled = [m.state["disabled"] for m in comms.sent if m.comm_id == cancel_id and "disabled" in m.state]
    assert disabled[-1] is True


def test_without_a_kernel_acp_auth_says_what_to_run_in_a_terminal(shell, login_env):
    error = _start_locked(shell, login_env)
    assert "Or log in" not in error.hint and "then start the agent again: LOGIN_AGENT_MODE=terminal" in error.hint
    with pytest.raises(acpnb.AcpError) as raised:
        run(shell, "%acp auth tui")
    hint = raised.value.hint_for("magic")
    assert "is a login you do in a terminal" in raised.value.message and SECRET not in hint
    assert 'LOGIN_AGENT_CREDENTIALS="$LOGIN_AGENT_CREDENTIALS"' in hint and "--login" in hint
    assert login_magics.running_login(acpnb_entry(shell).agent) is None
