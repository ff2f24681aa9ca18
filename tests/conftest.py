"""Suite-wide fixtures: the demo agent and the proxy keep their state in temporary directories.

The demo agent writes every session to a file (see acp_notebook/demo/store.py) and the proxy
remembers which agent session each of its sessions is bound to (acp_notebook/proxy/ids.py).
Setting their state variables in os.environ for the whole run means every demo agent and proxy a
test starts (directly, behind the proxy, or in a Jupyter kernel, all of which inherit the
environment) writes there, never into the real home directory.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# Timings never decide a test here (they belong in bench/): property tests have no per-example deadline,
# which on a loaded 2-core machine failed examples that ran in a third of it when re-run.
settings.register_profile("acp-notebook", deadline=None)
settings.load_profile("acp-notebook")

DEMO_STATE_ENV = "ACP_NOTEBOOK_DEMO_STATE"  # acp_notebook.demo.store.STATE_ENV, without importing the package
PROXY_STATE_ENV = "ACP_NOTEBOOK_PROXY_STATE"  # acp_notebook.proxy.ids.STATE_ENV
SESSION_STORE_ENV = "ACPNB_STATE_DIR"  # acp_notebook.magics.store.STATE_ENV: the magics' session store


@contextlib.contextmanager
def _variable_pointing_at(variable: str, directory: Path) -> Iterator[Path]:
    previous = os.environ.get(variable)
    os.environ[variable] = str(directory)
    try:
        yield directory
    finally:
        if previous is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = previous


# The modules that start Ray: one xdist unit, so one cluster (`ray_cluster`) serves the Ray modules, and the sweeps
# notebook's own local cluster (its kernel starts one) never starts beside it: two at once overload 2 cores.
RAY_UNIT = "ray"
RAY_MODULES = ("tests/test_sweep_notebook.py", "tests/test_sweep_ray.py", "tests/test_sweep_ray_shipping.py")


def work_unit(nodeid: str) -> str:
    """The unit `--dist loadfile` keeps on one worker: the test's module, the browser package (one JupyterLab and
    one chromium for all of it) or the modules that start Ray (RAY_MODULES)."""
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/browser/"):
        return "tests/browser"
    if path in RAY_MODULES:
        return RAY_UNIT
    return path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`pytest -n N --dist loadfile` (what `make test` runs): a unit of `work_unit` stays on one worker, so a module
    fixture (an executed notebook, a benchmark run) is made once. Units are handed out in collection order
    (`pytest_collection_modifyitems` puts the long ones first), not xdist's most-tests-first. (xdist's own
    loadgroup does not group under pytest 9.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False

    class Units(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return Units(config, log)


# The longest units of `make test` (wall time of their tests, measured with bench/suite_times.py), longest first.
# xdist hands units out in collection order and the run ends when its last unit does, so these go to the workers
# first; the rest follow with the most tests first, as xdist orders them by default.
LONGEST_UNITS = (
    "tests/browser",  # one JupyterLab and chromium for 18 tests: over 5 min
    RAY_UNIT,  # the sweeps notebook, then the cluster's start (30 to 100 s) and 6 sweeps on it
    "tests/test_leaks.py",
    "tests/test_bench.py",
    "tests/interop/test_interop_opencode.py",
    "tests/interop/test_interop_today.py",
    "tests/interop/test_interop_clients.py",
    "tests/interop/test_interop_kernel_tools.py",
    "tests/interop/test_interop_proxy.py",
    "tests/interop/test_interop_agents_check.py",
    "tests/test_messages_export.py",
    "tests/interop/test_interop_gemini.py",
    "tests/test_faults.py",
    "tests/test_real_agents_notebook.py",
    "tests/interop/test_interop_sweep_tasks.py",
    "tests/hostile/test_runner.py",
    "tests/test_proxy_reconnect.py",
    "tests/test_saved_notebook.py",
    "tests/test_proxy_trust.py",
    "tests/test_notebooks.py",
    "tests/test_kernel_tools_kernel.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest units first (LONGEST_UNITS), then the others with the most tests first; a unit's tests keep
    their order. Every xdist worker sorts its collection the same way, so the collections still match."""
    rank = {unit: place for place, unit in enumerate(LONGEST_UNITS)}
    sizes: dict[str, int] = {}
    for item in items:
        sizes[work_unit(item.nodeid)] = sizes.get(work_unit(item.nodeid), 0) + 1

    def order(item: pytest.Item) -> tuple[int, int]:
        unit = work_unit(item.nodeid)
        return (rank[unit], 0) if unit in rank else (len(rank), -sizes[unit])

    items.sort(key=order)  # stable: within a unit, and between units of one size, collection order stays


@pytest.fixture(scope="session", autouse=True)
def demo_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The demo agent's state directory for this test run (a fresh temporary directory)."""
    with _variable_pointing_at(DEMO_STATE_ENV, tmp_path_factory.mktemp("demo-state")) as state:
        yield state


