"""Every hint in the syntax of where the user is (issue 28, points 7 and 8's naming).

Errors carry a remedy, worded once per surface in remedies.py (AcpError.hint_for / in_terms_of); the
magics pick the magic words, the command line the CLI words, Python keeps the Python words. Checked through each surface for real: a CLI
subprocess, %acp in an IPython shell, the public API.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook import errors
from acp_notebook._protocol import AUTH_REQUIRED, RESOURCE_NOT_FOUND
from tests.test_magics import AGENTS, run, shell  # noqa: F401 - shell is a fixture

ROOT = Path(__file__).resolve().parents[1]
PYTHON_SYNTAX = re.compile(r"acpnb\.|agent\.\w+\(|\w+=\s*[,.)]|\['")  # calls, keyword arguments, argv lists
MAGIC_SYNTAX = re.compile(r"%acp|%config")


def test_cli_errors_speak_cli():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "acp_notebook.cli", "tour", "--agent", "nosuch"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "`acp-notebook agents` lists the registered agents" in done.stderr
    assert not PYTHON_SYNTAX.search(done.stderr) and "register(" not in done.stderr and "%acp" not in done.stderr


def test_magic_errors_speak_magics(shell):  # noqa: F811
    with pytest.raises(acpnb.AgentStartError) as raised:
        run(shell, "%acp start nosuch")
    assert "%acp start -- python agent.py" in raised.value.hint and not PYTHON_SYNTAX.search(raised.value.hint)
    assert "%acp start -- python agent.py" in str(raised.value)  # what IPython shows is the same form


@pytest.mark.parametrize("error", [
    errors.AgentExitedError("the agent exited"),
    errors.AgentClosedError("closed"),
    errors.AcpTimeoutError("slow"),
    errors.RpcError(RESOURCE_NOT_FOUND, "Resource not found", method="session/load"),
    errors.RpcError(AUTH_REQUIRED, "Authentication required", method="session/new"),
], ids=lambda e: type(e).__name__ + (f"-{e.code}" if isinstance(e, errors.RpcError) else ""))
def test_each_error_has_a_form_per_surface(error):
    python = error.hint
    assert PYTHON_SYNTAX.search(python) or "timeout=" in python
    magic = error.in_terms_of("magic").hint
    assert MAGIC_SYNTAX.search(magic) and not PYTHON_SYNTAX.search(magic), magic
    assert error.in_terms_of("python").hint == python  # the forms are kept, not overwritten
    if "cli" in error.hints:
        cli = error.in_terms_of("cli").hint
        assert not PYTHON_SYNTAX.search(cli) and not MAGIC_SYNTAX.search(cli), cli


def test_a_hint_changed_on_one_surface_is_kept_for_it():
    error = errors.ConfigOptionError("bad value", hint="Valid values: a, b.")
    error.hint += " The panel shows the settings in force."  # as the magics add to it
    assert error.in_terms_of("magic").hint == "Valid values: a, b. The panel shows the settings in force."


@pytest.mark.slow
def test_a_command_agent_that_never_answers_is_named_by_its_program_without_npx_advice(shell):  # noqa: F811
    # It reads and never answers, and ends at EOF as agents do (a sleeping one would cost the 2 s close grace).
    with pytest.raises(acpnb.AgentStartError) as raised:
        run(shell, f"%acp start --timeout 1 -- {sys.executable} -c 'import sys; sys.stdin.read()'")
    assert re.match(r"agent 'python[\d.]*' did not answer initialize within 1 s", raised.value.message)
    assert "npx" not in raised.value.hint and "%acp start --timeout SECONDS -- COMMAND" in raised.value.hint


def test_npx_agents_get_the_first_start_advice():
    from acp_notebook.connection.core import _silent_start_remedy
    from acp_notebook.remedies import phrase

    npx = _silent_start_remedy(["/usr/bin/npx", "-y", "@zed-industries/claude-agent-acp"])
    assert "npx" in phrase(npx, "python") and "%acp start claude --timeout 180" in phrase(npx, "magic")
    assert "agents --check NAME --timeout 180" in phrase(npx, "cli")
    other = _silent_start_remedy(["python", "agent.py"])
    assert all("npx" not in phrase(other, surface) for surface in errors.SURFACES)


@pytest.mark.parametrize("error", [
    errors.AcpTimeoutError("slow"),
    errors.RpcError(RESOURCE_NOT_FOUND, "Resource not found", {"x": 1}, method="session/load"),
    errors.AgentStartError("no", command=["a"], exit_code=3, stderr_tail=["boom"]),
], ids=lambda e: type(e).__name__)
def test_an_error_shown_elsewhere_keeps_its_type_and_fields_and_renders_as_one_line(error, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    shown = error.shown_elsewhere("in the reply above")
    assert type(shown) is type(error) and shown.message == error.message and shown.hint == error.hint
    assert {k: v for k, v in vars(shown).items() if k != "shown_in"} == vars(error)
    assert shown._render_traceback_() == [f"{type(error).__name__}: shown in the reply above"]
    assert error._render_traceback_()[0].startswith(f"{type(error).__name__}: {error.message}")  # the original: in full
