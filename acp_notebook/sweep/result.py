"""SweepResult: a sweep's rows, their per-model summary with intervals, paired comparisons, exports and plots.

Plain data built after a sweep ends (or from a run directory); nothing mutates it afterwards,
so it is safe to read from any thread.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any

from . import export, plots
from .columns import (
    FIXED_COLUMNS,
    IDENTITY_COLUMNS,
    TIME_COLUMNS,
    explanation_column,
    ordered_columns,
    score_column,
    scorer_names_in,
)
from .. import _term
from .stats import (Interval, bootstrap_mean_interval, paired_proportions_interval, percentile, sign_test,
                    wilson_interval)
from .conversation import TrialRecord, load_trial, render_trial
from .extras import require
from .store import read_results, rows_to_csv

__all__ = ["Comparison", "SweepResult", "SweepSummary", "load_run"]


def _numbers(rows: Iterable[Mapping[str, Any]], column: str) -> list[float]:
    return [float(r[column]) for r in rows
            if isinstance(r.get(column), (int, float)) and not isinstance(r.get(column), bool)]


def score_interval(rows: Sequence[Mapping[str, Any]], scorer: str, *, errors_as_zero: bool = False) -> Interval | None:
    """The mean score with its 95% interval.

    With one 0/1 score per sample, the Wilson interval of the proportion; otherwise (repeats, graded
    scores) a seeded percentile bootstrap over the per-sample means, because trials of one sample are
    not independent (its bounds stay within the scores' range, unlike a t interval on few samples).
    Failed trials are left out, or count as 0 with ``errors_as_zero``.
    """
    column = score_column(scorer)
    by_sample: dict[str, list[float]] = {}
    for row in rows:
        value = row.get(column)
        if value is None and errors_as_zero and row.get("status") != "ok":
            value = 0.0
        if value is not None:
            by_sample.setdefault(str(row.get("sample_id")), []).append(float(value))
    if not by_sample:
        return None
    values = [v for group in by_sample.values() for v in group]
    if all(v in (0.0, 1.0) for v in values) and all(len(g) == 1 for g in by_sample.values()):
        return wilson_interval(int(sum(values)), len(values))
    return bootstrap_mean_interval([math.fsum(g) / len(g) for g in by_sample.values()])


# --- summary ---------------------------------------------------------------------------------
class SweepSummary(list):
    """Per-model summary rows (dicts), printable as a table; ``to_pandas()`` for a DataFrame."""

    def __init__(self, rows: Iterable[dict[str, Any]] = (), scorers: Sequence[str] = ()) -> None:
        super().__init__(rows)
        self.scorers = list(scorers)

    @property
    def columns(self) -> list[str]:
        return list(self[0]) if self else ["model"]

    def to_pandas(self):
        pd = _require_pandas()
        return pd.DataFrame(list(self), columns=self.columns).set_index("model")

    def _table(self) -> tuple[list[str], list[list[str]]]:
        """Header and cells of what a table shows (``SHOWN``): the counts, each score as 'mean [low, high] n=N',
        median latency and tokens, cost per trial. Optional columns no model has a value in are left out; the
        rest of the summary (p90s, time to first token, token and cost totals) is in ``to_pandas()``."""
        header, getters = [], []
        for column, label in SHOWN:
            if column == "scores":
                for name in self.scorers:
                    header.append(f"{name} [95% CI]")
                    getters.append(lambda row, name=name: _format_score(row, name))
            elif column in _ALWAYS_SHOWN or any(row.get(column) not in (None, 0) for row in self):
                header.append(label)
                getters.append(lambda row, column=column: _format(column, row.get(column), row))
        return header, [[get(row) for get in getters] for row in self]

    def text(self, columns: int | None = None) -> str:
        """The table within ``columns`` characters (default: the terminal's width); figures are never
        broken: columns that do not fit continue in a block below, which repeats the model."""
        header, cells = self._table()
        return _term.table(header, cells, columns, right=range(1, len(header)), rule=True)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        header, cells = self._table()
        # nowrap on every value (JupyterLab's own table rules win over a style inherited from the table): an
        # interval is one figure, never broken at its spaces, and a model id stays whole. Headers may wrap.
        cell = "style='white-space: nowrap'"
        # A header may break after its underscores (median_<wbr>tokens): a long one no longer sets its column's width.
        head = "".join(f"<th>{escape(c).replace('_', '_<wbr>')}</th>" for c in header)
        body = "".join("<tr>" + "".join(f"<td {cell}>{escape(c)}</td>" for c in line) + "</tr>" for line in cells)
        return f"<table class='acp-sweep-summary'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# (summary key, table header) of the columns a printed or HTML summary shows, in order; "scores" stands for
# every scorer's column. Narrow enough for a 1280 px notebook with three scorers.
SHOWN = (("model", "model"), ("trials", "trials"), ("ok", "ok"), ("errors", "errors"), ("timeouts", "timeouts"),
         ("scores", ""), ("latency_median_s", "median_s"), ("tokens_median", "median_tokens"),
         ("cost_per_trial", "cost/trial"))
_ALWAYS_SHOWN = frozenset({"model", "trials", "ok", "errors", "latency_median_s"})


def _format_score(row: Mapping[str, Any], name: str) -> str:
    value = row.get(f"score_{name}")
    if value is None:
        return "-"
    low, high = row.get(f"score_{name}_low"), row.get(f"score_{name}_high")
    interval = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return f"{value:.3f}{interval} n={row.get(f'score_{name}_n')}"


def _format(column: str, value: Any, row: Mapping[str, Any] | None = None) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if column.startswith("cost"):
            currency = (row or {}).get("currency")
            return f"{value:.6g}" + (f" {currency}" if currency else "")
        if column.endswith("_s"):
            return f"{value:.3f}"
        return str(int(value)) if value.is_integer() else f"{value:.1f}"
    return str(value)


def summarise(rows: Sequence[Mapping[str, Any]], models: Sequence[str], scorers: Sequence[str], *,
              errors_as_zero: bool = False) -> SweepSummary:
    summary = SweepSummary(scorers=scorers)
    for model in models:
        group = [r for r in rows if r.get("model") == model]
        if not group:
            continue
        ok = [r for r in group if r.get("status") == "ok"]
        entry: dict[str, Any] = {"model": model, "trials": len(group), "ok": len(ok),
                                 "errors": len(group) - len(ok),
                                 "timeouts": sum(1 for r in group if r.get("status") == "timeout")}
        for name in scorers:
            interval = score_interval(group, name, errors_as_zero=errors_as_zero)
            entry.update({f"score_{name}": interval.estimate if interval else None,
                          f"score_{name}_low": interval.low if interval else None,
                          f"score_{name}_high": interval.high if interval else None,
                          f"score_{name}_n": interval.n if interval else 0})
        costs = _numbers(group, "cost")
        currencies = sorted({str(r["currency"]) for r in group if r.get("currency")})
        entry.update({
            "latency_median_s": percentile(_numbers(ok, "duration_s"), 50),
            "latency_p90_s": percentile(_numbers(ok, "duration_s"), 90),
            "ttft_median_s": percentile(_numbers(ok, "ttft_s"), 50),
            "ttft_p90_s": percentile(_numbers(ok, "ttft_s"), 90),
            "input_tokens_median": percentile(_numbers(ok, "input_tokens"), 50),
            "output_tokens_median": percentile(_numbers(ok, "output_tokens"), 50),
            "tokens_median": percentile(_numbers(ok, "total_tokens"), 50),
            "tokens_total": int(sum(_numbers(group, "total_tokens"))) if _numbers(group, "total_tokens") else None,
            "cost_total": round(math.fsum(costs), 10) if costs else None,
            "cost_per_trial": round(math.fsum(costs) / len(costs), 10) if costs else None,
            "currency": "/".join(currencies) if currencies else None,
        })
        summary.append(entry)
    return summary


# --- comparison ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    """Model ``a`` against model ``b`` on one scorer, over the samples both were scored on.

    ``difference`` is mean(a) - mean(b) over those samples, with a 95% interval that stays within
    what a difference can be: on 0/1 scores Newcombe's hybrid score interval for paired proportions
    (``interval`` = "newcombe"), otherwise a seeded percentile bootstrap of the per-sample
    differences ("bootstrap"); see acp_notebook.sweep.stats. ``p_value`` is the exact two-sided sign test on which model did better
    per sample (on 0/1 scores with one trial per sample this is the exact McNemar test).
    """

    a: str
    b: str
    scorer: str
    samples: int
    mean_a: float | None
    mean_b: float | None
    difference: float | None
    low: float | None
    high: float | None
    a_better: int
    b_better: int
    ties: int
    p_value: float
    test: str
    interval: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        if not self.samples:
            return f"{self.a} vs {self.b} on {self.scorer}: no sample was scored for both"
        interval = f" [{self.low:+.3f}, {self.high:+.3f}]" if self.low is not None else ""
        method = {"newcombe": ", Newcombe", "bootstrap": ", bootstrap"}.get(self.interval, "")
        return (f"{self.a} vs {self.b} on {self.scorer}, {self.samples} shared samples: {self.mean_a:.3f} vs "
                f"{self.mean_b:.3f}, difference {self.difference:+.3f}{interval} (95% CI{method}); {self.a} better on "
                f"{self.a_better}, {self.b} better on {self.b_better}, {self.ties} ties; {self.test} "
                f"p = {self.p_value:.3g}")

    def __repr__(self) -> str:
        return f"<Comparison {self}>"

    def _repr_html_(self) -> str:
        return f"<p class='acp-sweep-comparison'>{escape(str(self))}</p>"


def _per_sample_means(rows: Iterable[Mapping[str, Any]], model: str, column: str) -> dict[str, float]:
    groups: dict[str, list[float]] = {}
    for row in rows:
        if row.get("model") == model and row.get(column) is not None:
            groups.setdefault(str(row["sample_id"]), []).append(float(row[column]))
    return {sample: math.fsum(values) / len(values) for sample, values in groups.items()}


def compare(rows: Sequence[Mapping[str, Any]], a: str, b: str, scorer: str) -> Comparison:
    column = score_column(scorer)
    left, right = _per_sample_means(rows, a, column), _per_sample_means(rows, b, column)
    shared = [s for s in left if s in right]
    differences = [left[s] - right[s] for s in shared]
    a_better = sum(1 for d in differences if d > 0)
    b_better = sum(1 for d in differences if d < 0)
    binary = all(v in (0.0, 1.0) for s in shared for v in (left[s], right[s]))
    test = "exact McNemar" if binary else "exact sign test"
    if not shared:
        return Comparison(a, b, scorer, 0, None, None, None, None, None, 0, 0, 0, 1.0, test)
    if binary:
        both = sum(1 for s in shared if left[s] == right[s] == 1.0)
        interval = paired_proportions_interval(both, a_better, b_better, len(shared) - both - a_better - b_better)
    else:
        interval = bootstrap_mean_interval(differences)
    return Comparison(a, b, scorer, len(shared), math.fsum(left[s] for s in shared) / len(shared),
                      math.fsum(right[s] for s in shared) / len(shared), interval.estimate, interval.low,
                      interval.high, a_better, b_better, len(shared) - a_better - b_better,
                      sign_test(a_better, b_better), test, interval.method)


def _require_pandas():
    return require("pandas", "SweepResult.to_pandas()", "pandas")


def _when(text: Any) -> str:
    try:
        return datetime.fromisoformat(str(text)).strftime("%Y-%m-%d %H:%M:%S %Z").strip()
    except ValueError:
        return str(text)


# --- the result ------------------------------------------------------------------------------
class SweepResult:
    """What ``acpnb.sweep`` returns: one row per (sample, model, repeat), and the run's manifest as ``metadata``.

    ``rows`` are plain dicts (see ``acp_notebook.sweep.COLUMN_SOURCES`` for what each key holds);
    ``path`` is the run directory or results file, when there is one.
    """

    def __init__(self, rows: Iterable[Mapping[str, Any]], metadata: Mapping[str, Any] | None = None, *,
                 path: str | os.PathLike[str] | None = None,
                 kept: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.rows: list[dict[str, Any]] = [dict(row) for row in rows]
        self.metadata: dict[str, Any] = copy.deepcopy(dict(metadata or {}))
        self.path = Path(path) if path is not None else None
        # trial id -> {"trajectory", "diff"}: what a sweep without a run directory kept in memory for show()
        self._kept = dict(kept or {})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SweepResult:
        """Reopen a run directory or a results file (.jsonl, .csv with its .meta.json, .json)."""
        rows, metadata = read_results(path)
        order = {m: i for i, m in enumerate(metadata.get("models") or [])}
        rows.sort(key=lambda r: (r.get("sample_index") or 0, order.get(r.get("model"), len(order)),
                                 r.get("repeat") or 0))
        return cls(rows, metadata, path=path)

    # --- reading ---------------------------------------------------------
    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.rows[index]

    @property
    def models(self) -> list[str]:
        """The models with rows, in the order the sweep listed them."""
        seen = dict.fromkeys([*(self.metadata.get("models") or []), *(str(r.get("model")) for r in self.rows)])
        present = {str(r.get("model")) for r in self.rows}
        return [m for m in seen if m in present]

    @property
    def scorers(self) -> list[str]:
        named = [s["name"] for s in self.metadata.get("scorers") or [] if isinstance(s, Mapping) and "name" in s]
        return list(dict.fromkeys([*named, *scorer_names_in(k for r in self.rows for k in r)]))

    @property
    def metadata_columns(self) -> list[str]:
        """The dataset's own fields carried into the rows."""
        known = set(FIXED_COLUMNS) | {score_column(n) for n in self.scorers} | {
            explanation_column(n) for n in self.scorers}
        return list(dict.fromkeys(k for r in self.rows for k in r if k not in known))

    @property
    def ok(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r.get("status") == "ok"]

    @property
    def failed(self) -> list[dict[str, Any]]:
        """Rows whose trial did not complete as asked: errors and timeouts."""
        return [r for r in self.rows if r.get("status") != "ok"]

    def columns(self, *, full: bool = True) -> list[str]:
        return ordered_columns(self.scorers, self.metadata_columns, full=full)

    def summary(self, *, errors_as_zero: bool = False) -> SweepSummary:
        """Per model: trials, ok, errors, timeouts; each score's mean with its 95% interval and n; median and p90
        latency and time to first token; token medians and total; cost (total and per trial).

        Scores, latency and tokens are over the trials that succeeded (``errors_as_zero=True`` counts a failed
        trial as score 0); cost adds up every trial that reported one.
        """
        return summarise(self.rows, self.models, self.scorers, errors_as_zero=errors_as_zero)

    def compare(self, a: str, b: str, *, scorer: str | None = None) -> Comparison:
        """Model ``a`` against ``b`` on ``scorer`` (default: the first) over the samples both were scored on."""
        for model in (a, b):
            if model not in self.models:
                raise ValueError(f"no rows for model {model!r}; this result has {', '.join(self.models) or 'none'}")
        if not self.scorers:
            raise ValueError("this sweep has no scores to compare: run it with scorers=[...] (e.g. 'exact')")
        name = self.scorers[0] if scorer is None else scorer
        if name not in self.scorers:
            raise ValueError(f"no scorer {name!r}; this result has {', '.join(self.scorers)}")
        return compare(self.rows, a, b, name)

    # --- exports ---------------------------------------------------------
    def to_pandas(self, *, full: bool = False):
        """One row per trial: model, sample id, repeat, status, scores, duration, ttft, tokens, cost, text, then
        bookkeeping; columns no trial filled are left out. ``full=True``: every column. Needs pandas."""
        pd = _require_pandas()
        columns = self.columns(full=full)
        if not full:
            columns = [c for c in columns
                       if c in IDENTITY_COLUMNS or any(r.get(c) not in (None, "") for r in self.rows)]
        frame = pd.DataFrame([{c: r.get(c) for c in columns} for r in self.rows], columns=columns)
        for column in TIME_COLUMNS:
            if column in frame:
                frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601")
        frame.attrs["metadata"] = copy.deepcopy(self.metadata)
        return frame

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str | None:
        """Every column as CSV (config as JSON); without a path, return the text. Metadata goes to PATH.meta.json."""
        text = rows_to_csv(self.rows, self.columns())
        if path is None:
            return text
        Path(path).write_text(text, encoding="utf-8")
        Path(f"{os.fspath(path)}.meta.json").write_text(json.dumps(self.metadata, indent=1, default=str),
                                                        encoding="utf-8")
        return None

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str | None:
        """``{"metadata": ..., "rows": [...]}``; without a path, return the text."""
        text = json.dumps({"metadata": self.metadata, "rows": self.rows}, indent=1, default=str)
        if path is None:
            return text
        Path(path).write_text(text, encoding="utf-8")
        return None

    def export_atif(self, directory: str | os.PathLike[str]) -> list[Path]:
        """Each trial's trajectory in ATIF (Harbor's Agent Trajectory Interchange Format) as
        ``DIR/<trial id>.json``, built with the ``atif`` package's models; steps come from the run directory's
        recordings. Needs ``pip install 'acp-notebook[eval]'``. Returns the files written."""
        return export.export_atif(self, directory)

    def export_inspect(self, path: str | os.PathLike[str]) -> list[Path]:
        """An Inspect AI eval log (``inspect view`` opens it, ``inspect_ai.log.read_eval_log`` reads it) per
        model: ``path`` for one model, ``<stem>-<model>.eval`` beside it for several (inside it, if ``path`` is
        a directory). Needs ``pip install 'acp-notebook[eval]'``. Returns the files written."""
        return export.export_inspect(self, path)

    def trial(self, row: int | str | Mapping[str, Any]) -> dict[str, Any]:
        """A row by position, by trial id (or a unique prefix of one), or the row itself."""
        if isinstance(row, Mapping):
            return dict(row)
        if isinstance(row, int) and not isinstance(row, bool):
            return self.rows[row]
        found = [r for r in self.rows if str(r.get("trial_id", "")).startswith(str(row))]
        if len(found) != 1:
            raise KeyError(f"{'no' if not found else len(found)} trial ids start with {row!r}; give a row number "
                           f"(0-{len(self.rows) - 1}) or more of the trial id")
        return found[0]

    def show(self, row: int | str | Mapping[str, Any] = 0, *, file: Any = None) -> None:
        """Print a trial: the prompt, the agent's steps and tool calls (from its recording), the scores with
        their explanations (a check's output), and its workspace diff. ``row``: a number, a trial id or a row."""
        print(render_trial(self.trial_record(self.trial(row)), self.scorers), file=file)

    def trial_record(self, row: Mapping[str, Any]) -> TrialRecord:
        """The trial's conversation and diff, from the run directory or memory."""
        run = self.path if self.path is not None and self.path.is_dir() else None
        return load_trial(run, row, self._kept.get(str(row.get("trial_id"))))

    def plot(self, kind: str | None = None, *, scorer: str | None = None, metric: str = "duration_s", ax: Any = None):
        """A matplotlib Figure: ``"scores"`` (each model's mean score with its 95% interval), ``"cost"`` (score
        against cost per trial) or ``"latency"`` (``metric`` per model; any numeric column). Default: scores
        when the sweep has scorers, else latency. Needs matplotlib (``pip install 'acp-notebook[plot]'``)."""
        kind = kind or ("scores" if self.scorers and metric == "duration_s" else "latency")
        if kind == "scores":
            return plots.scores(self, scorer=scorer, ax=ax)
        if kind == "cost":
            return plots.cost(self, scorer=scorer, ax=ax)
        if kind == "latency":
            return plots.latency(self, metric=metric, ax=ax)
        raise ValueError(f"plot kind is 'scores', 'cost' or 'latency', not {kind!r}")

    # --- display ---------------------------------------------------------
    def _counts(self) -> str:
        failed = len(self.failed)
        timeouts = sum(1 for r in self.rows if r.get("status") == "timeout")
        text = f"{len(self.rows)} trials, {len(self.rows) - failed} ok, {failed} failed"
        return text + (f" ({timeouts} timed out)" if timeouts else "")

    def _facts(self) -> list[str]:
        meta = self.metadata
        facts = [self._counts()]
        if meta.get("samples") is not None:
            facts.append(f"{meta['samples']} sample(s) x {len(meta.get('models') or [])} model(s) x "
                         f"{meta.get('repeats', 1)} repeat(s)")
        if meta.get("skipped"):
            facts.append(f"{meta['skipped']} resumed from {meta.get('out')}")
        if meta.get("stopped"):
            facts.append(f"stopped early: {meta['stopped']}")
        if meta.get("finished"):
            facts.append(f"finished {_when(meta['finished'])}")
        return facts

    def __repr__(self) -> str:
        return f"<SweepResult {self._counts()}; models: {', '.join(self.models)}>"

    def __str__(self) -> str:
        return f"{' · '.join(self._facts())}\n{self.summary()}"

    def _repr_html_(self) -> str:
        shown = ["model", "sample_id", "repeat", "status", *(score_column(n) for n in self.scorers), "duration_s",
                 "text", "error"]
        head = "".join(f"<th>{escape(c)}</th>" for c in shown)
        body = []
        limit = 20
        for row in self.rows[:limit]:
            cells = []
            for column in shown:
                value = row.get(column)
                text = value if isinstance(value, str) else _format(column, value)
                text = text if len(text) <= 80 else text[:77] + "..."
                style = " style='color:#b00'" if column == "status" and value != "ok" else ""
                cells.append(f"<td{style}>{escape(text)}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        more = (f"<p>... and {len(self.rows) - limit} more rows (<code>result.rows</code>, "
                "<code>result.to_pandas()</code>)</p>") if len(self.rows) > limit else ""
        return ("<div class='acp-sweep-result'>"
                f"<p><b>Sweep</b>: {escape(' · '.join(self._facts()))}</p>{self.summary()._repr_html_()}"
                f"<details><summary>trials</summary><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(body)}</tbody></table>{more}</details></div>")


def load_run(path: str | os.PathLike[str]) -> SweepResult:
    """Reopen a sweep's run directory (``out="runs/name"``) or results file as a SweepResult."""
    return SweepResult.load(path)
