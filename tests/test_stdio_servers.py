"""Our three stdio servers (demo agent, proxy, replay) started by hand with stdio that is not a pipe:
one plain line on stderr saying how to start them, exit status 2, no traceback, no hang."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT = 30.0
RECORDING = Path(__file__).resolve().parents[1] / "notebooks" / "recordings" / "claude.acp.jsonl"
SERVERS = {
    "demo agent": ([sys.executable, "-m", "acp_notebook.cli", "demo-agent"],
                   "start the demo agent from an ACP client (such as acpnb.start('demo') or Zed)"),
    "proxy": ([sys.executable, "-m", "acp_notebook.cli", "proxy", "--agent", "d=demo"],
              "start the proxy from an ACP client (such as acpnb.start_proxy or Zed)"),
    "replay": ([sys.executable, "-m", "acp_notebook.cli", "replay", str(RECORDING)],
               "start the replay from an ACP client (such as acpx or Zed, with acp-notebook replay FILE as the agent)"),
}


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.slow
def test_stdin_from_dev_null_and_stdout_to_a_file_are_refused_in_one_line(server, tmp_path):
    argv, how = SERVERS[server]
    with open("/dev/null", "rb") as devnull:
        done = subprocess.run(argv, stdin=devnull, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"acp-notebook {server}: ACP travels on stdin and stdout, which must be pipes, but stdin is /dev/null "
        f"or another device: {how}"]

    out = tmp_path / "out.txt"
    with out.open("w") as file:
        done = subprocess.run(argv, input="", stdout=file, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT)
    assert done.returncode == 2 and out.read_text() == ""
    assert done.stderr.splitlines() == [
        f"acp-notebook {server}: ACP travels on stdin and stdout, which must be pipes, but stdout is a file: {how}"]
