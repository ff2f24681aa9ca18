"""Errors carry facts (a remedy), and each surface words them its own way (issue 34 point 4).

The protocol layer raises errors with a ``remedy`` and no magic syntax; Python shows the API words,
the magics ``%acp``/``%config`` words, the command line ``acp-notebook``/option words. Each error
here is raised for real (an in-memory demo agent, a login agent over pipes, a replayed recording);
showing it on a surface gives a copy and leaves the error as it was raised.
"""

from __future__ import annotations

import ast
import pickle
import re
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook import errors, remedies
from acp_notebook.demo import DemoAgent
from tests.recorded_agents import write_recording
from tests.test_auth_terminal import LOGIN_AGENT, login_env  # noqa: F401 - login_env is a fixture
from tests.test_magics import run, shell  # noqa: F401 - shell is a fixture

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "acp_notebook"
PROTOCOL_LAYER = [*sorted((PACKAGE / "connection").glob("*.py")),
                  *(PACKAGE / name for name in ("client.py", "session.py", "turn.py", "state.py", "_inbound.py",
                                                "_permission.py"))]
MAGIC_WORDS = re.compile(r"%acp|%config|AcpMagics")
PYTHON_WORDS = re.compile(r"acpnb\.|\bagent\.(?!py\b)\w+|\b[a-z_]+=['\s,.)]")  # API calls, keyword arguments


def magic_words_in(source: str) -> list[tuple[int, str]]:
    """(line, text) of each string literal in ``source`` (f-string parts included) that names the magics."""
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and MAGIC_WORDS.search(node.value)]


def test_the_check_finds_magic_words_in_any_string_literal():
    source = 'def f(x):\n    """Doc."""\n    raise E(f"no {x}", hint="Run %acp start demo")\nY = f"{1} %config AcpMagics.a"\n'
    assert sorted(line for line, _ in magic_words_in(source)) == [3, 4]


