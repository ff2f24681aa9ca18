"""`acp-notebook sweep` end to end: a real subprocess running the installed command against the demo agent."""

from __future__ import annotations

import csv
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.sweep import SweepResult
from acp_notebook import launch
from acp_notebook.sweep.cli import main, read_prompts
from tests.sweep_agents import arithmetic

STUBBORN = [sys.executable, str(Path(__file__).parent / "sweep_agents" / "stubborn_agent.py")]
# The Python spellings a command-line user must never be told to use (issue 17).
PYTHON_SPELLINGS = ("acpnb.", "agent=", "models=", "prompt=", "repeats=", "concurrency=", "agent_concurrency=",
                    "timeout=", "retries=", "budget=", "config=", "out=", "scorers=", "executor=", "name=")


def command() -> list[str]:
    installed = Path(sys.executable).parent / "acp-notebook"
    if installed.exists():
        return [str(installed)]
    found = shutil.which("acp-notebook")
    return [found] if found else [sys.executable, "-m", "acp_notebook.cli"]


def run(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*command(), "sweep", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_prompts_across_models_with_a_results_file_and_resume(tmp_path):
    done = run("--model", "demo:fast", "--model", "demo:smart", "--prompt", "hello", "--repeats", "3",
               "--out", "r.csv", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:5] == ["model", "trials", "ok", "errors", "median_s"]  # timeouts: only if any
    table = {line.split()[0]: line.split() for line in lines[2:4]}
    assert table["demo:fast"][1:4] == ["3", "3", "0"] and table["demo:smart"][1:4] == ["3", "3", "0"]
    assert "6 trials: 6 ok, 0 failed; results in r.csv" in done.stdout
    with open(tmp_path / "r.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 6 and all(r["confirmed_model"] == r["model"] and r["status"] == "ok" for r in rows)
    assert json.loads((tmp_path / "r.csv.meta.json").read_text())["repeats"] == 3
    assert done.stderr.count("sweep [") == 6  # progress on stderr, a line per trial when it is not a terminal

    resumed = run("--model", "demo:fast", "--model", "demo:smart", "--prompt", "hello", "--repeats", "3",
                  "--out", "r.csv", "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 0 and "(6 resumed from r.csv)" in resumed.stdout
    assert resumed.stderr == "" and len(SweepResult.load(tmp_path / "r.csv")) == 6


@pytest.mark.slow  # 80 trials, then resumed, through the CLI: over 20 s on a loaded machine
def test_a_dataset_with_scorers_a_comparison_a_plot_and_a_run_directory(tmp_path):
    arithmetic.write_dataset(tmp_path / "tasks.jsonl")
    done = run("--dataset", "tasks.jsonl", "--template", arithmetic.TEMPLATE, "--model", "demo:fast", "--model",
               "demo:smart", "--scorer", "exact", "--scorer", "numeric", "--extract", arithmetic.ANSWER,
               "--out", "runs/arith", "--compare", "demo:smart", "demo:fast", "--plot", "scores.png",
               "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "exact [95% CI]" in done.stdout and "0.500 [0.352, 0.648] n=40" in done.stdout
    assert "demo:smart vs demo:fast on exact, 40 shared samples" in done.stdout and "exact McNemar" in done.stdout
    assert "80 trials: 80 ok, 0 failed; results in runs/arith" in done.stdout
    assert (tmp_path / "scores.png").stat().st_size > 0
    assert len(acpnb.load_run(tmp_path / "runs" / "arith")) == 80

    as_json = run("--dataset", "tasks.jsonl", "--template", arithmetic.TEMPLATE, "--model", "demo:fast", "--model",
                  "demo:smart", "--scorer", "exact", "--extract", arithmetic.ANSWER, "--out", "runs/arith",
                  "--compare", "demo:smart", "demo:fast", "--json", "--no-progress", cwd=tmp_path)
    report = json.loads(as_json.stdout)
    assert [e["score_exact"] for e in report["summary"]] == [0.5, 1.0]
    assert report["comparisons"][0]["a_better"] == 20 and report["out"] == "runs/arith"


@pytest.mark.slow
def test_through_the_proxy_with_agent(tmp_path):
    spec = shlex.join([sys.executable, "-m", "acp_notebook.proxy", "--agent", "a=demo", "--agent", "b=demo"])
    done = run("--agent", spec, "--model", "a:fast", "--model", "b:smart", "--prompt", "hello", "--repeats", "2",
               "--out", "r.jsonl", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 trials: 4 ok, 0 failed" in done.stdout
    rows = SweepResult.load(tmp_path / "r.jsonl").rows
    assert sorted(r["confirmed_model"] for r in rows) == ["a:fast", "a:fast", "b:smart", "b:smart"]


@pytest.mark.slow  # the trial is retried with backoff before it counts as failed: about 10 s loaded
def test_every_trial_failing_exits_1_and_prints_the_errors(tmp_path):
    done = run("--register", f"stubborn={shlex.join(STUBBORN)}", "--model", "stubborn:smart", "--prompt", "hi",
               "--no-progress", cwd=tmp_path)
    assert done.returncode == 1
    assert "1 trials: 0 ok, 1 failed" in done.stdout
    assert "asked for model 'smart' but the agent reports 'fast'" in done.stdout


def test_a_partly_failing_sweep_exits_0(tmp_path):
    done = run("--model", "demo:fast", "--model", "demo:turbo", "--prompt", "hi", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0
    assert "2 trials: 1 ok, 1 failed" in done.stdout and "'turbo' is not a choice" in done.stdout


@pytest.mark.parametrize("args, message", [
    (["--prompt", "hi"], "--model"),
    (["--model", "demo:fast"], "--prompt"),
    (["What is 2 + 2?", "--model", "demo:fast"], "unexpected 'What is 2 \\+ 2\\?': give the prompt with --prompt TEXT"),
    (["--model", "demo", "--prompt", "hi"], "or pass --agent SPEC"),
    (["--model", "nosuch:x", "--prompt", "hi"], "unknown agent 'nosuch'.*--register NAME=COMMAND"),
    (["--model", "dmeo:fast", "--prompt", "hi"], r"unknown agent 'dmeo' \(did you mean 'demo'\?\) in the model ids"),
    (["--model", "demo:fast", "--prompt", "hi", "--repeats", "0"], "at least 1"),
    (["--model", "demo:fast", "--prompt", "hi", "--config", "oops"], "ID=VALUE"),
    (["--model", "demo:fast", "--prompt", "hi", "--config", "model=smart"], "the model comes from --model"),
    (["--model", "demo:fast", "--prompts", "missing.txt"], "missing.txt"),
    (["--model", "demo:fast", "--dataset", "missing.jsonl"], "--prompt TEXT, --prompts FILE or --dataset FILE"),
    (["--model", "demo:fast", "--dataset", "fields.jsonl"], r"no prompt: its fields are a.*--template"),
    (["--model", "demo:fast", "--dataset", "fields.jsonl", "--template", "{b}"], r"has no such field.*--template"),
    (["--model", "demo:fast", "--prompt", "hi", "--scorer", "fuzzy"], "unknown scorer 'fuzzy'.*--scorer"),
    (["--model", "demo:fast", "--prompt", "hi", "--scorer", "exact", "--scorer", "exact"], "give each --scorer once"),
    (["--model", "demo:fast", "--prompt", "hi", "--compare", "demo:fast", "x:y", "--scorer", "exact"],
     "--compare names 'x:y'"),
    (["--model", "demo:fast", "--prompt", "hi", "--compare", "demo:fast", "demo:fast"], "add a --scorer"),
    (["--model", "demo:fast", "--prompt", "hi", "--agent-concurrency", "other=1"], "--agent-concurrency NAME=N"),
    (["--model", "demo:fast", "--prompt", "hi", "--workers", "2"], "go with --executor ray"),
    (["--model", "demo:fast", "--prompt", "hi", "--out", "notes.txt"], "--out takes a directory"),
])
def test_usage_errors_exit_2_and_name_the_command_lines_own_options(tmp_path, monkeypatch, capsys, args, message):
    # In-process (main() is what the installed command calls): usage errors need no subprocess to show.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(launch, "registry", launch.AgentRegistry(dict(launch.registry.items())))
    (tmp_path / "fields.jsonl").write_text('{"a": 1}\n')
    (tmp_path / "notes.txt").write_text("not results")
    with pytest.raises(SystemExit) as exited:
        main(list(args))
    printed = capsys.readouterr()
    assert exited.value.code == 2 and printed.out == ""
    assert re.search(message, printed.err), printed.err
    assert not [s for s in PYTHON_SPELLINGS if s in printed.err], printed.err


def test_without_ray_the_ray_executor_says_how_to_install_it(tmp_path, monkeypatch, capsys):
    from acp_notebook.sweep import ray_executor

    monkeypatch.setattr(ray_executor, "ray_installed", lambda: False)
    with pytest.raises(SystemExit):
        main(["--model", "demo:fast", "--prompt", "hi", "--executor", "ray"])
    assert "--executor ray needs Ray: pip install 'acp-notebook[ray]'" in capsys.readouterr().err
    with pytest.raises(ImportError, match=r"acp-notebook\[ray\]"):
        acpnb.sweep("hi", ["demo:fast"], executor="ray", progress=False)


def test_read_prompts_from_json_and_text(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps(["one\ntwo lines", "three"]))
    assert read_prompts(str(tmp_path / "p.json")) == ["one\ntwo lines", "three"]
    (tmp_path / "bad.json").write_text(json.dumps({"prompt": "x"}))
    with pytest.raises(ValueError, match="list of strings"):
        read_prompts(str(tmp_path / "bad.json"))
