"""Branches in the magics: a ``%%acp`` cell run again opens a branch, ``%acp branches``, ``%acp checkout``, and
the ``%%acp --models`` cell (a branch sweep whose answers become branches).

Which cell: the cell id JupyterLab and Notebook 7 send in the execute request's metadata (``cellId``), else
the cell's ``--cell NAME``; a cell with neither cannot be recognised when run again, so it appends. A cell whose
turn is on the current branch of its session's conversation (``branching.Conversation``), run again with
``AcpMagics.rerun = "branch"`` (the default), answers from the checkpoint just before that turn on a new
branch, which becomes current (the agent's session in the magics); ``"append"`` sends it at the end, as
before, and takes no checkpoints. Each cell's turn view shows its branch line in its header (widgets/chat.py),
published again whenever the current branch changes, so cells on another branch say so until run again.

Given the Runner's registry and a few of its settings and operations as callables, so it reads the current
ones (the Runner is at its method budget). Threads: the kernel thread, like every command.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.display import display

from ..branch_sweeps import branch_sweep
from .. import _loop
from ..branching import Conversation, release_checkpoints, saved_tree
from ..errors import AcpError
from ..session import Session
from ..widgets.branches import branches_forms
from ..widgets.chat import branch_outputs_sent, output_replaced
from . import grammar as g
from .records import SessionRecord, notebook_path, read_notebook_records
from .registry import AgentEntry, NotebookAgents
from .resume import reopen
from .store import open_store

__all__ = ["BranchCommands", "cell_id"]


def cell_id(shell: Any) -> str | None:
    """The running cell's id from the execute request (JupyterLab, Notebook 7), or None where it is not sent."""
    kernel = getattr(shell, "kernel", None)
    get_parent = getattr(kernel, "get_parent", None)
    parent = get_parent("shell") if callable(get_parent) else None
    metadata = parent.get("metadata") if isinstance(parent, dict) else None
    found = metadata.get("cellId") if isinstance(metadata, dict) else None
    return found if isinstance(found, str) and found else None


