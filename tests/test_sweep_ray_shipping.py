"""executor="ray" without a shared filesystem: on a local cluster of two nodes (`ray_cluster`, tests/conftest.py),
the workspace source and the task folders are packed once, shipped through Ray's object store and unpacked by the
workers, so the sweep gives the local executor's scores and diffs even though the caller's folders are deleted as
soon as they are shipped; kept workspaces come back to the caller's run directory."""

from __future__ import annotations

import os
import shutil

import pytest

import acp_notebook as acpnb
from acp_notebook.sweep import RayExecutor, command, tasks
from tests.test_sweep_tasks import TASKS

# Two Ray nodes take 10 to 100 s to start on a loaded machine: once per test run, for every Ray module (the
# `ray_cluster` fixture of tests/conftest.py), in the set-up of whichever test comes first.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


class ShipThenDelete(RayExecutor):
    """Deletes the caller's folders once the executor has shipped them: a worker that read the caller's path
    instead of its own copy would find nothing there."""

    def __init__(self, *folders, **options):
        super().__init__(**options)
        self.folders = folders
        self.shipped_paths: tuple[str, ...] = ()

    async def start(self, setup):
        await super().start(setup)
        self.shipped_paths = setup.shipped
        for folder in self.folders:
            shutil.rmtree(folder)


def test_tasks_run_on_workers_from_shipped_copies(ray_cluster, tmp_path):
    local = acpnb.sweep(tasks(TASKS), ["demo:fast", "demo:smart"], out=tmp_path / "local", progress=False)
    copy = tmp_path / "tasks"
    shutil.copytree(TASKS, copy)
    dataset = tasks(copy)
    executor = ShipThenDelete(copy)
    remote = acpnb.sweep(dataset, ["demo:fast", "demo:smart"], executor=executor, out=tmp_path / "ray",
                         progress=False)
    assert not copy.exists()
    assert set(executor.shipped_paths) == {str(copy / t / d) for t in ("add-notes", "enable-debug", "fix-add")
                                           for d in ("environment", "tests")} - {str(copy / "add-notes/environment")}
    assert [r["status"] for r in remote.rows] == ["ok"] * 6, [r["error"] for r in remote.rows]
    assert {(r["model"], r["sample_id"]): r["score_tests"] for r in remote.rows} == \
        {(r["model"], r["sample_id"]): r["score_tests"] for r in local.rows}
    for row, twin in zip(remote.rows, local.rows):
        assert (tmp_path / "ray" / row["diff"]).read_text() == (tmp_path / "local" / twin["diff"]).read_text()
        assert row["workspace"] == twin["workspace"].replace(str(TASKS), str(copy))  # the caller's path


def test_a_git_workspace_and_kept_copies_come_back(ray_cluster, tmp_path):
    import subprocess

    source = tmp_path / "repo"
    source.mkdir()
    (source / "config.toml").write_text('name = "demo-service"\ndebug = false\n')
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=source, check=True)
    out = tmp_path / "run"
    result = acpnb.sweep(["In config.toml, replace `debug = false` with `debug = true`."], ["demo:smart"],
                         workspace=source, scorers=[command("grep -q 'debug = true' config.toml", name="on")],
                         keep_workspaces=True, executor=ShipThenDelete(source), out=out, progress=False)
    (row,) = result.rows
    assert row["status"] == "ok" and row["score_on"] == 1.0, row["error"]
    assert row["workspace_method"] == "worktree" and row["workspace"] == str(source)
    kept = out / "workspaces" / row["trial_id"]
    assert row["workspace_path"] == str(kept) and "debug = true" in (kept / "config.toml").read_text()
    assert "+debug = true" in (out / row["diff"]).read_text()
    assert not source.exists() and os.listdir(out / "workspaces") == [row["trial_id"]]
