"""One trial of a sweep: the plan of trials, their stable ids, the agents they run on, and one attempt at a trial.

Everything here runs on the background loop thread of the process that executes the trial:
the notebook's for the local executor, a Ray worker's for the Ray executor. ``AgentPool`` is
mutated only there. ``Trial``, ``TrialSettings`` and ``Outcome`` are plain picklable data, so
the Ray executor ships them between processes unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import tempfile
import time
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .._once import SharedStart
from .._protocol import join_agent_model, parse_bool_word, split_agent_model
from ..client import Agent, PermissionPolicy, Session, astart
from ..errors import AcpError, AcpTimeoutError, AgentExitedError, ConfigOptionError, RpcError
from ..launch import SpecLike
from ..record import session_recording
from ..sandbox import Sandbox, wrap_spec
from ..turn import Turn
from .checks import CheckError, WorkspaceScorer
from .columns import FIXED_COLUMNS, explanation_column, score_column
from .dataset import Sample
from .hints import PYTHON, Syntax
from .slots import Slot, Slots
from .workspace import COMMAND_SANDBOX, Workspace, WorkspaceSettings, run_command

__all__ = ["AgentPool", "ExecutorSetup", "ModelNotInForce", "Outcome", "Trial", "TrialSettings", "agent_and_value", "plan_trials",
           "run_attempt", "trial_id"]

ERROR_TEXT_LIMIT = 600
SESSION_CLOSE_TIMEOUT_S = 10.0
# Errors an agent reports when its model provider pushes back; worth another attempt after a pause.
_RATE_LIMITED = re.compile(r"rate[ _-]?limit|too many requests|\b429\b|overloaded|\b529\b|try again later",
                           re.IGNORECASE)


class ModelNotInForce(AcpError):
    """The agent accepted the model pick but its state reports another model."""

    hint = ("The agent did not switch to the requested model; the trial was not prompted so the row cannot be "
            "mistaken for the requested model's answer.")


class GradingError(Exception):
    """A grader's turn failed; ``transient`` says whether another attempt may succeed."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class Trial:
    """One cell of the sweep: a sample sent to a model, the n-th time."""

    trial_id: str
    model: str              # the id as requested ("demo:smart")
    agent_name: str | None  # the registry agent to start (None when the sweep was given agent=)
    value: str              # the value for the agent's model option
    sample: Sample
    repeat: int

    def confirmed_id(self, value: Any) -> str | None:
        """The agent's reported model value, in the namespace of ``model``."""
        if value is None:
            return None
        return join_agent_model(self.agent_name, str(value)) if self.agent_name is not None else str(value)


@dataclass(frozen=True)
class TrialSettings:
    """What every attempt needs besides the trial: the same on every worker."""

    timeout: float | None = 300
    config: Mapping[str, Any] = field(default_factory=dict)
    permission: PermissionPolicy = "deny"
    cwd: str | None = None
    workspace: str | None = None              # the sweep's workspace= (a sample's own field wins)
    workspaces: WorkspaceSettings = field(default_factory=WorkspaceSettings)
    permission_in_workspace: PermissionPolicy = "allow"  # the agent works in a throwaway copy
    checks: tuple[WorkspaceScorer, ...] = ()  # scorers that grade in the workspace, run by the trial
    # sandbox="bwrap": a trial's agent is its slot's sandboxed process, writable in the slot's folder that holds
    # the trial's workspace (slots.py); "bwrap-trial": a process of the trial's own; setup and command checks run
    # in a sandbox too (acp_notebook/sandbox.py)
    sandbox: Sandbox | None = None
    oracle: bool = False  # agent="oracle": each task's solution/solve.sh instead of an agent's turn

    def workspace_for(self, sample: Sample) -> str | None:
        return sample.workspace if sample.workspace is not None else self.workspace

    def container_workdir(self, sample: Sample) -> str | None:
        """The container path a task's Dockerfile works in (its WORKDIR), None for other samples."""
        return next((w for w in (check.workdir_for(sample.id) for check in self.checks) if w), None)

    def container_mounts(self, sample: Sample, workspace: Workspace | None) -> list[tuple[str, str]]:
        """A task's container working directory as a mount of the trial's workspace (in a sandbox)."""
        workdir = self.container_workdir(sample) if workspace is not None else None
        return [(str(workspace.path), workdir)] if workspace is not None and workdir else []

    def sandbox_for(self, workspace: Workspace | None) -> Sandbox | None:
        """The sandbox of a trial's commands: the sweep's, its workspace writable."""
        if self.sandbox is None or workspace is None:
            return self.sandbox
        return self.sandbox.with_paths([str(workspace.path)])


