"""One verdict per FLOP band, with the shape as the unit of evidence (numpy/scipy only).

A comparison of two series has one log ratio ``d_i`` (a over b, mean over
passes) per point: a shape both measured, or one side's shape against the other
side's prediction there (:mod:`mfu_sweep.analysis.verdicts.matching`). Shapes of
one FLOP count differ systematically (aspect ratio, alignment, which kernel the
library picks), so the question is asked once per FLOP band: *do the shapes of
this band favour a or b, by more than the margin?*

Bands
    Half-decades aligned to powers of ten (``[1e9, 3.16e9)``, ...), widened by
    whole half-decades until each holds at least ``MIN_BAND_SHAPES`` shapes
    (a last short band joins the one before) without passes. The partition
    depends on the FLOP counts only, never on the ratios.

Four verdicts (``margin``, :mod:`mfu_sweep.analysis.verdicts.margin`; ``delta = log(1 + margin)``)
    *a leads*: the test of ``d - delta`` rejects upwards (two-sided level) and the
    band's ``1 - alpha`` interval lies above ``+delta``; *b leads*: the same
    below ``-delta``; *the same within +-margin*: both one-sided tests (TOST)
    put the band inside ``(-delta, delta)`` and so does its interval; else
    *ambiguous*. A band without a bounded interval (too few shapes) is
    ambiguous and says so. A difference smaller than the margin is never a
    lead; ``margin = 0`` is the pure difference test (no "same"). What a lead
    means is the metric's: by MFU a higher fraction of one's own peak, by
    TFLOP/s faster (:meth:`Band.call`).

The test of a run of bands (:mod:`mfu_sweep.analysis.verdicts.run_test`)
    Without passes: Wilcoxon's signed-rank statistic of ``d_i - shift`` against
    its sign-flip distribution (exact up to 30 shapes), its null variance
    inflated by a drift factor only when a series was measured in FLOP order
    (``ordered``; a table of one value per shape, or a sweep in shuffled
    order, has no FLOP-order drift); model-based points join through their
    own variance. With passes: the band mean with the shape as a random effect
    against run-to-run variance, pass offsets and drift within a pass
    (Satterthwaite df). A timing calibration adds its variance (``runs``) or a
    second test the band must also pass (``shapes``, intersection-union).

Power across bands
    Without passes the family is every run of one to ``MAX_RUN_BANDS`` (3)
    adjacent bands (fixed by the FLOP counts before any p-value is seen),
    each tested on all its shapes; with passes (many half-decades of a few
    shapes each) the bands and the whole range, one test more, where two
    identical devices are "the same" with all their shapes
    (:func:`run_longest`). Holm over that family keeps the family-wise error
    at ``alpha``. A band's verdict is its own test's, never a run's: a run
    whose claim holds (after Holm) over bands none of which is called alone
    is reported as the run's conclusion (:class:`RunClaim`, "a leads over 1-10
    GFLOP taken together"), and its bands say they are part of it (``via``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mfu_sweep.analysis.verdicts.band_tests import drift_factor, run_variance, signed_rank_p
from mfu_sweep.analysis.verdicts.evidence import holm, holm_level, run_side
from mfu_sweep.analysis.verdicts.margin import DEFAULT_MARGIN, log_margin, margin_words
from mfu_sweep.analysis.verdicts.margin import lead_words as ahead_behind
from mfu_sweep.analysis.verdicts.run_test import (
    EvidenceSplit,
    ModelTerms,
    RunTest,
    calibration_of,
    claims,
    decided_by_model,
    mixed_test,
    model_runs_test,
    runs_test,
    shapes_test,
)

__all__ = ["BANDS_PER_DECADE", "BAND_TEST", "MIN_BAND_SHAPES", "SAME", "Band", "RunClaim", "band_edges",
           "band_verdicts", "bands_and_runs", "drift_factor", "lead_words", "method_edges", "run_variance",
           "signed_rank_p"]

BANDS_PER_DECADE = 2
MIN_BAND_SHAPES = 10  # fewest shapes a band is widened to: 10 same-sign shapes give exact p = 0.002
MIN_RUN_BAND_SHAPES = 1  # with passes a band may be one shape: run-to-run variation is its noise
BAND_TEST = "signed-rank over shapes per FLOP band"
SAME = 2  # Band.state of "the same within the margin" (+1: a leads, -1: b leads, 0: ambiguous)
CALLS = {1: "a", -1: "b", SAME: "same", 0: "ambiguous"}


def lead_words(leader: str, metric: str) -> str:
    """What a lead is called in the metric's words: "X higher MFU" (closer to its own peak) or "X faster"."""
    ahead = ahead_behind(metric)[0]
    return f"{leader} {ahead} MFU" if metric == "mfu" else f"{leader} {ahead}"


