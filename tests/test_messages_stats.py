"""Sweep intervals stay within what the scores can be (issue 28, point 6), checked against references.

- Newcombe's interval for paired proportions against the worked example of Fagerland, Lydersen and
  Laake (Statistical Analysis of Contingency Tables, ch. 8: complete response before and after
  consolidation therapy, Cavo et al. 2012: 59 / 6 / 16 / 80 pairs -> -0.0621 [-0.1186, -0.0046]);
- the bootstrap against the exact bootstrap distribution, enumerated;
- a sweep's comparison on four binary samples (the case the issue met: +0.500 [-0.419, +1.419]).
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from acp_notebook.sweep import SweepResult
from acp_notebook.sweep.stats import bootstrap_mean_interval, paired_proportions_interval, percentile, wilson_interval


def test_newcombe_matches_the_published_worked_example():
    interval = paired_proportions_interval(59, 6, 16, 80)
    assert interval.method == "newcombe" and interval.n == 161
    assert round(interval.estimate, 4) == -0.0621
    assert (round(interval.low, 4), round(interval.high, 4)) == (-0.1186, -0.0046)


def test_newcombe_without_correlation_is_the_square_and_add_of_two_wilson_intervals():
    # both*neither - only_a*only_b = 0 <= n/2: phi is 0, so each side is the root of the squared Wilson distances.
    interval = paired_proportions_interval(2, 4, 1, 2)
    a, b = wilson_interval(6, 9), wilson_interval(3, 9)
    assert interval.low == pytest.approx(a.estimate - b.estimate - math.hypot(a.estimate - a.low, b.high - b.estimate))
    assert interval.high == pytest.approx(a.estimate - b.estimate + math.hypot(a.high - a.estimate, b.estimate - b.low))


@given(st.integers(0, 12), st.integers(0, 12), st.integers(0, 12), st.integers(0, 12))
def test_newcombe_stays_within_what_a_difference_can_be(both, only_a, only_b, neither):
    if both + only_a + only_b + neither == 0:
        return
    interval = paired_proportions_interval(both, only_a, only_b, neither)
    assert -1.0 <= interval.low <= interval.estimate <= interval.high <= 1.0


def test_bootstrap_matches_the_exact_bootstrap_distribution():
    values = [0.0, 0.25, 0.5, 0.75, 1.0]
    exact = [sum(resample) / 5 for resample in itertools.product(values, repeat=5)]  # all 3125, equally likely
    interval = bootstrap_mean_interval(values)
    assert interval.method == "bootstrap" and interval.estimate == 0.5
    # 4000 resamples estimate each quantile of the exact distribution to about one step of its support (0.05).
    assert interval.low == pytest.approx(percentile(exact, 2.5), abs=0.05)
    assert interval.high == pytest.approx(percentile(exact, 97.5), abs=0.05)
    assert bootstrap_mean_interval(values) == interval  # seeded: the same summary every time


@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=8))
@pytest.mark.slow
def test_bootstrap_bounds_are_within_the_values(values):
    interval = bootstrap_mean_interval(values)
    assert min(values) <= interval.low <= interval.high <= max(values)


def _row(model, sample, score):
    return {"model": model, "sample_id": sample, "repeat": 0, "status": "ok", "score_exact": score}


def test_a_comparison_of_four_binary_samples_stays_within_minus_one_and_one():
    rows = [_row("a:x", f"s{i}", score) for i, score in enumerate([1.0, 1.0, 0.0, 1.0])]
    rows += [_row("b:y", f"s{i}", score) for i, score in enumerate([0.0, 0.0, 0.0, 1.0])]
    comparison = SweepResult(rows, {"models": ["a:x", "b:y"], "scorers": [{"name": "exact"}]}).compare("a:x", "b:y")
    assert comparison.difference == 0.5 and comparison.interval == "newcombe"
    expected = paired_proportions_interval(1, 2, 0, 1)
    assert (comparison.low, comparison.high) == (expected.low, expected.high)
    assert -1.0 <= comparison.low < 0.5 < comparison.high <= 1.0
    assert f"difference +0.500 [{comparison.low:+.3f}, {comparison.high:+.3f}] (95% CI, Newcombe)" in str(comparison)


def test_graded_scores_use_the_bootstrap_for_the_summary_and_the_comparison():
    rows = [_row("a:x", f"s{i}", score) for i, score in enumerate([0.9, 0.1, 0.95, 0.2])]
    rows += [_row("b:y", f"s{i}", score) for i, score in enumerate([0.1, 0.0, 0.3, 0.25])]
    result = SweepResult(rows, {"models": ["a:x", "b:y"], "scorers": [{"name": "exact"}]})
    comparison = result.compare("a:x", "b:y")
    assert comparison.interval == "bootstrap" and "(95% CI, bootstrap)" in str(comparison)
    assert -0.05 <= comparison.low <= comparison.difference <= comparison.high <= 0.8  # the differences' range
    for entry in result.summary():
        assert 0.0 <= entry["score_exact_low"] <= entry["score_exact"] <= entry["score_exact_high"] <= 1.0
