"""The statistics of one FLOP band (numpy/scipy only): the signed-rank test and its exact null, the drift
factor, the Hodges-Lehmann effect, the band mean with the shape as a random effect and each shape's run-to-run
variance. :mod:`mfu_sweep.analysis.verdicts.bands` turns them into verdicts; the variance that pass offsets and
drift within a pass add to a band mean is the runs test's own (:mod:`mfu_sweep.analysis.verdicts.run_test`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import cache

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from mfu_sweep.analysis.verdicts.evidence import run_side

EXACT_MAX = 30  # exact sign-flip distribution of the signed-rank statistic up to this many shapes
HL_MAX = 3000  # Hodges-Lehmann from all Walsh averages up to this many shapes, else the median

# -- the signed-rank test, vectorised over rows -------------------------------------------


@cache
def _exact_upper(n: int) -> np.ndarray:
    """``P(W+ >= w)`` for w = 0 .. n(n+1)/2 under random signs (no ties), by dynamic programming."""
    top = n * (n + 1) // 2
    counts = np.zeros(top + 1)
    counts[0] = 1.0
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:-r].copy()
    counts /= 2.0**n
    return np.cumsum(counts[::-1])[::-1]


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks along the last axis (ties share their mean rank)."""
    from scipy.stats import rankdata

    return rankdata(x, axis=-1)


