"""Comparisons of SYNTHETIC series (tests/synthetic.py): planted crossovers, noise, nulls, the CLI."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from synthetic import NOISE_MODELS, example_pair, make_sweep_doc, roofline_time, write_sweep

from mfu_sweep.analysis.ground.series import group_series
from mfu_sweep.analysis.verdicts.compare import CompareError, compare_all, compare_series, format_flops, holm
from mfu_sweep.analysis.verdicts.evidence import ONE_PASS_LIMIT
from mfu_sweep.analysis.verdicts.evidence import apply_min_run as _apply_min_run
from mfu_sweep.cli import main
from mfu_sweep.records.results import parse_document

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("MFU_SWEEP_REGEN_GOLDEN") == "1"
FLOPS = [float(f) for f in np.geomspace(1e8, 1e13, 24)]
FAST = {"fit_n_boot": 30}
# SYNTHETIC run-to-run noise: 2% per-shape shifts per pass, 3 shuffled passes (tests/synthetic.py)
PASSES = {"noise_model": NOISE_MODELS["per-shape 2%"], "repeats": 3}


def _sweeps(*docs: dict) -> list:
    return [s for d in docs for s in parse_document(d)]


def _true_crossings(fa: Any, fb: Any) -> list[float]:
    """FLOPs where two true time curves (square bf16 shapes) cross, by bisection on a fine grid."""
    s = np.geomspace(100, 30000, 20000)
    f, b = 2 * s**3, 6 * s**2
    d = np.log([fa(x, y) for x, y in zip(f, b, strict=True)]) - np.log([fb(x, y) for x, y in zip(f, b, strict=True)])
    idx = np.nonzero(np.sign(d[:-1]) != np.sign(d[1:]))[0]
    return [float(f[i]) for i in idx]


def test_lead_lose_regain_from_two_rooflines() -> None:
    # A: low overhead, poor bandwidth, high ceiling; B: the opposite. A leads, loses, regains.
    pa, pb = {"P_tflops": 1000, "W_tbs": 0.5, "t0_s": 5e-6}, {"P_tflops": 500, "W_tbs": 8, "t0_s": 10e-6}
    docs = (make_sweep_doc("A", flops=FLOPS, seed=1, peak_tflops=1000, **pa, **PASSES),
            make_sweep_doc("B", flops=FLOPS, seed=2, peak_tflops=1000, **pb, **PASSES))
    [c] = compare_all(_sweeps(*docs), "tflops", **FAST)
    truth = _true_crossings(lambda f, b: roofline_time(f, b, **pa), lambda f, b: roofline_time(f, b, **pb))
    assert len(truth) == 2
    assert (c.method, c.passes) == ("runs", (3, 3))
    assert [s.leader for s in c.segments if s.leader] == ["A", "B", "A"]  # ambiguous only where ratio ~ 1
    # one line per change of leader (issue 48): the fits' crossing of each change is merged into the data's
    assert [(x.from_label, x.to_label, x.method) for x in c.crossovers] == [("A", "B", "runs"), ("B", "A", "runs")]
    for x, t in zip(c.crossovers, truth, strict=True):
        (fit,) = x.fits
        for flops, low, high in ((x.flops, x.low_flops, x.high_flops), fit):
            assert low <= flops <= high
            assert abs(math.log10(flops / t)) < 0.15, (x, t)
            assert low / 1.5 <= t <= high * 1.5
    assert not any("disagree" in n for n in c.notes)
    assert c.sentence().startswith("A vs B (bf16, eager, TFLOP/s): A leads from 100 MFLOP to")


def test_three_crossovers_found_in_order() -> None:
    def wobble(f: float, b: float) -> float:  # A times a +-12% wave: crossings at 10^9.25, 10^10.5, 10^11.75
        return roofline_time(f, b, 600, 2.0, 8e-6) * math.exp(0.12 * math.sin(math.pi * (math.log10(f) - 8) / 1.25))

    base = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6, "flops": FLOPS, **PASSES}
    docs = make_sweep_doc("A", seed=3, **base), make_sweep_doc("B", seed=4, time_fn=wobble, **base)
    # margin 0 (pure difference test): the B lead between the first two crossings peaks at 12% in bands of
    # 2-3 shapes, 5.5% in one of them; with the default 2% margin that band is ambiguous, not a lead
    [c] = compare_all(_sweeps(*docs), "tflops", use_fit=False, margin=0.0)
    data = [x for x in c.crossovers if x.method == "runs"]
    assert [(x.from_label, x.to_label) for x in data] == [("A", "B"), ("B", "A"), ("A", "B")]
    for x, exponent in zip(data, (9.25, 10.5, 11.75), strict=True):
        assert abs(math.log10(x.flops) - exponent) < 0.2
        assert x.low_flops <= 10**exponent <= x.high_flops
    leaders = [s.leader for s in c.segments if s.leader]
    assert leaders == ["A", "B", "A", "B"]


def test_too_noisy_to_tell_is_ambiguous_not_a_crossover() -> None:
    a = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6}
    b = {"P_tflops": 630, "W_tbs": 2.0, "t0_s": 8.4e-6}  # true crossover near 5 GFLOP, effects <= 5%
    for seed in (0, 1):
        docs = (make_sweep_doc("A", flops=FLOPS, seed=2 * seed, noise=0.5, n_samples=5, **a),
                make_sweep_doc("B", flops=FLOPS, seed=2 * seed + 1, noise=0.5, n_samples=5, **b))
        [c] = compare_all(_sweeps(*docs), "tflops", fit_n_boot=20)
        assert c.crossovers == ()
        assert [s.leader for s in c.segments] == [None]
        assert "ambiguous throughout" in c.sentence()


@pytest.mark.parametrize(("seed", "noise", "repeats"),
                         [(0, "per-sample", 1), (1, "per-shape 2%", 1), (2, "per-shape 5%", 1), (3, "outliers", 1),
                          (4, "per-shape 2%", 3), (5, "drift", 3), (6, "outliers", 3), (7, "per-shape 5%", 2)])
def test_same_distribution_never_gives_a_crossover(seed: int, noise: str, repeats: int) -> None:
    """SYNTHETIC identical chips under per-sample, per-shape, drift and outlier noise (issue 12)."""
    truth = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6, "flops": FLOPS, "noise_model": NOISE_MODELS[noise],
             "repeats": repeats}
    # a false lead is an alpha = 5% event per pair (its rate over many seeds: tests/test_bands.py); a
    # crossover needs two opposite false leads, far rarer: none in 8 seeds per noise model (the first with
    # the fits, the others on the data alone)
    for k in range(8):
        docs = (make_sweep_doc("A", seed=300 + seed + 10 * k, **truth),
                make_sweep_doc("B", seed=400 + seed + 10 * k, **truth))
        [c] = compare_all(_sweeps(*docs), **FAST) if k == 0 else compare_all(_sweeps(*docs), use_fit=False)
        assert [x for x in c.crossovers if x.method != "fit"] == [], k
        assert len({s.leader for s in c.segments if s.leader}) <= 1, k
        assert c.method == ("runs" if repeats >= 2 else "shapes")


def test_identical_chips_rarely_get_a_fit_crossover() -> None:
    """SYNTHETIC identical chips (2% per-shape noise, 3 shuffled passes, 24 FLOP counts), 12 seeds: the fit
    crossovers (``method == "fit"``: where the two fitted rooflines' simultaneous 1 - alpha band changes
    leader). A crossover needs the fitted difference to leave the band on both sides, so identical chips get
    one in 1 of 142 seeds when written (0 of these 12; 30 bootstrap refits each). With the band's critical
    value at the alpha quantile of the bootstrap's max |t| (a band that holds 5% of the curves), 105 of 190
    seeds (9 of these 12). At most 1 of 12: the slip passes with probability 0.001."""
    truth = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6, "flops": FLOPS, **PASSES}
    with_fit = 0
    for k in range(12):
        docs = make_sweep_doc("A", seed=6000 + 2 * k, **truth), make_sweep_doc("B", seed=6001 + 2 * k, **truth)
        [c] = compare_all(_sweeps(*docs), **FAST)
        with_fit += any(x.method == "fit" for x in c.crossovers)
    assert with_fit <= 1, with_fit


def test_unmatched_shapes_are_compared_with_the_other_sides_prediction_at_that_shape() -> None:
    # SYNTHETIC: B measured every shape 3% larger in FLOPs than A's (no shape in common). Every point is one
    # side's measured shape against the other side's prediction at that very shape (model-based), each shape
    # measured once, the bands say how many points of each kind they rest on, and the crossovers are still
    # found. Square shapes against skinny ones (no square shape near a skinny one): nothing can be predicted
    # without extrapolating, and one error says why and what to sweep.
    pa, pb = {"P_tflops": 1000, "W_tbs": 0.5, "t0_s": 5e-6}, {"P_tflops": 500, "W_tbs": 8, "t0_s": 10e-6}
    docs = (make_sweep_doc("A", flops=FLOPS, seed=1, **pa, **PASSES),
            make_sweep_doc("B", flops=[f * 1.03 for f in FLOPS], seed=2, **pb, **PASSES))
    [c] = compare_all(_sweeps(*docs), "tflops", use_fit=False)
    assert {p.method for p in c.points} == {"model"} and {p.interpolated for p in c.points} == {"A", "B"}
    assert len({p.shape for p in c.points}) == len(c.points)
    for band in c.bands:
        assert band.matched == 0 and band.split.matched == 0 and band.split.weight_matched == 0
        assert band.shapes_a <= band.measured_a and band.shapes_b <= band.measured_b
        assert band.to_json("A", "B")["evidence_split"]["model_based"] == band.n
    assert [(x.from_label, x.to_label) for x in c.crossovers] == [("A", "B"), ("B", "A")]
    skinny = [f"{s}x{s}x{64}" for s in (256, 512, 1024, 2048, 4096, 8192)]
    far = (make_sweep_doc("A", flops=FLOPS, seed=1, **pa, **PASSES),
           make_sweep_doc("B", shapes=skinny, seed=2, **pb, **PASSES))
    with pytest.raises(CompareError, match="no shape was measured by both.*sweep the same shapes"):
        compare_all(_sweeps(*far), "tflops", use_fit=False)


def test_mfu_uses_each_chips_own_peak() -> None:
    same = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6, "flops": FLOPS[::3], "noise": 0.01}
    docs = make_sweep_doc("A", seed=1, peak_tflops=700, **same), make_sweep_doc("B", seed=2, peak_tflops=1400, **same)
    [c] = compare_all(_sweeps(*docs), "mfu", use_fit=False)
    assert [s.leader for s in c.segments] == ["A"]  # same speed, half the peak: twice the MFU
    assert c.segments[0].ratio == pytest.approx(2.0, rel=0.02)
    assert "MFU +" in c.sentence() and "x2.00" in c.sentence()
    [t] = compare_all(_sweeps(*docs), "tflops", use_fit=False)
    assert [s.leader for s in t.segments] == [None]


def test_missing_peak_requires_tflops() -> None:
    base = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6, "flops": FLOPS[::3]}
    docs = make_sweep_doc("A", peak_tflops=0, **base), make_sweep_doc("B", seed=1, **base)
    with pytest.raises(CompareError, match="has no peak for bf16.*--metric tflops"):
        compare_all(_sweeps(*docs), "mfu", use_fit=False)
    [c] = compare_all(_sweeps(*docs), "tflops", use_fit=False)
    assert (c.a, c.b, c.metric, c.method) == ("A", "B", "tflops", "shapes")
    assert [s.leader for s in c.segments] == [None]  # the same chip twice: TFLOP/s needs no peak, and ties
    assert len(c.points) == len(base["flops"])
    assert sum(p.ratio_low <= 1 <= p.ratio_high for p in c.points) >= len(c.points) - 1  # 95% intervals
    assert ONE_PASS_LIMIT in c.notes


def test_pair_selection_and_errors() -> None:
    base = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6, "flops": FLOPS[::4], "n_samples": 5}
    sweeps = _sweeps(make_sweep_doc("x", **base), make_sweep_doc("y", seed=1, **base),
                     make_sweep_doc("z", seed=2, **base), make_sweep_doc("w", seed=3, dtype="fp32", **base))
    kw = {"use_fit": False}
    assert [(c.a, c.b) for c in compare_all(sweeps, **kw)] == [("x", "y"), ("x", "z"), ("y", "z")]
    assert [(c.a, c.b) for c in compare_all(sweeps, a="z", **kw)] == [("z", "x"), ("z", "y")]
    assert [(c.a, c.b) for c in compare_all(sweeps, a="y", b="x", **kw)] == [("y", "x")]
    with pytest.raises(CompareError, match="no series labelled 'nope'"):
        compare_all(sweeps, a="nope", **kw)
    with pytest.raises(CompareError, match="'x' \\(bf16 eager\\) and 'w' \\(fp32 eager\\) share no dtype"):
        compare_all(sweeps, a="x", b="w", **kw)
    series = group_series(sweeps)
    x = next(s for k, s in series.items() if k.label == "x")
    w = next(s for k, s in series.items() if k.label == "w")
    with pytest.raises(CompareError, match="dtype and mode must match"):
        compare_series(x, w, "tflops")


def test_result_does_not_depend_on_input_order() -> None:
    a, b = example_pair()
    one = [c.to_json() for c in compare_all(_sweeps(a, b), **FAST)]
    two = [c.to_json() for c in compare_all(_sweeps(b, a), **FAST)]
    assert one == two


def test_holm_and_flop_formatting() -> None:
    assert holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]).tolist() == [0.5]
    assert format_flops(1.1e9) == "1.1 GFLOP" and format_flops(96e9) == "96 GFLOP"
    assert format_flops(1.2e12) == "1.2 TFLOP" and format_flops(999.9e9) == "1 TFLOP"
    assert format_flops(120e6) == "120 MFLOP"


# -- golden file and CLI --------------------------------------------------------------


def _approx_equal(got: Any, want: Any, where: str = "") -> None:
    if isinstance(want, float) or isinstance(got, float):
        assert got == pytest.approx(want, rel=1e-6, abs=1e-12), where
    elif isinstance(want, dict):
        assert sorted(got) == sorted(want), where
        for k in want:
            _approx_equal(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list):
        assert len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _approx_equal(g, w, f"{where}[{i}]")
    else:
        assert got == want, where


# The verdicts of the golden pair, reviewed by hand. Regenerating the golden file (MFU_SWEEP_REGEN_GOLDEN=1,
# docs/statistics-calibration.md "Golden files") rewrites numbers only: it fails, and writes nothing, when the
# new output changes a verdict, so a changed verdict needs an edit here, seen in review.
# Verdicts are per FLOP band (mfu_sweep.analysis.verdicts.bands): nine shapes measured once are one band, where a
# signed-rank test cannot resolve chip-a's 5% lead below 5 GFLOP from chip-b's above it; only the fit
# finds that crossover. Changed deliberately with the band method, not by regeneration. Eight points, not
# nine: the ninth was a value read off chip-a's curve at a shape only chip-b measured, and interpolated values
# are no longer points (only shapes measured on both sides, or paired by FLOPs, are evidence).
GOLDEN_VERDICTS = {  # the fits cross, the data (one band of nine points) do not: no crossover (issue 35)
    "method": "shapes",
    "segments": [None],
    "crossovers": [],
    "unsupported": [("chip-a", "chip-b", "fit")],
    "points": [None] * 9,
}


def _verdicts(doc: dict) -> dict:
    [c] = doc["comparisons"]
    return {"method": c["method"], "segments": [s["leader"] for s in c["segments"]],
            "crossovers": [(x["from"], x["to"], x["method"]) for x in c["crossovers"]],
            "unsupported": [(x["from"], x["to"], x["method"]) for x in c.get("unsupported_fit_crossings", [])],
            "points": [p["leader"] for p in c["points"]]}


def test_compare_json_golden(tmp_path: Path) -> None:
    paths = [str(write_sweep(tmp_path, d)) for d in example_pair()]
    res = CliRunner().invoke(main, ["compare", *paths, "--json", "--fit-n-boot", "20"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    assert _verdicts(got) == GOLDEN_VERDICTS  # before any regeneration: a regenerated file cannot move a verdict
    golden = GOLDEN / "compare_example_pair.json"
    if REGEN:
        golden.write_text(json.dumps(got, indent=1) + "\n")
    want = json.loads(golden.read_text())
    assert _verdicts(want) == GOLDEN_VERDICTS  # a hand-edited golden file is held to the same verdicts
    _approx_equal(got, want)
    [c] = got["comparisons"]
    assert {"a", "b", "dtype", "mode", "metric", "segments", "crossovers"} <= set(c)
    assert {"start_flops", "end_flops", "leader", "ratio"} <= set(c["segments"][0])
    assert {"flops", "low_flops", "high_flops", "from", "to", "method", "reason"} <= set(
        c["unsupported_fit_crossings"][0])
    assert {"matched", "model_based", "weight_matched"} <= set(c["bands"][0]["evidence_split"])


def test_compare_human_output(tmp_path: Path) -> None:
    paths = [str(write_sweep(tmp_path, d)) for d in example_pair()]
    res = CliRunner().invoke(main, ["compare", *paths, "--no-fit", "--metric", "tflops"])
    assert res.exit_code == 0, res.output
    # eight shapes both measured, one value each: one band (the signed-rank test needs ~10 shapes), and a 5%
    # lead either side of 5 GFLOP is not enough for it; the per-shape table stays as detail. chip-b's ninth
    # shape lies among chip-a's: compared with chip-a's prediction there (model-based, with its share of the
    # band's evidence); its tenth lies beyond chip-a's largest shape and is left out (no extrapolation).
    assert "interp" not in res.output
    assert ("band 32 MFLOP-320 GFLOP: 9 points (8 matched shapes, 1 model-based; measured in the band: 8 of "
            "chip-a, 9 of chip-b)") in res.output
    assert "decided by 8 matched shapes; 1 model-based beside" in res.output and "left out: 1 of chip-b" in res.output
    assert "[method shapes; run-to-run variation not measured]." in res.output
    assert res.output.rstrip().splitlines()[-1].startswith(
        "chip-a vs chip-b (bf16, eager, TFLOP/s): no confident leader from 100 MFLOP to 320 GFLOP (neither is "
        "clearly faster;")


def _one_line_error(args: list[str], needle: str) -> None:
    res = CliRunner().invoke(main, args)
    assert res.exit_code != 0
    assert "Traceback" not in res.output and isinstance(res.exception, SystemExit), res.output
    assert res.output.strip().count("\n") == 0, res.output
    assert needle in res.output, res.output


def test_cli_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("")
    future = tmp_path / "future.json"
    future.write_text(json.dumps({"schema_version": 7, "kind": "sweep"}))
    base = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6, "flops": FLOPS[::4], "n_samples": 5}
    x = str(write_sweep(tmp_path, make_sweep_doc("x", **base)))
    w = str(write_sweep(tmp_path, make_sweep_doc("w", dtype="fp32", **base)))
    nopeak = str(write_sweep(tmp_path, make_sweep_doc("np", peak_tflops=0, **base)))
    for cmd in ("compare", "fit", "export"):
        _one_line_error([cmd, str(empty)], "file is empty")
        _one_line_error([cmd, str(future)], "schema_version=7 is not supported")
    _one_line_error(["compare", x, "--no-fit"], "need two series with the same dtype and mode")
    _one_line_error(["compare", x, w, "--no-fit"], "need two series with the same dtype and mode")
    _one_line_error(["compare", x, w, "--a", "x", "--b", "w", "--no-fit"], "share no dtype and mode")
    _one_line_error(["compare", x, nopeak, "--no-fit"], "has no peak for bf16")
    _one_line_error(["compare", x, str(tmp_path / "missing.json")], "no such file")
    tiny = str(write_sweep(tmp_path, make_sweep_doc("tiny", **{**base, "flops": [1e9, 1e10]})))
    _one_line_error(["fit", tiny], "nothing to fit: series tiny bf16 eager: only 2 distinct shapes")


def test_compare_across_modes_finds_where_compiling_pays(tmp_path) -> None:
    """SYNTHETIC: compile has a larger fixed overhead but a higher ceiling; it pays above the crossover."""
    from mfu_sweep.analysis.verdicts.compare import compare_all, parse_selector
    from mfu_sweep.records.results import load_sweeps

    flops = list(np.geomspace(1e6, 1e11, 16))
    eager = make_sweep_doc("box", P_tflops=1.0, W_tbs=1.0, t0_s=1e-6, flops=flops, mode="eager", seed=1,
                           peak_tflops=2.0, run_id="e", **PASSES)
    comp = make_sweep_doc("box", P_tflops=1.6, W_tbs=1.0, t0_s=1e-4, flops=flops, mode="compile", seed=2,
                          peak_tflops=2.0, run_id="c", **PASSES)
    sweeps = load_sweeps([write_sweep(tmp_path, eager, "e.json"), write_sweep(tmp_path, comp, "c.json")])
    (c,) = compare_all(sweeps, "tflops", "box/bf16/eager", "box/bf16/compile", fit_n_boot=20)
    assert (c.a, c.b, c.mode) == ("box eager", "box compile", "eager|compile")
    data = [x for x in c.crossovers if x.method == "runs"]
    assert len(data) == 1 and data[0].from_label == "box eager" and data[0].to_label == "box compile"
    # true crossover: 1e-6 + F/1e12 = 1e-4 + F/1.6e12  ->  F = 99e-6 / (1/1e12 - 1/1.6e12) = 2.64e8
    assert 1e8 < data[0].flops < 7e8
    assert parse_selector("x/fp32") == ("x", "fp32", None)
    with pytest.raises(CompareError, match="LABEL/DTYPE/MODE"):
        compare_all(sweeps, "tflops", "box", "box/bf16/nope")


def test_fit_crossover_with_different_peaks_matches_data(tmp_path) -> None:
    """SYNTHETIC: MFU against different peaks; the fitted crossover must land where the data's does."""
    from mfu_sweep.analysis.verdicts.compare import compare_all
    from mfu_sweep.records.results import load_sweeps

    flops = list(np.geomspace(1e8, 1e13, 16))
    a = make_sweep_doc("small", P_tflops=100, W_tbs=50, t0_s=1e-6, flops=flops, peak_tflops=200, seed=3, **PASSES)
    b = make_sweep_doc("big", P_tflops=400, W_tbs=50, t0_s=1e-4, flops=flops, peak_tflops=500, seed=4, **PASSES)
    sweeps = load_sweeps([write_sweep(tmp_path, a), write_sweep(tmp_path, b)])
    (c,) = compare_all(sweeps, "mfu", fit_n_boot=50)
    (x,) = c.crossovers  # the data's, with the fits' crossing merged in as its second estimate
    assert x.method == "runs" and len(x.fits) == 1
    # MFU_small = F/(1e-6 + F/1e14)/2e14, MFU_big = F/(1e-4 + F/4e14)/5e14: equal at F = 6.6e10
    for flops in (x.flops, x.fits[0][0]):
        assert 1e10 < flops < 1e11, x


