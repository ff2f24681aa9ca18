"""While the agent's code runs (run_code), the ways to end the kernel, or to disable run_code's stop, are refused.

``refusing(shell)`` replaces, for the time the code runs, the functions that end the process or the kernel
with guards: called on the kernel thread they raise ``ExitRefused`` naming what was refused; called on any
other thread (the user's own threads, which keep running meanwhile) they run the original at once. Module
attributes are replaced, so a name looked up at run time (``os._exit``, ``posix._exit``,
``getattr(os, "_ex" + "it")``) finds the guard; every one is put back afterwards.

Refused: os._exit / posix._exit; os.abort / posix.abort; os.execv / os.execve (and the exec* functions built
on them: the kernel process replaced); os.kill, os.killpg, signal.pthread_kill, signal.raise_signal with a
signal aimed at the kernel's own process, process group or threads (pid 0, -1, its pid or a thread id, -its
group); signal.signal(SIGINT, ...) and signal.pthread_sigmask blocking SIGINT (run_code's stop); alarms and
interval timers whose signal would end the process; the kernel's do_shutdown, its event loop's stop, the
shell's ask_exit (exit, quit) and ``exit_now``. SystemExit (sys.exit, exit in plain Python) is refused by the
runner, which catches it.

This keeps the kernel alive against code that asks it to end; it is not a sandbox: code the user allows runs
with the user's rights (ctypes, a child process, a file write can still do anything the user can).

Threads: ``refusing`` is entered and left on the kernel thread (nested entries count); the guards run on any.

Process-wide: ``_active``, how deep the kernel thread is in agent code and what was refused
there. One per process because the kernel thread is; made (at depth 0) at import, changed only on
the kernel thread as agent code starts and ends, never dropped.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["ExitRefused", "refusing"]

Check = Callable[..., "str | None"]


class ExitRefused(BaseException):
    """Raised in the agent's code in place of what would end the kernel; ``what`` names it."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class _Active:
    """How deep the kernel thread is in agent code, and what was refused there (kernel thread writes)."""

    def __init__(self) -> None:
        self.depth = 0
        self.refused: list[str] = []

    def here(self) -> bool:
        return self.depth > 0 and threading.current_thread() is threading.main_thread()


_active = _Active()


def _guard(original: Callable[..., Any], check: Check) -> Callable[..., Any]:
    """``original`` refused on the kernel thread in agent code when ``check(*args)`` names why."""

    def guarded(*args: Any, **kwargs: Any) -> Any:
        if _active.here():
            try:
                refused = check(*args, **kwargs)
            except Exception:  # noqa: BLE001 - odd arguments: the original says what is wrong with them
                refused = None
            if refused:
                _active.refused.append(refused)
                raise ExitRefused(refused)
        return original(*args, **kwargs)

    guarded.__name__ = getattr(original, "__name__", "guarded")
    guarded.__qualname__ = guarded.__name__
    guarded.__doc__ = f"{getattr(original, '__doc__', '') or ''}\n\n(Refused while the agent's code runs.)"
    return guarded


def _always(what: str) -> Check:
    return lambda *_args, **_kwargs: what


def _own_pids() -> set[int]:
    """The kernel's process id and its threads' ids (a kill aimed at a thread id reaches the process)."""
    pids = {os.getpid()}
    with contextlib.suppress(OSError, ValueError):
        pids.update(int(name) for name in os.listdir("/proc/self/task"))
    return pids


def _kill(pid: int, sig: int) -> str | None:
    if int(sig) == 0:
        return None  # signal 0 only checks that the process exists
    pid = int(pid)
    if pid in (0, -1) or pid in _own_pids() or (pid < 0 and -pid == os.getpgrp()):
        return f"os.kill({pid}, {_signal_name(sig)}) (aimed at the kernel's own process or its group)"
    return None


def _killpg(pgid: int, sig: int) -> str | None:
    if int(sig) != 0 and int(pgid) in (0, os.getpgrp()):
        return f"os.killpg({int(pgid)}, {_signal_name(sig)}) (the kernel's own process group)"
    return None


def _pthread_kill(_thread_id: int, sig: int) -> str | None:
    return None if int(sig) == 0 else f"signal.pthread_kill(..., {_signal_name(sig)}) (a thread of the kernel)"


def _raise_signal(sig: int) -> str:
    return f"signal.raise_signal({_signal_name(sig)})"


def _set_handler(signalnum: int, _handler: Any) -> str | None:
    if int(signalnum) == signal.SIGINT:
        return "signal.signal(SIGINT, ...) (it would keep run_code's stop and the kernel's interrupt from working)"
    return None


def _sigmask(how: int, mask: Any) -> str | None:
    if how in (signal.SIG_BLOCK, signal.SIG_SETMASK) and signal.SIGINT in {int(s) for s in mask}:
        return "signal.pthread_sigmask blocking SIGINT (it would keep run_code's stop from working)"
    return None


_TIMER_SIGNALS = {getattr(signal, timer): getattr(signal, sig) for timer, sig in
                  (("ITIMER_REAL", "SIGALRM"), ("ITIMER_VIRTUAL", "SIGVTALRM"), ("ITIMER_PROF", "SIGPROF"))
                  if hasattr(signal, timer)}


