"""`acp-notebook proxy` as a subprocess at start: plain words on stderr, no asyncio traceback."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from typing import IO

import pytest

TIMEOUT = 30.0
PROXY = [sys.executable, "-m", "acp_notebook.cli", "proxy"]


def line_reader(stream: IO[str]) -> queue.Queue[str]:
    """The lines of a subprocess's stream as they come (a thread reads them; "" at the end)."""
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    return lines


def test_agents_that_cannot_be_found_are_named_at_start_before_any_client_speaks(tmp_path):
    proxy = subprocess.Popen(
        [*PROXY, "--agent", "bogus=nosuchagent", "--agent", "d=demo", "--agent", "local=./missing-agent.py --x",
         "--agent", "typo=dmeo"],
        cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stderr = line_reader(proxy.stderr)
        first, second = stderr.get(timeout=TIMEOUT), stderr.get(timeout=TIMEOUT)
        assert proxy.poll() is None  # still serving, waiting for a client on stdin
        assert first.startswith("acp-notebook proxy: cannot find --agent bogus=nosuchagent: no agent is "
                                "registered as 'nosuchagent' and no such command is on PATH (registered: ")
        assert "demo" in first and first.rstrip().endswith("; serving without it")
        assert second.rstrip() == ("acp-notebook proxy: cannot find --agent local: './missing-agent.py' is not on "
                                   "PATH; serving without it")
        assert stderr.get(timeout=TIMEOUT).startswith("acp-notebook proxy: cannot find --agent typo=dmeo: no agent is "
                                                      "registered as 'dmeo' (did you mean 'demo'?) and no such command")
    finally:
        proxy.stdin.close()  # end of stdin: the proxy stops
        try:
            proxy.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proxy.kill()
            raise
    rest = "".join(iter(lambda: stderr.get(timeout=TIMEOUT), ""))
    assert proxy.returncode == 0
    assert "Traceback" not in rest and "d=demo" not in rest  # the demo agent was found: not named


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/maps")
def test_the_proxy_process_answers_on_uvloop():
    proxy = subprocess.Popen([*PROXY, "--agent", "d=demo"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
    try:
        proxy.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                      "params": {"protocolVersion": 1, "clientCapabilities": {}}}) + "\n")
        proxy.stdin.flush()
        answer = json.loads(line_reader(proxy.stdout).get(timeout=TIMEOUT))
        assert answer["id"] == 1 and answer["result"]["protocolVersion"] == 1
        with open(f"/proc/{proxy.pid}/maps") as maps:
            assert "uvloop" in maps.read()
    finally:
        proxy.stdin.close()
        try:
            proxy.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            proxy.kill()
            raise
    assert proxy.returncode == 0