@dataclass(frozen=True)
class RunClaim:
    """A conclusion over a run of adjacent bands taken together that some of its bands do not reach alone (a lead:
    none of them): bands ``first`` .. ``last`` (indices), their FLOP range, the claim (+1 a leads, -1 b leads,
    ``SAME``), the run's estimate (log ratio) with its interval, its Holm-adjusted p-value and evidence split."""

    first: int
    last: int
    low_flops: float
    high_flops: float
    state: int
    estimate: float
    low: float
    high: float
    p_adjusted: float
    split: EvidenceSplit
    shown: tuple[float, float] | None = None
    level: float = math.nan
    wins: tuple[int, int, int] = (0, 0, 0)

    def leader(self, a: str, b: str) -> str | None:
        return {1: a, -1: b}.get(self.state)

    @property
    def interval(self) -> tuple[float, float]:
        """The interval the claim reads (Holm-adjusted, :func:`holm_level`); the own ``1 - alpha`` one if unset."""
        return self.shown if self.shown is not None else (self.low, self.high)

    def to_json(self, a: str, b: str) -> dict[str, Any]:
        lo, hi = self.interval
        return {"first_band": self.first, "last_band": self.last, "low_flops": self.low_flops,
                "high_flops": self.high_flops, "verdict": CALLS[self.state], "leader": self.leader(a, b),
                "ratio": math.exp(self.estimate), "ratio_low": _finite(math.exp(lo)),
                "ratio_high": _finite(math.exp(hi)), "interval": "Holm-adjusted", "interval_level": 1 - self.level,
                "ratio_low_unadjusted": _finite(math.exp(self.low)),
                "ratio_high_unadjusted": _finite(math.exp(self.high)), "p_adjusted": self.p_adjusted,
                "wins_a": self.wins[0], "wins_b": self.wins[1], "n_points": self.wins[2],
                "split_words": split_words(self.state, *self.wins), "evidence_split": self.split.to_json()}


