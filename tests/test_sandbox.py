"""sandbox="bwrap", as an attacker would test it: an agent with its own file and socket calls (not the client's
fs/*) tries to write outside its trial's workspace, read a key in ~/.ssh, and reach a port this test listens
on; each is refused and nothing outside changes, while its workspace and its state folder stay writable. Command
checks run in the same sandbox. Where bwrap is missing or cannot make a sandbox, the error names the package."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook import launch
from acp_notebook.sandbox import SandboxUnavailable, check_bwrap
from acp_notebook.sweep import command

AGENT = Path(__file__).parent / "sweep_agents" / "escape_agent.py"


def _bwrap_or_skip() -> None:
    try:
        check_bwrap()
    except SandboxUnavailable as exc:
        if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
            pytest.fail(f"CI installs bubblewrap (scripts/install-test-deps.sh): {exc}", pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture()
def outside_tmp():
    """A folder outside /tmp (the sandbox's /tmp is a private one, so files under the host's /tmp would just be
    absent there, proving nothing about read-only or hidden paths): /var/tmp, removed after."""
    root = Path(tempfile.mkdtemp(prefix="acpnb-sandbox-test-", dir="/var/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def hostile(outside_tmp, monkeypatch):
    """A fake HOME with a key in .ssh, a folder outside every workspace, a listening port, the escape agent."""
    _bwrap_or_skip()
    tmp_path = outside_tmp
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("SECRET-KEY-MATERIAL\n")
    monkeypatch.setenv("HOME", str(home))
    outside = tmp_path / "outside"
    outside.mkdir()
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "README.md").write_text("a project\n")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    with launch.registry.overlay():
        launch.register("escape", launch.AgentSpec(name="escape", command=(sys.executable, str(AGENT)),
                                                   state_dirs=("~/.escape-state",)))
        yield {"home": home, "outside": outside, "workspace": workspace, "listener": listener,
               "plan": {"outside": str(outside / "pwned.txt"), "secret": str(home / ".ssh" / "id_ed25519"),
                        "port": listener.getsockname()[1], "state": str(home / ".escape-state" / "note")}}
    listener.close()


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _connections(listener: socket.socket) -> int:
    count = 0
    while True:
        try:
            link, _ = listener.accept()
        except BlockingIOError:
            return count
        link.close()
        count += 1


@pytest.mark.slow
def test_a_sandboxed_agent_cannot_write_outside_read_ssh_or_reach_the_network(hostile, tmp_path):
    home_before, outside_before = _tree(hostile["home"]), _tree(hostile["outside"])
    escape_check = command(f"touch {hostile['outside']}/check.txt; test ! -e {hostile['outside']}/check.txt",
                           name="contained")
    result = acpnb.sweep([json.dumps(hostile["plan"])], ["escape:fast"], workspace=hostile["workspace"],
                         scorers=[escape_check], sandbox="bwrap", network=False, keep_workspaces=True,
                         out=tmp_path / "run", progress=False)
    (row,) = result.rows
    assert row["status"] == "ok", row["error"]
    report = json.loads(row["text"])
    assert report["outside"].startswith("refused: OSError: Read-only file system"), report
    assert report["secret"].startswith("refused") and "SECRET" not in row["text"], report  # an empty folder
    assert report["port"].startswith("refused"), report  # no network at all: not even 127.0.0.1
    assert report["inside"] == "done" and report["state"] == "done", report  # its workspace and its state folder
    assert row["score_contained"] == 1.0, row["explanation_contained"]  # the check ran in the same sandbox
    assert _connections(hostile["listener"]) == 0
    assert _tree(hostile["outside"]) == outside_before
    home_after = _tree(hostile["home"])
    assert home_after.pop(".escape-state/note") == b"state\n" and home_after == home_before
    workspace = Path(row["workspace_path"])
    assert (workspace / "inside.txt").read_text() == "the agent was here\n"
    assert _tree(hostile["workspace"]) == {"README.md": b"a project\n"}  # the source itself untouched
    assert result.metadata["parameters"]["sandbox"] == {"kind": "bwrap", "network": False}


@pytest.mark.slow
def test_the_network_is_kept_by_default(hostile):
    plan = {"port": hostile["plan"]["port"]}
    result = acpnb.sweep([json.dumps(plan)], ["escape:fast"], workspace=hostile["workspace"], sandbox="bwrap",
                         progress=False)
    assert json.loads(result.rows[0]["text"])["port"] == "done"
    assert _connections(hostile["listener"]) == 1  # the control: the refusal above is the sandbox's


@pytest.mark.slow
def test_bwrap_trial_gives_each_trial_its_own_agent_process(hostile):
    result = acpnb.sweep([json.dumps({}), json.dumps({"x": 1}), json.dumps({"x": 2})], ["escape:fast"],
                         workspace=hostile["workspace"], sandbox="bwrap-trial", concurrency=1, progress=False)
    assert [r["status"] for r in result.rows] == ["ok", "ok", "ok"]
    facts = result.metadata["agents"]["escape"]
    assert facts["processes"] == 3 and facts["command"][0].endswith("bwrap")


def _path_without_bwrap(tmp_path: Path) -> str:
    """PATH with every folder that holds bwrap replaced by a copy of its other programs' links."""
    folders = []
    for folder in os.environ["PATH"].split(os.pathsep):
        if folder and (Path(folder) / "bwrap").exists():
            shadow = tmp_path / f"shadow{len(folders)}"
            shadow.mkdir()
            for program in Path(folder).iterdir():
                if program.name != "bwrap":
                    (shadow / program.name).symlink_to(program)
            folder = str(shadow)
        folders.append(folder)
    return os.pathsep.join(folders)


