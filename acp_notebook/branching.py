"""Conversations shaped like a notebook: a checkpoint before each turn, branches opened from them, handovers.

In a notebook a cell's output should depend on the cells above it, not on cells run later. So a session
whose ``checkpoints`` is on keeps, before each prompt, the conversation as it stood (``take_checkpoint``):
a ``session/fork`` of the session taken just before the prompt goes (no kernel tools: it is never
prompted itself), where the agent advertises fork; otherwise the exchanges above (prompts, replies, tool
calls with their results), to be handed over. A ``Conversation`` is the tree of branches such sessions
make: each ``Branch`` is a live session and the turns it carries (shared with its parent up to where it
was opened). ``branch_at(i)`` opens a new branch from the checkpoint of the current branch's turn ``i``:
a fork of that checkpoint (the checkpoint stays as it was, so the same point can be branched from again),
or a new session whose first prompt carries the conversation above, marked "handed over, not forked"
(``Handover``; its prompt's ``_meta`` says so under ``HANDOVER_META``). The magics map cells to turns
(magics/branches.py); this module knows nothing of Jupyter.

Threads: ``take_checkpoint`` and the opening of a branch run on the background loop thread; a
Conversation's branches and current branch are changed on the caller's thread (the kernel thread for the
magics) under its lock, and read (``state_of``, ``branches``) on any thread. Turns are told of a change
of the current branch on the loop thread (``Turn.note_branch_change``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import _loop
from ._facade import twins
from ._visible import visible
from .errors import AcpError

if TYPE_CHECKING:
    from .session import Session
    from .turn import ToolCall, Turn

__all__ = ["HANDOVER_META", "Branch", "BranchState", "Checkpoint", "Conversation", "Exchange", "Handover",
           "SavedBranch", "exchanges_of", "handover_text", "proxy_handover", "release_checkpoints", "saved_tree", "take_checkpoint"]

HANDOVER_META = "acp-notebook/handover"  # the _meta key of a prompt that carries a conversation handed over
HANDOVER_LIMIT_CHARS = 24_000  # the conversation handed over, at most; the oldest exchanges go first, said so
REPLY_LIMIT_CHARS = 2_000  # of each reply handed over
TOOL_LIMIT_CHARS = 300  # of each tool call's summary (its title, status and result)
NOT_FORKED = "handed over, not forked"


# --- what a conversation held ---------------------------------------------------------------------
@dataclass(frozen=True)
class Exchange:
    """One turn as text: the prompt, the reply, and each tool call summarised with its result."""

    prompt: str
    reply: str
    tools: tuple[str, ...] = ()


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _prompt_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    return "\n".join(str(b.get("text", "")) for b in prompt if isinstance(b, Mapping) and b.get("type") == "text")


def _tool_result(call: ToolCall) -> str:
    if call.raw_output is not None:
        return call.raw_output if isinstance(call.raw_output, str) else json.dumps(call.raw_output, default=str)
    texts = [str((c.get("content") or {}).get("text", "")) for c in call.content if c.get("type") == "content"]
    return " ".join(t for t in texts if t)


def tool_summary(call: ToolCall) -> str:
    """A tool call in one line: what it was, how it ended, what it gave (capped)."""
    name = call.title or call.name or call.id
    result = " ".join(_tool_result(call).split())
    return _clip(f"{name} ({call.status or 'no status'})" + (f": {result}" if result else ""), TOOL_LIMIT_CHARS)


def exchanges_of(turns: Iterable[Turn]) -> tuple[Exchange, ...]:
    """The turns as exchanges. A turn whose prompt carried a handover stands on that conversation: what it was handed
    replaces the exchanges before it (a branch's turns begin with those it shares with its parent)."""
    made: list[Exchange] = []
    for turn in turns:
        if turn.handover is not None:
            made = list(turn.handover.exchanges)
        made.append(Exchange(_prompt_text(turn.prompt), turn.text, tuple(tool_summary(c) for c in turn.tool_calls)))
    return tuple(made)


def handover_text(exchanges: Sequence[Exchange], source: str, limit: int = HANDOVER_LIMIT_CHARS) -> tuple[str, bool]:
    """The text that hands ``exchanges`` to an agent that did not see them, and whether it was cut: the latest
    exchanges that fit in ``limit`` characters (each reply and tool summary capped), the others counted."""
    parts: list[str] = []
    used = 0
    for number, exchange in reversed(list(enumerate(exchanges, start=1))):
        lines = [f"[{number}] User: {exchange.prompt}", f"[{number}] Assistant: {_clip(exchange.reply, REPLY_LIMIT_CHARS)}"]
        lines += [f"[{number}] Tool call: {tool}" for tool in exchange.tools]
        block = "\n".join(lines)
        if used + len(block) > limit and parts:
            break
        parts.insert(0, block)
        used += len(block)
    left_out = len(exchanges) - len(parts)
    head = (f"This conversation was handed over to you from {source} after {len(exchanges)} "
            f"{'turn' if len(exchanges) == 1 else 'turns'}; you did not see it happen. Here it is")
    head += f" (the {left_out} earliest {'turn is' if left_out == 1 else 'turns are'} left out to keep it short):" \
        if left_out else ":"
    tail = "End of the conversation handed over. The user's next message follows."
    return visible("\n\n".join([head, *parts, tail])), left_out > 0


@dataclass(frozen=True)
class Handover:
    """A conversation given to a session that did not have it, in the text of its first prompt."""

    exchanges: tuple[Exchange, ...]
    source: str  # who had it: an agent's name, or agent:model
    reason: str = NOT_FORKED

    @property
    def turns(self) -> int:
        return len(self.exchanges)

    def text(self) -> str:
        return handover_text(self.exchanges, self.source)[0]

    @property
    def capped(self) -> bool:
        return handover_text(self.exchanges, self.source)[1]

    def describe(self) -> str:
        turns = f"{self.turns} {'turn' if self.turns == 1 else 'turns'}"
        return f"handed over from {self.source} after {turns}" + (", not forked" if self.reason == NOT_FORKED else "")

    def meta(self) -> dict[str, Any]:
        """The prompt's ``_meta`` that tells a client (or a recording's reader) this turn carries a handover."""
        return {HANDOVER_META: {"from": self.source, "turns": self.turns, "reason": self.reason,
                                "capped": self.capped}}


def proxy_handover(result: Any) -> str | None:
    """"handed over from a:model after N turns" when a prompt's result says (in ``_meta[HANDOVER_META]``) that the
    proxy handed the conversation over to the agent that answered it (proxy/handover.py), else None. Built from
    the marker's fields, not from its description: the text is the client's own, the values spelt out."""
    meta = result.get("_meta") if isinstance(result, Mapping) else None
    marker = meta.get(HANDOVER_META) if isinstance(meta, Mapping) else None
    if not isinstance(marker, Mapping) or not isinstance(marker.get("from"), str):
        return None
    turns = marker.get("turns")
    count = f" after {turns} {'turn' if turns == 1 else 'turns'}" if isinstance(turns, int) and \
        not isinstance(turns, bool) else ""
    capped = " (the earliest left out)" if marker.get("capped") is True else ""
    return visible(f"handed over from {marker['from']}{count}{capped}")


# --- checkpoints (loop thread) -----------------------------------------------------------------------
@dataclass(frozen=True)
class Checkpoint:
    """The conversation just before a turn: a fork of its session taken before the prompt went (never prompted
    itself), or, where there is none, the exchanges above; ``note`` says why there is no fork."""

    fork: Session | None
    exchanges: tuple[Exchange, ...]
    note: str = ""


def _conversation_so_far(session: Session) -> tuple[Exchange, ...]:
    if session.turns:  # the first turn of a session handed a conversation carries it (exchanges_of reads it)
        return exchanges_of(list(session.turns))
    return session.handover.exchanges if session.handover is not None else ()


async def take_checkpoint(session: Session) -> Checkpoint:
    """A Checkpoint of ``session`` as it stands (loop thread; before a prompt is sent). Never raises but for
    cancellation: a fork the agent refuses leaves the exchanges, saying why."""
    exchanges = _conversation_so_far(session)
    if not session.agent.connection.supports("fork"):
        return Checkpoint(None, exchanges, f"agent '{session.agent.name}' cannot fork sessions")
    try:
        fork = await session.afork(kernel_tools=False)
        fork.checkpoint_of = session.id
        return Checkpoint(fork, exchanges)
    except asyncio.CancelledError:
        raise
    except AcpError as exc:
        return Checkpoint(None, exchanges, f"session/fork failed: {str(exc).splitlines()[0]}")


async def _copy_settings(source: Session, target: Session) -> None:
    """The source's option values on a session opened fresh for a handover, where offered (best effort: a value
    the new session does not take keeps its own)."""
    for option in list(source.config):
        mine = target.config.get(option.id)
        if option.read_only or mine is None or mine.read_only or mine.value == option.value:
            continue
        try:
            target.check_value(option.id, option.value)
            await target.aset(option.id, option.value)
        except AcpError:
            continue


def _live_fork(checkpoint: Checkpoint | None) -> bool:
    """The checkpoint has a fork that can still be forked (not released when its session closed)."""
    return checkpoint is not None and checkpoint.fork is not None and not checkpoint.fork.closed


async def release_checkpoints(session: Session, closing: Iterable[Session] = ()) -> int:
    """Let go of the checkpoint sessions taken before the turns of ``session``'s branch (those it shares with its
    parent included) that no other open branch of its conversation holds: deleted on the agent where it offers
    session/delete, else closed where it offers session/close (left alone otherwise); how many were let go. Runs
    when the session closes (``Session.checkpoint_release``) and before its agent stops (%acp stop); a failure
    to let one go is skipped (the session's own close goes on). ``closing``: sessions closing with it (the other
    sessions of an agent being stopped), whose branches keep nothing."""
    going = {id(s) for s in closing}
    branch = session.branch
    turns = {id(t): t for t in [*(branch.turns if branch is not None else ()), *session.turns]}
    if branch is not None:
        for other in branch.conversation.branches:
            if other is not branch and not other.session.closed and id(other.session) not in going:
                for turn in other.turns:
                    turns.pop(id(turn), None)  # still needed: the other branch can be branched from there
    connection = session.agent.connection
    how = "delete" if connection.supports("delete") else "close" if connection.supports("close") else None
    released = 0
    for turn in turns.values():
        checkpoint: Checkpoint | None = turn.checkpoint
        if how is None or not _live_fork(checkpoint) or connection.state != "running":
            continue
        fork = checkpoint.fork  # type: ignore[union-attr]
        try:
            await (fork.adelete() if how == "delete" else fork.aclose())  # type: ignore[union-attr]
        except AcpError:
            continue
        released += 1
    return released


async def open_from(checkpoint: Checkpoint | None, source: Session, exchanges: Sequence[Exchange]) -> Session:
    """A live session that starts where ``checkpoint`` is: a fork of its fork, else a new session of the source's
    agent that will be handed ``exchanges`` (the checkpoint's, or those given) in its first prompt."""
    if _live_fork(checkpoint):
        return await checkpoint.fork.afork(permission=source.permission)  # type: ignore[union-attr]
    session = await source.agent.anew_session(source.cwd)
    session.permission = source.permission
    await _copy_settings(source, session)
    session.handover = Handover(tuple(checkpoint.exchanges if checkpoint is not None else exchanges),
                                source.agent.name)
    return session


# --- branches ------------------------------------------------------------------------------------------
@dataclass
class Branch:
    """One line of a conversation: its live session and the turns it carries, in order (the first
    ``fork_point`` shared with its parent), with the key each was run under (a notebook cell) and a label."""

    conversation: Conversation
    name: str
    session: Session
    turns: list[Turn] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # where each turn was run, for listings ("In [7]")
    parent: str | None = None
    fork_point: int = 0
    how: str = "root"  # root, forked, handed over, not forked, or a sweep's "forked for MODEL"
    created_at: float = field(default_factory=time.time)
    parent_session: str | None = None  # the id of the parent branch's session, which records keep
    saved: SavedBranch | None = None  # what a saved notebook kept of it, for a branch reopened after a restart
    # Turns of its line made before a restart (not in memory, so not in ``turns``): counted where turns are shown.
    base: int = 0
    shown_fork: int | None = None  # where it left its parent, as recorded (a branch reopened after a restart)

    def holds(self, turn: Turn) -> bool:
        return any(t is turn for t in self.turns)

    @property
    def turn_count(self) -> int:
        """Its turns, those made before a restart (``base``) included."""
        return self.base + len(self.turns)

    @property
    def fork_at(self) -> int:
        """After how many turns of its parent it began, those made before a restart included (``fork_point`` counts
        the turns in memory only: where ``turns`` is cut)."""
        return self.shown_fork if self.shown_fork is not None else self.base + self.fork_point

    def first_own(self) -> tuple[str, str]:
        """(where, prompt) of the first turn made on this branch: as saved before a restart, else in memory;
        ("", "") if none."""
        if self.saved is not None and (self.saved.cell or self.saved.prompt):
            return self.saved.cell, self.saved.prompt
        own = self.own_turns
        if not own:
            return "", ""
        first = len(self.turns) - len(own)
        return self.labels[first] if len(self.labels) > first else "", _short(exchanges_of(own[:1])[-1].prompt)

    def record(self) -> dict[str, Any]:
        """The branch as a session's record keeps it (plain JSON), so a saved notebook can list it again after a
        restart (``saved_tree``): its place in the tree, its conversation, its first own turn, how many turns."""
        cell, prompt = self.first_own()
        return {"name": self.name, "parent": self.parent, "fork_point": self.fork_at, "how": self.how,
                "conversation": self.conversation.id, "parent_session": self.parent_session,
                "turns": self.turn_count, "cell": cell, "prompt": prompt, "at": self.created_at}

    @property
    def own_turns(self) -> list[Turn]:
        """The turns made on this branch (after the point it shares with its parent)."""
        return self.turns[self.fork_point:]

    def describe(self) -> str:
        where = f" from {self.parent} after {self.fork_at} {'turn' if self.fork_at == 1 else 'turns'}" \
            if self.parent is not None else ""
        return f"branch {self.name}{where}" + (f" ({self.how})" if self.how != "root" else "")


def _short(prompt: str, limit: int = 60) -> str:
    flat = " ".join(prompt.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True)
class SavedBranch:
    """A branch as a saved notebook's session records keep it (``Branch.record``): listed after a restart, its
    session reopened by id when it is checked out."""

    name: str
    session_id: str
    parent: str | None = None
    fork_point: int = 0
    how: str = "root"
    turns: int = 0
    cell: str = ""
    prompt: str = ""
    title: str | None = None
    at: float = 0.0
    parent_session: str | None = None


def _saved(session_id: str, data: Mapping[str, Any], title: str | None, name: str | None = None) -> SavedBranch:
    def text(key: str) -> str:
        value = data.get(key)
        return value if isinstance(value, str) else ""

    def number(key: str, kind: type) -> Any:
        value = data.get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else kind()

    return SavedBranch(name or text("name") or "main", session_id, text("parent") or None,
                       int(number("fork_point", int)),
                       text("how") or "root", int(number("turns", int)), text("cell"), text("prompt"), title,
                       float(number("at", float)), text("parent_session") or None)


def saved_tree(records: Iterable[Any], current_id: str) -> tuple[SavedBranch | None, list[SavedBranch]]:
    """The branches of the conversation session ``current_id`` carried, from session records (``session_id``,
    ``title``, ``at`` and ``branch``: ``Branch.record``), newest record of each session first or not: (that
    session's branch, the conversation's other branches). A parent named by a branch but recorded before the
    conversation had two branches (its record has no branch) is found by its session id."""
    latest: dict[str, Any] = {}
    for record in records:
        known = latest.get(record.session_id)
        if known is None or record.at >= known.at:
            latest[record.session_id] = record
    mine = latest.get(current_id)
    data = getattr(mine, "branch", None)
    if not isinstance(data, Mapping) or not isinstance(data.get("conversation"), str):
        return None, []
    found: dict[str, SavedBranch] = {}
    for session_id, record in latest.items():
        branch = record.branch
        if isinstance(branch, Mapping) and branch.get("conversation") == data["conversation"]:
            found[session_id] = _saved(session_id, branch, record.title)
    for branch in list(found.values()):
        parent = branch.parent_session
        if parent is not None and parent not in found and branch.parent is not None:
            record = latest.get(parent)
            found[parent] = _saved(parent, {}, getattr(record, "title", None), name=branch.parent)
    current = found.pop(current_id)
    by_name: dict[str, SavedBranch] = {}
    for branch in sorted(found.values(), key=lambda b: b.at):
        if branch.name != current.name:
            by_name[branch.name] = branch  # a name recorded twice: the later session wins
    return current, list(by_name.values())


@dataclass(frozen=True)
class BranchState:
    """Where a turn stands: on branch ``name`` (made ``how``), which is (``on_current``) the current branch or not."""

    name: str
    current: str
    on_current: bool
    how: str
    parent: str | None
    fork_point: int
    branches: int  # how many branches the conversation has
    handover: str | None = None  # Handover.describe() of the turn, when its prompt carried one


class Conversation:
    """The branches of one notebook conversation, one of them current (see the module docstring)."""

    def __init__(self, session: Session, *, name: str = "main", id: str | None = None,
                 saved: Iterable[SavedBranch] = ()) -> None:
        self._lock = threading.Lock()
        self.id = id or uuid.uuid4().hex  # kept in the records of its sessions, to find its branches again
        root = Branch(self, name, session)
        self._branches: dict[str, Branch] = {name: root}
        # Branches a saved notebook recorded, not reopened yet (``restored``).
        self._saved: dict[str, SavedBranch] = {b.name: b for b in saved if b.name != name}
        self.current = root
        self._adopt(root)

    @classmethod
    def restored(cls, session: Session, current: SavedBranch, others: Iterable[SavedBranch],
                 conversation_id: str) -> Conversation:
        """The conversation a reopened ``session`` carried before a restart (``saved_tree``): its branch current,
        the others listed and reopened when checked out (``revive``)."""
        conversation = cls(session, name=current.name, id=conversation_id, saved=others)
        root = conversation.current
        root.parent, root.shown_fork, root.how = current.parent, current.fork_point, current.how
        root.parent_session, root.created_at, root.saved, root.base = current.parent_session, current.at, current, \
            current.turns
        return conversation

    @property
    def size(self) -> int:
        """How many branches it has, those recorded and not reopened yet included."""
        with self._lock:
            return len(self._branches) + len(self._saved)

    @property
    def saved_branches(self) -> list[SavedBranch]:
        with self._lock:
            return list(self._saved.values())

    def saved_branch(self, name: str) -> SavedBranch | None:
        with self._lock:
            return self._saved.get(name)

    def revive(self, name: str, session: Session) -> Branch:
        """A recorded branch whose session was reopened (``session``): a live branch again, not current yet."""
        with self._lock:
            saved = self._saved.pop(name)
            branch = Branch(self, name, session, parent=saved.parent, how=saved.how, created_at=saved.at,
                            parent_session=saved.parent_session, saved=saved, base=saved.turns,
                            shown_fork=saved.fork_point)
            self._branches[name] = branch
        self._adopt(branch)
        return branch

    def _adopt(self, branch: Branch) -> None:
        branch.session.checkpoints = True
        branch.session.checkpointer = take_checkpoint
        branch.session.checkpoint_release = release_checkpoints
        branch.session.branch = branch

    @property
    def branches(self) -> list[Branch]:
        with self._lock:
            return list(self._branches.values())

    def branch(self, name: str) -> Branch:
        with self._lock:
            found = self._branches.get(name)
        if found is None:
            raise KeyError(f"no branch {name!r}; branches: {', '.join([*self._branches, *self._saved])}")
        return found

    def record(self, turn: Turn, key: str | None = None, label: str = "") -> Branch:
        """``turn`` was started on the current branch (under ``key``, e.g. a notebook cell's id)."""
        with self._lock:
            branch = self.current
            branch.turns.append(turn)
            branch.keys.append(key)
            branch.labels.append(label)
        turn.branch = branch
        return branch

    def record_on(self, branch: Branch, turn: Turn, key: str | None = None, label: str = "") -> None:
        """``turn`` was made on ``branch`` (not the current one: a branch sweep's answer)."""
        with self._lock:
            branch.turns.append(turn)
            branch.keys.append(key)
            branch.labels.append(label)
        turn.branch = branch

    def position(self, key: str) -> int | None:
        """Where the current branch holds the turn run under ``key`` (its latest), or None."""
        with self._lock:
            keys = self.current.keys
            return next((i for i in range(len(keys) - 1, -1, -1) if keys[i] == key), None)

    def state_of(self, turn: Turn) -> BranchState | None:
        with self._lock:
            current, count = self.current, len(self._branches) + len(self._saved)
        branch = current if current.holds(turn) else turn.branch
        if branch is None:
            return None
        handover = turn.handover.describe() if turn.handover is not None else proxy_handover(turn.result)
        return BranchState(branch.name, current.name, branch is current, branch.how, branch.parent,
                           branch.fork_at, count, handover)

    def _new_name(self) -> str:
        number = len(self._branches) + len(self._saved) + 1
        while f"b{number}" in self._branches or f"b{number}" in self._saved:
            number += 1
        return f"b{number}"

    def add_branch(self, session: Session, *, fork_point: int, how: str, name: str | None = None,
                   make_current: bool = True) -> Branch:
        """A branch carried by ``session``, sharing the current branch's first ``fork_point`` turns."""
        with self._lock:
            parent = self.current
            chosen = name if name is not None and name not in self._branches and name not in self._saved \
                else self._new_name()
            branch = Branch(self, chosen, session, list(parent.turns[:fork_point]), list(parent.keys[:fork_point]),
                            list(parent.labels[:fork_point]), parent=parent.name, fork_point=fork_point, how=how,
                            parent_session=parent.session.id, base=parent.base)
            self._branches[chosen] = branch
            if make_current:
                self.current = branch
        self._adopt(branch)
        if make_current:
            self._tell_turns()
        return branch

    async def _branch_at(self, index: int) -> Branch:
        """A new current branch that starts just before the current branch's turn ``index``: its session forked
        from that turn's checkpoint, else handed the conversation above ("handed over, not forked")."""
        with self._lock:
            source = self.current
            if not 0 <= index < len(source.turns):
                raise IndexError(f"branch {source.name} has {len(source.turns)} turns, not a turn {index}")
            turn = source.turns[index]
        checkpoint: Checkpoint | None = turn.checkpoint
        session = await open_from(checkpoint, source.session, exchanges_of(source.turns[:index]))
        how = "forked" if _live_fork(checkpoint) else NOT_FORKED
        return self.add_branch(session, fork_point=index, how=how)

    branch_at, abranch_at = twins(_branch_at, what="opening a branch",
                                  default_timeout=lambda self, *_a, **_k: _branch_timeout(self))

    def checkout(self, name: str) -> Branch:
        """Make branch ``name`` the current one (its session carries the next turns)."""
        branch = self.branch(name)
        if branch.session.closed:
            raise AcpError(f"branch {name}'s session {branch.session.id} is closed",
                           hint="Its agent was stopped or the session closed; run its cells again on another branch.")
        with self._lock:
            self.current = branch
        self._tell_turns()
        return branch

    def _tell_turns(self) -> None:
        turns = {id(t): t for b in self.branches for t in b.turns}
        for turn in turns.values():
            _loop.call_soon(turn.note_branch_change)


def _branch_timeout(conversation: Conversation) -> float | None:
    timeout = conversation.current.session.agent.timeout
    return None if timeout is None else timeout * 3  # a fork, and for a handover a new session and its settings

