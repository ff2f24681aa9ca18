"""``%acp auth METHOD`` for a terminal login: the agent's login runs in the cell, then the agent is reconnected.

ACP's terminal auth method is never sent to ``authenticate``: the client runs the agent's own program with the
method's args and env in a terminal the person can use (auth_terminal.py: a pseudo-terminal; the view:
widgets/terminal.py), and after an exit status of zero, an ACP v1 client reconnects: the agent is started again
as it was (``arelaunch``), and a session opens on the new one (the agent now finds its credentials). The new
agent replaces the old one under the same name, which is closed. The view says how it went at every step.

The cell does not wait for the login: it shows the view and ends, so that the kernel handles what the person
types and clicks (a cell that blocked the kernel thread would hold those messages back). Where there is no
kernel to show a view in (a terminal IPython, a script), or the agent is no program started here (a replay, an
object in memory), the command says what to run in a terminal instead.

Threads: ``start`` runs on the kernel thread; the login's reader thread feeds the view; what follows the login's
end runs on the background loop (``_after``), except the registry's change (``_adopt``), handed to the kernel
thread with ``_loop.on_kernel_thread`` (the registry is only changed there).

Process-wide: ``_running``, the terminal login running for each agent, weakly keyed by the
Agent (an entry goes with its agent); one per process because a login belongs to its agent, whichever
shell's magics started it. Empty at import; changed on the kernel thread.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from .. import _loop
from ..auth_terminal import LoginOutcome, TerminalLogin, is_terminal_method, login_command
from ..starting import arelaunch
from ..errors import AcpError, RpcError
from ..widgets.terminal import TerminalLoginView
from .registry import AgentEntry

__all__ = ["TerminalLoginFlow", "can_run_here", "running_login", "terminal_method"]

logger = logging.getLogger(__name__)

KERNEL_WAIT_S = 120.0  # how long the new agent waits for a kernel busy with a cell before it is given up
KERNEL_RUN_S = 60.0  # closing the old agent and opening the new one's session in the registry

# The login running for an agent (keyed by the Agent: entries are unhashable dataclasses); kernel thread.
_running: weakref.WeakKeyDictionary[Any, TerminalLoginFlow] = weakref.WeakKeyDictionary()


def running_login(agent: Any) -> TerminalLoginFlow | None:
    """The terminal login ``%acp auth`` last started for ``agent`` (running or ended), if any."""
    return _running.get(agent)


def terminal_method(agent: Any, method_id: str | None) -> dict[str, Any] | None:
    """The agent's auth method ``method_id`` when it is a terminal login, else None."""
    for method in agent.auth_methods:
        if isinstance(method, dict) and method.get("id") == method_id and is_terminal_method(method):
            return method
    return None


def can_run_here(agent: Any, shell: Any) -> bool:
    """Whether ``%acp auth`` can run the agent's terminal logins in a cell: a kernel shows the view, and the agent
    is a program this client started (a replay or an object in memory has no login to run)."""
    return getattr(shell, "kernel", None) is not None and bool(agent.connection.transport.command)


