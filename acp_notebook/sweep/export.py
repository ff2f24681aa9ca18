"""Logs other tools read: each trial's trajectory in ATIF (Harbor's Agent Trajectory Interchange Format, built
with the ``atif`` package's models, so what is written validates) and Inspect AI eval logs (``inspect view``).

Both read a finished result and its run directory on the caller's thread; nothing is shared or mutated.
The ``atif`` and ``inspect_ai`` packages come with ``pip install 'acp-notebook[eval]'``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from .columns import explanation_column, score_column
from .conversation import TrialRecord
from .extras import require

__all__ = ["export_atif", "export_inspect"]

ATIF_VERSION = "ATIF-v1.8"


class Trials(Protocol):
    """What the exports read of a result (result.py's SweepResult; it imports this module)."""

    rows: list[dict[str, Any]]
    metadata: dict[str, Any]

    @property
    def scorers(self) -> list[str]: ...

    @property
    def models(self) -> list[str]: ...

    def trial_record(self, row: Any) -> TrialRecord: ...


def _require(module: str, what: str) -> Any:
    return require(module, what, "eval")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
    return float(value) if ok else None


def _scores(row: dict[str, Any], scorers: Sequence[str]) -> dict[str, Any]:
    return {name: row.get(score_column(name)) for name in scorers if score_column(name) in row}


# --- ATIF --------------------------------------------------------------------------------------
def atif_trajectory(record: TrialRecord, scorers: Sequence[str]) -> Any:
    """One trial as an ``atif.Trajectory`` (constructing it validates it)."""
    atif = _require("atif", "export_atif()")
    row = record.row
    steps = [atif.Step(step_id=1, source="user", message=record.prompt, timestamp=row.get("started_at"))]
    for step in record.steps:
        calls = [atif.ToolCall(tool_call_id=c.id, function_name=c.kind or "other", arguments=c.arguments,
                               extra={"title": c.title}) for c in step.tool_calls]
        results = [atif.ObservationResult(source_call_id=c.id, content=c.output, extra={"status": c.status})
                   for c in step.tool_calls]
        steps.append(atif.Step(step_id=len(steps) + 1, source="agent", message=step.text, model_name=row.get("model"),
                               reasoning_content=step.thoughts or None, tool_calls=calls or None,
                               observation=atif.Observation(results=results) if results else None))
    cost = _number(row.get("cost")) if row.get("currency") in (None, "USD") else None
    final = atif.FinalMetrics(total_prompt_tokens=row.get("input_tokens"),
                              total_completion_tokens=row.get("output_tokens"), total_cost_usd=cost,
                              total_steps=len(steps), extra={"total_tokens": row.get("total_tokens")})
    info = record.agent_info
    agent = atif.Agent(name=str(info.get("name") or row.get("agent") or "agent"),
                       version=str(info.get("version") or "unknown"), model_name=row.get("model"),
                       extra={"acp_agent": row.get("agent"), "model_value": row.get("model_value")})
    extra = {"trial_id": row.get("trial_id"), "sample_id": row.get("sample_id"), "repeat": row.get("repeat"),
             "status": row.get("status"), "error": row.get("error"), "scores": _scores(row, scorers),
             "stop_reason": row.get("stop_reason"), "duration_s": row.get("duration_s"), "diff": record.diff}
    return atif.Trajectory(schema_version=ATIF_VERSION, session_id=row.get("session_id"),
                           trajectory_id=row.get("trial_id"), agent=agent, steps=steps, final_metrics=final,
                           extra={k: v for k, v in extra.items() if v is not None},
                           notes="Exported by acp-notebook from an ACP session recording")


def export_atif(result: Trials, directory: str | Path) -> list[Path]:
    """Write ``<trial id>.json`` per trial into ``directory``; the paths written."""
    _require("atif", "export_atif()")
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for row in result.rows:
        trajectory = atif_trajectory(result.trial_record(row), result.scorers)
        path = target / f"{_slug(str(row.get('trial_id')))}.json"
        path.write_text(json.dumps(trajectory.to_json_dict(), indent=1, default=str), encoding="utf-8")
        written.append(path)
    return written


# --- Inspect AI ----------------------------------------------------------------------------------
def _messages(record: TrialRecord) -> list[Any]:
    model = _require("inspect_ai.model", "export_inspect()")
    tool = _require("inspect_ai.tool", "export_inspect()")
    messages: list[Any] = [model.ChatMessageUser(content=record.prompt)]
    for step in record.steps:
        calls = [tool.ToolCall(id=c.id, function=c.kind or "other", arguments=c.arguments) for c in step.tool_calls]
        messages.append(model.ChatMessageAssistant(content=step.text, tool_calls=calls or None,
                                                   model=record.row.get("model")))
        messages += [model.ChatMessageTool(content=c.output or c.status, tool_call_id=c.id, function=c.kind or "other")
                     for c in step.tool_calls]
    return messages


def _sample(record: TrialRecord, scorers: Sequence[str]) -> Any:
    log = _require("inspect_ai.log", "export_inspect()")
    model = _require("inspect_ai.model", "export_inspect()")
    scorer = _require("inspect_ai.scorer", "export_inspect()")
    row = record.row
    scores = {name: scorer.Score(value=row[score_column(name)], explanation=row.get(explanation_column(name)))
              for name in scorers if row.get(score_column(name)) is not None}
    usage = model.ModelUsage(input_tokens=row.get("input_tokens") or 0, output_tokens=row.get("output_tokens") or 0,
                             total_tokens=row.get("total_tokens") or 0, total_cost=_number(row.get("cost")))
    error = log.EvalError(message=row["error"], traceback="", traceback_ansi="") if row.get("error") else None
    metadata = {k: row.get(k) for k in ("trial_id", "model", "status", "session_id", "workspace", "files_changed",
                                        "diff", "duration_s", "stop_reason") if row.get(k) is not None}
    if record.diff:
        metadata["diff_text"] = record.diff
    return log.EvalSample(
        id=str(row.get("sample_id")), epoch=int(row.get("repeat") or 0) + 1, input=record.prompt,
        target="" if row.get("target") is None else str(row["target"]), messages=_messages(record),
        output=model.ModelOutput.from_content(str(row.get("model")), str(row.get("text") or "")),
        scores=scores or None, metadata=metadata, model_usage={str(row.get("model")): usage}, error=error,
        total_time=_number(row.get("duration_s")))


def _results(rows: list[dict[str, Any]], scorers: Sequence[str]) -> Any:
    log = _require("inspect_ai.log", "export_inspect()")
    scores = []
    for name in scorers:
        values = [float(r[score_column(name)]) for r in rows if _number(r.get(score_column(name))) is not None]
        metrics = {"mean": log.EvalMetric(name="mean", value=sum(values) / len(values))} if values else {}
        scores.append(log.EvalScore(name=name, scorer=name, scored_samples=len(values),
                                    unscored_samples=len(rows) - len(values), metrics=metrics))
    return log.EvalResults(total_samples=len(rows), completed_samples=sum(r.get("status") == "ok" for r in rows),
                           scores=scores)


def _eval_log(result: Trials, model_id: str, rows: list[dict[str, Any]]) -> Any:
    log = _require("inspect_ai.log", "export_inspect()")
    meta = result.metadata
    source = str((meta.get("dataset") or {}).get("source") or "sweep")
    created = str(meta.get("created") or datetime.now(timezone.utc).isoformat())
    samples = [_sample(result.trial_record(row), result.scorers) for row in rows]
    ids = list(dict.fromkeys(str(r.get("sample_id")) for r in rows))
    spec = log.EvalSpec(created=created, task=f"acp-notebook-sweep/{Path(source).name or source}", model=model_id,
                        dataset=log.EvalDataset(name=source, samples=len(ids), sample_ids=ids),
                        config=log.EvalConfig(epochs=int(meta.get("repeats") or 1)),
                        metadata={"acp_notebook": {k: meta.get(k) for k in ("versions", "parameters", "agents")}})
    failed = all(r.get("status") != "ok" for r in rows)
    return log.EvalLog(status="error" if failed else "success", eval=spec, results=_results(rows, result.scorers),
                       stats=log.EvalStats(started_at=created, completed_at=str(meta.get("finished") or created)),
                       samples=samples)


def export_inspect(result: Trials, path: str | Path) -> list[Path]:
    """One Inspect eval log per model (an Inspect eval is one task with one model): ``path`` itself for a sweep
    of one model; with several, ``<stem>-<model>.eval`` beside it (or ``<model>.eval`` inside a directory)."""
    log = _require("inspect_ai.log", "export_inspect()")
    target = Path(path)
    models = result.models
    written = []
    for model_id in models:
        if len(models) == 1 and target.suffix in (".eval", ".json"):
            file = target
        elif target.suffix in (".eval", ".json"):
            file = target.with_name(f"{target.stem}-{_slug(model_id)}{target.suffix}")
        else:
            file = target / f"{_slug(model_id)}.eval"
        file.parent.mkdir(parents=True, exist_ok=True)
        rows = [r for r in result.rows if r.get("model") == model_id]
        log.write_eval_log(_eval_log(result, model_id, rows), str(file))
        written.append(file)
    return written
