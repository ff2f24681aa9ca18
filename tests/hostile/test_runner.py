"""run_code against hostile or unlucky code, sent by an agent under "allow": code that swallows interrupts,
the ways to end the kernel, a call in C that ignores interrupts.

The agent is an MCP client of the real bridge (the official SDK's, from the ``kernel`` entry), the kernel a
real ipykernel (jupyter_client), as in tests/test_kernel_tools_kernel.py, whose helpers these reuse. The
first tests run the same attacks in this process (the test's main thread is the kernel thread, pumping the
tools' work while it waits in ``_loop.run_sync``), where they are quick. Cells and the agent's code signal
the test through FIFOs, so nothing sleeps to wait.
"""

from __future__ import annotations

import gc
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from acp_notebook import _loop
from acp_notebook.kernel_tools import KernelTools

jupyter_client = pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")

from test_kernel_tools_kernel import SETUP, TIMEOUT, Fifo, Kernel, call, kernel, texts  # noqa: E402,F401
from test_widgets import comms, on_loop, outputs_of, shown  # noqa: E402,F401

# Code that catches every stop and goes on, each a way to hold the kernel with plain Python.
SWALLOWERS = {
    "a loop that swallows in its body": "import time\nwhile True:\n    try:\n        time.sleep(0.1)\n"
                                        "    except BaseException:\n        pass",
    "a busy loop that swallows": "while True:\n    try:\n        pass\n    except BaseException:\n        pass",
    "two nested swallowing loops": "import time\nwhile True:\n    try:\n        while True:\n            try:\n"
                                   "                time.sleep(0.1)\n            except BaseException:\n"
                                   "                pass\n    except BaseException:\n        pass",
    "a loop in finally": "try:\n    pass\nfinally:\n    while True:\n        try:\n            pass\n"
                         "        finally:\n            pass",
    "a loop that keeps what it caught": "kept = []\nwhile True:\n    try:\n        while True:\n            pass\n"
                                        "    except BaseException as error:\n        kept.append(error)",
    "suppress in a loop": "import contextlib\nwhile True:\n    with contextlib.suppress(BaseException):\n"
                          "        while True:\n            pass",
    "a generator that swallows": "def g():\n    while True:\n        try:\n            yield 1\n"
                                "        except BaseException:\n            pass\nfor _ in g():\n    pass",
}

# The ways to end the kernel, each spelled so that no check of the source sees it: refused when called.
EXITS = {
    "import posix as p\np._exit(0)": "posix._exit",
    "import os\ngetattr(os, '_ex' + 'it')(0)": "os._exit",
    "import os\nf = getattr(os, 'ab' + 'ort')\nf()": "os.abort",
    "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)": "os.kill(",
    "import os, signal\nos.kill(0, signal.SIGTERM)": "os.kill(0, SIGTERM)",
    "import os, signal\nos.kill(-os.getpgrp(), signal.SIGKILL)": "os.kill(-",
    "import os, signal, threading\nos.kill(threading.get_native_id(), signal.SIGKILL)": "os.kill(",
    "import os, signal\nos.killpg(os.getpgrp(), signal.SIGKILL)": "os.killpg(",
    "import signal\nsignal.raise_signal(signal.SIGTERM)": "signal.raise_signal(SIGTERM)",
    "import signal, threading\nsignal.pthread_kill(threading.main_thread().ident, signal.SIGKILL)":
        "signal.pthread_kill",
    "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)": "signal.signal(SIGINT",
    "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})": "pthread_sigmask blocking SIGINT",
    "import signal\nsignal.alarm(1)": "signal.alarm",
    "import os, sys\nos.execv(sys.executable, [sys.executable, '-c', 'pass'])": "os.execv",
    "import sys\ngetattr(sys, 'ex' + 'it')(3)": "SystemExit",
    "raise SystemExit(1)": "SystemExit",
    "get_ipython().kernel.do_shutdown(False)": "the kernel's do_shutdown",
    "get_ipython().exit_now = True": "exit_now = True",
    "get_ipython().kernel.io_loop.stop()": "stopping the kernel's event loop",
    "e = exit\ne()": "the shell's ask_exit",
    "get_ipython().ask_exit()": "the shell's ask_exit",
}


