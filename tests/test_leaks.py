"""Nothing is left behind: no process (of any agent's whole process group), thread or file descriptor.

A fresh interpreter runs 50 start/use/close cycles of a subprocess agent and of an agent in memory,
and 20 of the proxy with its agent, and counts what is left: processes in any group an agent or a
proxy's backend led, this interpreter's threads and open file descriptors. It then starts a proxy
and an agent whose tool call left a grandchild running, and exits without closing them: the
atexit hook must end all of it. ``%acp stop`` and kernel shutdown are checked in a real kernel.

Lean on purpose: the fault agent in "normal" mode starts in a fraction of the demo agent's time
(it imports no SDK), and the in-memory cycles show the thread and descriptor accounting of the
client itself at no process cost.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.kernels import notebook_client
from tests.processes import wait_gone

FAULT_AGENT = [sys.executable, str(Path(__file__).resolve().parent / "agents" / "fault_agent.py")]
CYCLES = 50
# A proxy cycle starts two processes (the proxy, its agent) and costs about 7 agent cycles: fewer of them keep the
# test within about 15 s on an idle 2-core machine, and the client's side of a cycle is the agent cycle's.
PROXY_CYCLES = 20

CENSUS = textwrap.dedent(
    """
    import json, os, sys, threading
    import acp_notebook as acpnb
    from acp_notebook.demo.agent import DemoAgent

    AGENT = json.loads(sys.argv[1])
    CYCLES, PROXY_CYCLES = int(sys.argv[2]), int(sys.argv[3])
    groups = []  # every process group an agent or a proxy's backend led

    def census():
        # asyncio's child watcher hands a process's exit to the loop from a thread of its own, which ends
        # just after: wait for those threads (one of a process that never ended would still be counted).
        for thread in threading.enumerate():
            if "waitpid" in thread.name:
                thread.join(timeout=15)
        # Executor workers (asyncio_N) are a bounded, reused pool, not a leak.
        names = sorted(t.name for t in threading.enumerate() if not t.name.startswith("asyncio_"))
        return {"fds": len(os.listdir("/proc/self/fd")), "threads": names}

    def agent_cycle():
        with acpnb.start(AGENT, timeout=60) as agent:
            groups.append(agent.pid)
            assert agent.new_session().prompt("hello").text == "echo: hello"

    def memory_cycle():
        with acpnb.start(DemoAgent(), timeout=60) as agent:
            agent.new_session().prompt("hello")

    def proxy_cycle():
        with acpnb.start_proxy({"f": AGENT}, timeout=60) as proxy:
            groups.append(proxy.pid)
            assert proxy.new_session().prompt("hello").text == "echo: hello"
            status = proxy.request("_proxy/status", {})
            groups.append(status["agents"]["f"]["pid"])

    for cycle in (agent_cycle, memory_cycle, proxy_cycle):  # the loop thread and its pipes exist from here on
        cycle()
    before = census()
    for cycle, count in ((agent_cycle, CYCLES), (memory_cycle, CYCLES), (proxy_cycle, PROXY_CYCLES)):
        for _ in range(count):
            cycle()
    after = census()

    # Left running on purpose: the interpreter's exit must end them, grandchild included.
    proxy = acpnb.start_proxy({"f": AGENT}, timeout=60)
    proxy.new_session().prompt("hello")
    backend = proxy.request("_proxy/status", {})["agents"]["f"]["pid"]
    spawner = acpnb.start(AGENT[:-1] + ["spawn-child"], timeout=60)
    grandchild = int(spawner.new_session().prompt("go").text.split()[-1])
    print(json.dumps({"before": before, "after": after, "groups": groups,
                      "abandoned": [proxy.pid, backend, spawner.pid, grandchild]}))
    """
)


def group_members(groups: set[int]) -> list[str]:
    """Live processes (``pid command``) whose process group is one of ``groups``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # ended while we looked
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
        # A zombie has ended and holds nothing; the process that inherited it (init) reaps it in its own time.
        if int(fields[2]) in groups and fields[0] != "Z":
            found.append(f"{entry} {command.strip()}")
    return found


@pytest.mark.timeout(600)
@pytest.mark.slow
def test_fifty_cycles_of_an_agent_a_memory_agent_and_the_proxy_leave_nothing(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", CENSUS, json.dumps([*FAULT_AGENT, "normal"]), str(CYCLES),
                           str(PROXY_CYCLES)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["after"] == report["before"], "threads or file descriptors were left behind"
    assert len(report["groups"]) == (CYCLES + 1) + 2 * (PROXY_CYCLES + 1)  # an agent's; a proxy's and its agent's
    abandoned = report["abandoned"]
    for pid in abandoned:
        assert wait_gone(pid, 15), f"process {pid} outlived the interpreter"
    assert group_members(set(report["groups"]) | set(abandoned[:3])) == []


nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


@pytest.mark.kernel
@pytest.mark.timeout(300)
def test_acp_stop_and_kernel_shutdown_end_the_proxy_and_its_agents(tmp_path: Path) -> None:
    agent = " ".join([*FAULT_AGENT, "normal"])  # a command line, as %acp proxy takes it
    pids = ("import json, acp_notebook as acpnb\n"
            "def pids():\n"
            "    proxy = acpnb.current().agent\n"
            "    return [proxy.pid] + [a['pid'] for a in proxy.request('_proxy/status', {})['agents'].values()]\n")
    cells = [
        "%load_ext acp_notebook",
        pids,
        f"%acp proxy f='{agent}' --name stopped",
        "stopped = pids()\nprint('STOPPED', json.dumps(stopped))",
        "%acp stop",
        f"%acp proxy f='{agent}' --name running",
        "print('RUNNING', json.dumps(pids()))",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = notebook_client(notebook, tmp_path, timeout=120)
    client.execute()  # the kernel shuts down at the end, with the second proxy still running
    stdout = "".join(out.get("text", "") for cell in notebook.cells for out in cell.get("outputs", [])
                     if out.get("name") == "stdout")
    stopped = json.loads(stdout.split("STOPPED ")[1].splitlines()[0])
    running = json.loads(stdout.split("RUNNING ")[1].splitlines()[0])
    assert len(stopped) == len(running) == 2 and None not in stopped + running
    for pid in stopped + running:
        assert wait_gone(pid, 15), f"process {pid} outlived %acp stop or its kernel"
    assert group_members(set(stopped + running)) == []
