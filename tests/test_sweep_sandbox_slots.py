"""sandbox="bwrap" in a sweep runs one sandboxed agent process per concurrency slot, writable only in the slot's
folder, which holds one trial at a time. Attacked as a hostile agent would (tests/sweep_agents/escape_agent.py,
its own file and socket calls): it cannot write into another slot's workspace or see it, nor the run's rows;
what it leaves in its workspace outside the diff (.git/) and in its /tmp is gone when its slot's next trial
starts; network=False still cuts the network. Real bwrap; skipped only where bwrap cannot make a sandbox."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.sweep.slots import clear_private_tmp
from test_sandbox import AGENT, _bwrap_or_skip, _connections, _tree, hostile, outside_tmp  # noqa: F401 - fixtures

NEIGHBOURS = {"slot0": "../../escape-0/work/neighbour.txt", "slot1": "../../escape-1/work/neighbour.txt"}


def _reports(result) -> list[dict[str, str]]:
    assert [r["status"] for r in result.rows] == ["ok"] * len(result.rows), [r["error"] for r in result.rows]
    return [json.loads(r["text"]) for r in result.rows]


@pytest.mark.slow
def test_concurrent_slots_cannot_write_into_or_see_each_other(hostile, outside_tmp):
    run = outside_tmp / "run"  # outside /tmp, so the host's folders are what the sandbox would show
    plan = {"outside": hostile["plan"]["outside"], "writes": NEIGHBOURS,
            "looks": {"other0": "../../escape-0/work", "other1": "../../escape-1/work", "slots": "../..",
                      "rows": str(run / "rows.jsonl"), "kept": str(run / "workspaces")}}
    result = acpnb.sweep([json.dumps(plan), json.dumps({**plan, "n": 2})], ["escape:fast"],
                         workspace=hostile["workspace"], sandbox="bwrap", concurrency=2, keep_workspaces=True,
                         out=run, progress=False)
    reports = _reports(result)
    cwds = {r["cwd"] for r in reports}
    assert len(cwds) == 2, cwds  # the two trials ran at once, each in a slot of its own
    for report in reports:
        own = 0 if report["cwd"].endswith("/escape-0/work") else 1
        assert report[f"write:slot{own}"] == "done", report
        assert report[f"write:slot{1 - own}"].startswith("refused"), report  # it is not even there
        assert report[f"look:other{1 - own}"].startswith("refused"), report
        assert report["look:slots"] == f"done: ['escape-{own}']", report  # the slots' folder: its own only
        assert report["look:rows"].startswith("refused"), report  # the run directory is an empty folder
        assert report["look:kept"].startswith("done: ['.slots-") and "escape" not in report["look:kept"], report
        assert report["outside"].startswith("refused: OSError: Read-only file system"), report
    for row in result.rows:  # each kept workspace holds its own trial's files, none of the other's
        kept = _tree(Path(row["workspace_path"]))
        assert kept.pop("neighbour.txt") == b"left here\n", kept
        assert set(kept) == {"README.md", "inside.txt", "report.json"} and row["files_changed"] == 3, kept
        assert "+++ b/neighbour.txt" in result.trial_record(row).diff
    assert result.metadata["agents"]["escape"]["processes"] == 2
    assert not (hostile["outside"] / "pwned.txt").exists()


@pytest.mark.slow
def test_the_next_trial_in_a_slot_finds_nothing_of_the_last(hostile):
    first = {"writes": {"tmp": "/tmp/left-by-trial-1.txt", "git": ".git/left-by-trial-1", "deep": "a/b/c.txt"}}
    second = {"looks": {"tmp": "/tmp", "git": ".git", "deep": "a", "here": "."}}
    result = acpnb.sweep([json.dumps(first), json.dumps(second)], ["escape:fast"], workspace=hostile["workspace"],
                         sandbox="bwrap", concurrency=1, progress=False)
    one, two = _reports(result)
    assert one["cwd"] == two["cwd"], (one, two)  # the same slot: its process and folder, reused
    assert one["write:tmp"] == one["write:git"] == one["write:deep"] == "done", one
    assert "left-by-trial-1.txt" not in two["look:tmp"], two  # its /tmp was emptied
    assert two["look:git"].startswith("refused") and two["look:deep"].startswith("refused"), two
    assert two["look:here"] == "done: ['README.md', 'inside.txt']", two  # a fresh copy of the source
    first_row = result.rows[0]
    assert first_row["files_changed"] == 3 and ".git" not in result.trial_record(first_row).diff
    assert result.metadata["agents"]["escape"]["processes"] == 1


@pytest.mark.slow
def test_network_false_cuts_the_network_of_a_slot(hostile):
    port = hostile["plan"]["port"]
    result = acpnb.sweep([json.dumps({"port": port}), json.dumps({"port": port, "n": 2})], ["escape:fast"],
                         workspace=hostile["workspace"], sandbox="bwrap", network=False, concurrency=1,
                         progress=False)
    reports = _reports(result)
    assert all(r["port"].startswith("refused") for r in reports), reports
    assert _connections(hostile["listener"]) == 0
    assert result.metadata["parameters"]["sandbox"] == {"kind": "bwrap", "network": False}


@pytest.mark.slow
def test_a_git_workspace_in_a_slot_is_a_worktree_kept_as_one(tmp_path):
    _bwrap_or_skip()
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "a.txt"], ["commit", "-qm", "one"]):
        subprocess.run([*git, *args], cwd=repo, check=True)
    prompts = [f"write trial {n} to out.txt" for n in range(3)]
    result = acpnb.sweep(prompts, ["demo:fast"], workspace=repo, sandbox="bwrap", concurrency=1,
                         keep_workspaces=True, out=tmp_path / "run", progress=False)
    assert [r["status"] for r in result.rows] == ["ok"] * 3, [r["error"] for r in result.rows]
    for row in result.rows:
        assert row["workspace_method"] == "worktree" and row["files_changed"] == 1
        kept = Path(row["workspace_path"])
        status = subprocess.run(["git", "status", "--porcelain"], cwd=kept, capture_output=True, text=True)
        assert status.returncode == 0 and status.stdout.split() == ["A", "out.txt"], status  # the diff added it
    listed = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=repo, capture_output=True, text=True)
    assert sorted(line.split(" ", 1)[1] for line in listed.stdout.splitlines() if line.startswith("worktree ")) == \
        sorted([str(repo), *(r["workspace_path"] for r in result.rows)])


def test_emptying_a_slot_tmp_keeps_the_mount_points_and_the_way_to_them(tmp_path):
    (tmp_path / "a" / "b" / "work").mkdir(parents=True)
    (tmp_path / "a" / "b" / "left.txt").write_text("x")
    (tmp_path / "a" / "other").mkdir()
    (tmp_path / "a" / "b" / "work" / "inside-the-mount-point.txt").write_text("x")  # the host's view of it
    (tmp_path / "top.txt").write_text("x")
    (tmp_path / "locked").mkdir()
    (tmp_path / "locked" / "f").write_text("x")
    (tmp_path / "locked").chmod(0o500)  # an agent that took its own write permission away
    clear_private_tmp(tmp_path, ["a/b/work", "acpnb-kt-0"])
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == \
        ["a", "a/b", "a/b/work", "a/b/work/inside-the-mount-point.txt"]


def _task(root: Path, name: str, workdir: str) -> None:
    """A task folder whose instruction is the escape agent's plan: write the answer at the container path."""
    folder = root / name
    (folder / "environment").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "environment" / "Dockerfile").write_text(f"FROM python:3.12-slim\nWORKDIR {workdir}\n")
    (folder / "instruction.md").write_text(json.dumps({"writes": {"answer": f"{workdir}/answer.txt"}}))
    (folder / "tests" / "test.sh").write_text(
        f"#!/bin/bash\nif grep -q 'left here' {workdir}/answer.txt; then echo 1 > /logs/verifier/reward.txt; "
        "else echo 0 > /logs/verifier/reward.txt; fi\n")
    (folder / "task.toml").write_text(f'version = "1.0"\n[task]\nname = "{name}"\n')


