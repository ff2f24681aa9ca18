"""ACP terminal authentication: an agent's own login run in a pseudo-terminal, and the agent reconnected.

A terminal auth method (``{"type": "terminal", "id", "name", "args", "env"}``) is never sent to the agent
(``authenticate``): the client runs the agent's configured program again, with the method's ``args``
appended and its ``env`` on top of the agent's environment, in a terminal the person can use; exit status
zero means the login worked, and an ACP v1 client then reconnects to the agent (a new process and
``initialize``), which now finds the credentials the login left behind.

- ``login_command(agent, method_id)``: what to run (``LoginCommand``: argv, the full environment, the
  working directory) and ``shown``, the command line a person can read and paste: the method's env by value
  unless it names or holds a secret, the environment the agent was started with by name only (``NAME="$NAME"``).
- ``TerminalLogin``: the login in a pseudo-terminal (``os.openpty``), the process leading its own session with
  the terminal as its controlling terminal (so ``getpass`` reads from it with echo off) and its own process
  group (Cancel ends the group: whatever the login started ends with it). Its output is decoded, stripped of
  terminal escapes and made visible (``TerminalText``) before anyone sees it; whether the terminal echoes is
  followed, so a view can ask for secrets in a password field.
- The reconnect after a login (the same agent started again as it was) is starting.py's ``arelaunch``.

Threads: ``TerminalLogin`` reads the terminal on a thread of its own (``acpnb-login``), which calls
``on_output`` / ``on_echo`` and resolves ``done`` (a concurrent Future of the ``LoginOutcome``); ``write``
and ``cancel`` may be called from any thread (the kernel thread, from a view's comm handlers).
"""

from __future__ import annotations

import codecs
import concurrent.futures
import contextlib
import os
import re
import select
import shlex
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._redact import Redactor, is_secret_name
from ._visible import visible
from .errors import AcpError

__all__ = ["LoginCommand", "LoginOutcome", "TerminalLogin", "TerminalText", "is_terminal_method",
           "login_command", "shown_command"]

# The terminal's size as the login sees it (TIOCSWINSZ): wide enough for a URL on one line.
COLUMNS, ROWS = 120, 40
READ_SIZE = 4096
POLL_S = 0.25  # how often the reader looks whether the process ended while its terminal stays open
CANCEL_GRACE_S = 3.0  # SIGTERM to the group, then SIGKILL after this long
# The program the login runs under: it makes the terminal (its stdin, already a new session's) the controlling
# terminal, then becomes the agent's program. Without it /dev/tty would not open, and getpass would read from
# stdin with echo on. (subprocess has no option for it, and preexec_fn is unsafe in a threaded kernel.)
_CONTROLLING_TTY = ("import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
                    "os.execvp(sys.argv[1], sys.argv[1:])")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_terminal_method(method: Mapping[str, Any]) -> bool:
    return method.get("type") == "terminal"


# --- what to run --------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoginCommand:
    """A terminal login to run: ``argv`` in ``cwd`` with ``env`` (the whole environment: secrets included,
    so never shown); ``shown`` is the command line for people, with no secret value in it."""

    method_id: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(repr=False)
    cwd: str
    shown: str


def shown_command(command: Sequence[str], method: Mapping[str, Any], *, launch_env_names: Sequence[str] = (),
                  redactor: Redactor | None = None) -> str:
    """The command line of a terminal login as a person may read and paste it: ``command`` (the agent's, masked)
    with the method's args, its env as ``NAME=value`` (``NAME="$NAME"`` where the name or the value is a secret),
    and the variables the agent was started with as ``NAME="$NAME"``: their values are never written out."""
    redactor = redactor or Redactor()
    env = method.get("env") if isinstance(method.get("env"), Mapping) else {}
    words: list[str] = []
    for name, value in env.items():
        name, value = str(name), str(value)
        secret = is_secret_name(name) or redactor.text(value) != value
        words.append(_reference(name) if secret and _NAME.match(name) else shlex.quote(f"{name}={value}"))
    words += [_reference(name) for name in launch_env_names if name not in env and _NAME.match(name)]
    words += [shlex.quote(redactor.text(str(part))) for part in command]
    words += [shlex.quote(redactor.text(str(arg))) for arg in method.get("args") or []]
    return " ".join(words)


