"""`acp-notebook agents --check` on the four pinned agents: the compatibility table it prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from agent_setups import AGENTS, DUMMY_KEY, agent_cache
from conftest import GONE_TIMEOUT, MARKER_VAR, marked_processes, require_pinned

from acp_notebook import launch
from tests.processes import wait_gone

pytestmark = pytest.mark.interop

ROOT = Path(__file__).resolve().parents[2]


def test_check_reports_each_agent(tmp_path):
    for name in AGENTS:
        require_pinned(name)
    key_vars = {var for name in AGENTS for var in launch.registered(name).key_vars}
    env = {k: v for k, v in os.environ.items() if k not in key_vars}
    marker = uuid.uuid4().hex
    env |= {
        "HOME": str(tmp_path),  # no login files of the user's, so the auth column is the same everywhere
        "ACP_NOTEBOOK_AGENT_CACHE": str(agent_cache()),
        "OPENAI_API_KEY": DUMMY_KEY,  # codex authenticates with it; gemini and claude get no key
        MARKER_VAR: marker,
    }
    done = subprocess.run([sys.executable, "-m", "acp_notebook.cli", "agents", "--check", "--json", "--timeout", "30",
                           *AGENTS], capture_output=True, text=True, env=env, cwd=ROOT, timeout=240)
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert list(rows) == list(AGENTS)
    for name, setup in AGENTS.items():
        row = rows[name]
        assert row["installed"] and row["ok"], row
        assert row["version"] == row["pinned"] == setup.version
        assert row["starts"].startswith("yes ("), row

    claude, opencode, codex, gemini = (rows[n] for n in ("claude", "opencode", "codex", "gemini"))
    assert claude["session_new"].startswith("yes") and claude["config_options"] == ["mode", "model", "effort", "fast", "ultracode"]
    assert claude["set_works"] == "yes: mode=default"  # its sessions start in mode auto
    assert claude["auth"].startswith("prompts need a key or login: set ANTHROPIC_API_KEY")

    # No provider configured: opencode lists OpenCode Zen's free models (they need the network to answer);
    # OPENAI_API_KEY is one of the provider keys it would use.
    assert opencode["config_options"] == ["model", "mode"] and opencode["set_works"].startswith("yes: model=")
    assert opencode["auth"] == "key: $OPENAI_API_KEY"

    assert codex["config_options"][:3] == ["mode", "collaboration_mode", "model"]
    assert codex["set_works"].startswith("yes: mode=")
    assert codex["auth"] == "authenticated: api-key (from $OPENAI_API_KEY)"

    assert gemini["session_new"] == "auth required" and gemini["config_options"] == []
    assert gemini["auth"].startswith("needed: set GEMINI_API_KEY")

    assert [pid for pid in marked_processes(marker) if not wait_gone(pid, GONE_TIMEOUT)] == []


def test_check_with_a_gemini_key_shows_its_old_modes_and_models(tmp_path):
    require_pinned("gemini")
    env = {k: v for k, v in os.environ.items() if k not in ("GOOGLE_API_KEY",)}
    env |= {"HOME": str(tmp_path), "ACP_NOTEBOOK_AGENT_CACHE": str(agent_cache()), "GEMINI_API_KEY": DUMMY_KEY,
            "COLUMNS": "400"}  # one line a row: this test reads the row's cells, not how a narrow terminal wraps it
    done = subprocess.run([sys.executable, "-m", "acp_notebook.cli", "agents", "--check", "gemini"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    header, row, legend = done.stdout.splitlines()
    assert header.split()[:3] == ["agent", "version", "starts"]
    assert row.startswith("gemini") and " 0.61.0 " in row and "mode*, model*" in row
    # Its first other modes (autoEdit, yolo) are refused in a folder it does not trust; plan is taken.
    assert "yes: mode=plan via session/set_mode (refused: autoEdit, yolo)" in row
    assert row.endswith("key: $GEMINI_API_KEY")
    assert legend.startswith("(* = from the old modes/models fields")