@dataclass(frozen=True)
class ExecutorSetup:
    """What a sweep hands its executor (executors.py, ray_executor.py): how to start each agent, and the
    settings of every attempt."""

    specs: Mapping[str, SpecLike]  # registry name -> spec, resolved where the sweep was called
    settings: TrialSettings
    slots: int                     # the sweep's concurrency: how many attempts may run at once
    given_agent: Agent | None = None
    agent_spec: SpecLike | None = None
    shipped: tuple[str, ...] = ()  # folders the trials read (workspace sources, task tests): Ray ships them


@dataclass
class Outcome:
    """What an attempt produced: the row, the turn's updates, and whether another attempt may go better."""

    row: dict[str, Any]
    trajectory: dict[str, Any] | None  # record.session_recording of the trial's session, None without one
    transient: bool = False
    diff: str | None = None  # the workspace's diff against its start, for trials with a workspace
    kept: bytes | None = None  # a Ray worker's kept workspace, packed for the caller's run directory


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:40] or "x"


def trial_id(model: str, sample_id: str, repeat: int) -> str:
    """Readable and stable: the same model, sample and repeat give the same id in every run (resume matches on it)."""
    digest = hashlib.sha256(json.dumps([model, sample_id, repeat]).encode()).hexdigest()[:6]
    return f"{_slug(model)}--{_slug(sample_id)}--r{repeat}-{digest}"


def agent_and_value(model_id: Any, *, with_agent: bool, syntax: Syntax = PYTHON) -> tuple[str | None, str]:
    """``"demo:fast"`` -> ``("demo", "fast")``; with agent= the id is that agent's own model value."""
    if not isinstance(model_id, str) or not model_id.strip():
        raise ValueError(f"model ids are non-empty strings like 'demo:fast', not {model_id!r} ({syntax['models']})")
    if with_agent:
        return None, model_id.strip()
    parts = split_agent_model(model_id.strip())
    if parts is None or not parts[0].strip() or not parts[1].strip():
        raise ValueError(f"model id {model_id!r} is not of the form agent:model (e.g. 'demo:fast', 'claude:opus'); "
                         f"{syntax['agent']}")
    return parts[0].strip(), parts[1].strip()


def plan_trials(samples: Sequence[Sample], models: Sequence[str], repeats: int, *, with_agent: bool,
                syntax: Syntax = PYTHON) -> list[Trial]:
    """Every trial, ordered repeat-major then sample then model, so the early trials cover every model (an
    interrupted sweep is still a fair comparison) and concurrent trials spread across agents."""
    split = {model: agent_and_value(model, with_agent=with_agent, syntax=syntax) for model in models}
    return [Trial(trial_id(model, sample.id, repeat), model, *split[model], sample, repeat)
            for repeat in range(repeats) for sample in samples for model in models]


def iso_time(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="microseconds")


def describe_error(phase: str, exc: BaseException) -> str:
    if isinstance(exc, AcpError):
        message = exc.message
        if isinstance(exc, ConfigOptionError) and exc.hint:
            message += f" ({exc.hint})"  # names the valid values
    else:
        message = str(exc)
    text = f"{phase}: {type(exc).__name__}: {' '.join(message.split())}"
    return text if len(text) <= ERROR_TEXT_LIMIT else text[: ERROR_TEXT_LIMIT - 3] + "..."


def is_transient(exc: BaseException) -> bool:
    """An agent that died, a request that timed out, or a provider's rate limit: another attempt may succeed."""
    if isinstance(exc, (AgentExitedError, AcpTimeoutError)):
        return True
    text = str(exc)
    if isinstance(exc, RpcError) and exc.data is not None:
        text += " " + json.dumps(exc.data, default=str)
    return bool(_RATE_LIMITED.search(text))


