"""Per-shape lead evidence that survives run-to-run variation (numpy/scipy only).

The question at every shape is whether series ``a`` is faster than ``b`` by
more than what varies *between runs*. Timings of one run (one pass of a sweep)
share what changes from run to run: clocks and thermals, a busy neighbour for a
few seconds, allocator and cache placement, a kernel choice after autotuning.
Those move all samples of a shape together, and in a sweep done in FLOP order
a slow phase covers several consecutive shapes. A bootstrap of the samples of
one run knows only the noise *within* the run, so it calls such shifts leads
(kept here as :func:`within_run_evidence`, for benchmarks and tests only).

Two methods take the run, or the shape, as the unit of evidence. Both give
every point (a) its own log ratio with a t interval against the noise that
matters, and (b) a lead test on the *local trend* of the log ratio along log10
FLOPs: the point alone or a local-linear smooth (Gaussian kernel reaching the
k-th nearest FLOP count, k = 1 (``runs``) or 2 (``shapes``) .. ``NEIGHBOURS``;
at least ``MIN_BANDWIDTH`` decades), chosen per point by the
intersection-of-confidence-intervals rule
(:func:`ici`): a wider kernel is used only while its interval still meets
those of all narrower ones, so flat stretches borrow strength from their
neighbours and steps and bends are not smoothed across (a plain smooth, tried
first, called the wrong chip near a steep crossover).

``runs`` (both series measured in R >= 2 passes)
    A point's value is the mean over passes of the per-pass log median. The
    run-to-run variance of one pass is estimated per shape from its passes and,
    because R is small (2-5), pooled over the shapes nearest in log FLOPs until
    ``POOL_DF`` degrees of freedom (:func:`pooled_run_variance`); intervals are
    Welch/Satterthwaite t intervals. The smooth weights shapes by inverse
    variance (an outlying pass makes its shape count less) and its variance is
    ``sum S_ij^2 v_j`` plus the variance of a pass-level offset shared by all
    shapes (a pass that was slow everywhere), estimated from the passes, and
    with the autocorrelation along FLOPs of each pass's deviations (up to
    ``RUN_LAGS`` shapes), which is what passes swept in FLOP order through a
    slow drift show. Passes in shuffled order (``sweep --repeats``) turn such a
    drift into run-to-run variance at random shapes, which this measures best.

``shapes`` (one value per shape: R = 1, files without a pass index, published
tables, grids with many shapes per FLOP count)
    Run-to-run variation was not measured, so the scatter of *shapes* is the
    noise: its local sd comes from :func:`pseudo_residuals` (each shape's
    distance to the line through its neighbours, so a steep real trend is not
    taken for scatter) over a kernel ``SCALE_WIDTH`` times wider than the
    smooth, with the t-test taking that kernel's effective number of shapes as
    its degrees of freedom; the smooth is robust (LOWESS-style bisquare); correlation of
    neighbours in FLOP (= sweep) order up to ``HAC_LAGS`` shapes enters the
    variance of the smooth (Bartlett weights, as in Newey-West). An outlying
    shape inflates the local sd instead of making a lead. What this cannot do:
    a slow drift of the machine lasting as long as a lead, or an offset of the
    whole sweep, is indistinguishable from a lead without repeated passes; the
    output says "run-to-run variation not measured" for that reason.

    Why a smooth and not a sign test over windows: a sign test in windows of w
    shapes cannot reach p < alpha / n for small w (w = 7 gives p >= 1/64), so
    with Holm over 40 shapes it never calls anything; the smooth uses the size
    of the differences, and its variance comes from the same shapes, so it
    needs no sample-level noise model (records with a single value work).

Both methods then apply Holm's step-down correction over all points of the
pair (family-wise error ``alpha``) and the run rule: a lead must hold at
``min_run`` consecutive distinct FLOP counts (:func:`apply_min_run`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

METHODS = ("runs", "shapes")
POOL_DF = 8  # degrees of freedom the pooled run-to-run variance aims for
NEIGHBOURS = 4  # shapes: the kernel at a shape reaches its 4th nearest FLOP count
SCALE_WIDTH = 4.0  # the noise scale is taken over a kernel this many times wider than the smooth
ICI_GAMMA = 1.0  # intervals of +- 1 standard error decide how far a smooth may reach (bias-averse)
MIN_BANDWIDTH = 0.1  # decades of FLOPs, Gaussian sd
HAC_LAGS = 3  # neighbouring shapes (in FLOP order) whose noise may be correlated (shapes)
RUN_LAGS = 12  # the same for the deviations of one pass (runs), which measure it directly
ROBUST_PASSES = 2
MIN_SHAPES = 5  # fewer points than this: the shape scatter cannot be estimated
NOT_MEASURED = "run-to-run variation not measured"
# What the shapes method cannot tell from a lead (docs/statistics-calibration.md: 97% false leads under a
# 2% drift in FLOP order, 15% shuffled); said in every comparison that rests on it.
ONE_PASS_LIMIT = ("verdicts rest on a series measured in one pass: a slow drift of the machine or an offset "
                  "of its whole sweep can pass for a lead; sweep both with --repeats 2 or more to measure it")


@dataclass(frozen=True)
class Evidence:
    """Per-point lead evidence for a pair of series, a over b, on the log scale.

    ``estimate`` is the log ratio a/b measured at each point (mean over passes)
    and ``low``/``high`` its ``1 - alpha`` interval, against the run-to-run
    variance (``runs``) or the scatter of shapes (``shapes``). ``trend`` is the
    local smooth of the log ratio along FLOPs that the lead test uses; ``p`` is
    its two-sided p-value of "no difference", ``p_adjusted`` Holm-adjusted over
    the points, ``verdict`` +1 (a leads), -1 (b leads) or 0 (ambiguous) after
    Holm and the run rule. ``runs_measured`` False means run-to-run variation
    was not measured and the verdict rests on the scatter of shapes.
    """

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    trend: np.ndarray
    p: np.ndarray
    p_adjusted: np.ndarray
    verdict: np.ndarray
    method: str
    runs_measured: bool
    notes: tuple[str, ...] = ()


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


def _decide(estimate: np.ndarray, p: np.ndarray, flops: np.ndarray, alpha: float,
            min_run: int) -> tuple[np.ndarray, np.ndarray]:
    adj = holm(p)
    verdict = np.where(adj < alpha, np.sign(estimate), 0).astype(int)
    return adj, apply_min_run(verdict, min_run, flops)


# -- the smoother shared by both methods ----------------------------------------


def _bandwidths(x: np.ndarray, neighbours: int, min_bandwidth: float) -> np.ndarray:
    """Kernel width at each point: distance to its ``neighbours``-th nearest other FLOP count."""
    levels = np.unique(x)
    dist = np.sort(np.abs(x[:, None] - levels[None, :]), axis=1)
    return np.maximum(dist[:, min(neighbours, len(levels) - 1)], min_bandwidth)


def smoother_matrix(x: np.ndarray, h: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Rows of a local linear smoother, ``smooth = S @ y``: Gaussian kernel of width ``h[i]`` times ``weights``.

    Where all the weight sits on one FLOP count the row falls back to the local mean.
    """
    u = (x[None, :] - x[:, None]) / h[:, None]
    k = np.exp(-0.5 * u**2) * weights[None, :]
    s0, s1, s2 = k.sum(1), (k * u).sum(1), (k * u**2).sum(1)
    det = s0 * s2 - s1**2
    flat = det <= 1e-9 * s0 * s2 + 1e-300
    with np.errstate(invalid="ignore", divide="ignore"):
        lin = k * (s2[:, None] - s1[:, None] * u) / det[:, None]
    return np.where(flat[:, None], k / s0[:, None], lin)


