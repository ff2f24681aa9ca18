"""The Ray executor: a sweep's trials run as tasks on Ray actors, each worker starting its own agents.

The sweep (scheduling, retries, budget, scoring, files, progress) stays in the calling process,
so rows, progress and resume are those of the local executor. Each actor is a ``TrialWorker``
holding an agent pool in its own process; its methods run in the actor's threads and drive
that process's acp-notebook loop. ``RayExecutor``'s own state is touched only on the calling
process's loop thread.

What a worker needs: acp-notebook installed (``pip install 'acp-notebook[ray]'``), the agents'
programs installed (the same registry names resolve on the worker, e.g. ``npx`` for Claude
Code's adapter), the API keys the agents read in the worker's environment (``ray.init(
runtime_env={"env_vars": {...}})`` or the cluster's own setup), and, when ``cwd=`` is given,
that directory on every node. Workspace sources and task folders need no shared filesystem: each
is packed once in the calling process, put in Ray's object store and unpacked by the workers that
use it (shipping.py); diffs come back in the rows and kept workspaces as tars unpacked in the
caller's run directory. Model-graded scorers ask their grader from the calling process, like every
other scorer.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import math
import os
import shutil
from collections.abc import Mapping
from typing import Any

from .. import _loop
from ..launch import SpecLike
from .extras import MissingExtra, require
from .shipping import Unpacked, localize, pack, pack_kept, restore_paths, unpack_into
from .trial import AgentPool, ExecutorSetup, Outcome, Trial, TrialSettings, blank_row, default_root, run_attempt

__all__ = ["RayExecutor", "TrialWorker"]

CLOSE_TIMEOUT_S = 60.0


def _import_ray():
    return require("ray", "executor='ray'", "ray")


def ray_installed() -> bool:
    """Whether Ray can be imported, without importing it (that takes seconds)."""
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):
        return False


class TrialWorker:
    """Runs attempts in a Ray worker process, on agents it starts itself (one process per agent name)."""

    def __init__(self, specs: Mapping[str, SpecLike], agent_spec: SpecLike | None, settings: TrialSettings,
                 shipped: Mapping[str, Any] | None = None) -> None:
        self.settings = settings
        self.pool = AgentPool(specs, cwd=settings.cwd, permission=settings.permission, spec=agent_spec,
                              sandbox=settings.sandbox, workspace_root=default_root())
        # Caller's folder -> its tar in the object store; fetched and unpacked here on a trial's first use.
        self.unpacked = Unpacked(shipped or {}, lambda ref: _import_ray().get(ref))

    def run(self, trial: Trial) -> Outcome:
        local_trial, settings = localize(trial, self.settings, self.unpacked)
        outcome = _loop.run_sync(run_attempt(local_trial, self.pool, settings), what="the trial")
        if settings.workspaces.keep:
            outcome.kept = pack_kept(outcome.row)
        return outcome

    def describe(self) -> dict[str, Any]:
        ray = _import_ray()
        return {"node": ray.util.get_node_ip_address(), "pid": os.getpid(), "agents": self.pool.describe()}

    def close(self) -> None:
        _loop.run_sync(self.pool.close_all(), CLOSE_TIMEOUT_S, what="closing the worker's agents")
        self.unpacked.remove()


class RayExecutor:
    """Trials as Ray actor tasks: ``workers`` actors (default: one per CPU of the cluster, at most the sweep's
    concurrency), each running up to its share of the concurrency at once.

    ``address`` is passed to ``ray.init`` when Ray is not initialised yet (None: a local cluster, or the
    one ``RAY_ADDRESS`` names); an existing connection is used as it is and left open. ``num_cpus`` is
    what each actor reserves; ``actor_options`` go to ``.options()`` (e.g. ``runtime_env``, ``resources``).
    """

    name = "ray"

    def __init__(self, *, address: str | None = None, workers: int | None = None, num_cpus: float = 1,
                 actor_options: Mapping[str, Any] | None = None) -> None:
        if not ray_installed():  # say so now, not once the sweep has started
            raise MissingExtra("executor='ray'", "ray", "ray")
        if workers is not None and (not isinstance(workers, int) or workers < 1):
            raise ValueError(f"workers must be a whole number >= 1 (or None for one per CPU), not {workers!r}")
        self.address = address
        self.workers = workers
        self.num_cpus = num_cpus
        self.actor_options = dict(actor_options or {})
        self._setup: ExecutorSetup | None = None
        self._actors: list[Any] = []
        self._in_flight: list[int] = []
        self._count = 0
        self._facts: list[dict[str, Any]] = []
        self._shipped: dict[str, Any] = {}

    async def start(self, setup: ExecutorSetup) -> None:
        ray = _import_ray()
        if setup.given_agent is not None:
            raise ValueError("with executor='ray' each worker starts its own agents: pass agent= a registry name "
                             "or a command line, not a started Agent")
        if not ray.is_initialized():
            try:
                await asyncio.to_thread(ray.init, address=self.address)
            except Exception as exc:  # Ray raises several kinds (ConnectionError, RuntimeError, ValueError)
                where = f"at {self.address!r}" if self.address else "on this machine"
                raise RuntimeError(f"could not start or reach a Ray cluster {where}: {exc}") from exc
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self._count = self.workers or max(1, min(setup.slots, cpus))
        self._setup = setup
        self._shipped = {}
        for path in setup.shipped:  # packed once here, fetched by the workers that need it
            self._shipped[path] = ray.put(await asyncio.to_thread(pack, path))
        self._actors = [self._new_actor() for _ in range(self._count)]
        self._in_flight = [0] * self._count
        self._facts = []

    def _new_actor(self) -> Any:
        ray = _import_ray()
        assert self._setup is not None
        share = math.ceil(self._setup.slots / self._count)
        # One thread more than the trials it is given, so close() runs even while every trial thread is busy.
        options = {"num_cpus": self.num_cpus, "max_concurrency": max(1, share) + 1, **self.actor_options}
        return ray.remote(TrialWorker).options(**options).remote(
            self._setup.specs, self._setup.agent_spec, self._setup.settings, self._shipped)

    async def warm(self, agent_name: str | None) -> None:
        """Nothing to do here: each worker starts its agents on its first trial."""

    async def run(self, trial: Trial) -> Outcome:
        ray = _import_ray()
        index = min(range(len(self._actors)), key=self._in_flight.__getitem__)
        self._in_flight[index] += 1  # never above the actor's share: the sweep runs at most `slots` at once
        ref = self._actors[index].run.remote(trial)
        try:
            return await self._brought_back(trial, await asyncio.wrap_future(ref.future()))
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                ray.cancel(ref)
            raise
        except ray.exceptions.RayActorError as exc:
            # The worker process died: record it as a transient failure and give the slot a fresh actor.
            self._actors[index] = self._new_actor()
            return self._failed(trial, f"ray: the worker died ({type(exc).__name__}: {exc})", transient=True)
        except ray.exceptions.RayError as exc:
            return self._failed(trial, f"ray: {type(exc).__name__}: {' '.join(str(exc).split())[:500]}",
                                transient=not isinstance(exc, ray.exceptions.RayTaskError))
        finally:
            self._in_flight[index] -= 1

    async def _brought_back(self, trial: Trial, outcome: Outcome) -> Outcome:
        """The row in the caller's paths; a kept workspace unpacked in the caller's workspace folder."""
        assert self._setup is not None
        settings = self._setup.settings
        root = settings.workspaces.root
        restore_paths(outcome.row, settings.workspace_for(trial.sample), root)
        if outcome.kept is not None and root is not None:
            target = os.path.join(root, trial.trial_id)
            await asyncio.to_thread(shutil.rmtree, target, True)  # an earlier attempt's or run's copy
            await asyncio.to_thread(unpack_into, outcome.kept, target)
        outcome.kept = None
        return outcome

    @staticmethod
    def _failed(trial: Trial, error: str, *, transient: bool) -> Outcome:
        row = blank_row(trial)
        row.update(status="error", error=error)
        return Outcome(row, None, transient)

    async def close(self) -> None:
        """Ask each worker what it ran and to close its agents, then end the actors."""
        if not self._actors:
            return
        ray = _import_ray()
        actors, self._actors = self._actors, []
        facts = await asyncio.gather(*(self._call(actor.describe) for actor in actors))
        self._facts = [f for f in facts if isinstance(f, dict)]
        await asyncio.gather(*(self._call(actor.close) for actor in actors))
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor)

    @staticmethod
    async def _call(method: Any) -> Any:
        with contextlib.suppress(Exception):
            return await asyncio.wait_for(asyncio.wrap_future(method.remote().future()), CLOSE_TIMEOUT_S)
        return None

    def agents(self) -> dict[str, Any]:
        """Per agent name, as for the local executor; ``pids`` across workers, ``workers`` where it ran."""
        merged: dict[str, Any] = {}
        for worker in self._facts:
            for name, facts in (worker.get("agents") or {}).items():
                entry = merged.setdefault(name, {**facts, "pids": [], "workers": []})
                entry["pids"] = [*entry["pids"], *facts.get("pids", [])]
                entry["processes"] = len(entry["pids"])
                entry["workers"].append(f"{worker.get('node')}:{worker.get('pid')}")
        return merged

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "workers": self.workers or len(self._facts) or None, "address": self.address,
                "num_cpus": self.num_cpus}
