"""Running a sweep: validate, plan the trials, resume from ``out``, schedule with retries, caps and a budget, score.

``sweep`` (blocking) and ``asweep`` (awaitable) are thin wrappers around one coroutine,
``_Sweep.run``, which runs on the background loop thread; that thread alone mutates a
``_Sweep`` once it runs. The caller's thread builds it (validation, dataset, resume) and reads
the result after it ends. Store writes go to worker threads, one at a time (``write_lock``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import os
import platform
import random
import subprocess
import sys
import threading
import time
import types
import warnings
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Union

from .. import _loop
from ..client import Agent, PermissionPolicy
from ..launch import SpecLike, did_you_mean, known_names, registered
from .columns import explanation_column, ordered_columns, score_column
from .dataset import dataset_fingerprint, is_dataset_path, load_dataset
from .executors import Executor, ExecutorSetup, LocalExecutor, make_executor
from .hints import PYTHON, Syntax
from .progress import Progress, ProgressLike, make_progress
from .result import SweepResult
from .checks import WorkspaceScorer
from .scorers import GraderReply, Score, Scorer, as_scorers, needs_grading
from .shipping import shipped_paths
from .store import RunStore
from .taskdirs import TaskTests
from .taskenv import TASK_ENVS
from .workspace import WorkspaceSettings, directory_size, git_head, temporary_root
from ..sandbox import make_sandbox
from .trial import (
    AgentPool,
    GradingError,
    Outcome,
    Trial,
    TrialSettings,
    agent_and_value,
    ask_model,
    iso_time,
    plan_trials,
)

__all__ = ["asweep", "sweep"]

AgentLike = Union[Agent, SpecLike, None]
ORACLE = "oracle"  # agent="oracle": each task's solution/solve.sh runs instead of an agent
CLEANUP_WAIT_S = 30.0  # how long an interrupted sweep waits for its agents to close before it returns
MAX_BACKOFF_S = 60.0


def _package_versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "platform": platform.platform()}
    for name in ("acp-notebook", "agent-client-protocol", "ray"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            if name != "ray":
                out[name] = "unknown"
    return out


def _whole(name: str, value: Any, minimum: int, syntax: Syntax) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{syntax[name]} must be a whole number >= {minimum}, not {value!r}")
    return value


def _seconds(name: str, value: Any, syntax: Syntax, *, zero: bool = False) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (value == 0 and not zero):
        raise ValueError(f"{syntax[name]} must be a number {'>=' if zero else '>'} 0 (or None), not {value!r}")
    return float(value)


class _Options:
    """The sweep's arguments, checked before anything starts; every message names the option as the caller wrote it."""

    def __init__(self, models: Any, *, agent: AgentLike, repeats: Any, concurrency: Any, agent_concurrency: Any,
                 timeout: Any, retries: Any, backoff: Any, budget: Any, config: Any, syntax: Syntax) -> None:
        self.models = [models] if isinstance(models, str) else list(models or [])
        if not self.models and agent == ORACLE:
            self.models = [ORACLE]  # the oracle has one "model": the tasks' own solutions
        if not self.models:
            raise ValueError(f"a sweep needs at least one model id: {syntax['models']}")
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"a model id is listed twice: {self.models}; use {syntax['repeats']} to run a model "
                             "more often")
        self.repeats = _whole("repeats", repeats, 1, syntax)
        self.concurrency = _whole("concurrency", concurrency, 1, syntax)
        self.retries = _whole("retries", retries, 0, syntax)
        self.timeout = _seconds("timeout", timeout, syntax)
        self.backoff = _seconds("backoff", backoff, syntax, zero=True) or 0.0
        self.budget = _seconds("budget", budget, syntax)
        self.config = dict(config or {})
        if "model" in self.config:
            raise ValueError(syntax["config_model"])
        self.agent_caps = self._caps(agent_concurrency, agent is not None, syntax)

    def _caps(self, caps: Any, with_agent: bool, syntax: Syntax) -> dict[str, int] | int | None:
        if caps is None or isinstance(caps, int):
            return None if caps is None else _whole("agent_concurrency", caps, 1, syntax)
        if not isinstance(caps, Mapping) or with_agent:
            raise ValueError(f"{syntax['agent_concurrency']} is a number for every agent, or (without an agent to "
                             f"sweep) a mapping of agent name to number, not {caps!r}")
        names = {agent_and_value(m, with_agent=False, syntax=syntax)[0] for m in self.models}
        unknown = sorted(set(caps) - names)
        if unknown:
            raise ValueError(f"{syntax['agent_concurrency']} names {', '.join(map(repr, unknown))}, which no model "
                             f"id uses; the agents in this sweep are {', '.join(sorted(names))}")
        return {name: _whole("agent_concurrency", value, 1, syntax) for name, value in caps.items()}