def _t_test(est: np.ndarray, se: np.ndarray, df: np.ndarray | float) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        p = 2 * student_t.sf(np.abs(est) / se, df)
    return np.where(np.isfinite(p), p, 1.0)


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


def runs_evidence(log_flops: np.ndarray, a: RunSide, b: RunSide, *, alpha: float = 0.05, min_run: int = 2,
                  neighbours: int = NEIGHBOURS, min_bandwidth: float = MIN_BANDWIDTH,
                  extra_var: np.ndarray | None = None) -> Evidence:
    """Test the local trend of the log ratio against the run-to-run variance of both sides.

    At a point, the mean log ratio over passes has variance
    ``v = var_a / R_a + var_b / R_b`` (t interval, Satterthwaite df). The lead
    test uses that point alone or a local-linear smooth along FLOPs with
    inverse-variance weights (a shape with an outlying pass counts less), of
    variance ``S C S'`` (``C``: the points' variances with each side's
    autocorrelation along FLOPs, ``RunSide.rho``; diagonal for shuffled passes)
    plus that of a pass-level offset common to all shapes (``RunSide.common``);
    the width is chosen per point by :func:`ici` among kernels reaching the
    1st .. ``neighbours``-th nearest FLOP count.
    """
    x = np.asarray(log_flops, dtype=float) / np.log(10)
    d = a.mean - b.mean
    va, vb = a.var / a.n_runs, b.var / b.n_runs
    v = va + vb + (0.0 if extra_var is None else np.asarray(extra_var, dtype=float))
    ok = np.isfinite(v) & (v > 0)
    if ok.sum() < 2 or len(np.unique(x[ok])) < 2:
        return _uncalled(d, "runs", "too few points with a run-to-run variance")
    with np.errstate(invalid="ignore", divide="ignore"):
        df_point = np.where(ok, v**2 / (va**2 / a.df + vb**2 / b.df), 1.0)
    half = np.where(ok, student_t.ppf(1 - alpha / 2, df_point) * np.sqrt(v), np.inf)
    cov = (run_covariance(np.where(ok, va, 0.0), np.where(ok, vb, 0.0), a.rho, b.rho)
           + np.diag(np.where(ok, v - va - vb, 0.0)))  # interpolation error: independent per point
    levels = [(np.where(ok, d, 0.0), np.where(ok, v, np.inf), df_point)]
    levels += [_run_level(np.where(ok, d, 0.0), v, ok, cov, df_point, (a, b), smoother_matrix(
        x[ok], _bandwidths(x[ok], k, min_bandwidth), 1.0 / v[ok])) for k in range(1, neighbours + 1)]
    trend, se, df = _pick(levels)
    p = np.where(ok, _t_test(trend, se, df), 1.0)
    trend = np.where(ok, trend, d)
    adj, verdict = _decide(trend, p, np.exp(log_flops), alpha, min_run)
    notes = () if ok.all() else (f"{int((~ok).sum())} point(s) without a run-to-run variance are never called",)
    return Evidence(d, d - half, d + half, trend, p, adj, verdict, "runs", True, notes)


