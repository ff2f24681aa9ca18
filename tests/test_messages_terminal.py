"""Terminal output fits the terminal and colours only where wanted (issue 28, point 5).

Commands run as a user runs them: in a pseudo-terminal of a given size (TIOCSWINSZ) or with $COLUMNS,
which `shutil.get_terminal_size` honours first; colours are checked through real IPython processes.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from acp_notebook import _term

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 120.0
CLI = [sys.executable, "-m", "acp_notebook.cli"]
RED = "\x1b[31m"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def in_a_terminal(argv: list[str], columns: int, env: dict[str, str] | None = None) -> str:
    """What ``argv`` writes to a pseudo-terminal ``columns`` wide (CR LF read back as LF)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    try:
        process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env or _env(), close_fds=True)
    finally:
        os.close(slave)
    chunks = []
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer has closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
        process.wait(timeout=TIMEOUT)
    return b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_agents_fits_a_60_column_terminal():
    text = in_a_terminal([*CLI, "agents"], 60)
    assert widest(text) <= 60
    assert text.splitlines()[0].split() == ["name", "installed", "runs", "via", "command", "missing"]
    assert any(line.startswith("demo ") for line in text.splitlines())


@pytest.mark.slow
def test_agents_check_fits_the_width_in_columns():
    done = subprocess.run([*CLI, "agents", "--check", "demo"], env=_env(COLUMNS="50"), capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert widest(done.stdout) <= 50 and done.stdout.startswith("agent")


def test_a_table_of_figures_continues_below_rather_than_breaking_numbers():
    header = ["model", "trials", "score [95% CI]", "latency_median_s", "latency_p90_s"]
    rows = [["demo:fast", "2", "1.000 [0.342, 1.000] n=2", "0.021", "0.026"]]
    text = _term.table(header, rows, 40, right=range(1, 5), rule=True)
    assert widest(text) <= 40
    blocks = text.split("\n\n")
    assert len(blocks) > 1 and all(block.startswith("model") for block in blocks)
    assert all(cell in text for cell in rows[0])  # every figure whole


@pytest.mark.slow
def test_sweep_summary_and_help_fit_the_terminal(tmp_path):
    dataset = tmp_path / "d.jsonl"
    dataset.write_text('{"prompt": "What is 2+2?", "target": "4"}\n{"prompt": "What is 3+3?", "target": "6"}\n')
    done = subprocess.run([*CLI, "sweep", "-m", "demo:fast", "-m", "demo:smart", "--dataset", str(dataset),
                           "--scorer", "includes", "--scorer", "numeric", "--compare", "demo:smart", "demo:fast",
                           "--no-progress"], env=_env(COLUMNS="60"), capture_output=True, text=True, timeout=TIMEOUT,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert widest(done.stdout) <= 60 and "includes [95% CI]" in done.stdout and "Newcombe)" in done.stdout
    text = in_a_terminal([*CLI, "sweep", "--help"], 80)
    assert widest(text) <= 80
    description = text.split("\n\n")[1]
    assert description.startswith("Send a dataset's prompts") and len(description.splitlines()) > 1


def _ipython_error(argv_extra: list[str], columns: int = 80, env: dict[str, str] | None = None,
                   terminal: bool = True) -> str:
    code = "import acp_notebook as a; raise a.AcpError('boom', hint='do x')"
    argv = [sys.executable, "-m", "IPython", "--no-banner", *argv_extra, "-c", code]
    if terminal:
        return in_a_terminal(argv, columns, env)
    return subprocess.run(argv, env=env or _env(), capture_output=True, text=True, timeout=TIMEOUT).stdout


@pytest.mark.slow
def test_error_colours_follow_the_terminal_no_color_and_ipythons_setting():
    coloured = _ipython_error([])
    assert f"{RED}AcpError\x1b[0m: boom" in coloured
    for text in (_ipython_error(["--colors=NoColor"]), _ipython_error([], env=_env(NO_COLOR="1")),
                 _ipython_error([], terminal=False)):
        assert "AcpError: boom" in text and "Hint: do x" in text and "\x1b[31m" not in text and "\x1b[2m" not in text


def test_the_commands_list_fits_the_terminal():
    done = subprocess.run([*CLI, "--help"], env=_env(COLUMNS="60"), capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 0 and widest(done.stdout) <= 60
    assert "  replay      serve a recorded session on stdio, as the" in done.stdout
