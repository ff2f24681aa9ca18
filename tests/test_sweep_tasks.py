"""Harbor-layout task folders as a sweep dataset (notebooks/tasks/ and made-up ones), graded by each task's
tests/test.sh in the trial's workspace; the demo agent's edit contract those tasks rely on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.demo import tasks as demo_tasks
from acp_notebook.sweep import TaskSet, taskdirs, tasks

TASKS = Path(__file__).parent.parent / "notebooks" / "tasks"


def make_task(root: Path, name: str, test_sh: str, *, instruction: str = "Create the file a.txt containing `a`.",
              toml: str = "") -> Path:
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "instruction.md").write_text(instruction)
    (folder / "task.toml").write_text(toml)
    (folder / "tests" / "test.sh").write_text(test_sh)
    return folder


@pytest.mark.slow
def test_the_example_tasks_grade_the_two_demo_models_apart_and_resume(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(taskdirs, "_said_no_containers", False)
    data = tasks(TASKS)
    assert isinstance(data, TaskSet) and [s.id for s in data] == ["add-notes", "enable-debug", "fix-add"]
    tasks(TASKS)
    assert capfd.readouterr().err.count("no container runtime") == 1  # once, in one line
    res = acpnb.sweep(data, ["demo:fast", "demo:smart"], out=tmp_path / "run", progress=False)
    scores = {(r["sample_id"], r["model"]): r["score_tests"] for r in res.rows}
    assert scores == {("add-notes", "demo:fast"): 1.0, ("add-notes", "demo:smart"): 1.0,
                      ("enable-debug", "demo:fast"): 0.0, ("enable-debug", "demo:smart"): 1.0,
                      ("fix-add", "demo:fast"): 0.0, ("fix-add", "demo:smart"): 1.0}
    for row in res.rows:
        assert row["status"] == "ok" and row["files_changed"] == 1
        assert (tmp_path / "run" / row["diff"]).read_text().strip()
        assert row["task"].startswith("acp-notebook/") and row["category"]  # task.toml [task] and [metadata]
    fix = next(r for r in res.rows if r["sample_id"] == "fix-add" and r["model"] == "demo:smart")
    assert "-    return a - b\n+    return a + b" in (tmp_path / "run" / fix["diff"]).read_text()
    assert fix["explanation_tests"].startswith("reward 1; test.sh exit 0") and "add works" in fix["explanation_tests"]
    again = acpnb.sweep(tasks(TASKS), ["demo:fast", "demo:smart"], out=tmp_path / "run", progress=False)
    assert again.metadata["skipped"] == 6 and again.metadata["executed"] == 0 and again.rows == res.rows


def test_a_folder_without_instruction_md_is_named_and_skipped_or_refused(tmp_path, capfd):
    shutil.copytree(TASKS / "add-notes", tmp_path / "add-notes")
    (tmp_path / "broken" / "tests").mkdir(parents=True)
    data = tasks(tmp_path)
    assert [s.id for s in data] == ["add-notes"] and data.skipped == [(str(tmp_path / "broken"), "no instruction.md")]
    assert f"skipped {tmp_path / 'broken'}: no instruction.md" in capfd.readouterr().err
    with pytest.raises(ValueError, match=rf"{tmp_path / 'broken'}: no instruction.md"):
        tasks(tmp_path, on_invalid="error")
    with pytest.raises(ValueError, match=r"tasks\(on_invalid=\) is .skip. or .error."):
        tasks(tmp_path, on_invalid="ignore")
    with pytest.raises(ValueError, match="no task folders"):
        tasks(tmp_path / "broken")


def test_a_folder_of_no_tasks_names_a_few_of_its_folders_and_counts_the_rest(tmp_path, capfd):
    for index in range(7):
        (tmp_path / f"not-a-task-{index}").mkdir()
    with pytest.raises(ValueError, match="no task folders") as refused:
        tasks(tmp_path)
    message = str(refused.value)
    assert all(f"not-a-task-{index} (no instruction.md)" in message for index in range(5))
    assert "not-a-task-5" not in message and message.endswith("and 2 more")


@pytest.mark.slow
def test_rewards_from_reward_json_and_a_test_sh_that_writes_none_or_hangs(tmp_path):
    write = "mkdir -p /logs/verifier\ncd /app\n"
    make_task(tmp_path, "json", write + 'echo \'{"reward": 0.5, "style": 1}\' > /logs/verifier/reward.json\n')
    make_task(tmp_path, "none", write + "echo forgot the reward\n")
    make_task(tmp_path, "hangs", write + "sleep 300\n", toml="[verifier]\ntimeout_sec = 1\n")
    make_task(tmp_path, "paths", write + 'test "$PWD" = "$(cd /app && pwd)" && test -f /tests/test.sh && '
                                         "test -f a.txt && echo 1 > /logs/verifier/reward.txt\n")
    res = acpnb.sweep(tasks(tmp_path), ["demo:fast"], retries=0, progress=False)
    rows = {r["sample_id"]: r for r in res.rows}
    assert rows["json"]["score_tests"] == 0.5 and json.loads(rows["json"]["explanation_tests"].split(";")[0][11:]) \
        == {"reward": 0.5, "style": 1.0}
    assert rows["none"]["status"] == "error" and "wrote no reward" in rows["none"]["error"]
    assert "forgot the reward" in rows["none"]["error"]
    assert rows["hangs"]["status"] == "error" and "no result within 1 s" in rows["hangs"]["error"]
    assert rows["paths"]["score_tests"] == 1.0  # /app, /tests and /logs/verifier map to the trial's folders


def test_the_cli_reads_task_folders(tmp_path, capsys):
    from acp_notebook.sweep import main

    assert main(["--tasks", str(TASKS), "-m", "demo:fast", "-m", "demo:smart", "--out", str(tmp_path / "run"),
                 "--no-progress", "--json"]) == 0
    summary = {e["model"]: e["score_tests"] for e in json.loads(capsys.readouterr().out)["summary"]}
    assert summary == {"demo:fast": pytest.approx(1 / 3), "demo:smart": 1.0}


def test_the_demo_edit_contract():
    edit = demo_tasks.parse_edit("Fix it.\n\nIn calc.py, replace `return a - b` with `return a + b`.")
    assert edit == demo_tasks.Edit("replace", "calc.py", "return a - b", "return a + b")
    assert demo_tasks.edited_text(edit, "def add(a, b):\n    return a - b\n", "smart") == \
        "def add(a, b):\n    return a + b\n"
    assert demo_tasks.edited_text(edit, "nothing here", "smart") is None
    assert demo_tasks.edited_text(edit, "def add(a, b):\n    return a - b\n", "fast") == "return a + b\n"
    create = demo_tasks.parse_edit("Create the file NOTES.md containing `# Notes`.")
    assert create == demo_tasks.Edit("create", "NOTES.md", "", "# Notes")
    assert demo_tasks.edited_text(create, None, "fast") == demo_tasks.edited_text(create, None, "smart") == "# Notes\n"
    assert demo_tasks.parse_edit("replace things, create more") is None
