"""What ``acpnb.current()`` answers: the current session of the IPython shell that asks, else a process default.

Who owns what:

- In an IPython shell with the %acp magics loaded, the current session belongs to that shell's magics
  (magics/registry.py's ``NotebookAgents``; one per shell, dropped when the extension unloads). The
  magics install the lookup that finds them with ``follow_shells`` when they load; this module never
  imports IPython and keeps no shell's state.
- Everywhere else (a plain script, a shell without the magics) there is one answer for the process:
  the default that ``set_current`` sets.

Process-wide: ``_process_current``, the one ``CurrentSession`` of the process, which holds that default,
the shell lookup and the test overrides. It is one per process because ``acpnb.current()`` takes no
argument and must answer the same for every caller of a thread; it is created on first use
(``process_current()``, or a first read of ``current_session``), not at import (a ``MadeOnFirstUse``: two
threads asking first share one), and lives until the interpreter exits. Its default, lookup
and overrides are set on the kernel (main) thread; ``get`` is called on any thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from ._once import MadeOnFirstUse
from .errors import AcpError
from .remedies import Remedy

if TYPE_CHECKING:
    from .session import Session

__all__ = ["CurrentSession", "SessionScope", "current", "current_session", "process_current", "set_current"]


class SessionScope(Protocol):
    """Who knows a current session: the %acp magics of one IPython shell (magics/registry.py's NotebookAgents)."""

    @property
    def current_session(self) -> Session | None: ...


class CurrentSession:
    """What ``current()`` answers. In an IPython shell with the %acp magics loaded, that shell's magics' current
    session: each shell keeps its own, found through the lookup the magics install with ``follow_shells`` (this
    module never imports IPython). Elsewhere (a plain script, a shell without the magics) one process default,
    set with ``set``. ``override`` makes every caller get one answer inside a with-block (tests).

    Threads: ``set``, ``follow_shells`` and ``override`` run on the kernel (main) thread; ``get`` on any."""

    def __init__(self) -> None:
        self._default: Session | None = None
        self._shell_scope: Callable[[], SessionScope | None] = lambda: None
        self._overrides: list[Session | None] = []

    def get(self) -> Session | None:
        if self._overrides:
            return self._overrides[-1]
        scope = self._shell_scope()
        return scope.current_session if scope is not None else self._default

    def set(self, session: Session | None) -> None:
        """The process default: the answer outside a shell whose magics are loaded."""
        self._default = session

    def follow_shells(self, scope_of_running_shell: Callable[[], SessionScope | None]) -> None:
        """Ask ``scope_of_running_shell()`` first: the running shell's magics, or None where there are none."""
        self._shell_scope = scope_of_running_shell

    @contextlib.contextmanager
    def override(self, session: Session | None) -> Iterator[None]:
        """``current()`` is ``session`` (None: there is no current session) inside the block, in every shell."""
        self._overrides.append(session)
        try:
            yield
        finally:
            self._overrides.pop()


_process_current: MadeOnFirstUse[CurrentSession] = MadeOnFirstUse(CurrentSession)


def process_current() -> CurrentSession:
    """The process's CurrentSession, made on the first call."""
    return _process_current.get()


def __getattr__(name: str) -> Any:
    # ``current_session`` stays a readable name (``client.current_session.override(...)`` in tests) without
    # being made at import: it is the process's CurrentSession, made on first read.
    if name == "current_session":
        return process_current()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def set_current(session: Session | None) -> None:
    """Make ``session`` what ``current()`` answers outside a shell whose %acp magics are loaded."""
    process_current().set(session)


def current() -> Session:
    """The Session the %acp magics of this IPython shell are using (elsewhere: the one given to set_current)."""
    session = process_current().get()
    if session is None:
        raise AcpError("no current session", remedy=Remedy("start_agent"))
    return session
