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
and 100% with ``smart``.

File edits (agentic tasks in a workspace; ``notebooks/tasks/`` relies on them): a prompt containing
``In PATH, replace `OLD` with `NEW``` or ``Create [the file] PATH containing `TEXT``` (backticks as
shown, keywords in any case, the first such sentence counts) is an edit, done through the client's
fs methods with a permission request for each. ``create`` writes TEXT and a newline, for both models.
``replace``: ``smart`` reads PATH and writes it back with every OLD replaced by NEW (OLD missing: it
says so and writes nothing); ``fast`` is careless on purpose: it writes NEW and a newline as the whole
file, without reading it. So a task that adds a file passes with both models, and one that changes a
line in a larger file passes with ``smart`` only. Pure functions; no state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["ANSWER_PREFIX", "UNDEFINED", "Edit", "Task", "answer_line", "correct_answer", "edited_text", "model_answer",
           "parse_edit", "parse_task"]

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


_REPLACE = re.compile(r"\bin\s+`?(?P<path>[^\s`,]+?)`?\s*,\s*replace\s+`(?P<old>[^`\n]+)`\s+with\s+`(?P<new>[^`\n]*)`",
                      re.IGNORECASE)
_CREATE = re.compile(r"\bcreate\s+(?:the\s+file\s+|a\s+file\s+|file\s+)?`?(?P<path>[^\s`]+?)`?\s+containing\s+"
                     r"`(?P<new>[^`\n]*)`", re.IGNORECASE)


@dataclass(frozen=True)
class Edit:
    action: Literal["replace", "create"]
    path: str      # as written; relative paths are inside the session's cwd
    old: str = ""  # replace: the text to find
    new: str = ""  # replace: its replacement; create: the file's text


def parse_edit(prompt: str) -> Edit | None:
    """The first edit sentence in the prompt (see the contract above), or None."""
    found = [(m.start(), action, m) for action, pattern in (("replace", _REPLACE), ("create", _CREATE))
             if (m := pattern.search(prompt)) is not None]
    if not found:
        return None
    _, action, match = min(found, key=lambda item: item[0])
    old = match["old"] if action == "replace" else ""
    return Edit(action, match["path"], old, match["new"])


def edited_text(edit: Edit, current: str | None, model: str) -> str | None:
    """What `model` writes to the file: None when smart cannot find the text to replace."""
    if edit.action == "create" or model != "smart":
        return edit.new + "\n"
    if current is None or edit.old not in current:
        return None
    return current.replace(edit.old, edit.new)
