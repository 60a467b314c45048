"""The run-to-run model under compare's band verdicts, and the shared rules of lead calls (numpy/scipy only).

The question a band verdict asks (:mod:`mfu_sweep.analysis.verdicts.bands`) is
whether series ``a`` is faster than ``b`` by more than what varies *between
runs*. Timings of one run (one pass of a sweep) share what changes from run to
run: clocks and thermals, a busy neighbour for a few seconds, allocator and
cache placement, a kernel choice after autotuning. Those move all samples of a
shape together, and in a sweep done in FLOP order a slow phase covers several
consecutive shapes. So the pass, not the sample, is the unit of evidence.

``runs`` (both series measured in R >= 2 passes), :func:`run_side`
    A point's value is the mean over passes of the per-pass log median. The
    run-to-run variance of one pass is estimated per shape from its passes and,
    because R is small (2-5), pooled over the shapes nearest in log FLOPs until
    ``POOL_DF`` degrees of freedom (:func:`pooled_run_variance`); the pooled
    df count how correlated neighbouring shapes are
    (:func:`effective_pool_df`). Each side also carries the variance of a
    pass-level offset shared by all shapes (a pass that was slow everywhere,
    :func:`_pass_offsets`) and the autocorrelation along FLOPs of each pass's
    deviations (up to ``RUN_LAGS`` shapes), which is what passes swept in FLOP
    order through a slow drift show; :func:`run_covariance` turns both sides'
    autocorrelations into the covariance of the points' log ratios.

``shapes`` (one value per shape: R = 1, files without a pass index, published
tables)
    Run-to-run variation was not measured (``NOT_MEASURED``); the band verdicts
    test the scatter of shapes instead, and every such comparison carries
    ``ONE_PASS_LIMIT``: a slow drift of the machine or an offset of the whole
    sweep is indistinguishable from a lead without repeated passes.

Shared by the band verdicts, leaderboards and refine: Holm's step-down
correction (:func:`holm`) and the run rule over distinct FLOP counts
(:func:`apply_min_run`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

POOL_DF = 8  # degrees of freedom the pooled run-to-run variance aims for
RUN_LAGS = 12  # neighbouring shapes (in FLOP order) whose deviations within a pass may be correlated
NOT_MEASURED = "run-to-run variation not measured"
# What the shapes method cannot tell from a lead (docs/statistics-calibration.md: compare's band verdicts under
# a 2% drift in FLOP order); said in every comparison that rests on it.
ONE_PASS_LIMIT = ("verdicts rest on a series measured in one pass: a slow drift of the machine or an offset "
                  "of its whole sweep can pass for a lead; sweep both with --repeats 2 or more to measure it")


# -- multiple comparisons and the run rule --------------------------------------


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (family-wise error control under any dependence)."""
    p = np.asarray(p_values, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out


def holm_level(alpha: float, p: float, p_adjusted: float, family: int) -> float:
    """The level at which a claim of the family is tested after Holm: ``alpha * p / p_adjusted`` (the claim holds
    exactly when ``p`` is below it, i.e. when ``p_adjusted < alpha``; ``alpha / family`` when both are 0). The
    claim's test inverted at this level is its Holm-adjusted interval, the one its verdict reads."""
    if not p_adjusted > 0:
        return alpha / max(family, 1)
    return min(alpha, alpha * p / p_adjusted)


def runs_of(values: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) index ranges of equal consecutive values."""
    runs, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            runs.append((start, i))
            start = i
    return runs


def apply_min_run(verdict: np.ndarray, min_run: int, flops: Sequence[float] | None = None) -> np.ndarray:
    """Demote leads that do not span ``min_run`` consecutive FLOP counts to ambiguous.

    Runs count distinct FLOP counts, not points, so the outcome does not
    depend on how shapes of equal FLOPs are ordered: a FLOP count supports a
    leader when any of its points has that leader significant, and a point's
    lead stands when its FLOP count sits in a run of at least ``min_run``
    consecutive FLOP counts supporting the same leader. Without ``flops``
    every point is its own FLOP count.
    """
    flops = np.arange(len(verdict), dtype=float) if flops is None else np.asarray(flops, dtype=float)
    positions, where = np.unique(flops, return_inverse=True)
    out = verdict.copy()
    for sign in (1, -1):
        supports = np.zeros(len(positions), dtype=bool)
        supports[where[verdict == sign]] = True
        kept = np.zeros(len(positions), dtype=bool)
        for start, stop in runs_of(supports.astype(int)):
            if supports[start] and stop - start >= min_run:
                kept[start:stop] = True
        out[(verdict == sign) & ~kept[where]] = 0
    return out


# -- runs: the pass is the unit --------------------------------------------------


def pooled_run_variance(log_flops: np.ndarray, var: np.ndarray, n_runs: np.ndarray,
                        pool_df: int = POOL_DF) -> tuple[np.ndarray, np.ndarray]:
    """Run-to-run variance of one pass at each shape, pooled over the shapes nearest in log FLOPs.

    Each shape's variance (``R - 1`` degrees of freedom) is pooled with those
    of the nearest shapes, nearest first, until ``pool_df`` degrees of freedom
    are reached (shapes at the same distance come in together). Returns the
    pooled variance and its degrees of freedom; shapes measured once add nothing.
    """
    x = np.asarray(log_flops, dtype=float)
    df = np.where(np.isfinite(var), n_runs - 1, 0.0)
    v = np.where(df > 0, var, 0.0)
    inside = _pool_members(x, df, pool_df)
    pooled_df = inside @ df
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = (inside @ (df * v)) / pooled_df
    return np.where(pooled_df > 0, pooled, np.nan), pooled_df


def _pool_members(x: np.ndarray, df: np.ndarray, pool_df: int) -> np.ndarray:
    """(points, points) bool: the shapes nearest in log FLOPs whose df reach ``pool_df``, ties included."""
    dist = np.abs(x[:, None] - x[None, :])
    order = np.argsort(dist, axis=1, kind="stable")
    cum = np.cumsum(df[order], axis=1)
    k = np.minimum((cum < pool_df).sum(axis=1), len(x) - 1)
    radius = np.take_along_axis(dist, order, axis=1)[np.arange(len(x)), k]
    return dist <= radius[:, None] * (1 + 1e-12) + 1e-15


@dataclass(frozen=True)
class RunSide:
    """One series at the points: mean over passes, pooled variance of one pass and its df, passes per point,
    the variance (with df) of the mean over passes that is common to all shapes (a pass-level offset), and
    the autocorrelation by lag of one pass's deviations along FLOPs (``rho[k]``; 0 beyond ``RUN_LAGS``)."""

    mean: np.ndarray
    var: np.ndarray
    df: np.ndarray
    n_runs: np.ndarray
    common: float
    common_df: float
    rho: np.ndarray


def _pass_offsets(values: np.ndarray, mean: np.ndarray) -> tuple[float, float]:
    """Variance of the mean over passes shared by all shapes: a pass that was slow everywhere."""
    dev = values - mean[None, :]
    offsets = np.array([np.nanmean(row) for row in dev if np.isfinite(row).sum() >= 2])
    if len(offsets) < 2:
        return 0.0, 1.0
    return float(np.var(offsets, ddof=1)) / len(offsets), float(len(offsets) - 1)


def run_side(log_flops: np.ndarray, values: np.ndarray, pool_df: int = POOL_DF) -> RunSide:
    """:class:`RunSide` of one series from its log values per (pass, point); NaN where a pass lacks a point."""
    v = np.atleast_2d(np.asarray(values, dtype=float))
    n = np.isfinite(v).sum(axis=0).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nansum(v, axis=0) / n
        var = np.nansum((v - mean) ** 2, axis=0) / (n - 1)
    var = np.where(n >= 2, var, np.nan)
    pooled, _ = pooled_run_variance(log_flops, var, n, pool_df)
    common, common_df = _pass_offsets(v, mean)
    rho = _pass_autocorrelation(v, mean, pooled, RUN_LAGS)
    df = effective_pool_df(log_flops, np.where(np.isfinite(var), n - 1, 0.0), rho, pool_df)
    return RunSide(mean=mean, var=pooled, df=df, n_runs=n, common=common, common_df=common_df, rho=rho)


def _pass_autocorrelation(values: np.ndarray, mean: np.ndarray, var: np.ndarray,
                          lags: int = RUN_LAGS) -> np.ndarray:
    """Autocorrelation along FLOPs of the deviations of each pass from the mean (pass offsets removed).

    Near zero when passes are shuffled; positive when passes ran in FLOP order
    through a slow drift of the machine, which then widens the smooth's variance.
    Removing each pass's offset biases the sample autocorrelation down by about
    the long-run variance factor ``1 + 2 sum rho_k`` over the number of points
    (the offset's share is counted once, in ``RunSide.common``); that bias is
    added back (fixed point, three steps). No taper: the lags are used as a
    covariance, not as weights of a long-run variance, and a Bartlett taper
    halved the variance of the widest smooths (11% false leads at 2 passes
    in FLOP order through a drift).
    """
    dev = values - mean[None, :]
    with np.errstate(invalid="ignore"):
        dev = dev - np.nanmean(dev, axis=1, keepdims=True)
        z = dev / np.sqrt(var)[None, :]
    n = values.shape[1]
    rho = np.zeros(n)
    rho[0] = 1.0
    c0 = np.nanmean(z * z)
    if not np.isfinite(c0) or c0 <= 0:
        return rho
    top = min(lags, n - 1)
    with np.errstate(invalid="ignore"):
        raw = np.array([np.nanmean(z[:, :-k] * z[:, k:]) / c0 for k in range(1, top + 1)])
    raw = np.where(np.isfinite(raw), raw, 0.0)
    r = raw
    for _ in range(3):
        r = np.clip(raw + (1 + 2 * np.clip(r, 0.0, None).sum()) / n, 0.0, 0.95)
    rho[1:top + 1] = np.where(raw > 0, r, np.clip(raw, 0.0, None))
    return rho


def effective_pool_df(log_flops: np.ndarray, df: np.ndarray, rho: np.ndarray, pool_df: int = POOL_DF) -> np.ndarray:
    """Degrees of freedom of :func:`pooled_run_variance` when neighbouring shapes' deviations are correlated.

    Squared deviations of shapes at lag ``k`` (in FLOP order) covary by
    ``rho[k]**2``, so a pool of ``m`` shapes swept through a drift holds fewer
    than ``sum df`` independent pieces: ``(sum df)**2 / sum_jl min(df_j, df_l) rho_jl**2``.
    """
    x = np.asarray(log_flops, dtype=float)
    inside = _pool_members(x, df, pool_df).astype(float)
    lag = np.abs(np.arange(len(x))[:, None] - np.arange(len(x))[None, :])
    shared = np.minimum(df[:, None], df[None, :]) * rho[lag] ** 2
    den = np.einsum("ij,jk,ik->i", inside, shared, inside)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (inside @ df) ** 2 / den, 0.0)


def run_covariance(va: np.ndarray, vb: np.ndarray, rho_a: np.ndarray, rho_b: np.ndarray) -> np.ndarray:
    """Covariance of the mean log ratio between points: each side's variance times its autocorrelation by lag."""
    lag = np.abs(np.arange(len(va))[:, None] - np.arange(len(va))[None, :])
    sa, sb = np.sqrt(va), np.sqrt(vb)
    return np.outer(sa, sa) * rho_a[lag] + np.outer(sb, sb) * rho_b[lag]


# -- choosing the method -----------------------------------------------------------


def n_passes(values: np.ndarray) -> int:
    """Passes (rows) of a (pass, point) array that measured at least one point."""
    return int(np.isfinite(np.atleast_2d(values)).any(axis=1).sum())


def choose_method(values_a: np.ndarray, values_b: np.ndarray) -> str:
    """``"runs"`` when both series were measured in at least two passes, else ``"shapes"``."""
    return "runs" if min(n_passes(values_a), n_passes(values_b)) >= 2 else "shapes"
