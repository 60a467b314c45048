"""Calibration of the variance model under compare's band verdicts and the fits (SYNTHETIC data, nothing measured).

Each test states a promise a user relies on (a false-lead rate, a p-value's level, an interval's coverage
or width) and is sized to fail on a named one-line slip in the code (``benchmarks/mutants.py``), with the
rates of code and slip measured when written in its docstring. Seeds are fixed, so each test is
deterministic; the thresholds sit several binomial (or Monte Carlo) standard errors from both rates.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from calibration_cases import DRIFT, PER_SHAPE_2, compare_arrays, max_false, score_fit
from synthetic import NoiseModel, make_sweep_doc
from synthetic_bands import PairModel, draw_pair, grid_flops

from mfu_sweep.analysis.ground.series import group_series
from mfu_sweep.analysis.verdicts.bands import band_verdicts
from mfu_sweep.analysis.verdicts.evidence import NOT_MEASURED, ONE_PASS_LIMIT, choose_method, run_side
from mfu_sweep.analysis.verdicts.pair import compare_series
from mfu_sweep.records.results import parse_document

DRIFT_NOTE = "neighbouring shapes' ratios are correlated (drift"


def _pair(models: tuple[NoiseModel, NoiseModel], flops: list[float], seed: int, repeats: int = 1,
          shuffle: bool = True, n_samples: int = 8) -> tuple:
    """Two SYNTHETIC devices with the same roofline, each with its own noise, as compare's series."""
    docs = [make_sweep_doc(m.name, P_tflops=600, W_tbs=2.0, t0_s=8e-6, flops=flops, seed=seed + k, noise_model=m,
                           repeats=repeats, shuffle=shuffle, n_samples=n_samples) for k, m in enumerate(models)]
    if not shuffle and repeats == 1:  # a file from before shuffled passes: FLOP order, no pass index
        for doc in docs:
            for r in doc["records"]:
                r.pop("pass", None)
    a, b = group_series([sw for d in docs for sw in parse_document(d, validate=False)]).values()
    return a, b


# -- one pass: the path compare takes (signed-rank bands), with drift and without -----------------------------


def test_one_pass_under_drift_counts_correlated_shapes_as_fewer_and_says_so() -> None:
    """Identical SYNTHETIC devices, one pass each in FLOP order through a 2% drift (AR(1), 4 shapes), a
    mamf-finder-like grid of 216 shapes: compare's band verdicts with ``--margin 0`` (the pure difference
    test; one pass: ``band_verdicts`` without a run variance, the call compare_series makes).

    One pass cannot tell a drift from a lead (the notes say so), but the drift factor keeps the signed-rank
    test of every claim (``shifted``, what ``claims`` reads) from counting correlated neighbours as
    independent shapes: seeds with a band lead, 39 of 100 when written (35.5% over 1,000 seeds); with the
    factor dropped from the shifted test's null variance, 72 of 100 (68.5% over 1,000). 52 sits 3.5
    binomial sd from both rates.
    """
    flops = grid_flops()
    va, vb, _ = draw_pair(PairModel(offset=0.2, drift=0.02), flops, seeds=100, repeats=1, rng=np.random.default_rng(11))
    leads, factors = 0, []
    for s in range(100):
        assert choose_method(va[s], vb[s]) == "shapes"
        bands = band_verdicts(flops, va[s], vb[s], alpha=0.05, run_var=None, margin=0.0, ordered=True)
        leads += any(b.verdict for b in bands)
        factors.append(bands[0].drift)
    assert leads <= 52, leads
    assert np.median(factors) > 1.2, np.median(factors)


def test_one_pass_under_drift_rarely_calls_devices_a_margin_apart_the_same() -> None:
    """SYNTHETIC device a 2% faster than b everywhere (exactly the default margin), one pass each in FLOP
    order through a 2% drift, 216 grid shapes, the default ``--margin 2%``: seeds in which a band says "the
    same within 2%" (two one-sided signed-rank tests at +-2%, the drift factor in their null variance).

    One pass under drift is not calibrated (TOST promises 5% at the margin; the drift, not in the data's
    shape scatter, moves whole bands), but the drift factor keeps most of it: 40 of 200 seeds when written
    (20.8% over 850 seeds); without the factor, 73 of 200 (39.2% over 850). At most 59 of 200: 3.1
    binomial sd above the code's rate, 2.7 below the slip's (caught with probability 0.997).
    """
    flops = grid_flops()
    va, vb, _ = draw_pair(PairModel(offset=0.2, drift=0.02), flops, seeds=200, repeats=1, rng=np.random.default_rng(12))
    same = sum(any(b.same for b in band_verdicts(flops, va[s] + math.log1p(0.02), vb[s], run_var=None,
                                                 ordered=True))
               for s in range(200))
    assert same <= 59, same