def _run_level(d: np.ndarray, v: np.ndarray, ok: np.ndarray, cov: np.ndarray,
               df_point: np.ndarray, sides: tuple[RunSide, RunSide],
               smoother: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Smooth of ``d`` over the points ``ok``, its variance (with the pass offsets) and Satterthwaite df."""
    s = np.zeros((len(d), len(d)))
    s[np.ix_(ok, ok)] = smoother
    parts = s**2 * np.where(ok, v, 0.0)[None, :]
    var = np.maximum(np.einsum("ij,jk,ik->i", s, cov, s), parts.sum(axis=1)) + sum(side.common for side in sides)
    common_df2 = sum(side.common**2 / side.common_df for side in sides)
    # the points' variances are pooled from overlapping neighbours, so their errors move together:
    # combine them as perfectly correlated (Satterthwaite over independent parts gave df in the hundreds)
    df = var**2 / np.maximum((parts / np.sqrt(df_point[None, :])).sum(axis=1) ** 2 + common_df2, 1e-300)
    return s @ d, var, df


def run_covariance(va: np.ndarray, vb: np.ndarray, rho_a: np.ndarray, rho_b: np.ndarray) -> np.ndarray:
    """Covariance of the mean log ratio between points: each side's variance times its autocorrelation by lag."""
    lag = np.abs(np.arange(len(va))[:, None] - np.arange(len(va))[None, :])
    sa, sb = np.sqrt(va), np.sqrt(vb)
    return np.outer(sa, sa) * rho_a[lag] + np.outer(sb, sb) * rho_b[lag]


def ici(est: np.ndarray, se: np.ndarray, gamma: float = ICI_GAMMA) -> np.ndarray:
    """Intersection of confidence intervals: per point (column), the widest level (row) whose interval
    ``est +- gamma * se`` still meets those of all narrower levels (Goldenshluger-Nemirovski, Katkovnik).

    Rows go from no smoothing to the widest kernel. Where the log ratio is
    flat, wide kernels agree with narrow ones and lend power; at a step or a
    bend they stop agreeing, so the smooth never drags a verdict across it.
    """
    lo = np.maximum.accumulate(est - gamma * se, axis=0)
    hi = np.minimum.accumulate(est + gamma * se, axis=0)
    return np.logical_and.accumulate(lo <= hi, axis=0).sum(axis=0) - 1


def _pick(levels: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, ...]:
    """Estimate, standard error and df at the level :func:`ici` picks for each point."""
    est, var, df = (np.stack([np.broadcast_to(np.asarray(lv[i], float), levels[0][0].shape) for lv in levels])
                    for i in range(3))
    se = np.sqrt(var)
    k = ici(est, np.where(np.isfinite(se), se, 1e300))
    cols = np.arange(est.shape[1])
    return est[k, cols], se[k, cols], df[k, cols]


# -- shapes: the shape is the unit -----------------------------------------------


def _bisquare(resid: np.ndarray) -> np.ndarray:
    scale = 6.0 * np.median(np.abs(resid))
    if scale <= 0:
        return np.ones_like(resid)
    return np.clip(1 - (resid / scale) ** 2, 0, None) ** 2


def _robust_smoother(x: np.ndarray, d: np.ndarray, h: np.ndarray) -> np.ndarray:
    s = smoother_matrix(x, h, np.ones_like(d))
    for _ in range(ROBUST_PASSES):
        s = smoother_matrix(x, h, np.maximum(_bisquare(d - s @ d), 1e-3))
    return s


def pseudo_residuals(x: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Each point's distance from the straight line through its two neighbours, scaled to the noise sd.

    Gasser, Sroka and Jennen-Steinmetz (1986): ``(d_i - w d_{i-1} - (1-w) d_{i+1}) / sqrt(1 + w^2 + (1-w)^2)``
    has the noise variance wherever the log ratio is locally linear, so a steep
    or curved trend (a 13x lead at small shapes) does not pass for noise; the
    end points reuse their neighbour's value.
    """
    span = x[2:] - x[:-2]
    w = np.where(span > 0, (x[2:] - x[1:-1]) / np.where(span > 0, span, 1.0), 0.5)
    e = (d[1:-1] - w * d[:-2] - (1 - w) * d[2:]) / np.sqrt(1 + w**2 + (1 - w) ** 2)
    return np.concatenate(([e[0]], e, [e[-1]]))


def _local_scale(x: np.ndarray, h: np.ndarray, resid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sd of the shape noise at each point (kernel-weighted mean square of ``resid``, kernel ``SCALE_WIDTH``
    times wider than the smooth) and its df, the kernel's effective number of residuals ``(sum k)^2 / sum k^2``.
    """
    k = np.exp(-0.5 * ((x[None, :] - x[:, None]) / (SCALE_WIDTH * h[:, None])) ** 2)
    sd = np.sqrt((k @ resid**2) / k.sum(axis=1))
    return sd, np.maximum(k.sum(axis=1) ** 2 / (k**2).sum(axis=1), 1.0)


def _autocorrelation(z: np.ndarray, lags: int) -> np.ndarray:
    """Bartlett-tapered autocorrelation of standardized residuals in FLOP order, clipped to [0, 0.95]."""
    n = len(z)
    rho = np.zeros(n)
    rho[0] = 1.0
    c0 = float(np.mean(z * z)) or 1.0
    for k in range(1, min(lags, n - 1) + 1):
        r = float(np.mean(z[:-k] * z[k:])) / c0
        rho[k] = min(max(r, 0.0), 0.95) * (1 - k / (lags + 1))
    return rho


def shapes_evidence(log_flops: np.ndarray, log_ratio: np.ndarray, *, alpha: float = 0.05, min_run: int = 2,
                    neighbours: int = NEIGHBOURS, min_bandwidth: float = MIN_BANDWIDTH,
                    lags: int = HAC_LAGS) -> Evidence:
    """Robust local-linear smooth of the log ratio along log10 FLOPs, tested against the shape scatter.

    The noise of one shape is the residual scatter around the smooth (local,
    corrected for the smoother's degrees of freedom ``n - 2 tr S + tr S S'``),
    correlated between neighbours in FLOP order (which is the sweep order of
    a file without passes). A point's interval is its own value plus or minus
    that noise; the lead test uses the smooth and its variance ``S C S'``.
    """
    x = np.asarray(log_flops, dtype=float) / np.log(10)
    d = np.asarray(log_ratio, dtype=float)
    n = len(d)
    if len(np.unique(x)) < 3 or n < MIN_SHAPES:
        return _uncalled(d, "shapes", f"{n} point(s): too few shapes to estimate their scatter")
    h = _bandwidths(x, neighbours, min_bandwidth)
    s = _robust_smoother(x, d, h)
    resid = d - s @ d
    dof = max(n - 2 * np.trace(s) + np.sum(s * s), 1.0)
    sd, df = _local_scale(x, h, pseudo_residuals(x, d))
    sd = np.maximum(sd, 1e-12)
    rho = _autocorrelation(resid / sd, lags)
    cov = sd[:, None] * sd[None, :] * rho[np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])]
    levels = [(d, sd**2, df)]
    for k in range(2, neighbours + 1):
        sk = _robust_smoother(x, d, _bandwidths(x, k, min_bandwidth))
        levels.append((sk @ d, np.maximum(np.einsum("ij,jk,ik->i", sk, cov, sk), 1e-300), df))
    trend, se, df = _pick(levels)
    q = student_t.ppf(1 - alpha / 2, dof)  # the shape's own interval: sd from all residuals' df
    p = _t_test(trend, se, df)  # the test: local df, so a noisy stretch is not over-trusted
    adj, verdict = _decide(trend, p, np.exp(log_flops), alpha, min_run)
    return Evidence(d, d - q * sd, d + q * sd, trend, p, adj, verdict, "shapes", False,
                    (NOT_MEASURED, ONE_PASS_LIMIT))