def _ends_process(sig: int) -> bool:
    return signal.getsignal(sig) in (signal.SIG_DFL, None)


def _alarm(seconds: int) -> str | None:
    if int(seconds) > 0 and _ends_process(signal.SIGALRM):
        return "signal.alarm with no SIGALRM handler (the alarm would end the kernel)"
    return None


def _setitimer(which: int, seconds: float, *_interval: Any) -> str | None:
    sig = _TIMER_SIGNALS.get(which)
    if sig is not None and float(seconds) > 0 and _ends_process(sig):
        return f"signal.setitimer with no {_signal_name(sig)} handler (the timer would end the kernel)"
    return None


def _signal_name(sig: Any) -> str:
    try:
        return signal.Signals(int(sig)).name
    except (ValueError, TypeError):
        return repr(sig)


# (module, attribute, check): the module attributes replaced while agent code runs.
_MODULE_GUARDS: tuple[tuple[str, str, Check], ...] = (
    *((module, "_exit", _always(f"{module}._exit")) for module in ("os", "posix")),
    *((module, "abort", _always(f"{module}.abort")) for module in ("os", "posix")),
    *((module, name, _always(f"{module}.{name} (it replaces the kernel process)"))
      for module in ("os", "posix") for name in ("execv", "execve")),
    *((module, "kill", _kill) for module in ("os", "posix")),
    *((module, "killpg", _killpg) for module in ("os", "posix")),
    *((module, "pthread_kill", _pthread_kill) for module in ("signal", "_signal")),
    *((module, "raise_signal", _raise_signal) for module in ("signal", "_signal")),
    *((module, "signal", _set_handler) for module in ("signal", "_signal")),
    *((module, "pthread_sigmask", _sigmask) for module in ("signal", "_signal")),
    *((module, "alarm", _alarm) for module in ("signal", "_signal")),
    *((module, "setitimer", _setitimer) for module in ("signal", "_signal")),
)


class _Replaced:
    """Attributes replaced on objects, each put back as it was found (kernel thread)."""

    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, bool, Any]] = []

    def replace(self, target: Any, name: str, value: Any) -> None:
        had_own = name in getattr(target, "__dict__", {})
        before = vars(target)[name] if had_own else None
        try:
            setattr(target, name, value)
        except (AttributeError, TypeError):  # a C object with no attributes of its own (uvloop's loop)
            return
        self._undo.append((target, name, had_own, before))

    def restore(self) -> None:
        while self._undo:
            target, name, had_own, before = self._undo.pop()
            if had_own:
                setattr(target, name, before)
            else:
                with contextlib.suppress(AttributeError):
                    delattr(target, name)


def _guard_modules(replaced: _Replaced) -> None:
    for module_name, attribute, check in _MODULE_GUARDS:
        module = sys.modules.get(module_name)
        original = getattr(module, attribute, None) if module is not None else None
        if original is not None:
            replaced.replace(module, attribute, _guard(original, check))


def _guard_kernel(replaced: _Replaced, shell: Any) -> None:
    """The shell's exits and the kernel's shutdown and event loop, refused on the kernel thread."""
    if shell is None:
        return
    replaced.replace(shell, "ask_exit", _guard(shell.ask_exit, _always("exit() / quit() (the shell's ask_exit)")))
    notify = getattr(shell, "notify_change", None)
    if notify is not None and hasattr(shell, "exit_now"):
        replaced.replace(shell, "notify_change", _exit_now_refused(shell, notify))
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return
    if hasattr(kernel, "do_shutdown"):
        replaced.replace(kernel, "do_shutdown", _guard(kernel.do_shutdown, _always("the kernel's do_shutdown")))
    loop = getattr(getattr(kernel, "io_loop", None), "asyncio_loop", None)
    if loop is not None and hasattr(loop, "stop"):
        replaced.replace(loop, "stop", _guard(loop.stop, _always("stopping the kernel's event loop")))


def _exit_now_refused(shell: Any, notify: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """The shell's trait notifications, with ``exit_now = True`` undone and refused on the kernel thread
    (ipykernel stops its loop when it sees that change; traitlets itself holds notifications this way)."""

    def notify_change(change: Any) -> Any:
        if getattr(change, "name", None) == "exit_now" and getattr(change, "new", False) and _active.here():
            what = "get_ipython().exit_now = True"
            _active.refused.append(what)
            shell.set_trait("exit_now", False)
            raise ExitRefused(what)
        return notify(change)

    return notify_change


@contextlib.contextmanager
def refusing(shell: Any) -> Iterator[list[str]]:
    """Refuse the ways to end the kernel while the body runs (kernel thread); yields the list of what
    was refused meanwhile (also what the code caught and went on from)."""
    replaced = _Replaced()
    refused_before = len(_active.refused)
    outermost = _active.depth == 0
    seen: list[str] = []
    try:
        if outermost:
            _guard_modules(replaced)
            _guard_kernel(replaced, shell)
        _active.depth += 1
        yield seen
    finally:
        _active.depth -= 1
        seen.extend(_active.refused[refused_before:])
        if outermost:
            _active.refused.clear()
        replaced.restore()
