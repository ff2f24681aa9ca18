"""The statistics of sweep summaries and comparisons, in plain Python: intervals, percentiles, a paired test.

Every interval for scores stays within what the scores can be, however few the samples:
- a 0/1 score's rate: the Wilson score interval;
- two models' paired 0/1 scores: Newcombe's hybrid score interval for the difference of paired
  proportions (method 10 of Newcombe 1998, "Improved confidence intervals for the difference
  between binomial proportions based on paired data"): the two Wilson intervals combined with the
  pairs' correlation, always within [-1, 1];
- graded scores (and means over repeats), one model or a paired difference: a percentile bootstrap
  over the samples, with a fixed seed so a summary reads the same each time; its bounds are means
  of observed values, so they never leave the scores' range.
Student's t (``mean_interval``) remains for quantities without bounds. The sign test is exact
(on 0/1 scores, the exact McNemar test).

Why no numpy/scipy: each of these is a closed form, a short exact sum or a few thousand resamples,
so a sweep's summary needs no extra install. Pure functions, safe from any thread.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Interval", "bootstrap_mean_interval", "mean_interval", "paired_proportions_interval", "percentile",
           "sign_test", "t_quantile", "wilson_interval"]

Z_95 = 1.959963984540054  # the standard normal's 97.5th percentile
BOOTSTRAP_RESAMPLES = 4000
BOOTSTRAP_SEED = 20260


@dataclass(frozen=True)
class Interval:
    """An estimate with its 95% confidence interval; ``method`` names how the interval was made."""

    estimate: float
    low: float | None
    high: float | None
    n: int
    method: str


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """The q-th percentile (0-100), interpolating linearly between closest ranks; None for no values."""
    data = sorted(v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    if not data:
        return None
    if len(data) == 1:
        return float(data[0])
    rank = (len(data) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(data) - 1)
    return float(data[low] + (data[high] - data[low]) * (rank - low))


def wilson_interval(successes: int, n: int, z: float = Z_95) -> Interval:
    """The Wilson score interval for a proportion: sound at 0% and 100% and for small n, unlike p +- z*se."""
    if n <= 0:
        raise ValueError("a proportion needs at least one trial")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # At 0% and 100% the bound is exactly 0 or 1; rounding would otherwise leave it a hair inside.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(p, low, high, n, "wilson")


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz, as in Numerical Recipes 6.4)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for numerator in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                          -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t (0.5 < p < 1), by bisection on the CDF: accurate to ~1e-10."""
    if not 0.5 < p < 1.0:
        raise ValueError("t_quantile takes 0.5 < p < 1")
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        if t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
        if high - low < 1e-12:
            break
    return (low + high) / 2.0


def mean_interval(values: Sequence[float]) -> Interval:
    """The mean with Student's t interval (one value: no interval)."""
    n = len(values)
    if n == 0:
        raise ValueError("a mean needs at least one value")
    mean = math.fsum(values) / n
    if n == 1:
        return Interval(mean, None, None, 1, "t")
    variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = t_quantile(0.975, n - 1) * math.sqrt(variance / n)
    return Interval(mean, mean - half, mean + half, n, "t")


def paired_proportions_interval(both: int, only_a: int, only_b: int, neither: int, z: float = Z_95) -> Interval:
    """The difference rate(a) - rate(b) of paired 0/1 outcomes, with Newcombe's hybrid score interval (method 10).

    The counts are the pairs' 2x2 table: both 1, only a 1, only b 1, both 0. Each rate gets its
    Wilson interval; the two are combined ("square and add") with phi, the pairs' correlation,
    estimated as Newcombe does: (both*neither - only_a*only_b - n/2) / sqrt(product of the margins)
    when the cross-product exceeds n/2, 0 between 0 and n/2, unadjusted below 0, and 0 when a margin
    is empty.
    """
    n = both + only_a + only_b + neither
    if n <= 0:
        raise ValueError("a paired difference needs at least one pair")
    a, b = wilson_interval(both + only_a, n, z), wilson_interval(both + only_b, n, z)
    margins = (both + only_a) * (only_b + neither) * (both + only_b) * (only_a + neither)
    cross = both * neither - only_a * only_b
    phi = 0.0
    if margins:
        phi = (cross - n / 2) / math.sqrt(margins) if cross > n / 2 else min(cross, 0) / math.sqrt(margins)
    difference = a.estimate - b.estimate
    below_a, above_a = a.estimate - a.low, a.high - a.estimate
    below_b, above_b = b.estimate - b.low, b.high - b.estimate
    low = difference - math.sqrt(max(0.0, below_a ** 2 - 2 * phi * below_a * above_b + above_b ** 2))
    high = difference + math.sqrt(max(0.0, above_a ** 2 - 2 * phi * above_a * below_b + below_b ** 2))
    return Interval(difference, max(-1.0, low), min(1.0, high), n, "newcombe")


def bootstrap_mean_interval(values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES,
                            seed: int = BOOTSTRAP_SEED) -> Interval:
    """The mean with a 95% percentile bootstrap interval: the 2.5th and 97.5th percentiles of the means of
    ``resamples`` resamples (with replacement) of ``values``. Seeded, so the same values give the same
    interval; the bounds lie between the smallest and the largest value. One value: no interval."""
    n = len(values)
    if n == 0:
        raise ValueError("a mean needs at least one value")
    mean = math.fsum(values) / n
    if n == 1:
        return Interval(mean, None, None, 1, "bootstrap")
    rng = random.Random(seed)
    means = [math.fsum(rng.choices(values, k=n)) / n for _ in range(resamples)]
    low, high = percentile(means, 2.5), percentile(means, 97.5)
    # A mean of values is within their range; rounding in the sums must not put a bound a hair outside.
    def within(bound: float) -> float:
        return min(max(bound, min(values)), max(values))

    return Interval(mean, within(low), within(high), n, "bootstrap")


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact binomial sign test of ``wins`` against ``losses`` (ties dropped beforehand).

    On paired 0/1 outcomes the discordant pairs are exactly these counts, so this is the exact
    McNemar test.
    """
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = math.fsum(math.comb(n, i) for i in range(k + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)
