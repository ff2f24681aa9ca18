"""notebooks/real-agents.ipynb runs top to bottom in a real kernel without keys and without a network:
the registry table and the compatibility check show, and every cell that needs a key says what is
missing instead of failing."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import acp_notebook as acpnb
from acp_notebook import launch
from tests.kernels import notebook_client

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = [pytest.mark.interop, pytest.mark.kernel]  # its check cell starts the installed third-party agents

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "real-agents.ipynb"
REAL = ("claude", "codex", "gemini", "opencode")


@pytest.fixture(scope="module")
def executed(tmp_path_factory) -> Any:
    workdir = tmp_path_factory.mktemp("real-agents")
    shutil.copy(NOTEBOOK, workdir / NOTEBOOK.name)
    notebook = nbformat.read(workdir / NOTEBOOK.name, as_version=4)
    key_vars = {var for name in REAL for var in launch.registered(name).key_vars}
    with pytest.MonkeyPatch.context() as patch:
        # The kernel gets this environment: no keys, and a HOME without logins, wherever the test runs.
        for var in key_vars:
            patch.delenv(var, raising=False)
        patch.setenv("ACP_NOTEBOOK_AGENT_CACHE", str(launch.agent_cache_dir()))
        patch.setenv("HOME", str(workdir))
        client = notebook_client(notebook, workdir, timeout=240)
        client.execute()
    nbformat.write(notebook, workdir / NOTEBOOK.name)  # kept for a look when a test fails
    return notebook


def cell(notebook: Any, starts_with: str) -> Any:
    (found,) = [c for c in notebook.cells if c.cell_type == "code" and c.source.startswith(starts_with)]
    return found


def output_text(code_cell: Any, mime: str = "text/plain") -> str:
    parts = [o.get("text", "") for o in code_cell.outputs if o["output_type"] == "stream"]
    parts += [o["data"][mime] for o in code_cell.outputs if mime in o.get("data", {})]
    return "\n".join(parts)


def test_no_cell_failed(executed):
    for code_cell in executed.cells:
        if code_cell.cell_type == "code":
            assert not [o for o in code_cell.outputs if o["output_type"] == "error"], code_cell.source


def test_registry_and_check_tables(executed):
    registry = output_text(cell(executed, "import acp_notebook as acpnb"), "text/html")
    assert all(f"<code>{name}</code>" in registry for name in ("demo", *REAL))
    check = output_text(cell(executed, "from acp_notebook.agents_cli import check_agents"), "text/html")
    rows = {m.group(1): m.group(0) for m in re.finditer(r"<tr><td>(\w+)</td>.*?</tr>", check)}
    assert set(rows) == {"demo", *REAL}
    assert "yes: model=smart" in rows["demo"]
    for name in REAL:
        if acpnb.agents()[name].installed:
            assert f"<td>{launch.registered(name).version}</td><td>yes (" in rows[name], rows[name]
        else:
            assert "not installed" in rows[name]


@pytest.mark.parametrize(("starts_with", "skipped"), [
    ('if ready("claude"):', ["claude"]), ('if ready("codex"):', ["codex"]), ('if ready("gemini"):', ["gemini"]),
    ('if ready("opencode"):', ["opencode"]), ('if ready("claude") and', ["claude"]),
])
def test_cells_that_need_a_key_say_what_is_missing(executed, starts_with, skipped):
    text = output_text(cell(executed, starts_with))
    for name in skipped:
        assert f"{name}: skipped; missing " in text
        assert launch.registered(name).login_hint in text or "the package" in text