def _uncalled(d: np.ndarray, method: str, why: str) -> Evidence:
    inf, ones = np.full(len(d), np.inf), np.ones(len(d))
    notes = (why, NOT_MEASURED) if method == "shapes" else (why,)
    return Evidence(d.copy(), -inf, inf, d.copy(), ones, ones, np.zeros(len(d), dtype=int), method,
                    method == "runs", notes)


# -- choosing the method -----------------------------------------------------------


def n_passes(values: np.ndarray) -> int:
    """Passes (rows) of a (pass, point) array that measured at least one point."""
    return int(np.isfinite(np.atleast_2d(values)).any(axis=1).sum())


def choose_method(values_a: np.ndarray, values_b: np.ndarray) -> str:
    """``"runs"`` when both series were measured in at least two passes, else ``"shapes"``."""
    return "runs" if min(n_passes(values_a), n_passes(values_b)) >= 2 else "shapes"


def lead_evidence(log_flops: Sequence[float], values_a: np.ndarray, values_b: np.ndarray, *,
                  alpha: float = 0.05, min_run: int = 2, method: str = "auto",
                  extra_var: np.ndarray | None = None) -> Evidence:
    """Per-point evidence that a leads b, from the log values of both series per (pass, point).

    Parameters
    ----------
    log_flops:
        Natural log of the FLOP count of each point, sorted ascending (the
        sweep order of files without passes).
    values_a, values_b:
        Log metric (log speed; higher is better) of a and of b, shape
        ``(passes, points)`` with NaN where a pass lacks a point; one row when
        a series was measured once or has no pass index.
    alpha, min_run:
        Family-wise error of the lead calls (Holm) and interval level
        ``1 - alpha``; fewest consecutive FLOP counts that make a lead.
    method:
        ``"runs"``, ``"shapes"`` or ``"auto"`` (:func:`choose_method`).
        ``"shapes"`` on several passes uses their mean per point.
    extra_var:
        Variance to add to the log ratio of each point under ``runs`` (e.g. the
        error of reading a value off an interpolated curve); under ``shapes``
        the scatter of shapes already contains it.
    """
    if method not in (*METHODS, "auto"):
        raise ValueError(f"method={method!r} must be one of runs, shapes, auto")
    x = np.asarray(log_flops, dtype=float)
    va, vb = np.atleast_2d(np.asarray(values_a, float)), np.atleast_2d(np.asarray(values_b, float))
    if va.shape[1] != len(x) or vb.shape[1] != len(x):
        raise ValueError("values_a and values_b need one column per point of log_flops")
    chosen = choose_method(va, vb) if method == "auto" else method
    if chosen == "runs":
        return runs_evidence(x, run_side(x, va), run_side(x, vb), alpha=alpha, min_run=min_run,
                             extra_var=extra_var)
    with np.errstate(invalid="ignore"):
        d = np.nanmean(va, axis=0) - np.nanmean(vb, axis=0)
    return shapes_evidence(x, d, alpha=alpha, min_run=min_run)


