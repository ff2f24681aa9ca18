"""A finished trial read back from its run directory: the prompt, the agent's steps (thoughts, text, tool calls
with their results), the workspace diff, and its text rendering (``SweepResult.show``, ``acp-notebook sweep show``).

Plain functions over files a sweep wrote; nothing here runs during a sweep or mutates shared state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..record import Recording, RecordingError
from ..record.format import RecordedFrame
from .columns import explanation_column, score_column

__all__ = ["Step", "ToolUse", "TrialRecord", "load_trial", "render_trial"]

OUTPUT_SHOWN = 400  # characters of a tool call's output in the text rendering


@dataclass
class ToolUse:
    """One tool call as the agent reported it, with its last status and output."""

    id: str
    title: str = ""
    kind: str = "other"
    status: str = "pending"
    arguments: dict[str, Any] = field(default_factory=dict)
    output: str = ""


@dataclass
class Step:
    """What the agent did between two looks at the world: thoughts, text, and the tool calls that followed."""

    thoughts: str = ""
    text: str = ""
    tool_calls: list[ToolUse] = field(default_factory=list)


@dataclass
class TrialRecord:
    """A trial's row with its conversation and diff (both empty when the run directory has none)."""

    row: dict[str, Any]
    prompt: str
    steps: list[Step]
    diff: str | None
    agent_info: dict[str, Any] = field(default_factory=dict)


def _content_text(content: Any) -> str:
    """A tool call's content list as text: text blocks as they are, diffs and terminals named."""
    parts = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, Mapping):
            continue
        if item.get("type") == "content" and isinstance(item.get("content"), Mapping):
            block = item["content"]
            parts.append(str(block.get("text", "")) if block.get("type") == "text" else f"[{block.get('type')}]")
        elif item.get("type") == "diff":
            parts.append(f"[diff of {item.get('path')}]")
        elif item.get("type") == "terminal":
            parts.append(f"[terminal {item.get('terminalId')}]")
    return "\n".join(parts)


def _prompt_text(params: Mapping[str, Any]) -> str:
    blocks = params.get("prompt") if isinstance(params.get("prompt"), list) else []
    return "\n".join(str(b.get("text", b.get("uri", ""))) for b in blocks if isinstance(b, Mapping))


def _apply(steps: list[Step], calls: dict[str, ToolUse], update: Mapping[str, Any]) -> None:
    kind = update.get("sessionUpdate")
    if kind in ("agent_message_chunk", "agent_thought_chunk"):
        content = update.get("content") if isinstance(update.get("content"), Mapping) else {}
        if not steps or steps[-1].tool_calls:
            steps.append(Step())
        text = str(content.get("text", "")) if content.get("type") == "text" else ""
        if kind == "agent_message_chunk":
            steps[-1].text += text
        else:
            steps[-1].thoughts += text
    elif kind in ("tool_call", "tool_call_update") and isinstance(update.get("toolCallId"), str):
        call = calls.get(update["toolCallId"])
        if call is None:
            call = calls[update["toolCallId"]] = ToolUse(update["toolCallId"])
            if not steps:
                steps.append(Step())
            steps[-1].tool_calls.append(call)
        call.title = str(update.get("title") or call.title)
        call.kind = str(update.get("kind") or call.kind)
        call.status = str(update.get("status") or call.status)
        if isinstance(update.get("rawInput"), Mapping):
            call.arguments = dict(update["rawInput"])
        if "content" in update:
            call.output = _content_text(update.get("content")) or call.output


def conversation(recording: Recording) -> tuple[str, list[Step]]:
    """The prompt(s) the client sent and the agent's steps, in wire order."""
    prompts: list[str] = []
    steps: list[Step] = []
    calls: dict[str, ToolUse] = {}
    for frame in recording.frames:
        msg = frame.msg
        params = msg.get("params") if isinstance(msg.get("params"), Mapping) else {}
        if frame.direction == "send" and msg.get("method") == "session/prompt":
            prompts.append(_prompt_text(params))
        elif frame.direction == "recv" and msg.get("method") == "session/update":
            update = params.get("update")
            if isinstance(update, Mapping):
                _apply(steps, calls, update)
    return "\n\n".join(prompts), steps