def _reference(name: str) -> str:
    return f'{name}="${name}"'


def _method(agent: Any, method_id: str) -> dict[str, Any]:
    method = next((m for m in agent.auth_methods if isinstance(m, Mapping) and m.get("id") == method_id), None)
    if method is None or not is_terminal_method(method):
        raise AcpError(f"{method_id!r} is not a terminal login of agent '{agent.name}'",
                       hint="agent.auth_methods lists each method's type.",
                       hints={"magic": "%acp auth lists each method and how to use it."})
    return dict(method)


def login_command(agent: Any, method_id: str) -> LoginCommand:
    """The terminal login ``method_id`` of ``agent`` (an acpnb Agent): its own program and environment, the
    method's args and env on top. AcpError when the agent is no program this client started (a recording
    replayed, an object served in memory): there is nothing here to run the login of."""
    method = _method(agent, method_id)
    argv = [str(part) for part in agent.connection.transport.command]
    shown = shown_command(agent.command, method, launch_env_names=sorted(agent.extra_env),
                          redactor=agent.redactor)
    if not argv:
        raise AcpError(f"agent '{agent.name}' is not a program started here, so its terminal login "
                       f"{method_id!r} cannot run in this kernel",
                       hint=f"Run it in a terminal where the agent is installed, then start the agent again: {shown}")
    env = dict(agent.connection.env)
    env.setdefault("TERM", "dumb")  # the view shows lines of text: ask for plain output, not a screen to draw
    env.update({str(k): str(v) for k, v in (method.get("env") or {}).items()})
    args = [str(arg) for arg in method.get("args") or []]
    return LoginCommand(method_id, (*argv, *args), env, agent.cwd, shown)


# --- the terminal's text ------------------------------------------------------------------------
# Escape sequences a terminal program writes: CSI (colours, cursor moves), OSC (titles, hyperlinks: the text
# between an OSC 8 pair is kept), character-set picks, and the other two-character ones.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()*+][0-~]|[ -/]*[0-~])")
# An escape that may still be arriving: held back until the next read completes it (bounded).
_PARTIAL = re.compile(r"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?|[()*+]|[ -/]*)?$")
_PARTIAL_LIMIT = 512