def _specs(names: set[str], syntax: Syntax) -> dict[str, SpecLike]:
    """Each registry name's spec, resolved here so a Ray worker starts the same agent the caller registered."""
    specs = {name: registered(name) for name in sorted(names)}
    unknown = [name for name, spec in specs.items() if spec is None]
    if unknown:
        named = ", ".join(repr(name) + did_you_mean(name) for name in unknown)
        raise ValueError(f"unknown agent{'s' if len(unknown) > 1 else ''} {named} in the model ids; registered "
                         f"agents: {', '.join(known_names())}. {syntax['register']}, {syntax['agent']}.")
    return specs  # type: ignore[return-value]


def _with_task_scorers(own: Any, given: list[Scorer]) -> list[Scorer]:
    """A task set's own scorers (its tests) first, then the ones given, unless one of those takes its name."""
    names = {s.name for s in given}
    return [s for s in (own or []) if s.name not in names] + given


def _workspace_dir(workspace: Any, syntax: Syntax) -> str | None:
    if workspace is None:
        return None
    if not isinstance(workspace, (str, os.PathLike)):
        raise TypeError(f"{syntax['workspace'].strip()} takes a directory, not {type(workspace).__name__}")
    path = Path(os.fspath(workspace)).expanduser().resolve()
    if not path.is_dir():
        raise ValueError(f"{syntax['workspace']}{os.fspath(workspace)!r} is not a directory")
    return str(path)


def _sandbox(sandbox: Any, network: Any, given: Agent | None, syntax: Syntax) -> Any:
    made = make_sandbox(sandbox, network=network, where=syntax["sandbox"])
    if made is not None and given is not None:
        raise ValueError(syntax["sandbox_with_agent"])
    return made


def _task_env(task_env: Any, scorers: Sequence[Scorer], syntax: Syntax) -> str | None:
    if task_env is None:
        return None
    if task_env not in TASK_ENVS:
        raise ValueError(f"{syntax['task_env']} is 'venv' or None, not {task_env!r}")
    if not any(isinstance(s, TaskTests) for s in scorers):
        raise ValueError(f"{syntax['task_env']} makes the environments of task folders: sweep tasks(DIR)")
    return str(task_env)


def _say_not_emulated(lines: Sequence[str]) -> None:
    """What task_env='venv' leaves out of the tasks' Dockerfiles, said once per sweep (stderr)."""
    if lines:
        print("acp-notebook: task_env='venv' installs each task's `pip install` packages and maps its WORKDIR; "
              "not emulated:\n" + "\n".join(f"  {line}" for line in lines), file=sys.stderr)


def _dirty(source: str) -> bool:
    done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=source, capture_output=True,
                          text=True, check=False)
    return bool(done.stdout.strip())


class _Grading:
    """The GradingContext model-graded scorers use: a turn with the grader, retried like a trial."""

    def __init__(self, sweep: _Sweep, pool: AgentPool) -> None:
        self.sweep = sweep
        self.pool = pool

    async def ask(self, model_id: str, prompt: str, *, timeout: float | None) -> GraderReply:
        agent_name, value = agent_and_value(model_id, with_agent=self.sweep.with_agent)
        for attempt in range(1, self.sweep.options.retries + 2):
            try:
                async with self.sweep.agent_slot(agent_name), self.sweep.slots:  # the trials' lock order
                    turn, confirmed = await ask_model(self.pool, agent_name, value, prompt,
                                                      cwd=self.sweep.settings.cwd, timeout=timeout,
                                                      keep_session=self.sweep.keep_sessions)
            except GradingError as exc:
                if not exc.transient or attempt > self.sweep.options.retries:
                    raise
                await asyncio.sleep(self.sweep.backoff_delay(attempt))
                continue
            cost = (turn.usage or {}).get("cost")
            amount = cost.get("amount") if isinstance(cost, Mapping) else None
            return GraderReply(turn.text, float(amount) if isinstance(amount, (int, float)) else None, confirmed)
        raise AssertionError("unreachable: the last attempt returns or raises")