def _in_memory(trajectory: Mapping[str, Any]) -> Recording:
    """What ``record.session_recording`` gathered, as a Recording (a sweep without a run directory keeps these)."""
    frames = [RecordedFrame(f["dir"], float(f.get("t") or 0.0), f["msg"], number, f.get("note"))
              for number, f in enumerate(trajectory.get("frames") or [], 2)]
    header = {"agentInfo": dict((trajectory.get("initialize") or {}).get("agentInfo") or {}),
              "agent": dict(trajectory.get("agent") or {})}
    return Recording(header=header, frames=frames)


def load_trial(run: Path | None, row: Mapping[str, Any], kept: Mapping[str, Any] | None = None) -> TrialRecord:
    """The trial's conversation from its recording and its diff: files of the run directory, else what a sweep
    without one kept in memory (``kept``: its trajectory and diff)."""
    prompt, steps, info = str(row.get("prompt") or ""), [], {}
    kept = kept or {}
    recording = _in_memory(kept["trajectory"]) if kept.get("trajectory") else None
    if recording is None and run is not None and row.get("trajectory"):
        try:
            recording = Recording.load(run / str(row["trajectory"]))
        except RecordingError:
            recording = None
    if recording is not None:
        prompt, steps = conversation(recording)
        prompt = prompt or str(row.get("prompt") or "")
        info = dict(recording.header.get("agentInfo") or {})
    if not steps and row.get("text"):
        steps = [Step(str(row.get("thoughts") or ""), str(row["text"]))]
    diff = kept.get("diff")
    if diff is None and run is not None and row.get("diff") and (run / str(row["diff"])).is_file():
        diff = (run / str(row["diff"])).read_text(encoding="utf-8", errors="replace")
    return TrialRecord(dict(row), prompt, steps, diff, info)


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.rstrip().splitlines())


def render_trial(record: TrialRecord, scorers: list[str]) -> str:
    """The trial as text: who and how it went, the prompt, each step and tool call, the scores, the diff."""
    row = record.row
    lines = [f"trial {row.get('trial_id')}: {row.get('model')} on sample {row.get('sample_id')} "
             f"(repeat {row.get('repeat')}), status {row.get('status')}"]
    if row.get("error"):
        lines.append(f"error: {row['error']}")
    if row.get("workspace") is not None:
        lines.append(f"workspace: {row.get('workspace') or '(empty)'} ({row.get('workspace_method')}), "
                     f"{row.get('files_changed') or 0} file(s) changed")
    lines += ["", "prompt:", _indent(record.prompt)]
    for number, step in enumerate(record.steps, 1):
        lines.append(f"\nagent, step {number}:")
        if step.thoughts.strip():
            lines += ["  thinking:", _indent(step.thoughts)]
        if step.text.strip():
            lines.append(_indent(step.text, "  "))
        for call in step.tool_calls:
            lines.append(f"  tool call {call.id} [{call.kind}] {call.title}: {call.status}")
            if call.output.strip():
                output = call.output if len(call.output) <= OUTPUT_SHOWN else call.output[:OUTPUT_SHOWN] + " ..."
                lines.append(_indent(output, "      "))
    graded = [name for name in scorers if score_column(name) in row]
    if graded:
        lines.append("\nscores:")
        for name in graded:
            explanation = row.get(explanation_column(name))
            lines.append(f"  {name}: {row.get(score_column(name))}")
            if explanation:
                lines.append(_indent(str(explanation)[-1500:], "      "))
    if record.diff is not None:
        lines += ["", "diff:" if record.diff.strip() else "diff: (no changes)"]
        if record.diff.strip():
            lines.append(record.diff.rstrip())
    return "\n".join(lines)
