"""Step prediction from sweeps. Every sweep here is SYNTHETIC (tests/synthetic.py): made-up times, except the
real short CPU sweep of tests/data/short-sweep/."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from synthetic import make_sweep_doc, roofline_time, write_sweep

from mfu_sweep.analysis.steps.gemm_sum import PredictError, predict_step
from mfu_sweep.cli import main
from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.workloads import resolve_family, sweep_shapes
from mfu_sweep.records.results import load_sweeps, parse_document

FAMILY = "llm:llama-3-8b:tokens=256"
PEAK = 100.0  # SYNTHETIC peak TFLOP/s
DATA = Path(__file__).parent / "data"


def known_time(flops: float, nbytes: float) -> float:
    """SYNTHETIC seconds per call: a made-up, exactly known function of the shape."""
    return 1e-6 + flops / 50e12 + nbytes / 1e12


def synthetic_doc(label: str, scale: float = 1.0, drop: int = 0, **kw) -> dict:
    shapes = [s for s, _ in sweep_shapes(FAMILY)][drop:]
    return make_sweep_doc(label, P_tflops=50, W_tbs=1, t0_s=1e-6, shapes=shapes, noise=0.0, n_samples=3,
                          peak_tflops=PEAK, time_fn=lambda f, b: scale * known_time(f, b), **kw)


def expected_step(scale: float = 1.0) -> float:
    bf16 = get_dtype("bf16")
    return math.fsum(g.count * scale * known_time(g.shape.flops, g.shape.bytes(bf16)) for g in resolve_family(FAMILY))


def test_step_time_is_the_exact_sum_side_by_side() -> None:
    sweeps = parse_document(synthetic_doc("synthetic-a")) + parse_document(synthetic_doc("synthetic-b", scale=2.0))
    gemms = resolve_family(FAMILY)
    a, b = predict_step(sweeps, gemms, dtype="bf16", mode="eager", use_fit=False)
    assert (a.label, b.label) == ("synthetic-a", "synthetic-b")
    assert a.complete and a.shapes("measured") == 19 and not a.warnings  # 14 m, n, k in their layouts
    assert a.step_s == pytest.approx(expected_step(), rel=1e-12)
    assert b.step_s == pytest.approx(expected_step(2.0), rel=1e-12)
    flops = math.fsum(g.count * g.shape.flops for g in gemms)
    assert a.flops == pytest.approx(flops, rel=1e-12)
    assert a.mfu == pytest.approx(flops / expected_step() / (PEAK * 1e12), rel=1e-12)
    assert math.fsum(p.seconds for p in a.by_role()) == pytest.approx(a.step_s, rel=1e-12)
    assert [p.key for p in a.by_pass()] == ["fwd", "dgrad", "wgrad"]
    assert math.fsum(p.seconds for p in a.by_pass()) == pytest.approx(a.step_s, rel=1e-12)


def test_unmeasured_shapes_without_a_fit_make_the_step_incomplete() -> None:
    sweeps = parse_document(synthetic_doc("synthetic-a", drop=2))
    [p] = predict_step(sweeps, resolve_family(FAMILY), use_fit=False)
    assert not p.complete and p.shapes("missing") == 2 and p.shapes("measured") == 17
    assert "2 of 19 shapes not measured and no roofline fit" in p.warnings[0]
    assert p.step_s < expected_step()   # the partial sum covers only the measured shapes


def test_unmeasured_shapes_fall_back_to_the_roofline_fit() -> None:
    pytest.importorskip("mfu_sweep.analysis.fits.fit")
    # SYNTHETIC series on a plain roofline, with two shapes inside the measured range left out
    shapes = sorted((s for s, _ in sweep_shapes(FAMILY)), key=lambda s: s.flops)
    doc = make_sweep_doc("synthetic-roof", P_tflops=50, W_tbs=1, t0_s=5e-6, shapes=shapes[:5] + shapes[7:],
                         noise=0.0, n_samples=3, peak_tflops=PEAK)
    [p] = predict_step(parse_document(doc), resolve_family(FAMILY))
    fitted = [t for t in p.items if t.source == "fitted"]
    assert p.complete and p.shapes("fitted") == 2 and "fitted roofline" in p.warnings[0]
    bf16 = get_dtype("bf16")
    for t in fitted:
        truth = roofline_time(t.gemm.shape.flops, t.gemm.shape.bytes(bf16), 50, 1, 5e-6)
        assert t.seconds == pytest.approx(truth, rel=0.2)


def test_no_records_for_the_dtype_is_an_error() -> None:
    sweeps = parse_document(synthetic_doc("synthetic-a"))
    with pytest.raises(PredictError, match="no finished records for dtype fp32, mode eager.*bf16/eager"):
        predict_step(sweeps, resolve_family(FAMILY), dtype="fp32")


def test_predict_command(tmp_path) -> None:
    a = write_sweep(tmp_path, synthetic_doc("synthetic-a"))
    b = write_sweep(tmp_path, synthetic_doc("synthetic-b", scale=2.0))
    runner = CliRunner()
    out = runner.invoke(main, ["predict", str(a), str(b), "--model", "llama-3-8b", "--tokens", "256"])
    assert out.exit_code == 0, out.output
    assert "synthetic-a" in out.output and "synthetic-b" in out.output
    assert "time by role" in out.output and "not included" in out.output and "communication" in out.output
    data = json.loads(runner.invoke(main, ["predict", str(a), "--model", "llama-3-8b:tokens=256", "--json"]).output)
    [pred] = data["predictions"]
    assert data["family"] == FAMILY and pred["step_s"] == pytest.approx(expected_step(), rel=1e-12)


def test_predict_command_refuses_incomplete_series(tmp_path) -> None:
    path = write_sweep(tmp_path, synthetic_doc("synthetic-a", drop=1))
    args = ["predict", str(path), "--model", "llama-3-8b", "--tokens", "256", "--no-fit"]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 1 and "incomplete" in out.output
    assert "Error: no series measured every shape of llm:llama-3-8b:tokens=256" in out.output
    partial = CliRunner().invoke(main, [*args, "--allow-partial"])
    assert partial.exit_code == 0 and "(partial)" in partial.output


@pytest.mark.parametrize(("extra", "fragment"), [
    (["--model", "llama-3-9b"], "unknown model 'llama-3-9b'"),
    (["--model", "grid:8:8:8", "--tokens", "64"], "apply to llm: families"),
    (["--model", "llama-3-8b", "--dtype", "fp16"], "no finished records for dtype fp16"),
])
def test_predict_bad_input_is_one_line(tmp_path, extra: list[str], fragment: str) -> None:
    path = write_sweep(tmp_path, synthetic_doc("synthetic-a"))
    out = CliRunner().invoke(main, ["predict", str(path), *extra])
    assert out.exit_code == 1 and "Traceback" not in out.output
    assert fragment in out.output and len(out.output.strip().splitlines()) == 1


def test_a_repeats_sweep_gives_each_shape_the_median_of_its_passes() -> None:
    """Before, the last record of a shape won: with shuffled passes, an arbitrary pass."""
    from synthetic import NOISE_MODELS

    from mfu_sweep.analysis.ground.series import shape_seconds
    from mfu_sweep.analysis.steps.gemm_sum import measured_medians

    doc = make_sweep_doc("chip", P_tflops=50, W_tbs=1, t0_s=1e-6, flops=[1e8, 1e9, 1e10], n_samples=3,
                         noise_model=NOISE_MODELS["per-shape 5%"], repeats=5)
    (sweep,) = parse_document(doc)
    got = measured_medians([sweep], "bf16", "eager")["chip"]
    for shape, seconds in got.items():
        passes = sorted(float(r.median_s) for r in sweep.records if r.shape == shape)
        assert len(passes) == 5 and seconds == passes[2] == shape_seconds(
            [r for r in sweep.records if r.shape == shape])
    assert len(got) == 3


def test_the_fit_does_not_stand_in_where_the_time_depends_on_an_unconstrained_parameter() -> None:
    pytest.importorskip("mfu_sweep.analysis.fits.fit")
    # SYNTHETIC: the two smallest shapes left out; every measured shape is so large that the overhead t0
    # sets under 20% of its time (t0 not constrained), while at the left-out shapes it sets about a third
    shapes = sorted((s for s, _ in sweep_shapes(FAMILY)), key=lambda s: s.flops)
    doc = make_sweep_doc("synthetic-roof", P_tflops=50, W_tbs=1, t0_s=5e-6, shapes=shapes[2:], noise=0.0,
                         n_samples=3, peak_tflops=PEAK)
    [p] = predict_step(parse_document(doc), resolve_family(FAMILY))
    assert not p.complete and p.shapes("missing") == 2 and p.shapes("fitted") == 0
    assert "does not stand in for 2 of 19" in p.warnings[0] and "overhead t0" in p.warnings[0]


def test_a_fit_that_constrains_nothing_is_never_used() -> None:
    # real output of a 4-shape CPU sweep (tests/data/short-sweep/README.md): its fit pins down no parameter
    sweeps = load_sweeps([DATA / "short-sweep" / "cpu-4-shapes.json"])
    [p] = predict_step(sweeps, resolve_family("llm:qwen3-32b:tokens=8192"), dtype="fp32")
    assert p.shapes("fitted") == 0 and p.step_s is None
    assert "pin down none of P, W and t0" in p.warnings[0]
    result = CliRunner().invoke(main, ["predict", str(DATA / "short-sweep" / "cpu-4-shapes.json"), "--model",
                                       "qwen3-32b", "--tokens", "8192", "--dtype", "fp32"])
    assert result.exit_code == 1 and "pin down none of P, W and t0" in result.output
    assert "Traceback" not in result.output
