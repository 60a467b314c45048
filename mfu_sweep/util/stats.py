"""Small statistics on raw samples: the median's distribution-free interval for any sample count."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache

SUMMED_MAX_N = 1023
"""Largest n whose binomial tail is summed term by term, in exact integers (the float sum of earlier versions
overflowed at 2.0**1024; up to here both give the same indices)."""


def _lower_summed(n: int, tail: float) -> int:
    """Largest k with P(X <= k) <= ``tail`` for X ~ binomial(n, 1/2), by summing the terms (0 when none is)."""
    num, den = Fraction(tail).as_integer_ratio()
    bound = num << n  # P(X <= k) <= num/den  <=>  den * sum(comb(n, j) for j <= k) <= num * 2**n
    term, cum, lower = 1, 0, 0
    for k in range(n):
        cum += term
        if den * cum > bound:
            break
        lower = k
        term = term * (n - k) // (k + 1)  # comb(n, k + 1)
    return lower


def _lower_large(n: int, tail: float) -> int:
    """As :func:`_lower_summed` for any n: the exact binomial CDF (``scipy.special.bdtr``) searched from the
    normal approximation, a step or two away."""
    from scipy.special import bdtr

    k = max(0, math.floor(n / 2 + statistics.NormalDist().inv_cdf(tail) * math.sqrt(n) / 2))
    while k > 0 and bdtr(k, n, 0.5) > tail:
        k -= 1
    while k + 1 < n and bdtr(k + 1, n, 0.5) <= tail:
        k += 1
    return k


@lru_cache(maxsize=4096)
def median_ci_indices(n: int, confidence: float = 0.95) -> tuple[int, int]:
    """0-based order-statistic indices bounding a distribution-free median CI.

    Uses the binomial(n, 1/2) law of the number of samples below the median:
    ``[x[l], x[n-1-l]]`` covers the median with probability at least
    ``confidence`` when n is large enough; for n <= 5 at 95% the interval is
    the full range (coverage 1 - 2**(1-n)). ``l`` is the largest k whose
    binomial CDF is at most (1 - confidence) / 2: summed term by term up to
    :data:`SUMMED_MAX_N` samples, from the exact CDF beyond (no limit on n).
    """
    if n < 1:
        raise ValueError("need at least one sample")
    tail = (1.0 - confidence) / 2
    lower = _lower_summed(n, tail) if n <= SUMMED_MAX_N else _lower_large(n, tail)
    lower = min(lower, (n - 1) // 2)
    return lower, n - 1 - lower


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median of ``samples``."""
    xs = sorted(samples)
    lo, hi = median_ci_indices(len(xs), confidence)
    return xs[lo], xs[hi]


def relative_half_width(samples: Sequence[float], confidence: float = 0.95, ordered: bool = False) -> float:
    """Half-width of the median CI divided by the median; ``ordered=True`` when ``samples`` is already sorted
    (the timing loop keeps a sorted copy, so a check costs no sort at 100,000 samples)."""
    xs = samples if ordered else sorted(samples)
    lo, hi = median_ci_indices(len(xs), confidence)
    n = len(xs)
    med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return (xs[hi] - xs[lo]) / 2.0 / med if med > 0 else math.inf
