"""SweepResult: the rows of a model sweep, their per-model summary, exports (pandas, CSV, JSON) and the latency plot."""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

__all__ = ["COLUMNS", "SweepResult", "SweepSummary", "percentile", "read_rows"]

# One row per (prompt, model, repeat), in this column order everywhere (CSV header, DataFrame, JSON).
COLUMNS: tuple[str, ...] = (
    "agent",            # the agent that served the run (registry name, or the Agent's name with agent=)
    "model",            # the id as requested, e.g. "demo:smart"
    "model_value",      # the value set on the agent's model option ("smart"; the whole id with agent=)
    "confirmed_model",  # the model in force after the set, read back from the agent, in the same namespace as model
    "model_at_end",     # the model the agent reported when the turn ended (an agent may fall back mid-turn)
    "prompt",
    "prompt_index",
    "repeat",
    "status",           # "ok", "error" or "timeout"
    "error",
    "timed_out",
    "text",
    "thoughts",
    "stop_reason",
    "duration_s",       # prompt sent -> prompt response
    "ttft_s",           # prompt sent -> first reply chunk
    "input_tokens",     # the next six: the prompt response's usage, when the agent reports it
    "output_tokens",
    "thought_tokens",
    "total_tokens",
    "cached_read_tokens",
    "cached_write_tokens",
    "context_used",     # from usage_update: tokens in the context window (a fresh session: this run's tokens)
    "context_size",
    "cost",             # from usage_update: the session's cumulative cost (a fresh session: this run's cost)
    "currency",
    "tool_calls",
    "session_id",
    "config",           # {option id: value} in force when the prompt was sent
    "started_at",       # ISO 8601 UTC, when the run got its concurrency slot
    "ended_at",         # ISO 8601 UTC, when the run's session was closed
)

_INT_COLUMNS = frozenset({"prompt_index", "repeat", "input_tokens", "output_tokens", "thought_tokens", "total_tokens",
                          "cached_read_tokens", "cached_write_tokens", "context_used", "context_size", "tool_calls"})
_FLOAT_COLUMNS = frozenset({"duration_s", "ttft_s", "cost"})
_BOOL_COLUMNS = frozenset({"timed_out"})
_JSON_COLUMNS = frozenset({"config"})
# Text that may legitimately be empty; every other empty CSV cell reads back as None.
_TEXT_COLUMNS = frozenset({"prompt", "text", "thoughts"})


def blank_row() -> dict[str, Any]:
    return {column: None for column in COLUMNS}


