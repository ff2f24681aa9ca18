"""Running a sweep: plan the (prompt, model, repeat) runs, start agents once, run in parallel, record each turn."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import platform
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Union

from .. import _loop
from ..client import Agent, PermissionPolicy, Session, astart
from ..errors import AcpError, AcpTimeoutError, ConfigOptionError
from ..launch import SpecLike, known_names, registered
from ..state import ConfigOptions
from ..turn import Turn
from .progress import Progress, ProgressLike, make_progress
from .result import (
    COLUMNS,
    SweepResult,
    blank_row,
    out_format,
    read_rows,
    rows_to_csv,
    write_json_document,
    write_sidecar,
)

__all__ = ["ModelNotInForce", "PlannedRun", "asweep", "plan_runs", "split_model_id", "sweep"]

AgentLike = Union[Agent, SpecLike, None]
ERROR_TEXT_LIMIT = 600
SESSION_CLOSE_TIMEOUT_S = 10.0
CLEANUP_WAIT_S = 30.0  # how long an interrupted sweep waits for its agents to close before it returns


class ModelNotInForce(AcpError):
    """The agent accepted the model pick but its state reports another model."""

    hint = ("The agent did not switch to the requested model; the run was not prompted so the row cannot be "
            "mistaken for the requested model's answer.")


@dataclass(frozen=True)
class PlannedRun:
    """One cell of the sweep: a prompt sent to a model, the n-th time."""

    model: str                # the id as requested ("demo:smart")
    agent_name: str | None    # the registry agent to start (None when the sweep was given agent=)
    value: str                # the value for the agent's model option
    prompt: str
    prompt_index: int
    repeat: int

    @property
    def key(self) -> tuple[str, str, int]:
        return run_key(self.model, self.prompt, self.repeat)

    def confirmed_id(self, value: Any) -> str | None:
        """The agent's reported model value, in the namespace of ``model``."""
        if value is None:
            return None
        return f"{self.agent_name}:{value}" if self.agent_name is not None else str(value)


def run_key(model: Any, prompt: Any, repeat: Any) -> tuple[str, str, int]:
    return (str(model), str(prompt), int(repeat))


def split_model_id(model_id: str) -> tuple[str, str]:
    """``"agent:model"`` -> ``("agent", "model")``; the model part may itself contain ':' or '/'."""
    if not isinstance(model_id, str):
        raise TypeError(f"model ids are strings like 'demo:fast', not {model_id!r}")
    agent_name, sep, value = model_id.partition(":")
    if not sep or not agent_name.strip() or not value.strip():
        raise ValueError(
            f"model id {model_id!r} is not of the form agent:model (e.g. 'demo:fast', 'claude:opus'). "
            "To sweep one agent's own model values, pass agent=..."
        )
    return agent_name.strip(), value.strip()


def plan_runs(prompts: Sequence[str], models: Sequence[str], repeats: int, *,
              with_agent: bool) -> list[PlannedRun]:
    """Every run, ordered repeat-major then prompt then model, so the early runs cover every model
    (an interrupted sweep is still a fair comparison) and concurrent runs spread across agents."""
    runs = []
    for repeat in range(repeats):
        for prompt_index, prompt in enumerate(prompts):
            for model in models:
                if with_agent:
                    runs.append(PlannedRun(model, None, model, prompt, prompt_index, repeat))
                else:
                    agent_name, value = split_model_id(model)
                    runs.append(PlannedRun(model, agent_name, value, prompt, prompt_index, repeat))
    return runs


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="microseconds")


def _describe_error(phase: str, exc: BaseException) -> str:
    if isinstance(exc, AcpError):
        message = exc.message
        if isinstance(exc, ConfigOptionError) and exc.hint:
            message += f" ({exc.hint})"  # names the valid values
    else:
        message = str(exc)
    text = f"{phase}: {type(exc).__name__}: {' '.join(message.split())}"
    return text if len(text) <= ERROR_TEXT_LIMIT else text[: ERROR_TEXT_LIMIT - 3] + "..."