# -- the old method, for benchmarks and tests only ----------------------------------


def within_run_evidence(log_flops: Sequence[float], samples_a: np.ndarray, samples_b: np.ndarray, *,
                        alpha: float = 0.05, min_run: int = 2, n_boot: int = 400, seed: int = 0) -> Evidence:
    """The pre-issue-12 test: bootstrap the median of one run's samples, normal test on its standard error.

    ``samples_a``/``samples_b`` are (points, samples) arrays of seconds. Kept
    to show, in tests and ``benchmarks/false_leads.py``, that it calls
    run-to-run shifts leads; :func:`lead_evidence` replaces it.
    """
    rng = np.random.default_rng(seed)

    def boot(s: np.ndarray) -> np.ndarray:
        idx = rng.integers(0, s.shape[1], (n_boot, s.shape[1]))
        return np.log(np.median(s[:, idx], axis=2))  # (points, n_boot)

    a, b = np.asarray(samples_a, float), np.asarray(samples_b, float)
    est = np.log(np.median(b, axis=1)) - np.log(np.median(a, axis=1))  # time b / time a = speed a / speed b
    draws = boot(b) - boot(a)
    se = np.std(draws, axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(se > 0, 2 * norm.sf(np.abs(est) / se), np.where(est == 0, 1.0, 0.0))
    lo, hi = np.quantile(draws, [alpha / 2, 1 - alpha / 2], axis=1)
    adj, verdict = _decide(est, p, np.exp(np.asarray(log_flops, float)), alpha, min_run)
    return Evidence(est, lo, hi, est, p, adj, verdict, "within-run bootstrap", False, (NOT_MEASURED,))