@dataclass(frozen=True)
class Band:
    """The verdict of one FLOP band, a over b on the log scale, from the band's own test alone.

    ``low_flops``/``high_flops`` are the band's edges (half-decades or wider);
    ``start``/``stop`` the [start, stop) range of its points (sorted by FLOPs).
    ``wins_a``/``wins_b``/``ties`` count points by the sign of their log ratio.
    ``estimate`` is the Hodges-Lehmann log ratio (``shapes``), the combined
    estimate of matched and model-based points, or the random-effects mean
    (``runs``) and ``low``/``high`` its ``1 - alpha`` interval (infinite: too few
    shapes, ``too_few``); ``p_shapes`` the p-value of the band's difference test,
    ``p_common`` that of the common-offset test (calibration, ``shapes``), ``p``
    the p-value of the claim the band makes (the smaller of ``p_lead``, the test
    beyond the margin, and ``p_same``, TOST inside it), ``p_adjusted`` Holm over
    the runs of bands; ``verdict`` +1 (a leads), -1 (b leads) or 0, and ``same``
    True for "the same within ``margin``". ``via`` is ``(low_flops,
    high_flops, p_adjusted, state)`` of the run of adjacent bands whose
    conclusion (:class:`RunClaim`) this uncalled band is part of, else None: the
    run's claim, never the band's. ``shapes_a``/``shapes_b`` count each side's
    measured shapes in the band's points, ``matched`` the points that are one
    shape both measured, ``measured_a``/``measured_b`` the shapes each side
    measured in the band's FLOP range and ``left_out_a``/``left_out_b`` those
    neither matched nor predicted (None: not known here;
    :func:`mfu_sweep.analysis.verdicts.pair.compare_series` fills them);
    ``split`` how much of the estimate comes from matched and from model-based
    points; ``metric`` names what a lead means (:func:`lead_words`).
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
    via: tuple[float, float, float, int] | None = None
    shapes_a: int | None = None
    shapes_b: int | None = None
    matched: int | None = None
    measured_a: int | None = None
    measured_b: int | None = None
    split: EvidenceSplit | None = None
    left_out_a: int | None = None
    left_out_b: int | None = None
    metric: str = "tflops"
    shown: tuple[float, float] | None = None
    level: float = math.nan

    @property
    def n(self) -> int:
        return self.stop - self.start

    @property
    def interval(self) -> tuple[float, float]:
        """The interval the verdict reads and every view prints: the band's Holm-adjusted interval (its test's
        interval at its Holm level, :func:`holm_level`); the own ``1 - alpha`` interval (``low``, ``high``) where
        none was computed."""
        return self.shown if self.shown is not None else (self.low, self.high)

    @property
    def state(self) -> int:
        """+1 (a leads), -1 (b leads), ``SAME`` or 0 (ambiguous)."""
        return self.verdict or (SAME if self.same else 0)

    @property
    def too_few(self) -> bool:
        """The band's interval (:attr:`interval`) is unbounded: too few shapes to bound the ratio at its level."""
        return not all(math.isfinite(x) for x in self.interval)

    def call(self, a: str, b: str) -> str:
        """The band's own verdict in the metric's words: ``"<a> faster"`` (TFLOP/s) or ``"<a> higher MFU"``,
        ``"the same within 2%"``, ``"ambiguous"`` or ``"too few shapes"``; a lead that under 2/3 of the band's
        shapes favour says how many go the other way ("<a> faster (53 of 107 shapes the other way)"); a band
        that is part of a run's conclusion adds it ("ambiguous alone; <a> faster taken together")."""
        if self.verdict:
            split = split_words(self.verdict, self.wins_a, self.wins_b, self.n)
            return lead_words(a if self.verdict > 0 else b, self.metric) + (f" ({split})" if split else "")
        if self.same:
            return f"the same within {margin_words(self.margin)}"
        own = "too few shapes" if self.too_few else "ambiguous"
        if self.via is None:
            return own
        run = ({1: lead_words(a, self.metric), -1: lead_words(b, self.metric)}.get(self.via[3])
               or f"the same within {margin_words(self.margin)}")
        return f"{own} alone; {run} taken together"

    def to_json(self, a: str, b: str) -> dict[str, object]:
        n_a = self.n if self.shapes_a is None else self.shapes_a
        n_b = self.n if self.shapes_b is None else self.shapes_b
        via = None if self.via is None else {"low_flops": self.via[0], "high_flops": self.via[1],
                                             "p_adjusted": self.via[2], "verdict": CALLS[self.via[3]],
                                             "leader": {1: a, -1: b}.get(self.via[3])}
        return {"low_flops": self.low_flops, "high_flops": self.high_flops, "first_flops": self.first_flops,
                "last_flops": self.last_flops, "n_shapes": self.n, "shapes_a": n_a, "shapes_b": n_b,
                "matched": self.n if self.matched is None else self.matched,
                "measured_a": self.measured_a, "measured_b": self.measured_b,
                "left_out_a": self.left_out_a, "left_out_b": self.left_out_b,
                "evidence_split": (self.split or EvidenceSplit(self.n, 0)).to_json(),
                "wins_a": self.wins_a, "wins_b": self.wins_b, "ties": self.ties,
                "ratio": math.exp(self.estimate), "ratio_low": _finite(math.exp(self.interval[0])),
                "ratio_high": _finite(math.exp(self.interval[1])), "interval": "Holm-adjusted",
                "interval_level": 1 - self.level, "ratio_low_unadjusted": _finite(math.exp(self.low)),
                "ratio_high_unadjusted": _finite(math.exp(self.high)), "too_few_shapes": self.too_few,
                "p_shapes": self.p_shapes, "p_common": self.p_common,
                "p_lead": self.p_lead, "p_same": self.p_same, "p": self.p, "p_adjusted": self.p_adjusted,
                "margin": self.margin, "metric": self.metric, "verdict": CALLS[self.state],
                "leader": {1: a, -1: b}.get(self.verdict), "same": self.same, "call": self.call(a, b), "via": via,
                "drift_factor": self.drift}


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) and x > 0 else None


SPLIT_SHARE = 2 / 3  # a lead that fewer of its shapes favour says how many go the other way


def split_words(state: int, wins_a: int, wins_b: int, n: int) -> str:
    """``"53 of 107 shapes the other way"`` for a lead (``state`` +1 or -1) that under ``SPLIT_SHARE`` of its ``n``
    shapes favour, else ``""``: true on average, and the reader should know that about half the shapes go the
    other way."""
    if state not in (1, -1) or n <= 0:
        return ""
    ahead, other = (wins_a, wins_b) if state > 0 else (wins_b, wins_a)
    if ahead >= SPLIT_SHARE * n:
        return ""
    even = n - ahead - other
    return f"{other} of {n} shapes the other way" + (f", {even} even" if even else "")


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


