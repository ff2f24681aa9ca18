"""A task folder as published (its verifier's pytest plugin installed by its Dockerfile, its tests naming container
paths) checked with the oracle: solution/solve.sh in the trial's workspace, graded by tests/test.sh; task_env="venv"
installs the Dockerfile's pip packages in a cached virtualenv, and in the sandbox the container paths are mounts of
the trial's folders. A verifier that cannot run says so in the row's error. Needs the package index (pip)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.sweep import tasks
from acp_notebook.sweep.taskenv import read_dockerfile, venv_cache_dir
from test_sandbox import _bwrap_or_skip

TASK = Path(__file__).parent / "sweep_agents" / "tasks" / "ctrf-report"
pytestmark = pytest.mark.slow  # the first run installs pytest and pytest-json-ctrf into a virtualenv


def test_the_dockerfile_is_read_for_its_workdir_and_pip_packages(tmp_path):
    facts = read_dockerfile(TASK / "environment" / "Dockerfile")
    assert facts.workdir == "/workspace"
    assert facts.requirements == ("pytest==8.4.1", "pytest-json-ctrf==0.3.5")
    assert facts.not_emulated == ("FROM python:3.12-slim",
                                  "RUN apt-get update", "RUN apt-get install -y --no-install-recommends jq",
                                  "RUN rm -rf /var/lib/apt/lists/*")
    other = tmp_path / "Dockerfile"
    other.write_text("FROM x\nRUN python3 -m pip install -U 'requests>=2' -i https://example/simple && "
                     "pip install -r requirements.txt\nENV A=1\n")
    facts = read_dockerfile(other)
    assert facts.requirements == ("requests>=2",) and facts.workdir is None
    assert facts.not_emulated == ("FROM x", "RUN pip install -r requirements.txt", "ENV A=1")


def test_the_oracle_solves_the_task_in_the_sandbox_with_its_virtualenv(capsys):
    _bwrap_or_skip()
    result = acpnb.sweep(tasks(TASK), agent="oracle", task_env="venv", sandbox="bwrap", progress=False)
    (row,) = result.rows
    assert row["status"] == "ok", row["error"]
    assert row["model"] == "oracle" and row["agent"] == "oracle" and "wrote /workspace/report.json" in row["text"]
    assert row["score_tests"] == 1.0, row["explanation_tests"]  # test_outputs.py read /workspace/report.json
    assert "+{\"answer\": 42}" in result._kept[row["trial_id"]]["diff"]
    said = capsys.readouterr().err
    assert said.count("not emulated") == 1 and "ctrf-report: FROM python:3.12-slim" in said
    assert "ctrf-report: RUN apt-get install -y --no-install-recommends jq" in result.metadata["parameters"][
        "not_emulated"]
    venvs = list(venv_cache_dir().glob("py*"))
    made = {v: (v / ".complete").stat().st_mtime_ns for v in venvs if (v / "requirements.txt").is_file()
            and "pytest-json-ctrf==0.3.5" in (v / "requirements.txt").read_text()}
    assert len(made) == 1
    again = acpnb.sweep(tasks(TASK), agent="oracle", task_env="venv", sandbox="bwrap", progress=False)
    assert again.rows[0]["score_tests"] == 1.0
    assert {v: (v / ".complete").stat().st_mtime_ns for v in made} == made  # reused, not made again


def test_a_verifier_missing_its_plugin_is_an_error_row_saying_so():
    _bwrap_or_skip()
    result = acpnb.sweep(tasks(TASK), agent="oracle", sandbox="bwrap", progress=False)  # no task_env
    (row,) = result.rows
    assert row["status"] == "error" and row["score_tests"] is None
    assert "the verifier could not run" in row["error"] and "unrecognized arguments: --ctrf" in row["error"], row


def test_without_the_sandbox_only_the_scripts_are_rewritten():
    """test.sh and solve.sh name the workspace's container path and are rewritten; test_outputs.py is not, so
    the answer cannot be found there: a reward of 0, which is why a task's paths want the sandbox's mounts."""
    result = acpnb.sweep(tasks(TASK), agent="oracle", task_env="venv", progress=False)
    (row,) = result.rows
    assert row["status"] == "ok" and row["score_tests"] == 0.0
    assert "/workspace/report.json" in row["explanation_tests"]


def test_the_command_line_runs_the_oracle(tmp_path):
    _bwrap_or_skip()
    done = subprocess.run([sys.executable, "-m", "acp_notebook.cli", "sweep", "--tasks", str(TASK), "--agent",
                           "oracle", "--task-env", "venv", "--sandbox", "bwrap", "--no-progress", "--json"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"score_tests": 1.0' in done.stdout
    refused = subprocess.run([sys.executable, "-m", "acp_notebook.cli", "sweep", "--prompt", "hi"],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert refused.returncode == 2 and "--model/-m (unless --agent oracle)" in refused.stderr