# -- the one-line summary: shares of the log-FLOP range and the longest lead ----------------


def _step_pair(switch: float) -> tuple[dict, dict]:
    """SYNTHETIC: A is 25% faster than B below ``switch`` FLOPs and 25% slower above."""
    def a_time(f: float, b: float) -> float:
        return roofline_time(f, b, 600, 2.0, 8e-6) * (0.75 if f < switch else 1 / 0.75)

    base = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6, "flops": [float(f) for f in np.geomspace(1e8, 1e12, 16)],
            **PASSES}
    return make_sweep_doc("A", seed=1, time_fn=a_time, **base), make_sweep_doc("B", seed=2, **base)


def test_summary_of_a_lead_in_the_low_half_and_b_in_the_high_half() -> None:
    switch = 10**10.2  # 55% of the 8..12 decades below the switch
    [c] = compare_all(_sweeps(*_step_pair(switch)), "tflops", use_fit=False)
    s = c.lead_summary()
    assert s is not None and (s.low_flops, s.high_flops) == (c.points[0].flops, c.points[-1].flops)
    assert s.share_a == pytest.approx(0.55, abs=0.05) and s.share_b == pytest.approx(0.45, abs=0.05)
    assert s.share_ambiguous == 0.0 and s.share_a + s.share_b == pytest.approx(1.0)
    assert s.longest is not None and s.longest.leader == "A"
    assert s.longest.start_flops == c.points[0].flops
    assert abs(math.log10(s.longest.end_flops / switch)) < 0.2
    text = c.summary()
    assert text.startswith(f"A leads over {s.share_a:.0%} of the shared FLOP range (log scale, 100 MFLOP to 1 TFLOP), "
                           f"B over {s.share_b:.0%}, the same within 2% over 0%, ambiguous over 0%; "
                           f"longest lead: A from 100 MFLOP to ")
    assert "\n" not in text and c.to_json()["summary"]["text"] == text