@pytest.mark.parametrize("drift", [True, False], ids=["drift", "no drift"])
def test_one_pass_compare_notes_what_it_cannot_measure_and_the_drift_it_saw(drift: bool) -> None:
    """compare_series on one pass per device: the notes a user reads. With a drift in FLOP order the band
    tests' variance is inflated and the note gives the factor; without one, no drift note."""
    model = DRIFT if drift else NoiseModel("per-shape 1%", shape_shift=0.01)
    flops = [float(f) for f in np.geomspace(1e8, 1e12, 120)]
    a, b = _pair((replace(model, name="a"), replace(model, name="b")), flops, seed=42, shuffle=False)
    c = compare_series(a, b, "tflops", use_fit=False)
    assert c.method == "shapes" and not c.runs_measured
    assert ONE_PASS_LIMIT in c.notes and NOT_MEASURED in c.sentence()
    assert any(n.startswith(DRIFT_NOTE) for n in c.notes) == drift, c.notes
    assert (c.bands[0].drift > 1) == drift


def test_a_table_of_one_value_per_shape_gets_the_shape_level_test_and_no_unbounded_interval() -> None:
    """The same SYNTHETIC values (one pass in FLOP order through a 2% drift, 120 shapes, a 4% lead of a) read
    as two published tables: a table has no measured order, so no drift factor (it does not change when the
    records are reordered), finite intervals in every band, and the lead is found; read as two files from
    before shuffled passes (FLOP order known), the drift factor applies and says so."""
    from dataclasses import replace as swap

    flops = [float(f) for f in np.geomspace(1e8, 1e12, 120)]
    a, b = _pair((replace(DRIFT, name="a"), replace(DRIFT, name="b")), flops, seed=42, shuffle=False)
    a = swap(a, records=tuple(swap(r, samples_s=tuple(x / 1.04 for x in r.samples_s),
                                   median_s=r.median_s / 1.04) for r in a.records))
    legacy = compare_series(a, b, "tflops", use_fit=False)
    table = compare_series(swap(a, published=True), swap(b, published=True), "tflops", use_fit=False)
    assert legacy.bands[0].drift > 1 and any(n.startswith(DRIFT_NOTE) for n in legacy.notes)
    assert all(band.drift == 1 for band in table.bands) and not any(n.startswith(DRIFT_NOTE) for n in table.notes)
    assert not any(band.too_few for band in table.bands)
    assert all(j["ratio_low"] is not None and j["ratio_high"] is not None for j in table.to_json()["bands"])
    assert sum(band.verdict == 1 for band in table.bands) > sum(band.verdict == 1 for band in legacy.bands)


# -- passes: the random-effects band mean and the pass offsets -------------------------------------------------


@pytest.mark.parametrize("tau", [0.03, 0.1])
def test_four_shape_band_p_values_keep_their_level(tau: float) -> None:
    """A band of 4 shapes that differ systematically (sd ``tau``, 3 and 10 times the run-to-run noise) but
    not between the two devices: the band's p-value (``bands[].p``) is below 0.05 in 5% of 20,000 bands.

    The band mean with the shape as a random effect is a t test on n - 1 = 3 df (Hartung-Knapp); at n df
    the rate rises to 7.7% / 7.1% (written: 5.1% / 5.2%). Monte Carlo sd 0.15%, so 4.2-6.0% is > 5 sd
    from the slip and > 5 sd from 5%.
    """
    from scipy.stats import t as student_t

    from mfu_sweep.analysis.verdicts.band_tests import random_effects

    rng = np.random.default_rng(3)
    rows, n = 20000, 4
    v = np.full((rows, n), 0.01**2 / 2)  # two passes' worth of 1% run-to-run noise per shape
    d = tau * rng.standard_normal((rows, n)) + np.sqrt(v) * rng.standard_normal((rows, n))
    mu, se, df = random_effects(d, v, np.full((rows, n), 8.0))
    rate = float((2 * student_t.sf(np.abs(mu) / se, df) < 0.05).mean())
    assert 0.042 <= rate <= 0.060, rate


