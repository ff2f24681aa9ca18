"""Scorers: what turns a trial's row into ``score_<name>`` (and ``explanation_<name>``).

Built-ins (exact, includes, regex, numeric, json_field), any callable ``(row) -> score | (score,
explanation)``, and a model-graded scorer that asks another ``agent:model`` through ACP. Scorers
are called on the background loop thread once a trial has finished, one row at a time; plain
callables run in a worker thread so a slow one does not hold up the turns in flight. A scorer
must not change the row it is given.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union

from .checks import WorkspaceCallable, takes_workspace
from .hints import PYTHON, Syntax
from .score import GraderReply, GradingContext, Score, Scorer, check_name, to_score

__all__ = [
    "GraderReply",
    "GradingContext",
    "ModelGraded",
    "Score",
    "Scorer",
    "as_scorers",
    "exact",
    "includes",
    "json_field",
    "model_graded",
    "numeric",
    "parse_scorer",
    "regex",
    "scorer",
]

_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")

Extract = Union[str, Callable[[str], Any], None]


def _extract(text: str, extract: Extract) -> str | None:
    """The part of a reply that is compared: all of it (stripped), a regex's group 1 (last match), or a callable's."""
    if extract is None:
        return text.strip()
    if callable(extract):
        value = extract(text)
        return None if value is None else str(value).strip()
    matches = list(re.finditer(extract, text, re.MULTILINE))
    if not matches:
        return None
    last = matches[-1]
    return (last.group(1) if last.re.groups else last.group(0)).strip()


class _TargetScorer(Scorer):
    """A built-in that compares (part of) the reply with the sample's target."""

    def __init__(self, name: str, extract: Extract) -> None:
        self.name = check_name(name)
        if isinstance(extract, str):
            re.compile(extract)  # a bad pattern fails now, not on the first row
        self.extract = extract

    def score(self, row: Mapping[str, Any]) -> Any:
        target = row.get("target")
        if target is None:
            return None, "the sample has no target"
        answer = _extract(str(row.get("text") or ""), self.extract)
        if answer is None:
            return 0.0, f"no answer found (extract={self.extract!r})"
        return self.compare(answer, target)

    def compare(self, answer: str, target: Any) -> Any:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        extract = self.extract if not callable(self.extract) else getattr(self.extract, "__name__", "callable")
        return {"name": self.name, "kind": type(self).__name__, "extract": extract}


class Exact(_TargetScorer):
    def __init__(self, name: str = "exact", *, extract: Extract = None, ignore_case: bool = True) -> None:
        super().__init__(name, extract)
        self.ignore_case = ignore_case

    def compare(self, answer: str, target: Any) -> Any:
        left, right = answer, str(target).strip()
        if self.ignore_case:
            left, right = left.casefold(), right.casefold()
        return left == right, None if left == right else f"{answer!r} != {str(target)!r}"


class Includes(_TargetScorer):
    def __init__(self, name: str = "includes", *, extract: Extract = None, ignore_case: bool = True) -> None:
        super().__init__(name, extract)
        self.ignore_case = ignore_case

    def compare(self, answer: str, target: Any) -> Any:
        needle, haystack = str(target).strip(), answer
        if self.ignore_case:
            needle, haystack = needle.casefold(), haystack.casefold()
        found = needle in haystack
        return found, None if found else f"{str(target)!r} not in the reply"


class Regex(Scorer):
    """Passes when the pattern matches the reply; ``{target}`` in the pattern stands for the escaped target."""

    def __init__(self, pattern: str, name: str = "regex", *, ignore_case: bool = False) -> None:
        self.name = check_name(name)
        self.pattern = pattern
        self.flags = re.MULTILINE | (re.IGNORECASE if ignore_case else 0)
        re.compile(pattern.replace("{target}", ""), self.flags)

    def score(self, row: Mapping[str, Any]) -> Any:
        pattern = self.pattern
        if "{target}" in pattern:
            if row.get("target") is None:
                return None, "the pattern names {target} but the sample has no target"
            pattern = pattern.replace("{target}", re.escape(str(row["target"]).strip()))
        found = re.search(pattern, str(row.get("text") or ""), self.flags) is not None
        return found, None if found else f"no match for {pattern!r}"

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "Regex", "pattern": self.pattern}


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