@pytest.mark.slow
def test_a_slot_mounts_each_tasks_workdir_and_restarts_its_process_when_the_workdir_changes(tmp_path):
    _bwrap_or_skip()
    from acp_notebook import launch
    from acp_notebook.sweep import tasks

    _task(tmp_path / "tasks", "at-app", "/app")
    _task(tmp_path / "tasks", "at-srv", "/srv/project")
    with launch.registry.overlay():
        launch.register("escape", launch.AgentSpec(name="escape", command=(sys.executable, str(AGENT))))
        result = acpnb.sweep(tasks(tmp_path / "tasks"), ["escape:fast"], sandbox="bwrap", concurrency=1,
                             progress=False)
    reports = _reports(result)
    assert [r["write:answer"] for r in reports] == ["done", "done"], reports
    assert [r["score_tests"] for r in result.rows] == [1.0, 1.0], [r["explanation_tests"] for r in result.rows]
    assert len({r["cwd"] for r in reports}) == 1  # one slot, whose process was started again for /srv/project
    assert result.metadata["agents"]["escape"]["processes"] == 2


def test_filling_a_slot_replaces_a_planted_link_instead_of_writing_through_it(tmp_path):
    """A process a slot's agent left running could plant a link in the emptied folder before the next source is
    copied in: the copy replaces the link, and the file it pointed at (one of the user's) is untouched."""
    import asyncio

    from acp_notebook.sweep.workspace import Workspace

    source, slot, victim = tmp_path / "source", tmp_path / "slot", tmp_path / "victim.txt"
    source.mkdir()
    slot.mkdir()
    (source / "a.py").write_text("x = 1\n")
    victim.write_text("the user's file\n")
    (slot / "a.py").symlink_to(victim)
    workspace = asyncio.run(Workspace.fill(str(source), slot))
    assert victim.read_text() == "the user's file\n"
    assert not (slot / "a.py").is_symlink() and (slot / "a.py").read_text() == "x = 1\n"
    asyncio.run(workspace.remove())
    assert slot.is_dir() and not any(slot.iterdir())  # emptied, the folder itself kept for the sandbox


@pytest.mark.slow
def test_a_slot_whose_trial_failed_gets_a_fresh_process(hostile):
    result = acpnb.sweep(["not a plan", json.dumps({}), json.dumps({"n": 2})], ["escape:fast"],
                         workspace=hostile["workspace"], sandbox="bwrap", concurrency=1, retries=0, progress=False)
    assert [r["status"] for r in result.rows] == ["error", "ok", "ok"], [r["error"] for r in result.rows]
    facts = result.metadata["agents"]["escape"]
    assert facts["processes"] == 2 and len(set(facts["pids"])) == 2  # the failed trial's, then one for the rest