def test_without_bwrap_the_error_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", _path_without_bwrap(tmp_path))
    with pytest.raises(SandboxUnavailable, match=r"not on PATH: install the bubblewrap package \(Debian/Ubuntu: "
                                                  r"apt-get install bubblewrap"):
        acpnb.sweep(["hi"], ["demo:fast"], sandbox="bwrap", progress=False)
    done = subprocess.run([sys.executable, "-m", "acp_notebook.cli", "sweep", "-m", "demo:fast", "--prompt", "hi",
                           "--sandbox", "bwrap", "--no-progress"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "install the bubblewrap package" in done.stderr, done.stderr


def test_a_bwrap_that_cannot_make_a_sandbox_is_named_with_what_it_said(tmp_path, monkeypatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(SandboxUnavailable, match=r"cannot make a sandbox on this machine \(bwrap: No permissions") as e:
        acpnb.sweep(["hi"], ["demo:fast"], sandbox="bwrap", progress=False)
    assert "bubblewrap" in e.value.hint


def test_sandbox_arguments_are_checked():
    with pytest.raises(ValueError, match=r"sandbox= is 'bwrap' \(bubblewrap\), 'bwrap-trial', 'bwrap-shared' or "
                                         r"None, not 'docker'"):
        acpnb.sweep(["hi"], ["demo:fast"], sandbox="docker", progress=False)
    with pytest.raises(ValueError, match=r"network=False cuts the network inside a sandbox"):
        acpnb.sweep(["hi"], ["demo:fast"], network=False, progress=False)


@pytest.mark.slow
def test_acpnb_start_runs_a_notebook_agent_in_the_sandbox(hostile):
    """The agent's cwd is its workspace; the same attacks from a started agent's session."""
    with acpnb.start("escape", cwd=hostile["workspace"], sandbox="bwrap", network=False) as agent:
        assert agent.command[0].endswith("bwrap")
        report = json.loads(agent.new_session().prompt(json.dumps(hostile["plan"])).text)
    assert report["outside"].startswith("refused: OSError: Read-only file system"), report
    assert report["secret"].startswith("refused") and report["port"].startswith("refused"), report
    assert report["inside"] == "done" and (hostile["workspace"] / "inside.txt").is_file()
    assert not (hostile["outside"] / "pwned.txt").exists() and _connections(hostile["listener"]) == 0
    with pytest.raises(ValueError, match="not DemoAgent"):
        from acp_notebook.demo import DemoAgent

        acpnb.start(DemoAgent(), sandbox="bwrap")


@pytest.mark.slow
def test_the_magic_starts_a_sandboxed_agent(hostile, monkeypatch):
    from IPython.testing import globalipapp
    from IPython.utils.capture import capture_output

    from acp_notebook.magics.grammar import Start, parse_line

    assert parse_line("start escape --sandbox bwrap") == Start("escape", sandbox="bwrap")
    globalipapp.start_ipython()
    ip = globalipapp.get_ipython()
    monkeypatch.chdir(hostile["workspace"])
    ip.run_line_magic("load_ext", "acp_notebook")
    try:
        with capture_output():
            ip.run_line_magic("acp", "start escape --sandbox bwrap")
        session = acpnb.current()
        assert session.agent.command[0].endswith("bwrap")
        report = json.loads(session.prompt(json.dumps({"outside": hostile["plan"]["outside"]})).text)
        assert report["outside"].startswith("refused: OSError: Read-only file system") and report["inside"] == "done"
        with capture_output():
            ip.run_line_magic("acp", "stop --all")
    finally:
        ip.run_line_magic("unload_ext", "acp_notebook")
    assert not (hostile["outside"] / "pwned.txt").exists()


@pytest.mark.slow
def test_a_shared_sandbox_runs_one_agent_writable_in_the_sweeps_workspaces_only(hostile):
    plan = {"outside": hostile["plan"]["outside"], "secret": hostile["plan"]["secret"]}
    result = acpnb.sweep([json.dumps(plan), json.dumps({**plan, "n": 2})], ["escape:fast"],
                         workspace=hostile["workspace"], sandbox="bwrap-shared", progress=False)
    assert [r["status"] for r in result.rows] == ["ok", "ok"], [r["error"] for r in result.rows]
    for row in result.rows:
        report = json.loads(row["text"])
        assert report["inside"] == "done" and report["outside"].startswith("refused: OSError: Read-only"), report
        assert report["secret"].startswith("refused"), report
    assert result.metadata["agents"]["escape"]["processes"] == 1
    assert not (hostile["outside"] / "pwned.txt").exists()