class _Sweep:
    """One call of ``sweep``: the checked arguments, the plan, what ``out`` already holds, and the new rows."""

    def __init__(self, dataset: Any, models: Any, *, prompt: str | None, scorers: Any, agent: AgentLike,
                 repeats: Any, concurrency: Any, agent_concurrency: Any, timeout: Any, retries: Any, backoff: Any,
                 budget: Any, config: Any, permission: PermissionPolicy | None, cwd: Any, out: Any,
                 retry_failed: bool, executor: Any, workspace: Any = None, setup: str | None = None,
                 keep_workspaces: bool = False, keep_sessions: bool = False, workspace_limit_mb: float = 1024,
                 sandbox: Any = None, network: bool = True, task_env: str | None = None,
                 syntax: Syntax = PYTHON) -> None:
        self.options = _Options(models, agent=agent, repeats=repeats, concurrency=concurrency,
                                agent_concurrency=agent_concurrency, timeout=timeout, retries=retries,
                                backoff=backoff, budget=budget, config=config, syntax=syntax)
        self.models = self.options.models
        self.samples = load_dataset(dataset, prompt=prompt, syntax=syntax)
        self.source = os.fspath(dataset) if is_dataset_path(dataset) else str(getattr(dataset, "source", "") or
                                                                                  type(dataset).__name__)
        self.template = prompt
        self.scorers: list[Scorer] = _with_task_scorers(getattr(dataset, "scorers", None),
                                                        as_scorers(scorers, syntax=syntax))
        self.oracle = agent == ORACLE
        agent = None if self.oracle else agent
        self._task_options(task_env, syntax)
        self.with_agent = agent is not None or self.oracle
        self.given_agent = agent if isinstance(agent, Agent) else None
        self.agent_spec = None if agent is None or isinstance(agent, Agent) else agent
        self.plan = plan_trials(self.samples, self.models, self.options.repeats, with_agent=self.with_agent,
                                syntax=syntax)
        graders = [agent_and_value(g, with_agent=self.with_agent, syntax=syntax)[0] for g in needs_grading(self.scorers)]
        names = {t.agent_name for t in self.plan} | set(graders)
        self.specs = {} if self.with_agent else _specs({n for n in names if n is not None}, syntax)
        self.executor: Executor = make_executor(executor, syntax)
        if self.given_agent is not None and not isinstance(self.executor, LocalExecutor):
            raise ValueError(syntax["ray_with_agent"])
        self.permission = permission
        self.sandbox = _sandbox(sandbox, network, self.given_agent, syntax)
        self.workspace = _workspace_dir(workspace, syntax)
        self.setup, self.keep_workspaces, self.keep_sessions = setup, bool(keep_workspaces), bool(keep_sessions)
        self.workspace_root: Path | None = None
        self.made_root = False
        self.settings = TrialSettings(timeout=self.options.timeout, config=self.options.config,
                                      permission=permission or "deny", permission_in_workspace=permission or "allow",
                                      cwd=str(Path(cwd).resolve()) if cwd is not None else None,
                                      workspace=self.workspace, checks=self.checks, sandbox=self.sandbox,
                                      oracle=self.oracle)
        self._check_workspaces(workspace_limit_mb, syntax)
        self.metadata_fields = list(dict.fromkeys(k for s in self.samples for k in s.metadata))
        self.columns = ordered_columns([s.name for s in self.scorers], self.metadata_fields)
        self.store = RunStore(out, self.columns, syntax=syntax) if out is not None else None
        self._place_workspaces()
        self.done, self.to_score = self._resume(retry_failed, syntax)
        self.todo = [t for t in self.plan if t.trial_id not in self.done]
        self.skipped = len(self.plan) - len(self.todo)
        self.new_rows: dict[str, dict[str, Any]] = {}
        self.kept: dict[str, dict[str, Any]] = {}  # without a run directory: trajectories and diffs, for show()
        self.rescored = 0
        self.spent = 0.0
        self.stopped: str | None = None
        self.created = time.time()
        self.finished: float | None = None
        self.slots: asyncio.Semaphore | None = None
        self.agent_slots: dict[str, asyncio.Semaphore] = {}
        # Set when run() begins and when its cleanup (agents closed, manifest written) is over, so an
        # interrupted caller can wait for the cleanup before it returns.
        self.started = threading.Event()
        self.cleaned = threading.Event()

    def _task_options(self, task_env: Any, syntax: Syntax) -> None:
        """task_env= and the oracle: both need task folders; the tasks' tests learn the environment to use, and
        what a venv cannot emulate of their Dockerfiles is said once."""
        self.task_env = _task_env(task_env, self.scorers, syntax)
        if self.task_env is not None or self.oracle:
            self.scorers = [s.with_task_env(self.task_env) if isinstance(s, TaskTests) else s for s in self.scorers]
            if self.oracle and not any(isinstance(s, TaskTests) for s in self.scorers):
                raise ValueError(f"{syntax['oracle']} runs each task's solution/solve.sh: sweep a folder of tasks "
                                 f"({syntax['tasks']})")
        self.checks = tuple(s for s in self.scorers if isinstance(s, WorkspaceScorer))
        self.not_emulated = [line for s in self.checks if isinstance(s, TaskTests) for line in s.not_emulated()] \
            if self.task_env is not None else []
        _say_not_emulated(self.not_emulated)

    def _resume(self, retry_failed: bool, syntax: Syntax) -> tuple[dict[str, dict[str, Any]], list[str]]:
        """The rows ``out`` already has for planned trials, and which of them lack a score this sweep adds."""
        if self.store is None:
            return {}, []
        planned = {t.trial_id: t for t in self.plan}
        done: dict[str, dict[str, Any]] = {}
        for row in self.store.rows:
            trial = planned.get(row.get("trial_id"))
            if trial is None:
                continue
            if row.get("prompt") != trial.sample.prompt or str(row.get("target")) != str(trial.sample.target):
                raise ValueError(
                    f"{self.store.path} already has sample {trial.sample.id!r} with another prompt or target, so the "
                    f"dataset or the prompt template changed; sweep into a new {syntax['out']} path")
            checked = all(score_column(c.name) in row for c in self.checks)  # checks need the trial run again
            if (row.get("status") == "ok" or not retry_failed) and checked:
                done[trial.trial_id] = row
        wanted = [score_column(s.name) for s in self.scorers if not isinstance(s, WorkspaceScorer)]
        to_score = [tid for tid, row in done.items()
                    if row.get("status") == "ok" and any(c not in row for c in wanted)]
        return done, to_score

    # --- workspaces -------------------------------------------------------------------------
    def _check_workspaces(self, limit_mb: Any, syntax: Syntax) -> None:
        """Checks need workspaces; each source exists and is under the size limit; a repository's uncommitted
        changes (which worktrees of HEAD leave out) are named once."""
        if isinstance(limit_mb, bool) or not isinstance(limit_mb, (int, float)) or limit_mb <= 0:
            raise ValueError(f"{syntax['workspace_limit']} must be a number of MB > 0, not {limit_mb!r}")
        sources = {self.settings.workspace_for(s) for s in self.samples}
        if self.checks and None in sources:
            names = ", ".join(repr(c.name) for c in self.checks)
            many = len(self.checks) > 1
            raise ValueError(f"the check{'s' if many else ''} {names} run{'' if many else 's'} in each trial's "
                             f"workspace, but some samples have none: pass {syntax['workspace']}DIR or give every "
                             "sample a workspace field")
        if self.setup is not None and sources == {None}:
            raise ValueError(f"{syntax['setup']} runs in each trial's workspace: pass {syntax['workspace']}DIR too")
        limit = int(limit_mb * 1024 * 1024)
        for source in sorted(s for s in sources if s):
            commit = git_head(source)
            size = directory_size(source, limit, skip_git=commit is not None)
            if size > limit:
                raise ValueError(f"the workspace {source} holds more than {limit_mb:g} MB (the limit); copying it for "
                                 f"every trial would be slow: raise {syntax['workspace_limit']} or use a smaller "
                                 "directory")
            if commit is not None and _dirty(source):
                warnings.warn(f"{source} has uncommitted changes; each trial's git worktree starts from its HEAD "
                              f"({commit[:10]}), without them", UserWarning, stacklevel=5)

    def _place_workspaces(self) -> None:
        """Workspaces go in the run directory's workspaces/ folder, else in a temporary folder of this sweep."""
        if self.settings.workspace is not None or any(s.workspace is not None for s in self.samples):
            if self.store is not None and self.store.kind == "dir":
                self.workspace_root = self.store.path.resolve() / "workspaces"
            else:
                self.workspace_root, self.made_root = temporary_root(), True
        root = str(self.workspace_root) if self.workspace_root is not None else None
        sandbox = self.settings.sandbox
        if sandbox is not None:  # the run's other trials (workspaces, rows, trajectories) are hidden in the sandbox
            sandbox = sandbox.with_masks([str(p) for p in (self.workspace_root,
                                                           self.store.path if self.store is not None else None) if p])
        self.settings = dataclasses.replace(self.settings, sandbox=sandbox, workspaces=WorkspaceSettings(
            root=root, setup=self.setup, keep=self.keep_workspaces, keep_sessions=self.keep_sessions))

    def wait_for_cleanup(self) -> None:
        if self.started.is_set():
            self.cleaned.wait(CLEANUP_WAIT_S)

    # --- the manifest ---------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        options = self.options
        permission = (self.permission if isinstance(self.permission, str) else
                      "allow in a workspace, deny elsewhere" if self.permission is None else repr(self.permission))
        agent = self.given_agent.name if self.given_agent is not None else (
            str(self.agent_spec) if self.agent_spec is not None else None)
        meta: dict[str, Any] = {
            "created": iso_time(self.created),
            "finished": iso_time(self.finished) if self.finished else None,
            "versions": _package_versions(),
            "models": list(self.models),
            "repeats": options.repeats,
            "scorers": [s.describe() for s in self.scorers],
            "samples": len(self.samples),
            "dataset": {"source": self.source, "template": self.template, "fields": self.metadata_fields,
                        "fingerprint": dataset_fingerprint(self.samples)},
            "parameters": {"concurrency": options.concurrency, "agent_concurrency": options.agent_caps,
                           "timeout": options.timeout, "retries": options.retries, "backoff": options.backoff,
                           "budget": options.budget, "config": options.config, "permission": permission,
                           "cwd": self.settings.cwd or os.getcwd(), "agent": agent,
                           "workspace": self.workspace, "setup": self.setup,
                           "keep_workspaces": self.keep_workspaces, "keep_sessions": self.keep_sessions,
                           "sandbox": self.sandbox.describe() if self.sandbox is not None else None,
                           "task_env": self.task_env, "not_emulated": self.not_emulated,
                           "workspaces_in": str(self.workspace_root) if self.workspace_root else None},
            "executor": self.executor.describe(),
            "agents": self.executor.agents(),
            "planned": len(self.plan), "skipped": self.skipped, "executed": len(self.new_rows) - self.rescored,
            "rescored": self.rescored, "stopped": self.stopped, "cost_spent": round(self.spent, 10),
            "out": str(self.store.path) if self.store is not None else None,
        }
        earlier = self.store.manifest if self.store is not None else {}
        if earlier:
            meta["previous"] = [{k: v for k, v in earlier.items() if k not in ("previous", "format")},
                                *(earlier.get("previous") or [])]
        return meta

    def result(self) -> SweepResult:
        order = {m: i for i, m in enumerate(self.models)}
        found = [(t, self.new_rows.get(t.trial_id) or self.done.get(t.trial_id)) for t in self.plan]
        found.sort(key=lambda pair: (pair[0].sample.index, order[pair[0].model], pair[0].repeat))
        return SweepResult([row for _, row in found if row is not None], self.manifest(),
                           path=self.store.path if self.store is not None else None, kept=self.kept)

    # --- running (on the loop thread) ---------------------------------------------------------
    async def run(self, progress: Progress) -> None:
        self.slots = asyncio.Semaphore(self.options.concurrency)
        self.write_lock = asyncio.Lock()
        self.started.set()
        tasks: list[asyncio.Future[None]] = []
        try:
            await self.executor.start(ExecutorSetup(self.specs, self.settings, self.options.concurrency,
                                                    self.given_agent, self.agent_spec,
                                                    tuple(shipped_paths(self.settings, self.samples))))
            pool = self.executor.pool if isinstance(self.executor, LocalExecutor) else None
            self.grading_pool = pool or AgentPool(self.specs, cwd=self.settings.cwd, permission="deny",
                                                  given=self.given_agent, spec=self.agent_spec)
            self.grading = _Grading(self, self.grading_pool)
            if self.store is not None:
                await self._write(self.store.write_manifest, self.manifest())  # a killed run still says what it was
            tasks = [asyncio.ensure_future(self._rescore(trial_id)) for trial_id in self.to_score]
            tasks += [asyncio.ensure_future(self._trial(trial, progress)) for trial in self.todo]
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            await self._clean_up(tasks)

    async def _clean_up(self, tasks: Sequence[asyncio.Future[None]]) -> None:
        """Interrupted or not: stop the trials still going (their turns get session/cancel), close the agents,
        write the manifest."""
        try:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.executor.close()
            if getattr(self, "grading_pool", None) is not None and not isinstance(self.executor, LocalExecutor):
                await self.grading_pool.close_all()
            self.finished = time.time()
            if self.store is not None:
                await self._write(self.store.write_manifest, self.manifest())
            if self.workspace_root is not None:
                with contextlib.suppress(OSError):  # only when empty: kept workspaces stay
                    self.workspace_root.rmdir()
        finally:
            self.cleaned.set()

    async def _write(self, function: Any, *args: Any) -> Any:
        async with self.write_lock:
            return await asyncio.to_thread(function, *args)

    def agent_slot(self, agent_name: str | None) -> Any:
        """The per-agent concurrency cap for ``agent_name`` (no cap: a context that does nothing)."""
        caps = self.options.agent_caps
        limit = caps if isinstance(caps, int) else (caps or {}).get(agent_name or "")
        if limit is None:
            return contextlib.nullcontext()
        key = agent_name or ""
        if key not in self.agent_slots:
            self.agent_slots[key] = asyncio.Semaphore(limit)
        return self.agent_slots[key]

    def backoff_delay(self, attempt: int) -> float:
        """Exponential, with jitter so trials that failed together do not all come back together."""
        delay = min(MAX_BACKOFF_S, self.options.backoff * 2 ** (attempt - 1))
        return delay * random.uniform(0.75, 1.25)

    def _over_budget(self) -> bool:
        return self.options.budget is not None and self.spent >= self.options.budget

    async def _trial(self, trial: Trial, progress: Progress) -> None:
        await self.executor.warm(trial.agent_name)
        assert self.slots is not None
        # Always the agent's cap first, then a sweep slot: a trial waiting for its agent holds no sweep slot,
        # so a capped agent never starves the others. Scoring holds neither (graders take their own).
        async with self.agent_slot(trial.agent_name), self.slots:
            if self._over_budget():
                if self.stopped is None:
                    self.stopped = f"the budget of {self.options.budget:g} is spent ({self.spent:.6g})"
                    progress.stopped(self.stopped)
                return  # not recorded: a later call with a larger budget runs it
            outcome = await self._attempts(trial)
        await self._score(outcome.row)
        if self.store is not None:
            outcome.row["trajectory"] = await self._write(self.store.trajectory, trial.trial_id, outcome.trajectory)
            if outcome.diff is not None:
                outcome.row["diff"] = await self._write(self.store.diff, trial.trial_id, outcome.diff)
        if self.store is None or self.store.kind != "dir":
            self.kept[trial.trial_id] = {"trajectory": outcome.trajectory, "diff": outcome.diff}
        await self._record(outcome.row)
        progress.finished(outcome.row)

    async def _attempts(self, trial: Trial) -> Outcome:
        """Attempts until one succeeds, fails for good, or the retries are used up (waiting longer each time)."""
        for attempt in range(1, self.options.retries + 2):
            outcome = await self.executor.run(trial)
            self.spent += outcome.row.get("cost") or 0.0  # a failed attempt may have cost something too
            outcome.row["attempts"] = attempt
            if not outcome.transient or attempt > self.options.retries:
                return outcome
            await asyncio.sleep(self.backoff_delay(attempt))
        raise AssertionError("unreachable: the last attempt returns")

    async def _score(self, row: dict[str, Any]) -> None:
        """Every scorer this row lacks; a failed trial is not scored (its scores stay empty)."""
        for scorer in self.scorers:
            column = score_column(scorer.name)
            if isinstance(scorer, WorkspaceScorer):  # graded by the trial itself, in its workspace
                row.setdefault(column, None)
                row.setdefault(explanation_column(scorer.name), None)
                continue
            if row.get(column) is not None:
                continue
            score = Score(None)
            if row.get("status") == "ok":
                try:
                    score = await scorer.ascore(types.MappingProxyType(dict(row)), self.grading)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a broken scorer leaves an empty score, not a dead sweep
                    score = Score(None, f"the scorer failed: {type(exc).__name__}: {exc}")
            row[column] = score.value
            row[explanation_column(scorer.name)] = score.explanation
            self.spent += score.cost or 0.0

    async def _rescore(self, trial_id: str) -> None:
        """A finished trial from an earlier call that lacks a score this call adds: score it, do not run it again."""
        row = dict(self.done[trial_id])
        await self._score(row)
        self.rescored += 1
        await self._record(row)

    async def _record(self, row: dict[str, Any]) -> None:
        self.new_rows[row["trial_id"]] = row
        if self.store is not None:
            manifest = self.manifest() if self.store.kind == "json" else {}  # only JSON embeds it in every write
            await self._write(self.store.append, row, manifest)


