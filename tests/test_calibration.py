"""Calibration over the layouts users create (SYNTHETIC, tests/calibration_cases.py): false leads and coverage.

Thresholds. A false-lead test allows at most ``max_false(n)`` seeds with a lead
among ``n``: the largest count that a method with a true false-lead rate of 10%
stays at or under with probability <= 5% (binomial; 200 seeds allow 12, 150
allow 8, see :func:`calibration_cases.max_false`), so a 10% bug fails such a
test with probability >= 95%. Coverage is the mean share of nominal 95%
intervals holding the truth. Its standard error is taken per seed (seeds are
independent, intervals within a seed are not): 0.003-0.006 for compare's
per-shape intervals and 0.003-0.009 for its band intervals over 150 seeds, so
the windows (calibration_cases: points 0.925-0.975, bands 0.94-0.99, fleets
0.94-0.985) reject a true 90% interval by >= 3 standard errors; intervals at
90% instead of 95% (benchmarks/mutants.py) cover 0.88-0.92 per shape and
0.90-0.94 per band. The seeds are fixed, so each test is deterministic; the
full table with more seeds is benchmarks/calibration.py. More calibration
tests, each aimed at one slip of the variance model, are test_variance_model.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from calibration_cases import (
    BAND_COVERAGE,
    COVERAGE,
    DRIFT,
    PASS_OFFSETS,
    PER_SHAPE_2,
    PER_SHAPE_5,
    POINT_COVERAGE,
    FleetCase,
    PairCase,
    max_false,
    score_crossovers,
    score_fleet,
)

from mfu_sweep.analysis.verdicts.margin import DEFAULT_MARGIN


def test_max_false_catches_a_ten_percent_bug() -> None:
    from scipy.stats import binom

    for n in (60, 150, 200, 400):
        c = max_false(n)
        assert binom.cdf(c, n, 0.10) <= 0.05 < binom.cdf(c + 1, n, 0.10)
    assert max_false(200) == 12


@pytest.mark.parametrize(("case", "least"), [(PairCase("2 vs 2, FLOP order, drift", DRIFT, (2, 2), shuffle=False), 25),
                                             (PairCase("3 vs 3, per-shape 2%", PER_SHAPE_2, (3, 3)), 40)],
                         ids=lambda v: v.name if isinstance(v, PairCase) else str(v))
def test_data_crossover_intervals_hold_the_planted_crossings(case: PairCase, least: int) -> None:
    """The seed's pattern at +-10% through compare's band verdicts: both crossovers found in most seeds
    (33 and 52 of 60 when written), their [low_flops, high_flops] hold the true FLOPs, no wrong band."""
    score = score_crossovers(case, 60, seed=3)
    assert score.found >= least, score
    assert score.coverage >= 0.90, score
    assert score.wrong <= max_false(60), score


# What compare reports (band verdicts, per-shape points, band intervals) on identical chips. 150 seeds allow
# 8 seeds with a band verdict (max_false(150)). Band intervals are Hartung-Knapp / signed-rank intervals,
# conservative by construction (95-98% when written), so their upper bound is 0.99; the lower bounds reject
# a true 90% interval (band intervals at 90%: 0.90-0.94, per-shape intervals at 90%: 0.88-0.92 when written).
COMPARE_PAIRS = [
    PairCase("2 vs 2 passes, FLOP order, drift", DRIFT, (2, 2), shuffle=False),
    PairCase("3 vs 3 passes, FLOP order, drift", DRIFT, (3, 3), shuffle=False),
    PairCase("5 vs 2 passes, per-shape 5%", PER_SHAPE_5, (5, 2)),
    PairCase("3 vs 2 passes, per-pass offsets 1%", PASS_OFFSETS, (3, 2)),
    PairCase("1 vs 1, per-shape 5%", PER_SHAPE_5, (1, 1)),
    PairCase("imported (1 value) vs 3 passes, per-shape 2%", PER_SHAPE_2, (1, 3)),
]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.passes == (3, 3) else [])
                                  for c in COMPARE_PAIRS])
def test_compare_band_verdicts_points_and_band_intervals_on_identical_chips(case: PairCase) -> None:
    from calibration_cases import score_compare

    score = score_compare(case, 150, seed=1)
    assert score.methods == {"runs" if min(case.passes) >= 2 else "shapes"}
    assert score.false_leads <= max_false(150), (case.name, score)
    assert POINT_COVERAGE[0] <= score.point_coverage <= POINT_COVERAGE[1], (case.name, score)
    assert BAND_COVERAGE[0] <= score.band_coverage <= BAND_COVERAGE[1], (case.name, score)


# Fleets: 150 seeds allow 8 seeds with a healthy device flagged (max_false(150)); a 3-device fleet that
# flags 13% of seeds (the reference including the device itself) fails with probability > 0.99.
FLEETS = [FleetCase(f"{n} identical devices", n) for n in (2, 3, 4, 8)]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.n_devices == 8 else [])
                                  for c in FLEETS])
def test_identical_fleets_flag_nobody_and_band_intervals_cover(case: FleetCase) -> None:
    seeds = 150 if case.n_devices < 8 else 60
    score = score_fleet(case, seeds, seed=100)
    assert score.false_flags <= max_false(seeds), score
    assert COVERAGE[0] <= score.coverage <= COVERAGE[1], score


@pytest.mark.parametrize("n_devices", [2, 3, 4])
def test_a_slow_device_in_a_small_fleet_is_found_and_its_band_ratios_covered(n_devices: int) -> None:
    """15% slower over 1-100 GFLOP: behind in those bands, and every band interval of every device holds
    the true ratio to the median of the others (which a reference including the device itself would not)."""
    case = FleetCase(f"{n_devices} devices, one 15% slow", n_devices, slow=((1, (1.15, 1e9, 1e11)),))
    score = score_fleet(case, 40, seed=200)
    assert score.slow_found >= 36, score
    # the lower bound is the point here (a shrunk ratio misses the truth); 40 seeds put the 2-device board
    # at 0.981, so the upper bound is a notch above the null tables' 0.985
    assert COVERAGE[0] <= score.coverage <= 0.99, score
    assert score.false_flags <= max_false(40, bug=0.25), score


# Fleets at the default 2% margin: 8 devices, 12 shapes per decade (1e8 - 1e13), 2% run-to-run noise per shape.
DENSE_FLOPS = tuple(float(f) for f in np.geomspace(1e8, 1e13, 61))
ONE_PCT_OFFSETS = tuple((rank, (1.0 + off, 0.0, 1e14)) for rank, off in enumerate(np.linspace(-0.01, 0.01, 8)))


def test_margin_healthy_fleet_with_1pct_device_offsets_flags_nobody() -> None:
    """Every device off by up to 1% (its ratio to the median of the others within 1.1%), 1% noise per shape
    (the real 8xH100 node's shape-level scatter is ~1.1%): the pure difference test calls such offsets leads
    in most seeds; at the 2% margin no device may be a lead or a flag, which 60 seeds check to max_false(60)
    (a 10% false-flag rate fails with probability >= 0.95)."""
    case = FleetCase("8 devices, offsets -1% to +1%", 8, shape_noise=0.01, slow=ONE_PCT_OFFSETS, margin=DEFAULT_MARGIN,
                     flops=DENSE_FLOPS)
    score = score_fleet(case, 60, seed=300)
    assert score.false_flags <= max_false(60), score
    pure = score_fleet(replace(case, margin=0.0), 10, seed=300)
    assert pure.called >= 8, pure  # what the margin removes: sub-margin offsets called leads


def test_margin_a_5pct_slower_device_is_flagged() -> None:
    """One device 5% slower everywhere (3% beyond the margin): behind in a band in at least 38 of 40 seeds,
    and the healthy devices stay unflagged."""
    case = FleetCase("8 devices, one 5% slow", 8, shape_noise=0.02, slow=((3, (1.05, 0.0, 1e14)),),
                     margin=DEFAULT_MARGIN, flops=DENSE_FLOPS)
    score = score_fleet(case, 40, seed=400)
    assert score.slow_found >= 38, score
    assert score.false_flags <= max_false(40, bug=0.25), score



def test_band_interval_is_a_95_percent_t_interval() -> None:
    """cells[].low/high: mean log ratio +- t(0.975, dof) * se, with the dof of the device's own tests.

    The dof is read back from a shape's p-value (p = 2 sf(|log ratio| / se, dof)), so a quantile at another
    level (90%, 99%, 50%) or at another dof fails here, not only in the coverage cells.
    """
    from scipy.optimize import brentq
    from scipy.stats import t as student_t

    lb = FleetCase("3", 3).board(7)
    checked = 0
    for c in lb.cells:
        ev = lb.evidence[c.label]
        e = max(ev, key=lambda x: abs(x.log_ratio) / x.se if x.p_value > 1e-6 else 0.0)
        t_stat = abs(e.log_ratio) / e.se
        dof = brentq(lambda k, t=t_stat, p=e.p_value: 2 * student_t.sf(t, k) - p, 0.5, 1e6, xtol=1e-10)
        se = e.se / math.sqrt(c.n_shapes)  # one per-shape se per device
        q = (math.log(c.high) - math.log(c.low)) / 2 / se
        assert q == pytest.approx(student_t.ppf(0.975, dof), rel=1e-4), (c, dof)
        assert math.log(c.ratio) == pytest.approx((math.log(c.high) + math.log(c.low)) / 2)
        checked += 1
    assert checked >= 6 and np.isfinite([c.low for c in lb.cells]).all()


@pytest.mark.slow
@pytest.mark.parametrize(("model", "repeats", "shuffle"), [(DRIFT, 2, False), (PASS_OFFSETS, 5, True)],
                         ids=["2 passes, FLOP order, drift", "5 passes, per-pass offsets"])
def test_fit_intervals_cover_the_truth_with_passes(model, repeats: int, shuffle: bool) -> None:
    """P, W and t0 intervals of one chip: with 40 fits, a true coverage of 95% misses 9 or more times with
    probability 1.4e-4, one of 80% at most 8 times with probability 0.59; at least 32 of 40 is required."""
    from calibration_cases import FIT_TRUTH, score_fit

    score = score_fit(model, repeats, 40, shuffle=shuffle, seed=300)
    assert score.unconstrained == 0
    assert all(score.covered[k] >= 32 for k in FIT_TRUTH), score


def test_one_pass_fit_says_its_intervals_miss_pass_offsets_and_drift() -> None:
    from synthetic import make_sweep_doc

    from mfu_sweep.analysis.fits.fit import ONE_PASS_FIT, fit_series
    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.records.results import parse_document

    notes = {}
    for repeats in (1, 2):
        doc = make_sweep_doc("chip", flops=list(np.geomspace(1e6, 1e13, 16)), seed=1, noise_model=DRIFT,
                             repeats=repeats, n_samples=5, P_tflops=600.0, W_tbs=2.0, t0_s=2e-6)
        [series] = group_series(parse_document(doc, validate=False)).values()
        notes[repeats] = fit_series(series, n_boot=30, seed=0, cache=False).notes
    assert ONE_PASS_FIT in notes[1] and ONE_PASS_FIT not in notes[2]


@pytest.mark.parametrize("n_devices", [2, 3, 5])
def test_band_noise_floor_is_the_medians_errors_against_the_median_of_the_others(n_devices: int) -> None:
    """Where shapes scatter less than the medians' own errors, those errors are the noise: a device's se
    squared plus that of the median of the *other* n - 1 devices (pi/2 times the variance of one, over n - 1)."""
    from mfu_sweep.analysis.fleet.leaderboard import MEDIAN_SE, Grid, _evidence

    shapes = 12
    grid = Grid(tuple(f"d{i}" for i in range(n_devices)), tuple(f"s{j}" for j in range(shapes)),
                np.geomspace(1e6, 1e12, shapes), np.zeros((n_devices, shapes)), np.full((n_devices, shapes), 0.01),
                np.zeros((n_devices, shapes), dtype=bool))
    ev = _evidence(grid, "rest", 1)
    want = 0.01**2 + (MEDIAN_SE * 0.01) ** 2 / (n_devices - 1)
    assert np.allclose(ev.var, want)
