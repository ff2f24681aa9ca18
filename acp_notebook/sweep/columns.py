"""The columns of a sweep's rows: their names, order, types, and where each value comes from.

Constants only; every other sweep module reads them and none mutates them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "COLUMN_SOURCES",
    "explanation_column",
    "metadata_clash",
    "ordered_columns",
    "score_column",
    "scorer_names_in",
]

# The order of a DataFrame or CSV: what a reader compares first, then bookkeeping, then (full only) the rest.
_LEAD = ("model", "sample_id", "repeat", "status")  # then score_<name> for every scorer
_MEASURES = ("duration_s", "ttft_s", "input_tokens", "output_tokens", "total_tokens", "cost", "text")
_AFTER = ("error", "target")  # then the dataset's metadata columns
_TAIL = ("prompt", "stop_reason", "attempts", "started_at", "ended_at", "workspace", "files_changed", "diff")
_FULL_ONLY = ("trial_id", "sample_index", "agent", "model_value", "confirmed_model", "model_at_end")  # explanations
_FULL_TAIL = ("thoughts", "timed_out", "tool_calls", "thought_tokens", "cached_read_tokens", "cached_write_tokens",
              "context_used", "context_size", "currency", "session_id", "config", "trajectory", "workspace_method",
              "workspace_commit", "workspace_path")

FIXED_COLUMNS: tuple[str, ...] = _LEAD + _MEASURES + _AFTER + _TAIL + _FULL_ONLY + _FULL_TAIL
# Shown by to_pandas() without full=True (score, explanation and metadata columns are placed by ordered_columns).
DEFAULT_COLUMNS = frozenset(_LEAD + _MEASURES + _AFTER + _TAIL)
# Never left out of the default view, even when empty.
IDENTITY_COLUMNS = frozenset(_LEAD)

INT_COLUMNS = frozenset({"repeat", "sample_index", "attempts", "input_tokens", "output_tokens", "thought_tokens",
                         "total_tokens", "cached_read_tokens", "cached_write_tokens", "context_used", "context_size",
                         "tool_calls", "files_changed"})
FLOAT_COLUMNS = frozenset({"duration_s", "ttft_s", "cost"})
BOOL_COLUMNS = frozenset({"timed_out"})
JSON_COLUMNS = frozenset({"config"})
TIME_COLUMNS = ("started_at", "ended_at")
# Text that may legitimately be empty; every other empty CSV cell reads back as None.
TEXT_COLUMNS = frozenset({"prompt", "text", "thoughts"})

SCORE_PREFIX = "score_"
EXPLANATION_PREFIX = "explanation_"
_SCORE_COLUMN = re.compile(r"^score_(?P<name>[A-Za-z0-9_]+)$")

# Where each value comes from (issue 17: say it, rather than leave a reader guessing).
COLUMN_SOURCES: Mapping[str, str] = {
    "model": "the agent:model id as requested",
    "sample_id": "the dataset's id or sample_id field, else a hash of the prompt and target",
    "repeat": "0 .. repeats-1",
    "status": "ok, error or timeout",
    "score_<name>": "what scorer <name> gave (1.0 / 0.0 for pass / fail); empty when the trial failed",
    "duration_s": "seconds from sending session/prompt to its response (the last attempt)",
    "ttft_s": "seconds from sending session/prompt to the first agent_message_chunk",
    "input_tokens": "usage.inputTokens of the prompt response, when the agent reports it",
    "output_tokens": "usage.outputTokens of the prompt response, when the agent reports it",
    "total_tokens": "usage.totalTokens of the prompt response; if absent, usage_update.used (the context's "
                    "tokens after the turn, which is this trial's tokens since every trial has a fresh session)",
    "cost": "usage_update.cost.amount after the turn (the session's cost, so this trial's)",
    "text": "the reply: every agent_message_chunk's text",
    "error": "what went wrong, for rows whose status is not ok",
    "target": "the dataset's target field",
    "prompt": "the prompt sent (the template filled from the sample's fields)",
    "stop_reason": "the prompt response's stopReason",
    "attempts": "how many times the trial ran (retries after transient errors)",
    "started_at": "when the last attempt started (UTC)",
    "ended_at": "when the last attempt's session was closed (UTC)",
    "trial_id": "a stable id from model, sample id and repeat: what resuming matches on",
    "sample_index": "the sample's position in the dataset",
    "agent": "the agent that served the trial",
    "model_value": "the value set on the agent's model option",
    "confirmed_model": "the model the agent reported in force after the set (same namespace as model)",
    "model_at_end": "the model the agent reported when the turn ended",
    "explanation_<name>": "scorer <name>'s explanation; for a model-graded scorer, the grader's reply",
    "thoughts": "every agent_thought_chunk's text",
    "timed_out": "whether the turn hit timeout= and was cancelled",
    "tool_calls": "how many tool calls the turn made",
    "thought_tokens": "usage.thoughtTokens of the prompt response",
    "cached_read_tokens": "usage.cachedReadTokens of the prompt response",
    "cached_write_tokens": "usage.cachedWriteTokens of the prompt response",
    "context_used": "usage_update.used after the turn",
    "context_size": "usage_update.size after the turn",
    "currency": "usage_update.cost.currency",
    "session_id": "the session the trial ran in (agent-assigned; differs between runs)",
    "config": "{option id: value} in force when the prompt was sent",
    "trajectory": "the trial's session as a recording (acpnb.replay plays it), relative to the run directory",
    "workspace": "the directory the trial worked in a fresh copy of (workspace= or the sample's workspace field; "
                 "empty for an empty directory)",
    "files_changed": "how many files the trial's workspace diff touches",
    "diff": "the workspace's diff against its start (after setup), relative to the run directory",
    "workspace_method": "how the copy was made: worktree (git), copy (cp --reflink=auto) or empty",
    "workspace_commit": "for a git worktree, the commit it was made from",
    "workspace_path": "where the trial's copy was (deleted after grading unless keep_workspaces=True)",
}


def score_column(name: str) -> str:
    return SCORE_PREFIX + name


def explanation_column(name: str) -> str:
    return EXPLANATION_PREFIX + name


def scorer_names_in(keys: Iterable[str]) -> list[str]:
    """The scorer names that ``score_<name>`` keys reveal, in first-seen order."""
    names: dict[str, None] = {}
    for key in keys:
        match = _SCORE_COLUMN.match(key)
        if match:
            names[match["name"]] = None
    return list(names)


def metadata_clash(name: str) -> bool:
    """Whether a dataset field would overwrite a result column."""
    return name in FIXED_COLUMNS or name.startswith((SCORE_PREFIX, EXPLANATION_PREFIX))


def ordered_columns(scorers: Sequence[str], metadata: Sequence[str], *, full: bool = True) -> list[str]:
    """Every column in display order; without ``full``, the ones a reader looks at and the bookkeeping after."""
    columns = [*_LEAD, *(score_column(n) for n in scorers), *_MEASURES, *_AFTER, *metadata, *_TAIL]
    if full:
        columns += [*_FULL_ONLY, *(explanation_column(n) for n in scorers), *_FULL_TAIL]
    return columns