class AgentPool:
    """One agent process per agent name, started on first use and shared by that agent's trials.

    A process that died is replaced on the next use; a start that failed is not retried, so every
    trial for that agent records the same start error at once.
    """

    def __init__(self, specs: Mapping[str, SpecLike], *, cwd: str | None, permission: PermissionPolicy,
                 given: Agent | None = None, spec: SpecLike | None = None, sandbox: Sandbox | None = None,
                 workspace_root: str | None = None) -> None:
        self.specs = dict(specs)
        self.cwd = cwd
        self.permission = permission
        self.given = given
        self.spec = spec
        self.sandbox = sandbox
        self.workspace_root = workspace_root  # writable for a shared sandbox ("bwrap-shared")
        self._starting: dict[str, SharedStart[Agent]] = {}
        self.started: list[Agent] = []
        self.slots: Slots | None = None
        if sandbox is not None and sandbox.sweep_mode == "slot" and given is None:
            self.slots = Slots(sandbox, root=workspace_root or default_root(), permission=permission,
                               spec_for=self._spec, started=self.started)

    def _spec(self, name: str | None) -> Any:
        return self.spec if name is None else self.specs.get(name, name)

    async def get(self, name: str | None) -> Agent:
        if self.given is not None:
            return self.given
        key = name or ""
        starting = self._starting.get(key)
        if starting is None:
            starting = self._starting[key] = SharedStart(_agent_exited, name=f"sweep-start-{key}")
        return await starting.get(lambda: self._start(name))

    async def _start(self, name: str | None) -> Agent:
        spec = self._spec(name)
        if self.sandbox is not None:  # writable in this sweep's workspaces ("bwrap-shared"), else in none
            shared = self.sandbox.sweep_mode == "shared" and self.workspace_root
            cwd, roots = self.cwd or os.getcwd(), [self.workspace_root] if shared else []
            for root in roots:
                await asyncio.to_thread(os.makedirs, root, exist_ok=True)
            spec = await asyncio.to_thread(wrap_spec, spec, self.sandbox.with_paths(roots), cwd=cwd,
                                           writable_cwd=False)
        agent = await astart(spec, cwd=self.cwd, permission=self.permission)  # type: ignore[arg-type]
        self.started.append(agent)
        return agent

    def lease_slot(self, name: str | None, workdir: str | None = None) -> Slot | None:
        """A sandbox slot for a trial with a workspace (``sandbox="bwrap"``), None in the other modes."""
        return self.slots.lease(name, workdir) if self.slots is not None else None

    async def release_slot(self, slot: Slot, *, clean: bool) -> None:
        assert self.slots is not None
        await self.slots.release(slot, clean=clean)

    async def for_trial(self, name: str | None, workspace: Workspace | None,
                        mounts: Sequence[tuple[str, str]] = (), slot: Slot | None = None) -> tuple[Agent, bool]:
        """The agent a trial talks to, and whether it is the trial's own: in a sandbox slot, the slot's process;
        with ``sandbox="bwrap-trial"``, a trial with a workspace gets a process of its own whose only writable
        folder of ours is that workspace (the trial closes it)."""
        if slot is not None and self.slots is not None:
            return await self.slots.agent(slot, mounts), False
        if (self.sandbox is None or workspace is None or self.given is not None
                or self.sandbox.sweep_mode != "trial"):
            return await self.get(name), False
        spec = self._spec(name)
        cwd = str(workspace.path)
        wrapped = await asyncio.to_thread(wrap_spec, spec, self.sandbox.with_paths(mounts=mounts), cwd=cwd)
        agent = await astart(wrapped, cwd=cwd, permission=self.permission)
        self.started.append(agent)
        return agent, True

    async def close_all(self) -> None:
        for starting in list(self._starting.values()):
            await starting.settle()
        await asyncio.gather(*(agent.aclose() for agent in self.started), return_exceptions=True)
        if self.slots is not None:
            await self.slots.close()

    def describe(self) -> dict[str, Any]:
        """Per agent name: its info from initialize, command, protocol version and the pids it ran as."""
        agents: dict[str, Any] = {}
        if self.given is not None:
            agents[self.given.name] = {**self._facts(self.given), "started_by_sweep": False}
        for agent in self.started:
            earlier = agents.get(agent.name, {})
            facts = {**self._facts(agent), "started_by_sweep": True}
            facts["pids"] = [*earlier.get("pids", []), agent.pid]
            facts["processes"] = len(facts["pids"])
            agents[agent.name] = facts
        for key, starting in self._starting.items():
            error = starting.failure()
            if error is not None:
                agents.setdefault(key or str(self.spec), {"error": str(error).splitlines()[0]})
        return agents

    @staticmethod
    def _facts(agent: Agent) -> dict[str, Any]:
        return {"info": dict(agent.info), "command": list(agent.command), "pids": [agent.pid],
                "protocol_version": agent.protocol_version}


