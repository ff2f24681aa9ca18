"""`acp-notebook sweep` end to end: a real subprocess running the installed command against the demo agent."""

from __future__ import annotations

import csv
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from acp_notebook.sweep import SweepResult
from acp_notebook.sweep.cli import read_prompts

STUBBORN = [sys.executable, str(Path(__file__).parent / "sweep_agents" / "stubborn_agent.py")]


def command() -> list[str]:
    installed = Path(sys.executable).parent / "acp-notebook"
    if installed.exists():
        return [str(installed)]
    found = shutil.which("acp-notebook")
    return [found] if found else [sys.executable, "-m", "acp_notebook.cli"]


def run(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command(), "sweep", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def test_the_done_when_command(tmp_path):
    done = run("--model", "demo:fast", "--model", "demo:smart", "--prompt", "hello", "--repeats", "3",
               "--out", "r.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:5] == ["model", "runs", "ok", "errors", "timeouts"]
    table = {line.split()[0]: line.split() for line in lines[2:4]}
    assert table["demo:fast"][1:4] == ["3", "3", "0"] and table["demo:smart"][1:4] == ["3", "3", "0"]
    assert "6 runs: 6 ok, 0 failed; results in r.csv" in done.stdout
    with open(tmp_path / "r.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 6
    assert sorted(r["model"] for r in rows) == ["demo:fast"] * 3 + ["demo:smart"] * 3
    assert all(r["confirmed_model"] == r["model"] and r["status"] == "ok" for r in rows)
    assert json.loads((tmp_path / "r.csv.meta.json").read_text())["repeats"] == 3
    # Progress went to stderr, one line per run when stderr is not a terminal.
    assert done.stderr.count("sweep [") == 6

    resumed = run("--model", "demo:fast", "--model", "demo:smart", "--prompt", "hello", "--repeats", "3",
                  "--out", "r.csv", "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 0 and "(6 resumed from r.csv)" in resumed.stdout
    assert resumed.stderr == "" and len(SweepResult.load(tmp_path / "r.csv")) == 6


def test_prompts_file_config_and_json_summary(tmp_path):
    (tmp_path / "prompts.txt").write_text("# a comment\nhello\n\nwhat is ACP?\n")
    done = run("--model", "demo:smart", "--prompts", "prompts.txt", "--config", "thought_level=high",
               "--json", "--no-progress", "--out", "r.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (summary,) = json.loads(done.stdout)
    assert summary["model"] == "demo:smart" and summary["runs"] == 2 and summary["ok"] == 2
    result = SweepResult.load(tmp_path / "r.json")
    assert [r["prompt"] for r in result.rows] == ["hello", "what is ACP?"]
    assert all(r["config"]["thought_level"] == "high" for r in result.rows)


def test_through_the_proxy_with_agent(tmp_path):
    proxy = pytest.importorskip("acp_notebook.proxy")
    if not hasattr(proxy, "main"):
        pytest.skip("the multi-agent proxy's command line has not landed")
    spec = shlex.join([sys.executable, "-m", "acp_notebook.proxy", "--agent", "a=demo", "--agent", "b=demo"])
    done = run("--agent", spec, "--model", "a:fast", "--model", "b:smart", "--prompt", "hello", "--repeats", "2",
               "--out", "r.csv", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 runs: 4 ok, 0 failed" in done.stdout
    rows = SweepResult.load(tmp_path / "r.csv").rows
    assert sorted(r["confirmed_model"] for r in rows) == ["a:fast", "a:fast", "b:smart", "b:smart"]
    assert all(r["confirmed_model"] == r["model"] for r in rows)


def test_every_run_failing_exits_1_and_prints_the_errors(tmp_path):
    done = run("--register", f"stubborn={shlex.join(STUBBORN)}", "--model", "stubborn:smart", "--prompt", "hi",
               "--no-progress", cwd=tmp_path)
    assert done.returncode == 1
    assert "1 runs: 0 ok, 1 failed" in done.stdout
    assert "asked for model 'smart' but the agent reports 'fast'" in done.stdout


def test_a_partly_failing_sweep_exits_0(tmp_path):
    done = run("--model", "demo:fast", "--model", "demo:turbo", "--prompt", "hi", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0
    assert "2 runs: 1 ok, 1 failed" in done.stdout and "'turbo' is not a choice" in done.stdout


@pytest.mark.parametrize("args, message", [
    (["--prompt", "hi"], "--model"),
    (["--model", "demo:fast"], "--prompt"),
    (["--model", "demo", "--prompt", "hi"], "agent:model"),
    (["--model", "nosuch:x", "--prompt", "hi"], "unknown agent 'nosuch'"),
    (["--model", "demo:fast", "--prompt", "hi", "--repeats", "0"], "at least 1"),
    (["--model", "demo:fast", "--prompt", "hi", "--config", "oops"], "ID=VALUE"),
    (["--model", "demo:fast", "--prompts", "missing.txt"], "missing.txt"),
    (["--model", "demo:fast", "--prompt", "hi", "--out", "r.xlsx"], ".csv, .json or .jsonl"),
])
def test_usage_errors_exit_2(tmp_path, args, message):
    done = run(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert message in done.stderr and done.stdout == ""


def test_read_prompts_from_json_and_text(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps(["one\ntwo lines", "three"]))
    assert read_prompts(str(tmp_path / "p.json")) == ["one\ntwo lines", "three"]
    (tmp_path / "bad.json").write_text(json.dumps({"prompt": "x"}))
    with pytest.raises(ValueError, match="list of strings"):
        read_prompts(str(tmp_path / "bad.json"))
