"""The agentic-evals tasks (notebooks/tasks/, Harbor layout) swept against claude-agent-acp 0.101.0 through the
model server: each trial's session opens in its own workspace, Claude's own Write tool changes the files there,
and each task's tests/test.sh grades the result. The model's script does what the instruction says, the way the
demo's smart model does (acp_notebook.demo.tasks), reading the file to edit from the workspace Claude names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from model_server import ModelRequest, Reply, ToolCall, default_script, write_call

import acp_notebook as acpnb
from acp_notebook import launch
from acp_notebook.demo import tasks as demo_tasks
from acp_notebook.sweep import tasks

pytestmark = pytest.mark.interop

TASKS = Path(__file__).resolve().parents[2] / "notebooks" / "tasks"
_CWD = re.compile(r"Primary working directory: (\S+)")  # Claude Code's system prompt names its cwd


def solving_script(request: ModelRequest) -> Reply:
    """A task instruction: for a replacement, Claude's Read tool first (its Write refuses a file it has not
    read), then one Write of the edited file; for a new file, the Write alone. Everything else as usual."""
    edit = demo_tasks.parse_edit(request.last_user_text)
    cwd = _CWD.search(request.system or "")
    if edit is None or not request.tools or cwd is None or "Write" in request.called_tools:
        return default_script(request)
    target = Path(cwd.group(1)) / edit.path
    if edit.action == "replace" and "Read" not in request.called_tools:
        return Reply(text="I will read the file first.", tool_calls=[ToolCall("Read", {"file_path": str(target)})])
    current = target.read_text() if target.is_file() else None
    content = demo_tasks.edited_text(edit, current, "smart")
    call = write_call(request.tools, str(target), content or "")
    return Reply(text="I will edit the file.", tool_calls=[call] if call is not None else [])


@pytest.mark.xfail(reason="claude-agent-acp 0.101.0: every trial ends ok but its task's file is left unchanged "
                          "(score 0, also with Claude Code's defaultMode 'default'); not yet diagnosed, FINDINGS 12",
                   strict=False)
def test_the_example_tasks_pass_with_claude_in_per_trial_workspaces(interop, model_server, tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "registry", launch.AgentRegistry(dict(launch.registry.items())))
    model_server.script = solving_script
    # Registered under its own name, so the pinned install in the agent cache is the one started.
    acpnb.register("claude", interop.spec("claude", model_server))
    res = acpnb.sweep(tasks(TASKS), ["claude:haiku"], out=tmp_path / "run", progress=False, timeout=120,
                      retries=0)
    assert {r["sample_id"]: (r["status"], r["score_tests"]) for r in res.rows} == {
        "add-notes": ("ok", 1.0), "enable-debug": ("ok", 1.0), "fix-add": ("ok", 1.0)}, [r["error"] for r in res.rows]
    fix = next(r for r in res.rows if r["sample_id"] == "fix-add")
    assert "+    return a + b" in (tmp_path / "run" / fix["diff"]).read_text()
    assert all(r["tool_calls"] >= 1 and r["files_changed"] == 1 for r in res.rows)
    # The workspaces were the sessions' cwds, and they are gone.
    assert all(not Path(r["workspace_path"]).exists() for r in res.rows)