def run_here(tools: KernelTools, code: str) -> Any:
    return _loop.run_sync(tools.call("run_code", {"code": code}), TIMEOUT)


# --- in this process: the pump's stop ---------------------------------------------------------------------
@pytest.mark.parametrize("code", list(SWALLOWERS.values()), ids=list(SWALLOWERS))
def test_code_that_swallows_interrupts_is_stopped_in_this_process(code: str, monkeypatch) -> None:
    namespace: dict[str, Any] = {}
    tools = KernelTools(policy="allow", run_timeout=0.5, namespace=namespace)
    handler, tracer = signal.getsignal(signal.SIGINT), sys.gettrace()
    # Errors Python can only report (sys.unraisablehook), caught here and not left to whichever test runs when the
    # garbage collector comes by. When the stop lands in the loop that drives the generator that swallows
    # GeneratorExit too, closing that generator later raises again, as it would in any interpreter (it depends on
    # where the stop lands); nothing else may.
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    answer = run_here(tools, code)
    assert answer.is_error and answer.text_of().endswith("stopped: the code ran over the 0.5 s limit")
    # Nothing of the stop is left behind: the next code runs whole, the handler and tracer are as they were.
    assert not run_here(tools, "after = sum(range(10))").is_error and namespace["after"] == 45
    assert (signal.getsignal(signal.SIGINT), sys.gettrace()) == (handler, tracer)
    # ... and no stop is left as the exception the kernel thread "handles": every later traceback of the
    # user's would chain to it ("During handling of the above exception, another exception occurred").
    assert sys.exc_info() == (None, None, None)
    del answer, tools
    gc.collect()
    swallows_generator_exit = code.startswith("def g():")
    assert [u for u in unraisable if not (swallows_generator_exit and getattr(u.object, "__name__", "") == "g")] == []


def test_refusals_are_undone_and_other_threads_are_not_refused() -> None:
    import os
    import posix

    originals = (os._exit, posix._exit, os.kill, signal.signal, signal.pthread_kill)
    namespace: dict[str, Any] = {}
    tools = KernelTools(policy="allow", run_timeout=20, namespace=namespace)
    # A thread of the user's calls a guarded function while the agent's code runs: it is not refused.
    code = ("import os, signal, threading\nseen = []\n"
            "worker = threading.Thread(target=lambda: seen.append(os.kill(os.getpid(), 0) is None "
            "and signal.getsignal(signal.SIGINT) is not None))\nworker.start(); worker.join()\n"
            "try:\n    os._exit(0)\nexcept BaseException as error:\n    print('caught', type(error).__name__)")
    answer = run_here(tools, code.replace("os._exit(0)", "getattr(os, '_exit')(0)"))
    assert namespace["seen"] == [True]
    assert "caught ExitRefused" in answer.text_of()
    assert answer.is_error and "refused: run_code never ends the kernel: os._exit was refused" in answer.text_of()
    assert "(the code caught the refusal and went on)" in answer.text_of()
    assert (os._exit, posix._exit, os.kill, signal.signal, signal.pthread_kill) == originals


# --- in a real kernel -----------------------------------------------------------------------------------
# The tools' events kept in the kernel; ``_ended`` is set when a held run_code's end is reported (the loop
# thread reports it just after the kernel thread is free, so a cell waits for it rather than racing it).
HOSTILE_SETUP = SETUP.replace('_kt = _KernelTools(policy="allow", run_timeout=30)', """
import threading as _threading
_events, _ended = [], _threading.Event()
def _on_event(event):
    _events.append(event)
    if event.kind == "run_code_finished" and "held the kernel" in (event.error or ""):
        _ended.set()
_kt = _KernelTools(policy="allow", run_timeout=30, on_event=_on_event)""")


@pytest.fixture
def entry(kernel: Kernel) -> dict[str, Any]:
    assert HOSTILE_SETUP != SETUP
    return json.loads(kernel.run(HOSTILE_SETUP)["stdout"].strip().splitlines()[-1])


