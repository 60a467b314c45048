"""Roofline fits on SYNTHETIC sweeps (tests/synthetic.py): known truth in, estimates out."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import least_squares
from synthetic import make_sweep_doc, roofline_time

from mfu_sweep.analysis.fits.fit import fit_all, fit_series, log_time, log_time_jac, why_unfittable
from mfu_sweep.analysis.ground.series import SeriesError, SeriesKey, group_series
from mfu_sweep.records.results import parse_document

# Mixed aspect ratios, so overhead-, memory- and compute-bound shapes all occur.
MIXED = [f"{m}x{m}x{k}" for m in (256, 1024, 4096, 8192) for k in (64, 512, 4096)]
TRUTH = {"P_tflops": 500.0, "W_tbs": 2.0, "t0_s": 5e-6}


def _series(doc: dict):
    [series] = group_series(parse_document(doc)).values()
    return series


@pytest.mark.parametrize("seed", [0, 1])
def test_fit_recovers_p_w_t0(seed: int) -> None:
    series = _series(make_sweep_doc("chip", shapes=MIXED, noise=0.03, seed=seed, **TRUTH))
    fit = fit_series(series, n_boot=40, seed=seed)
    assert fit is not None
    assert fit.p_tflops == pytest.approx(500, rel=0.03)
    assert fit.w_tbs == pytest.approx(2.0, rel=0.05)
    assert fit.t0_s == pytest.approx(5e-6, rel=0.05)
    assert all(fit.constrained.values())
    for value, (lo, hi) in ((fit.p_tflops, fit.p_tflops_ci), (fit.w_tbs, fit.w_tbs_ci), (fit.t0_s, fit.t0_s_ci)):
        assert lo <= value <= hi and lo < hi
    assert fit.compute_fraction == pytest.approx(0.8, rel=0.03)  # synthetic peak is P / 0.8
    assert fit.bandwidth_fraction == pytest.approx(0.9, rel=0.05)
    assert fit.rms_log_residual < 0.02 and fit.r2_log > 0.999
    assert fit.model == "max"  # data from the hard roofline: the extra knee parameter does not pay


def test_auto_picks_smooth_knee_when_data_have_one() -> None:
    def knee(f: float, b: float) -> float:  # p = 2 blend of compute and memory time
        return 5e-6 + math.hypot(f / 500e12, b / 2e12)

    series = _series(make_sweep_doc("knee", shapes=MIXED, noise=0.01, time_fn=knee, **TRUTH))
    fit = fit_series(series, n_boot=20)
    hard = fit_series(series, n_boot=20, model="max")
    assert fit.model == "pnorm" and fit.blend_p == pytest.approx(2.0, rel=0.15)
    assert fit.p_tflops == pytest.approx(500, rel=0.05)
    assert fit.rms_log_residual < hard.rms_log_residual


def test_predict_time_matches_model_and_broadcasts() -> None:
    series = _series(make_sweep_doc("chip", shapes=MIXED, noise=0.0, **TRUTH))
    fit = fit_series(series, n_boot=5)
    assert isinstance(fit.predict_time(1e12, 1e8), float)
    assert fit.predict_time(1e12, 1e8) == pytest.approx(roofline_time(1e12, 1e8, **TRUTH), rel=1e-3)
    out = fit.predict_time(np.array([1e9, 1e12]), np.array([1e7, 1e8]))
    assert out.shape == (2,) and out[1] > out[0]
    assert fit.predict_time_draws([1e9, 1e12], [1e7, 1e8]).shape == (5, 2)


def test_analytic_jacobian_matches_finite_differences() -> None:
    log_f, log_b = np.log(np.geomspace(1e6, 1e13, 9)), np.log(np.geomspace(1e5, 1e10, 9))
    for x in (np.log([1e-5, 500.0, 2.0]), np.log([1e-5, 500.0, 2.0, 3.0])):
        eps = 1e-6
        numeric = np.stack([(log_time(x + eps * e, log_f, log_b) - log_time(x - eps * e, log_f, log_b)) / (2 * eps)
                            for e in np.eye(len(x))], axis=1)
        assert np.allclose(numeric, log_time_jac(x, log_f, log_b), atol=1e-5)


def test_unconstrained_bandwidth_is_flagged() -> None:
    # square GEMMs on a compute-heavy chip: the launch overhead hides the memory-bound regime
    series = _series(make_sweep_doc("gpu", P_tflops=800, W_tbs=3.0, t0_s=8e-6, seed=3))
    fit = fit_series(series, n_boot=10)
    assert fit.constrained == {"t0_s": True, "p_tflops": True, "w_tbs": False}
    assert any("bandwidth W is not constrained" in n for n in fit.notes)
    assert fit.p_tflops == pytest.approx(800, rel=0.03)


def test_too_few_shapes_gives_none_with_reason() -> None:
    series = _series(make_sweep_doc("tiny", flops=[1e9, 1e10, 1e11], **TRUTH))
    assert fit_series(series) is None
    assert "only 3 distinct shapes" in why_unfittable(series)
    assert fit_all(parse_document(make_sweep_doc("tiny", flops=[1e9, 1e10, 1e11], **TRUTH))) == {}


def test_failed_records_are_left_out() -> None:
    doc = make_sweep_doc("chip", shapes=MIXED, statuses=["ok"] * 9 + ["oom", "timeout", "mismatch"], **TRUTH)
    series = _series(doc)
    assert len(series.records) == 10  # mismatch keeps its samples
    assert [r.flops for r in series.records] == sorted(r.flops for r in series.records)


def test_missing_peak_gives_no_fraction_and_a_note() -> None:
    series = _series(make_sweep_doc("nopeak", shapes=MIXED, peak_tflops=0, bandwidth_tbs=0, **TRUTH))
    fit = fit_series(series, n_boot=5)
    assert fit.compute_fraction is None and fit.bandwidth_fraction is None
    assert any("no vendor peak" in n for n in fit.notes)
    data = fit.to_json()
    json.dumps(data)
    assert data["compute_fraction"] is None and data["p_tflops_ci"][0] <= data["p_tflops"]


def test_seeded_and_kwargs_reach_scipy() -> None:
    series = _series(make_sweep_doc("chip", shapes=MIXED, noise=0.05, **TRUTH))
    a, b = fit_series(series, n_boot=10, seed=7), fit_series(series, n_boot=10, seed=7)
    assert a.p_tflops_ci == b.p_tflops_ci
    assert fit_series(series, n_boot=10, seed=8).p_tflops_ci != a.p_tflops_ci
    with pytest.raises(TypeError):
        fit_series(series, n_boot=2, not_a_scipy_option=1)
    with pytest.raises(ValueError, match="model="):
        fit_series(series, model="cubic")


def test_fit_all_keys_by_series() -> None:
    sweeps = parse_document(make_sweep_doc("a", shapes=MIXED, **TRUTH)) + parse_document(
        make_sweep_doc("b", shapes=MIXED, dtype="fp16", **TRUTH))
    fits = fit_all(sweeps, n_boot=5)
    assert sorted(fits) == [SeriesKey("a", "bf16", "eager"), SeriesKey("b", "fp16", "eager")]


def test_group_series_refuses_two_peaks_for_one_label() -> None:
    one = make_sweep_doc("chip", shapes=MIXED[:4], peak_tflops=600, **TRUTH)
    two = make_sweep_doc("chip", shapes=MIXED[4:], peak_tflops=700, **TRUTH)
    with pytest.raises(SeriesError, match=r"peak.tflops\[bf16\]"):
        group_series(parse_document(one) + parse_document(two))


def test_analysis_modules_never_import_matplotlib_or_torch() -> None:
    code = ("import sys, mfu_sweep.analysis.fits.fit, mfu_sweep.analysis.verdicts.compare, "
            "mfu_sweep.present.export.tables, "
            "mfu_sweep.analysis.sources.merge, mfu_sweep.analysis.ground.series; "
            "bad = [m for m in ('matplotlib', 'torch') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the batch solver against scipy, one least_squares call per start and resample -------------------------


@pytest.mark.parametrize("shapes,truth", [
    (MIXED, TRUTH),
    (None, {"P_tflops": 800.0, "W_tbs": 3.0, "t0_s": 8e-6}),  # square: W unconstrained
])
def test_batch_solver_matches_scipy_estimates_and_intervals(shapes, truth) -> None:
    series = _series(make_sweep_doc("chip", shapes=shapes, noise=0.04, n_samples=15, seed=5, **truth))
    fast = fit_series(series, n_boot=40, seed=2, cache=False)
    full = fit_series(series, n_boot=40, seed=2, cache=False, solver="scipy")
    assert (fast.solver, full.solver) == ("batch", "scipy")
    assert fast.model == full.model and fast.constrained == full.constrained
    for name, ok in fast.constrained.items():
        if not ok:
            continue
        a, b = getattr(fast, name), getattr(full, name)
        assert a == pytest.approx(b, rel=1e-4)
        (alo, ahi), (blo, bhi) = getattr(fast, name + "_ci"), getattr(full, name + "_ci")
        assert alo == pytest.approx(blo, rel=2e-3) and ahi == pytest.approx(bhi, rel=2e-3)
    # the same resamples: refit by refit, the constrained parameters agree
    cols = [j for j, name in enumerate(("t0_s", "p_tflops", "w_tbs")) if fast.constrained[name]]
    assert np.median(np.abs(fast.boot[:, cols] - full.boot[:, cols])) < 1e-4


def test_batch_solver_reaches_scipys_minimum_on_every_start() -> None:
    from mfu_sweep.analysis.fits import lsq
    from mfu_sweep.analysis.fits.roofline import LOWER, UPPER, Options, batch_model, shape_data, starts

    series = _series(make_sweep_doc("chip", shapes=MIXED, noise=0.05, seed=9, **TRUTH))
    data = shape_data(series)
    y, log_f, log_b = data.log_median, np.log(data.flops), np.log(data.bytes)
    for n in (3, 4):
        x0s = starts(data, Options("soft_l1", 0.05, "batch", LOWER, UPPER, {}), n)
        sol = lsq.solve(batch_model(log_f, log_b), x0s, y, None, LOWER[:n], UPPER[:n], f_scale=0.05, damping=1.0)
        for x0, cost in zip(x0s, sol.cost, strict=True):
            res = least_squares(lambda x: log_time(x, log_f, log_b) - y, x0,
                                jac=lambda x: log_time_jac(x, log_f, log_b), bounds=(LOWER[:n], UPPER[:n]),
                                loss="soft_l1", f_scale=0.05)
            assert cost <= res.cost * (1 + 1e-6)


def test_robust_losses_match_scipy_derivatives() -> None:
    from mfu_sweep.analysis.fits import lsq

    z = np.geomspace(1e-3, 50, 30)
    for loss in lsq.LOSSES:
        r0, r1, r2 = lsq.rho(z, loss)
        eps = 1e-6 * z
        up, down = lsq.rho(z + eps, loss)[0], lsq.rho(z - eps, loss)[0]
        assert np.allclose((up - down) / (2 * eps), r1, rtol=1e-4)
        up1, down1 = lsq.rho(z + eps, loss)[1], lsq.rho(z - eps, loss)[1]
        assert np.allclose((up1 - down1) / (2 * eps), r2, rtol=1e-3, atol=1e-9)
    with pytest.raises(ValueError, match="loss="):
        fit_series(_series(make_sweep_doc("chip", shapes=MIXED, **TRUTH)), loss="l3")


def test_fits_are_cached_by_content() -> None:
    series = _series(make_sweep_doc("chip", shapes=MIXED, noise=0.03, **TRUTH))
    again = _series(make_sweep_doc("chip", shapes=MIXED, noise=0.03, **TRUTH))
    first = fit_series(series, n_boot=10)
    assert fit_series(again, n_boot=10) is first  # equal content, another object
    assert fit_series(series, n_boot=10, seed=1) is not first
    assert fit_series(series, n_boot=10, cache=False) is not first
    other = _series(make_sweep_doc("chip", shapes=MIXED, noise=0.03, seed=4, **TRUTH))
    assert fit_series(other, n_boot=10) is not first
    assert not first.boot.flags.writeable


def test_predict_time_draws_are_one_row_per_resample() -> None:
    fit = fit_series(_series(make_sweep_doc("chip", shapes=MIXED, noise=0.03, **TRUTH)), n_boot=7)
    f, b = np.array([1e9, 1e11, 1e13]), np.array([1e6, 1e8, 1e9])
    draws = fit.predict_time_draws(f, b)
    assert draws.shape == (7, 3)
    assert np.allclose(draws[3], np.exp(log_time(fit.boot[3], np.log(f), np.log(b))))


# -- physical fits: known truth -------------------------------------------------------------------------------


def _w_drawn(fit) -> bool:
    return fit.w_status == "roof" and fit.constrained["w_tbs"]


def test_overhead_only_truth_draws_no_memory_roof() -> None:
    def overhead_only(f: float, b: float) -> float:
        return 20e-6 + f / 100e12

    for shapes in (None, MIXED):  # square family and mixed shapes, no spec bandwidth
        fit = fit_series(_series(make_sweep_doc("ovh", shapes=shapes, time_fn=overhead_only, noise=0.02,
                                                bandwidth_tbs=0, **TRUTH)), n_boot=20)
        assert not _w_drawn(fit)
        assert fit.t0_s == pytest.approx(20e-6, rel=0.05) and fit.constrained["t0_s"]
        assert fit.p_tflops == pytest.approx(100, rel=0.05)


def test_bandwidth_only_truth_recovers_w_from_shapes_that_vary_bytes() -> None:
    def bandwidth_only(f: float, b: float) -> float:
        return max(f / 500e12, b / 2e12)

    fit = fit_series(_series(make_sweep_doc("bw", shapes=MIXED, time_fn=bandwidth_only, noise=0.02,
                                            bandwidth_tbs=0, **TRUTH)), n_boot=20)
    assert _w_drawn(fit) and fit.w_tbs == pytest.approx(2.0, rel=0.05)
    assert fit.p_tflops == pytest.approx(500, rel=0.05)
    assert not fit.constrained["t0_s"]


def test_both_terms_on_square_shapes_are_confounded_without_a_bandwidth_to_check_against() -> None:
    truth = {"P_tflops": 500.0, "W_tbs": 0.5, "t0_s": 2e-6}
    square = _series(make_sweep_doc("sq", noise=0.02, bandwidth_tbs=0, **truth))
    fit = fit_series(square, n_boot=20)
    assert fit.w_status == "confounded"
    assert fit.constrained == {"t0_s": False, "p_tflops": True, "w_tbs": False}
    assert any("confounded by these shapes" in n and "FLOPs^0.67" in n for n in fit.notes)
    assert not any("is not constrained" in n for n in fit.notes)  # one reason, not two
    # the same truth with a spec bandwidth that the fitted W agrees with: a roof again
    spec = fit_series(_series(make_sweep_doc("sq", noise=0.02, bandwidth_tbs=0.55, **truth)), n_boot=20)
    assert _w_drawn(spec) and spec.w_tbs == pytest.approx(0.5, rel=0.1)
    assert any("kept as a roof" in n for n in spec.notes)
    # and on shapes that vary bytes at equal FLOPs, the shapes alone settle it
    mixed = fit_series(_series(make_sweep_doc("mx", shapes=MIXED, noise=0.02, bandwidth_tbs=0, **truth)), n_boot=20)
    assert _w_drawn(mixed) and mixed.t0_s == pytest.approx(2e-6, rel=0.1)


def test_measured_copy_bandwidth_bounds_an_implausible_w() -> None:
    # square shapes whose small-shape time grows like F^(2/3), as a 3 GB/s "memory" would make it,
    # on a device whose copy bandwidth was measured at 32 GB/s: the free fit's W is not a roof
    truth = {"P_tflops": 0.12, "W_tbs": 0.003, "t0_s": 5e-6}
    doc = make_sweep_doc("cpu", flops=np.geomspace(5e5, 2e10, 14), noise=0.02, bandwidth_tbs=0, **truth)
    free = fit_series(_series(doc), n_boot=20)
    assert free.w_status == "confounded"
    doc["ceilings"] = {"ceilings_version": 1, "memory_bandwidth": {"gbs": 32.0}}
    [fit] = fit_all(parse_document(doc), n_boot=20).values()
    # bounded to at least half the copy bandwidth, no shape is memory-bound any more: the overhead explains them
    assert fit.w_status == "not constrained" and not fit.constrained["w_tbs"]
    assert fit.constrained["t0_s"] and fit.t0_s > free.t0_s
    assert fit.bandwidth_range.copy_tbs == pytest.approx(0.032)
    assert fit.w_tbs >= 0.016 * (1 - 1e-9)  # half the copy bandwidth: the plausible floor
    assert fit.w_free_tbs == pytest.approx(0.003, rel=0.2)
    assert any("unbounded fit puts W at" in n and "[16, 35.2] GB/s" in n for n in fit.notes)
    data = fit.to_json()
    assert data["w_status"] == "not constrained" and data["bandwidth_range"]["copy_tbs"] == pytest.approx(0.032)


def test_w_above_spec_is_bounded_by_the_spec() -> None:
    # operands served from cache: the data ask for 3x the spec bandwidth
    fit = fit_series(_series(make_sweep_doc("hot", shapes=MIXED, noise=0.02, bandwidth_tbs=0.7, **TRUTH)),
                     n_boot=20)
    assert fit.w_status == "at bound" and fit.w_tbs == pytest.approx(0.77, rel=0.03)
    assert any("upper end" in n for n in fit.notes)


# -- coverage of the known truth under run-to-run noise ------------------------------------------------------


def _coverage(model, repeats: int, seeds: int, n_boot: int = 100) -> dict[str, float]:
    from synthetic import make_sweep_doc as doc

    truth = {"p_tflops": 600.0, "w_tbs": 2.0, "t0_s": 2e-6}
    hits = {k: 0 for k in truth}
    for s in range(seeds):
        series = _series(doc("chip", flops=list(np.geomspace(1e6, 1e13, 24)), seed=100 + s, noise_model=model,
                             repeats=repeats, n_samples=10, P_tflops=600.0, W_tbs=2.0, t0_s=2e-6))
        fit = fit_series(series, n_boot=n_boot, seed=s, cache=False)
        assert all(fit.constrained.values())
        for k, value in truth.items():
            lo, hi = getattr(fit, k + "_ci")
            hits[k] += lo <= value <= hi
    return {k: v / seeds for k, v in hits.items()}


def test_intervals_cover_the_truth_under_pass_level_offsets() -> None:
    # SYNTHETIC: 1% sample noise, a 1% shift per (pass, shape) and a 1% shift of every shape of a pass, 3
    # shuffled passes. A bootstrap of shapes and samples alone cannot see the pass offset (it is common to
    # all shapes), and its "95%" intervals of P, W and t0 cover the truth in well under half of the fits.
    # 40 fits per parameter: with a true coverage of 95% (90%), 9 or more misses have probability 1.4e-4
    # (0.04), so requiring at least 32 of 40 (80%) fails only a method that under-covers.
    from synthetic import NoiseModel

    model = NoiseModel("per-pass 1%", sample=0.01, shape_shift=0.01, pass_shift=0.01)
    cover = _coverage(model, repeats=3, seeds=40)
    assert min(cover.values()) >= 0.8, cover


def test_one_pass_intervals_are_unchanged_by_the_pass_offset_term() -> None:
    # files without passes (and single-pass sweeps) have no pass offset to add: the same draws as always
    from mfu_sweep.analysis.fits.roofline import pass_shifts, shape_data

    series = _series(make_sweep_doc("chip", shapes=MIXED, noise=0.03, **TRUTH))
    data = shape_data(series)
    assert data.n_passes == 1 and not pass_shifts(data, 50, 0).any()


def test_fits_in_lockstep_equal_fits_one_by_one() -> None:
    """fit_groups stacks the solver calls of many series (fits/batch.py); every fit must come out as alone.

    The same iterations on the same numbers, up to rounding (a stacked row sits at another memory
    alignment, which changes the order of SIMD sums in the last bit). Mixed on purpose: two shape
    counts (stacked only with their own kind), a knee (pnorm wins, 4 parameters), a bandwidth bound
    from the spec (per-row bounds) and a series with no spec bandwidth; two workers and chunks of 3.
    """
    from mfu_sweep.analysis.fits.fit import fit_groups

    def knee(f: float, b: float) -> float:
        return 5e-6 + math.hypot(f / 500e12, b / 2e12)

    docs = [make_sweep_doc(f"d{i}", shapes=MIXED[: 12 - 3 * (i % 2)], noise=0.03, seed=i,
                           bandwidth_tbs=[None, 0, 1.0][i % 3], time_fn=knee if i == 4 else None, **TRUTH)
            for i in range(7)]
    series = group_series([s for d in docs for s in parse_document(d)])
    together, skipped = fit_groups(series, n_boot=30, seed=3, cache=False, workers=2, chunk=3)
    assert not skipped and {f.model for f in together.values()} == {"max", "pnorm"}
    assert any(f.bandwidth_range for f in together.values()) and not all(f.bandwidth_range for f in together.values())
    for key, s in series.items():
        alone, fit = fit_series(s, n_boot=30, seed=3, cache=False).to_json(), together[key].to_json()
        assert fit.keys() == alone.keys()
        for name, value in alone.items():
            numeric = isinstance(value, float) or (isinstance(value, list) and all(isinstance(v, float) for v in value))
            assert fit[name] == (pytest.approx(value, rel=1e-9) if numeric and value else value), name
        assert np.allclose(together[key].boot, fit_series(s, n_boot=30, seed=3, cache=False).boot, rtol=1e-9)
