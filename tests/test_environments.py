"""The same calls from a plain script and from real Jupyter kernels, with and without nest_asyncio; no leftovers."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import nbformat
import pytest

from tests.kernels import notebook_client
from tests.processes import wait_gone

SCRIPT = textwrap.dedent(
    """
    import json, threading
    import acp_notebook as acpnb
    agent = acpnb.start("demo")
    session = agent.new_session()
    session.set("model", "smart")
    turn = session.prompt("Why is the sea salty?")
    print(json.dumps({"pid": agent.pid, "title": session.title, "text": turn.text,
                      "options": session.config.ids()}))
    # exits without close(): the atexit hook must end the agent
    """
)


def test_plain_script_and_interpreter_exit_leaves_no_agent(tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["title"] and report["text"]
    assert "thought_level" in report["options"]
    assert wait_gone(report["pid"]), "the agent outlived the interpreter"


CELLS = [
    "import acp_notebook as acpnb\nagent = acpnb.start('demo')\nsession = agent.new_session()",
    "new_state = session.set('model', 'smart')\nassert 'thought_level' in new_state",
    "try:\n    session.set('model', 'genius')\nexcept acpnb.ConfigOptionError as exc:\n    rejected = str(exc)\n"
    "assert 'smart' in rejected and session.model == 'smart'",
    "turn = session.prompt('Tell me about tide pools')\nassert turn.text and session.title\nprint(session.title)",
    "turn2 = await session.aprompt('new topic: volcanoes')\nprint(turn2.stop_reason, session.title)",
    "print('PID', agent.pid)",
    "agent.close()\nprint('STATUS', agent.status)",
]


def run_notebook(cells, tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = notebook_client(nb, tmp_path, timeout=120)
    client.execute()
    return "".join(
        out.get("text", "") for cell in nb.cells for out in cell.get("outputs", []) if out.get("name") == "stdout"
    )


@pytest.mark.kernel
@pytest.mark.parametrize("nested", [False, True], ids=["plain-kernel", "nest_asyncio"])
def test_kernel_with_and_without_nest_asyncio(tmp_path, nested):
    cells = (["import nest_asyncio\nnest_asyncio.apply()"] if nested else []) + CELLS
    stdout = run_notebook(cells, tmp_path)
    assert "end_turn" in stdout
    assert "STATUS closed" in stdout
    pid = int(stdout.split("PID ")[1].split()[0])
    assert wait_gone(pid)


LEAK_SCRIPT = textwrap.dedent(
    """
    import os, threading
    import acp_notebook as acpnb

    def use_once():
        with acpnb.start("demo") as agent:
            agent.new_session().prompt("hello")

    def settled():
        # asyncio's child watcher threads end just after handing over an exit: on a busy machine one may still be
        # there when close returns, at either count
        for thread in threading.enumerate():
            if "waitpid" in thread.name:
                thread.join(timeout=15)

    use_once()  # the loop thread and its self-pipe exist from here on
    settled()
    fds, threads = len(os.listdir("/proc/self/fd")), {t.name for t in threading.enumerate()}
    for _ in range(3):
        use_once()
    settled()
    print(len(os.listdir("/proc/self/fd")) - fds, sorted({t.name for t in threading.enumerate()} ^ threads))
    """
)


@pytest.mark.slow
def test_close_leaves_no_pipe_or_thread_behind(tmp_path):
    done = subprocess.run([sys.executable, "-c", LEAK_SCRIPT], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "[]"]


@pytest.mark.kernel
def test_kernel_shutdown_ends_the_agent(tmp_path):
    stdout = run_notebook(CELLS[:1] + ["print('PID', agent.pid)"], tmp_path)
    pid = int(stdout.split("PID ")[1].split()[0])
    assert wait_gone(pid), "the agent outlived its kernel"
