"""The test of one run of adjacent FLOP bands (a single band is a run of one): its estimate, interval and the
test of a shifted log ratio that the four verdicts read (:func:`claims`), for the three kinds of evidence.

``shapes`` (one value per shape), all points matched
    Wilcoxon's signed-rank over the shapes' log ratios and the Hodges-Lehmann
    estimate (:mod:`mfu_sweep.analysis.verdicts.band_tests`); the drift factor
    only for series measured in FLOP order (``drift`` 1 otherwise).
``shapes`` with model-based points (the two sides measured different shape lists)
    Matched shapes first: a run with at least ``DECIDE_MATCHED`` of them is
    decided by them alone (signed-rank, Hodges-Lehmann, as above); its
    model-based points are shown beside (their own ratio), never used, so they
    can neither make a lead the matched shapes do not show nor move the ratio
    away from theirs. A run with fewer is decided through the local model
    (:mod:`mfu_sweep.analysis.verdicts.matching`): the mean of its points, its
    few matched shapes included with the model's residual variance, tested
    with a t test against an exact variance under the model (every measured
    value a prediction uses counted once with each coefficient it has, shared
    neighbours included) plus the scatter of the true ratio across shapes
    beyond what the model explains (a moment estimate, like a random effect),
    Satterthwaite df. :class:`EvidenceSplit` says which points carry the
    verdict and how much.
``runs`` (passes)
    The band mean with the shape as a random effect against run-to-run variance,
    pass offsets and drift within passes; a model-based point's prediction
    variance is part of its own variance. A run with model-based points and
    fewer than ``DECIDE_MATCHED`` matched shapes is decided through the local
    model as above (its predictions share neighbours, which a random effect
    would read as independent shapes), plus the pass offsets and drift.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from mfu_sweep.analysis.verdicts.band_tests import (
    common_p,
    hodges_lehmann,
    invert,
    random_effects,
    signed_rank_p,
)
from mfu_sweep.analysis.verdicts.evidence import RunSide, run_covariance

Shifted = Callable[[float], tuple[float, int]]  # shift -> (two-sided p, sign) of the test of d - shift
Interval = Callable[[float], tuple[float, float]]  # level -> the test's two-sided interval at that level

MERGED_HL_MAX = 400  # a run of several bands takes the median above this many shapes (Walsh averages are n^2)
DECIDE_MATCHED = 5  # a run with this many exact matches is decided by them alone (issue 35's measured goal)


@dataclass(frozen=True)
class EvidenceSplit:
    """Which points carry a band's (or run's) verdict: matched shapes, model-based points, or both.

    ``matched`` and ``model`` count the points of each kind the test used; ``shown`` the model-based points
    shown beside but not used (the matched shapes decide); ``weight_matched`` is the matched shapes' share of
    the estimate (1 when they decide; their share of the points when every point goes through the local model);
    ``ratio_matched`` and ``ratio_model`` are each kind's own geometric-mean ratio a/b (None when empty).
    """

    matched: int
    model: int
    shown: int = 0
    weight_matched: float = 1.0
    ratio_matched: float | None = None
    ratio_model: float | None = None
    outside: tuple[float, float, float] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"matched": self.matched, "model_based": self.model, "model_based_not_used": self.shown,
               "weight_matched": self.weight_matched, "weight_model_based": 1.0 - self.weight_matched,
               "ratio_matched": self.ratio_matched, "ratio_model_based": self.ratio_model,
               "matched_outside_model": self.outside is not None}
        if self.outside is not None:
            out["model_interval"] = dict(zip(("ratio", "ratio_low", "ratio_high"), self.outside, strict=True))
        return out

    def text(self) -> str:
        """E.g. "decided by 26 matched shapes; 30 model-based beside (x0.97), not used", "decided through the
        local model: 3 matched shapes and 40 model-based", or, where the exact matches lie outside the model-based
        interval, "its 1 matched shape (x0.685) lies outside the model-based interval x0.548 [0.512, 0.587], so
        the matched shape alone decides; 40 model-based beside, not used"."""
        if self.outside is not None:
            shapes = "shape" if self.matched == 1 else "shapes"
            est, lo, hi = self.outside
            return (f"its {self.matched} matched {shapes} (x{self.ratio_matched:.3g}) "
                    f"{'lies' if self.matched == 1 else 'lie'} outside the model-based interval x{est:.3g} "
                    f"[{lo:.3g}, {hi:.3g}], so the exact {'match' if self.matched == 1 else 'matches'} alone "
                    f"{'decides' if self.matched == 1 else 'decide'}; {self.shown} model-based beside, not used")
        if not self.model and not self.shown:
            return f"all from {self.matched} matched shapes"
        if self.shown:
            return (f"decided by {self.matched} matched shapes; {self.shown} model-based beside "
                    f"(x{self.ratio_model:.3g}), not used")
        if not self.matched:
            return f"decided by {self.model} model-based points"
        return f"decided through the local model: {self.matched} matched shapes and {self.model} model-based"


