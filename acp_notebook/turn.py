"""Turn: what one prompt produced (text, thoughts, tool calls, plan, usage, timings), filled as updates arrive."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PermissionRecord", "ToolCall", "Turn"]


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
    updates: list[dict[str, Any]] = field(default_factory=list, repr=False)

    _FIELDS = {"title": "title", "kind": "kind", "status": "status", "content": "content",
               "locations": "locations", "rawInput": "raw_input", "rawOutput": "raw_output"}

    def merge(self, update: Mapping[str, Any]) -> None:
        """Fields present in the update replace ours; absent ones are unchanged (the protocol's rule)."""
        for wire, attr in self._FIELDS.items():
            if wire in update and update[wire] is not None:
                setattr(self, attr, copy.deepcopy(update[wire]))
        self.updates.append(copy.deepcopy(dict(update)))

    @property
    def diffs(self) -> list[dict[str, Any]]:
        return [c for c in self.content if c.get("type") == "diff"]


@dataclass
class PermissionRecord:
    tool_call: dict[str, Any]
    options: list[dict[str, Any]]
    chosen: str | None  # the option id, or None when the request was cancelled


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

    Filled on the background loop thread; read it after ``prompt()`` returns, or
    follow it live through ``session.state.observe`` ("update" events).
    """

    def __init__(self, prompt: Any, session_id: str, model: Any = None) -> None:
        self.prompt = prompt
        self.session_id = session_id
        self.model = model
        self.model_at_start = model
        self.updates: list[dict[str, Any]] = []
        self.tool_calls_by_id: dict[str, ToolCall] = {}
        self.plan: list[dict[str, Any]] = []
        self.permissions: list[PermissionRecord] = []
        self.usage: dict[str, Any] | None = None
        self.stop_reason: str | None = None
        self.error: BaseException | None = None
        self.result: dict[str, Any] | None = None
        self.started_at: float | None = None
        self.wall_started_at: float | None = None
        self.first_chunk_at: float | None = None
        self.ended_at: float | None = None
        self._text: list[str] = []
        self._thoughts: list[str] = []
        self.other_content: list[dict[str, Any]] = []
        self.done = threading.Event()

    # --- reading ---------------------------------------------------------
    @property
    def text(self) -> str:
        return "".join(self._text)

    @property
    def thoughts(self) -> str:
        return "".join(self._thoughts)

    @property
    def tool_calls(self) -> list[ToolCall]:
        return list(self.tool_calls_by_id.values())

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.started_at

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

    def apply(self, update: Mapping[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        self.updates.append(copy.deepcopy(dict(update)))
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            content = update.get("content") or {}
            if kind == "agent_message_chunk" and self.first_chunk_at is None:
                self.first_chunk_at = time.perf_counter()
            if content.get("type") == "text":
                (self._text if kind == "agent_message_chunk" else self._thoughts).append(content.get("text") or "")
            elif kind == "agent_message_chunk":
                self.other_content.append(copy.deepcopy(dict(content)))
        elif kind in ("tool_call", "tool_call_update"):
            self.merge_tool_call(update)
        elif kind == "plan":
            self.plan = copy.deepcopy(list(update.get("entries") or []))
        elif kind == "usage_update":
            self.usage = {**(self.usage or {}), **{k: v for k, v in update.items() if k != "sessionUpdate"}}

    def merge_tool_call(self, fields: Mapping[str, Any]) -> None:
        """Create or update a tool call; some agents first mention one in a permission request."""
        call_id = fields.get("toolCallId")
        if call_id is None:
            return
        call = self.tool_calls_by_id.setdefault(call_id, ToolCall(id=call_id))
        call.merge(fields)

    def finish(self, result: Mapping[str, Any] | None, model: Any, error: BaseException | None = None) -> None:
        if self.done.is_set():
            return
        self.ended_at = time.perf_counter()
        self.model = model
        if result is not None:
            self.result = copy.deepcopy(dict(result))
            self.stop_reason = result.get("stopReason")
            if isinstance(result.get("usage"), Mapping):
                self.usage = {**(self.usage or {}), **result["usage"]}
            elif _quota_usage(result):
                self.usage = {**(self.usage or {}), **_quota_usage(result)}
        if error is not None:
            self.error = error
        self.done.set()

    # --- display ---------------------------------------------------------
    def __repr__(self) -> str:
        text = self.text
        short = text if len(text) <= 60 else text[:57] + "..."
        return (f"Turn(stop_reason={self.stop_reason!r}, model={self.model!r}, "
                f"tool_calls={len(self.tool_calls_by_id)}, text={short!r})")

    def _repr_markdown_(self) -> str:
        return self.text or f"*(no text; stop reason: {self.stop_reason})*"