def _agent_exited(start: asyncio.Task[Agent]) -> bool:
    """A pool's policy: start anew once the agent exited; a failed start is not retried (its error is every
    trial's answer)."""
    return start.exception() is None and start.result().status == "exited"


@dataclass
class Attempt:
    """Where an attempt got to: the phase for error messages, and the session and workspace to close whatever
    happens."""

    phase: str = "starting the agent"
    session: Session | None = None
    workspace: Workspace | None = None
    workspace_ready: bool = False
    diff: str | None = None
    own_agent: Agent | None = None  # a sandboxed trial's own agent process, closed when the trial ends
    slot: Slot | None = None  # sandbox="bwrap": the slot whose folder holds the workspace, given back at the end


async def open_session(pool: AgentPool, agent_name: str | None, value: str, settings: TrialSettings,
                       row: dict[str, Any], confirmed: Any, attempt: Attempt, *,
                       workspace: Workspace | None = None, mounts: Sequence[tuple[str, str]] = ()) -> Session:
    """A fresh session on the agent (in the trial's workspace, if it has one), with the model set and
    confirmed, then ``settings.config``.

    ``row`` gets agent, session_id, confirmed_model and config as they become known; ``confirmed``
    maps the agent's model value to the id recorded.
    """
    agent, own = await pool.for_trial(agent_name, workspace, mounts, attempt.slot)
    attempt.own_agent = agent if own else None
    row["agent"] = agent.name
    attempt.phase = "session/new"
    if workspace is not None:
        cwd, permission = str(workspace.path), settings.permission_in_workspace
    else:
        cwd, permission = settings.cwd, settings.permission
    session = attempt.session = await agent.anew_session(cwd=cwd, permission=permission)
    row["session_id"] = session.id
    attempt.phase = f"setting the model to {value!r}"
    await _select_model(session, value, row, confirmed)
    for config_id, config_value in settings.config.items():
        attempt.phase = f"setting {config_id}={config_value!r}"
        await session.aset(config_id, _coerce(session, config_id, config_value))
    if settings.config:
        # A later option can move the model (an agent may tie settings together): check again.
        attempt.phase = "checking the model after config"
        _confirm(value, session, row, confirmed)
    row["config"] = dict(session.config.values())
    return session


def _coerce(session: Session, config_id: str, value: Any) -> Any:
    """Let command-line words ("true", "off") drive boolean options."""
    option = session.config.get(config_id)
    if option is not None and option.type == "boolean" and isinstance(value, str):
        word = parse_bool_word(value)
        return value if word is None else word
    return value


async def _select_model(session: Session, value: str, row: dict[str, Any], confirmed: Any) -> None:
    option = session.model_option
    if option is None:
        raise ConfigOptionError(
            f"agent '{session.agent.name}' offers no model option in its sessions",
            config_id="model", value=value, valid=session.config.ids(),
            hint=f"Its options are: {', '.join(session.config.ids()) or 'none'}.",
        )
    if not (option.read_only and option.value == value):
        # Agents that only report the old `models` field cannot switch, but then the requested one is in force.
        await session.aset(option.id, value)
    _confirm(value, session, row, confirmed)