@dataclass(frozen=True)
class RunTest:
    """The test of one run of adjacent bands: estimate, interval, difference-test p-values, the shifted test, the
    split of its evidence and ``at``, its interval at another level (the Holm-adjusted one the verdict reads)."""

    estimate: float
    low: float
    high: float
    p_unit: float
    p_common: float | None
    shifted: Shifted
    split: EvidenceSplit
    at: Interval


@dataclass(frozen=True)
class ModelTerms:
    """What the tests need to know of model-based points (all arrays per point, in FLOP order): which are
    model-based, each point's log ratio as a linear combination of measured values (``combo``: (side, shape,
    coefficient)), the residual variance of those values and its df."""

    model: np.ndarray
    combo: tuple[tuple[tuple[str, str, float], ...], ...]
    sigma2: np.ndarray
    df: np.ndarray

    @property
    def any(self) -> bool:
        return bool(self.model.any())


def shapes_test(x: np.ndarray, alpha: float, drift: float, cal: tuple[float, float] | None,
                merged: bool = False) -> RunTest:
    """Signed-rank over the shapes of a run; with a calibration also a t test of the mean against shape scatter
    plus calibration variance (intersection-union: the larger p, and the two must agree in sign)."""
    est, lo, hi = hodges_lehmann(x, alpha, drift, *((MERGED_HL_MAX,) if merged else ()))
    scatter = float(np.var(x, ddof=1)) / len(x) * drift if len(x) > 1 else math.inf
    if cal is not None and cal[0] > 0:
        widen = student_t.ppf(1 - alpha / 2, 30) * math.sqrt(cal[0])
        lo, hi = est - math.hypot(est - lo, widen), est + math.hypot(hi - est, widen)

    def shifted(s: float) -> tuple[float, int]:
        p, sign = signed_rank_p(x - s, drift)
        p_rank, sign_rank = float(p[0]), int(sign[0])
        if cal is None:
            return p_rank, sign_rank
        p_mean, var = common_p(float(np.mean(x)) - s, [(scatter, len(x) - 1.0), cal])
        if p_mean is None or var <= 0:
            return p_rank, sign_rank
        agree = np.sign(np.mean(x) - s) == sign_rank
        return (max(p_rank, p_mean) if agree else 1.0), sign_rank

    p0, _ = signed_rank_p(x, drift)
    p_common = shifted(0.0)[0] if cal is not None else None
    return RunTest(est, lo, hi, float(p0[0]), p_common, shifted, EvidenceSplit(len(x), 0),
                   lambda level: invert(shifted, level, est))


def _correlated(sides: tuple[RunSide, RunSide], run_var: tuple[np.ndarray, np.ndarray], start: int,
                stop: int, used: np.ndarray | None = None) -> list[tuple[float, float]]:
    """Variance of a band's mean log ratio beyond independent shapes, as parts ``(var, df)``: the correlation
    of neighbouring shapes within a pass (drift through passes in FLOP order) and pass-level offsets.

    Both come from :func:`mfu_sweep.analysis.verdicts.evidence.run_side`, estimated over all shapes of each series
    (its autocorrelation of pass deviations and its pass offsets), so a band of few shapes measured in two
    passes does not rest on one degree of freedom; weights are the band mean's (inverse run variance), 0 for
    points of the band the mean does not use (``used`` False).
    """
    a, b = sides
    cov = run_covariance(a.var / a.n_runs, b.var / b.n_runs, a.rho, b.rho)[start:stop, start:stop]
    w = 1.0 / run_var[0][start:stop]
    if used is not None:
        w = np.where(used, w, 0.0)
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


def runs_test(x: np.ndarray, run_var: tuple[np.ndarray, np.ndarray], s: int, e: int, sides: tuple,
              alpha: float, cal: tuple[float, float] | None, model: np.ndarray | None = None,
              matched_only: bool = False) -> RunTest:
    """Random-effects band mean against run-to-run variance, pass offsets and drift within passes; with
    ``DECIDE_MATCHED`` matched shapes (or ``matched_only``), over them alone (model-based points shown beside)."""
    is_model = np.zeros(len(x), dtype=bool) if model is None else model
    alone = is_model.any() and ((~is_model).sum() >= DECIDE_MATCHED or matched_only)
    used = ~is_model if alone else np.ones(len(x), dtype=bool)
    v, f = run_var[0][s:e][used], run_var[1][s:e][used]
    mu, se, df = (float(y[0]) for y in random_effects(x[used], v, f))
    parts = [(se**2, df), *_correlated(sides, run_var, s, e, used)]
    if cal is not None:
        parts.append(cal)
    p_unit = float(2 * student_t.sf(abs(mu) / se, df)) if se > 0 else 1.0
    var, df = _satterthwaite(parts)
    shifted, at = _t_interval(mu, var, df)
    lo, hi = at(alpha)
    return RunTest(mu, lo, hi, p_unit, None, shifted, _runs_split(x, run_var[0][s:e], is_model, used), at)


