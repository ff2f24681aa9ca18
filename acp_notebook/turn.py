"""Turn: one prompt and everything it produced, an object that exists before the prompt is sent.

``Session.start_turn(prompt)`` returns the Turn at once (status ``queued``); the session sends
it when earlier turns of the session are done. Views observe the turn itself
(``turn.observe(callback)``): no matching of updates to cells, no arming.

Lifecycle: queued -> working -> done | cancelled | error. ``turn.future`` (a
``concurrent.futures.Future``) resolves with the turn, or with its error, when it ends.

Memory: a long reply arrives as many small chunks, and a turn keeps what it was told. Plain
text chunks (``{"sessionUpdate", "content": {"type": "text", "text"}}`` and nothing else) are
kept as their text, joined in blocks, plus where each one ended (4 bytes a chunk), not as a
dict each; ``turn.updates`` rebuilds the list of update dicts from that when it is read. So
a turn's memory grows with the text it holds, not with the number of chunks it came in.

Threads: filled on the background loop thread only (updates in wire order, the answer to
``session/prompt``, permission decisions); observers are called there. Readers on other
threads see plain attributes, lists that are only ever appended to, and text buffers whose
reads see whole chunks.
"""

from __future__ import annotations

import concurrent.futures
import copy
import threading
import time
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._observers import Observers
from .state import Compaction, Notice

__all__ = ["KernelCall", "PermissionRecord", "TextBuffer", "ToolCall", "Turn", "TurnEvent"]

TurnStatus = Literal["queued", "working", "done", "cancelled", "error"]


@dataclass
class ToolCall:
    """A tool call merged from its ``tool_call`` and every ``tool_call_update`` since."""

    id: str
    title: str = ""
    kind: str | None = None
    status: str | None = None
    content: list[dict[str, Any]] = field(default_factory=list)
    locations: list[dict[str, Any]] = field(default_factory=list)
    raw_input: Any = None
    raw_output: Any = None
    # The tool's programmatic name (ACP v1's ``name``: "read_file", "mcp__kernel__run_code"...), where the
    # agent gives one; ``title`` is what a person reads.
    name: str | None = None
    updates: list[dict[str, Any]] = field(default_factory=list, repr=False)

    _FIELDS = {"title": "title", "kind": "kind", "status": "status", "content": "content",
               "locations": "locations", "rawInput": "raw_input", "rawOutput": "raw_output", "name": "name"}

    def merge(self, update: Mapping[str, Any]) -> None:
        """Fields present in the update replace ours; absent ones are unchanged (the protocol's rule)."""
        for wire, attr in self._FIELDS.items():
            if wire in update and update[wire] is not None:
                setattr(self, attr, copy.deepcopy(update[wire]))
        self.updates.append(dict(update))

    @property
    def diffs(self) -> list[dict[str, Any]]:
        return [c for c in self.content if c.get("type") == "diff"]


_PLAIN_CHUNK_KEYS = ("sessionUpdate", "content")
_PLAIN_CONTENT_KEYS = ("type", "text")
_TEXT_KINDS = ("agent_message_chunk", "agent_thought_chunk")
# Chunks joined into one string at a time: few enough to keep appends cheap, enough that the list
# of strings costs nothing next to the text.
_BLOCK_CHUNKS = 256


class TextBuffer:
    """Text that arrives in pieces, kept as a few large strings rather than one string per piece.

    Appended to on one thread while others read: ``_state`` (the joined blocks, the pieces since)
    is replaced whole when pieces are joined, never changed in place but for appending a piece,
    so a reader sees every piece exactly once."""

    __slots__ = ("_state", "length")

    def __init__(self) -> None:
        self._state: tuple[list[str], list[str]] = ([], [])
        self.length = 0

    def append(self, piece: str) -> None:
        blocks, parts = self._state
        parts.append(piece)
        self.length += len(piece)
        if len(parts) >= _BLOCK_CHUNKS:
            self._state = ([*blocks, "".join(parts)], [])

    def seal(self) -> None:
        """Join everything into one string (the turn ended: no point keeping the pieces apart)."""
        blocks, parts = self._state
        if parts or len(blocks) > 1:
            self._state = (["".join(blocks) + "".join(parts)], [])

    def value(self) -> str:
        blocks, parts = self._state
        return "".join(blocks) + "".join(parts) if parts else "".join(blocks)

    def __bool__(self) -> bool:
        return self.length > 0