def sweep(dataset: Any, models: str | Sequence[str] | None = None, *, scorers: Any = None, prompt: str | None = None,
          repeats: int = 1, concurrency: int = 4, agent_concurrency: int | Mapping[str, int] | None = None,
          timeout: float | None = 300, retries: int = 2, backoff: float = 1.0, budget: float | None = None,
          config: Mapping[str, Any] | None = None, permission: PermissionPolicy | None = None,
          cwd: str | os.PathLike[str] | None = None, out: str | os.PathLike[str] | None = None,
          retry_failed: bool = False, executor: Any = "local", agent: AgentLike = None,
          workspace: str | os.PathLike[str] | None = None, setup: str | None = None, keep_workspaces: bool = False,
          keep_sessions: bool = False, workspace_limit_mb: float = 1024, sandbox: str | None = None,
          network: bool = True, task_env: str | None = None, progress: ProgressLike = None) -> SweepResult:
    """Send every sample to every model ``repeats`` times, score each reply, and record each trial.

    ``dataset``: a prompt, a list of prompts or dicts, a pandas DataFrame, or a .csv/.json/.jsonl path.
    A sample's id is its ``sample_id``/``id`` field or a hash of its content; its prompt is ``prompt``
    (a template: ``"What is {a} {op} {b}?"``) filled from its fields, else its ``prompt`` field; its
    ``target`` is optional; its other fields are carried into the rows.

    ``models`` are ``agent:model`` ids: the agent is a registered name (``acpnb.agents()``), started
    once and shared by its trials; the rest is the value of its model option. With ``agent=`` (an
    Agent such as the proxy, or a spec to start) the ids are that agent's own model values. Each trial
    opens a fresh session, sets the model, then ``config``, checks the agent reports the model in
    force (else the row is an error and nothing is sent), sends the prompt, records the turn, and runs
    the ``scorers`` (built-ins from ``acp_notebook.sweep``, names like ``"exact"``, or functions
    ``(row) -> score | (score, explanation)``), which fill ``score_<name>`` columns.

    Robustness: up to ``concurrency`` trials at once (``agent_concurrency`` caps each agent: a number,
    or ``{"claude": 2}``); a turn slower than ``timeout`` s is cancelled; an agent that exits, a
    timeout or a reported rate limit is retried up to ``retries`` times, ``backoff`` s doubling each
    time; once the trials' (and graders') cost reaches ``budget``, no new trial starts; Ctrl-C / a
    kernel interrupt stops the trials in flight, closes the agents and keeps what finished.

    ``out``: a run directory (rows.jsonl, manifest.json, trajectories/) or a .jsonl/.csv/.json file;
    calling again with the same ``out`` runs only the missing trials (``retry_failed=True``: failed ones
    too) and scores old rows with scorers they lack. ``acpnb.load_run(out)`` reopens it.
    ``executor="ray"`` (or a ``RayExecutor``) runs the trials on a Ray cluster, same rows and files.

    Workspaces (agentic tasks): with ``workspace=DIR`` (or a sample's ``workspace`` field; an empty one asks
    for an empty directory) every trial works in a fresh copy of DIR: a git worktree of HEAD when DIR is the
    top of a git repository, else ``cp --reflink=auto`` (copy-on-write where the filesystem offers it); the
    session's cwd is that copy, so the client's file access is confined to it. ``setup`` runs there first
    (a failure is an error row). After the turn the copy's diff against its start is kept beside the
    trial's recording (``diff`` column) and check scorers grade it (``command("pytest -q")``,
    ``file_contains``, functions ``(row, workspace)``); then it is deleted unless ``keep_workspaces``. A
    DIR over ``workspace_limit_mb`` is refused. ``permission`` (None) allows the agent's requests inside a
    workspace and denies them elsewhere. Trials close their sessions and delete them where the agent
    offers session/delete, unless ``keep_sessions``; ``acp_notebook.sweep.tasks(DIR)`` reads Harbor task
    folders as such a dataset.
    ``sandbox="bwrap"``: every agent process runs under bubblewrap, the filesystem read-only except its
    trial's workspace, a private /tmp and the agent's own state folders (``AgentSpec.state_dirs``), the user's
    credential folders (~/.ssh...) and the sweep's run directory hidden; one process per concurrency slot,
    whose folder holds one trial at a time and is emptied (with its /tmp) between trials, the process and
    its memory living on (``"bwrap-trial"``: a process per trial; ``"bwrap-shared"``: one per agent, writable
    in every workspace); setup and command checks run in the same sandbox; ``network=False`` cuts the network
    too. Not a VM: see the README.
    Task folders: a task's container paths (its WORKDIR, /tests, /logs/verifier, /solution) are then mounts of
    the trial's folders. ``agent="oracle"`` runs each task's ``solution/solve.sh`` instead of an agent (models
    default to ["oracle"]), to check the tasks can be solved; ``task_env="venv"`` installs the ``pip install``
    packages of each task's Dockerfile in a cached virtualenv that solve.sh and test.sh run with.
    ``progress``: None picks a widget in notebooks and a text bar elsewhere; False shows nothing.
    """
    state, bar = prepare(dataset, models, scorers=scorers, prompt=prompt, repeats=repeats, concurrency=concurrency,
                          agent_concurrency=agent_concurrency, timeout=timeout, retries=retries, backoff=backoff,
                          budget=budget, config=config, permission=permission, cwd=cwd, out=out,
                          retry_failed=retry_failed, executor=executor, agent=agent, workspace=workspace, setup=setup,
                          keep_workspaces=keep_workspaces, keep_sessions=keep_sessions,
                          workspace_limit_mb=workspace_limit_mb, sandbox=sandbox, network=network, task_env=task_env,
                          progress=progress)
    return run_blocking(state, bar)