def _confirm(value: str, session: Session, row: dict[str, Any], confirmed: Any) -> None:
    reported = session.model
    row["confirmed_model"] = confirmed(reported)
    if reported != value:
        raise ModelNotInForce(f"asked for model {value!r} but the agent reports {reported!r} as the model in force")


def blank_row(trial: Trial) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(FIXED_COLUMNS)
    sample = trial.sample
    row.update(trial_id=trial.trial_id, model=trial.model, model_value=trial.value, agent=trial.agent_name,
               sample_id=sample.id, sample_index=sample.index, repeat=trial.repeat, prompt=sample.prompt,
               target=sample.target, status="ok", timed_out=False, text="", thoughts="", tool_calls=0, attempts=1)
    row.update(sample.metadata)
    return row


async def run_attempt(trial: Trial, pool: AgentPool, settings: TrialSettings) -> Outcome:
    """One attempt: its workspace (if any), a fresh session, model set and confirmed, config, the prompt, the turn
    recorded, then the workspace's diff and checks. Never raises (except cancellation): a failure is a row with
    status error or timeout."""
    row = blank_row(trial)
    row["started_at"] = iso_time(time.time())
    attempt = Attempt()
    transient = False
    try:
        if not settings.oracle and settings.workspace_for(trial.sample) is not None:
            attempt.slot = pool.lease_slot(trial.agent_name, settings.container_workdir(trial.sample))
        workspace = await make_workspace(trial, settings, row, attempt)
        if settings.oracle:
            await _oracle(trial, settings, row, attempt, workspace)
        else:
            attempt.phase = "starting the agent"
            session = await open_session(pool, trial.agent_name, trial.value, settings, row, trial.confirmed_id,
                                         attempt, workspace=workspace,
                                         mounts=settings.container_mounts(trial.sample, workspace))
            attempt.phase = "prompt"
            transient = await _prompt(session, trial, settings, row)
        if workspace is not None:
            attempt.phase = "measuring the workspace's changes"
            attempt.diff = await _diff(workspace, row)
            if row["status"] == "ok":
                token = COMMAND_SANDBOX.set(settings.sandbox_for(workspace))  # command checks run in it too
                try:
                    await run_checks(settings.checks, workspace, row, attempt)
                finally:
                    COMMAND_SANDBOX.reset(token)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - one failing trial must never stop the sweep
        row.update(status="error", error=describe_error(attempt.phase, exc))
        transient = is_transient(exc)
    finally:
        await close_quietly(attempt.session, delete=not settings.workspaces.keep_sessions)
        if attempt.own_agent is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(attempt.own_agent.aclose(), SESSION_CLOSE_TIMEOUT_S)
        await _finish_workspace(attempt, settings, row, trial)
        if attempt.slot is not None:
            await pool.release_slot(attempt.slot, clean=row["status"] == "ok")
        row["ended_at"] = iso_time(time.time())
    session = attempt.session
    return Outcome(row, session_recording(session.agent, session.id) if session is not None else None, transient,
                   attempt.diff)


async def _prompt(session: Session, trial: Trial, settings: TrialSettings, row: dict[str, Any]) -> bool:
    """Send the prompt and record the turn; True when a timeout makes another attempt worth it."""
    try:
        turn = await session.aprompt(trial.sample.prompt, timeout=settings.timeout)
    except AcpError as exc:
        turn = session.turns[-1] if session.turns else None
        record_turn(row, trial, turn)
        if not isinstance(exc, AcpTimeoutError):
            raise
        row.update(status="timeout", timed_out=True, error=(
            f"prompt: no answer within {settings.timeout:g} s; the turn was cancelled "
            f"(stop reason {row['stop_reason']!r})"))
        return True
    record_turn(row, trial, turn)
    if turn.error is not None:
        raise turn.error
    if row["model_at_end"] != row["confirmed_model"]:
        raise ModelNotInForce(f"the agent switched the model during the turn: {row['confirmed_model']!r} -> "
                              f"{row['model_at_end']!r}; this answer is not the requested model's")
    return False


