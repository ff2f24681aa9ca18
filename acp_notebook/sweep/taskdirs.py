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

Process-wide: ``_said_no_containers``, whether the warning that task containers are not used was
given; once per process, on purpose (a sweep over many task folders would repeat it). False at
import, set once, on whichever thread reads the tasks, never reset.
"""

from __future__ import annotations

import asyncio
import contextlib
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
from .taskenv import read_dockerfile, task_venv, venv_env
from .workspace import COMMAND_SANDBOX, EMPTY, CommandResult, run_command

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
    """What grading one task needs: its tests folder, the verifier's timeout and env, the container's workdir, its
    solution folder (for the oracle) and what its Dockerfile asks for (for ``task_env``)."""

    tests: str
    timeout: float
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str = DEFAULT_WORKDIR
    solution: str | None = None
    requirements: tuple[str, ...] = ()
    not_emulated: tuple[str, ...] = ()


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


# A verifier that could not run: its shell or pytest says a program, module or plugin is missing.
_BROKEN = re.compile(r"^.*(?:command not found|No module named [^\n]+|unrecognized arguments: [^\n]+|"
                     r"ModuleNotFoundError: [^\n]+|No such file or directory: '?/(?:usr/)?bin/[^\n]+).*$", re.MULTILINE)


class TaskTests(WorkspaceScorer):
    """Runs the task's ``tests/test.sh`` in the trial's workspace; the score is the reward it writes.

    ``task_env="venv"``: test.sh (and the oracle's solve.sh) run with the task's pip requirements in a cached
    virtualenv. In a sandbox the task's container paths are bind mounts of the trial's folders; otherwise the
    scripts are run from copies whose container paths are rewritten to them."""

    def __init__(self, checks: Mapping[str, TaskCheck], name: str = "tests", task_env: str | None = None) -> None:
        self.checks = dict(checks)
        self.name = name
        self.task_env = task_env

    def with_task_env(self, task_env: str | None) -> TaskTests:
        return TaskTests(self.checks, self.name, task_env)

    def workdir_for(self, sample_id: str) -> str | None:
        task = self.checks.get(sample_id)
        return task.workdir if task is not None else None

    def task(self, row: Mapping[str, Any]) -> TaskCheck:
        task = self.checks.get(str(row.get("sample_id")))
        if task is None:
            raise CheckError(f"no task folder for sample {row.get('sample_id')!r}")
        return task

    async def check(self, row: Mapping[str, Any], workspace: Path) -> Score:
        task = self.task(row)
        async with _scratch() as scratch:
            result = await self._run(task, "tests", "test.sh", scratch, workspace, task.timeout, dict(task.env))
            if result.timed_out:
                raise CheckError(f"tests/test.sh gave no result within {task.timeout:g} s (task.toml "
                                 "[verifier] timeout_sec); its processes were killed")
            try:
                value, rewards = _reward(scratch / "logs" / "verifier", result.summary(300))
            except CheckError:
                _say_if_broken(result)
                raise
        if value == 0:
            _say_if_broken(result)  # reward 0 from a verifier that never ran is not a failed answer
        extra = f" {json.dumps(rewards)}" if len(rewards) > 1 else ""
        return Score(value, f"reward {value:g}{extra}; test.sh {result.summary()}")

    async def solve(self, row: Mapping[str, Any], workspace: Path, timeout: float | None) -> CommandResult:
        """The oracle: the task's ``solution/solve.sh`` run in the trial's workspace, mapped as test.sh is."""
        task = self.task(row)
        if task.solution is None:
            raise CheckError(f"task {row.get('sample_id')!r} has no solution/solve.sh for the oracle")
        async with _scratch() as scratch:
            return await self._run(task, "solution", "solve.sh", scratch, workspace, timeout, {})

    async def _run(self, task: TaskCheck, folder: str, script: str, scratch: Path, workspace: Path,
                   timeout: float | None, env: dict[str, str]) -> CommandResult:
        source = task.tests if folder == "tests" else task.solution
        assert source is not None
        sandbox = COMMAND_SANDBOX.get()
        staged = await asyncio.to_thread(_stage, source, folder, script, task, scratch, workspace,
                                         rewrite=sandbox is None)
        env.update({"TESTS_DIR": str(scratch / "tests"), "VERIFIER_DIR": str(scratch / "logs/verifier")})
        if self.task_env == "venv":
            env.update(venv_env(await task_venv(task.requirements)))
        if sandbox is None:
            return await run_command(f"bash {_quote(staged)}", workspace, timeout=timeout, env=env)
        # In the sandbox the scripts keep their own paths: the container's folders are the trial's, mounted.
        env.update({"TESTS_DIR": "/tests", "VERIFIER_DIR": "/logs/verifier"})
        mounts = [(str(workspace), task.workdir), (str(scratch / "logs" / "verifier"), "/logs/verifier"),
                  (str(scratch / folder), f"/{folder}")]
        return await run_command(f"bash /{folder}/{script}", workspace, timeout=timeout, env=env,
                                 sandbox=sandbox.with_paths([str(scratch)], mounts), inside=task.workdir)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "task_tests", "tasks": len(self.checks), "task_env": self.task_env}

    def shipped_paths(self) -> list[str]:
        return [p for check in self.checks.values() for p in (check.tests, check.solution) if p]

    def with_paths(self, local: Any) -> TaskTests:
        return TaskTests({key: replace(check, tests=local(check.tests) or check.tests,
                                       solution=(local(check.solution) or check.solution) if check.solution else None)
                          for key, check in self.checks.items()}, self.name, self.task_env)

    def not_emulated(self) -> list[str]:
        """Each task's Dockerfile instructions task_env='venv' does not carry out, as 'task: instruction'."""
        return [f"{key}: {line}" for key, check in self.checks.items() for line in check.not_emulated]


def _say_if_broken(result: CommandResult) -> None:
    found = _BROKEN.search(result.output)
    if found is not None:
        raise CheckError(f"the verifier could not run: {found.group(0).strip()[:300]} (a command or plugin is "
                         "missing where test.sh runs: its Dockerfile's packages are not installed here; "
                         "task_env='venv' installs its pip requirements)")


@contextlib.asynccontextmanager
async def _scratch() -> Any:
    scratch = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="acp-notebook-verifier-"))
    try:
        yield scratch
    finally:
        await asyncio.to_thread(shutil.rmtree, scratch, True)


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"