def _shares_by_nearest_level(points: list) -> dict:
    """Independent check: integrate over a fine log10 grid, each x taking the verdicts of the nearest FLOP count."""
    levels = np.unique([math.log10(p.flops) for p in points])
    xs = np.linspace(levels[0], levels[-1], 200_001)
    nearest = levels[np.abs(xs[:, None] - levels[None, :]).argmin(axis=1)]
    out: dict = {}
    for level in levels:
        at = [p.leader for p in points if math.log10(p.flops) == level]
        weight = float(np.mean(nearest == level))
        for leader in set(at):
            out[leader] = out.get(leader, 0.0) + weight * at.count(leader) / len(at)
    return out


def test_summary_reads_a_fragmented_grid_comparison() -> None:
    """SYNTHETIC: a non-square grid (many shapes per FLOP count), which A also measured between its square
    shapes, and B is slow in two bands of FLOPs, so A's lead comes in pieces and the segments fragment."""
    def b_time(f: float, nbytes: float) -> float:
        band = 2**25.5 <= f < 2**27.5 or 2**29.5 <= f
        return roofline_time(f, nbytes, 100, 1.0, 5e-6) * (1.4 if band else 1.0)

    grid = [f"{m}x{n}x{k}" for m in (256, 512, 1024) for n in (256, 512, 1024) for k in (256, 512, 1024)]
    passes = {"noise_model": NOISE_MODELS["per-shape 1%"], "repeats": 3}
    squares = [f"{s}x{s}x{s}" for s in range(192, 1100, 64) if s not in (256, 512, 1024)]
    a = make_sweep_doc("A", P_tflops=100, W_tbs=1.0, t0_s=5e-6, shapes=grid + squares, seed=3, **passes)
    b = make_sweep_doc("B", P_tflops=100, W_tbs=1.0, t0_s=5e-6, shapes=grid, seed=4, time_fn=b_time, **passes)
    [c] = compare_all(_sweeps(a, b), "tflops", use_fit=False)
    # B is slow in two bands of FLOPs: two A leads with an ambiguous band between them
    assert len(c.segments) >= 3 and c.sentence().count("A leads") >= 2
    s = c.lead_summary()
    assert s is not None
    want = _shares_by_nearest_level(list(c.points))
    assert s.share_a == pytest.approx(want["A"], abs=1e-3)
    assert s.share_ambiguous + s.share_same == pytest.approx(want[None], abs=1e-3)  # no leader: same or ambiguous
    assert s.share_b == 0.0 and 0.3 < s.share_a < 0.9
    widest = max((x for x in c.segments if x.leader), key=lambda x: x.end_flops / x.start_flops)
    assert s.longest == widest
    assert c.summary().startswith(f"A leads over {s.share_a:.0%} of the shared FLOP range")
    assert f"; longest lead: A from {format_flops(widest.start_flops)} to {format_flops(widest.end_flops)}" \
        in c.summary()


