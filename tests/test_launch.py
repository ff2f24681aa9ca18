"""The agent registry: built-in entries, register(), the user TOML file, spec resolution; the tour and agents CLI."""

from __future__ import annotations

import subprocess
import sys

import pytest

import acp_notebook as acpnb
from acp_notebook import launch


def test_builtin_agents_are_registered_with_pinned_packages():
    table = acpnb.agents()
    assert list(table)[:5] == ["demo", "claude", "codex", "gemini", "opencode"]
    assert table["demo"].installed and table["demo"].can_start
    assert table["claude"].spec.npm_package == "@agentclientprotocol/claude-agent-acp@0.101.0"
    assert table["opencode"].spec.npm_package == "opencode-ai@1.18.33"
    assert table["gemini"].spec.command == ("gemini", "--acp")
    assert "ANTHROPIC_API_KEY" in table["claude"].spec.env_vars
    assert "<table>" in table._repr_html_()


def test_missing_program_falls_back_to_npx_or_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("ACP_NOTEBOOK_AGENT_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # neither the agent nor npx can be found
    with pytest.raises(acpnb.AgentStartError, match="not installed") as info:
        launch.registered("claude").resolve()
    assert "npm install -g @agentclientprotocol/claude-agent-acp@0.101.0" in info.value.hint
    fake_npx = tmp_path / "npx"
    fake_npx.write_text("#!/bin/sh\n")
    fake_npx.chmod(0o755)
    assert launch.registered("gemini").resolve() == ["npx", "-y", "@google/gemini-cli@0.61.0", "--acp"]
    assert acpnb.agents()["gemini"].how.startswith("npx")


@pytest.fixture
def private_registry():
    """Agents registered (and user files read) by a test are forgotten after it."""
    with launch.registry.overlay():
        yield


def test_register_and_resolve_specs(private_registry):
    acpnb.register("mine", "python -m acp_notebook.demo --delay 0", env={"X": "1"})
    name, argv, env = launch.resolve_spec("mine", {"Y": "2"})
    assert (name, argv[-2:], env) == ("mine", ["--delay", "0"], {"X": "1", "Y": "2"})
    assert launch.resolve_spec(["python3", "agent.py"])[:2] == ("python3", ["python3", "agent.py"])
    assert launch.resolve_spec("python3 agent.py --flag")[1] == ["python3", "agent.py", "--flag"]
    with pytest.raises(ValueError, match="single words"):
        acpnb.register("a:b", ["x"])
    with pytest.raises(ValueError, match="cannot be empty"):
        acpnb.register("empty", [])
    with pytest.raises(TypeError, match=r"an agent command is a command line \(str\) or an argv list, not int"):
        acpnb.register("number", 5)  # it said "'int' object is not iterable"
    assert launch.registered("number") is None


@pytest.mark.parametrize(("env", "says"), [
    ({"PORT": 8080}, r"acpnb.start: env\['PORT'\] is of type int; environment values are strings"),
    ({"API_KEY": None}, r"env\['API_KEY'\] is None; leave 'API_KEY' out to not set it"),
    (["A=1"], r"env maps variable names to string values \(a dict\), not list"),
    ({"A=B": "x"}, r"env has the name 'A=B'; a variable's name is a non-empty string without '='"),
])
def test_an_environment_that_is_not_strings_is_refused_before_the_spawn(env, says):
    # The spawn said "expected str, bytes or os.PathLike object, not int", naming no variable.
    with pytest.raises(TypeError, match=says) as refused:
        acpnb.start("demo", env=env)
    assert "8080" not in str(refused.value)  # a value is never shown: it may be a key


def test_a_registered_env_must_be_strings_too(private_registry):
    with pytest.raises(TypeError, match=r"acpnb.register: env\['A'\] is of type float"):
        acpnb.register("floaty", "python agent.py", env={"A": 1.5})
    assert launch.registered("floaty") is None


@pytest.mark.parametrize(("typed", "meant"), [("dmeo", "demo"), ("Claude", "claude"), ("opencod", "opencode")])
def test_a_mistyped_agent_name_suggests_the_registered_one(typed, meant):
    with pytest.raises(acpnb.AgentStartError, match=rf"unknown agent '{typed}' \(did you mean '{meant}'\?\)"):
        acpnb.start(typed)
    with pytest.raises(acpnb.AgentStartError, match=rf"\(for 'b' in the proxy\) \(did you mean '{meant}'\?\)"):
        acpnb.start_proxy({"b": typed})


def test_a_name_close_to_none_gets_no_guess():
    with pytest.raises(acpnb.AgentStartError) as refused:
        acpnb.start("zzqx")
    assert str(refused.value).splitlines()[0] == "unknown agent 'zzqx'"


def test_user_toml_file_adds_agents(private_registry, monkeypatch, tmp_path):
    path = tmp_path / "agents.toml"
    path.write_text(f'[agents.local]\ncommand = ["{sys.executable}", "-m", "acp_notebook.demo"]\n'
                    'description = "my copy"\nenv = { ACP_DEMO_DELAY = "0" }\n')
    monkeypatch.setenv("ACP_NOTEBOOK_AGENTS_FILE", str(path))
    table = acpnb.agents()
    assert table["local"].spec.description == "my copy"
    assert table["local"].spec.env == {"ACP_DEMO_DELAY": "0"}
    with acpnb.start("local", cwd=tmp_path) as agent:
        assert agent.info["name"] == "acp-notebook-demo"
    broken = tmp_path / "broken.toml"  # the file is read again when its path changes
    broken.write_text("[agents.broken\n")
    monkeypatch.setenv("ACP_NOTEBOOK_AGENTS_FILE", str(broken))
    with pytest.raises(ValueError, match="not valid TOML"):
        acpnb.agents()


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "acp_notebook.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_cli_tour_runs_the_demo_agent_end_to_end():
    done = run_cli("tour", "--delay", "0")
    assert done.returncode == 0, done.stderr
    assert "new option(s): thought_level" in done.stdout
    assert "title, from session_info_update: 'Tell me about tide pools'" in done.stdout
    assert "read:completed" in done.stdout


@pytest.mark.parametrize(("args", "says"), [
    (["tour", "--delay", "-1"], "argument --delay: expected a number of seconds, 0 or more, not '-1'"),
    (["proxy", "--agent", "a=demo", "--probe-timeout", "-1"], "argument --probe-timeout: expected a number of "
                                                              "seconds, 0 or more, not '-1'"),
    (["proxy", "--agent", "a=demo", "--start-timeout", "0"], "expected a number of seconds, more than 0, not '0'"),
    (["replay", "x.jsonl", "--speed", "nan"], "argument --speed: expected a number, more than 0, not 'nan'"),
    (["agents", "--check", "--timeout", "soon"], "argument --timeout: expected a number of seconds, not 'soon'"),
    (["sweep", "--model", "demo:fast", "--prompt", "hi", "--timeout", "nan"], "more than 0, not 'nan'"),
    (["sweep", "--model", "demo:fast", "--prompt", "hi", "--retries", "-1"], "expected a whole number, at least 0"),
])
def test_numbers_out_of_range_are_usage_errors_of_the_command_that_took_them(args, says):
    # The tour's --delay used to reach the demo agent, whose refusal read as a start failure of "this ACP agent".
    done = run_cli(*args)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_cli_agents_and_usage_errors():
    listed = run_cli("agents")
    assert listed.returncode == 0 and "demo" in listed.stdout and "opencode" in listed.stdout
    unknown = run_cli("frobnicate")
    assert unknown.returncode == 2 and "unknown command 'frobnicate'" in unknown.stderr