class BranchCommands:
    """What the magics do about branches (see the module docstring)."""

    def __init__(self, agents: NotebookAgents, magics: Any, *, timeout: Callable[[], float],
                 open_session: Callable[..., None]) -> None:
        self.agents = agents
        self.magics = magics
        self._timeout = timeout
        self._open = open_session
        # Records of the sessions of conversations restored after a restart, by session id: checkout reopens them.
        self._recorded: dict[str, SessionRecord] = {}

    # --- the conversation of a session --------------------------------------------------------
    def conversation(self, session: Session) -> Conversation:
        """The conversation ``session`` carries a branch of; a new one (named as its record says) otherwise."""
        if session.branch is not None:
            return session.branch.conversation
        record = self.agents.record_of(session.id)
        name = str((record.branch or {}).get("name") or "main") if record is not None else "main"
        return Conversation(session, name=name)

    def release_checkpoints(self, entry: AgentEntry) -> int:
        """Before ``entry``'s agent stops (%acp stop): the checkpoint sessions its open sessions took are deleted or
        closed on the agent (branching.release_checkpoints); how many. An agent that cannot answer keeps them."""
        released = 0
        sessions = list(entry.sessions.values())
        for session in sessions:
            if session.branch is None or session.closed:
                continue
            try:
                released += _loop.run_sync(release_checkpoints(session, sessions), self._timeout(),
                                           what="letting go of the checkpoints")
            except (AcpError, TimeoutError):
                continue
        return released

    # --- after a restart ------------------------------------------------------------------------
    def restore(self, session: Session, record: SessionRecord, notebook: str | None = None) -> None:
        """``session`` was just reopened from ``record`` (%acp resume): the conversation it carried comes back from
        what the saved notebook, the session store and this kernel recorded, its other branches listed (and
        reopened when checked out). Nothing when it carried no branched conversation, or carries one already."""
        if session.branch is not None or not isinstance((record.branch or {}).get("conversation"), str):
            return
        records = [*self._records_seen(notebook), record]
        current, others = saved_tree(records, record.session_id)
        if current is None:
            return
        Conversation.restored(session, current, others, str(record.branch["conversation"]))  # type: ignore[index]
        by_id = {r.session_id: r for r in sorted(records, key=lambda r: r.at)}
        for branch in others:
            found = by_id.get(branch.session_id)
            # A parent recorded before its conversation branched: reopened as the same agent's session by its id.
            self._recorded[branch.session_id] = found or dataclasses.replace(
                record, session_id=branch.session_id, title=branch.title, branch=None)

    def _records_seen(self, notebook: str | None) -> list[SessionRecord]:
        """This kernel's records, the saved notebook's, and the session store's for this notebook (or folder)."""
        shell = getattr(self.magics, "shell", None)
        path = Path(notebook).expanduser() if notebook else notebook_path(getattr(shell, "user_ns", None))
        found = list(self.agents.records())
        if path is not None and path.is_file():
            with contextlib.suppress(OSError, ValueError):
                found += read_notebook_records(path)
        store = open_store()
        if store is not None:
            rows = store.sessions(notebook=str(path)) if path is not None else store.sessions(workdir=os.getcwd())
            found += [row.record for row in rows]
        return found

    def _revive(self, conversation: Conversation, name: str, entry: AgentEntry) -> None:
        """Reopen the session of a branch recorded before a restart, so it can be checked out."""
        saved = conversation.saved_branch(name)
        if saved is None:
            return
        record = self._recorded.get(saved.session_id)
        if record is None:
            raise UsageError(f"%acp checkout: branch {name!r} was recorded, but not its session {saved.session_id}")
        owner = self.agents.agents.get(record.alias) or entry
        session, _how = reopen(owner.agent, record, self._timeout(), gone=self.agents.mark_gone)
        conversation.revive(name, session)

    def _cell(self, command: g.CellPrompt) -> str | None:
        return command.cell or cell_id(getattr(self.magics, "shell", None))

    def _where(self) -> str:
        count = getattr(getattr(self.magics, "shell", None), "execution_count", None)
        return f"In [{count}]" if isinstance(count, int) else ""

    # --- a %%acp cell --------------------------------------------------------------------------
    def session_for(self, entry: AgentEntry, command: g.CellPrompt) -> Session:
        """The session the cell's turn goes to: the current one, or a new branch when the cell is run again."""
        session = self.agents.session_of(entry)
        conversation = self.conversation(session)
        branching = self.magics.rerun == "branch"
        cell = self._cell(command)
        # A cell with no identity can never be recognised when run again: its turn needs no checkpoint.
        session.checkpoints = branching and cell is not None
        if cell is not None:
            self._outputs_replaced(conversation, cell)
        index = conversation.position(cell) if cell is not None and branching else None
        if index is None:
            return session
        branch = conversation.branch_at(index, timeout=self._timeout())
        self.agents.touch(entry, session)  # its record now names the conversation, to be listed after a restart
        self._open(entry, branch.session, show=False, title_hint=session.display_title)
        branch.session.checkpoints = True
        return branch.session

    @staticmethod
    def _outputs_replaced(conversation: Conversation, cell: str) -> None:
        """The cell runs again: the outputs of its earlier turns, on any branch, are gone, so their views stop
        following the branch before it changes (an update would name an output no longer there)."""
        for branch in conversation.branches:
            for turn, key in zip(list(branch.turns), list(branch.keys)):
                if key == cell:
                    output_replaced(turn)

    def started(self, session: Session, turn: Any, command: g.CellPrompt) -> None:
        """The cell's turn was started: it joins the current branch (its view's header shows which)."""
        conversation = self.conversation(session)
        conversation.record(turn, self._cell(command), self._where())

    def sweep(self, entry: AgentEntry, command: g.CellPrompt, prompt: str) -> Any:
        """``%%acp --models A,B``: the prompt to each model from the current point (``acpnb.branch_sweep``); each
        answer becomes a branch of the conversation (named after its model), the current branch is unchanged."""
        session = self.agents.session_of(entry)
        conversation = self.conversation(session)
        agents = {alias: e.agent for alias, e in self.agents.agents.items()}
        result = branch_sweep(session, prompt, list(command.models), agents=agents,
                              turn_timeout=self.magics.turn_timeout or None)
        point = len(conversation.current.turns)
        before = {alias: e.session for alias, e in self.agents.agents.items()}
        for model, branch_session in result.sessions.items():
            turn = branch_session.turns[-1] if branch_session.turns else None
            owner = self.agents.entry_of(branch_session) or entry
            self._open(owner, branch_session, show=False, title_hint=session.display_title)  # recorded, resumable
            how = "forked" if branch_session.agent is session.agent else "handed over, not forked"
            branch = conversation.add_branch(branch_session, fork_point=point, how=f"{how} for {model}",
                                             name=model, make_current=False)
            if turn is not None:
                conversation.record_on(branch, turn, self._cell(command), self._where())
        for alias, previous in before.items():  # each agent keeps the session it had; the current branch goes on
            owner = self.agents.agents.get(alias)
            if owner is not None and previous is not None and owner.session is not previous:
                self._open(owner, previous, show=False)
        display(result)
        return result

    # --- commands -------------------------------------------------------------------------------
    def list_branches(self, command: g.Branches) -> None:
        entry = self.agents.entry(command.alias)
        conversation = self.conversation(self.agents.session_of(entry))
        display(branches_forms(conversation.branches, conversation.current.name, conversation.saved_branches), raw=True)

    def checkout(self, command: g.Checkout) -> None:
        entry = self.agents.entry(command.alias)
        conversation = self.conversation(self.agents.session_of(entry))
        self._revive(conversation, command.branch, entry)
        try:
            branch = conversation.branch(command.branch)
        except KeyError:
            names = ", ".join(b.name for b in conversation.branches)
            raise UsageError(f"%acp checkout: no branch {command.branch!r} in this conversation (branches: {names}; "
                             "%acp branches lists them)") from None
        conversation.checkout(branch.name)
        owner = self.agents.entry_of(branch.session) or entry  # a sweep's branch may be another agent's session
        self.agents.use(owner.alias)
        self._open(owner, branch.session, show=False)
        self.agents.touch(owner, branch.session)
        branch_outputs_sent(self._timeout())  # the cells on the other branch say so before this cell ends
        turns = len(branch.turns)
        print(f"Now on branch {branch.name} ({branch.describe()}, {turns} {'turn' if turns == 1 else 'turns'}, "
              f"session {branch.session.id}); the next %%acp cells continue it, and cells on other branches say so.")