def _t_interval(est: float, var: float, df: float) -> tuple[Shifted, Interval]:
    """The t test of ``est`` against a shift, and its interval at any level (unbounded without a variance)."""

    def shifted(shift: float) -> tuple[float, int]:
        z = est - shift
        return (float(2 * student_t.sf(abs(z) / math.sqrt(var), df)) if var > 0 else 1.0), int(np.sign(z))

    def at(level: float) -> tuple[float, float]:
        half = float(student_t.ppf(1 - level / 2, df)) * math.sqrt(var) if var > 0 else math.inf
        return est - half, est + half

    return shifted, at


def _runs_split(x: np.ndarray, v: np.ndarray, is_model: np.ndarray, used: np.ndarray) -> EvidenceSplit:
    """The evidence split of a ``runs`` band: its matched and model-based points, and the matched shapes' share
    of the inverse-variance weight of the points used."""
    w = np.where(used & np.isfinite(v) & (v > 0), 1.0 / np.where(v > 0, v, 1.0), 0.0)
    total = float(w.sum())
    share = float(w[~is_model].sum()) / total if total > 0 else 1.0
    part = [(float(math.exp(np.mean(x[m]))) if m.any() else None) for m in (~is_model, is_model)]
    shown = int((is_model & ~used).sum())
    return EvidenceSplit(int((~is_model & used).sum()), int((is_model & used).sum()), shown, share, *part)


# -- shapes with model-based points ------------------------------------------------------------------------------


def _combo_variance(idx: np.ndarray, combo: Sequence[tuple[tuple[str, str, float], ...]],
                    sigma2: np.ndarray) -> float:
    """Variance of the mean of the points ``idx`` under the local model: every measured value counted once with
    its residual variance, so neighbours shared by several predictions add their covariance."""
    coef: dict[tuple[str, str], float] = {}
    var_of: dict[tuple[str, str], list[float]] = {}
    for i in idx:
        for side, name, c in combo[i]:
            coef[side, name] = coef.get((side, name), 0.0) + c
            var_of.setdefault((side, name), []).append(float(sigma2[i]))
    return sum(float(np.mean(var_of[k])) * c**2 for k, c in coef.items()) / len(idx) ** 2


def _pooled_df(idx: np.ndarray, terms: ModelTerms) -> float:
    """Degrees of freedom of the residual variances of the predictions ``idx`` taken together: their local fits'
    df, divided by how many fits each measured value serves on average (overlapping fits share data)."""
    uses = sum(len(terms.combo[i]) - 1 for i in idx)
    distinct = len({(side, name) for i in idx for side, name, _ in terms.combo[i][1:]})
    total = float(np.sum(terms.df[idx]))
    return float(np.clip(total * distinct / max(uses, 1), np.min(terms.df[idx]), 1000.0))


def _model_part(d: np.ndarray, idx: np.ndarray, terms: ModelTerms) -> tuple[float, float, float]:
    """Mean of the points ``idx``, its variance (the local model's, plus the scatter of the true ratio across
    shapes beyond what the model explains, as a moment estimate) and Satterthwaite df. Matched points among
    them take the residual variance of the model-based ones."""
    x = d[idx]
    n = len(idx)
    model = terms.model[idx]
    sigma2 = terms.sigma2.copy()
    sigma2[idx[~model]] = float(np.median(terms.sigma2[idx[model]]))
    v_model = _combo_variance(idx, terms.combo, sigma2)
    own = np.array([sum(c**2 for _, _, c in terms.combo[i]) * sigma2[i] for i in idx])
    tau2 = max(0.0, float(np.var(x, ddof=1)) - float(own.mean())) if n > 1 else 0.0
    parts = [(v_model, _pooled_df(idx[model], terms)), (tau2 / n, max(n - 1.0, 1.0))]
    var, df = _satterthwaite([(v, f) for v, f in parts if v > 0])
    return float(np.mean(x)), var, df