class _ChunkRun:
    """Consecutive plain text chunks of one kind: where each ended in that kind's TextBuffer."""

    __slots__ = ("kind", "start", "ends")

    def __init__(self, kind: str, start: int) -> None:
        self.kind = kind
        self.start = start
        self.ends = array("I")  # 4 bytes a chunk; widened to 8 (below) past 4 GiB of text

    def note(self, end: int) -> None:
        if end > 0xFFFF_FFFF and self.ends.typecode == "I":
            self.ends = array("Q", self.ends)
        self.ends.append(end)

    def updates(self, text: str, ends: list[int]) -> list[dict[str, Any]]:
        made, start = [], self.start
        for end in ends:
            made.append({"sessionUpdate": self.kind, "content": {"type": "text", "text": text[start:end]}})
            start = end
        return made


def _plain_text_chunk(update: Mapping[str, Any], content: Any) -> bool:
    """A text chunk with nothing but its kind and text (in that key order): rebuilt exactly from its text."""
    return tuple(update) == _PLAIN_CHUNK_KEYS and type(content) is dict \
        and tuple(content) == _PLAIN_CONTENT_KEYS and type(content["text"]) is str


@dataclass
class PermissionRecord:
    tool_call: dict[str, Any]
    options: list[dict[str, Any]]
    chosen: str | None  # the option id, or None when the request was cancelled


@dataclass
class KernelCall:
    """One call the agent made to the notebook's kernel tools (the MCP server ``kernel``) during a turn,
    as the kernel saw it: not the agent's own report of it (that is among ``tool_calls``).

    ``tool``: list_variables, inspect_variable, run_code, notebook_history or propose_cell.
    ``status``: asking (run_code waits for the user's answer), running, held (run_code's code did not end
    when stopped and holds the kernel; it becomes done or failed when it ends), done, failed, refused (by the
    policy or the user), withdrawn (asked, and the turn or the agent's call was cancelled before an answer),
    proposed (propose_cell: a cell for the user to run, never run by the agent).
    ``outputs``: what came out, as MCP content (``{"type": "text", "text"}``, ``{"type": "image",
    "data", "mimeType"}``). ``decision``: how it was decided, in words. ``request``: the MCP call's identity
    (the bridge connection and the request id, e.g. "1:3"), which no other call of the session shares.
    """

    id: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    code: str = ""
    explanation: str = ""
    status: str = "running"
    outputs: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    decision: str = ""
    request: str = ""


@dataclass(frozen=True)
class TurnEvent:
    """What changed in a turn. ``kind``: status, update (data: the update dict), permission
    (data: the PermissionRecord), elicitation (data: the ElicitationRecord), kernel (data: the
    KernelCall that was added or changed), branch (data: the turn's Branch; the conversation's current
    branch changed, see ``Turn.branch_state``), done."""

    kind: str
    turn: Turn
    data: Any = None


def _quota_usage(result: Mapping[str, Any]) -> dict[str, int]:
    """Token counts that gemini-cli reports only in the prompt result's ``_meta.quota``, in the usage field's names."""
    meta = result.get("_meta")
    quota = meta.get("quota") if isinstance(meta, Mapping) else None
    counts = quota.get("token_count") if isinstance(quota, Mapping) else None
    if not isinstance(counts, Mapping):
        return {}
    names = {"input_tokens": "inputTokens", "output_tokens": "outputTokens", "total_tokens": "totalTokens",
             "thought_tokens": "thoughtTokens"}
    usage = {wire: counts[key] for key, wire in names.items() if isinstance(counts.get(key), int)}
    if "totalTokens" not in usage and {"inputTokens", "outputTokens"} <= usage.keys():
        usage["totalTokens"] = usage["inputTokens"] + usage["outputTokens"]
    return usage


