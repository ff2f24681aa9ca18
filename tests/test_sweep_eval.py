"""Issue 15's "done when": a 40-sample JSONL dataset with targets over demo:fast, demo:smart and a proxy id, two
scorers; known accuracies with intervals, a comparison, plots, a run directory; killed halfway and resumed."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook import launch
from acp_notebook.sweep import sign_test, wilson_interval
from tests.processes import wait_gone
from tests.sweep_agents import arithmetic

MODELS = ["demo:fast", "demo:smart", "px:d:smart"]  # the last through the multi-agent proxy
PROXY = [sys.executable, "-m", "acp_notebook.proxy", "--agent", "d=demo"]


@pytest.fixture(scope="module")
def proxy_registered():
    with launch.registry.overlay():
        acpnb.register("px", PROXY)
        yield


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory, proxy_registered):
    workdir = tmp_path_factory.mktemp("eval")
    dataset = arithmetic.write_dataset(workdir / "tasks.jsonl")
    result = acpnb.sweep(dataset, MODELS, prompt=arithmetic.TEMPLATE, scorers=arithmetic.scorers(), cwd=workdir,
                         out=workdir / "runs" / "eval", progress=False)
    return result, workdir


@pytest.mark.slow
def test_known_accuracies_with_intervals(evaluation):
    result, _ = evaluation
    assert len(result) == 3 * arithmetic.SAMPLES and not result.failed, result.failed[:3]
    summary = {entry["model"]: entry for entry in result.summary()}
    for model in MODELS:
        expected = arithmetic.EXPECTED[model.rsplit(":", 1)[1]]
        interval = wilson_interval(round(expected * 40), 40)
        for name in ("exact", "numeric"):
            entry = summary[model]
            assert entry[f"score_{name}"] == expected, (model, name)
            assert (entry[f"score_{name}_low"], entry[f"score_{name}_high"]) == pytest.approx(
                (interval.low, interval.high))
            assert entry[f"score_{name}_n"] == 40
        assert entry["tokens_total"] > 0 and entry["cost_total"] > 0 and entry["latency_p90_s"] is not None
    # Which ones the fast model gets wrong: exactly the * and / questions.
    fast = [r for r in result.rows if r["model"] == "demo:fast"]
    assert {r["kind"] for r in fast if r["score_exact"] == 0.0} == {"hard"}
    proxied = [r for r in result.rows if r["model"] == "px:d:smart"]
    assert all(r["confirmed_model"] == "px:d:smart" and r["agent"] == "px" for r in proxied)


def test_comparison_plots_and_table(evaluation):
    result, _ = evaluation
    comparison = result.compare("demo:smart", "demo:fast")
    assert (comparison.samples, comparison.a_better, comparison.b_better, comparison.ties) == (40, 20, 0, 20)
    assert comparison.difference == 0.5 and comparison.test == "exact McNemar"
    assert comparison.p_value == pytest.approx(sign_test(20, 0))
    assert result.compare("demo:smart", "px:d:smart", scorer="numeric").p_value == 1.0  # the same model twice
    pytest.importorskip("matplotlib")
    scores = result.plot()
    assert len(scores.axes[0].get_xticklabels()) == 3 and scores.axes[0].get_legend() is not None
    assert [t.get_text() for t in result.plot("cost").axes[0].texts] == MODELS
    text = str(result.summary())
    assert "0.500 [0.352, 0.648] n=40" in text and "1.000 [0.912, 1.000] n=40" in text


def test_the_run_directory(evaluation):
    result, workdir = evaluation
    run = workdir / "runs" / "eval"
    reopened = acpnb.load_run(run)
    assert reopened.rows == result.rows and reopened.path == run
    manifest = reopened.metadata
    assert manifest["models"] == MODELS and manifest["samples"] == 40 and manifest["dataset"]["fields"] == [
        "a", "op", "b", "kind"]
    assert [s["name"] for s in manifest["scorers"]] == ["exact", "numeric"]
    assert set(manifest["agents"]) == {"demo", "px"}
    assert len(list((run / "trajectories").iterdir())) == 120
    assert all((run / row["trajectory"]).is_file() for row in result.rows)


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@pytest.mark.slow
def test_killed_halfway_the_same_command_completes_only_the_rest(tmp_path, proxy_registered):
    dataset = arithmetic.write_dataset(tmp_path / "tasks.jsonl")
    out = tmp_path / "runs" / "killed"
    command = [sys.executable, "-m", "acp_notebook.cli", "sweep", "--dataset", str(dataset), "--template",
               arithmetic.TEMPLATE, "--register", f"px={shlex.join(PROXY)}", "--scorer", "exact", "--scorer",
               "numeric", "--extract", arithmetic.ANSWER, "--out", str(out), "--concurrency", "4",
               *[arg for model in MODELS for arg in ("--model", model)]]
    env = {**os.environ, "ACP_DEMO_DELAY": "0.02"}  # slow enough to be killed mid-way
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        for line in process.stderr:  # one line per finished trial: wait for the 40th
            if line.startswith("sweep [40/"):
                break
        agents = children_of(process.pid)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    finally:
        process.kill()
        process.stderr.close()
    assert agents and all(wait_gone(pid, timeout=30) for pid in agents)  # no agent outlives the killed sweep
    finished = len(acpnb.load_run(out))
    assert 40 <= finished < 120

    rest = acpnb.sweep(dataset, MODELS, prompt=arithmetic.TEMPLATE, scorers=arithmetic.scorers(), cwd=tmp_path,
                       out=out, progress=False)
    assert rest.metadata["skipped"] == finished and rest.metadata["executed"] == 120 - finished
    assert len(rest) == 120 and not rest.failed
    assert {e["model"]: e["score_exact"] for e in rest.summary()} == {"demo:fast": 0.5, "demo:smart": 1.0,
                                                                      "px:d:smart": 1.0}
    lines = (out / "rows.jsonl").read_text().splitlines()
    assert len(lines) == len({json.loads(line)["trial_id"] for line in lines}) == 120  # none ran twice
