"""Properties of the local model, the calibrated band test and the fleet's evidence, over seeds (issue 52).

Every input here is SYNTHETIC (made-up shapes and noise around a known truth, nothing measured). Each test calls
public functions only (``ShapeModel.predict``, ``band_verdicts``, ``leaderboard``, ``align``), so the fleet's
vectorised rewrite must give the same answers, and each docstring says which slip it catches and what rate,
coverage or count the code and the slip give:

* the local model never predicts outside the span of its neighbours, at either end of any coordinate;
* a band test with a timing calibration keeps its false leads at or below alpha when the calibration itself is
  off by 3% (the intersection-union test needs both p-values);
* the fleet's p-values under the null are never liberal (at 1%, 5% and 20%), and a device 5% slower is behind;
* a value the fleet predicts at a shape a device did not measure has a 95% interval that covers its truth.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from synthetic_aspect import log_speed, name_of
from synthetic_fleet import fleet_docs

from mfu_sweep.analysis.fleet.leaderboard import Profile, align, leaderboard
from mfu_sweep.analysis.ground.series import Series, group_series
from mfu_sweep.analysis.verdicts.bands import band_verdicts
from mfu_sweep.analysis.verdicts.matching import ShapeModel, features
from mfu_sweep.records.results import parse_document

# -- the local model -------------------------------------------------------------------------------------------


def _measured(rng: np.random.Generator) -> list[str]:
    """About 70% of the 5 x 5 x 5 grid of M, N, K in 256 .. 4096 (powers of two): a side's shape list."""
    return sorted(f"{2**m}x{2**n}x{2**k}" for m, n, k in itertools.product(range(8, 13), repeat=3)
                  if rng.random() < 0.7)


def test_the_local_model_never_predicts_outside_its_neighbours_span() -> None:
    """Targets drawn across and just beyond the measured grid (log2 sizes 7.5-13.5 against 8-12): every prediction
    made lies inside the range of its own neighbours in batch, M, N and K, at the lower and the upper end alike
    (454 predictions over 40 seeds, none outside). With the upper end unchecked, 265 of 719 lie above it."""
    made = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        names = _measured(rng)
        model = ShapeModel.of(names, rng.normal(size=(1, len(names))))
        for _ in range(40):
            target = "x".join(str(int(2 ** rng.uniform(7.5, 13.5))) for _ in range(3))
            fit = model.predict(target)
            if fit is None:
                continue
            made += 1
            x, near = features(target), np.array([features(n) for n in fit.neighbours])
            assert (near.min(axis=0) - 1e-9 <= x).all() and (x <= near.max(axis=0) + 1e-9).all(), (seed, target)
    assert made > 300  # the property was asked


# -- the calibrated band test ----------------------------------------------------------------------------------

CAL_FLOPS = np.geomspace(1.1e9, 0.95e11, 48)  # four half-decade bands of 12 shapes


def _calibrated_leads(seed: int) -> bool:
    """Identical chips timed two ways, the method's ratio divided out by a calibration per band measured on a
    reference chip (8 shapes, standard error 3%): whether any band is called a lead (margin 0)."""
    rng = np.random.default_rng(seed)
    level = np.floor(np.log10(CAL_FLOPS) * 2 + 1e-9).astype(int)
    d, cal = np.empty(len(CAL_FLOPS)), []
    for lv in np.unique(level):
        ref = rng.normal(0.0, 0.03 * math.sqrt(8), 8)  # the reference's log ratios: their mean is 3% off at 1 sd
        cal.append((0.0, float(ref.var(ddof=1) / 8), 7.0))
        inside = level == lv
        d[inside] = ref.mean() + rng.normal(0.0, 0.01, inside.sum())  # what is left after dividing out
    bands = band_verdicts(CAL_FLOPS, d[None, :], np.zeros((1, len(d))), calibration=cal, margin=0.0)
    return any(b.verdict for b in bands)


def test_a_calibrated_band_test_keeps_false_leads_at_alpha_with_a_3pct_calibration_error() -> None:
    """One pass per side, four bands, a calibration whose own error is 3% (standard error, 7 df) and 1% shape
    noise: seeds with a band lead at most 20 of 400 (alpha; the code gives 12). The signed-rank test alone cannot
    see a calibration error that moves every shape of a band alike; taking the smaller of its p-value and the
    calibrated t test's (instead of requiring both) calls a lead in 125 of 400."""
    leads = calibrated_false_leads(400)
    assert leads <= 20, leads


def calibrated_false_leads(seeds: int) -> int:
    """Seeds of :func:`_calibrated_leads` with a lead (benchmarks/calibration.py --part round6 runs more)."""
    return sum(_calibrated_leads(seed) for seed in range(seeds))


# -- the fleet's evidence --------------------------------------------------------------------------------------

FLEET_FLOPS = tuple(float(f) for f in np.geomspace(1e7, 1e12, 16))  # three FLOP counts per decade band


def _series(docs: list[dict]) -> list[Series]:
    return list(group_series([sw for d in docs for sw in parse_document(d, validate=False)]).values())