@dataclass(frozen=True)
class _Family:
    """Every run of the family: its test, its claims ``(p_lead, sign, p_same)``, Holm-adjusted p, Holm level, its
    Holm-adjusted interval (single bands, and runs Holm lets through) and state."""

    tests: dict[tuple[int, int], RunTest]
    rows: dict[tuple[int, int], tuple[float, int, float]]
    adjusted: dict[tuple[int, int], float]
    levels: dict[tuple[int, int], float]
    shown: dict[tuple[int, int], tuple[float, float]]
    called: dict[tuple[int, int], int]


def _family(family: Sequence[tuple[int, int]], test_of: Any, delta: float, alpha: float) -> _Family:
    tests, rows = {}, {}
    for i, j in family:
        tests[i, j] = test_of(i, j)
        rows[i, j] = claims(tests[i, j].shifted, delta)
    keys = list(rows)
    adjusted = dict(zip(keys, holm([min(rows[k][0], rows[k][2]) for k in keys]), strict=True)) if keys else {}
    levels = {k: holm_level(alpha, min(rows[k][0], rows[k][2]), adjusted[k], len(keys)) for k in keys}
    shown = {k: _adjusted_interval(tests[k], levels[k], delta) for k in keys if k[0] == k[1] or adjusted[k] < alpha}
    called = {k: _state(rows[k], adjusted[k], alpha, tests[k], delta, shown.get(k)) for k in keys}
    return _Family(tests, rows, adjusted, levels, shown, called)


def _adjusted_interval(test: RunTest, level: float, delta: float) -> tuple[float, float]:
    """The test's interval at its Holm level, reaching each margin edge (``+-delta``) the test does not reject
    there: the interval lies wholly past the margin only where the test rejects the margin, so a band printed past
    the margin is never left ambiguous (the interval is the test inverted, up to the bisection's last step)."""
    lo, hi = test.at(level)
    if not (math.isfinite(lo) and math.isfinite(hi)) or delta <= 0:
        return lo, hi
    for edge in (-delta, delta):
        if not lo <= edge <= hi and test.shifted(edge)[0] >= level:
            lo, hi = min(lo, edge), max(hi, edge)
    return lo, hi


def band_verdicts(flops: Sequence[float], values_a: np.ndarray, values_b: np.ndarray, **kw: Any) -> list[Band]:
    """The bands of :func:`bands_and_runs` (each band's own verdict; the runs' conclusions in their ``via``)."""
    return bands_and_runs(flops, values_a, values_b, **kw)[0]