async def make_workspace(trial: Trial, settings: TrialSettings, row: dict[str, Any],
                         attempt: Attempt) -> Workspace | None:
    """The trial's fresh copy of its workspace, set up (``setup=``) and its starting state noted; None without."""
    source = settings.workspace_for(trial.sample)
    if source is None:
        return None
    options = settings.workspaces
    attempt.phase = "making the workspace"
    if attempt.slot is not None:
        workspace = attempt.workspace = await Workspace.fill(source, attempt.slot.work)
    else:
        root = Path(options.root) if options.root else Path(default_root())
        workspace = attempt.workspace = await Workspace.create(source, root, trial.trial_id)
    row.update(workspace=source, workspace_method=workspace.method, workspace_commit=workspace.commit,
               workspace_path=str(workspace.path))
    if options.setup:
        attempt.phase = "setup"
        result = await run_command(options.setup, workspace.path, timeout=options.setup_timeout,
                                   sandbox=settings.sandbox_for(workspace))
        if result.exit_code != 0:
            raise WorkspaceSetupError(f"setup command {options.setup!r}: {result.summary(600)}")
    attempt.phase = "noting the workspace's starting state"
    await workspace.mark_start(after_setup=bool(options.setup))
    attempt.workspace_ready = True
    return workspace


def default_root() -> str:
    """Where a process makes trial workspaces when the sweep names no root (a Ray worker's own)."""
    return str(Path(tempfile.gettempdir()) / "acp-notebook-workspaces")


class WorkspaceSetupError(Exception):
    """The setup command failed or timed out; the trial is not prompted."""


async def _oracle(trial: Trial, settings: TrialSettings, row: dict[str, Any], attempt: Attempt,
                  workspace: Workspace | None) -> None:
    """The task's own solution/solve.sh in place of a turn (in the sandbox, if any): the row's text is its output;
    a script that fails makes an error row, so a task that cannot be solved is never graded as a wrong answer."""
    attempt.phase = "solution/solve.sh"
    solver = next((c for c in settings.checks if hasattr(c, "solve")), None)
    if solver is None or workspace is None:
        raise CheckError("agent='oracle' runs each task's solution/solve.sh: sweep tasks(DIR)")
    row.update(agent="oracle", confirmed_model=trial.model, model_at_end=trial.model)
    token = COMMAND_SANDBOX.set(settings.sandbox_for(workspace))
    try:
        result = await solver.solve(row, workspace.path, settings.timeout)
    finally:
        COMMAND_SANDBOX.reset(token)
    row.update(text=result.output[-ERROR_TEXT_LIMIT * 4:], duration_s=round(result.duration_s, 6),
               stop_reason="end_turn")
    if result.exit_code != 0:
        raise CheckError(f"solution/solve.sh {result.summary(300)}")


async def _diff(workspace: Workspace, row: dict[str, Any]) -> str:
    text, count = await workspace.diff()
    row["files_changed"] = count
    return text


