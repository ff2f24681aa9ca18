"""The evaluation dataset of the sweep tests: 40 arithmetic questions with targets, half of them + and -.

By the demo agent's task contract (acp_notebook/demo/tasks.py) demo:smart answers all of them right
and demo:fast only the + and - ones, so the expected accuracies are known: 1.0 and 0.5.
"""

from __future__ import annotations

import json
from pathlib import Path

from acp_notebook.sweep import exact, numeric

TEMPLATE = "What is {a} {op} {b}?"
ANSWER = r"Answer:\s*(\S+)"
SAMPLES = 40
EXPECTED = {"fast": 0.5, "smart": 1.0}


def _result(a: int, op: str, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    quotient = abs(a) // abs(b)  # rounded toward zero, as the task contract says
    return quotient if (a < 0) == (b < 0) else -quotient


def records() -> list[dict]:
    """Ten questions per operator; some operands negative; no division by zero."""
    out = []
    for index in range(SAMPLES):
        op = "+-*/"[index % 4]
        a = (index * 7) % 23 - 5
        b = index % 6 + 2
        kind = "easy" if op in "+-" else "hard"
        out.append({"id": f"q{index:02d}", "a": a, "op": op, "b": b, "kind": kind, "target": str(_result(a, op, b))})
    return out


def write_dataset(path: Path) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records()), encoding="utf-8")
    return path


def scorers() -> list:
    """The two scorers of the evaluation: the Answer line compared exactly, and its number."""
    return [exact(name="exact", extract=ANSWER), numeric(name="numeric", extract=ANSWER)]


def without_timings(rows: list[dict]) -> list[dict]:
    """Rows as two runs of the same sweep must agree on: no timings, no agent-assigned session ids."""
    varying = {"duration_s", "ttft_s", "started_at", "ended_at", "session_id"}
    return [{k: v for k, v in row.items() if k not in varying} for row in rows]
