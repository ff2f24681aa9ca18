"""The hostile local process reading ``ps``, and the hostile agent keeping its `kernel` entry: no secret the user
gives the package reaches a command line, and an entry dies with its session.

Any local user can read every process's ``/proc/PID/cmdline`` (and ``ps`` shows it); a process's
environment is readable only by its owner. So an agent's keys travel in environments, never in argv:
the agent itself, its sandbox (bubblewrap), and the kernel tools' bridge it starts are read here while a
turn that used the kernel tools is done (the proxy's own case is in tests/test_proxy_trust.py).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import acp_notebook as acpnb
from acp_notebook.kernel_tools.namespace import current_shell
from tests.processes import descendants

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")


def read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


def bwrap_works() -> bool:
    bwrap = shutil.which("bwrap")
    return bwrap is not None and subprocess.run(
        [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "true"], capture_output=True).returncode == 0


@pytest.mark.parametrize("sandbox", [None, pytest.param("bwrap", marks=pytest.mark.skipif(
    not bwrap_works(), reason="bubblewrap cannot run here"))])
@pytest.mark.slow
def test_no_key_is_on_the_command_line_of_the_agent_its_sandbox_or_its_kernel_bridge(tmp_path, sandbox):
    key = "sk-test-" + secrets.token_hex(20)
    # The namespace the kernel tools serve: an IPython shell's (another test module may have started one
    # in this process), else __main__'s.
    shell = current_shell()
    main = shell.user_ns if shell is not None else sys.modules["__main__"].__dict__
    taken: dict[int, bytes] = {}
    # Run by the agent's run_code, on this (the "kernel") thread, while its bridge serves that very call.
    main["take_cmdlines"] = lambda: taken.update({pid: read(f"/proc/{pid}/cmdline")
                                                   for pid in descendants(os.getpid())})
    agent = acpnb.start([sys.executable, "-m", "acp_notebook.demo"], cwd=str(tmp_path),
                        env={"OPENAI_API_KEY": key}, kernel_tools="allow", sandbox=sandbox)
    try:
        session = agent.new_session()
        session.prompt("run take_cmdlines()", timeout=120)
        assert any(b"acp_notebook.demo" in line for line in taken.values())
        assert any(b"kernel_tools.bridge" in line for line in taken.values())  # taken while it ran
        if sandbox:
            assert any(b"bwrap\0" in line for line in taken.values())
        for pid, line in taken.items():
            assert key.encode() not in line, (pid, line)
        agent_pids = [pid for pid, line in taken.items() if b"acp_notebook.demo" in line]
        assert any(key.encode() in read(f"/proc/{pid}/environ") for pid in agent_pids)  # it did get its key
    finally:
        agent.close()
        main.pop("take_cmdlines", None)


@pytest.mark.parametrize("how", ["session closed", "agent stopped"])
def test_the_bridge_of_a_closed_session_or_a_stopped_agent_is_refused_at_once(tmp_path, how):
    """The hostile agent keeps the `kernel` entry it was given and tries it again after its session ended."""
    from acp_notebook.demo import DemoAgent
    from acp_notebook.kernel_tools.bridge import BridgeError, connect
    from acp_notebook.kernel_tools.client import entry_environment

    agent = acpnb.start(DemoAgent(), cwd=str(tmp_path), kernel_tools="allow")
    try:
        session = agent.new_session()
        entry = dict(session.kernel_tools.entry)
        env = entry_environment(entry)
        connect(env["ACPNB_KERNEL_CHANNEL"], env["ACPNB_KERNEL_TOKEN"]).close()  # it works while open
        if how == "session closed":
            session.close()
        else:
            agent.close()
        with pytest.raises(BridgeError, match="cannot reach the kernel|refused"):
            connect(env["ACPNB_KERNEL_CHANNEL"], env["ACPNB_KERNEL_TOKEN"])
    finally:
        agent.close()
