"""One verdict per FLOP band, with the shape as the unit of evidence (numpy/scipy only).

A comparison of two series has one log ratio ``d_i`` (a over b, mean over
passes) per pair of measured shapes. Shapes of one FLOP count differ
systematically (aspect ratio, alignment, which kernel the library picks), so
the question is asked once per FLOP band: *do the shapes of this band favour
a or b, by more than the margin?*

Bands
    Half-decades aligned to powers of ten (``[1e9, 3.16e9)``, ...), widened by
    whole half-decades until each holds at least ``MIN_BAND_SHAPES`` shapes
    (a last short band joins the one before) without passes. The partition
    depends on the FLOP counts only, never on the ratios.

Four verdicts (``margin``, :mod:`mfu_sweep.analysis.verdicts.margin`; ``delta = log(1 + margin)``)
    *a faster*: the test of ``d - delta`` rejects upwards (two-sided level, so
    the ``1 - alpha`` interval lies above ``+delta``); *b faster*: the test of
    ``d + delta`` rejects downwards; *the same within +-margin*: both one-sided
    tests (TOST) put the band inside ``(-delta, delta)``; else *ambiguous*. A
    difference smaller than the margin is never a lead; ``margin = 0`` is the
    pure difference test (no "same").

The test of a shift (:mod:`mfu_sweep.analysis.verdicts.band_tests`)
    Without passes: Wilcoxon's signed-rank statistic of ``d_i - shift`` against
    its sign-flip distribution (exact up to 30 shapes), its null variance
    inflated by a drift factor when neighbours' residuals are correlated. With
    passes: the band mean with the shape as a random effect against run-to-run
    variance, pass offsets and drift within a pass (Satterthwaite df). A
    timing calibration adds its variance (``runs``) or a second test the band
    must also pass (``shapes``, intersection-union).

Power across bands
    Without passes the family is every run of one to ``MAX_RUN_BANDS`` (3)
    adjacent bands (fixed by the FLOP counts before any p-value is seen),
    each tested on all its shapes; with passes (many half-decades of a few
    shapes each) the bands and the whole range, one test more, where two
    identical devices are "the same" with all their shapes
    (:func:`run_longest`). Holm over that family keeps the family-wise error
    at ``alpha``. A lead over more bands is found through its runs of three,
    which hold most of its shapes; every longer run would raise every
    threshold of the family. A band keeps its own verdict when called; else
    it takes the claim of the narrowest called run that holds it, when its
    own estimate agrees (beyond the margin in the run's direction with its
    own test leaning there, unadjusted p < 0.5; inside the margin for
    "same"), and says so (``via``). A lead that holds over adjacent bands is
    called although no band alone is, and no band is named for the side its
    own shapes favour less.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t

from mfu_sweep.analysis.verdicts.band_tests import (
    _correlated,
    _satterthwaite,
    common_p,
    drift_factor,
    hodges_lehmann,
    random_effects,
    run_variance,
    signed_rank_p,
)
from mfu_sweep.analysis.verdicts.evidence import holm, run_side
from mfu_sweep.analysis.verdicts.margin import DEFAULT_MARGIN, log_margin

__all__ = ["BANDS_PER_DECADE", "BAND_TEST", "MIN_BAND_SHAPES", "SAME", "Band", "band_edges", "band_verdicts",
           "drift_factor", "method_edges", "run_variance", "signed_rank_p"]

BANDS_PER_DECADE = 2
MIN_BAND_SHAPES = 10  # fewest shapes a band is widened to: 10 same-sign shapes give exact p = 0.002
MIN_RUN_BAND_SHAPES = 1  # with passes a band may be one shape: run-to-run variation is its noise
BAND_TEST = "signed-rank over shapes per FLOP band"
SAME = 2  # Band.state of "the same within the margin" (+1: a faster, -1: b faster, 0: ambiguous)
CALLS = {1: "a", -1: "b", SAME: "same", 0: "ambiguous"}


@dataclass(frozen=True)
class Band:
    """The verdict of one FLOP band, a over b on the log scale.

    ``low_flops``/``high_flops`` are the band's edges (half-decades or wider);
    ``start``/``stop`` the [start, stop) range of its points (sorted by FLOPs).
    ``wins_a``/``wins_b``/``ties`` count shapes by the sign of their log ratio.
    ``estimate`` is the Hodges-Lehmann log ratio (``shapes``) or the
    random-effects mean (``runs``) and ``low``/``high`` its ``1 - alpha``
    interval; ``p_shapes`` the p-value of the band's difference test,
    ``p_common`` that of the common-offset test (calibration, ``shapes``), ``p``
    the p-value of the claim the band makes (the smaller of ``p_lead``, the
    test beyond the margin, and ``p_same``, TOST inside it), ``p_adjusted`` Holm
    over the runs of bands; ``verdict`` +1 (a faster), -1 (b faster) or 0, and
    ``same`` True for "the same within ``margin``". ``via`` is ``(low_flops,
    high_flops, p_adjusted)`` of the run of adjacent bands whose claim the band
    carries, None when the band is called on its own or not at all.
    ``shapes_a``/``shapes_b`` count the measured shapes of each side the band
    used (one each per point), ``matched`` the points that are one shape both
    measured, ``measured_a``/``measured_b`` the shapes each side measured in the
    band's FLOP range (None: not known here; :func:`mfu_sweep.analysis.verdicts.pair.compare_series` fills them).
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
    same: bool = False
    margin: float = 0.0
    p_lead: float = math.nan
    p_same: float = math.nan
    via: tuple[float, float, float] | None = None
    shapes_a: int | None = None
    shapes_b: int | None = None
    matched: int | None = None
    measured_a: int | None = None
    measured_b: int | None = None

    @property
    def n(self) -> int:
        return self.stop - self.start

    @property
    def state(self) -> int:
        """+1 (a faster), -1 (b faster), ``SAME`` or 0 (ambiguous)."""
        return self.verdict or (SAME if self.same else 0)

    def call(self, a: str, b: str) -> str:
        """``"<a> faster"``, ``"<b> faster"``, ``"the same within 2%"`` or ``"ambiguous"``."""
        if self.verdict:
            return f"{a if self.verdict > 0 else b} faster"
        return f"the same within {self.margin * 100:.3g}%" if self.same else "ambiguous"

    def to_json(self, a: str, b: str) -> dict[str, object]:
        n_a = self.n if self.shapes_a is None else self.shapes_a
        n_b = self.n if self.shapes_b is None else self.shapes_b
        via = None if self.via is None else {"low_flops": self.via[0], "high_flops": self.via[1],
                                             "p_adjusted": self.via[2]}
        return {"low_flops": self.low_flops, "high_flops": self.high_flops, "first_flops": self.first_flops,
                "last_flops": self.last_flops, "n_shapes": self.n, "shapes_a": n_a, "shapes_b": n_b,
                "matched": self.n if self.matched is None else self.matched,
                "measured_a": self.measured_a, "measured_b": self.measured_b,
                "wins_a": self.wins_a, "wins_b": self.wins_b, "ties": self.ties,
                "ratio": math.exp(self.estimate), "ratio_low": _finite(math.exp(self.low)),
                "ratio_high": _finite(math.exp(self.high)), "p_shapes": self.p_shapes, "p_common": self.p_common,
                "p_lead": self.p_lead, "p_same": self.p_same, "p": self.p, "p_adjusted": self.p_adjusted,
                "margin": self.margin, "verdict": CALLS[self.state], "leader": {1: a, -1: b}.get(self.verdict),
                "same": self.same, "via": via, "drift_factor": self.drift}


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