def test_point_weights_split_ties_and_half_cells() -> None:
    """SYNTHETIC FLOP counts: one per decade 1e8..1e11, two shapes at 1e9."""
    from mfu_sweep.analysis.verdicts.compare import point_weights

    w = point_weights([1e8, 1e9, 1e9, 1e10, 1e11])
    assert w.tolist() == pytest.approx([1 / 6, 1 / 6, 1 / 6, 1 / 3, 1 / 6])
    assert point_weights([1e9, 1e9, 1e9]).tolist() == pytest.approx([1 / 3] * 3)  # one FLOP count: by shape


def test_share_text_never_rounds_a_lead_away() -> None:
    from mfu_sweep.analysis.verdicts.comparison import _share

    assert [_share(x) for x in (0.0, 0.004, 0.3333, 0.996, 1.0)] == ["0%", "<1%", "33%", ">99%", "100%"]


def test_summary_without_lead_or_points() -> None:
    truth = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6, "flops": FLOPS[::3], "noise": 0.05}
    [c] = compare_all(_sweeps(make_sweep_doc("A", seed=5, **truth), make_sweep_doc("B", seed=6, **truth)),
                      "tflops", use_fit=False)
    assert c.summary().endswith("B over 0%, the same within 2% over 0%, ambiguous over 100%; no lead beyond 2% "
                                "anywhere [method shapes; run-to-run variation not measured].")
    assert c.to_json()["summary"]["longest_lead"] is None
    [z] = compare_all(_sweeps(make_sweep_doc("A", seed=5, **truth), make_sweep_doc("B", seed=6, **truth)),
                      "tflops", use_fit=False, margin=0.0)
    assert z.summary().endswith("B over 0%, ambiguous over 100%; no lead anywhere "
                                "[method shapes; run-to-run variation not measured].")  # --margin 0: no "same"
    far = {**truth, "flops": [1e14, 2e14, 4e14]}
    with pytest.raises(CompareError, match="FLOP ranges do not meet.*sweep the same shapes"):
        compare_all(_sweeps(make_sweep_doc("A", seed=5, **truth), make_sweep_doc("B", seed=6, **far)),
                    "tflops", use_fit=False)


