"""Registry entries of the four third-party agents, what is missing to use them, and the client's
authentication from a key in the environment (checked against a small fake agent; the real agents
are in tests/interop/)."""

from __future__ import annotations

import asyncio
import re
import sys
import textwrap
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook import launch
from acp_notebook._loop import run_sync

ROOT = Path(__file__).resolve().parent.parent

PINNED = {
    "claude": "@agentclientprotocol/claude-agent-acp@0.101.0",
    "opencode": "opencode-ai@1.18.33",
    "codex": "@agentclientprotocol/codex-acp@2.6.0",
    "gemini": "@google/gemini-cli@0.61.0",
}


def test_registry_pins_the_versions_the_install_script_installs():
    script = (ROOT / "scripts" / "install-agents.sh").read_text()
    installed = dict(re.findall(r'^\s*"(\w+)\|([^|]+)\|', script, re.MULTILINE))
    assert installed == PINNED
    for name, package in PINNED.items():
        spec = launch.registered(name)
        assert spec.npm_package == package
        assert spec.version == package.rsplit("@", 1)[1]


def test_launch_commands_and_auth_of_the_real_agents():
    claude, opencode, codex, gemini = (launch.registered(n) for n in ("claude", "opencode", "codex", "gemini"))
    assert claude.command == ("claude-agent-acp",) and claude.auth_env == {}
    assert opencode.command == ("opencode", "acp") and opencode.args == ("acp",)
    assert gemini.command == ("gemini", "--acp") and gemini.args == ("--acp",)
    # codex-acp 2.x is a node adapter that ends its `codex app-server` when its stdin closes.
    assert codex.command == ("codex-acp",) and codex.cache_paths == ("node_modules/.bin/codex-acp",)
    assert codex.auth_env == {"CODEX_API_KEY": "api-key", "OPENAI_API_KEY": "api-key"}
    assert "npm_config_registry" in opencode.offline_env
    assert claude.offline_env == {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}


def test_a_cached_install_is_preferred_to_path_and_npx(monkeypatch, tmp_path):
    cache = tmp_path / "cache"
    binary = cache / "codex" / launch.registered("codex").cache_paths[0]
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.setenv("ACP_NOTEBOOK_AGENT_CACHE", str(cache))
    assert launch.registered("codex").resolve() == [str(binary)]
    assert acpnb.agents()["codex"].installed