@pytest.mark.parametrize("passes", [2, 3])
def test_pass_offsets_widen_band_intervals_by_their_true_variance(passes: int) -> None:
    """The variance a pass-level offset adds to every band interval (``RunSide.common``: a pass that was
    slow everywhere, 3% sd, shapes with 0.5% run-to-run noise) is, averaged over 400 SYNTHETIC series, the
    variance of the mean offset over the passes, sd^2 / R: the interval is as wide as the offsets make it.

    Estimated with ddof 0 it is (R - 1) / R of that (0.5 at two passes: band coverage 0.93 -> 0.87 at 2 vs
    2 passes). The mean of 400 chi-square(R - 1) estimates has a relative sd of at most 7%, so 0.8-1.2
    is >= 2.9 sd from the truth and the slip at two passes (4 sd at three, where the slip gives 0.67).
    """
    rng = np.random.default_rng(8)
    x = np.log(np.geomspace(1e8, 1e12, 24))
    sd = 0.03
    common = [run_side(x, 0.005 * rng.standard_normal((passes, 24)) + sd * rng.standard_normal((passes, 1))).common
              for _ in range(400)]
    ratio = float(np.mean(common)) / (sd**2 / passes)
    assert 0.8 <= ratio <= 1.2, ratio


def test_quiet_many_pass_side_against_noisy_two_pass_side_keeps_point_coverage() -> None:
    """A new 6-pass sweep on a quiet SYNTHETIC device (0.5% run-to-run noise per shape) against an older 2-pass
    sweep of an identical but noisy one (3%), 4 shapes, 300 seeds, through compare's calls (``compare_arrays``):
    the per-shape 95% intervals (``points[].ratio_low/ratio_high``) hold the true ratio 1, and no band leads.

    The noisy side's variance dominates each point's, so the point's Satterthwaite df is about b's (pooled
    over 4 shapes of 1 df each: 2.8); taking a's df for b's term too (10 and more) narrows the t quantile:
    coverage 0.967 when written (0.972 over 1,000 seeds), 0.898 with a's df twice (0.905 over 1,000; per-seed
    se 0.007-0.011), false leads 5 and 22 of 300. At least 0.94 is 3.7 se above the slip and 4 below the code.
    """
    x = np.log(np.geomspace(1e9, 1e12, 4))
    rng = np.random.default_rng(21)
    cover, leads = [], 0
    for _ in range(300):
        va, vb = 0.005 * rng.standard_normal((6, 4)), 0.03 * rng.standard_normal((2, 4))
        method, bands, points, _ = compare_arrays(x, va, vb)
        assert method == "runs"
        cover.append(np.mean([p.ratio_low <= 1 <= p.ratio_high for p in points]))
        leads += any(b.verdict for b in bands)
    assert float(np.mean(cover)) >= 0.94, np.mean(cover)
    assert leads <= max_false(300), leads


# -- what a pass's value is: the median of its samples --------------------------------------------------------


def test_a_jittery_device_with_the_same_median_is_not_a_leader() -> None:
    """Device a's samples scatter 5% around the same median as device b's (0.5%); 2 passes each, 60 seeds.
    A pass's value is the median of its samples, so nobody leads (0 of 60 seeds when written; max_false(60)
    = 2 allowed). Taken as the per-pass minimum, a looks 5% faster: 19 of 60 seeds (40 of 40 with 24 shapes
    and 10 samples)."""
    flops = [float(f) for f in np.geomspace(1e8, 1e12, 12)]
    jittery, quiet = NoiseModel("jittery", sample=0.05, shape_shift=0.01), NoiseModel("quiet", sample=0.005,
                                                                                       shape_shift=0.01)
    leads = 0
    for s in range(60):
        a, b = _pair((jittery, quiet), flops, seed=1000 + 2 * s, repeats=2, n_samples=5)
        leads += any(x.verdict for x in compare_series(a, b, "tflops", use_fit=False).bands)
    assert leads <= max_false(60), leads


# -- fits: the bootstrap resamples shapes --------------------------------------------------------------------


def test_one_pass_fit_intervals_cover_under_shape_noise() -> None:
    """Roofline fits of one pass with 2% per-shape run-to-run noise (no drift, no offsets): the 95% intervals
    of P, W and t0 hold the truth in 37, 38 and 40 of 40 fits when written. The shape noise shows only as
    the scatter of shapes about the fit, which the bootstrap sees by resampling shapes; resampling only
    each shape's samples covers 12, 13 and 8 of 40. At least 33 of 40 is required (a true 95% passes with
    probability 0.996)."""
    score = score_fit(PER_SHAPE_2, 1, 40, n_boot=60, seed=400)
    assert score.unconstrained == 0
    assert all(v >= 33 for v in score.covered.values()), score
    assert math.isfinite(score.coverage("p_tflops"))