def test_cli_prints_the_summary_before_the_points(tmp_path: Path) -> None:
    paths = [str(write_sweep(tmp_path, d)) for d in _step_pair(10**10.2)]
    res = CliRunner().invoke(main, ["compare", *paths, "--no-fit", "--metric", "tflops"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    # it opens with one sentence per pair, then the pair's details: summary, bands, the per-shape table
    assert lines[0].startswith("A vs B (bf16, eager): by TFLOP/s (speed): A leads over 5") and lines[1] == ""
    assert lines[3].startswith("summary: A leads over 5") and "longest lead: A from 100 MFLOP" in lines[3]
    assert lines[0].endswith(lines[3].removeprefix("summary: "))
    assert lines[4].startswith("band ") and lines[-1].startswith("A vs B (bf16, eager, TFLOP/s): A leads")
    table = next(i for i, line in enumerate(lines) if line.lstrip().startswith("FLOP"))
    assert all(line.startswith("band ") for line in lines[4:table - 1])
    assert lines[table - 1].startswith("per shape: each side's value at its median time over passes")


# -- reusing fits and skipping pairs --------------------------------------------------------


def _lead_lose_regain() -> list:
    pa, pb = {"P_tflops": 1000, "W_tbs": 0.5, "t0_s": 5e-6}, {"P_tflops": 500, "W_tbs": 8, "t0_s": 10e-6}
    return _sweeps(make_sweep_doc("A", flops=FLOPS, seed=1, **pa, **PASSES),
                   make_sweep_doc("B", flops=FLOPS, seed=2, **pb, **PASSES))


def test_compare_all_uses_the_fits_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from mfu_sweep.analysis.fits.fit import fit_series
    from mfu_sweep.analysis.verdicts import compare as compare_module

    sweeps = _lead_lose_regain()
    series = group_series(sweeps)
    ka, kb = sorted(series)
    own = {k: fit_series(series[k], seed=0, n_boot=30) for k in (ka, kb)}
    fitted_here = compare_all(sweeps, "tflops", **FAST)
    given = compare_all(sweeps, "tflops", fits=own, **FAST)
    assert [c.to_json() for c in given] == [c.to_json() for c in fitted_here]

    def refit(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("compare_all refitted a series whose fit it was given")

    monkeypatch.setattr(compare_module, "fit_series", refit)
    [same] = compare_all(sweeps, "tflops", fits=own, **FAST)
    assert [x.fits for x in same.crossovers] == [x.fits for x in given[0].crossovers]
    # a deliberately wrong fit: B's roofline for both series, so the fitted curves never cross
    [wrong] = compare_all(sweeps, "tflops", fits={ka: own[kb], kb: own[kb]}, **FAST)
    assert [len(x.fits) for x in given[0].crossovers] == [1, 1]  # each change of leader: the fits' crossing merged
    assert [x.fits for x in wrong.crossovers] == [(), ()]
    assert wrong.segments == given[0].segments  # the data side does not use fits
    assert all(x.text().endswith("(runs; the fits do not cross there)") for x in wrong.crossovers)


def test_on_error_skips_pairs_that_cannot_be_compared() -> None:
    base = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6, "flops": FLOPS[::4], "n_samples": 5}
    sweeps = _sweeps(make_sweep_doc("x", **base), make_sweep_doc("y", seed=1, **base),
                     make_sweep_doc("np", seed=2, peak_tflops=0, **base))
    with pytest.raises(CompareError, match="series np bf16 eager has no peak"):
        compare_all(sweeps, "mfu", use_fit=False)
    errors: list[str] = []
    comps = compare_all(sweeps, "mfu", use_fit=False, on_error=lambda e: errors.append(str(e)))
    assert [(c.a, c.b) for c in comps] == [("x", "y")]
    assert len(errors) == 2 and all("series np bf16 eager has no peak" in e for e in errors)
    alone = _sweeps(make_sweep_doc("x", **base))
    assert compare_all(alone, "mfu", use_fit=False, on_error=errors.append) == []
    with pytest.raises(CompareError, match="need two series"):
        compare_all(alone, "mfu", use_fit=False)


def _apart_trio() -> tuple[dict, dict, dict]:
    """SYNTHETIC: A and C sweep the same square shapes; B sweeps skinny ones (k = 64) that no square shape
    is near, like a model's layer shapes beside a square sweep: A vs C can be compared, A vs B and B vs C cannot."""
    base = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6, "n_samples": 5}
    skinny = [f"{s}x{s}x64" for s in (256, 512, 1024, 2048, 4096, 8192)]
    return (make_sweep_doc("A", flops=FLOPS[::2], seed=1, **base), make_sweep_doc("B", shapes=skinny, seed=2, **base),
            make_sweep_doc("C", flops=FLOPS[::2], seed=3, **base))


def test_many_pairs_compare_what_they_can_and_note_each_pair_without_shared_shapes() -> None:
    from mfu_sweep.analysis.verdicts.compare import NoSharedShapesError

    sweeps = _sweeps(*_apart_trio())
    skipped: list[CompareError] = []
    comps = compare_all(sweeps, "tflops", use_fit=False, on_skip=skipped.append)
    assert [(c.a, c.b) for c in comps] == [("A", "C")]
    assert [type(e) for e in skipped] == [NoSharedShapesError] * 2
    assert [str(e).split(":")[0] for e in skipped] == ["cannot compare A with B (bf16 eager)",
                                                        "cannot compare B with C (bf16 eager)"]
    assert all("sweep the same shapes" in str(e) for e in skipped)
    with pytest.raises(NoSharedShapesError, match="cannot compare A with B .*sweep the same shapes"):
        compare_all(sweeps, "tflops", use_fit=False)  # without on_skip the first such pair is the error
    # one pair (compare --a A --b B), or no pair that can be compared at all: the reason is the error
    for a, b in (("A", "B"), ("B", None)):
        with pytest.raises(NoSharedShapesError, match=f"cannot compare {a} with {'B' if b else 'A'}"):
            compare_all(sweeps, "tflops", a, b, use_fit=False, on_skip=skipped.append)
    errors: list[CompareError] = []  # on_error takes every pair's error, the report's way
    assert len(compare_all(sweeps, "tflops", use_fit=False, on_error=errors.append)) == 1 and len(errors) == 2


def test_cli_compare_of_many_files_notes_each_pair_it_cannot_compare_and_one_pair_is_one_line(
        tmp_path: Path) -> None:
    paths = [str(write_sweep(tmp_path, d)) for d in _apart_trio()]
    res = CliRunner().invoke(main, ["compare", *paths, "--no-fit", "--metric", "tflops", "--pairwise"])
    assert res.exit_code == 0, res.output
    assert "A vs C: bf16 eager" in res.output
    notes = [line for line in res.output.splitlines() if line.startswith("note: cannot compare")]
    assert [n.split(":")[1].strip() for n in notes] == ["cannot compare A with B (bf16 eager)",
                                                         "cannot compare B with C (bf16 eager)"]
    res = CliRunner().invoke(main, ["compare", *paths, "--no-fit", "--metric", "tflops", "--json", "--pairwise"])
    out = json.loads(res.output)
    assert [(c["a"], c["b"]) for c in out["comparisons"]] == [("A", "C")] and len(out["skipped"]) == 2
    res = CliRunner().invoke(main, ["compare", *paths, "--no-fit", "--metric", "tflops", "--a", "A", "--b", "B"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert res.output.startswith("Error: cannot compare A with B (bf16 eager): ") and res.output.count("\n") == 1


def test_min_run_counts_flop_counts_not_points() -> None:
    """Hand-made verdicts (synthetic): shapes of equal FLOPs are one place on the axis."""
    flops = [1, 2, 2, 2, 3, 4]
    # two b-leads (-1) at the same FLOP count are not a run: demoted; a's run spans 1..3 through FLOP 2
    verdict = np.array([1, -1, 1, -1, 1, 0])
    assert _apply_min_run(verdict, 2, flops).tolist() == [1, 0, 1, 0, 1, 0]
    # any order of the equal-FLOP points gives the same verdicts, point by point
    for order in ([0, 3, 2, 1, 4, 5], [0, 2, 1, 3, 4, 5], [0, 1, 3, 2, 4, 5]):
        got = _apply_min_run(verdict[order], 2, [flops[i] for i in order])
        assert got.tolist() == [[1, 0, 1, 0, 1, 0][i] for i in order]
    # b leading at FLOP 2 and 3 is a run of two FLOP counts: kept, alongside a's run
    assert _apply_min_run(np.array([1, -1, 1, 0, -1, 0]), 2, flops).tolist() == [1, -1, 1, 0, -1, 0]
    # without FLOPs every point is its own place (the old rule on distinct FLOPs)
    assert _apply_min_run(np.array([1, 1, -1, 0, -1, -1]), 2).tolist() == [1, 1, 0, 0, -1, -1]


# -- issue 12: passes, old files and one value per shape -----------------------------------


def test_one_sample_per_shape_gets_data_based_verdicts_and_says_what_was_not_measured(tmp_path: Path) -> None:
    """SYNTHETIC imported-like records (one sample each, no pass index) still get verdicts, via `shapes`."""
    base = {"W_tbs": 2.0, "t0_s": 8e-6, "flops": FLOPS, "n_samples": 1, "noise": 0.02, "peak_tflops": 1000}
    docs = make_sweep_doc("A", P_tflops=800, seed=1, **base), make_sweep_doc("B", P_tflops=500, seed=2, **base)
    [c] = compare_all(_sweeps(*docs), "tflops", use_fit=False)
    assert (c.method, c.runs_measured, c.passes) == ("shapes", False, (1, 1))
    assert [s.leader for s in c.segments if s.leader] == ["A"] and c.lead_summary().share_a > 0.3
    assert any("A: no pass index" in n for n in c.notes) and any("B: no pass index" in n for n in c.notes)
    assert "run-to-run variation not measured" in c.sentence() and "run-to-run variation not measured" in c.summary()
    assert {x.method for x in c.segments} == {"shapes"}
    paths = [str(write_sweep(tmp_path, d)) for d in docs]
    res = CliRunner().invoke(main, ["compare", *paths, "--no-fit", "--json", "--metric", "tflops"])
    got = json.loads(res.output)["comparisons"][0]
    assert (got["method"], got["runs_measured"], got["passes"]) == ("shapes", False, {"a": 1, "b": 1})
    assert got["evidence"] == "method shapes; run-to-run variation not measured"


def test_pass_index_makes_runs_the_method_and_is_read_from_the_records() -> None:
    from mfu_sweep.analysis.verdicts.curves import pass_curve, pass_of

    doc = make_sweep_doc("A", P_tflops=600, W_tbs=2.0, t0_s=8e-6, flops=FLOPS[::4], seed=1, **PASSES)
    [sweep] = parse_document(doc)
    assert sorted({pass_of(r) for r in sweep.records}) == [0, 1, 2]
    [series] = group_series([sweep]).values()
    curve = pass_curve(series, "tflops")
    assert curve.passes == (0, 1, 2) and curve.pass_indexed and curve.log_t.shape == (3, len(FLOPS[::4]))
    old = make_sweep_doc("A", P_tflops=600, W_tbs=2.0, t0_s=8e-6, flops=FLOPS[::4], seed=1)
    [series_old] = group_series(parse_document(old)).values()
    assert pass_curve(series_old, "tflops").passes == (0,) and not pass_curve(series_old, "tflops").pass_indexed
    assert all(pass_of(r) is None for r in series_old.records)


def test_equal_flop_shapes_are_one_place_in_the_segments() -> None:
    """A grid (here the published XLA tables: many shapes per FLOP count) never yields zero-width segments."""
    from mfu_sweep.records.results import load_sweeps

    root = Path(__file__).resolve().parents[1] / "sweeps" / "published"
    sweeps = load_sweeps([root / "sm_100_B200.json", root / "gfx950.json"])
    (c,) = compare_all(sweeps, "tflops", a="sm_100_B200/bf16", b="gfx950/bf16")
    assert all(s.start_flops < s.end_flops for s in c.segments)
    leaders = [s.leader for s in c.segments if s.leader]
    assert leaders == ["gfx950", "sm_100_B200"]  # the hand count: gfx950 below ~1 GFLOP, B200 above


def test_compare_help_offers_no_option_it_ignores() -> None:
    """Options kept only to be ignored are removed (CHANGELOG), not described as ignored."""
    res = CliRunner().invoke(main, ["compare", "--help"])
    assert res.exit_code == 0
    assert "ignored" not in res.output.lower() and "--n-boot " not in res.output.replace("--fit-n-boot", "")
    gone = CliRunner().invoke(main, ["compare", "x.json", "--n-boot", "50"])
    assert gone.exit_code == 2 and "No such option '--n-boot'" in gone.output


def test_fit_crossovers_only_where_the_data_lean_both_ways() -> None:
    # REAL (OpenXLA bf16, cited import): B200 is ahead of H100 in every band by TFLOP/s, H100 by MFU, yet the
    # two fitted rooflines cross near 220 MFLOP. No band leans to H100 below it: no crossover at all, and a
    # note says the fits cross where the data do not. SYNTHETIC A (low overhead) against B (high peak): the
    # data cross, and the fit crossover is kept with an interval from the fits' bootstrap, never zero-width.
    from mfu_sweep.records.results import load_sweeps

    published = Path(__file__).resolve().parents[1] / "sweeps" / "published"
    series = group_series(load_sweeps([published / "sm_100_B200.json", published / "sm_90.json"]))
    b200, h100 = (next(s for k, s in series.items() if k.label == x and k.dtype == "bf16")
                  for x in ("sm_100_B200", "sm_90"))
    tflops = compare_series(b200, h100, "tflops", fit_n_boot=20)
    assert tflops.crossovers == () and [x.method for x in tflops.fit_only] == ["fit"]
    assert any(n.startswith("the fits cross at 220 MFLOP (sm_90 -> sm_100_B200); the data do not: sm_90 leads in "
                            "no band or run below it") for n in tflops.notes)
    assert tflops.to_json()["unsupported_fit_crossings"][0]["reason"] == "sm_90 leads in no band or run below it"
    assert compare_series(b200, h100, "mfu", fit_n_boot=20).crossovers == ()
    # 48 distinct shapes measured once (one record per pass, shape, dtype and mode: a file that repeats one is refused)
    base = {"flops": [float(f) for f in np.geomspace(1e8, 1e13, 2 * len(FLOPS))], "peak_tflops": 1000.0, "noise": 0.01}
    docs = (make_sweep_doc("A", seed=1, P_tflops=400, W_tbs=2.0, t0_s=2e-6, **base),
            make_sweep_doc("B", seed=2, P_tflops=900, W_tbs=2.0, t0_s=20e-6, **base))
    [c] = compare_all(_sweeps(*docs), "tflops", fit_n_boot=30)
    [data] = c.crossovers  # one line for the change of leader, the fits' crossing merged into it
    [(flops, low, high)] = data.fits
    assert (data.from_label, data.to_label, data.method) == ("A", "B", "shapes")
    assert low < flops < high and format_flops(low) != format_flops(high)
    assert c.fit_only == ()


def test_no_band_of_a_published_pair_is_labelled_against_its_own_interval() -> None:
    # REAL published pairs (DeepBench fp32, OpenXLA bf16 and fp32): a band called for a leader has its whole
    # interval beyond the margin that way, a band called "the same" has it inside the margin, and a band that
    # is part of a run's conclusion is not called itself (round 4 copied runs' labels onto bands: a 13-shape
    # band "the same within 2%" with its interval [0.967, 1.011])
    from itertools import combinations

    from mfu_sweep.records.results import load_sweeps

    published = Path(__file__).resolve().parents[1] / "sweeps" / "published"
    names = ("AMD_MI25", "NV_TitanX_Pascal", "NV_P100", "NV_TitanXp", "sm_90", "gfx950", "gfx942")
    series = group_series(load_sweeps([published / f"{n}.json" for n in names]))
    checked = 0
    for (ka, sa), (kb, sb) in combinations(series.items(), 2):
        if (ka.dtype, ka.mode) != (kb.dtype, kb.mode) or ka.dtype == "fp8":
            continue
        c = compare_series(sa, sb, "tflops", use_fit=False)
        delta = math.log1p(c.margin)
        for band in c.bands:
            checked += 1
            if band.verdict:
                assert min(band.low * band.verdict, band.high * band.verdict) > delta, (c.a, c.b, band)
            if band.same:
                assert -delta < band.low and band.high < delta, (c.a, c.b, band)
            assert band.via is None or band.state == 0
    assert checked >= 60


def test_by_mfu_no_band_or_sentence_says_faster() -> None:
    # REAL (OpenXLA bf16): by MFU H100 is closer to its own peak everywhere while B200 is faster; band calls,
    # the sentence, the summary and the per-band JSON call say "higher MFU" / "closer to its own peak"
    from mfu_sweep.records.results import load_sweeps

    published = Path(__file__).resolve().parents[1] / "sweeps" / "published"
    series = group_series(load_sweeps([published / "sm_100_B200.json", published / "sm_90.json"]))
    b200, h100 = (next(s for k, s in series.items() if k.label == x and k.dtype == "bf16")
                  for x in ("sm_100_B200", "sm_90"))
    mfu = compare_series(b200, h100, "mfu", use_fit=False)
    text = json.dumps(mfu.to_json())
    assert "faster" not in text and "slower" not in text
    assert {b.call(mfu.a, mfu.b) for b in mfu.bands} == {"sm_90 higher MFU"}
    assert "closer to its own peak" in mfu.sentence()
    speed = compare_series(b200, h100, "tflops", use_fit=False)
    assert "sm_100_B200 faster" in {b.call(speed.a, speed.b) for b in speed.bands}