def run_blocking(state: _Sweep, bar: Progress) -> SweepResult:
    """Run a prepared sweep on the background loop and wait for it (the command line uses this too)."""
    try:
        _loop.run_sync(state.run(bar), None, what="the sweep")
    except BaseException:
        # Ctrl-C / kernel interrupt: the finished rows are in `out`; return once the agents are closed.
        state.wait_for_cleanup()
        raise
    finally:
        bar.close()
    return state.result()


async def asweep(dataset: Any, models: str | Sequence[str] | None = None, **options: Any) -> SweepResult:
    state, bar = prepare(dataset, models, **options)
    try:
        await _loop.run_async(state.run(bar), None, what="the sweep")
    except BaseException:
        await asyncio.get_running_loop().run_in_executor(None, state.wait_for_cleanup)
        raise
    finally:
        bar.close()
    return state.result()


# The awaitable twin carries sweep's signature and docstring, so help() shows the same arguments for both.
asweep.__signature__ = inspect.signature(sweep)  # type: ignore[attr-defined]
asweep.__doc__ = (f"{inspect.cleandoc(sweep.__doc__ or '')}\n\nAwaitable from any event loop "
                  "(``await asweep(...)`` in a cell); the trials run on the background loop either way.")


def prepare(dataset: Any, models: Any, *, progress: ProgressLike = None, syntax: Syntax = PYTHON,
             **options: Any) -> tuple[_Sweep, Progress]:
    """Check the arguments, load the dataset, read what ``out`` holds: everything before the first trial."""
    defaults = {name: p.default for name, p in inspect.signature(sweep).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY and name != "progress"}  # one list of options: sweep's
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise TypeError(f"sweep() got unexpected argument{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    state = _Sweep(dataset, models, syntax=syntax, **{**defaults, **options})
    bar = make_progress(progress)
    bar.start(len(state.todo), state.skipped)
    return state, bar
