"""Properties of the roofline fits a user relies on, checked over seeds on SYNTHETIC rooflines.

Every series here is SYNTHETIC: a known roofline ``t = t0 + max(F / P, B / W)`` on GEMMs of many aspect
ratios, with the noise real machines have (a shift per shape, an offset per pass, per-sample noise).
The properties: stacked fits of groups that differ in cost by orders of magnitude end exactly as
each fit alone (starting points pruned per group, the bootstrap stopped per problem), whatever the
solver settings and the stack's size limit; the intervals are percentile intervals of a bootstrap
that draws every shape alike and covers the truth at its nominal rate; pass shifts are the error of
a mean of R passes, scale every shape alike and are independent between series; W stays in the
plausible range; a cached fit is the fit of that very data.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import chi2 as chi2_dist
from scipy.stats import t as student_t

from mfu_sweep.analysis.fits import batch, lsq, roofline
from mfu_sweep.analysis.fits.fit import fit_groups, fit_series, fit_steps
from mfu_sweep.analysis.fits.parallel import map_chunks
from mfu_sweep.analysis.fits.physical import bytes_tied_to_flops, plausible_bandwidth
from mfu_sweep.analysis.fits.roofline import (
    ShapeData,
    log_time,
    pass_offsets,
    pass_shifts,
    resamples,
    shape_data,
    shifted,
)
from mfu_sweep.analysis.ground.series import Series, SeriesKey
from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.records.results import Record, finish_record
from mfu_sweep.specs import Peak

T0, P, W = 2e-6, 600.0, 2.0  # SYNTHETIC truth: s, TFLOP/s, TB/s
BF16 = get_dtype("bf16")


def _shapes(n: int, seed: int = 7) -> list[Shape]:
    """``n`` GEMMs with log-uniform M, N, K (many aspect ratios: W is not tied to P by the shapes)."""
    rng = np.random.default_rng(seed)
    out: set[Shape] = set()
    while len(out) < n:
        out.add(Shape(1, *(int(2 ** rng.uniform(6, 14)) for _ in range(3))))
    return sorted(out, key=lambda s: (s.flops, s.m, s.n, s.k))


def _series(seed: int, *, label: str = "syn", n_shapes: int = 24, passes: int = 3, samples: int = 5,
            shape_sd: float = 0.03, pass_sd: float = 0.02, sample_sd: float = 0.02, t0: float = T0, p: float = P,
            w: float = W, spec_tbs: float | None = None, shapes: list[Shape] | None = None) -> Series:
    """A SYNTHETIC series of the roofline (t0, p, w): a log-normal shift per shape (the same in every pass),
    one per pass (every shape alike) and one per sample."""
    rng = np.random.default_rng(seed)
    peak = Peak(chip=None, tflops={"bf16": 1000.0}, memory_bandwidth_tbs=spec_tbs, source="SYNTHETIC")
    shapes = shapes or _shapes(n_shapes)
    shape_shift, pass_shift = rng.normal(0, shape_sd, len(shapes)), rng.normal(0, pass_sd, passes)
    records = []
    for q in range(passes):
        for s, d in zip(shapes, shape_shift, strict=True):
            t = (t0 + max(s.flops / (p * 1e12), s.bytes(BF16) / (w * 1e12))) * math.exp(d + pass_shift[q])
            rec = Record(shape=s, dtype="bf16", mode="eager", flops=s.flops, bytes=s.bytes(BF16),
                         intensity=s.intensity(BF16), status="ok",
                         samples_s=tuple(float(v) for v in t * np.exp(rng.normal(0, sample_sd, samples))),
                         pass_index=q if passes > 1 else None)
            records.append(finish_record(rec, peak))
    return Series(key=SeriesKey(label, "bf16", "eager"), records=tuple(records), peak=peak)


def _same_fit(a, b, what: str) -> None:  # noqa: ANN001 - RooflineFit
    """Equal fits up to rounding: a stacked solve adds in another order, and a refit creeping along a
    direction no shape constrains carries that difference on (1e-8 seen; a slip moves draws by 1e-4 or more)."""
    assert (a.model, a.w_status, dict(a.constrained)) == (b.model, b.w_status, dict(b.constrained)), what
    np.testing.assert_allclose(a.params, b.params, rtol=0, atol=1e-9, err_msg=what)
    np.testing.assert_allclose(a.boot, b.boot, rtol=0, atol=1e-6, err_msg=f"{what}: bootstrap draws")
    for name in ("t0_s_ci", "p_tflops_ci", "w_tbs_ci"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-6, err_msg=f"{what}: {name}")


# Groups whose robust costs differ by orders of magnitude (a clean series, very noisy ones ...), with one
# pass or several, a bounded W (spec, measured copy) or none: all of 24 shapes, so their problems stack.
# The noisy ones' bootstraps stop by their interval rule (refits still creeping), not by converging, and
# the square one's starting points end where 60 iterations leave its unconstrained W: which starts are
# pruned, and when each bootstrap stops, shows in the result.
SQUARE = [Shape(1, m, m, k) for m in (512, 768, 1024, 1536, 2048, 3072, 4096, 8192) for k in (1024, 4096, 16384)]
MIXED = {
    "clean": dict(shape_sd=0.0005, pass_sd=0.0, sample_sd=0.0005, passes=1),
    "square": dict(shapes=SQUARE, w=50.0, shape_sd=0.1, passes=2),  # compute-bound: W unconstrained, refits creep
    "noisy": dict(shape_sd=0.3, sample_sd=0.2, passes=3),
    "noisy-b": dict(shape_sd=0.2, sample_sd=0.1, passes=2),  # with "noisy": two bootstraps stopped by their own rule
    "two-pass": dict(shape_sd=0.01, passes=2, spec_tbs=2.5),
    "drifting": dict(shape_sd=0.1, pass_sd=0.1, passes=4),
    "slow": dict(shape_sd=0.001, sample_sd=0.05, passes=1, p=50.0, spec_tbs=1.0),
    "copy": dict(shape_sd=0.02, passes=2, w=0.3, spec_tbs=2.0),
}
COPY = {"copy": 1.5, "two-pass": 2.2}  # measured copy bandwidths (TB/s) by label


def test_stacked_fits_of_groups_that_differ_in_cost_equal_each_fit_alone() -> None:
    """fit_groups stacks the problems of every series into one solve per step; each series must still end
    as it would alone: its starting points pruned against its own cost, its bootstrap stopped by its own
    rule, its W bounded by its own copy bandwidth."""
    series = {s.key: s for s in (_series(i, label=name, **kw) for i, (name, kw) in enumerate(MIXED.items()))}
    costs = [fit_series(s, cache=False).rms_log_residual for s in series.values()]
    assert max(costs) / min(costs) > 100  # the point of the test: a cost another group's pruning would mistake
    fits, skipped = fit_groups(series, copy_bandwidth=COPY, workers=1, cache=False)
    assert not skipped
    for key, s in series.items():
        _same_fit(fits[key], fit_series(s, cache=False, copy_bandwidth_tbs=COPY.get(key.label)), key.label)


def test_fits_in_lockstep_with_different_settings_equal_each_fit_alone() -> None:
    """Fits of other robust losses and scales driven together: each with its own settings, as alone."""
    s = _series(3, shape_sd=0.1, sample_sd=0.05)
    settings = [dict(loss="soft_l1", f_scale=0.05), dict(loss="cauchy", f_scale=0.2), dict(loss="huber", f_scale=0.01)]
    together = batch.drive([fit_steps(s, cache=False, n_boot=60, **kw) for kw in settings])
    for kw, fit in zip(settings, together, strict=True):
        _same_fit(fit, fit_series(s, cache=False, n_boot=60, **kw), str(kw))


def test_a_stacked_solve_never_holds_more_than_max_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stack's size limit (memory and cache) holds in every solve, and splitting changes no fit."""
    calls: list[int] = []
    real = lsq.solve

    def counting(model, x0, y, *args, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202 - lsq.solve's own
        calls.append(len(x0) * np.shape(y)[-1])
        return real(model, x0, y, *args, **kw)

    series = [_series(10 + i, label=f"s{i}", passes=1) for i in range(4)]
    monkeypatch.setattr(batch.lsq, "solve", counting)
    cap = 3 * 60 * 24  # three bootstraps of 60 refits x 24 shapes
    fits = batch.drive([fit_steps(s, cache=False, n_boot=60) for s in series], max_cells=cap)
    assert calls and max(calls) <= cap
    assert max(calls) > 60 * 24  # bootstraps were stacked, up to the cap
    monkeypatch.setattr(batch.lsq, "solve", real)
    for s, fit in zip(series, fits, strict=True):
        _same_fit(fit, fit_series(s, cache=False, n_boot=60), s.label)


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_counts_every_item_up_to_the_total(workers: int) -> None:
    seen: list[tuple[int, int]] = []
    out = map_chunks(_squares, list(range(23)), 5, workers=workers, progress=lambda d, t: seen.append((d, t)))
    assert out == [i * i for i in range(23)]
    assert seen[-1] == (23, 23) and all(t == 23 for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen) and len(seen) == 5


def _squares(items: list[int]) -> list[int]:
    return [i * i for i in items]


@pytest.mark.parametrize(("noise", "kw"), [
    ("one pass, shapes shifted by 5%", dict(passes=1, shape_sd=0.05, pass_sd=0.0)),
    ("three passes, pass offsets of 3% and shapes shifted by 3%", dict(passes=3, pass_sd=0.03))])
def test_fit_intervals_cover_the_truth_at_their_nominal_rate(noise: str, kw: dict) -> None:
    """95% intervals of P, W and t0 cover the SYNTHETIC truth in at least 34 of 40 fits (a calibrated 95%
    interval covers fewer with probability 0.3%) under per-shape shifts and per-sample noise, with one
    pass (no pass offset: one pass cannot see it, and says so) or with pass offsets and three passes.
    The code covers 36-40 of 40; a bootstrap that resamples no shapes 15-18 with one pass."""
    series = {s.key: s for s in (_series(100 + i, label=f"c{i}", **kw) for i in range(40))}
    fits, _ = fit_groups(series, workers=1, cache=False)
    assert len(fits) == 40
    for name, truth in (("p_tflops", P), ("w_tbs", W), ("t0_s", T0)):
        cover = [lo <= truth <= hi for lo, hi in (getattr(f, f"{name}_ci") for f in fits.values())]
        assert sum(cover) >= 34, (noise, name, sum(cover))


def test_stopping_the_bootstrap_by_its_interval_rule_moves_no_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bootstrap stops its refits once the 2.5/50/97.5% quantiles move less than 0.1% between checks:
    the intervals are then those of the same refits run until each converges, within 0.3%, on noisy
    series whose refits creep (0.01% seen; a rule at 10% leaves them 1-10% off)."""
    series = [_series(seed, **MIXED["noisy"]) for seed in range(6)]
    stopped = [fit_series(s, cache=False) for s in series]
    monkeypatch.setattr(roofline._IntervalSettled, "__call__", lambda self, x: False)
    for s, fit in zip(series, stopped, strict=True):
        full = fit_series(s, cache=False)
        for name in ("t0_s_ci", "p_tflops_ci", "w_tbs_ci"):
            gap = np.abs(np.log(np.array(getattr(fit, name)) / np.array(getattr(full, name))))
            assert gap.max() < 0.003, (name, getattr(fit, name), getattr(full, name))


def test_a_start_at_a_bound_leaves_it_when_the_minimum_lies_inside() -> None:
    """Starting points and warm-started refits can sit exactly at a bound (clipped there, or a W held at
    the plausible range's end); a bound holds a parameter only while the data push it out, so every
    start reaches the interior minimum that a start inside reaches."""
    data = shape_data(_series(2, passes=1, shape_sd=0.01))
    model = roofline.batch_model(np.log(data.flops), np.log(data.bytes))
    inside = np.log([T0, P, W])
    lower, upper = inside - [3.0, 1.0, 1.0], inside + [3.0, 1.0, 1.0]
    x0 = np.array([inside + [0.1, -0.1, 0.1], [lower[0], inside[1], inside[2]], [inside[0], upper[1], inside[2]],
                   [inside[0], inside[1], lower[2]], [upper[0], lower[1], upper[2]]])
    sol = lsq.solve(model, x0, data.log_median, None, lower, upper, loss="soft_l1", f_scale=0.05, max_iter=200)
    np.testing.assert_allclose(sol.x, np.broadcast_to(sol.x[0], sol.x.shape), atol=1e-6)
    assert np.all(sol.x > lower + 0.1) and np.all(sol.x < upper - 0.1)


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_interval_ends_are_the_bootstrap_percentiles(alpha: float) -> None:
    """A 1 - alpha interval holds 1 - alpha of the bootstrap draws, alpha / 2 falling on either side."""
    fit = fit_series(_series(4), alpha=alpha, n_boot=400, cache=False)
    draws = np.exp(fit.boot)
    for j, (lo, hi) in enumerate((fit.t0_s_ci, fit.p_tflops_ci, fit.w_tbs_ci)):
        below, above = np.mean(draws[:, j] < lo), np.mean(draws[:, j] > hi)
        assert abs(below - alpha / 2) <= 2 / 400 and abs(above - alpha / 2) <= 2 / 400, (j, below, above)


def test_the_bootstrap_draws_every_shape_alike() -> None:
    """Each shape, the largest and the smallest too, is drawn 1/n of the time (chi-square, 0.1% level)."""
    data = shape_data(_series(5, passes=1))
    _, idx = resamples(data, 4000, seed=1)
    n = len(data.flops)
    counts = np.bincount(idx.ravel(), minlength=n)
    expected = idx.size / n
    chi2 = float(np.sum((counts - expected) ** 2 / expected))
    assert chi2 < chi2_dist.ppf(0.999, n - 1), (chi2, counts)
    assert idx.shape == (4000, n)


def test_resampled_medians_vary_as_each_shapes_samples_do() -> None:
    """Within a shape the bootstrap redraws its samples: shapes measured with 10% noise per sample move
    about as much as their medians do (1.25 sigma / sqrt(n)), shapes measured with 0.1% a hundred times less."""
    rng = np.random.default_rng(3)
    sigmas = np.repeat([0.001, 0.01, 0.1], 8)
    samples = tuple(np.exp(-8 + rng.normal(0, s, 49)) for s in sigmas)
    data = ShapeData(flops=np.geomspace(1e9, 1e12, 24), bytes=np.geomspace(1e7, 1e9, 24), samples=samples)
    draws, _ = resamples(data, 1000, seed=0)
    ratio = np.median((draws.std(axis=0) / (1.2533 * sigmas / 7)).reshape(3, 8), axis=1)
    assert np.all((ratio > 0.6) & (ratio < 1.6)), ratio


def _pass_data(offsets: np.ndarray, rng: np.random.Generator, n_shapes: int = 8) -> ShapeData:
    """SYNTHETIC shapes measured once per pass, every shape of pass q moved by ``offsets[q]``."""
    base = rng.uniform(-12, -6, n_shapes)
    samples = tuple(np.exp(b + offsets) for b in base)
    passes = tuple(np.arange(len(offsets)) for _ in base)
    return ShapeData(flops=np.geomspace(1e9, 1e13, n_shapes), bytes=np.geomspace(1e7, 1e9, n_shapes),
                     samples=samples, passes=passes)


@pytest.mark.parametrize("n_passes", [2, 3, 5])
def test_pass_shifts_are_the_error_of_a_mean_of_r_passes(n_passes: int) -> None:
    """Every shape of pass q moved by a planted offset: the offsets read back are the planted ones (up to
    one common shift), and the shift every bootstrap draw gets is s / sqrt(R) times Student's t with
    R - 1 df (s: the planted offsets' spread), its quantiles within the noise of 20,000 draws."""
    rng = np.random.default_rng(n_passes)
    offsets = rng.normal(0, 0.05, n_passes)
    data = _pass_data(offsets, rng)
    read = pass_offsets(data)
    np.testing.assert_allclose(read - read.mean(), offsets - offsets.mean(), atol=1e-12)
    scale = float(np.std(offsets, ddof=1)) / math.sqrt(n_passes)
    shifts = pass_shifts(data, 20_000, seed=0) / scale
    for q in (0.75, 0.9, 0.975):
        want = float(student_t.ppf(q, n_passes - 1))
        assert np.quantile(shifts, q) == pytest.approx(want, rel=0.08), q


def test_pass_shifts_of_two_series_fitted_with_one_seed_are_independent() -> None:
    """Comparisons pair the draws of two fits by index: a shift shared by both would cancel in the ratio."""
    rng = np.random.default_rng(0)
    a = _pass_data(rng.normal(0, 0.05, 3), rng)
    b = _pass_data(rng.normal(0, 0.05, 3), rng)
    sa, sb = pass_shifts(a, 4000, seed=0), pass_shifts(b, 4000, seed=0)
    ranks = [np.argsort(np.argsort(s)) for s in (sa, sb)]
    assert abs(np.corrcoef(*ranks)[0, 1]) < 0.06  # 4 standard errors of a rank correlation of 4,000 pairs


@pytest.mark.parametrize("model", ["max", "pnorm"])
def test_a_pass_shift_scales_the_time_of_every_shape_alike(model: str) -> None:
    """A shift d of the draws' parameters multiplies every shape's predicted time by e^d."""
    series = _series(6, passes=1)
    data = shape_data(series)
    log_f, log_b = np.log(data.flops), np.log(data.bytes)
    fit = fit_series(series, model=model, n_boot=50, cache=False)
    shift = np.random.default_rng(2).normal(0, 0.1, len(fit.boot))
    unbounded = roofline.Options("soft_l1", 0.05, "batch", np.full(4, -1e9), np.full(4, 1e9), {})
    moved = shifted(fit.boot, shift, unbounded)
    gap = log_time(moved.T[:, :, None], log_f, log_b) - log_time(fit.boot.T[:, :, None], log_f, log_b)
    np.testing.assert_allclose(gap, np.broadcast_to(shift[:, None], gap.shape), atol=1e-9)


@pytest.mark.parametrize(("truth", "spec", "copy"), [(0.2, 2.0, None), (0.2, 2.0, 1.6), (12.0, 2.0, None),
                                                      (12.0, 2.0, 3.0), (4.0, None, 1.0)])
def test_a_fitted_w_stays_in_the_plausible_range(truth: float, spec: float | None, copy: float | None) -> None:
    """Whatever the shapes ask for, W is reported within [low, high] of the spec and measured copy."""
    s = _series(7, w=truth, spec_tbs=spec, passes=1)
    fit = fit_series(s, copy_bandwidth_tbs=copy, n_boot=40, cache=False)
    rng_ = fit.bandwidth_range
    assert rng_ is not None
    lo, hi = rng_.low_tbs or 0.0, rng_.high_tbs or math.inf
    assert lo * (1 - 1e-9) <= fit.w_tbs <= hi * (1 + 1e-9), (fit.w_tbs, lo, hi)
    assert fit.w_status == "at bound", fit.notes


def test_the_plausible_range_holds_the_measured_copy_and_the_spec() -> None:
    """A measured copy bandwidth is always plausible, and so is any W up to the spec (or the copy, when a
    copy beats the spec: its operands then come from cache), over random pairs of the two."""
    rng = np.random.default_rng(0)
    for spec, copy in 10 ** rng.uniform(-2, 1, (50, 2)):
        r = plausible_bandwidth(float(spec), float(copy))
        assert r.low_tbs <= copy <= r.high_tbs and r.high_tbs >= max(spec, copy), (spec, copy, r)
        alone = plausible_bandwidth(float(spec), None)
        assert alone.low_tbs <= spec <= alone.high_tbs, (spec, alone)


def test_an_unconstrained_w_moves_to_the_spec_only_when_that_costs_the_fit_nothing() -> None:
    """Compute-bound square GEMMs (a fast accelerator's sweep) leave W unconstrained; a spec bandwidth that
    the range lets stay clear of the shapes must not make the fit describe them worse than the free fit."""
    shapes = [Shape(1, m, m, k) for m in (512, 1024, 2048, 4096, 8192) for k in (2048, 8192)]
    free = fit_series(_series(1, passes=1, w=50.0, shapes=shapes), n_boot=30, cache=False)
    assert not free.constrained["w_tbs"]
    checked = 0
    for spec in (2.45, 2.5, 2.55, 2.6, 2.65, 2.8):  # the smallest shape turns memory-bound below ~2.6 TB/s
        fit = fit_series(_series(1, passes=1, w=50.0, shapes=shapes, spec_tbs=spec), n_boot=30, cache=False)
        if fit.w_status != "at bound":
            checked += 1
            assert fit.rms_log_residual == pytest.approx(free.rms_log_residual, rel=1e-5), (spec, fit.w_tbs)
    assert checked >= 4


@pytest.mark.parametrize("seed", range(4))
def test_one_shape_off_the_power_law_unties_bytes_from_flops(seed: int) -> None:
    """Square-ish shapes tie bytes to FLOPs; one shape whose bytes are 30% off that power law unties them."""
    rng = np.random.default_rng(seed)
    flops = np.geomspace(1e8, 1e14, 30) * rng.uniform(0.9, 1.1, 30)
    nbytes = 3 * flops ** (2 / 3) * np.exp(rng.uniform(-0.03, 0.03, 30))
    assert bytes_tied_to_flops(flops, nbytes).tied
    off = nbytes.copy()
    off[rng.integers(30)] *= 1.3 if seed % 2 else 1 / 1.3
    assert not bytes_tied_to_flops(flops, off).tied


def test_a_cached_fit_is_the_fit_of_that_very_data() -> None:
    """Two series with the same samples that differ only in which pass measured them have other pass
    offsets, hence other intervals: the cache must not hand one the other's fit."""
    s = _series(8, pass_sd=0.08)
    moved = tuple(replace(r, pass_index=(r.run_pass + (r.shape.m % 2)) % 3) for r in s.records)
    other = replace(s, records=moved)
    first = fit_series(s, n_boot=60)
    cached = fit_series(other, n_boot=60)
    fresh = fit_series(other, n_boot=60, cache=False)
    assert first.p_tflops_ci != fresh.p_tflops_ci  # the pass assignment matters to the intervals
    _same_fit(cached, fresh, "cached")


def test_a_skipped_series_says_how_many_shapes_it_has_and_how_many_the_fit_asked_for() -> None:
    series = {s.key: s for s in (_series(9, n_shapes=6, passes=1),)}
    fits, skipped = fit_groups(series, min_shapes=10, workers=1, cache=False)
    assert not fits
    (why,) = skipped.values()
    assert "only 6 distinct shapes" in why and "at least 10" in why