class Numeric(_TargetScorer):
    """The last number in the (extracted) reply against the numeric target, within ``tolerance``."""

    def __init__(self, name: str = "numeric", *, tolerance: float = 0.0, relative: bool = False,
                 extract: Extract = None) -> None:
        super().__init__(name, extract)
        if not isinstance(tolerance, (int, float)) or tolerance < 0:
            raise ValueError(f"tolerance must be a number >= 0, not {tolerance!r}")
        self.tolerance = float(tolerance)
        self.relative = relative

    def compare(self, answer: str, target: Any) -> Any:
        expected = target if isinstance(target, (int, float)) and not isinstance(target, bool) \
            else _number(str(target).strip())
        if expected is None:
            return None, f"the target {target!r} is not a number"
        numbers = _NUMBER.findall(answer)
        got = _number(numbers[-1]) if numbers else None
        if got is None:
            return 0.0, "no number in the reply"
        allowed = self.tolerance * abs(expected) if self.relative else self.tolerance
        ok = abs(got - expected) <= allowed
        return ok, None if ok else f"{got:g} != {float(expected):g}"

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "tolerance": self.tolerance, "relative": self.relative}


def _json_in(text: str) -> Any:
    """The reply as JSON: all of it, else the last ```json fenced block, else the outermost {...}."""
    candidates = [text.strip()]
    candidates += [m.group(1) for m in re.finditer(r"```(?:json)?\s*\n(.*?)```", text, re.DOTALL)][::-1]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start:end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise ValueError("no JSON in the reply")


def _dig(data: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(data, Mapping) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.lstrip("-").isdigit() and -len(data) <= int(part) < len(data):
            data = data[int(part)]
        else:
            raise KeyError(part)
    return data


def _same(got: Any, expected: Any) -> bool:
    if got == expected:
        return True
    left, right = _number(str(got)), _number(str(expected))
    if left is not None and right is not None and not isinstance(got, bool):
        return left == right
    return str(got).strip() == str(expected).strip()


class JsonField(Scorer):
    """A field of the JSON in the reply (a dotted path, list indices allowed) against ``expected`` or the target."""

    _UNSET = object()

    def __init__(self, field: str, expected: Any = _UNSET, name: str | None = None) -> None:
        if not isinstance(field, str) or not field:
            raise ValueError("json_field needs the field's path, e.g. json_field('answer') or 'result.value'")
        self.field = field
        self.expected = expected
        self.name = check_name(name if name is not None else "json_" + re.sub(r"\W", "_", field))

    def score(self, row: Mapping[str, Any]) -> Any:
        expected = row.get("target") if self.expected is JsonField._UNSET else self.expected
        if expected is None:
            return None, "nothing to compare with: the sample has no target"
        try:
            got = _dig(_json_in(str(row.get("text") or "")), self.field)
        except ValueError as exc:
            return 0.0, str(exc)
        except KeyError as exc:
            return 0.0, f"the reply's JSON has no {self.field!r} (missing {exc.args[0]!r})"
        ok = _same(got, expected)
        return ok, None if ok else f"{self.field} = {got!r}, expected {expected!r}"

    def describe(self) -> dict[str, Any]:
        out = {"name": self.name, "kind": "JsonField", "field": self.field}
        if self.expected is not JsonField._UNSET:
            out["expected"] = self.expected
        return out


class CallableScorer(Scorer):
    """A plain function ``(row) -> score | (score, explanation)``, run in a worker thread."""

    def __init__(self, function: Callable[[Mapping[str, Any]], Any], name: str) -> None:
        self.function = function
        self.name = check_name(name)

    async def ascore(self, row: Mapping[str, Any], context: GradingContext) -> Score:
        return to_score(await asyncio.to_thread(self.function, row), self.name)

    def score(self, row: Mapping[str, Any]) -> Any:
        return self.function(row)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "callable",
                "function": getattr(self.function, "__qualname__", repr(self.function))}


