"""Executors: where a sweep's trials run. The local one (the default) runs them on this process's loop.

An executor only runs single attempts (``run(trial) -> Outcome``); scheduling, retries, budgets,
scoring, files and progress stay in the sweep, so every executor gives the same rows. Its
methods are called on the background loop thread, which alone mutates its state.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

from .hints import PYTHON, Syntax
from .ray_executor import RayExecutor
from .trial import AgentPool, ExecutorSetup, Outcome, Trial, TrialSettings, run_attempt

__all__ = ["Executor", "ExecutorSetup", "LocalExecutor", "make_executor"]


class Executor(Protocol):
    name: str

    async def start(self, setup: ExecutorSetup) -> None: ...

    async def warm(self, agent_name: str | None) -> None: ...

    async def run(self, trial: Trial) -> Outcome: ...

    async def close(self) -> None: ...

    def agents(self) -> dict[str, Any]: ...

    def describe(self) -> dict[str, Any]: ...


class LocalExecutor:
    """Trials as asyncio tasks in this process; one agent process per agent name, shared by its trials."""

    name = "local"

    def __init__(self) -> None:
        self.pool: AgentPool | None = None
        self.settings = TrialSettings()

    async def start(self, setup: ExecutorSetup) -> None:
        self.settings = setup.settings
        self.pool = AgentPool(setup.specs, cwd=setup.settings.cwd, permission=setup.settings.permission,
                              given=setup.given_agent, spec=setup.agent_spec, sandbox=setup.settings.sandbox,
                              workspace_root=setup.settings.workspaces.root)

    async def warm(self, agent_name: str | None) -> None:
        """Start the agent now, so every agent's process starts at once rather than when a slot frees up."""
        assert self.pool is not None
        sandbox = self.settings.sandbox
        # Sandbox slots and per-trial sandboxes start their own processes; the oracle starts none.
        if (sandbox is not None and sandbox.sweep_mode != "shared") or self.settings.oracle:
            return
        with contextlib.suppress(Exception):  # a failed start is recorded by the trial itself
            await self.pool.get(agent_name)

    async def run(self, trial: Trial) -> Outcome:
        assert self.pool is not None
        return await run_attempt(trial, self.pool, self.settings)

    async def close(self) -> None:
        if self.pool is not None:
            await self.pool.close_all()

    def agents(self) -> dict[str, Any]:
        return self.pool.describe() if self.pool is not None else {}

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}


def make_executor(executor: Any, syntax: Syntax = PYTHON) -> Executor:
    """"local" (default), "ray", or an executor object (``RayExecutor(address=..., workers=...)``)."""
    if executor in (None, "local"):
        return LocalExecutor()
    if executor == "ray":
        return RayExecutor()
    if all(hasattr(executor, m) for m in ("start", "run", "close", "agents")):
        return executor
    raise ValueError(f"{syntax['executor']} is 'local', 'ray' or an executor object, not {executor!r}")