def signed_rank_p(d: np.ndarray, drift: float | np.ndarray = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided sign-flip p-value of the signed-rank statistic of each row of ``d``, and its sign.

    ``drift`` >= 1 inflates the null variance (correlated neighbours); with
    ``drift == 1``, no ties, no zeros and at most ``EXACT_MAX`` columns the
    p-value is exact, else normal with the conditional variance ``sum rank^2``
    and a continuity correction of one rank step.
    """
    d = np.atleast_2d(np.asarray(d, dtype=float))
    n = d.shape[-1]
    sign = np.sign(d)
    r = _ranks(np.abs(d))
    stat = (sign * r).sum(axis=-1)
    var = ((sign != 0) * r**2).sum(axis=-1) * np.asarray(drift, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.maximum(np.abs(stat) - 1.0, 0.0) / np.sqrt(var)
    p = np.where(var > 0, 2 * norm.sf(z), 1.0)
    if n <= EXACT_MAX and n > 0:
        integer = (np.abs(r - np.round(r)) < 1e-9).all(axis=-1) & (sign != 0).all(axis=-1)
        no_ties = integer & (np.sort(r, axis=-1) == np.arange(1, n + 1)).all(axis=-1)
        upper = _exact_upper(n)
        w_plus = np.round((stat + n * (n + 1) / 2) / 2).astype(int).clip(0, n * (n + 1) // 2)
        w_low = n * (n + 1) // 2 - w_plus  # P(W+ <= w) = P(W+ >= top - w) by symmetry
        exact = np.minimum(1.0, 2 * np.minimum(upper[w_plus], upper[w_low]))
        p = np.where(no_ties & (np.asarray(drift) <= 1.0), exact, p)
    return np.minimum(p, 1.0), np.sign(stat)


def drift_factor(d: np.ndarray, bands: Sequence[tuple[int, int, float, float]], log_flops: np.ndarray | None = None,
                 lags: int | None = None) -> float:
    """Variance factor of a band mean for drift: ``1 + 2 c sum_k (1 - k/n) phi^k`` (white noise plus AR(1)).

    The correlation of neighbours in FLOP order is modelled as ``rho_k = c phi^k``
    with ``phi = rho_2 / rho_1`` and ``c = rho_1 / phi``, estimated from the
    lag-1 and lag-2 autocorrelation of the within-band residuals, summed over
    the lags of the largest band (``n``) unless ``lags`` is given.

    Residuals are each band's log ratios minus a line (a parabola from 8
    shapes) in log FLOPs (a real trend of the lead along FLOPs is not drift), scaled by their MAD
    and clipped to +-3 (an outlying shape is one shape), taken in FLOP order;
    lag products are pooled over bands. Drift is assumed only when ``rho_1``
    exceeds ``2 / sqrt(pairs)`` (white noise stays below it about 97.5% of the
    time), so independent shapes keep the exact test.
    """
    x_all = np.arange(len(d), dtype=float) if log_flops is None else np.asarray(log_flops, dtype=float)
    zs = []
    for s, e, _, _ in bands:
        x, y = x_all[s:e], d[s:e]
        if len(y) < 4:
            continue
        deg = min(2 if len(y) >= 8 else 1, len(np.unique(x)) - 1)
        resid = y - np.polyval(np.polyfit(x, y, deg), x) if deg > 0 else y - np.median(y)
        mad = 1.4826 * float(np.median(np.abs(resid - np.median(resid))))
        if mad > 0:
            zs.append(np.clip(resid / mad, -3, 3))
    if not zs:
        return 1.0
    c0 = sum(float(np.sum(z * z)) for z in zs) / sum(len(z) for z in zs)
    rho = []
    for k in (1, 2):
        prods = [(float(np.sum(z[:-k] * z[k:])), len(z) - k) for z in zs if len(z) > k]
        pairs = sum(m for _, m in prods)
        rho.append(sum(p for p, _ in prods) / pairs / c0 if pairs >= 4 and c0 > 0 else 0.0)
        if k == 1 and (pairs < 4 or rho[0] <= 2 / math.sqrt(pairs)):
            return 1.0
    phi = min(max(rho[1] / rho[0], 0.0), 0.95)
    amp = min(rho[0] / phi, 1.0) if phi > 0 else rho[0]
    n = max(len(z) for z in zs) if lags is None else lags
    k = np.arange(1, n)
    return float(1 + 2 * amp * np.sum((1 - k / n) * phi**k)) if phi > 0 else 1 + 2 * amp * (1 - 1 / n)


# -- the band's effect --------------------------------------------------------------------


def hodges_lehmann(d: np.ndarray, alpha: float, drift: float = 1.0, most: int = HL_MAX) -> tuple[float, float, float]:
    """Median of the Walsh averages and its signed-rank ``1 - alpha`` interval (normal order statistics).

    Above ``most`` shapes (``HL_MAX``): the median and a normal interval from the MAD.
    """
    d = np.asarray(d, dtype=float)
    n = len(d)
    if n == 0:
        return 0.0, -math.inf, math.inf
    z = norm.ppf(1 - alpha / 2) * math.sqrt(drift)
    if n > most:
        mid = float(np.median(d))
        half = z * 1.2533 * 1.4826 * float(np.median(np.abs(d - mid))) / math.sqrt(n)
        return mid, mid - half, mid + half
    i, j = np.triu_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2)
    m = len(walsh)
    k = int(math.floor(n * (n + 1) / 4 - z * math.sqrt(n * (n + 1) * (2 * n + 1) / 24)))
    lo = float(walsh[k]) if 0 <= k < m else -math.inf
    hi = float(walsh[m - 1 - k]) if 0 <= k < m else math.inf
    return float(np.median(walsh)), lo, hi


def common_p(mean: float, parts: Sequence[tuple[float, float]]) -> tuple[float | None, float]:
    """Welch/Satterthwaite t p-value of a band mean against common variances ``(var, df)``; None if none."""
    parts = [(v, df) for v, df in parts if v > 0]
    if not parts:
        return None, 0.0
    var = sum(v for v, _ in parts)
    df = var**2 / sum(v**2 / df for v, df in parts if math.isfinite(df)) if any(
        math.isfinite(df) for _, df in parts) else math.inf
    return float(2 * student_t.sf(abs(mean) / math.sqrt(var), df)), var


def random_effects(d: np.ndarray, v: np.ndarray, df_point: np.ndarray, x: np.ndarray | None = None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Band mean of ``d`` (last axis: shapes) with shape as a random effect: estimate, standard error, df.

    ``v`` is each shape's run-to-run variance of ``d`` and ``df_point`` its df.
    With three or more shapes whose scatter exceeds ``v`` (Cochran's Q above
    ``n - 1``) the shape variance ``tau^2`` is estimated by moments
    (DerSimonian-Laird) and the standard error is Hartung-Knapp's (never below
    the random-effects one) with ``n - 1`` df; otherwise the inverse-variance
    mean is tested against run-to-run variation alone (Satterthwaite df): with
    one or two shapes, or shapes that agree, a band is its shapes. ``x`` (log
    FLOPs) lets the shapes scatter around a line instead of a constant (one df
    less); the band verdicts do not use it: a lead that changes within a band
    counts as disagreement between its shapes.
    """
    d, v = np.atleast_2d(d), np.atleast_2d(v)
    n = d.shape[-1]
    xs = np.zeros(n) if x is None else np.asarray(x, dtype=float)
    w = 1.0 / v
    sw = w.sum(-1)
    mu_f = (w * d).sum(-1) / sw
    with np.errstate(invalid="ignore", divide="ignore"):
        parts = w / sw[..., None] ** 2
        df_f = parts.sum(-1) ** 2 / (parts**2 / np.atleast_2d(df_point)).sum(-1)
    slope_df = 1 if x is not None and n >= 4 and np.ptp(xs) > 0 else 0
    resid_df = n - 1 - slope_df
    if n < 3:
        return mu_f, np.sqrt(1.0 / sw), df_f

    def fit(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        tot = weights.sum(-1)
        xc = xs - (weights * xs).sum(-1, keepdims=True) / tot[..., None]
        mu = (weights * d).sum(-1) / tot
        sxx = (weights * xc**2).sum(-1)
        beta = np.where(sxx > 0, (weights * xc * d).sum(-1) / np.where(sxx > 0, sxx, 1.0), 0.0) * slope_df
        return mu, d - mu[..., None] - beta[..., None] * xc

    _, r = fit(w)
    q = (w * r**2).sum(-1)
    c = sw - (w**2).sum(-1) / sw
    tau2 = np.where(c > 0, np.maximum(0.0, (q - resid_df) / np.where(c > 0, c, 1.0)), 0.0)
    ws = 1.0 / (v + tau2[..., None])
    mu_r, r_r = fit(ws)
    hk = (ws * r_r**2).sum(-1) / (resid_df * ws.sum(-1))
    hetero = q > resid_df
    var = np.where(hetero, np.maximum(hk, 1.0 / ws.sum(-1)), 1.0 / sw)
    return np.where(hetero, mu_r, mu_f), np.sqrt(var), np.where(hetero, float(resid_df), df_f)


def run_variance(flops: Sequence[float], values_a: np.ndarray, values_b: np.ndarray,
                 extra_var: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each point's run-to-run variance of the mean log ratio and its Satterthwaite df, from the passes
    (:func:`mfu_sweep.analysis.verdicts.evidence.run_side`: per-shape variance pooled over the nearest shapes)."""
    x = np.log(np.asarray(flops, dtype=float))
    sa, sb = run_side(x, np.atleast_2d(values_a)), run_side(x, np.atleast_2d(values_b))
    va, vb = sa.var / sa.n_runs, sb.var / sb.n_runs
    var = va + vb + (0.0 if extra_var is None else np.asarray(extra_var, dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        df = var**2 / (va**2 / sa.df + vb**2 / sb.df)
    bad = ~np.isfinite(var) | (var <= 0)
    return np.where(bad, np.inf, var), np.where(np.isfinite(df) & ~bad, df, 1.0)


# -- the interval of a test at another level ---------------------------------------------------------------------

INVERT_SPAN = math.log(1e4)  # a log ratio beyond x1e4 either way is no bound: the interval is unbounded there
INVERT_STEPS = 40  # bisection steps per end: the end to about 1e-9 of the bracket, far below any margin


def invert(shifted: Callable[[float], tuple[float, int]], level: float, centre: float) -> tuple[float, float]:
    """The interval of the shifts ``s`` that ``shifted`` (the two-sided test of ``d - s``) does not reject at
    ``level``: each end found outward from ``centre`` (the test's estimate) by doubling, then bisection.

    The interval and the test are one: its end lies past a shift exactly when the test rejects that shift (the
    statistic is monotone in the shift), so a band whose interval lies wholly past the margin is one whose test
    rejects the margin at ``level``. An end that no shift within ``INVERT_SPAN`` reaches is infinite; a test that
    rejects its own estimate gives ``(nan, nan)``.
    """
    if shifted(centre)[0] < level:
        return math.nan, math.nan
    ends = []
    for sign in (-1.0, 1.0):
        inside, step = 0.0, 1e-3
        while step <= INVERT_SPAN and shifted(centre + sign * step)[0] >= level:
            inside, step = step, step * 2
        if step > INVERT_SPAN:
            ends.append(sign * math.inf)
            continue
        outside = step
        for _ in range(INVERT_STEPS):
            mid = (inside + outside) / 2
            inside, outside = (mid, outside) if shifted(centre + sign * mid)[0] >= level else (inside, mid)
        ends.append(centre + sign * inside)
    return ends[0], ends[1]