# -- the verdicts -------------------------------------------------------------------------

Shifted = Callable[[float], tuple[float, int]]  # shift -> (two-sided p, sign) of the test of d - shift


@dataclass(frozen=True)
class _RunTest:
    """The test of one run of adjacent bands: estimate, interval, difference-test p-values and the shifted test."""

    estimate: float
    low: float
    high: float
    p_unit: float
    p_common: float | None
    shifted: Shifted


MERGED_HL_MAX = 400  # a run of several bands takes the median above this many shapes (Walsh averages are n^2)


def _shapes_test(x: np.ndarray, alpha: float, drift: float, cal: tuple[float, float] | None,
                 merged: bool = False) -> _RunTest:
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
    return _RunTest(est, lo, hi, float(p0[0]), p_common, shifted)


def _runs_test(x: np.ndarray, run_var: tuple[np.ndarray, np.ndarray], s: int, e: int, sides: tuple,
               alpha: float, cal: tuple[float, float] | None) -> _RunTest:
    """Random-effects band mean against run-to-run variance, pass offsets and drift within passes."""
    mu, se, df = (float(y[0]) for y in random_effects(x, run_var[0][s:e], run_var[1][s:e]))
    parts = [(se**2, df), *_correlated(sides, run_var, s, e)]
    if cal is not None:
        parts.append(cal)
    p_unit = float(2 * student_t.sf(abs(mu) / se, df)) if se > 0 else 1.0
    var, df = _satterthwaite(parts)
    half = float(student_t.ppf(1 - alpha / 2, df)) * math.sqrt(var) if var > 0 else math.inf

    def shifted(shift: float) -> tuple[float, int]:
        z = mu - shift
        return (float(2 * student_t.sf(abs(z) / math.sqrt(var), df)) if var > 0 else 1.0), int(np.sign(z))

    return _RunTest(mu, mu - half, mu + half, p_unit, None, shifted)


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