def _model_value(config: ConfigOptions) -> Any:
    option = config.by_category("model") or config.get("model")
    return option.value if option is not None else None


def _coerce(session: Session, config_id: str, value: Any) -> Any:
    """Let CLI-style strings "true"/"false" drive boolean options."""
    option = session.config.get(config_id)
    if option is not None and option.type == "boolean" and isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("true", "on", "yes", "1"):
            return True
        if lowered in ("false", "off", "no", "0"):
            return False
    return value


def _package_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("acp-notebook", "agent-client-protocol"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "unknown"
    return out


class _AgentPool:
    """One agent process per agent name, started on first use and shared by that agent's runs.

    A process that died (crashed mid-run) is replaced on the next use; a start that failed is
    not retried, so every run for that agent records the same start error at once.
    """

    def __init__(self, *, cwd: str | None, permission: PermissionPolicy, given: Agent | None,
                 spec: SpecLike | None) -> None:
        self.cwd = cwd
        self.permission = permission
        self.given = given
        self.spec = spec
        self._starting: dict[str, asyncio.Future[Agent]] = {}
        self.started: list[Agent] = []
        self.restarts: dict[str, int] = {}

    async def get(self, name: str | None) -> Agent:
        if self.given is not None:
            return self.given
        key = name or ""
        future = self._starting.get(key)
        if future is not None and future.done() and not future.cancelled() and future.exception() is None:
            if future.result().status == "exited":
                self.restarts[key] = self.restarts.get(key, 0) + 1
                future = None
        if future is None:
            future = asyncio.ensure_future(self._start(name))
            self._starting[key] = future
        # Shielded: a run that is cancelled must not cancel a start other runs are waiting on.
        return await asyncio.shield(future)

    async def _start(self, name: str | None) -> Agent:
        spec = self.spec if name is None else name
        agent = await astart(spec, cwd=self.cwd, permission=self.permission)  # type: ignore[arg-type]
        self.started.append(agent)
        return agent

    async def close_all(self) -> None:
        for future in list(self._starting.values()):
            if not future.done():
                with contextlib.suppress(BaseException):
                    await future
        await asyncio.gather(*(agent.aclose() for agent in self.started), return_exceptions=True)

    def describe(self) -> dict[str, Any]:
        agents: dict[str, Any] = {}
        if self.given is not None:
            agents[self.given.name] = self._agent_facts(self.given, owned=False)
        for agent in self.started:
            earlier = agents.get(agent.name, {})
            facts = self._agent_facts(agent, owned=True)
            facts["pids"] = [*earlier.get("pids", []), agent.pid]
            facts["processes"] = len(facts["pids"])
            agents[agent.name] = facts
        for key, future in self._starting.items():
            if future.done() and not future.cancelled() and future.exception() is not None:
                agents.setdefault(key or str(self.spec), {"error": str(future.exception()).splitlines()[0]})
        return agents

    @staticmethod
    def _agent_facts(agent: Agent, *, owned: bool) -> dict[str, Any]:
        return {"info": dict(agent.info), "command": list(agent.command), "pids": [agent.pid],
                "protocol_version": agent.protocol_version, "started_by_sweep": owned}


class _OutFile:
    """Results written as runs finish: CSV and JSON Lines append; JSON rewrites the document atomically."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.format = out_format(self.path)
        self.rows: list[dict[str, Any]] = []
        self.metadata: dict[str, Any] = {}
        if self.path.exists() and self.path.stat().st_size > 0:
            self.rows, self.metadata = read_rows(self.path)
            if self.format == "csv":
                self._check_csv_header()

    def _check_csv_header(self) -> None:
        with self.path.open(encoding="utf-8") as handle:
            header = handle.readline().strip()
        if header != ",".join(COLUMNS):
            raise ValueError(
                f"{self.path} has other columns than this version writes; resume into a new file, "
                "or convert it with SweepResult.load(path).to_csv(new_path)"
            )

    def append(self, row: dict[str, Any], metadata: Mapping[str, Any]) -> None:
        self.rows.append(row)
        if self.format == "json":
            write_json_document(self.path, self.rows, metadata)
            return
        if self.format == "csv":
            fresh = not self.path.exists() or self.path.stat().st_size == 0
            text = rows_to_csv([row], header=fresh)
        else:
            text = json.dumps(row, default=str) + "\n"
        with self.path.open("a", encoding="utf-8", newline="") as handle:
            handle.write(text)

    def write_metadata(self, metadata: Mapping[str, Any]) -> None:
        if self.format == "json":
            write_json_document(self.path, self.rows, metadata)
        else:
            write_sidecar(self.path, metadata)


class _Sweep:
    """One call of ``sweep``: validated arguments, the plan, and the rows as they come in."""

    def __init__(self, prompts: str | Sequence[str], models: str | Sequence[str], *, agent: AgentLike,
                 repeats: int, concurrency: int, timeout: float | None, config: Mapping[str, Any] | None,
                 permission: PermissionPolicy, cwd: str | os.PathLike[str] | None,
                 out: str | os.PathLike[str] | None, retry_errors: bool) -> None:
        self.prompts = [prompts] if isinstance(prompts, str) else [str(p) for p in prompts]
        self.models = [models] if isinstance(models, str) else list(models)
        if not self.prompts:
            raise ValueError("sweep needs at least one prompt")
        if not self.models:
            raise ValueError("sweep needs at least one model id, e.g. models=['demo:fast', 'demo:smart']")
        if len(set(self.models)) != len(self.models):
            raise ValueError(f"a model id is listed twice: {self.models}; use repeats= to run a model more often")
        if not isinstance(repeats, int) or repeats < 1:
            raise ValueError(f"repeats must be a whole number >= 1, not {repeats!r}")
        if not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be a whole number >= 1, not {concurrency!r}")
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a number of seconds > 0 (or None for no limit), not {timeout!r}")
        self.config = dict(config or {})
        if "model" in self.config:
            raise ValueError("config= sets the other options; the model comes from models=")
        self.given_agent = agent if isinstance(agent, Agent) else None
        self.agent_spec = None if agent is None or isinstance(agent, Agent) else agent
        with_agent = agent is not None
        self.plan = plan_runs(self.prompts, self.models, repeats, with_agent=with_agent)
        if not with_agent:
            unknown = sorted({run.agent_name for run in self.plan if registered(run.agent_name or "") is None})
            if unknown:
                raise ValueError(
                    f"unknown agent{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} in the model ids; "
                    f"registered agents: {', '.join(known_names())}. Register one with acpnb.register(name, "
                    "command), or pass agent= to sweep an agent's own model values."
                )
        self.repeats = repeats
        self.concurrency = concurrency
        self.timeout = timeout
        self.permission = permission
        self.cwd = str(Path(cwd).resolve()) if cwd is not None else None
        self.out = _OutFile(out) if out is not None else None
        self.retry_errors = retry_errors
        self.done: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.previous_metadata: dict[str, Any] = {}
        if self.out is not None:
            self.previous_metadata = dict(self.out.metadata)
            for row in self.out.rows:
                if row.get("model") is None or row.get("repeat") is None:
                    continue
                if self.retry_errors and row.get("status") != "ok":
                    continue
                self.done[run_key(row["model"], row.get("prompt") or "", row["repeat"])] = row
        self.todo = [run for run in self.plan if run.key not in self.done]
        self.skipped = len(self.plan) - len(self.todo)
        self.new_rows: dict[tuple[str, str, int], dict[str, Any]] = {}
        self.created = time.time()
        self.finished: float | None = None
        self.pool: _AgentPool | None = None
        # Set when run() begins and when its cleanup (agents closed, metadata written) is over, so an
        # interrupted caller can wait for the cleanup before it returns.
        self.started = threading.Event()
        self.cleaned = threading.Event()

    def wait_for_cleanup(self) -> None:
        if self.started.is_set():
            self.cleaned.wait(CLEANUP_WAIT_S)

    # --- metadata ---------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        versions = _package_versions()
        permission = self.permission if isinstance(self.permission, str) else repr(self.permission)
        meta: dict[str, Any] = {
            "created": _iso(self.created),
            "finished": _iso(self.finished) if self.finished else None,
            "acp_notebook_version": versions["acp-notebook"],
            "acp_sdk_version": versions["agent-client-protocol"],
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "prompts": list(self.prompts),
            "models": list(self.models),
            "repeats": self.repeats,
            "concurrency": self.concurrency,
            "timeout": self.timeout,
            "config": dict(self.config),
            "permission": permission,
            "cwd": self.cwd or os.getcwd(),
            "agent": (self.given_agent.name if self.given_agent is not None
                      else (str(self.agent_spec) if self.agent_spec is not None else None)),
            "agents": self.pool.describe() if self.pool is not None else {},
            "planned": len(self.plan),
            "skipped": self.skipped,
            "executed": len(self.new_rows),
            "out": str(self.out.path) if self.out is not None else None,
        }
        if self.previous_metadata:
            earlier = {k: v for k, v in self.previous_metadata.items() if k != "previous"}
            meta["previous"] = [earlier, *(self.previous_metadata.get("previous") or [])]
        return meta

    def result(self) -> SweepResult:
        rows = []
        for run in sorted(self.plan, key=lambda r: (r.prompt_index, self.models.index(r.model), r.repeat)):
            row = self.new_rows.get(run.key) or self.done.get(run.key)
            if row is not None:
                rows.append(row)
        return SweepResult(rows, self.metadata())

    # --- running (on the loop thread) ---------------------------------------
    async def run(self, progress: Progress) -> None:
        self.pool = _AgentPool(cwd=self.cwd, permission=self.permission, given=self.given_agent,
                               spec=self.agent_spec)
        semaphore = asyncio.Semaphore(self.concurrency)
        write_lock = asyncio.Lock()
        self.started.set()
        tasks = [asyncio.ensure_future(self._run_one(run, semaphore, write_lock, progress)) for run in self.todo]
        try:
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            try:
                # Interrupted: the runs still going cancel their turns (session/cancel) and close their sessions.
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await self.pool.close_all()
                self.finished = time.time()
                if self.out is not None:
                    metadata = self.metadata()
                    async with write_lock:
                        await asyncio.to_thread(self.out.write_metadata, metadata)
            finally:
                self.cleaned.set()

    async def _run_one(self, run: PlannedRun, semaphore: asyncio.Semaphore, write_lock: asyncio.Lock,
                       progress: Progress) -> None:
        assert self.pool is not None
        # Start the agent before queueing for a slot, so every agent's process starts right away.
        with contextlib.suppress(Exception):
            await self.pool.get(run.agent_name)
        async with semaphore:
            row = await self._execute(run)
        self.new_rows[run.key] = row
        if self.out is not None:
            metadata = self.metadata() if self.out.format == "json" else {}  # only JSON embeds it per write
            async with write_lock:
                await asyncio.to_thread(self.out.append, row, metadata)
        progress.finished(row)

    async def _execute(self, run: PlannedRun) -> dict[str, Any]:
        assert self.pool is not None
        row = blank_row()
        row.update(model=run.model, model_value=run.value, prompt=run.prompt, prompt_index=run.prompt_index,
                   repeat=run.repeat, agent=run.agent_name, status="ok", timed_out=False, text="", thoughts="",
                   tool_calls=0)
        row["started_at"] = _iso(time.time())
        session: Session | None = None
        phase = "starting the agent"
        try:
            agent = await self.pool.get(run.agent_name)
            row["agent"] = agent.name
            phase = "session/new"
            session = await agent.anew_session(cwd=self.cwd, permission=self.permission)
            row["session_id"] = session.id
            phase = f"setting the model to {run.value!r}"
            await self._select_model(session, run, row)
            for config_id, value in self.config.items():
                phase = f"setting {config_id}={value!r}"
                await session.aset(config_id, _coerce(session, config_id, value))
            if self.config:
                # A later option can move the model (an agent may tie settings together): check again.
                phase = "checking the model after config"
                self._confirm(run, session.config, row)
            row["config"] = dict(session.config.values())
            phase = "prompt"
            try:
                turn = await session.aprompt(run.prompt, timeout=self.timeout)
            except AcpTimeoutError:
                self._record_turn(row, run, session.turns[-1] if session.turns else None)
                row["timed_out"] = True
                row["status"] = "timeout"
                row["error"] = (f"prompt: no answer within {self.timeout:g} s; the turn was cancelled "
                                f"(stop reason {row['stop_reason']!r})")
            except AcpError as exc:
                self._record_turn(row, run, session.turns[-1] if session.turns else None)
                raise exc
            else:
                self._record_turn(row, run, turn)
                if turn.error is not None:
                    raise turn.error
                if row["model_at_end"] != row["confirmed_model"]:
                    raise ModelNotInForce(
                        f"the agent switched the model during the turn: {row['confirmed_model']!r} -> "
                        f"{row['model_at_end']!r}; this answer is not the requested model's"
                    )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - one failing run must never stop the sweep
            row["status"] = "error"
            row["error"] = _describe_error(phase, exc)
        finally:
            if session is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(session.aclose(), SESSION_CLOSE_TIMEOUT_S)
            row["ended_at"] = _iso(time.time())
        return row

    async def _select_model(self, session: Session, run: PlannedRun, row: dict[str, Any]) -> None:
        option = session.model_option
        if option is None:
            raise ConfigOptionError(
                f"agent '{session.agent.name}' offers no model option in its sessions",
                config_id="model", value=run.value, valid=session.config.ids(),
                hint=f"Its options are: {', '.join(session.config.ids()) or 'none'}.",
            )
        if option.read_only and option.value == run.value:
            # Agents that only report the old `models` field cannot switch, but the requested one is in force.
            self._confirm(run, session.config, row)
            return
        config = await session.aset(option.id, run.value)
        self._confirm(run, config, row)

    @staticmethod
    def _confirm(run: PlannedRun, config: ConfigOptions, row: dict[str, Any]) -> None:
        reported = _model_value(config)
        row["confirmed_model"] = run.confirmed_id(reported)
        if reported != run.value:
            raise ModelNotInForce(
                f"asked for model {run.value!r} but the agent reports {reported!r} as the model in force"
            )

    @staticmethod
    def _record_turn(row: dict[str, Any], run: PlannedRun, turn: Turn | None) -> None:
        if turn is None:
            return
        row["text"] = turn.text
        row["thoughts"] = turn.thoughts
        row["stop_reason"] = turn.stop_reason
        row["duration_s"] = turn.duration_s
        row["ttft_s"] = turn.ttft_s
        row["tool_calls"] = len(turn.tool_calls)
        row["model_at_end"] = run.confirmed_id(turn.model)
        usage = turn.usage or {}
        for wire, column in (("inputTokens", "input_tokens"), ("outputTokens", "output_tokens"),
                             ("thoughtTokens", "thought_tokens"), ("totalTokens", "total_tokens"),
                             ("cachedReadTokens", "cached_read_tokens"), ("cachedWriteTokens", "cached_write_tokens"),
                             ("used", "context_used"), ("size", "context_size")):
            if isinstance(usage.get(wire), (int, float)) and not isinstance(usage.get(wire), bool):
                row[column] = int(usage[wire])
        cost = usage.get("cost")
        if isinstance(cost, Mapping) and isinstance(cost.get("amount"), (int, float)):
            row["cost"] = float(cost["amount"])
            row["currency"] = cost.get("currency")


def sweep(prompts: str | Sequence[str], models: str | Sequence[str], *, agent: AgentLike = None, repeats: int = 1,
          concurrency: int = 4, timeout: float | None = 300, config: Mapping[str, Any] | None = None,
          permission: PermissionPolicy = "deny", cwd: str | os.PathLike[str] | None = None,
          out: str | os.PathLike[str] | None = None, retry_errors: bool = False,
          progress: ProgressLike = None) -> SweepResult:
    """Send every prompt to every model ``repeats`` times and record each turn.

    ``models`` are namespaced ``agent:model`` ids: the part before the first ':' is a registered
    agent (``acpnb.agents()``), started once and shared by its runs, and the rest is the value of
    its model option (it may contain ':' or '/'). With ``agent=`` (an Agent such as the proxy, or a
    spec to start) the ids are that agent's own model values. Each run opens a fresh session, sets
    the model, then ``config`` (other option ids -> values), checks that the agent reports the
    requested model in force (otherwise the row is an error and no prompt is sent), sends the
    prompt and records the turn. Up to ``concurrency`` runs go at once; a turn that takes longer
    than ``timeout`` seconds is cancelled (session/cancel) and recorded as a timeout. A failing
    run becomes an error row and the sweep goes on. Agents the sweep started are closed at the end,
    also when it is interrupted (the finished rows stay in ``out``).

    ``permission`` answers the sessions' permission requests ("deny", "allow" or a callable, as in
    ``acpnb.start``); ``cwd`` is the sessions' directory and that of the agents the sweep starts.
    Session setup uses the agent's own request timeout; ``timeout`` limits the prompt turn only.

    ``out`` (.csv, .json or .jsonl) receives each row as its run finishes; calling ``sweep`` again
    with the same ``out`` skips the runs already in the file (``retry_errors=True`` runs failed
    ones again). ``progress``: None picks a widget in notebooks and a text bar elsewhere; False
    shows nothing.
    """
    state = _Sweep(prompts, models, agent=agent, repeats=repeats, concurrency=concurrency, timeout=timeout,
                  config=config, permission=permission, cwd=cwd, out=out, retry_errors=retry_errors)
    bar = make_progress(progress)
    bar.start(len(state.todo), state.skipped)
    try:
        _loop.run_sync(state.run(bar), None, what="the sweep")
    except BaseException:
        # Ctrl-C / kernel interrupt: the finished rows are in `out`; return once the agents are closed.
        state.wait_for_cleanup()
        raise
    finally:
        bar.close()
    return state.result()


async def asweep(prompts: str | Sequence[str], models: str | Sequence[str], *, agent: AgentLike = None,
                 repeats: int = 1, concurrency: int = 4, timeout: float | None = 300,
                 config: Mapping[str, Any] | None = None, permission: PermissionPolicy = "deny",
                 cwd: str | os.PathLike[str] | None = None, out: str | os.PathLike[str] | None = None,
                 retry_errors: bool = False, progress: ProgressLike = None) -> SweepResult:
    """The async twin of :func:`sweep` (``await acpnb.sweep.asweep(...)`` from a cell or any event loop)."""
    state = _Sweep(prompts, models, agent=agent, repeats=repeats, concurrency=concurrency, timeout=timeout,
                  config=config, permission=permission, cwd=cwd, out=out, retry_errors=retry_errors)
    bar = make_progress(progress)
    bar.start(len(state.todo), state.skipped)
    try:
        await _loop.run_async(state.run(bar), None, what="the sweep")
    except BaseException:
        await asyncio.get_running_loop().run_in_executor(None, state.wait_for_cleanup)
        raise
    finally:
        bar.close()
    return state.result()
