"""Roofline fits on SYNTHETIC sweeps (tests/synthetic.py): known truth in, estimates out."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from synthetic import make_sweep_doc, roofline_time

from mfu_sweep.analysis.fit import fit_all, fit_series, log_time, log_time_jac, why_unfittable
from mfu_sweep.analysis.series import SeriesError, SeriesKey, group_series
from mfu_sweep.results import parse_document

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
    assert "only 3 distinct shape(s)" in why_unfittable(series)
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
    code = ("import sys, mfu_sweep.analysis.fit, mfu_sweep.analysis.compare, mfu_sweep.present.export, "
            "mfu_sweep.analysis.merge, mfu_sweep.analysis.series; "
            "bad = [m for m in ('matplotlib', 'torch') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