def _calibration_of(calibration: Sequence[tuple[float, float, float]] | None, i: int, j: int,
                    sizes: Sequence[int]) -> tuple[float, float] | None:
    """Variance and df of the calibration over bands i..j (shape-weighted, errors taken as fully correlated)."""
    if calibration is None:
        return None
    w = np.asarray(sizes[i:j + 1], dtype=float)
    w = w / w.sum()
    sd = float(np.sum(w * np.sqrt([calibration[k][1] for k in range(i, j + 1)])))
    return sd**2, float(min(calibration[k][2] for k in range(i, j + 1)))


MAX_RUN_BANDS = 3  # runs of up to three adjacent bands join the family (longer ones cost more than they add)


def run_longest(runs: bool) -> int:
    """Longest run of adjacent bands in the family: ``MAX_RUN_BANDS`` for ``shapes`` (bands of 10+ shapes, few of
    them); 1 for ``runs``, whose half-decades of a few shapes each are many, so runs of them would triple the
    family and cost every band its own power (the whole range joins instead: one test)."""
    return 1 if runs else MAX_RUN_BANDS


def _runs_of_bands(m: int, longest: int = MAX_RUN_BANDS) -> list[tuple[int, int]]:
    """Every run of up to ``longest`` adjacent bands ``(i, j)``, single bands first; ``longest`` 1: the single
    bands and the whole range; 0: the single bands alone."""
    runs = [(i, i + length) for length in range(min(m, max(longest, 1))) for i in range(m - length)]
    return runs + ([(0, m - 1)] if longest == 1 and m > 1 else [])


