"""Where one device's curve bends: the roofline knee, wave-quantisation steps, a cache falling off.

A sweep of one device has no crossovers to pin, but its grid still spends the
same effort on the flat compute-bound plateau as on the knee. At every measured
FLOP count the log throughput (mean over passes) is compared with the straight
line through its two neighbours (in log FLOPs); where the difference is larger
than the noise allows (``BEND_Z`` standard errors: run-to-run variance when the
series has several passes, else the scatter of those differences, robustly) and
than ``MIN_BEND`` (3%), the curve bends there, and the two gaps beside it are
split by :func:`mfu_sweep.analysis.refine.plan.plan_series`. A bend whose gaps are
already narrower than ``sqrt(target)`` is resolved: nothing is proposed there.
Nothing here makes a claim about the device; it only places shapes.
"""

from __future__ import annotations

import math

import numpy as np

from mfu_sweep.analysis.ground.series import Series
from mfu_sweep.analysis.verdicts.curves import pass_curve

BEND_Z = 3.0  # standard errors: one in ~370 straight stretches looks bent by chance (normal)
MIN_BEND = 0.03  # log throughput: bends smaller than 3% are not worth device time


def _level_noise(log_t: np.ndarray, resid: np.ndarray) -> np.ndarray:
    """Variance of each level's mean log time: pooled run-to-run variance / passes, else residual scatter."""
    n = np.sum(np.isfinite(log_t), axis=0)
    if log_t.shape[0] >= 2 and np.nanmax(n) >= 2:
        with np.errstate(invalid="ignore", divide="ignore"):
            var = np.nanvar(log_t, axis=0, ddof=1)
        pooled = float(np.nanmedian(var)) if np.isfinite(var).any() else 0.0
        return pooled / np.maximum(n, 1)
    finite = resid[np.isfinite(resid)]
    mad = float(np.median(np.abs(finite - np.median(finite)))) / 0.6745 if len(finite) else 0.0
    # a residual is about sqrt(1.5) level sds (itself and half of each neighbour)
    return np.full(log_t.shape[1], (mad / math.sqrt(1.5)) ** 2)


def bends(series: Series, metric: str = "tflops") -> list[tuple[float, float, float]]:
    """(low FLOPs, high FLOPs, size in log throughput) of every bend, around the FLOP count it is seen at."""
    curve = pass_curve(series, metric)
    x = curve.log_f
    if len(x) < 3:
        return []
    with np.errstate(invalid="ignore"):
        y = -np.nanmean(curve.log_t, axis=0)  # log throughput up to a constant (x - log t)
    w = (x[1:-1] - x[:-2]) / (x[2:] - x[:-2])
    line = y[:-2] + w * (y[2:] - y[:-2])
    resid = np.concatenate(([np.nan], y[1:-1] - line, [np.nan]))
    var = _level_noise(curve.log_t, resid)
    se = np.sqrt(var[1:-1] + (1 - w) ** 2 * var[:-2] + w ** 2 * var[2:])
    r = resid[1:-1]
    hits = np.flatnonzero((np.abs(r) > BEND_Z * se) & (np.abs(r) > MIN_BEND))
    return [(math.exp(x[i]), math.exp(x[i + 2]), float(r[i])) for i in hits]