async def run_checks(checks: Sequence[WorkspaceScorer], workspace: Workspace, row: dict[str, Any],
                     attempt: Attempt) -> None:
    """Every check, in order; one that cannot grade makes the row an error (the others still run)."""
    problems = []
    for check in checks:
        attempt.phase = f"check {check.name}"
        try:
            score = await check.check(types.MappingProxyType(dict(row)), workspace.path)
        except CheckError as exc:
            row[score_column(check.name)], row[explanation_column(check.name)] = None, str(exc)
            problems.append(f"check {check.name}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - a broken check is reported in its row, like a broken scorer
            row[score_column(check.name)] = None
            row[explanation_column(check.name)] = f"the check failed: {type(exc).__name__}: {exc}"
            continue
        row[score_column(check.name)], row[explanation_column(check.name)] = score.value, score.explanation
    if problems:
        row.update(status="error", error="; ".join(problems)[:ERROR_TEXT_LIMIT])


async def _finish_workspace(attempt: Attempt, settings: TrialSettings, row: dict[str, Any], trial: Trial) -> None:
    """A failed trial's diff is still taken (it shows how far the agent got); then the copy goes unless kept (a
    slot's is copied out to where it would have been made, then the slot emptied)."""
    workspace = attempt.workspace
    if workspace is None:
        return
    if attempt.diff is None and attempt.workspace_ready:
        with contextlib.suppress(Exception):
            attempt.diff = await _diff(workspace, row)
    if workspace.in_slot and settings.workspaces.keep:
        kept = Path(settings.workspaces.root or default_root()) / trial.trial_id
        try:
            await workspace.keep_at(kept)
            row["workspace_path"] = str(kept)
        except Exception as exc:  # noqa: BLE001 - the row says the copy is missing
            row["error"] = (row.get("error") or "") + f" (the workspace could not be kept at {kept}: {exc})"
    if not settings.workspaces.keep or workspace.in_slot:
        try:
            await workspace.remove()
        except Exception as exc:  # noqa: BLE001 - the row says where the leftover is
            row["error"] = (row.get("error") or "") + f" (the workspace {workspace.path} was not removed: {exc})"


async def close_quietly(session: Session | None, *, delete: bool = False) -> None:
    """Close the session; with ``delete``, also delete it where the agent offers session/delete, so a sweep's
    sessions stay out of the agent's list."""
    if session is None:
        return
    with contextlib.suppress(Exception):
        await asyncio.wait_for(session.aclose(), SESSION_CLOSE_TIMEOUT_S)
    connection = session.agent.connection
    if delete and connection.state == "running" and connection.supports("delete"):
        with contextlib.suppress(Exception):
            await asyncio.wait_for(session.agent.adelete_session(session.id), SESSION_CLOSE_TIMEOUT_S)


async def ask_model(pool: AgentPool, agent_name: str | None, value: str, prompt: str, *,
                    cwd: str | None, timeout: float | None, keep_session: bool = False) -> tuple[Turn, str | None]:
    """A turn with another model (a grader): fresh session, model set and confirmed, no other options.

    Returns the turn and the model id in force; raises GradingError naming the phase of a failure.
    """
    settings = TrialSettings(timeout=timeout, cwd=cwd)
    row: dict[str, Any] = {}
    attempt = Attempt()
    confirmed = (lambda v: None if v is None else join_agent_model(agent_name, str(v))) if agent_name else str
    try:
        session = await open_session(pool, agent_name, value, settings, row, confirmed, attempt)
        attempt.phase = "prompt"
        turn = await session.aprompt(prompt, timeout=timeout)
        if turn.error is not None:
            raise turn.error
        return turn, row.get("confirmed_model")
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        raise GradingError(describe_error(attempt.phase, exc), transient=is_transient(exc)) from exc
    finally:
        await close_quietly(attempt.session, delete=not keep_session)


_USAGE_COLUMNS = (("inputTokens", "input_tokens"), ("outputTokens", "output_tokens"),
                  ("thoughtTokens", "thought_tokens"), ("totalTokens", "total_tokens"),
                  ("cachedReadTokens", "cached_read_tokens"), ("cachedWriteTokens", "cached_write_tokens"),
                  ("used", "context_used"), ("size", "context_size"))


def _count(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def record_turn(row: dict[str, Any], trial: Trial, turn: Turn | None) -> None:
    """Copy what the turn produced into the row (see COLUMN_SOURCES for where each value comes from)."""
    if turn is None:
        return
    row.update(text=turn.text, thoughts=turn.thoughts, stop_reason=turn.stop_reason, duration_s=turn.duration_s,
               ttft_s=turn.ttft_s, tool_calls=len(turn.tool_calls), model_at_end=trial.confirmed_id(turn.model))
    usage = turn.usage or {}
    for wire, column in _USAGE_COLUMNS:
        if _count(usage.get(wire)):
            row[column] = int(usage[wire])
    if row["total_tokens"] is None and row["context_used"] is not None:
        # Each trial has a fresh session, so the context after the turn holds exactly this trial's tokens.
        row["total_tokens"] = row["context_used"]
    cost = usage.get("cost")
    if isinstance(cost, Mapping) and _count(cost.get("amount")):
        row["cost"] = float(cost["amount"])
        row["currency"] = cost.get("currency")
