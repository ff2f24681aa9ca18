"""Task folders in Harbor's layout, read as a sweep dataset graded by each task's own tests.

A task folder holds ``instruction.md`` (the prompt), ``task.toml`` (``[task]`` name and description,
``[metadata]``, ``[verifier]`` ``timeout_sec`` and ``env``, ``[agent]``, ``[environment]``),
``tests/test.sh`` (the verifier: it writes a reward to ``/logs/verifier/reward.txt``, a number, or
``reward.json``, ``{"reward": number, ...}``) and optionally ``environment/`` (in Harbor, a container's
build context; here its files are the trial's starting workspace). There is no container runtime
here: every task runs locally. ``test.sh`` runs in the trial's workspace from a copy whose container
paths (``/tests``, ``/logs/verifier`` and the Dockerfile's ``WORKDIR``, default ``/app``) are mapped to
the trial's own directories; other files are not rewritten.

``tasks(DIR)`` runs on the caller's thread; ``TaskTests.check`` runs in each trial (a worker thread for
file work, a subprocess for test.sh), touching only that trial's directories.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .checks import CheckError, WorkspaceScorer
from .columns import metadata_clash
from .dataset import Sample
from .scorers import Score
from .workspace import COMMAND_SANDBOX, EMPTY, run_command

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

__all__ = ["TaskSet", "TaskTests", "tasks"]

DEFAULT_VERIFIER_TIMEOUT = 600.0
DEFAULT_WORKDIR = "/app"
SKIPS_NAMED = 5  # folders named in the error of a tasks directory with none; the rest are counted
_said_no_containers = False


@dataclass(frozen=True)
class TaskCheck:
    """What grading one task needs: its tests folder, the verifier's timeout and env, the container's workdir."""

    tests: str
    timeout: float
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str = DEFAULT_WORKDIR


class TaskSet(list):
    """The samples of a folder of tasks, with the scorer that runs their tests (``scorers``) and the folders
    left out (``skipped``: (path, reason) pairs)."""

    def __init__(self, samples: list[Sample], *, source: str, checks: dict[str, TaskCheck],
                 skipped: list[tuple[str, str]]) -> None:
        super().__init__(samples)
        self.source = source
        self.scorers = [TaskTests(checks)]
        self.skipped = skipped

    def __repr__(self) -> str:
        skipped = f", {len(self.skipped)} skipped" if self.skipped else ""
        return f"<TaskSet {self.source}: {len(self)} task(s){skipped}>"


class TaskTests(WorkspaceScorer):
    """Runs the task's ``tests/test.sh`` in the trial's workspace; the score is the reward it writes."""

    def __init__(self, checks: Mapping[str, TaskCheck], name: str = "tests") -> None:
        self.checks = dict(checks)
        self.name = name

    async def check(self, row: Mapping[str, Any], workspace: Path) -> Score:
        task = self.checks.get(str(row.get("sample_id")))
        if task is None:
            raise CheckError(f"no task folder for sample {row.get('sample_id')!r}")
        scratch = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="acp-notebook-verifier-"))
        try:
            script = await asyncio.to_thread(_stage, task, scratch, workspace)
            env = {**task.env, "TESTS_DIR": str(scratch / "tests"), "VERIFIER_DIR": str(scratch / "logs/verifier")}
            sandbox = COMMAND_SANDBOX.get()  # sandbox="bwrap": the tests' scratch folder is writable in it too
            sandbox = sandbox.with_paths([str(scratch)]) if sandbox is not None else None
            result = await run_command(f"bash {_quote(script)}", workspace, timeout=task.timeout, env=env,
                                       sandbox=sandbox)
            if result.timed_out:
                raise CheckError(f"tests/test.sh gave no result within {task.timeout:g} s (task.toml "
                                 "[verifier] timeout_sec); its processes were killed")
            value, rewards = _reward(scratch / "logs" / "verifier", result.summary(300))
        finally:
            await asyncio.to_thread(shutil.rmtree, scratch, True)
        extra = f" {json.dumps(rewards)}" if len(rewards) > 1 else ""
        return Score(value, f"reward {value:g}{extra}; test.sh {result.summary()}")

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "task_tests", "tasks": len(self.checks)}

    def shipped_paths(self) -> list[str]:
        return [check.tests for check in self.checks.values()]

    def with_paths(self, local: Any) -> TaskTests:
        return TaskTests({key: replace(check, tests=local(check.tests) or check.tests)
                          for key, check in self.checks.items()}, self.name)


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"


def _container_path(path: str) -> re.Pattern[str]:
    """``path`` as a whole path component sequence (``/tests`` and ``/tests/x``, never ``/testsuite``)."""
    return re.compile(rf"(?<![\w.\-/]){re.escape(path.rstrip('/'))}(?![\w.\-])")


def _stage(task: TaskCheck, scratch: Path, workspace: Path) -> Path:
    """The tests copied to ``scratch``, and test.sh rewritten to the local paths; returns the script's path."""
    shutil.copytree(task.tests, scratch / "tests", symlinks=True)
    (scratch / "logs" / "verifier").mkdir(parents=True)
    script = scratch / "tests" / "test.sh"
    text = script.read_text(encoding="utf-8")
    for container, local in (("/logs/verifier", scratch / "logs" / "verifier"), ("/tests", scratch / "tests"),
                             (task.workdir, workspace)):
        text = _container_path(container).sub(lambda _m, local=local: str(local), text)
    script.write_text(text, encoding="utf-8")
    return script


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def _reward(folder: Path, what_ran: str) -> tuple[float, dict[str, float]]:
    """Harbor's reward: reward.txt (a number) first, else reward.json (``reward``, or its only value)."""
    text_file, json_file = folder / "reward.txt", folder / "reward.json"
    if text_file.is_file():
        first = (text_file.read_text(encoding="utf-8").strip().splitlines() or [""])[0]
        try:
            value = float(first)
        except ValueError:
            raise CheckError(f"reward.txt holds {first!r}, not a number") from None
        return value, {"reward": value}
    if json_file.is_file():
        try:
            data = json.loads(json_file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise CheckError(f"reward.json is not JSON ({exc.msg})") from None
        rewards = {str(k): n for k, v in data.items() if (n := _number(v)) is not None} \
            if isinstance(data, dict) else {}
        if "reward" in rewards or len(rewards) == 1:
            return rewards.get("reward", next(iter(rewards.values()))), rewards
        raise CheckError(f"reward.json has no number named reward: {json.dumps(data)[:200]}")
    raise CheckError(f"tests/test.sh wrote no reward (/logs/verifier/reward.txt or reward.json); {what_ran}")


# --- reading the folders ----------------------------------------------------------------------
def _problem(folder: Path) -> str | None:
    if not (folder / "instruction.md").is_file():
        return "no instruction.md"
    if not (folder / "tests" / "test.sh").is_file():
        return "no tests/test.sh"
    return None


def _config(folder: Path) -> dict[str, Any]:
    path = folder / "task.toml"
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid TOML ({exc})") from None


def _workdir(environment: Path) -> str:
    """The Dockerfile's last WORKDIR (the container's working directory), else /app."""
    dockerfile = environment / "Dockerfile"
    if dockerfile.is_file():
        found = re.findall(r"^\s*WORKDIR\s+(\S+)", dockerfile.read_text(encoding="utf-8", errors="replace"),
                           re.IGNORECASE | re.MULTILINE)
        if found and found[-1].startswith("/"):
            return found[-1].strip("\"'")
    return DEFAULT_WORKDIR


def _metadata(config: Mapping[str, Any], folder: Path) -> dict[str, Any]:
    """The task's name and folder, and its [metadata] values that are plain scalars (as columns)."""
    task = config.get("task") if isinstance(config.get("task"), Mapping) else {}
    out: dict[str, Any] = {"task": str(task.get("name") or folder.name), "task_dir": str(folder)}
    for key, value in (config.get("metadata") or {}).items():
        if isinstance(value, (str, int, float, bool)) and key not in out:
            out[f"task_{key}" if metadata_clash(key) else key] = value
    return out


def _read_task(folder: Path, index: int) -> tuple[Sample, TaskCheck]:
    config = _config(folder)
    verifier = config.get("verifier") if isinstance(config.get("verifier"), Mapping) else {}
    timeout = _number(verifier.get("timeout_sec")) or DEFAULT_VERIFIER_TIMEOUT
    env = {str(k): str(v) for k, v in (verifier.get("env") or {}).items()}
    environment = folder / "environment"
    prompt = (folder / "instruction.md").read_text(encoding="utf-8")
    sample = Sample(id=folder.name, prompt=prompt, metadata=_metadata(config, folder), index=index,
                    workspace=str(environment) if environment.is_dir() else EMPTY)
    return sample, TaskCheck(str(folder / "tests"), timeout, env, _workdir(environment))


def tasks(directory: str | Path, *, on_invalid: str = "skip") -> TaskSet:
    """The task folders under ``directory`` (or ``directory`` itself, if it is one) in Harbor's layout, as a
    dataset for ``acpnb.sweep``: each task's instruction is the prompt, its ``environment/`` the starting
    workspace (else an empty one), and its ``tests/test.sh`` the grade (``score_tests``, the reward it writes).

    A folder without ``instruction.md`` or ``tests/test.sh`` is named and skipped (``on_invalid="skip"``) or
    refused (``on_invalid="error"``). There is no container runtime here: the tasks run locally.
    """
    if on_invalid not in ("skip", "error"):
        raise ValueError(f"tasks(on_invalid=) is 'skip' or 'error', not {on_invalid!r}")
    root = Path(directory).expanduser().resolve()
    if not root.is_dir():
        raise ValueError(f"tasks(): {str(directory)!r} is not a directory of task folders")
    folders = [root] if (root / "instruction.md").is_file() else sorted(
        p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    problems = [(str(f), reason) for f in folders if (reason := _problem(f)) is not None]
    if problems and on_invalid == "error":
        raise ValueError("not task folders (each needs instruction.md and tests/test.sh): " +
                         "; ".join(f"{path}: {reason}" for path, reason in problems))
    bad = {path for path, _ in problems}
    samples, checks = [], {}
    for folder in (f for f in folders if str(f) not in bad):
        sample, check = _read_task(folder, len(samples))
        samples.append(sample)
        checks[sample.id] = check
    if not samples:
        named = ", ".join(f"{p} ({r})" for p, r in problems[:SKIPS_NAMED])
        more = f" and {len(problems) - SKIPS_NAMED} more" if len(problems) > SKIPS_NAMED else ""
        raise ValueError(f"tasks(): no task folders in {root} (a task folder holds instruction.md and tests/test.sh)"
                         + (f"; skipped: {named}{more}" if problems else ""))
    for path, reason in problems:
        print(f"acp-notebook: skipped {path}: {reason}", file=sys.stderr)
    _say_no_containers()
    return TaskSet(samples, source=str(root), checks=checks, skipped=problems)


def _say_no_containers() -> None:
    global _said_no_containers
    if not _said_no_containers:
        _said_no_containers = True
        print("acp-notebook: no container runtime is used: tasks run locally, each in a copy of its environment/ "
              "files", file=sys.stderr)