@pytest.fixture(scope="session", autouse=True)
def proxy_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The proxy's state directory for this test run."""
    with _variable_pointing_at(PROXY_STATE_ENV, tmp_path_factory.mktemp("proxy-state")) as state:
        yield state


@pytest.fixture(scope="session", autouse=True)
def session_store_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The magics' session store for this test run (kernels started by tests inherit it)."""
    with _variable_pointing_at(SESSION_STORE_ENV, tmp_path_factory.mktemp("session-store")) as state:
        yield state


# A Ray node's raylet gets 30 s to register (hard-coded in Ray's node.py); on a loaded 2-core machine it sometimes
# needs more, so a start that times out is tried again, within this deadline for the whole cluster.
RAY_START_DEADLINE_S = 300.0


def within_ray_start_deadline(start: Callable[[float], Any], stop: Callable[[], Any]) -> Any:
    """``start(deadline)``'s result, tried again while a node times out during startup, until RAY_START_DEADLINE_S;
    ``stop()`` cleans up a failed try."""
    deadline = time.monotonic() + RAY_START_DEADLINE_S
    while True:
        try:
            return start(deadline)
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for a slow raylet
            stop()
            if "timed out" not in str(exc) or time.monotonic() > deadline:
                raise


@contextlib.contextmanager
def _ahead_of_the_load(steps: int = 5) -> Iterator[None]:
    """Processes started inside run ``steps`` nice levels ahead of the suite (Linux niceness is per thread, and a
    child takes its parent thread's): Ray's raylet must register within 30 s, hard-coded in Ray's node.py, and the
    agents it waits for are Python processes that a loaded 2-core machine starts slowly. Where raising a priority
    is not allowed (not root), they start as they are."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, before - steps)
    except PermissionError:
        raised = False
    else:
        raised = True
    try:
        yield
    finally:
        if raised:
            os.setpriority(os.PRIO_PROCESS, 0, before)


def _ray_processes(since: set[int]) -> list[Any]:
    """This process's descendants that are Ray's (its GCS, raylets, monitors, dashboard, workers) and were not
    there in ``since``."""
    import psutil

    found = []
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            command = " ".join(process.cmdline())
            if process.pid not in since and (process.name() in ("gcs_server", "raylet") or "/ray/" in command
                                             or command.startswith("ray::")):
                found.append(process)
    return found


def _end(processes: list[Any]) -> None:
    """Ends what a Ray shutdown left running: once a raylet is gone its children are no longer ours to find, and a
    failed start's are never shut down by Ray at all (on a loaded machine they pile up and slow the next try)."""
    import psutil

    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _gone, alive = psutil.wait_procs(processes, timeout=10)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()


class _RayCluster:
    """The Ray modules' cluster: two nodes, the head offering no CPU, so the trials run on the other node's 2 CPUs
    and a worker sees the caller's folders only as shipped (the shipping tests delete them once shipped). Started
    by the first test that asks for it and stopped after the last test of RAY_UNIT (an idle cluster still costs
    CPU), from pytest's main thread only."""

    def __init__(self) -> None:
        self.cluster: Any = None
        self.before: set[int] = set()  # this process's descendants before the cluster started

    def connected(self, ray: Any) -> Any:
        if self.cluster is None:
            import psutil
            from ray.cluster_utils import Cluster

            if ray.is_initialized():
                ray.shutdown()
            self.before = {p.pid for p in psutil.Process().children(recursive=True)}
            made: list[Any] = []

            def start(deadline: float) -> Any:
                # No log monitor: nobody reads the workers' logs here, and it is one Python process less to start.
                cluster = Cluster(initialize_head=True, head_node_args={
                    "num_cpus": 0, "include_dashboard": False, "include_log_monitor": False})
                made.append(cluster)
                cluster.add_node(num_cpus=2)
                cluster.wait_for_nodes(timeout=max(30.0, deadline - time.monotonic()))
                cluster.connect()
                return cluster

            def stop() -> None:
                left = _ray_processes(self.before)
                ray.shutdown()
                if made:
                    made.pop().shutdown()
                _end(left)

            with _ahead_of_the_load():
                self.cluster = within_ray_start_deadline(start, stop)
        return ray

    def stop(self) -> None:
        if self.cluster is not None:
            import ray

            left = _ray_processes(self.before)
            ray.shutdown()
            self.cluster.shutdown()
            self.cluster = None
            _end(left)


_ray = _RayCluster()


@pytest.fixture(scope="module")
def ray_cluster() -> Any:
    """``ray``, connected to the Ray modules' cluster (`_RayCluster`): started once per test run, as they are one
    xdist unit (`work_unit`) and a start takes 10 to 100 s on a loaded 2-core machine."""
    ray = pytest.importorskip("ray")  # here, not at collection: every xdist worker collects the Ray modules
    return _ray.connected(ray)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if nextitem is None or work_unit(nextitem.nodeid) != RAY_UNIT:
        _ray.stop()