class Turn:
    """One prompt and everything the agent streamed for it, in arrival order.

    ``session`` is the Session it belongs to (None for a turn built by hand); ``permission`` and
    ``elicitation`` are this turn's own policies, which win over the session's and the agent's.
    """

    def __init__(self, prompt: Any, session_id: str, model: Any = None, *, session: Any = None,
                 permission: Any = None, elicitation: Any = None) -> None:
        self.prompt = prompt
        self.attachments: list[Any] = []  # attachments.Attachment: the objects the prompt carries (attach=)
        self.session_id = session_id
        self.session = session
        self.model = model
        self.permission = permission
        self.elicitation = elicitation
        self.status: TurnStatus = "queued"
        # Every update in arrival order: dicts, and _ChunkRuns standing for runs of plain text chunks.
        self._records: list[dict[str, Any] | _ChunkRun] = []
        self._update_count = 0
        self.tool_calls_by_id: dict[str, ToolCall] = {}
        self.plan: list[dict[str, Any]] = []
        self.permissions: list[PermissionRecord] = []
        self.elicitations: list[Any] = []  # elicitation.ElicitationRecord: the agent's forms and their answers
        self.kernel_calls: list[KernelCall] = []  # what the agent did through the kernel tools, in order
        self.notices: list[Notice] = []  # the agent's notices while the turn ran, in order
        self.compactions: list[Compaction] = []  # context compactions that began while it ran (shared with the state)
        self.usage: dict[str, Any] | None = None
        self.stop_reason: str | None = None
        self.error: BaseException | None = None
        self.result: dict[str, Any] | None = None
        self.created_at = time.time()
        self.started_at: float | None = None
        self.wall_started_at: float | None = None
        self.first_chunk_at: float | None = None
        self.ended_at: float | None = None
        self._text = TextBuffer()
        self._thoughts = TextBuffer()
        self.other_content: list[dict[str, Any]] = []
        # Branches of a conversation (acp_notebook/branching.py), plain data for views: the conversation just
        # before this turn was sent (a Checkpoint: a fork, or the exchanges to hand over), the Branch it was made
        # on, and the Handover its prompt carried when its session was given the conversation above instead.
        self.checkpoint: Any = None
        self.branch: Any = None
        self.handover: Any = None
        self.done = threading.Event()
        self.future: concurrent.futures.Future[Turn] = concurrent.futures.Future()
        self.future.set_running_or_notify_cancel()
        self._observers: Observers[TurnEvent] = Observers()

    def observe(self, callback: Any) -> Any:
        """Call ``callback(TurnEvent)`` on every change (on the loop thread; must not block).
        Returns the function that stops it."""
        return self._observers.add(callback)

    # --- reading ---------------------------------------------------------
    @property
    def text(self) -> str:
        return self._text.value()

    @property
    def thoughts(self) -> str:
        return self._thoughts.value()

    @property
    def updates(self) -> list[dict[str, Any]]:
        """Every ``session/update`` payload of the turn, in arrival order (a new list at each read: plain
        text chunks are stored as their text, see the module docstring)."""
        # The records (and each run's ends) first, the text after: a chunk's text is in its buffer
        # before its end is noted, so every chunk snapshotted here has its text.
        records = [(r, list(r.ends)) if isinstance(r, _ChunkRun) else (r, None) for r in list(self._records)]
        texts: dict[str, str] = {}
        made: list[dict[str, Any]] = []
        for record, ends in records:
            if isinstance(record, _ChunkRun):
                if record.kind not in texts:
                    buffer = self._text if record.kind == "agent_message_chunk" else self._thoughts
                    texts[record.kind] = buffer.value()
                made.extend(record.updates(texts[record.kind], ends or []))
            else:
                made.append(record)
        return made

    @property
    def update_count(self) -> int:
        """How many updates the turn received (``len(turn.updates)`` without building the list)."""
        return self._update_count

    @property
    def latest_thought(self) -> str:
        """The last non-empty line of the thoughts so far (what a live view shows while thinking)."""
        for line in reversed(self.thoughts.splitlines()):
            if line.strip():
                return line.strip()
        return ""

    @property
    def tool_calls(self) -> list[ToolCall]:
        return list(self.tool_calls_by_id.values())

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at

    @property
    def elapsed_s(self) -> float:
        """Seconds since the prompt was sent (so far, or in all once the turn ended); 0 while queued."""
        if self.started_at is None:
            return 0.0
        return (self.ended_at if self.ended_at is not None else time.perf_counter()) - self.started_at

    @property
    def ttft_s(self) -> float | None:
        """Seconds from sending the prompt to the first chunk of the reply."""
        if self.started_at is None or self.first_chunk_at is None:
            return None
        return self.first_chunk_at - self.started_at

    @property
    def cost(self) -> dict[str, Any] | None:
        return (self.usage or {}).get("cost")

    @property
    def finished(self) -> bool:
        return self.done.is_set()

    # --- filling (loop thread) ------------------------------------------
    def mark_sent(self) -> None:
        self.started_at = time.perf_counter()
        self.wall_started_at = time.time()
        self.status = "working"
        self._observers.emit(TurnEvent("status", self, self.status))

    def apply(self, update: Mapping[str, Any]) -> None:
        """One ``session/update`` payload for this turn. A dict that is not a plain text chunk is kept
        as it is (shared with the frame log): treat the dicts of ``turn.updates`` as read-only."""
        kind = update.get("sessionUpdate")
        self._update_count += 1
        if kind in _TEXT_KINDS:
            content = update.get("content") or {}
            if kind == "agent_message_chunk" and self.first_chunk_at is None:
                self.first_chunk_at = time.perf_counter()
            if content.get("type") == "text":
                buffer = self._text if kind == "agent_message_chunk" else self._thoughts
                start = buffer.length
                buffer.append(content.get("text") or "")
                if _plain_text_chunk(update, content):
                    self._note_chunk(kind, start, buffer.length)
                else:
                    self._records.append(update)  # type: ignore[arg-type]
            else:
                self._records.append(update)  # type: ignore[arg-type]
                if kind == "agent_message_chunk":
                    self.other_content.append(copy.deepcopy(dict(content)))
            self._observers.emit(TurnEvent("update", self, update))
            return
        self._records.append(update)  # type: ignore[arg-type]
        if kind in ("tool_call", "tool_call_update"):
            self.merge_tool_call(update)
        elif kind == "plan":
            self.plan = copy.deepcopy(list(update.get("entries") or []))
        elif kind == "notice":
            self.notices.append(Notice.from_update(update))
        elif kind == "usage_update":
            self.usage = {**(self.usage or {}), **{k: v for k, v in update.items() if k != "sessionUpdate"}}
        self._observers.emit(TurnEvent("update", self, update))

    def _note_chunk(self, kind: str, start: int, end: int) -> None:
        last = self._records[-1] if self._records else None
        if not isinstance(last, _ChunkRun) or last.kind != kind:
            last = _ChunkRun(kind, start)
            self._records.append(last)
        last.note(end)

    def merge_tool_call(self, fields: Mapping[str, Any]) -> None:
        """Create or update a tool call; some agents first mention one in a permission request."""
        call_id = fields.get("toolCallId")
        if call_id is None:
            return
        call = self.tool_calls_by_id.setdefault(call_id, ToolCall(id=call_id))
        call.merge(fields)

    def note_compaction(self, compaction: Compaction) -> None:
        """A compaction an update of this turn names: kept once, where it first came (its session made it)."""
        if not any(known is compaction for known in self.compactions):
            self.compactions.append(compaction)

    def record_permission(self, record: PermissionRecord) -> None:
        self.merge_tool_call(record.tool_call)
        self.permissions.append(record)
        self._observers.emit(TurnEvent("permission", self, record))

    def record_kernel(self, call: KernelCall) -> None:
        """A kernel tool call began or changed (``call`` is added the first time it is seen)."""
        if not any(known is call for known in self.kernel_calls):
            self.kernel_calls.append(call)
        self._observers.emit(TurnEvent("kernel", self, call))

    def note_branch_change(self) -> None:
        """The conversation's current branch changed: views that show whether this turn is on it re-read
        ``branch_state`` (loop thread, like every event)."""
        self._observers.emit(TurnEvent("branch", self, self.branch))

    @property
    def branch_state(self) -> Any:
        """Where this turn stands among its conversation's branches (``branching.BranchState``: the branch's
        name, whether it is the current one, how it was made), or None outside a branched conversation."""
        branch = self.branch
        return branch.conversation.state_of(self) if branch is not None else None

    def record_elicitation(self, record: Any) -> None:
        self.elicitations.append(record)
        self._observers.emit(TurnEvent("elicitation", self, record))

    def finish(self, result: Mapping[str, Any] | None, model: Any, error: BaseException | None = None) -> None:
        """End the turn (once; later calls are ignored): the agent's answer, or the error that ended it."""
        if self.done.is_set():
            return
        self.ended_at = time.perf_counter()
        if self.started_at is None:  # never sent (failed or cancelled while queued)
            self.started_at = self.ended_at
        self.model = model
        if result is not None:
            self.result = copy.deepcopy(dict(result))
            self.stop_reason = result.get("stopReason")
            if isinstance(result.get("usage"), Mapping):
                self.usage = {**(self.usage or {}), **result["usage"]}
            elif _quota_usage(result):
                self.usage = {**(self.usage or {}), **_quota_usage(result)}
        self.error = error
        self._text.seal()
        self._thoughts.seal()
        self.status = "error" if error is not None else "cancelled" if self.stop_reason == "cancelled" else "done"
        self.done.set()
        self._observers.emit(TurnEvent("done", self, self.status))
        if error is not None:
            self.future.set_exception(error)
        else:
            self.future.set_result(self)

    # --- display ---------------------------------------------------------
    def __repr__(self) -> str:
        text = self.text
        short = text if len(text) <= 60 else text[:57] + "..."
        return (f"Turn(status={self.status!r}, stop_reason={self.stop_reason!r}, model={self.model!r}, "
                f"tool_calls={len(self.tool_calls_by_id)}, text={short!r})")

    def _repr_markdown_(self) -> str:
        return self.text or f"*(no text; stop reason: {self.stop_reason})*"