def bands_and_runs(flops: Sequence[float], values_a: np.ndarray, values_b: np.ndarray, *, alpha: float = 0.05,
                   calibration: Sequence[tuple[float, float, float]] | None = None,
                   run_var: tuple[np.ndarray, np.ndarray] | None = None, margin: float = DEFAULT_MARGIN,
                   merge: bool = True, ordered: bool = False, model: ModelTerms | None = None
                   ) -> tuple[list[Band], list[RunClaim]]:
    """One of four verdicts per FLOP band from the log values of both series per (pass, point), and the
    conclusions over runs of adjacent bands that no band of the run reaches alone.

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
    ordered:
        Method ``shapes``: a series was measured in FLOP order, so a drift of the machine can correlate
        neighbouring shapes (the drift factor is estimated); False for tables and shuffled sweeps.
    model:
        Which points are model-based, with what the tests need of them (:class:`ModelTerms`); None: every
        point is a shape both sides measured.
    """
    delta = log_margin(margin)
    f = np.asarray(flops, dtype=float)
    va, vb = np.atleast_2d(values_a), np.atleast_2d(values_b)
    with np.errstate(invalid="ignore"):
        d = np.nanmean(va, axis=0) - np.nanmean(vb, axis=0)
    edges = method_edges(flops, run_var is not None)
    drift = drift_factor(d, edges, np.log(f)) if run_var is None and ordered else 1.0
    sides = (run_side(np.log(f), va), run_side(np.log(f), vb)) if run_var is not None else None
    sizes = [e - s for s, e, _, _ in edges]
    terms = model if model is not None and model.any else None

    def test_of(i: int, j: int) -> RunTest:
        s, e = edges[i][0], edges[j][1]
        cal = calibration_of(calibration, i, j, sizes)
        if run_var is not None and terms is not None and decided_by_model(terms.model[s:e]):
            return model_runs_test(d, terms, run_var, s, e, sides, alpha, cal, i < j)
        if run_var is not None:
            return runs_test(d[s:e], run_var, s, e, sides, alpha, cal, None if terms is None else terms.model[s:e])
        if terms is None:
            return shapes_test(d[s:e], alpha, drift, cal, i < j)
        return mixed_test(d, terms, s, e, alpha, drift, cal, i < j)

    fam = _family(_runs_of_bands(len(edges), run_longest(run_var is not None) if merge else 0),
                  test_of, delta, alpha)
    runs = _run_claims(fam, edges, d, delta)
    out = []
    for k, (s, e, lo_f, hi_f) in enumerate(edges):
        x, t = d[s:e], fam.tests[k, k]
        p_lead, _, p_same = fam.rows[k, k]
        state = fam.called[k, k]
        via = next(((r.low_flops, r.high_flops, r.p_adjusted, r.state) for r in runs if r.first <= k <= r.last),
                   None) if state == 0 else None
        out.append(Band(
            low_flops=lo_f, high_flops=hi_f, start=s, stop=e, wins_a=int((x > 0).sum()), wins_b=int((x < 0).sum()),
            ties=int((x == 0).sum()), estimate=t.estimate, low=t.low, high=t.high, p_shapes=t.p_unit,
            p_common=t.p_common, p=min(p_lead, p_same), p_adjusted=float(fam.adjusted[k, k]),
            verdict=state if state in (1, -1) else 0, drift=drift, first_flops=float(f[s]),
            last_flops=float(f[e - 1]), median_flops=float(np.exp(np.median(np.log(f[s:e])))),
            same=state == SAME, margin=margin, p_lead=p_lead, p_same=p_same, via=via, split=t.split,
            shown=fam.shown[k, k], level=fam.levels[k, k]))
    return out, runs


def _state(row: tuple[float, int, float], adjusted: float, alpha: float, test: RunTest, delta: float,
           shown: tuple[float, float] | None) -> int:
    """The claim a run makes after Holm, read off its Holm-adjusted interval ``shown``: a lead where that interval
    lies wholly past the margin (the test rejects the margin at the run's Holm level), ``SAME`` where the
    equivalence test holds after Holm and both that interval and the own ``1 - alpha`` one lie inside the margin,
    else 0."""
    p_lead, sign, p_same = row
    if shown is None or not all(math.isfinite(x) for x in (*shown, test.low, test.high)):
        return 0
    lo, hi = shown
    if sign and min(lo * sign, hi * sign) > delta:
        return sign
    if adjusted < alpha and p_same < p_lead and -delta < min(lo, test.low) and max(hi, test.high) < delta:
        return SAME
    return 0


def _run_claims(fam: _Family, edges: Sequence[tuple[int, int, float, float]], d: np.ndarray,
                delta: float) -> list[RunClaim]:
    """Called runs of two or more bands, narrowest first (then the smallest adjusted p), without overlaps, that
    hold bands no test calls alone: a lead only over bands none of which is called alone (so no band's own lead
    carries the others), "the same" over bands each uncalled or the same alone and each with its own estimate
    inside the margin (a band whose shapes put it past the margin is never "the same" taken together). The
    conclusions that hold only taken together."""
    alone = {k: fam.called[k, k] for k in range(len(edges))}

    def fits(i: int, j: int, st: int) -> bool:
        inside = [alone[k] for k in range(i, j + 1)]
        within = st != SAME or all(abs(fam.tests[k, k].estimate) < delta for k in range(i, j + 1))
        return within and 0 in inside and all(x == 0 or (st == SAME and x == SAME) for x in inside)

    candidates = sorted((j - i, fam.adjusted[i, j], i, j) for (i, j), st in fam.called.items()
                        if st and i < j and fits(i, j, st))
    taken: set[int] = set()
    out = []
    for _, p, i, j in candidates:
        if taken & set(range(i, j + 1)):
            continue
        taken |= set(range(i, j + 1))
        t = fam.tests[i, j]
        x = d[edges[i][0]:edges[j][1]]
        out.append(RunClaim(i, j, float(edges[i][2]), float(edges[j][3]), fam.called[i, j], t.estimate, t.low,
                            t.high, float(p), t.split, fam.shown[i, j], fam.levels[i, j],
                            (int((x > 0).sum()), int((x < 0).sum()), len(x))))
    return sorted(out, key=lambda r: r.first)
