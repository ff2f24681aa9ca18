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
from collections.abc import Iterator
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


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`pytest -n N --dist loadfile` (what `make test` runs): a module's tests stay on one worker, so a module
    fixture (an executed notebook, a benchmark run) is made once; and the browser package is one unit, so its
    tests share one JupyterLab and one chromium. (xdist's own loadgroup does not group under pytest 9.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModulesAndTheBrowserPackage(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "tests/browser" if nodeid.startswith("tests/browser/") else super()._split_scope(nodeid)

    return ModulesAndTheBrowserPackage(config, log)


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