# --- model-graded ---------------------------------------------------------------------------
DEFAULT_RUBRIC = "The answer is correct when it gives the same final result as the reference answer."
GRADER_TEMPLATE = """You are grading an answer to a task.

[Task]
{prompt}

[Reference answer]
{target}

[Answer to grade]
{text}

[Rubric]
{rubric}

Explain your judgement briefly, then end with a line of its own: "GRADE: C" if the answer is
correct under the rubric, "GRADE: P" if it is partly correct, "GRADE: I" if it is incorrect."""
_GRADE = re.compile(r"GRADE:\s*(C|P|I|[01](?:\.\d+)?)\b", re.IGNORECASE)
_GRADE_VALUES = {"c": 1.0, "p": 0.5, "i": 0.0}


def parse_grade(reply: str) -> float | None:
    """The last ``GRADE:`` line: C = 1, P = 0.5, I = 0, or a number from 0 to 1; None when there is none."""
    matches = _GRADE.findall(reply)
    if not matches:
        return None
    last = matches[-1].lower()
    return _GRADE_VALUES[last] if last in _GRADE_VALUES else min(1.0, float(last))


class ModelGraded(Scorer):
    """Asks ``grader`` (an ``agent:model`` id) to grade the reply against the rubric; the reply is the explanation."""

    def __init__(self, grader: str, *, rubric: str = DEFAULT_RUBRIC, name: str = "graded",
                 template: str = GRADER_TEMPLATE, parse: Callable[[str, Mapping[str, Any]], Any] | None = None,
                 timeout: float | None = 300) -> None:
        if not isinstance(grader, str) or not grader.strip():
            raise ValueError(f"the grader is a model id such as 'claude:haiku', not {grader!r}")
        self.grader = grader
        self.rubric = rubric
        self.template = template
        self.parse = parse
        self.timeout = timeout
        self.name = check_name(name)

    def prompt_for(self, row: Mapping[str, Any]) -> str:
        target = row.get("target")
        values = {**row, "target": "(none given)" if target is None else target, "rubric": self.rubric,
                  "text": row.get("text") or "", "prompt": row.get("prompt") or ""}
        return self.template.format_map(_Blank(values))

    async def ascore(self, row: Mapping[str, Any], context: GradingContext) -> Score:
        reply = await context.ask(self.grader, self.prompt_for(row), timeout=self.timeout)
        if self.parse is not None:
            verdict = to_score(self.parse(reply.text, row), self.name)
            return Score(verdict.value, verdict.explanation or reply.text, reply.cost)
        value = parse_grade(reply.text)
        explanation = reply.text if value is not None else f"no GRADE line in the grader's reply: {reply.text}"
        return Score(value, explanation, reply.cost)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": "ModelGraded", "grader": self.grader, "rubric": self.rubric}