def band_verdicts(flops: Sequence[float], values_a: np.ndarray, values_b: np.ndarray, *, alpha: float = 0.05,
                  calibration: Sequence[tuple[float, float, float]] | None = None,
                  run_var: tuple[np.ndarray, np.ndarray] | None = None, margin: float = DEFAULT_MARGIN,
                  merge: bool = True) -> list[Band]:
    """One of four verdicts per FLOP band from the log values of both series per (pass, point).

    Parameters
    ----------
    flops:
        FLOP count of each point, sorted ascending.
    values_a, values_b:
        Log metric (higher is better) per (pass, point), NaN where a pass lacks a point.
    alpha:
        Family-wise error over the runs of adjacent bands (Holm) and interval level ``1 - alpha``.
    calibration:
        Per band (in :func:`band_edges` order) the log factor already divided
        out of the ratios, its variance and df; its variance joins the tests.
    run_var:
        Method ``runs``: each point's run-to-run variance of its log ratio and
        its df (:func:`run_variance`); None: method ``shapes`` (signed-rank).
    margin:
        Practical-equivalence margin (a fraction); 0 for the pure difference test.
    merge:
        Test runs of adjacent bands and the whole range too (power across bands); False: single bands only.
    """
    delta = log_margin(margin)
    f = np.asarray(flops, dtype=float)
    va, vb = np.atleast_2d(values_a), np.atleast_2d(values_b)
    with np.errstate(invalid="ignore"):
        d = np.nanmean(va, axis=0) - np.nanmean(vb, axis=0)
    edges = method_edges(flops, run_var is not None)
    drift = drift_factor(d, edges, np.log(f)) if run_var is None else 1.0
    sides = (run_side(np.log(f), va), run_side(np.log(f), vb)) if run_var is not None else None
    sizes = [e - s for s, e, _, _ in edges]
    family = _runs_of_bands(len(edges), run_longest(run_var is not None) if merge else 0)
    tests, rows = {}, {}
    for i, j in family:
        s, e = edges[i][0], edges[j][1]
        cal = _calibration_of(calibration, i, j, sizes)
        test = (_shapes_test(d[s:e], alpha, drift, cal, i < j) if run_var is None
                else _runs_test(d[s:e], run_var, s, e, sides, alpha, cal))
        tests[i, j] = test
        rows[i, j] = claims(test.shifted, delta)
    keys = list(rows)
    adjusted = dict(zip(keys, holm([min(rows[k][0], rows[k][2]) for k in keys]), strict=True)) if keys else {}
    called = {k: _state(rows[k], adjusted[k], alpha, tests[k].estimate, delta) for k in keys}
    out = []
    for k, (s, e, lo_f, hi_f) in enumerate(edges):
        x, t = d[s:e], tests[k, k]
        p_lead, _, p_same = rows[k, k]
        state, via = called[k, k], None
        if state == 0:
            state, via = _inherited(k, called, adjusted, (t.estimate, p_lead), delta, edges)
        out.append(Band(
            low_flops=lo_f, high_flops=hi_f, start=s, stop=e, wins_a=int((x > 0).sum()), wins_b=int((x < 0).sum()),
            ties=int((x == 0).sum()), estimate=t.estimate, low=t.low, high=t.high, p_shapes=t.p_unit,
            p_common=t.p_common, p=min(p_lead, p_same), p_adjusted=float(adjusted[k, k]),
            verdict=state if state in (1, -1) else 0, drift=drift, first_flops=float(f[s]),
            last_flops=float(f[e - 1]), median_flops=float(np.exp(np.median(np.log(f[s:e])))),
            same=state == SAME, margin=margin, p_lead=p_lead, p_same=p_same, via=via))
    return out


def _state(row: tuple[float, int, float], adjusted: float, alpha: float, estimate: float, delta: float) -> int:
    """The claim a run makes after Holm: a lead (its estimate beyond the margin, same direction), SAME, or 0."""
    p_lead, sign, p_same = row
    if adjusted >= alpha:
        return 0
    if p_lead <= p_same and sign and estimate * sign > delta:
        return sign
    return SAME if p_same < p_lead else 0


LEAN_P = 0.5  # a band carries a run's lead only if its own test beyond the margin leans that way (p below this)


def _inherited(k: int, called: dict[tuple[int, int], int], adjusted: dict[tuple[int, int], float],
               own: tuple[float, float], delta: float, edges: Sequence[tuple[int, int, float, float]]
               ) -> tuple[int, tuple[float, float, float] | None]:
    """The claim of the narrowest called run of bands holding band ``k`` that the band's own ``(estimate,
    p_lead)`` agrees with (:func:`_agrees`), and that run's range and adjusted p."""
    held = sorted(((j - i, adjusted[i, j], i, j) for (i, j), st in called.items()
                   if st and i <= k <= j and i < j and _agrees(st, *own, delta)))
    if not held:
        return 0, None
    _, p, i, j = held[0]
    return called[i, j], (float(edges[i][2]), float(edges[j][3]), float(p))


def _agrees(state: int, estimate: float, p_lead: float, delta: float) -> bool:
    """A band carries a run's lead only when its own estimate is beyond the margin that way and its own test
    leans there (``p_lead < LEAN_P``: never a lead written over a band whose shapes say less than the margin,
    or are too few to say anything), and "same" only when its estimate lies inside the margin."""
    return abs(estimate) < delta if state == SAME else estimate * state > delta and p_lead < LEAN_P