def mixed_test(d: np.ndarray, terms: ModelTerms, s: int, e: int, alpha: float, drift: float,
               cal: tuple[float, float] | None, merged: bool = False,
               exact: Callable[[], RunTest] | None = None) -> RunTest:
    """The test of points ``s:e`` when some are model-based (see the module docstring).

    A run decided through the local model whose exact matches' mean lies outside the model's ``1 - alpha``
    interval is decided by those matches alone (``exact``, by default the signed-rank test over them): the model
    does not describe the shapes both sides measured there, so its points cannot carry the verdict, and a few
    matches alone are usually too few for one (ambiguous). The split says so (``outside``)."""
    idx = np.arange(s, e)
    mod = terms.model[s:e]
    matched, model = idx[~mod], idx[mod]
    if not len(model):
        return shapes_test(d[s:e], alpha, drift, cal, merged)
    alone = EvidenceSplit(len(matched), 0, len(model), 1.0, _ratio(d, matched), _ratio(d, model))
    if len(matched) >= DECIDE_MATCHED:
        return _with_split(shapes_test(d[matched], alpha, drift, cal, merged), alone)
    test = _t_test(*_model_part(d, idx, terms), alpha, cal,
                   EvidenceSplit(len(matched), len(model), 0, len(matched) / len(idx), _ratio(d, matched),
                                 _ratio(d, model)))
    mean = float(np.mean(d[matched])) if len(matched) else math.nan
    if not len(matched) or test.low <= mean <= test.high:
        return test
    own = exact() if exact is not None else shapes_test(d[matched], alpha, drift, cal, merged)
    outside = (math.exp(test.estimate), math.exp(test.low), math.exp(test.high))
    return _with_split(own, replace(alone, outside=outside))


def decided_by_model(model: np.ndarray) -> bool:
    """Whether a run with these points (True: model-based) is decided through the local model: it has model-based
    points and fewer than ``DECIDE_MATCHED`` matched shapes."""
    return bool(model.any()) and int((~model).sum()) < DECIDE_MATCHED


def model_runs_test(d: np.ndarray, terms: ModelTerms, run_var: tuple[np.ndarray, np.ndarray], s: int, e: int,
                    sides: tuple, alpha: float, cal: tuple[float, float] | None, merged: bool = False) -> RunTest:
    """A run of a ``runs`` comparison decided through the local model (:func:`decided_by_model`): the model's
    variance of the mean of its points, neighbours shared between predictions included (:func:`mixed_test`; a
    random effect over points that share neighbours reads them as independent, and called false leads between
    identical devices measured in passes on their own shape lists), plus the pass offsets and drift within
    passes of :func:`runs_test`."""
    parts = _correlated(sides, run_var, s, e) + ([cal] if cal is not None and cal[0] > 0 else [])

    def exact() -> RunTest:  # the exact matches alone, against their run-to-run variation
        return runs_test(d[s:e], run_var, s, e, sides, alpha, cal, terms.model[s:e], matched_only=True)

    return mixed_test(d, terms, s, e, alpha, 1.0, _satterthwaite(parts) if parts else None, merged, exact)


def _ratio(d: np.ndarray, idx: np.ndarray) -> float | None:
    return float(math.exp(np.mean(d[idx]))) if len(idx) else None


def _t_test(est: float, var: float, df: float, alpha: float, cal: tuple[float, float] | None,
            split: EvidenceSplit) -> RunTest:
    parts = [(var, df)] + ([cal] if cal is not None and cal[0] > 0 else [])
    var, df = _satterthwaite(parts)
    shifted, at = _t_interval(est, var, df)
    p0 = shifted(0.0)[0]
    lo, hi = at(alpha)
    return RunTest(est, lo, hi, p0, p0 if cal is not None else None, shifted, split, at)


def _with_split(test: RunTest, split: EvidenceSplit) -> RunTest:
    return replace(test, split=split)


# -- the claims a run makes ----------------------------------------------------------------------------------------


def claims(test: Shifted, delta: float) -> tuple[float, int, float]:
    """``(p_lead, sign, p_same)`` of a run: the test beyond the margin in the direction the data point (two-sided
    level) and TOST inside it (the larger of the two one-sided p-values; 1 when ``delta`` is 0)."""
    if delta <= 0:
        p, sign = test(0.0)
        return p, sign, 1.0
    p_up, s_up = test(delta)
    p_down, s_down = test(-delta)
    if s_up > 0:
        p_lead, sign = p_up, 1
    elif s_down < 0:
        p_lead, sign = p_down, -1
    else:
        p_lead, sign = 1.0, 0
    below = p_up / 2 if s_up < 0 else 1 - p_up / 2
    above = p_down / 2 if s_down > 0 else 1 - p_down / 2
    return p_lead, sign, max(below, above)


def calibration_of(calibration: Sequence[tuple[float, float, float]] | None, i: int, j: int,
                   sizes: Sequence[int]) -> tuple[float, float] | None:
    """Variance and df of the calibration over bands i..j (shape-weighted, errors taken as fully correlated)."""
    if calibration is None:
        return None
    w = np.asarray(sizes[i:j + 1], dtype=float)
    w = w / w.sum()
    sd = float(np.sum(w * np.sqrt([calibration[k][1] for k in range(i, j + 1)])))
    return sd**2, float(min(calibration[k][2] for k in range(i, j + 1)))