def _container_path(path: str) -> re.Pattern[str]:
    """``path`` as a whole path component sequence (``/tests`` and ``/tests/x``, never ``/testsuite``)."""
    return re.compile(rf"(?<![\w.\-/]){re.escape(path.rstrip('/'))}(?![\w.\-])")


def _stage(source: str, folder: str, script: str, task: TaskCheck, scratch: Path, workspace: Path, *,
           rewrite: bool) -> Path:
    """``source`` copied to ``scratch/folder`` (and the verifier's log folder made); without a sandbox the script's
    container paths are rewritten to the trial's folders. Returns the script's path."""
    shutil.copytree(source, scratch / folder, symlinks=True)
    (scratch / "logs" / "verifier").mkdir(parents=True, exist_ok=True)
    staged = scratch / folder / script
    if rewrite:
        text = staged.read_text(encoding="utf-8")
        for container, local in (("/logs/verifier", scratch / "logs" / "verifier"), ("/tests", scratch / "tests"),
                                 ("/solution", scratch / "solution"), (task.workdir, workspace)):
            text = _container_path(container).sub(lambda _m, local=local: str(local), text)
        staged.write_text(text, encoding="utf-8")
    return staged


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
    facts = read_dockerfile(environment / "Dockerfile")
    solution = folder / "solution"
    return sample, TaskCheck(str(folder / "tests"), timeout, env, facts.workdir or DEFAULT_WORKDIR,
                             str(solution) if (solution / "solve.sh").is_file() else None, facts.requirements,
                             facts.not_emulated)


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
