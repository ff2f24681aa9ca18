"""Sweeps in per-trial workspaces, against the demo agent as a subprocess: copies and git worktrees, setup, the
diff kept beside each recording, check scorers (commands, file_contains, functions of the workspace), sessions
deleted from the agent's list, and the bad inputs (a check that hangs, a workspace over the limit, a write
outside the workspace)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.sweep import command, file_contains, regex, scorer
from acp_notebook.sweep.checks import WorkspaceCallable, takes_workspace
from acp_notebook.sweep.workspace import file_diff
from tests.processes import wait_gone


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=repo,
                          capture_output=True, text=True, check=True).stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "config.txt").write_text("name = demo\ndebug = false\n")
    (folder / "logo.bin").write_bytes(b"\x89PNG\0\0")
    return folder


@pytest.fixture
def repo(project: Path) -> Path:
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "commit", "-qm", "start")
    return project


def read(run: Path, relative: str) -> str:
    return (run / relative).read_text()


def test_each_trial_works_in_its_own_copy_and_its_diff_is_kept(project, tmp_path):
    def has_notes(row, workspace):
        return (workspace / "notes.txt").is_file(), f"looked in {workspace.name}"

    res = acpnb.sweep(["write hello to notes.txt", "write debug = true to config.txt"], ["demo:fast", "demo:smart"],
                      workspace=project, out=tmp_path / "run", progress=False,
                      scorers=[file_contains("notes.txt", "hello"), command("test -f notes.txt", name="exists"),
                               has_notes, regex("Wrote", name="wrote")])
    assert [r["status"] for r in res.rows] == ["ok"] * 4
    notes, config = res.rows[0], res.rows[2]
    assert (notes["score_file_contains"], notes["score_exists"], notes["score_has_notes"]) == (1.0, 1.0, 1.0)
    assert (config["score_file_contains"], config["score_exists"], config["score_has_notes"]) == (0.0, 0.0, 0.0)
    assert notes["explanation_exists"] == "exit 0" and config["explanation_exists"] == "exit 1"
    assert notes["score_wrote"] == 1.0  # a text scorer still runs beside the checks
    assert notes["workspace"] == str(project) and notes["workspace_method"] == "copy"
    assert notes["files_changed"] == 1 and notes["diff"] == f"trajectories/{notes['trial_id']}.diff"
    assert read(tmp_path / "run", notes["diff"]) == (
        "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+hello\n\\ No newline at end of file\n")
    assert read(tmp_path / "run", config["diff"]).splitlines()[:5] == [
        "--- a/config.txt", "+++ b/config.txt", "@@ -1,2 +1 @@", "-name = demo", "-debug = false"]
    assert (tmp_path / "run" / config["trajectory"]).is_file()  # the recording beside it
    # The copies are gone, the source is untouched, and the run directory keeps no empty workspaces/ folder.
    assert not Path(notes["workspace_path"]).exists() and not (tmp_path / "run" / "workspaces").exists()
    assert sorted(p.name for p in project.iterdir()) == ["config.txt", "logo.bin"]
    assert (project / "config.txt").read_text() == "name = demo\ndebug = false\n"


def test_a_git_repository_gets_worktrees_setup_is_not_in_the_diff_and_the_repository_gains_nothing(repo, tmp_path):
    objects_before = git(repo, "count-objects", "-v")
    res = acpnb.sweep(["write hello to notes.txt"], ["demo:smart"], workspace=repo, out=tmp_path / "run",
                      setup="echo generated > setup.txt && printf 'changed' > logo.bin", keep_workspaces=True,
                      scorers=[command("test -f setup.txt", name="setup_ran")], progress=False)
    row = res.rows[0]
    assert row["status"] == "ok" and row["score_setup_ran"] == 1.0
    assert row["workspace_method"] == "worktree" and row["workspace_commit"] == git(repo, "rev-parse", "HEAD").strip()
    diff = read(tmp_path / "run", row["diff"])
    assert "b/notes.txt" in diff and "setup.txt" not in diff and "logo.bin" not in diff and row["files_changed"] == 1
    kept = Path(row["workspace_path"])
    assert (kept / "notes.txt").read_text() == "hello" and kept.parent == tmp_path / "run" / "workspaces"
    assert git(repo, "count-objects", "-v") == objects_before  # the trial's objects went elsewhere
    assert git(repo, "status", "--porcelain") == ""


def test_worktrees_are_removed_after_grading(repo, tmp_path):
    res = acpnb.sweep(["write x to a.txt"], ["demo:fast", "demo:smart"], workspace=repo, progress=False)
    assert [r["files_changed"] for r in res.rows] == [1, 1]
    assert len(git(repo, "worktree", "list").splitlines()) == 1
    assert not any(Path(r["workspace_path"]).exists() for r in res.rows)


def test_binary_files_are_named_not_shown():
    assert file_diff("logo.bin", b"\x89PNG\0", b"\x89PNG\0\1") == "Binary files a/logo.bin and b/logo.bin differ\n"
    assert file_diff("gone.txt", b"x\n", None) == "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"


@pytest.mark.slow
def test_a_hanging_check_is_an_error_row_and_its_process_group_is_killed(project, tmp_path):
    pid_file = tmp_path / "pid"
    hang = command(f"sleep 300 & echo $! > {pid_file}; wait", timeout=1, name="hangs")
    res = acpnb.sweep(["write hello to notes.txt"], ["demo:fast"], workspace=project, scorers=[hang], retries=0,
                      progress=False)
    row = res.rows[0]
    assert row["status"] == "error" and row["score_hangs"] is None
    assert "gave no result within 1 s" in row["error"] and row["error"].startswith("check hangs:")
    assert wait_gone(int(pid_file.read_text()))  # the background sleep went with the group


def test_an_agent_cannot_write_outside_its_workspace(project, tmp_path):
    res = acpnb.sweep(["write escaped to ../outside.txt"], ["demo:smart"], workspace=project, progress=False)
    assert "outside the session's directories" in res.rows[0]["text"]
    assert not (project.parent / "outside.txt").exists() and res.rows[0]["files_changed"] == 0


def test_a_failing_setup_is_an_error_row_and_the_agent_is_not_prompted(project):
    res = acpnb.sweep(["write hello to notes.txt"], ["demo:fast"], workspace=project, setup="echo nope; exit 3",
                      retries=0, progress=False)
    row = res.rows[0]
    assert row["status"] == "error" and row["session_id"] is None
    assert row["error"].startswith("setup: WorkspaceSetupError: setup command") and "exit 3" in row["error"]


@pytest.mark.parametrize("options, message", [
    ({"scorers": [command("true")]}, r"the check 'true' runs in each trial's workspace.*workspace=DIR"),
    ({"setup": "true"}, r"setup= runs in each trial's workspace: pass workspace=DIR"),
    ({"workspace": "/no/such/dir"}, r"workspace='/no/such/dir' is not a directory"),
    ({"workspace_limit_mb": 0}, r"workspace_limit_mb= must be a number of MB > 0"),
])
def test_workspace_usage_errors(options, message):
    with pytest.raises(ValueError, match=message):
        acpnb.sweep(["hi"], ["demo:fast"], progress=False, **options)


def test_a_workspace_over_the_limit_is_refused_naming_the_limit(project):
    (project / "big.bin").write_bytes(b"\0" * 2_000_000)
    with pytest.raises(ValueError, match=r"holds more than 1 MB \(the limit\).*raise workspace_limit_mb="):
        acpnb.sweep(["hi"], ["demo:fast"], workspace=project, workspace_limit_mb=1, progress=False)


def test_a_sample_can_name_its_own_workspace_or_an_empty_one(project, tmp_path):
    data = [{"prompt": "write a to a.txt", "workspace": str(project)}, {"prompt": "write b to b.txt", "workspace": ""}]
    res = acpnb.sweep(data, ["demo:fast"], scorers=[file_contains("config.txt", "name")], progress=False)
    assert [(r["workspace_method"], r["score_file_contains"], r["files_changed"]) for r in res.rows] == [
        ("copy", 1.0, 1), ("empty", 0.0, 1)]


def test_function_checks_are_recognised_by_their_signature():
    def two(row, path):
        return True

    def named(row, *, workspace):
        return True

    def text_only(row):
        return True

    assert takes_workspace(two) and takes_workspace(named) and not takes_workspace(text_only)
    assert isinstance(scorer(named), WorkspaceCallable) and not isinstance(scorer(text_only), WorkspaceCallable)


@pytest.mark.slow
def test_trials_delete_their_sessions_unless_asked_to_keep_them(tmp_path):
    res = acpnb.sweep(["hello", "What is 2 + 2?"], ["demo:fast", "demo:smart"], progress=False)
    kept = acpnb.sweep(["kept"], ["demo:fast"], keep_sessions=True, progress=False)
    with acpnb.start("demo") as agent:
        listed = {s["sessionId"] for s in agent.list_sessions()}
    assert not listed & {r["session_id"] for r in res.rows}
    assert kept.rows[0]["session_id"] in listed
    assert kept.metadata["parameters"]["keep_sessions"] is True


def test_the_manifest_records_the_workspace_settings(project, tmp_path):
    res = acpnb.sweep(["hi"], ["demo:fast"], workspace=project, setup="true", out=tmp_path / "run", progress=False)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["parameters"]["workspace"] == str(project) and manifest["parameters"]["setup"] == "true"
    assert manifest["parameters"]["workspaces_in"] == str(tmp_path / "run" / "workspaces")
    assert res.rows[0]["status"] == "ok"


@pytest.mark.slow
def test_a_kept_workspace_is_replaced_when_its_trial_runs_again(repo, tmp_path):
    first = acpnb.sweep(["write one to a.txt"], ["demo:fast"], workspace=repo, out=tmp_path / "run",
                        keep_workspaces=True, progress=False)
    kept = Path(first.rows[0]["workspace_path"])
    (kept / "stale.txt").write_text("left from the first run")
    again = acpnb.sweep(["write one to a.txt"], ["demo:fast"], workspace=repo, out=tmp_path / "run",
                        keep_workspaces=True, retry_failed=True, scorers=[command("test ! -e stale.txt", name="fresh")],
                        progress=False)
    row = again.rows[0]
    assert row["status"] == "ok" and row["score_fresh"] == 1.0 and row["workspace_path"] == str(kept)
    assert len(git(repo, "worktree", "list").splitlines()) == 2  # the repository and the one kept workspace