def _fleet(n_devices: int, seed: int, **kw: object) -> list[Series]:
    return _series(fleet_docs(n_devices, flops=FLEET_FLOPS, n_samples=10, sample_noise=0.01, shape_noise=0.02,
                              seed=seed, **kw))


def test_fleet_p_values_of_identical_devices_are_never_liberal() -> None:
    """Two and five identical devices, 200 seeds, 2% run-to-run noise per shape: the share of per-shape and per-band
    p-values below 1%, 5% and 20% is at most that level (never liberal) and not far below it (20%: at least 12%).
    With two devices the per-shape share below 5% is at most 3.2% (the code 2.5%). Slips: a one-sided p reported
    as two-sided (per shape or per band) puts 36% below 20%; the noise's degrees of freedom counting the shapes
    and not the FLOP bands whose means the residuals lost puts 3.8% of two devices' shape p-values below 5%."""
    for n_devices in (2, 5):
        shape_p, cell_p = fleet_p_values(n_devices, 200)
        for p in (shape_p, cell_p):
            for level in (0.01, 0.05, 0.2):
                assert np.mean(p < level) <= level, (n_devices, level, np.mean(p < level))
            assert np.mean(p < 0.2) >= 0.12, (n_devices, np.mean(p < 0.2))
        if n_devices == 2:
            assert np.mean(shape_p < 0.05) <= 0.032, np.mean(shape_p < 0.05)


def fleet_p_values(n_devices: int, seeds: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-shape and per-band p-values (margin 0) of ``n_devices`` identical devices over ``seeds`` seeds."""
    shape_p, cell_p = [], []
    for seed in range(seeds):
        board = leaderboard(_fleet(n_devices, seed), "tflops", margin=0.0)
        shape_p += [e.p_value for ev in board.evidence.values() for e in ev]
        cell_p += [c.p_value for c in board.cells]
    return np.array(shape_p), np.array(cell_p)


def test_a_device_five_percent_slower_is_behind_at_the_documented_power() -> None:
    """Five devices, one 5% slower at every shape (3% beyond the 2% margin), 12 shapes per decade, 40 seeds: it is
    behind in some band in at least 38 (the power docs/fleet-gate.md states; the code 40), and a healthy device is
    behind in at most 2 (0)."""
    found = wrong = 0
    dense = tuple(float(f) for f in np.geomspace(1e8, 1e13, 61))
    for seed in range(40):
        docs = fleet_docs(5, flops=dense, n_samples=10, sample_noise=0.01, shape_noise=0.02, seed=seed,
                          slow={1: (1.05, 0.0, math.inf)})
        board = leaderboard(_series(docs), "tflops")
        found += any(c.verdict < 0 for c in board.cells_of.get("synthetic-gpu.r1", ()))
        wrong += any(c.verdict < 0 for c in board.cells if c.label != "synthetic-gpu.r1")
    assert found >= 38 and wrong <= 2, (found, wrong)


def _aspect_dims(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` SYNTHETIC shapes (batch 1; M, N, K multiples of 64 from 256 to 8192, log-uniform), distinct."""
    dims = np.clip(np.round(2 ** rng.uniform(8, 13, (n, 3)) / 64) * 64, 256, 8192).astype(int)
    return np.unique(np.column_stack([np.ones(n, dtype=int), dims]), axis=0)


def test_a_predicted_value_covers_its_truth_at_the_nominal_rate() -> None:
    """Two devices that measured their own shapes (300 and about 100 of one population, 5% per-shape offsets no
    smooth surface explains, 1% noise): at each shape a device did not measure, the value ``align`` predicts
    +- 1.96 its standard error holds the device's true value there in 93.5-97% of ~6,700 cases over 20 seeds
    (95.2%). Slips: the standard error without the estimate's own variance (sigma2 ||L||^2) covers 91.2%, without
    the shape's own departure from the surface 69.6%, with neither (the neighbours' medians only) 20.4%."""
    hits, total = prediction_coverage(20)
    assert total > 5000 and 0.935 <= hits / total <= 0.97, (hits, total)


def prediction_coverage(seeds: int) -> tuple[int, int]:
    """(intervals holding the truth, intervals) of the values ``align`` predicts, over ``seeds`` seeds."""
    hits = total = 0
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        dims = _aspect_dims(rng, 400)
        names = [name_of(r) for r in dims]
        truth = log_speed(dims.astype(float)) + rng.uniform(-0.05, 0.05, len(dims))
        flops = 2.0 * dims.prod(axis=1)
        pick = rng.permutation(len(dims))
        profiles = [Profile(label, tuple(names[i] for i in idx), flops[idx],
                            truth[idx] + rng.normal(0.0, 0.01, len(idx)), np.full(len(idx), 0.01))
                    for label, idx in (("a", np.sort(pick[:300])), ("b", np.sort(pick[300:])))]
        grid = align(profiles)
        where = {n: i for i, n in enumerate(names)}
        for d, j in zip(*np.nonzero(grid.interpolated), strict=True):
            total += 1
            hits += bool(abs(grid.values[d, j] - truth[where[grid.shapes[j]]]) <= 1.959964 * grid.se[d, j])
    return hits, total
