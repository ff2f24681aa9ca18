"""What every scorer is: ``Scorer`` (a name and ``score(row)`` / ``ascore``), its verdict ``Score``,
``to_score`` (whatever a scorer returned, as a Score), the one rule for scorer names, and what a
model-graded scorer is offered (``GradingContext``). The built-in scorers (scorers.py) and the
workspace checks (checks.py) both build on it; it imports neither. Plain data and functions: no state.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["GraderReply", "GradingContext", "Score", "Scorer", "check_name", "to_score"]

_NAME = re.compile(r"^[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class Score:
    """A scorer's verdict: ``value`` (1.0 / 0.0 for pass / fail, any number for graded scores, None when
    the row could not be scored), why, and what grading cost when another model was asked."""

    value: float | None
    explanation: str | None = None
    cost: float | None = None


def to_score(result: Any, name: str) -> Score:
    """Whatever a scorer returned, as a Score: a bool, a number, None, (score, explanation) or a Score."""
    if isinstance(result, Score):
        return result
    explanation = None
    if isinstance(result, tuple):
        if len(result) != 2:
            raise TypeError(f"scorer {name!r} returned a tuple of {len(result)}; return score or (score, explanation)")
        result, explanation = result
        explanation = None if explanation is None else str(explanation)
    if result is None:
        return Score(None, explanation)
    if isinstance(result, bool):
        return Score(1.0 if result else 0.0, explanation)
    if isinstance(result, (int, float)) and not (isinstance(result, float) and math.isnan(result)):
        return Score(float(result), explanation)
    raise TypeError(f"scorer {name!r} returned {result!r}; return a bool, a number, None or (score, explanation)")


class Scorer:
    """The base of every scorer: a ``name`` (the column is ``score_<name>``) and ``score(row)``."""

    name: str = "score"

    def score(self, row: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    async def ascore(self, row: Mapping[str, Any], context: GradingContext) -> Score:
        return to_score(self.score(row), self.name)

    def describe(self) -> dict[str, Any]:
        """What the manifest records about this scorer."""
        return {"name": self.name, "kind": type(self).__name__}

    def __repr__(self) -> str:
        details = ", ".join(f"{k}={v!r}" for k, v in self.describe().items() if k not in ("name", "kind"))
        return f"{self.describe()['kind']}(name={self.name!r}{', ' + details if details else ''})"


def check_name(name: Any) -> str:
    """``name`` if it can name a ``score_<name>`` column; else ValueError."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"scorer names are letters, digits and _ (they become score_<name> columns), not {name!r}")
    return name



@dataclass(frozen=True)
class GraderReply:
    text: str
    cost: float | None
    model: str | None  # the grader model the agent reported in force


class GradingContext(Protocol):
    """What the sweep offers a model-graded scorer: a turn with another model (fresh session, checked model)."""

    async def ask(self, model_id: str, prompt: str, *, timeout: float | None) -> GraderReply: ...