@pytest.mark.kernel
@pytest.mark.slow
def test_a_swallowing_loop_is_stopped_and_the_kernel_answers_the_next_cell(kernel: Kernel,
                                                                          entry: dict[str, Any]) -> None:
    kernel.run("_kt.run_timeout = 1\nimport signal, sys\n_before = (signal.getsignal(signal.SIGINT), sys.gettrace())")
    for name in ("a loop that swallows in its body", "two nested swallowing loops", "a loop in finally"):
        answer = call(entry, "run_code", {"code": SWALLOWERS[name]})
        assert answer.is_error and texts(answer).endswith("stopped: the code ran over the 1 s limit"), name
        assert not call(entry, "list_variables").is_error
    cell = kernel.run("print('alive', (signal.getsignal(signal.SIGINT), sys.gettrace()) == _before)")
    assert cell["stdout"] == "alive True\n"


@pytest.mark.kernel
def test_the_users_interrupt_stops_code_that_swallows_it(kernel: Kernel, entry: dict[str, Any],
                                                        tmp_path: Path) -> None:
    started = Fifo(tmp_path / "started")
    code = f"open({str(started.path)!r}, 'w').write('running')\n" + SWALLOWERS["a busy loop that swallows"]
    result: list[Any] = []
    caller = threading.Thread(target=lambda: result.append(call(entry, "run_code", {"code": code})), daemon=True)
    caller.start()
    assert started.received() == "running"
    kernel.manager.interrupt_kernel()
    caller.join(TIMEOUT)
    (answer,) = result
    assert answer.is_error and texts(answer).endswith("interrupted: the user interrupted the kernel")
    assert kernel.run("print('alive')")["stdout"] == "alive\n"


@pytest.mark.kernel
@pytest.mark.slow
def test_every_way_to_end_the_kernel_is_refused_and_named(kernel: Kernel, entry: dict[str, Any]) -> None:
    kernel.run("import os, posix, signal, sys\n"
               "_originals = (os._exit, posix._exit, os.kill, os.killpg, signal.signal, signal.raise_signal, "
               "get_ipython().ask_exit, get_ipython().kernel.do_shutdown)")
    for code, named in EXITS.items():
        answer = call(entry, "run_code", {"code": code})
        said = texts(answer)
        assert answer.is_error and said.startswith("refused: run_code never ends the kernel: "), (code, said)
        assert named in said and "was refused and the kernel is still running" in said, (code, said)
    cell = kernel.run("print('alive', get_ipython().exit_now, _originals == (os._exit, posix._exit, os.kill, "
                      "os.killpg, signal.signal, signal.raise_signal, get_ipython().ask_exit, "
                      "get_ipython().kernel.do_shutdown))")
    assert cell["stdout"] == "alive False True\n"


@pytest.mark.kernel
def test_ordinary_signals_and_exits_of_the_codes_own_children_still_work(kernel: Kernel,
                                                                          entry: dict[str, Any]) -> None:
    code = ("import os, signal, subprocess, sys\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "os.kill(child.pid, signal.SIGTERM)\n"
            "print('child ended', child.wait())\n"
            "try:\n    raise SystemExit(2)\nexcept SystemExit as ended:\n    print('caught its own exit', ended.code)\n"
            "os.kill(os.getpid(), 0)\nprint('checked')")
    answer = call(entry, "run_code", {"code": code})
    assert not answer.is_error, texts(answer)
    assert texts(answer) == "child ended -15\ncaught its own exit 2\nchecked\n"


# A call that ignores interrupts: SIGINT blocked for the kernel thread (through ctypes, which no refusal can
# stop), then a read from a FIFO that only the test ends. When it returns and SIGINT is unblocked, the stop
# that waited lands at once.
C_HANG = """
import ctypes, os, signal
_libc = ctypes.CDLL(None)
_mask = (ctypes.c_ulong * 16)()
_mask[0] = 1 << (signal.SIGINT - 1)
_libc.pthread_sigmask(0, ctypes.byref(_mask), None)  # SIG_BLOCK
try:
    open({started!r}, 'w').write('blocked')
    _fd = os.open({release!r}, os.O_RDONLY)
    os.read(_fd, 8)
    os.close(_fd)
finally:
    _libc.pthread_sigmask(1, ctypes.byref(_mask), None)  # SIG_UNBLOCK
after_the_release = 1
"""


