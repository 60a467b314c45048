"""One lead verdict per FLOP band, with the shape as the unit of evidence (numpy/scipy only).

A comparison of two series has one log ratio ``d_i`` (a over b, mean over
passes) per shape. Shapes of one FLOP count differ systematically (aspect
ratio, alignment, which kernel the library picks), so a test per shape against
a smooth along FLOPs either drowns in that scatter or, corrected over every
shape, has no power. Here the question is asked once per FLOP band: *do the
shapes of this band favour a or b?*

Bands
    Half-decades aligned to powers of ten (``[1e9, 3.16e9)``, ...), widened by
    whole half-decades until each holds at least ``MIN_BAND_SHAPES`` shapes
    (a last short band joins the one before). The partition depends on the FLOP
    counts only, never on the ratios, so the family of tests is fixed before
    any p-value is seen.

The shape test (every method)
    Wilcoxon's signed-rank statistic ``T = sum sign(d_i) rank|d_i|`` against
    its sign-flip (permutation) distribution: under "no lead" each shape's log
    ratio is as likely positive as negative, whatever its size, so a shape that
    is 3x faster counts as one shape and shapes that differ systematically are
    the noise the test is calibrated against. Exact (all ``2^n`` sign flips,
    by dynamic programming) up to ``EXACT_MAX`` shapes without ties, else the
    normal approximation with the conditional variance ``sum rank^2`` (exact
    for ties and zero differences). Slow drift of the machine across
    consecutive shapes makes neighbours' signs agree; the lag-1 and lag-2
    autocorrelation of the within-band residuals in FLOP order (pooled over the
    pair, used only where lag 1 exceeds its white-noise bound) fit a white
    noise plus AR(1) model whose variance factor for a band mean inflates the
    null variance (:func:`drift_factor`), so drift is not counted as
    independent shapes.

With passes (``runs``: both series in R >= 2 passes)
    The band mean of the log ratio with the shape as a random effect
    (:func:`random_effects`: DerSimonian-Laird shape variance, Hartung-Knapp
    standard error) against each shape's run-to-run variance, plus the
    variance of the band mean that drift within a pass (the correlation of
    neighbouring shapes) and pass-level offsets add, both estimated over all
    shapes of each series (:func:`mfu_sweep.analysis.verdicts.evidence.run_side`; per
    band, two passes would give one degree of freedom), Satterthwaite df.

Calibration (either method)
    A timing-method calibration (:mod:`mfu_sweep.analysis.verdicts.timing`) divides one
    factor per band out of the ratios; its variance joins the ``runs`` test, and
    for ``shapes`` a second test of the band mean against shape scatter plus
    calibration variance must also reject (intersection-union: the larger
    p-value), so each source of error is held at ``alpha``.

Then Holm's step-down correction over the bands of the pair (family-wise error
``alpha``). The effect of a band is the Hodges-Lehmann estimate (median of the
Walsh averages, the centre the signed-rank test is about) with its
signed-rank interval, widened by the drift factor and any calibration
variance (``shapes``), or the random-effects mean with its t interval (``runs``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from mfu_sweep.analysis.verdicts.evidence import RunSide, holm, run_covariance, run_side

BANDS_PER_DECADE = 2
MIN_BAND_SHAPES = 10  # fewest shapes a band is widened to: 10 same-sign shapes give exact p = 0.002
MIN_RUN_BAND_SHAPES = 1  # with passes a band may be one shape: run-to-run variation is its noise
EXACT_MAX = 30  # exact sign-flip distribution of the signed-rank statistic up to this many shapes
HL_MAX = 3000  # Hodges-Lehmann from all Walsh averages up to this many shapes, else the median
BAND_TEST = "signed-rank over shapes per FLOP band"


@dataclass(frozen=True)
class Band:
    """The verdict of one FLOP band, a over b on the log scale.

    ``low_flops``/``high_flops`` are the band's edges (half-decades or wider);
    ``start``/``stop`` the [start, stop) range of its points (sorted by FLOPs).
    ``wins_a``/``wins_b``/``ties`` count shapes by the sign of their log ratio.
    ``estimate`` is the Hodges-Lehmann log ratio and ``low``/``high`` its
    ``1 - alpha`` interval; ``p_shapes`` the signed-rank p-value, ``p_common``
    that of the common-offset test (None without passes or calibration), ``p``
    the larger, ``p_adjusted`` Holm over the pair's bands; ``verdict`` +1 (a
    leads), -1 (b leads) or 0; ``drift`` the variance factor for drift.
    """

    low_flops: float
    high_flops: float
    start: int
    stop: int
    wins_a: int
    wins_b: int
    ties: int
    estimate: float
    low: float
    high: float
    p_shapes: float
    p_common: float | None
    p: float
    p_adjusted: float
    verdict: int
    drift: float
    first_flops: float = math.nan
    last_flops: float = math.nan
    median_flops: float = math.nan

    @property
    def n(self) -> int:
        return self.stop - self.start

    def to_json(self, a: str, b: str) -> dict[str, object]:
        return {"low_flops": self.low_flops, "high_flops": self.high_flops, "first_flops": self.first_flops,
                "last_flops": self.last_flops, "n_shapes": self.n,
                "wins_a": self.wins_a, "wins_b": self.wins_b, "ties": self.ties,
                "ratio": math.exp(self.estimate), "ratio_low": _finite(math.exp(self.low)),
                "ratio_high": _finite(math.exp(self.high)), "p_shapes": self.p_shapes, "p_common": self.p_common,
                "p": self.p, "p_adjusted": self.p_adjusted,
                "leader": {1: a, -1: b}.get(self.verdict), "drift_factor": self.drift}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


# -- bands ------------------------------------------------------------------------------


def band_edges(flops: Sequence[float], per_decade: int = BANDS_PER_DECADE,
               min_shapes: int = MIN_BAND_SHAPES) -> list[tuple[int, int, float, float]]:
    """[start, stop) point ranges and FLOP edges of the bands of sorted ``flops``.

    Half-decades (``per_decade`` per decade) aligned to powers of ten, merged
    with the next until each holds ``min_shapes`` points; a short last band
    joins the one before. Depends on the FLOP counts only.
    """
    f = np.asarray(flops, dtype=float)
    if len(f) == 0:
        return []
    level = np.floor(np.log10(f) * per_decade + 1e-9).astype(int)
    cuts = [0] + [i for i in range(1, len(f)) if level[i] != level[i - 1]] + [len(f)]
    out: list[list[int]] = []
    for s, e in zip(cuts, cuts[1:], strict=False):
        if out and out[-1][1] - out[-1][0] < min_shapes:
            out[-1][1] = e
        else:
            out.append([s, e])
    if len(out) > 1 and out[-1][1] - out[-1][0] < min_shapes:
        last = out.pop()
        out[-1][1] = last[1]
    return [(s, e, 10 ** (level[s] / per_decade), 10 ** ((level[e - 1] + 1) / per_decade)) for s, e in out]


def method_edges(flops: Sequence[float], runs: bool) -> list[tuple[int, int, float, float]]:
    """The bands of a method: half-decades as they are for ``runs`` (a band may be one shape measured in
    several passes), widened to ``MIN_BAND_SHAPES`` shapes for ``shapes`` (the signed-rank test needs them)."""
    return band_edges(flops, min_shapes=MIN_RUN_BAND_SHAPES if runs else MIN_BAND_SHAPES)


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


def hodges_lehmann(d: np.ndarray, alpha: float, drift: float = 1.0) -> tuple[float, float, float]:
    """Median of the Walsh averages and its signed-rank ``1 - alpha`` interval (normal order statistics).

    Above ``HL_MAX`` shapes: the median and a normal interval from the MAD.
    """
    d = np.asarray(d, dtype=float)
    n = len(d)
    if n == 0:
        return 0.0, -math.inf, math.inf
    z = norm.ppf(1 - alpha / 2) * math.sqrt(drift)
    if n > HL_MAX:
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


# -- the common-offset test ------------------------------------------------------------------


def _correlated(sides: tuple[RunSide, RunSide], run_var: tuple[np.ndarray, np.ndarray], start: int,
                stop: int) -> list[tuple[float, float]]:
    """Variance of a band's mean log ratio beyond independent shapes, as parts ``(var, df)``: the correlation
    of neighbouring shapes within a pass (drift through passes in FLOP order) and pass-level offsets.

    Both come from :func:`mfu_sweep.analysis.verdicts.evidence.run_side`, estimated over all shapes of each series
    (its autocorrelation of pass deviations and its pass offsets), so a band of few shapes measured in two
    passes does not rest on one degree of freedom; weights are the band mean's (inverse run variance).
    """
    a, b = sides
    cov = run_covariance(a.var / a.n_runs, b.var / b.n_runs, a.rho, b.rho)[start:stop, start:stop]
    w = 1.0 / run_var[0][start:stop]
    u = w / w.sum()
    excess = float(u @ cov @ u - np.sum(u**2 * np.diag(cov)))
    df = float(np.mean(np.minimum(a.df[start:stop], b.df[start:stop])))
    parts = [(max(excess, 0.0), max(df, 1.0)), (a.common, a.common_df), (b.common, b.common_df)]
    return [(v, d) for v, d in parts if np.isfinite(v) and v > 0]


def _satterthwaite(parts: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Sum of variances and its Satterthwaite df (inf when no part has finite df)."""
    var = sum(v for v, _ in parts)
    denom = sum(v**2 / df for v, df in parts if math.isfinite(df) and v > 0)
    return var, (var**2 / denom if denom > 0 else math.inf)