class TerminalLoginFlow:
    """One ``%acp auth METHOD`` of a terminal method: the view, the login, and the reconnect after it."""

    def __init__(self, runner: Any, entry: AgentEntry, method_id: str) -> None:
        self.runner, self.entry, self.method_id = runner, entry, method_id
        self.view: TerminalLoginView | None = None
        self.login: TerminalLogin | None = None

    def start(self) -> None:
        """Show the login in the cell and start it (kernel thread); returns at once."""
        agent = self.entry.agent
        if not can_run_here(agent, getattr(self.runner.magics, "shell", None)):
            agent.authenticate(self.method_id)  # raises: a terminal login, and the command line to run
            return
        running = _running.get(agent)
        if running is not None and running.login is not None and not running.login.done.done():
            raise AcpError(f"a terminal login of agent {self.entry.alias!r} is already running",
                           hint="Finish it, or press its Cancel button, in the cell that shows it.")
        command = login_command(agent, self.method_id)
        method = terminal_method(agent, self.method_id) or {}
        label = str(method.get("name") or self.method_id)
        login = TerminalLogin(command)
        view = TerminalLoginView(agent_name=self.entry.alias, method=label, command_line=command.shown,
                                 on_send=login.write_line, on_cancel=login.cancel)
        login.on_output = view.append
        login.on_echo = lambda echo: view.set_secret(not echo)
        self.view, self.login = view, login
        _running[agent] = self
        view.show()
        login.start()
        login.done.add_done_callback(lambda done: _loop.submit(self._after_safely(done.result())))

    async def _after_safely(self, outcome: LoginOutcome) -> None:
        """``_after``, and a view that says so if it failed: it must never stay "running" for ever."""
        try:
            await self._after(outcome)
        except Exception as exc:  # noqa: BLE001 - shown in the view, logged in full
            logger.exception("the end of a terminal login failed")
            assert self.view is not None
            self.view.finish(f"The login ended ({outcome.describe()}), then this failed: {exc}", ok=False)

    async def _after(self, outcome: LoginOutcome) -> None:
        """The login ended (loop thread): on success, the agent started again and a session opened on it."""
        assert self.view is not None
        view, alias = self.view, self.entry.alias
        if not outcome.ok:
            view.finish(f"The login did not work ({outcome.describe()}); nothing changed. %acp auth {self.method_id} "
                        "runs it again.", ok=False)
            return
        view.note(f"The login finished (exit status 0): starting agent {alias!r} again to use it...")
        try:
            agent = await arelaunch(self.entry.agent, name=alias)
        except AcpError as exc:
            view.finish(f"The login finished, but agent {alias!r} did not start again: {exc.message}", ok=False)
            return
        session, problem = await self._open_session(agent)
        try:
            adopted = await _loop.on_kernel_thread(lambda: self._adopt(agent, session), wait_timeout=KERNEL_WAIT_S,
                                                   run_timeout=KERNEL_RUN_S)
        except Exception as exc:  # noqa: BLE001 - the kernel busy or held: said in the view, the new agent closed
            await agent.aclose()
            view.finish(f"The login finished, but the kernel was busy ({exc}): start agent {alias!r} again "
                        "(%acp start) to use it.", ok=False)
            return
        if not adopted:
            await agent.aclose()
            view.finish(f"The login finished, but agent {alias!r} was stopped or replaced meanwhile: start it again "
                        "to use the login.", ok=False)
        elif session is None:
            view.finish(f"The login finished and agent {alias!r} was started again, but it opened no session: "
                        f"{problem}", ok=False)
        else:
            view.finish(f"Logged in: agent {alias!r} was started again and session {session.id} opened on it "
                        "(%acp panel shows it).", ok=True)

    async def _open_session(self, agent: Any) -> tuple[Any, str]:
        """(a session on the new agent, or None and why not)."""
        try:
            return await agent.anew_session(), ""
        except RpcError as exc:
            if exc.auth_required:
                return None, ("it still asks to authenticate, so the login did not give it what it needs. "
                              f"%acp auth {self.method_id} runs the login again.")
            return None, exc.message
        except AcpError as exc:
            return None, exc.message

    def _adopt(self, agent: Any, session: Any) -> bool:
        """On the kernel thread: the new agent takes the old one's place (which is closed), with its session."""
        agents = self.runner.agents
        if agents.agents.get(self.entry.alias) is not self.entry:
            return False
        current = agents.current_alias  # adopt makes the new agent current: another agent used since stays so
        agents.agents.pop(self.entry.alias)
        agents.close_entry(self.entry, "started again after a terminal login")
        entry = agents.adopt(self.entry.alias, agent, self.entry.launch, self.entry.env_names)
        entry.own_kernel_tools = self.entry.own_kernel_tools
        if session is not None:
            self.runner.open(entry, session, show=False)
        if current is not None and current != entry.alias and current in agents.agents:
            agents.use(current)
        return True
