"""Sweeps: a dataset's prompts across agent:model ids, scored, summarised with intervals, kept in run directories.

``acpnb.sweep`` is the entry point; the scorers (text scorers and checks run in each trial's workspace),
Harbor task folders (``tasks``), the Ray executor and the result types are here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

if TYPE_CHECKING:  # at run time each name is imported when first read (acp_notebook/_lazy.py)
    from .checks import CheckError, command, file_contains
    from .cli import main
    from .columns import COLUMN_SOURCES
    from .dataset import Sample, load_dataset
    from .executors import LocalExecutor
    from .progress import NullProgress, Progress, TextProgress, WidgetProgress
    from .ray_executor import RayExecutor
    from .result import Comparison, SweepResult, SweepSummary, load_run
    from .runner import asweep, sweep
    from .scorers import (
        Score,
        Scorer,
        exact,
        includes,
        json_field,
        model_graded,
        numeric,
        regex,
        scorer,
    )
    from .stats import percentile, sign_test, wilson_interval
    from .taskdirs import TaskSet, tasks
    from .trial import ModelNotInForce, Trial, plan_trials, trial_id

__all__ = [
    "COLUMN_SOURCES",
    "CheckError",
    "Comparison",
    "LocalExecutor",
    "ModelNotInForce",
    "NullProgress",
    "Progress",
    "RayExecutor",
    "Sample",
    "Score",
    "Scorer",
    "SweepResult",
    "SweepSummary",
    "TaskSet",
    "TextProgress",
    "Trial",
    "WidgetProgress",
    "asweep",
    "command",
    "exact",
    "file_contains",
    "includes",
    "json_field",
    "load_dataset",
    "load_run",
    "main",
    "model_graded",
    "numeric",
    "percentile",
    "plan_trials",
    "regex",
    "scorer",
    "sign_test",
    "sweep",
    "tasks",
    "trial_id",
    "wilson_interval",
]

__getattr__, __dir__ = lazy_names(__name__, globals(), {
    "main": ".cli",
    **dict.fromkeys(("CheckError", "command", "file_contains"), ".checks"),
    **dict.fromkeys(("TaskSet", "tasks"), ".taskdirs"),
    "COLUMN_SOURCES": ".columns",
    **dict.fromkeys(("Sample", "load_dataset"), ".dataset"),
    "LocalExecutor": ".executors",
    **dict.fromkeys(("NullProgress", "Progress", "TextProgress", "WidgetProgress"), ".progress"),
    "RayExecutor": ".ray_executor",
    **dict.fromkeys(("Comparison", "SweepResult", "SweepSummary", "load_run"), ".result"),
    **dict.fromkeys(("asweep", "sweep"), ".runner"),
    **dict.fromkeys(("Score", "Scorer", "exact", "includes", "json_field", "model_graded", "numeric", "regex",
                     "scorer"), ".scorers"),
    **dict.fromkeys(("percentile", "sign_test", "wilson_interval"), ".stats"),
    **dict.fromkeys(("ModelNotInForce", "Trial", "plan_trials", "trial_id"), ".trial"),
})
