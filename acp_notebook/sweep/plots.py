"""Plots of a SweepResult with matplotlib: scores with 95% intervals, score against cost, latency per model.

Each function draws on a new Figure (or the given Axes) and returns the Figure; called on the
caller's thread, they only read the result.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

from .extras import require

__all__ = ["cost", "latency", "scores"]


class Plotted(Protocol):
    """What the plots read of a result (result.py's SweepResult; it imports this module)."""

    rows: list[dict[str, Any]]

    @property
    def scorers(self) -> list[str]: ...

    @property
    def models(self) -> list[str]: ...

    def summary(self) -> Any: ...


def _require_matplotlib() -> None:
    require("matplotlib", "SweepResult.plot()", "plot")


def _new_figure(**options: Any):
    """A Figure that a notebook shows once, as the cell's value; elsewhere a plain Figure (no GUI window).

    In a kernel, creating it through pyplot loads the inline backend, which registers the PNG
    formatter for Figures; closing it at once stops pyplot from showing it a second time.
    """
    try:  # IPython and matplotlib are optional and slow to import: only when a plot is drawn
        from IPython import get_ipython
    except ImportError:
        get_ipython = None  # type: ignore[assignment]
    if get_ipython is not None and get_ipython() is not None:
        import matplotlib.pyplot as plt  # loads the inline backend in a kernel (see above)

        figure = plt.figure(**options)
        plt.close(figure)
        return figure
    from matplotlib.figure import Figure  # matplotlib: optional (the plot extra), on first plot

    return Figure(**options)


def _axes(ax: Any, size: tuple[float, float]):
    _require_matplotlib()
    if ax is not None:
        return ax.figure, ax
    figure = _new_figure(figsize=size, layout="constrained")
    return figure, figure.add_subplot()


def _scorer_names(result: Plotted, scorer: str | None) -> list[str]:
    if not result.scorers:
        raise ValueError("this sweep has no scores to plot: run it with scorers=[...], or use plot('latency')")
    if scorer is None:
        return result.scorers
    if scorer not in result.scorers:
        raise ValueError(f"no scorer {scorer!r}; this result has {', '.join(result.scorers)}")
    return [scorer]


def _error_bar(entry: dict[str, Any], name: str) -> tuple[float, float] | None:
    value, low, high = (entry.get(f"score_{name}{suffix}") for suffix in ("", "_low", "_high"))
    if value is None or low is None or high is None:
        return None
    return max(0.0, value - low), max(0.0, high - value)


def scores(result: Plotted, *, scorer: str | None = None, ax: Any = None):
    """Each model's mean score (a dot) with its 95% interval (a bar); one colour per scorer."""
    names = _scorer_names(result, scorer)
    summary = result.summary()
    figure, ax = _axes(ax, (max(4.0, 1.5 * len(summary) + 2), 3.6))
    width = 0.6 / len(names)
    for index, name in enumerate(names):
        offset = (index - (len(names) - 1) / 2) * width
        xs = [position + offset for position in range(len(summary))]
        values = [entry.get(f"score_{name}") for entry in summary]
        bars = [_error_bar(entry, name) or (0.0, 0.0) for entry in summary]
        shown = [(x, v, b) for x, v, b in zip(xs, values, bars) if v is not None]
        if shown:
            ax.errorbar([s[0] for s in shown], [s[1] for s in shown],
                        yerr=[[s[2][0] for s in shown], [s[2][1] for s in shown]],
                        fmt="o", capsize=4, label=name)
    ax.set_xticks(range(len(summary)), [f"{entry['model']}\n{entry['ok']}/{entry['trials']} ok" for entry in summary])
    ax.set_xlim(-0.6, len(summary) - 0.4)
    ax.set_ylabel("mean score (95% CI)")
    ax.set_title("Score per model")
    if _all_unit(result, names):
        ax.set_ylim(-0.05, 1.05)
    ax.grid(axis="y", alpha=0.3)
    if len(names) > 1:
        ax.legend(title="scorer")
    return figure


def _all_unit(result: Plotted, names: list[str]) -> bool:
    values = [r.get(f"score_{n}") for r in result.rows for n in names]
    return all(v is None or 0.0 <= v <= 1.0 for v in values)


def cost(result: Plotted, *, scorer: str | None = None, ax: Any = None):
    """Mean score (with its interval) against mean cost per trial, one labelled point per model."""
    name = _scorer_names(result, scorer)[0]
    summary = [entry for entry in result.summary()
               if entry.get("cost_per_trial") is not None and entry.get(f"score_{name}") is not None]
    if not summary:
        raise ValueError("no model has both a score and a cost: the agents reported no cost (usage_update)")
    figure, ax = _axes(ax, (5.0, 3.8))
    labelled: dict[tuple[float, float], int] = {}
    for entry in summary:
        point = (entry["cost_per_trial"], entry[f"score_{name}"])
        bar = _error_bar(entry, name)
        ax.errorbar([point[0]], [point[1]], yerr=[[bar[0]], [bar[1]]] if bar else None, fmt="o", capsize=4)
        # Models at the same spot (the same model reached two ways) get their labels stacked, not overprinted.
        spot = (round(point[0], 12), round(point[1], 6))
        labelled[spot] = labelled.get(spot, -1) + 1
        ax.annotate(entry["model"], point, textcoords="offset points", xytext=(6, 6 - 12 * labelled[spot]))
    if _all_unit(result, [name]):
        ax.set_ylim(-0.05, 1.05)
    currency = summary[0].get("currency") or ""
    ax.set_xlabel(f"mean cost per trial {currency}".strip())
    ax.set_ylabel(f"{name} (95% CI)")
    ax.set_title("Score against cost")
    ax.set_xlim(left=0, right=max(e["cost_per_trial"] for e in summary) * 1.35)
    ax.grid(alpha=0.3)
    return figure


def latency(result: Plotted, *, metric: str = "duration_s", ax: Any = None):
    """``metric`` per model: a box over the trials that succeeded, every trial as a dot."""
    models = result.models
    figure, ax = _axes(ax, (max(4.0, 1.6 * len(models) + 2), 3.6))
    series, labels = [], []
    for model in models:
        trials = [r for r in result.rows if r.get("model") == model]
        values = [float(r[metric]) for r in trials
                  if r.get("status") == "ok" and isinstance(r.get(metric), (int, float))]
        failed = sum(1 for r in trials if r.get("status") != "ok")
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