def test_a_missing_package_names_the_package_and_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("ACP_NOTEBOOK_AGENT_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))  # neither the agent nor npx
    for name, package in PINNED.items():
        with pytest.raises(acpnb.AgentStartError) as info:
            acpnb.start(name, cwd=tmp_path, timeout=5)  # what `%acp start NAME` calls
        message = str(info.value)
        assert f"cannot start agent '{name}'" in message
        assert f"npm package {package}) is not installed, and npx is not available" in message
        assert f"npm install -g {package}" in info.value.hint
        assert f"scripts/install-agents.sh {name}" in info.value.hint
        status = acpnb.agents()[name]
        assert not status.can_start and status.missing.startswith("the package: ")


def test_what_is_missing_key_or_login(monkeypatch, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    for var in launch.registered("claude").key_vars + launch.registered("codex").key_vars:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    claude = launch.registered("claude")
    status = launch.AgentStatus("claude", claude, True, "installed", ["claude-agent-acp"])
    assert status.missing == f"a key or login: {claude.login_hint}"
    assert "ANTHROPIC_API_KEY" in status.missing and "/login" in status.missing
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert status.missing is None and claude.key_found() == "$ANTHROPIC_API_KEY"
    codex = launch.registered("codex")
    assert codex.key_found() is None
    (home / ".codex").mkdir()
    (home / ".codex" / "auth.json").write_text("{}")
    assert codex.key_found() == "~/.codex/auth.json"
    assert launch.registered("demo").key_found() == "none needed"
    assert "missing" in acpnb.agents()._repr_html_()


def test_auth_hints_say_what_to_set():
    methods = [{"id": "api-key"}, {"id": "chat-gpt"}]
    hint = launch.auth_hint(launch.registered("codex"), methods)
    assert hint.startswith("Agent 'codex' needs a key or a login: set OPENAI_API_KEY or CODEX_API_KEY")
    assert "Its auth methods: api-key, chat-gpt" in hint
    assert launch.auth_hint(None, methods).startswith("The agent needs authentication; its auth methods")
    assert launch.auth_hint(None, []) is None
    assert "GEMINI_API_KEY" in launch.auth_hint(launch.registered("gemini"), [])


def test_auto_auth_picks_the_first_offered_method_whose_key_is_set():
    codex = launch.registered("codex")
    offered = [{"id": "api-key"}, {"id": "chat-gpt"}]
    assert launch.auto_auth_method(codex, offered, {"OPENAI_API_KEY": "k"}) == ("api-key", "OPENAI_API_KEY")
    both = {"OPENAI_API_KEY": "k", "CODEX_API_KEY": "c"}
    assert launch.auto_auth_method(codex, offered, both) == ("api-key", "CODEX_API_KEY")
    assert launch.auto_auth_method(codex, offered, {"OPENAI_API_KEY": ""}) is None
    assert launch.auto_auth_method(codex, [{"id": "chatgpt"}], {"OPENAI_API_KEY": "k"}) is None
    assert launch.auto_auth_method(None, offered, {"OPENAI_API_KEY": "k"}) is None


def test_new_fields_survive_the_proxy_command_line():
    from acp_notebook.proxy.cli import decode_spec, encode_spec

    for name in ("claude", "codex", "opencode"):
        spec = launch.registered(name)
        decoded, _ = decode_spec(encode_spec(spec))
        assert decoded == spec


# --- the client's authentication from the environment, against a fake agent ---------------------

FAKE_AGENT = textwrap.dedent('''
    """Wants `authenticate key-a` (which reads FAKE_KEY) before session/new, unless FAKE_LOGGED_IN is set;
    prompts always answer "authentication required"."""
    import asyncio, os
    from acp.connection import Connection
    from acp.exceptions import RequestError
    from acp.stdio import stdio_streams

    state = {"authenticated": bool(os.environ.get("FAKE_LOGGED_IN")), "sessions": 0}

    async def handle(method, params, is_notification):
        if method == "initialize":
            return {"protocolVersion": 1, "agentCapabilities": {}, "agentInfo": {"name": "fake", "version": "1"},
                    "authMethods": [{"id": "login", "name": "Log in"},
                                    {"id": "key-a", "name": "Key", "type": "env_var", "vars": [{"name": "FAKE_KEY"}]}]}
        if method == "authenticate":
            if params["methodId"] == "key-a" and not os.environ.get("FAKE_KEY"):
                raise RequestError(-32603, "Internal error", "FAKE_KEY is not set")
            state["authenticated"] = True
            return {}
        if method == "session/new":
            if not state["authenticated"]:
                raise RequestError(-32000, "Authentication required")
            state["sessions"] += 1
            return {"sessionId": f"s{state['sessions']}"}
        if method == "session/prompt":
            raise RequestError(-32000, "Authentication required")
        if is_notification:
            return None
        raise RequestError.method_not_found(method)

    async def main():
        reader, writer = await stdio_streams()
        await Connection(handle, writer, reader, listening=False).main_loop()

    asyncio.run(main())
''')


@pytest.fixture
def fake_spec(tmp_path):
    script = tmp_path / "fake_agent.py"
    script.write_text(FAKE_AGENT)
    return acpnb.AgentSpec(name="fake", command=(sys.executable, str(script)), auth_env={"FAKE_KEY": "key-a"},
                           key_vars=("FAKE_KEY",), login_hint="set FAKE_KEY, or log in with `fake login`")


def sent_methods(agent: acpnb.Agent) -> list[str]:
    return [e["msg"]["method"] for e in agent.log if e["dir"] == "send" and "method" in e["msg"]]


@pytest.mark.slow
def test_the_key_in_the_environment_authenticates_when_the_agent_asks(fake_spec, tmp_path):
    with acpnb.start(fake_spec, cwd=tmp_path, env={"FAKE_KEY": "k"}, inherit_env=False, timeout=20) as agent:
        assert agent.auth_method is None  # nothing sent before the agent asks
        assert agent.new_session().id == "s1"
        assert agent.auth_method == "key-a"
        assert agent.new_session().id == "s2"
        assert sent_methods(agent) == ["initialize", "session/new", "authenticate", "session/new", "session/new"]
        authenticate = next(e["msg"] for e in agent.log if e["msg"].get("method") == "authenticate")
        assert authenticate["params"] == {"methodId": "key-a"}


@pytest.mark.slow
def test_concurrent_sessions_share_one_authentication(fake_spec, tmp_path):
    with acpnb.start(fake_spec, cwd=tmp_path, env={"FAKE_KEY": "k"}, inherit_env=False, timeout=20) as agent:
        async def two_sessions():
            return await asyncio.gather(agent.anew_session(), agent.anew_session())

        sessions = run_sync(two_sessions(), 20)
        assert sorted(s.id for s in sessions) == ["s1", "s2"]
        assert sent_methods(agent).count("authenticate") == 1


@pytest.mark.slow
def test_an_existing_login_is_kept(fake_spec, tmp_path):
    env = {"FAKE_KEY": "k", "FAKE_LOGGED_IN": "1"}
    with acpnb.start(fake_spec, cwd=tmp_path, env=env, inherit_env=False, timeout=20) as agent:
        agent.new_session()
        assert "authenticate" not in sent_methods(agent) and agent.auth_method is None


@pytest.mark.slow
def test_without_a_key_the_error_says_what_to_set(fake_spec, tmp_path):
    with acpnb.start(fake_spec, cwd=tmp_path, inherit_env=False, timeout=20) as agent:
        with pytest.raises(acpnb.RpcError) as info:
            agent.new_session()
        assert info.value.code == -32000
        assert info.value.hint.startswith("Agent 'fake' needs a key or a login: set FAKE_KEY, or log in")
        assert "Its auth methods: login, key-a" in info.value.hint
        assert "authenticate" not in sent_methods(agent)
        # The user can still authenticate by hand, then open sessions.
        agent.authenticate("login")
        assert agent.new_session().id == "s1"


@pytest.mark.slow
def test_prompts_are_never_sent_twice(fake_spec, tmp_path):
    env = {"FAKE_KEY": "k", "FAKE_LOGGED_IN": "1"}
    with acpnb.start(fake_spec, cwd=tmp_path, env=env, inherit_env=False, timeout=20) as agent:
        session = agent.new_session()
        with pytest.raises(acpnb.RpcError) as info:
            session.prompt("hi", timeout=20)
        assert "needs a key or a login: set FAKE_KEY" in info.value.hint
        assert sent_methods(agent).count("session/prompt") == 1 and "authenticate" not in sent_methods(agent)


@pytest.mark.slow
def test_plain_commands_get_the_generic_hint(fake_spec, tmp_path):
    with acpnb.start(list(fake_spec.command), cwd=tmp_path, env={"FAKE_KEY": "k"}, inherit_env=False,
                     timeout=20) as agent:
        with pytest.raises(acpnb.RpcError) as info:
            agent.new_session()  # no AgentSpec, so no auth_env: nothing is sent on the user's behalf
        assert "authenticate" not in sent_methods(agent)
        assert info.value.hint == ("The agent needs authentication; its auth methods: login, key-a "
                                   "(agent.authenticate(method_id) picks one).")


# --- `acp-notebook agents --check` with the demo agent and agents that are not installed -------------

def run_cli(*args: str, env: dict[str, str] | None = None):
    import subprocess

    return subprocess.run([sys.executable, "-m", "acp_notebook.cli", "agents", *args], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env)


def test_check_of_the_demo_agent():
    from acp_notebook.agents_cli import check_agents

    table = check_agents(["demo"])
    (row,) = table
    assert row.ok and row.starts.startswith("yes (") and row.session_new.startswith("yes (")
    assert row.config_options == ["model", "mode", "tone", "show_thoughts"]
    assert row.set_works == "yes: model=smart" and row.auth == "none needed"
    text = table.text(400)  # wide enough for every cell on one line
    assert text.splitlines()[0].split() == ["agent", "version", "starts", "session/new", "config", "options",
                                            "set", "works", "auth"]
    assert "<th>session/new</th>" in table._repr_html_() and "yes: model=smart" in table._repr_html_()


def test_check_of_agents_that_are_not_installed(monkeypatch, tmp_path):
    from acp_notebook.agents_cli import check_agents

    monkeypatch.setenv("ACP_NOTEBOOK_AGENT_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    rows = check_agents(["claude", "codex"])
    assert [(r.installed, r.ok, r.starts, r.pinned) for r in rows] == [
        (False, False, "not installed", "0.101.0"), (False, False, "not installed", "2.6.0")]
    fake_npx = tmp_path / "npx"
    fake_npx.write_text("#!/bin/sh\nexit 1\n")
    fake_npx.chmod(0o755)
    (row,) = check_agents(["gemini"])  # npx would download it: the check does not run it
    assert row.starts == "not installed (npx (downloads on first start))"


@pytest.mark.slow
def test_agents_cli_check_json_and_usage_errors(tmp_path):
    import json
    import os

    env = {**os.environ, "ACP_NOTEBOOK_AGENT_CACHE": str(tmp_path), "PATH": str(Path(sys.executable).parent)}
    done = run_cli("--check", "--json", "demo", "claude", env=env)
    assert done.returncode == 0, done.stderr  # a missing agent is not a failure of the check
    demo, claude = json.loads(done.stdout)
    assert demo["ok"] and demo["set_works"] == "yes: model=smart" and not claude["installed"]
    listed = run_cli(env={**env, "COLUMNS": "400"})  # a terminal wide enough for every cell on one line
    assert listed.returncode == 0 and "missing" in listed.stdout.splitlines()[0]
    assert "the package: Install it with `npm install -g @agentclientprotocol/claude-agent-acp@0.101.0`" in listed.stdout
    assert run_cli("--check", "nobody").returncode == 2
    mistyped = run_cli("--check", "gemni")
    assert mistyped.returncode == 2 and "unknown agent(s): gemni (did you mean 'gemini'?)" in mistyped.stderr
    assert run_cli("--json").returncode == 2


@pytest.mark.parametrize(("euid", "value", "expected"), [
    (0, "yes", {"IS_SANDBOX": "1"}), (0, "1", {}), (0, None, {}), (0, "", {}), (1000, "yes", {})])
def test_claude_gets_is_sandbox_1_when_root_says_sandbox_otherwise(monkeypatch, euid, value, expected):
    monkeypatch.setattr(launch.os, "geteuid", lambda: euid)
    if value is None:
        monkeypatch.delenv("IS_SANDBOX", raising=False)
    else:
        monkeypatch.setenv("IS_SANDBOX", value)
    assert launch._claude_env() == expected
