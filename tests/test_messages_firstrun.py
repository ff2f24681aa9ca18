"""A first run, as a new user meets it (issue 28, points 1-4): `make demo`'s parts, the demo agent on stdio.

- scripts/run-notebook.py shuts its kernel down and leaves no connection file behind;
- the tour and the executed notebook keep their demo sessions out of the user's own list;
- the demo agent skips a line that is not a JSON object with one line on stderr, and goes on serving;
- `acp-notebook ... | head` ends quietly.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.processes import wait_gone

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120.0


def _isolated_env(tmp_path: Path) -> dict[str, str]:
    """The environment with its own temp dir, Jupyter runtime dir and data home, all empty at first."""
    env = {k: v for k, v in os.environ.items() if k != "ACP_NOTEBOOK_DEMO_STATE"}
    for name, sub in (("TMPDIR", "tmp"), ("JUPYTER_RUNTIME_DIR", "runtime"), ("XDG_DATA_HOME", "data")):
        (tmp_path / sub).mkdir()
        env[name] = str(tmp_path / sub)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _files_under(*dirs: Path) -> list[Path]:
    return sorted(p for d in dirs for p in d.rglob("*") if p.is_file())


@pytest.mark.kernel
@pytest.mark.slow
def test_run_notebook_shuts_its_kernel_down_and_leaves_no_connection_file(tmp_path):
    env = _isolated_env(tmp_path)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import os\nprint('PID', os.getpid())\nprint('STATE', os.environ.get('ACP_NOTEBOOK_DEMO_STATE'))")])
    source = tmp_path / "nb.ipynb"
    nbformat.write(notebook, source)
    before = _files_under(tmp_path / "tmp", tmp_path / "runtime")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "run-notebook.py"), str(source)], env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"executed {source} -> {tmp_path / 'nb.out.ipynb'}"]
    assert "Parent appears to have exited" not in done.stderr
    text = nbformat.read(tmp_path / "nb.out.ipynb", 4).cells[0].outputs[0]["text"]
    pid = int(re.search(r"PID (\d+)", text).group(1))
    assert wait_gone(pid, timeout=0.5), "the kernel outlived run-notebook.py"
    # The connection file (nbclient's manager writes it to the temp dir) and any runtime file are gone.
    assert _files_under(tmp_path / "tmp", tmp_path / "runtime") == before
    # The notebook's demo sessions went to a temporary directory, since removed; the user's is untouched.
    state = re.search(r"STATE (.+)", text).group(1)
    assert state.startswith(str(tmp_path / "tmp")) and not Path(state).exists()
    assert not (tmp_path / "data" / "acp-notebook").exists()


@pytest.mark.slow
def test_the_tour_keeps_its_sessions_out_of_the_users_list(tmp_path):
    env = _isolated_env(tmp_path)
    done = subprocess.run([sys.executable, "-m", "acp_notebook.cli", "tour", "--delay", "0"], env=env,
                          capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "keeping its sessions in this tour's temporary directory (deleted at the end)" in done.stdout
    assert not (tmp_path / "data" / "acp-notebook").exists()
    assert _files_under(tmp_path / "tmp") == []


def test_demo_agent_skips_a_line_that_is_not_a_json_object_in_one_line_and_goes_on(tmp_path):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    lines = ["not json", "42", "[1, 2]", "{broken", json.dumps(initialize)]
    done = subprocess.run([sys.executable, "-m", "acp_notebook.cli", "demo-agent"], env=_isolated_env(tmp_path),
                          input="".join(line + "\n" for line in lines), capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        f"acp-notebook-demo: WARNING a line from the client is not a JSON object, skipped: {line!r}"
        for line in lines[:4]]
    answer = json.loads(done.stdout.splitlines()[0])
    assert answer["id"] == 1 and answer["result"]["protocolVersion"] == 1


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)  # as `| head` does once it has its lines: every write now fails with EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "acp_notebook.cli", "agents"], env=_isolated_env(tmp_path),
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
    finally:
        os.close(write_end)
    assert done.returncode == 141 and done.stderr == ""


def test_make_demo_names_only_what_its_install_provides():
    makefile = (ROOT / "Makefile").read_text()
    demo = makefile[makefile.index("\ndemo:"):].split("\n\n")[0]
    assert "$(BIN)/jupyter lab" in demo and "demo: install" in demo
    assert "install: $(VENV)/.installed-all" in makefile and "-e '.[all]'" in makefile
    install = makefile[makefile.index("\n$(VENV)/.installed-all:"):].split("\n\n")[0]
    assert not [line for line in (demo + install).splitlines() if line.startswith("\t#")]  # make would print them
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("jupyterlab") for req in extras["all"])
