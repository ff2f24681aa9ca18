"""Arithmetic tasks with known answers, so sweeps can measure different, known accuracies.

The contract (evaluation sweeps and their tests rely on it; change it only together with them):

- A prompt that contains an arithmetic question ``What is A OP B?`` is a task. ``A`` and ``B`` are
  integers, optionally negative (``-3``); ``OP`` is one of ``+``, ``-``, ``*``, ``x`` (either case)
  or ``/``; "what is" matches in any case; spaces around ``OP`` and before ``?`` are optional; the
  question may sit anywhere in the prompt (the first one counts). Without the ``?``, or with
  non-integers (``2.5``), the prompt is not a task and gets the ordinary reply.
- The reply is an ordinary reply (streamed chunks; the smart model thinks first) whose LAST line
  is ``Answer: N``, in every tone and mode. Prompts the demo treats otherwise come first: a file
  command (``read PATH``), a prompt starting with "ask me", and one asking "what did I say first?".
  The model is the one that answers: a prompt containing "fallback" switches smart to fast first.
- Model ``smart`` is always right. Division is integer division rounded toward zero
  (``-7 / 2`` is ``-3``); division by zero answers ``Answer: undefined``.
- Model ``fast`` is right for ``+`` and ``-`` and wrong by exactly +1 for ``*``, ``x`` and ``/``
  (``6 * 7`` answers ``43``); division by zero still answers ``Answer: undefined``.

So a dataset of half ``+``/``-`` questions and half ``*``/``/`` questions scores 50% with ``fast``
and 100% with ``smart``. Pure functions; no state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ANSWER_PREFIX", "UNDEFINED", "Task", "answer_line", "correct_answer", "model_answer", "parse_task"]

ANSWER_PREFIX = "Answer: "
UNDEFINED = "undefined"
_QUESTION = re.compile(r"\bwhat\s+is\s+(-?\d+)\s*([-+*/x])\s*(-?\d+)\s*\?", re.IGNORECASE)
# The operators the fast model gets wrong (by exactly +1).
_HARD_OPERATORS = frozenset("*x/")


@dataclass(frozen=True)
class Task:
    left: int
    operator: str  # "+", "-", "*", "x" or "/" ("X" is normalised to "x")
    right: int

    @property
    def question(self) -> str:
        return f"{self.left} {self.operator} {self.right}"


def parse_task(prompt: str) -> Task | None:
    """The first ``What is A OP B?`` in the prompt, or None."""
    match = _QUESTION.search(prompt)
    if match is None:
        return None
    return Task(int(match[1]), match[2].lower(), int(match[3]))


def correct_answer(task: Task) -> int | None:
    """The right result; None for a division by zero."""
    a, b = task.left, task.right
    if task.operator == "+":
        return a + b
    if task.operator == "-":
        return a - b
    if task.operator in ("*", "x"):
        return a * b
    if b == 0:
        return None
    quotient = abs(a) // abs(b)  # rounded toward zero, unlike Python's floor division
    return quotient if (a < 0) == (b < 0) else -quotient


def model_answer(task: Task, model: str) -> int | None:
    """What `model` answers: smart is right; fast is off by +1 on *, x and /. None means undefined."""
    right = correct_answer(task)
    if right is None or model == "smart" or task.operator not in _HARD_OPERATORS:
        return right
    return right + 1


def answer_line(answer: int | None) -> str:
    return f"{ANSWER_PREFIX}{UNDEFINED if answer is None else answer}"
