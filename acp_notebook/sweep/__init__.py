"""Model sweeps: the same prompts across namespaced agent:model ids, as SweepResult rows, a summary, files and plots."""

from __future__ import annotations

from .cli import main
from .progress import NullProgress, Progress, TextProgress, WidgetProgress
from .result import COLUMNS, SweepResult, SweepSummary, percentile
from .runner import ModelNotInForce, PlannedRun, asweep, plan_runs, split_model_id, sweep

__all__ = [
    "COLUMNS",
    "ModelNotInForce",
    "NullProgress",
    "PlannedRun",
    "Progress",
    "SweepResult",
    "SweepSummary",
    "TextProgress",
    "WidgetProgress",
    "asweep",
    "main",
    "percentile",
    "plan_runs",
    "split_model_id",
    "sweep",
]
