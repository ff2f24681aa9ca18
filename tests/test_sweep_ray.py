"""executor="ray": the evaluation sweep on a local Ray cluster (2 CPUs for the trials, started once per test run)
gives the local executor's rows, progress and resume; each worker starts its own agents."""

from __future__ import annotations

import shutil
import signal
import sys
import threading

import pytest

import acp_notebook as acpnb
from acp_notebook import launch
from acp_notebook.sweep import Progress, RayExecutor
from tests.processes import wait_gone
from tests.sweep_agents import arithmetic
from tests.test_sweep import InterruptAfterFirstTrial, sigint_taken

# The Ray cluster (tests/conftest.py's `ray_cluster`, two nodes, 2 CPUs for the trials) is started once per test
# run, for every Ray module, in the set-up of whichever test comes first: 10 to 100 s on a loaded machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

MODELS = ["demo:fast", "demo:smart", "px:d:smart"]
PROXY = [sys.executable, "-m", "acp_notebook.proxy", "--agent", "d=demo"]


class Counter(Progress):
    """Records what a sweep reports: the totals at the start and every finished trial's status."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, str]] = []

    def _draw(self, row):
        if row is not None:
            self.seen.append((row["trial_id"], row["status"]))


@pytest.fixture
def cluster(ray_cluster):
    return ray_cluster


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The dataset, the proxy registered under "px", and the local executor's run to compare with."""
    with launch.registry.overlay():
        acpnb.register("px", PROXY)
        workdir = tmp_path_factory.mktemp("ray")
        dataset = arithmetic.write_dataset(workdir / "tasks.jsonl")
        local = acpnb.sweep(dataset, MODELS, prompt=arithmetic.TEMPLATE, scorers=arithmetic.scorers(),
                            out=workdir / "local", progress=False)
        yield workdir, dataset, local


def test_ray_gives_the_local_rows(cluster, setup):
    workdir, dataset, local = setup
    progress = Counter()
    remote = acpnb.sweep(dataset, MODELS, prompt=arithmetic.TEMPLATE, scorers=arithmetic.scorers(), executor="ray",
                         out=workdir / "ray", progress=progress)
    assert arithmetic.without_timings(remote.rows) == arithmetic.without_timings(local.rows)
    assert (progress.total, progress.done, progress.failed) == (120, 120, 0)
    assert sorted(progress.seen) == sorted((r["trial_id"], "ok") for r in local.rows)
    assert {e["model"]: e["score_exact"] for e in remote.summary()} == {"demo:fast": 0.5, "demo:smart": 1.0,
                                                                        "px:d:smart": 1.0}
    # Two workers (one per CPU), each with its own agent processes, all closed at the end.
    agents = remote.metadata["agents"]
    assert remote.metadata["executor"]["name"] == "ray" and len(agents["demo"]["workers"]) == 2
    assert set(agents) == {"demo", "px"} and agents["demo"]["info"]["name"] == "acp-notebook-demo"
    assert all(wait_gone(pid) for facts in agents.values() for pid in facts["pids"])
    assert len(list((workdir / "ray" / "trajectories").iterdir())) == 120


def test_ray_resumes_a_run_like_the_local_executor(cluster, setup):
    workdir, dataset, local = setup
    run = workdir / "resumed"
    shutil.copytree(workdir / "local", run)
    lines = (run / "rows.jsonl").read_text().splitlines(keepends=True)
    (run / "rows.jsonl").write_text("".join(lines[:50]))  # as if the run had stopped after 50 trials
    progress = Counter()
    resumed = acpnb.sweep(dataset, MODELS, prompt=arithmetic.TEMPLATE, scorers=arithmetic.scorers(),
                          executor=RayExecutor(workers=1), out=run, progress=progress)
    assert (progress.total, progress.skipped, progress.done) == (70, 50, 70)
    assert resumed.metadata["skipped"] == 50 and resumed.metadata["executed"] == 70
    assert resumed.metadata["executor"]["workers"] == 1
    assert arithmetic.without_timings(resumed.rows) == arithmetic.without_timings(local.rows)
    assert arithmetic.without_timings(acpnb.load_run(run).rows) == arithmetic.without_timings(local.rows)


@pytest.fixture
def private_registry():
    """Agents registered by the test disappear after it."""
    with launch.registry.overlay():
        yield


def test_an_interrupted_ray_sweep_keeps_what_finished_and_closes_the_workers_agents(cluster, tmp_path,
                                                                                      private_registry):
    acpnb.register("slowdemo", [sys.executable, "-m", "acp_notebook.demo", "--delay", "0.2"])
    out = tmp_path / "run"
    main_thread = threading.main_thread().ident

    def sigint() -> None:  # what a kernel interrupt does to the cell blocked in sweep()
        signal.pthread_kill(main_thread, signal.SIGINT)

    with sigint_taken() as taken, pytest.raises(KeyboardInterrupt):
        acpnb.sweep("hello", ["slowdemo:fast"], repeats=6, concurrency=2, executor="ray", out=out,
                    progress=InterruptAfterFirstTrial(sigint, taken))
    stored = acpnb.load_run(out)
    assert 1 <= len(stored) < 6 and all(r["status"] == "ok" for r in stored.rows)
    pids = stored.metadata["agents"]["slowdemo"]["pids"]  # reported by the workers as they closed
    assert pids and all(wait_gone(pid) for pid in pids)


@pytest.mark.slow
def test_ray_workers_make_grade_and_delete_the_workspaces(cluster, tmp_path):
    import os

    from acp_notebook.sweep import tasks
    from tests.sweep_agents.workspace_checks import made_in
    from tests.test_sweep_tasks import TASKS

    local = acpnb.sweep(tasks(TASKS), ["demo:fast", "demo:smart"], out=tmp_path / "local", progress=False)
    remote = acpnb.sweep(tasks(TASKS), ["demo:fast", "demo:smart"], scorers=[made_in], executor="ray",
                         out=tmp_path / "ray", progress=False)
    assert {(r["model"], r["sample_id"]): r["score_tests"] for r in remote.rows} == \
        {(r["model"], r["sample_id"]): r["score_tests"] for r in local.rows}
    assert all(r["score_made_in"] == 1.0 for r in remote.rows)
    worker_pids = {r["explanation_made_in"] for r in remote.rows}
    assert f"pid {os.getpid()}" not in worker_pids  # made and graded on the workers, not here
    for row, twin in zip(remote.rows, local.rows):
        assert (tmp_path / "ray" / row["diff"]).read_text() == (tmp_path / "local" / twin["diff"]).read_text()
        assert not os.path.exists(row["workspace_path"])