@pytest.mark.parametrize("path", PROTOCOL_LAYER, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_protocol_layer_writes_no_magic_syntax(path):
    assert path.exists()
    assert magic_words_in(path.read_text()) == [], "hints belong in remedies.py, worded per surface"


def shown_everywhere(error: errors.AcpError) -> dict[str, str]:
    """The hint each surface shows, taken as the surfaces take it; the error must come out unchanged."""
    before = (type(error), error.args, str(error), repr(sorted(vars(error).items())))
    shown = {"python": error.hint, "magic": error.in_terms_of("magic").hint, "cli": error.in_terms_of("cli").hint}
    for surface in errors.SURFACES:
        copy = error.in_terms_of(surface)
        assert copy is not error and type(copy) is type(error) and copy.message == error.message
        assert copy.remedy == error.remedy and str(copy) == f"{error.message}\nHint: {shown[surface]}"
        assert error.hint_for(surface) == shown[surface]
    assert (type(error), error.args, str(error), repr(sorted(vars(error).items()))) == before
    assert len(set(shown.values())) == 3, shown  # each surface its own words
    assert not MAGIC_WORDS.search(shown["python"]) and "acp-notebook" not in shown["python"]
    assert not MAGIC_WORDS.search(shown["cli"]) and not PYTHON_WORDS.search(shown["cli"]), shown["cli"]
    assert not PYTHON_WORDS.search(shown["magic"]), shown["magic"]
    return shown


def test_a_missing_capability(tmp_path):
    with acpnb.start(DemoAgent(), cwd=tmp_path) as agent, pytest.raises(acpnb.CapabilityError) as raised:
        agent.logout()
    assert raised.value.remedy == remedies.Remedy("show_capabilities", {"part": "auth"})
    shown = shown_everywhere(raised.value)
    assert shown["python"] == "agent.capabilities['auth'] shows what it offers."
    assert shown["magic"] == "%acp log --method initialize shows what the agent offers."
    assert shown["cli"].startswith("`acp-notebook agents --check NAME`")


def test_an_unknown_session(tmp_path):
    with acpnb.start(DemoAgent(), cwd=tmp_path) as agent, pytest.raises(acpnb.RpcError) as raised:
        agent.load_session("no-such-session")
    assert raised.value.not_found and raised.value.remedy == remedies.Remedy("list_sessions")
    shown = shown_everywhere(raised.value)
    assert "agent.list_sessions()" in shown["python"] and "%acp sessions lists them" in shown["magic"]


def test_a_directory_that_does_not_exist(tmp_path):
    with pytest.raises(acpnb.AgentStartError) as raised:
        acpnb.start(DemoAgent(), cwd=tmp_path / "gone")
    shown = shown_everywhere(raised.value)
    assert "as cwd=" in shown["python"] and "%acp start ... --cwd DIR" in shown["magic"]
    assert "with --cwd DIR" in shown["cli"]
    with acpnb.start(DemoAgent(), cwd=tmp_path) as agent, pytest.raises(acpnb.AcpError) as raised:
        agent.new_session(cwd=tmp_path / "gone")
    assert raised.value.remedy == remedies.Remedy("existing_directory", {"what": "session"})
    assert "%acp new --cwd DIR" in shown_everywhere(raised.value)["magic"]


def test_a_terminal_login(login_env):  # noqa: F811
    with acpnb.start(LOGIN_AGENT, env=login_env, name="login") as agent:
        with pytest.raises(acpnb.AcpError) as raised:
            agent.authenticate("tui")
        command = agent.terminal_login_command("tui")
    assert raised.value.remedy == remedies.Remedy("terminal_login", {"method": "tui", "command": command})
    shown = shown_everywhere(raised.value)
    assert shown["python"] == f"Run this in a terminal, then start the agent again: {command}"
    assert shown["magic"].startswith(shown["python"]) and "%acp auth tui runs it in the cell" in shown["magic"]
    assert shown["cli"] == f"Run this in a terminal, then run the command again: {command}"


def test_a_system_prompt_mode_the_agent_does_not_offer(tmp_path):
    path = write_recording(tmp_path / "append-only.acp.jsonl", [],
                           capabilities={"sessionCapabilities": {"systemPrompt": {}}})
    with acpnb.replay(path) as agent:
        agent.system_prompt, agent.system_prompt_mode = "Replace yourself", "override"
        with pytest.raises(acpnb.CapabilityError) as raised:
            agent.new_session()
    shown = shown_everywhere(raised.value)
    assert shown["python"] == "Use system_prompt_mode='append', which adds to the agent's own instructions."
    assert shown["magic"] == ("Set %config AcpMagics.system_prompt_mode = 'append', which adds to the agent's own "
                              "instructions.")
    assert shown["cli"] == "This agent takes a system prompt in 'append' mode only."


def test_the_magics_show_an_error_in_their_words_and_leave_it_as_raised(shell, tmp_path):  # noqa: F811
    with pytest.raises(acpnb.AgentStartError) as raised:
        run(shell, f"%acp start demo --cwd {tmp_path / 'gone'}")
    shown = raised.value
    assert shown.hint == shown.hint_for("magic") and "%acp start ... --cwd DIR" in str(shown)
    assert "%acp start ... --cwd DIR" in "\n".join(shown._render_traceback_())
    original = shown.__context__  # what the core raised, which the magic caught and showed as a copy
    assert type(original) is type(shown) and original is not shown and original.message == shown.message
    assert original.hint == "Pass an existing directory as cwd=, or create it first." and original.surface == "python"


def test_a_remedy_is_a_fact_that_cannot_change_once_raised():
    fix = remedies.Remedy("pick_auth_method", {"methods": ["a", "b"]})
    with pytest.raises(TypeError):
        fix.args["methods"] = ["c"]  # type: ignore[index]
    with pytest.raises(ValueError, match="no remedy action 'reboot'"):
        remedies.Remedy("reboot")
    error = errors.AcpError("agent 'x' has no auth method 'c'", remedy=fix)
    assert shown_everywhere(error)["magic"] == "Its auth methods are: a, b (%acp auth METHOD uses one)."
    # It still crosses a process boundary (a sweep's Ray worker sends its errors back pickled).
    again = pickle.loads(pickle.dumps(error))
    assert again.remedy == fix and again.hint_for("magic") == error.hint_for("magic")
    with pytest.raises(TypeError):
        again.remedy.args.update(methods=["c"])


def test_words_given_by_a_surface_go_on_a_copy():
    error = errors.ConfigOptionError("'x' is not a choice of 'model'", config_id="model", value="x", valid=["a"],
                                     hint="Valid values: a.")
    copy = error.reworded("%acp set applied mode=fast, then stopped: ...", hint="The panel shows the settings.")
    assert (copy.message, copy.hint, copy.hint_for("magic"), copy.config_id) == (
        "%acp set applied mode=fast, then stopped: ...", "The panel shows the settings.",
        "The panel shows the settings.", "model")
    assert (error.message, error.hint, error.args) == ("'x' is not a choice of 'model'", "Valid values: a.",
                                                       ("'x' is not a choice of 'model'",))


def test_an_unknown_agent_and_a_missing_program_are_worded_per_surface(tmp_path):
    with pytest.raises(acpnb.AgentStartError) as unknown:
        acpnb.start("zzqx-no-such-agent", cwd=tmp_path)
    error = unknown.value
    assert error.remedy is not None and error.remedy.action == "known_agent"
    assert "acpnb.register" in error.hint_for("python") and "%acp" not in error.hint_for("python")
    assert "%acp start -- python agent.py" in error.hint_for("magic")
    assert "`acp-notebook agents`" in error.hint_for("cli") and "%acp" not in error.hint_for("cli")
    from acp_notebook.launch import AgentSpec, unknown_agent

    in_proxy = unknown_agent("zzqx", proxy_name="b")
    assert "%acp proxy b='python agent.py'" in in_proxy.hint_for("magic")
    assert "AgentSpec" in in_proxy.hint_for("python")
    missing = AgentSpec(name="ghost", command=["zzqx-ghost-program"], description="a program that is not there")
    with pytest.raises(acpnb.AgentStartError) as absent:
        missing.resolve()
    assert "%acp start -- /path/to/zzqx-ghost-program" in absent.value.hint_for("magic")
    assert "instead of 'ghost'" in absent.value.hint_for("cli")
    assert absent.value.hint == absent.value.hint_for("python") and "%acp" not in absent.value.hint