class _Blank(dict):
    """Template values where an unknown {field} stays as written rather than failing a whole sweep."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


# --- constructors ----------------------------------------------------------------------------
def exact(*, name: str = "exact", extract: Extract = None, ignore_case: bool = True) -> Scorer:
    """1 when the reply (or the part ``extract`` picks: a regex's group 1, or a function) equals the target."""
    return Exact(name, extract=extract, ignore_case=ignore_case)


def includes(*, name: str = "includes", extract: Extract = None, ignore_case: bool = True) -> Scorer:
    """1 when the target occurs in the reply."""
    return Includes(name, extract=extract, ignore_case=ignore_case)


def regex(pattern: str, *, name: str = "regex", ignore_case: bool = False) -> Scorer:
    """1 when ``pattern`` matches the reply; ``{target}`` in it stands for the (escaped) target."""
    return Regex(pattern, name, ignore_case=ignore_case)


def numeric(*, name: str = "numeric", tolerance: float = 0.0, relative: bool = False, extract: Extract = None) -> Scorer:
    """1 when the last number in the reply is within ``tolerance`` of the target (``relative``: a fraction of it)."""
    return Numeric(name, tolerance=tolerance, relative=relative, extract=extract)


def json_field(field: str, expected: Any = JsonField._UNSET, *, name: str | None = None) -> Scorer:
    """1 when the reply's JSON has ``field`` (dotted path) equal to ``expected`` (default: the target)."""
    return JsonField(field, expected, name)


def model_graded(grader: str, *, rubric: str = DEFAULT_RUBRIC, name: str = "graded", template: str = GRADER_TEMPLATE,
                 parse: Callable[[str, Mapping[str, Any]], Any] | None = None, timeout: float | None = 300) -> Scorer:
    """Ask ``grader`` (an ``agent:model`` id) to grade each reply; its reply is kept as the explanation.

    The grader gets ``template`` filled with the row's fields (``{prompt}``, ``{target}``, ``{text}``, any
    dataset field) and ``{rubric}``, in a fresh session, and its last ``GRADE: C|P|I`` (or ``GRADE: 0.7``)
    line is the score; ``parse(reply, row)`` replaces that reading (return a score or (score, explanation)).
    """
    return ModelGraded(grader, rubric=rubric, name=name, template=template, parse=parse, timeout=timeout)


def scorer(function: Callable[..., Any], *, name: str | None = None) -> Scorer:
    """Wrap a function ``(row) -> score | (score, explanation)``; ``name`` defaults to the function's name.

    A function with a parameter named ``workspace``, or with two positional parameters, is a check: it is
    called as ``function(row, workspace)`` (a ``pathlib.Path``) in the trial's workspace after the turn."""
    if not callable(function):
        raise TypeError(f"scorer() takes a function (row) -> score, not {function!r}")
    name = name if name is not None else getattr(function, "__name__", "")
    if name == "<lambda>" or not name:
        raise ValueError("a lambda has no usable name: give it one with "
                         "`from acp_notebook.sweep import scorer` and scorer(fn, name='...')")
    if takes_workspace(function):
        return WorkspaceCallable(function, name)
    return CallableScorer(function, name)


_BUILT_INS = {"exact", "includes", "numeric", "regex", "json", "graded"}


def parse_scorer(spec: str, *, extract: Extract = None, syntax: Syntax = PYTHON) -> Scorer:
    """A scorer from a short text: exact, includes, numeric[=TOLERANCE], regex=PATTERN, json=FIELD,
    graded=AGENT:MODEL. ``extract`` applies to exact, includes and numeric."""
    kind, sep, argument = spec.strip().partition("=")
    kind = kind.strip().lower()
    if kind in ("exact", "includes") and not sep:
        return (exact if kind == "exact" else includes)(extract=extract)
    if kind == "numeric":
        tolerance = _number(argument) if sep else 0.0
        if tolerance is None:
            raise ValueError(f"numeric=TOLERANCE takes a number, not {argument!r} ({syntax['scorers']})")
        return numeric(tolerance=tolerance, extract=extract)
    if kind == "regex" and argument:
        return regex(argument)
    if kind == "json" and argument:
        return json_field(argument.strip())
    if kind == "graded" and argument:
        return model_graded(argument.strip())
    raise ValueError(f"unknown scorer {spec!r}: use exact, includes, numeric, numeric=TOLERANCE, regex=PATTERN, "
                     f"json=FIELD or graded=AGENT:MODEL ({syntax['scorers']})")


def as_scorers(items: Any, *, syntax: Syntax = PYTHON) -> list[Scorer]:
    """Scorer objects from what ``scorers=`` was given: scorers, functions, or built-in names; names unique."""
    if items is None:
        return []
    if isinstance(items, (str, Scorer)) or callable(items):
        items = [items]
    out: list[Scorer] = []
    for item in items:
        if isinstance(item, Scorer):
            out.append(item)
        elif isinstance(item, str):
            out.append(parse_scorer(item, syntax=syntax))
        elif callable(item):
            out.append(scorer(item))
        else:
            raise TypeError(f"{syntax['scorers']} takes scorers, functions (row) -> score or names such as "
                            f"'exact', not {item!r}")
    names = [s.name for s in out]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"two scorers are named {', '.join(map(repr, repeated))}, and each becomes a score_<name> "
                         f"column: {syntax['scorer_names']}")
    return out


def needs_grading(scorers: Sequence[Scorer]) -> list[str]:
    """The grader model ids the scorers will ask."""
    return [s.grader for s in scorers if isinstance(s, ModelGraded)]