@pytest.mark.kernel
@pytest.mark.slow
def test_a_call_that_ignores_interrupts_is_reported_still_running_and_holding_the_kernel(
        kernel: Kernel, entry: dict[str, Any], tmp_path: Path) -> None:
    if sys.platform != "linux":
        pytest.skip("the hang blocks SIGINT through Linux's sigset_t layout")
    started, release = Fifo(tmp_path / "started"), Fifo(tmp_path / "release")
    kernel.run("_kt.run_timeout = 1\n_acp_loop.INTERRUPT_GRACE_S = 1")
    result: list[Any] = []
    code = C_HANG.format(started=str(started.path), release=str(release.path))
    caller = threading.Thread(target=lambda: result.append(call(entry, "run_code", {"code": code})), daemon=True)
    caller.start()
    assert started.received() == "blocked"
    caller.join(TIMEOUT)
    (answer,) = result
    said = texts(answer)
    assert answer.is_error and said.startswith("the code is still running: it ignores interrupts"), said
    assert "interrupt the kernel again, or restart it" in said and "stopped:" not in said
    # While it holds the kernel, every tool says so at once (not "busy running a cell").
    for tool, arguments in (("list_variables", {}), ("run_code", {"code": "x = 1"})):
        refused = call(entry, tool, arguments)
        assert refused.is_error and "the kernel is held by code the agent ran (run_code)" in texts(refused), tool
        assert "busy running a cell" not in texts(refused)
    release.release()
    cell = kernel.run("print(_ended.wait(60), 'after_the_release' in dir())\n"
                      "print([e.kind for e in _events if e.code == _events[1].code])\n"
                      "print([e.error for e in _events if e.kind == 'run_code_finished'][-1])")
    ended, kinds, last = cell["stdout"].split("\n", 2)
    assert ended == "True False"  # the end was reported, and the stop landed as soon as the call returned
    assert kinds == "['run_code_started', 'run_code_held', 'run_code_finished']"
    assert "stopped: the code ran over the 1 s limit" in last and "it has ended and the kernel is free again" in last
    assert not call(entry, "list_variables").is_error


# --- the running cell ---------------------------------------------------------------------------------------
def test_a_cell_whose_turn_ended_while_code_held_the_kernel_stops_saying_so_when_the_code_ends(
        comms: Any, shown: Any, tmp_path: Path) -> None:
    """The agent got "still running" and ended its turn while its code still held the kernel: the cell's final
    output says the kernel is held and how to get it back, and is sent again once the code has ended."""
    import acp_notebook as acpnb
    from acp_notebook.turn import KernelCall
    from acp_notebook.widgets import render_thread
    from acp_notebook.widgets.chat import TurnView
    from acp_notebook.widgets.kernel import HELD_NOTE

    agent = acpnb.start("demo", cwd=tmp_path, env={"ACP_DEMO_DELAY": "0.3"})
    try:
        view = TurnView(agent.new_session().start_turn("tell me a long story about the sea and the stars"))
        view.show()
        held = KernelCall(id="kernel-held", tool="run_code", code="while True: pass", status="held",
                          error="the code is still running: it ignores interrupts")
        on_loop(lambda: view.turn.record_kernel(held))
        comms.click(view.cancel_button)
        view.finished.result(TIMEOUT)
        assert HELD_NOTE in outputs_of(shown, view.live)[-1].data["text/plain"]
        ended = "stopped: the code ran over the 1 s limit\n(it held the kernel 9 s after it was reported still running)"

        def end() -> None:
            held.status, held.error = "failed", ended
            view.turn.record_kernel(held)

        on_loop(end)
        render_thread.submit(lambda: None).result(TIMEOUT)  # the render thread has sent what the end queued
        final = outputs_of(shown, view.live)[-1].data["text/plain"]
        assert HELD_NOTE not in final and "it held the kernel 9 s" in final
    finally:
        agent.close()