def common_p(mean: float, parts: Sequence[tuple[float, float]]) -> tuple[float | None, float]:
    """Welch/Satterthwaite t p-value of a band mean against common variances ``(var, df)``; None if none."""
    parts = [(v, df) for v, df in parts if v > 0]
    if not parts:
        return None, 0.0
    var = sum(v for v, _ in parts)
    df = var**2 / sum(v**2 / df for v, df in parts if math.isfinite(df)) if any(
        math.isfinite(df) for _, df in parts) else math.inf
    return float(2 * student_t.sf(abs(mean) / math.sqrt(var), df)), var


# -- the verdicts -------------------------------------------------------------------------


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


def band_verdicts(flops: Sequence[float], values_a: np.ndarray, values_b: np.ndarray, *, alpha: float = 0.05,
                  calibration: Sequence[tuple[float, float, float]] | None = None,
                  run_var: tuple[np.ndarray, np.ndarray] | None = None) -> list[Band]:
    """One verdict per FLOP band from the log values of both series per (pass, point).

    Parameters
    ----------
    flops:
        FLOP count of each point, sorted ascending.
    values_a, values_b:
        Log metric (higher is better) per (pass, point), NaN where a pass lacks a point.
    alpha:
        Family-wise error over the bands (Holm) and interval level ``1 - alpha``.
    calibration:
        Per band (in :func:`band_edges` order) the log factor already divided
        out of the ratios, its variance and df; its variance joins the
        common-offset test.
    run_var:
        Method ``runs``: each point's run-to-run variance of its log ratio and
        its df (:func:`run_variance`); None: method ``shapes`` (signed-rank).
    """
    f = np.asarray(flops, dtype=float)
    va, vb = np.atleast_2d(values_a), np.atleast_2d(values_b)
    with np.errstate(invalid="ignore"):
        d = np.nanmean(va, axis=0) - np.nanmean(vb, axis=0)
    edges = method_edges(flops, run_var is not None)
    drift = drift_factor(d, edges, np.log(f)) if run_var is None else 1.0
    rows = []
    x_log = np.log(f)
    sides = (run_side(x_log, va), run_side(x_log, vb)) if run_var is not None else None
    for k, (s, e, lo_f, hi_f) in enumerate(edges):
        x = d[s:e]
        if run_var is None:
            p_unit, sign = signed_rank_p(x, drift)
            est, lo, hi = hodges_lehmann(x, alpha, drift)
            p_unit, sign = float(p_unit[0]), int(sign[0])
            p_common, var_common = None, 0.0
            if calibration is not None:  # intersection-union with a test of the mean against shape scatter
                scatter = float(np.var(x, ddof=1)) / len(x) * drift if len(x) > 1 else math.inf
                p_common, var_common = common_p(float(np.mean(x)), [(scatter, len(x) - 1.0), calibration[k][1:]])
                if var_common > 0:
                    widen = student_t.ppf(1 - alpha / 2, 30) * math.sqrt(calibration[k][1])
                    lo, hi = est - math.hypot(est - lo, widen), est + math.hypot(hi - est, widen)
            agree = p_common is None or np.sign(np.mean(x)) == sign
            p = max(p_unit, p_common or 0.0) if agree else 1.0
        else:
            mu, se, df = (float(y[0]) for y in random_effects(x, run_var[0][s:e], run_var[1][s:e]))
            parts = [(se**2, df), *_correlated(sides, run_var, s, e)]
            if calibration is not None:
                parts.append(calibration[k][1:])
            p_unit = float(2 * student_t.sf(abs(mu) / se, df)) if se > 0 else 1.0
            p_common = None
            var, df = _satterthwaite(parts)
            p = float(2 * student_t.sf(abs(mu) / math.sqrt(var), df)) if var > 0 else 1.0
            half = float(student_t.ppf(1 - alpha / 2, df)) * math.sqrt(var)
            est, lo, hi, sign = mu, mu - half, mu + half, int(np.sign(mu))
        rows.append((s, e, lo_f, hi_f, x, est, lo, hi, p_unit, p_common, p, sign))
    adjusted = holm([r[10] for r in rows]) if rows else np.array([])
    return [Band(low_flops=lo_f, high_flops=hi_f, start=s, stop=e, wins_a=int((x > 0).sum()),
                 wins_b=int((x < 0).sum()), ties=int((x == 0).sum()), estimate=est, low=lo, high=hi,
                 p_shapes=ps, p_common=pc, p=p, p_adjusted=float(adj),
                 verdict=sign if adj < alpha and est * sign > 0 else 0, drift=drift, first_flops=float(f[s]),
                 last_flops=float(f[e - 1]), median_flops=float(np.exp(np.median(np.log(f[s:e])))))
            for (s, e, lo_f, hi_f, x, est, lo, hi, ps, pc, p, sign), adj in zip(rows, adjusted, strict=True)]


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
