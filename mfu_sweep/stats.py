"""Small, dependency-free statistics on raw samples."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def median_ci_indices(n: int, confidence: float = 0.95) -> tuple[int, int]:
    """0-based order-statistic indices bounding a distribution-free median CI.

    Uses the binomial(n, 1/2) law of the number of samples below the median:
    ``[x[l], x[n-1-l]]`` covers the median with probability at least
    ``confidence`` when n is large enough; for n <= 5 at 95% the interval is
    the full range (coverage 1 - 2**(1-n)).
    """
    if n < 1:
        raise ValueError("need at least one sample")
    alpha = 1.0 - confidence
    cdf, lower = 0.0, 0
    for k in range(n):
        cdf += math.comb(n, k) / 2.0**n
        if cdf > alpha / 2:
            break
        lower = k
    lower = min(lower, (n - 1) // 2)
    return lower, n - 1 - lower


def median_ci(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval of the median of ``samples``."""
    xs = sorted(samples)
    lo, hi = median_ci_indices(len(xs), confidence)
    return xs[lo], xs[hi]


def relative_half_width(samples: Sequence[float], confidence: float = 0.95) -> float:
    """Half-width of the median CI divided by the median."""
    lo, hi = median_ci(samples, confidence)
    med = statistics.median(samples)
    return (hi - lo) / 2.0 / med if med > 0 else math.inf