class TerminalText:
    """Bytes from a terminal as text safe to show: UTF-8 decoded across reads (undecodable bytes become escapes),
    escape sequences dropped (one cut between two reads included), ``\\r\\n`` as a newline, a bell dropped, and
    every other hidden character spelled out by ``visible`` (a lone ``\\r`` is kept: it redraws a line)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
        self._held = ""

    def feed(self, data: bytes, *, final: bool = False) -> str:
        text = self._held + self._decoder.decode(data, final=final)
        self._held = ""
        if not final:
            partial = _PARTIAL.search(text)
            if partial is not None and len(text) - partial.start() <= _PARTIAL_LIMIT:
                text, self._held = text[:partial.start()], text[partial.start():]
            if text.endswith("\r"):  # may be the first half of \r\n
                text, self._held = text[:-1], "\r" + self._held
        text = _ESCAPES.sub("", text).replace("\r\n", "\n").replace("\x07", "")
        return visible(text, keep_cr=True)


# --- running it -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoginOutcome:
    """How a login ended: ``exit_code`` (negative: the signal that ended it), whether Cancel ended it, or the
    error that kept it from starting."""

    exit_code: int | None
    cancelled: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.cancelled and self.error is None

    def describe(self) -> str:
        if self.error is not None:
            return f"it could not start: {self.error}"
        if self.cancelled:
            return "cancelled"
        if self.exit_code is not None and self.exit_code < 0:
            with contextlib.suppress(ValueError):
                return f"ended by {signal.Signals(-self.exit_code).name}"
            return f"ended by signal {-self.exit_code}"
        return f"exit status {self.exit_code}"


class TerminalLogin:
    """One login in a pseudo-terminal (see the module docstring). ``start()`` once; ``done`` resolves with the
    ``LoginOutcome`` when the process has ended and its output has been read."""

    def __init__(self, command: LoginCommand, *, on_output: Callable[[str], None] = lambda _text: None,
                 on_echo: Callable[[bool], None] = lambda _echo: None) -> None:
        self.command = command
        self.on_output = on_output
        self.on_echo = on_echo
        self.done: concurrent.futures.Future[LoginOutcome] = concurrent.futures.Future()
        self.echo = True  # whether the terminal echoes what is typed (getpass turns it off)
        self._text = TerminalText()
        self._lock = threading.Lock()
        self._master: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._cancel_at: float | None = None  # when Cancel was asked (monotonic)
        self._killed = False

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Spawn the login on a new pseudo-terminal and start reading it; a spawn that fails resolves ``done``
        with the error (the view says it; nothing is raised)."""
        master, slave = os.openpty()
        try:
            _set_size(slave)
            self._process = subprocess.Popen(
                [sys.executable, "-c", _CONTROLLING_TTY, *self.command.argv], stdin=slave, stdout=slave,
                stderr=slave, cwd=self.command.cwd, env=dict(self.command.env), start_new_session=True,
                close_fds=True)
        except OSError as exc:
            os.close(master)
            self.done.set_result(LoginOutcome(None, error=f"{type(exc).__name__}: {exc}"))
            return
        finally:
            os.close(slave)  # the child holds its copies: the master reads EOF once every one is closed
        self._master = master
        threading.Thread(target=self._read_loop, name="acpnb-login", daemon=True).start()

    def write(self, text: str) -> None:
        """Type ``text`` into the terminal (any thread); ignored once the login ended."""
        with self._lock:
            master = self._master
            if master is None or self.done.done():
                return
            data = text.encode("utf-8", "surrogateescape")
            with contextlib.suppress(OSError):  # the login ended as we typed
                while data:
                    data = data[os.write(master, data):]

    def write_line(self, text: str) -> None:
        """Type ``text`` and Enter (a carriage return, as a terminal's Enter key sends)."""
        self.write(text + "\r")

    def cancel(self) -> None:
        """End the login's process group (SIGTERM, then SIGKILL after ``CANCEL_GRACE_S``); any thread."""
        with self._lock:
            if self._process is None or self.done.done() or self._cancel_at is not None:
                return
            self._cancel_at = time.monotonic()
        self._signal_group(signal.SIGTERM)

    def _signal_group(self, sig: int) -> None:
        assert self._process is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, sig)

    def _read_loop(self) -> None:
        """The reader thread: output as it comes, the echo state as it changes, the end once all is read."""
        assert self._master is not None and self._process is not None
        master, process = self._master, self._process
        try:
            while True:
                if self._cancel_at is not None and not self._killed and \
                        time.monotonic() - self._cancel_at >= CANCEL_GRACE_S:
                    self._killed = True
                    self._signal_group(signal.SIGKILL)
                ready, _, _ = select.select([master], [], [], POLL_S)
                if not ready:
                    if process.poll() is not None:
                        break  # ended, while something it started may keep the terminal open: stop reading
                    continue
                try:
                    data = os.read(master, READ_SIZE)
                except OSError:  # EIO: every copy of the terminal's other end is closed
                    break
                if not data:
                    break
                self._follow_echo(master)  # first: a prompt read with echo off arrives with the box already hidden
                self._emit(self._text.feed(data))
            self._emit(self._text.feed(b"", final=True))
            exit_code = process.wait()
        finally:
            with self._lock:
                self._master = None
                os.close(master)
        if self._cancel_at is not None:
            self._signal_group(signal.SIGKILL)  # what the login left running goes with it
        self.done.set_result(LoginOutcome(exit_code, cancelled=self._cancel_at is not None))

    def _emit(self, text: str) -> None:
        if text:
            self.on_output(text)

    def _follow_echo(self, master: int) -> None:
        try:
            import termios  # POSIX only: the module loads on platforms without it

            echo = bool(termios.tcgetattr(master)[3] & termios.ECHO)  # the terminal's settings, read on its master
        except OSError:
            return
        if echo != self.echo:
            self.echo = echo
            self.on_echo(echo)


def _set_size(fd: int) -> None:
    # POSIX only: the module loads on platforms without them
    import fcntl
    import termios

    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