def percentile(values: Iterable[float], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between closest ranks; None for no values."""
    data = sorted(v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    if not data:
        return None
    if len(data) == 1:
        return float(data[0])
    rank = (len(data) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(data) - 1)
    return float(data[low] + (data[high] - data[low]) * (rank - low))


# --- serialisation ------------------------------------------------------------
def _csv_cell(column: str, value: Any) -> str:
    if value is None:
        return ""
    if column in _JSON_COLUMNS:
        return json.dumps(value, sort_keys=False)
    if column in _BOOL_COLUMNS:
        return "true" if value else "false"
    return str(value)


def _from_csv_cell(column: str, cell: str | None) -> Any:
    if cell is None:
        return None
    if cell == "":
        return "" if column in _TEXT_COLUMNS else None
    if column in _INT_COLUMNS:
        return int(float(cell))
    if column in _FLOAT_COLUMNS:
        return float(cell)
    if column in _BOOL_COLUMNS:
        return cell.strip().lower() in ("true", "1", "yes")
    if column in _JSON_COLUMNS:
        return json.loads(cell)
    return cell


def rows_to_csv(rows: Iterable[Mapping[str, Any]], *, header: bool = True) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    if header:
        writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_csv_cell(column, row.get(column)) for column in COLUMNS])
    return buffer.getvalue()


def _normalise(row: Mapping[str, Any]) -> dict[str, Any]:
    out = blank_row()
    out.update({key: row[key] for key in COLUMNS if key in row})
    return out


def read_rows(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows and metadata from a file written by ``sweep(out=...)`` or ``SweepResult.to_csv/to_json``."""
    path = Path(path)
    kind = out_format(path)
    if kind == "csv":
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            fields = reader.fieldnames or []
            missing = [c for c in ("model", "prompt", "repeat", "status") if c not in fields]
            if fields and missing:
                raise ValueError(f"{path} is not a sweep results file (no column {', '.join(missing)})")
            rows = [_normalise({c: _from_csv_cell(c, r.get(c)) for c in COLUMNS if c in r}) for r in reader]
        return rows, _read_sidecar(path)
    if kind == "jsonl":
        rows = []
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        rows.append(_normalise(json.loads(line)))
                    except json.JSONDecodeError as exc:
                        raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from exc
        return rows, _read_sidecar(path)
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return [], {}
    data = json.loads(text)
    if isinstance(data, list):
        return [_normalise(r) for r in data], {}
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise ValueError(f"{path} is not a sweep results file (expected {{'metadata': ..., 'rows': [...]}})")
    return [_normalise(r) for r in data["rows"]], dict(data.get("metadata") or {})


def out_format(path: str | os.PathLike[str]) -> str:
    suffix = Path(path).suffix.lower()
    formats = {".csv": "csv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}
    if suffix not in formats:
        raise ValueError(f"cannot tell the format of {str(path)!r}: use a .csv, .json or .jsonl file name")
    return formats[suffix]


def sidecar_path(path: str | os.PathLike[str]) -> Path:
    """Where CSV and JSON Lines results keep their metadata (JSON results embed it)."""
    path = Path(path)
    return path.with_name(path.name + ".meta.json")


def _read_sidecar(path: Path) -> dict[str, Any]:
    side = sidecar_path(path)
    if not side.is_file():
        return {}
    try:
        data = json.loads(side.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


def _json_default(value: Any) -> Any:
    return str(value)


def write_json_document(path: Path, rows: Sequence[Mapping[str, Any]], metadata: Mapping[str, Any]) -> None:
    """Write the whole JSON document to a temporary file and rename it, so a reader never sees half of it."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps({"metadata": metadata, "rows": list(rows)}, indent=1, default=_json_default),
                   encoding="utf-8")
    os.replace(tmp, path)


def write_sidecar(path: Path, metadata: Mapping[str, Any]) -> None:
    side = sidecar_path(path)
    tmp = side.with_name(f".{side.name}.tmp")
    tmp.write_text(json.dumps(metadata, indent=1, default=_json_default), encoding="utf-8")
    os.replace(tmp, side)


# --- summary ------------------------------------------------------------------
SUMMARY_COLUMNS: tuple[str, ...] = (
    "model", "runs", "ok", "errors", "timeouts",
    "latency_median_s", "latency_p90_s", "ttft_median_s", "ttft_p90_s",
    "input_tokens_median", "output_tokens_median", "total_tokens_median", "context_used_median",
    "cost_total", "currency",
)
# Always shown in tables; the others only when some model has a value.
_SUMMARY_CORE = ("model", "runs", "ok", "errors", "timeouts", "latency_median_s", "latency_p90_s")


class SweepSummary(list):
    """Per-model summary rows (dicts with SUMMARY_COLUMNS), printable as a table."""

    columns = SUMMARY_COLUMNS

    def shown_columns(self) -> list[str]:
        return [c for c in SUMMARY_COLUMNS if c in _SUMMARY_CORE or any(row.get(c) is not None for row in self)]

    def to_pandas(self):
        pd = _require_pandas()
        return pd.DataFrame(list(self), columns=list(SUMMARY_COLUMNS)).set_index("model")

    def __str__(self) -> str:
        columns = self.shown_columns()
        table = [columns] + [[_format(c, row.get(c)) for c in columns] for row in self]
        widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
        lines = []
        for number, line in enumerate(table):
            cells = [cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths))]
            lines.append("  ".join(cells).rstrip())
            if number == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        columns = self.shown_columns()
        head = "".join(f"<th>{escape(c)}</th>" for c in columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(_format(c, row.get(c)))}</td>" for c in columns) + "</tr>" for row in self
        )
        return f"<table class='acp-sweep-summary'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _format(column: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if column.startswith("cost"):
            return f"{value:.6g}"
        if column.endswith("_s"):
            return f"{value:.3f}"
        return f"{value:.1f}" if not value.is_integer() else str(int(value))
    return str(value)


def summarise(rows: Sequence[Mapping[str, Any]], model_order: Sequence[str] = ()) -> SweepSummary:
    by_model: dict[str, list[Mapping[str, Any]]] = {model: [] for model in model_order}
    for row in rows:
        by_model.setdefault(str(row.get("model")), []).append(row)
    summary = SweepSummary()
    for model, group in by_model.items():
        if not group:
            continue
        ok = [r for r in group if r.get("status") == "ok"]

        def values(column: str, runs: Sequence[Mapping[str, Any]] = ok) -> list[float]:
            return [r[column] for r in runs if isinstance(r.get(column), (int, float)) and r.get(column) is not None]

        costs = values("cost", group)
        currencies = sorted({str(r["currency"]) for r in group if r.get("currency")})
        summary.append({
            "model": model,
            "runs": len(group),
            "ok": len(ok),
            "errors": sum(1 for r in group if r.get("status") != "ok"),
            "timeouts": sum(1 for r in group if r.get("status") == "timeout"),
            "latency_median_s": percentile(values("duration_s"), 50),
            "latency_p90_s": percentile(values("duration_s"), 90),
            "ttft_median_s": percentile(values("ttft_s"), 50),
            "ttft_p90_s": percentile(values("ttft_s"), 90),
            "input_tokens_median": percentile(values("input_tokens"), 50),
            "output_tokens_median": percentile(values("output_tokens"), 50),
            "total_tokens_median": percentile(values("total_tokens"), 50),
            "context_used_median": percentile(values("context_used"), 50),
            "cost_total": round(sum(costs), 10) if costs else None,
            "currency": "/".join(currencies) if currencies else None,
        })
    return summary


def _require_pandas():
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError(
            "SweepResult.to_pandas() needs pandas, which is not installed. "
            "Install it with `pip install 'acp-notebook[pandas]'` (or `pip install pandas`); "
            "result.rows, to_csv() and to_json() work without it."
        ) from exc
    return pd


# --- the result -----------------------------------------------------------------
class SweepResult:
    """What ``acpnb.sweep`` returns: one row per (prompt, model, repeat) and the sweep's metadata.

    ``rows`` are plain dicts with the keys in ``COLUMNS``; ``metadata`` says which package and
    agent versions ran, when, with which prompts and options.
    """

    columns = COLUMNS

    def __init__(self, rows: Iterable[Mapping[str, Any]], metadata: Mapping[str, Any] | None = None) -> None:
        self.rows: list[dict[str, Any]] = [_normalise(row) for row in rows]
        self.metadata: dict[str, Any] = copy.deepcopy(dict(metadata or {}))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SweepResult:
        """Read a results file (.csv with its .meta.json, .json, or .jsonl)."""
        rows, metadata = read_rows(path)
        return cls(rows, metadata)

    # --- reading ---------------------------------------------------------
    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.rows[index]

    @property
    def models(self) -> list[str]:
        seen: dict[str, None] = dict.fromkeys(self.metadata.get("models") or [])
        seen.update(dict.fromkeys(str(r["model"]) for r in self.rows))
        return [m for m in seen if any(r["model"] == m for r in self.rows)]

    @property
    def ok(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["status"] == "ok"]

    @property
    def failed(self) -> list[dict[str, Any]]:
        """Rows whose run did not complete as asked: errors and timeouts."""
        return [r for r in self.rows if r["status"] != "ok"]

    def summary(self) -> SweepSummary:
        """Per model: runs, ok, errors, timeouts, median/p90 latency and time to first token, tokens, cost.

        Latency and token figures are over the runs that succeeded; cost adds up every run that reported one.
        """
        return summarise(self.rows, self.models)

    # --- exports ---------------------------------------------------------
    def to_pandas(self):
        """A DataFrame with one row per run (needs pandas: ``pip install 'acp-notebook[pandas]'``)."""
        pd = _require_pandas()
        frame = pd.DataFrame([dict(r) for r in self.rows], columns=list(COLUMNS))
        for column in ("started_at", "ended_at"):
            frame[column] = pd.to_datetime(frame[column], utc=True, format="ISO8601")
        frame.attrs["metadata"] = copy.deepcopy(self.metadata)
        return frame

    def to_csv(self, path: str | os.PathLike[str] | None = None) -> str | None:
        """Write CSV (the config column as JSON, metadata in PATH.meta.json); without a path, return the text."""
        text = rows_to_csv(self.rows)
        if path is None:
            return text
        target = Path(path)
        target.write_text(text, encoding="utf-8")
        write_sidecar(target, self.metadata)
        return None

    def to_json(self, path: str | os.PathLike[str] | None = None) -> str | None:
        """``{"metadata": ..., "rows": [...]}``; without a path, return the text."""
        if path is None:
            return json.dumps({"metadata": self.metadata, "rows": self.rows}, indent=1, default=_json_default)
        write_json_document(Path(path), self.rows, self.metadata)
        return None

    def plot(self, *, ax: Any = None, metric: str = "duration_s"):
        """Latency per model (a box per model over the successful runs, every run as a dot); returns the Figure.

        ``metric`` may be any numeric column, e.g. ``"ttft_s"`` or ``"cost"``.
        """
        try:
            import matplotlib  # noqa: F401
        except ImportError as exc:
            raise ImportError("SweepResult.plot() needs matplotlib: `pip install 'acp-notebook[plot]'`") from exc
        models = self.models
        if ax is None:
            figure = _new_figure(figsize=(max(4.0, 1.6 * len(models) + 2), 3.6), layout="constrained")
            ax = figure.add_subplot()
        else:
            figure = ax.figure
        series = []
        labels = []
        for model in models:
            runs = [r for r in self.rows if r["model"] == model]
            values = [float(r[metric]) for r in runs if r["status"] == "ok" and isinstance(r.get(metric), (int, float))]
            failed = sum(1 for r in runs if r["status"] != "ok")
            series.append(values)
            labels.append(f"{model}\n{len(values)} ok" + (f", {failed} failed" if failed else ""))
        positions = list(range(1, len(models) + 1))
        if any(series):
            ax.boxplot([s if s else [math.nan] for s in series], positions=positions, widths=0.5, showfliers=False)
        for position, values in zip(positions, series):
            if values:
                spread = [position + 0.12 * ((i % 5) - 2) / 2 for i in range(len(values))]
                ax.scatter(spread, values, s=14, alpha=0.7, zorder=3)
        ax.set_xticks(positions, labels)
        ax.set_xlim(0.4, len(models) + 0.6)
        title, label = {"duration_s": ("Turn latency", "turn latency (s)"),
                        "ttft_s": ("Time to first token", "time to first token (s)")}.get(metric, (metric, metric))
        ax.set_ylabel(label)
        ax.set_title(f"{title} per model")
        ax.set_ylim(bottom=0)
        ax.grid(axis="y", alpha=0.3)
        return figure

    # --- display ---------------------------------------------------------
    def _counts(self) -> str:
        failed = len(self.failed)
        timeouts = sum(1 for r in self.rows if r["status"] == "timeout")
        text = f"{len(self.rows)} runs, {len(self.rows) - failed} ok, {failed} failed"
        return text + (f" ({timeouts} timed out)" if timeouts else "")

    def __repr__(self) -> str:
        return f"<SweepResult {self._counts()}; models: {', '.join(self.models)}>"

    def __str__(self) -> str:
        return f"{self._counts()}\n{self.summary()}"

    def _repr_html_(self) -> str:
        meta = self.metadata
        facts = [self._counts()]
        if meta.get("prompts") is not None:
            facts.append(f"{len(meta['prompts'])} prompt(s) x {len(meta.get('models') or [])} model(s) x "
                         f"{meta.get('repeats', 1)} repeat(s)")
        if meta.get("skipped"):
            facts.append(f"{meta['skipped']} resumed from {meta.get('out')}")
        if meta.get("finished"):
            facts.append(f"finished {meta['finished']}")
        shown = ("model", "prompt", "repeat", "status", "duration_s", "ttft_s", "stop_reason", "text", "error")
        head = "".join(f"<th>{c}</th>" for c in shown)
        body = []
        limit = 20
        for row in self.rows[:limit]:
            cells = []
            for column in shown:
                value = row.get(column)
                text = _format(column, value) if not isinstance(value, str) else value
                if len(text) > 80:
                    text = text[:77] + "..."
                style = " style='color:#b00'" if column == "status" and value != "ok" else ""
                cells.append(f"<td{style}>{escape(text)}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        more = (f"<p>... and {len(self.rows) - limit} more rows (<code>result.rows</code>, "
                "<code>result.to_pandas()</code>)</p>") if len(self.rows) > limit else ""
        return (
            "<div class='acp-sweep-result'>"
            f"<p><b>Sweep</b>: {escape(' · '.join(facts))}</p>"
            f"{self.summary()._repr_html_()}"
            "<details><summary>runs</summary>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}</details>"
            "</div>"
        )


def _new_figure(**options: Any):
    """A Figure that a notebook shows once, as the cell's value; elsewhere a plain Figure (no GUI window).

    In a kernel, creating it through pyplot loads the inline backend, which registers the PNG
    formatter for Figures; closing it at once stops pyplot from showing it a second time.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None  # type: ignore[assignment]
    if get_ipython is not None and get_ipython() is not None:
        import matplotlib.pyplot as plt

        figure = plt.figure(**options)
        plt.close(figure)
        return figure
    from matplotlib.figure import Figure

    return Figure(**options)
