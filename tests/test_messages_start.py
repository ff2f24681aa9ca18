"""An agent that never answers initialize, in a real kernel (issue 28, point 8).

The cell shows that the agent is starting (the time spent, how to stop it), updated in place; a
kernel interrupt ends the start, its process and the cell with one line.
"""

from __future__ import annotations

import re
import sys

import pytest

from tests.processes import wait_gone
from tests.test_magics_kernel import frontend  # noqa: F401 - a fixture

pytestmark = pytest.mark.kernel

ANSI = re.compile(r"\x1b\[[0-9;]*m")
SILENT = "import os, time; open('agent.pid', 'w').write(str(os.getpid())); time.sleep(300)"


def test_a_silent_agent_shows_its_start_and_an_interrupt_ends_it_in_one_line(frontend, tmp_path):  # noqa: F811
    assert frontend.execute("%load_ext acp_notebook").reply["status"] == "ok"
    lines: list[str] = []
    interrupted: list[bool] = []

    def interrupt_once_shown(msg):
        if msg["msg_type"] in ("display_data", "update_display_data"):
            lines.append(msg["content"]["data"].get("text/plain", ""))
            if len(lines) >= 2 and not interrupted:  # shown, then updated in place
                interrupted.append(True)
                frontend.manager.interrupt_kernel()

    run = frontend.execute(f'%acp start --timeout 120 -- {sys.executable} -c "{SILENT}"',
                           on_message=interrupt_once_shown)
    assert interrupted, lines
    assert re.fullmatch(r"Starting python[\d.]*\.\.\. \d+ s \(Kernel > Interrupt stops it; it gives up after 120 s\)",
                        lines[0]), lines
    assert lines[-1].startswith("Starting python") and "stopped by a kernel interrupt after" in lines[-1]
    assert run.reply["status"] == "error" and run.reply["ename"] == "AgentStartError"
    (error,) = run.errors
    (line,) = [ANSI.sub("", text) for text in error["traceback"]]
    assert re.fullmatch(r"AgentStartError: starting 'python[\d.]*' was stopped by a kernel interrupt after \d+ s; "
                        r"its process was ended", line)
    pid = int((tmp_path / "agent.pid").read_text())
    assert wait_gone(pid, timeout=10)
    assert frontend.execute("print('still usable')").stdout == "still usable\n"
