"""Issue 48, verdicts: the last mile. One test per rule, each written to fail on the code before it:

* a fit crossover is kept only between sides that each lead somewhere (a band or a run) by the band verdicts;
* one change of leader is one crossover line, the fits' estimates merged into it;
* a run is "the same" only when every band in it has its point estimate within the margin;
* the printed interval is the verdict's (Holm-adjusted): never "ambiguous" with it wholly past the margin, never a
  lead without it;
* a band decided through the local model whose exact matches fall outside the model-based interval says so and
  rests on the exact matches (ambiguous with one match);
* a lead under 2/3 of whose shapes favour the leader says how many go the other way;
* two fp8 series in different element formats say so.

Published pairs are real (sweeps/published/); everything else is SYNTHETIC and says so.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mfu_sweep.analysis.ground.series import group_series
from mfu_sweep.analysis.verdicts.bands import SAME, bands_and_runs, run_variance
from mfu_sweep.analysis.verdicts.compare import compare_series
from mfu_sweep.cli import main
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.records.results import load_sweeps, parse_document

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "sweeps" / "published"


def _series(*names: str) -> dict:
    return group_series(load_sweeps([PUBLISHED / f"{n}.json" for n in names]))


def _pair(a: str, b: str, dtype: str, mode: str, metric: str = "tflops", **kw: object):
    series = _series(a, b)
    (sa,), (sb,) = ([s for k, s in series.items() if (k.label, k.dtype, k.mode) == (x, dtype, mode)] for x in (a, b))
    return compare_series(sa, sb, metric, **kw)


def _leads(c: object) -> list[int]:
    """The leader of each run of bands (+1 a, -1 b), the bands' own verdicts or the runs' they are part of."""
    states = [b.state or (b.via[3] if b.via is not None else 0) for b in c.bands]
    out: list[int] = []
    for s in states:
        if s in (1, -1) and (not out or out[-1] != s):
            out.append(s)
    return out


# -- fit crossovers ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def b200_gfx950_fp32():
    return _pair("sm_100_B200", "gfx950", "fp32", "compile", fit_n_boot=60)


def test_a_fit_crossover_toward_a_side_that_leads_nowhere_is_a_note(b200_gfx950_fp32) -> None:
    """gfx950 is clear in no band and no run against B200 (fp32, TFLOP/s), yet the fits cross to B200 near 340
    MFLOP: before, "crossover (fit): gfx950 -> sm_100_B200 at 340 MFLOP [300, 380]"."""
    c = b200_gfx950_fp32
    assert not any(b.state == -1 or (b.via is not None and b.via[3] == -1) for b in c.bands)  # gfx950 nowhere
    assert c.crossovers == ()
    (dropped,) = [x for x in c.fit_only if x.from_label == "gfx950"]
    assert dropped.reason == "gfx950 leads in no band or run below it"
    note = next(n for n in c.notes if n.startswith("the fits cross at"))
    assert "(gfx950 -> sm_100_B200); the data do not: gfx950 leads in no band or run below it" in note


@pytest.mark.parametrize(("a", "b", "dtype", "mode"), [
    ("NV_T4", "NV_TitanX", "fp32", "eager"), ("sm_100_B200", "gfx950", "bf16", "compile"),
    ("NV_1080Ti", "NV_T4", "fp32", "eager-tn"),
])
def test_every_crossover_is_one_change_of_leader_between_sides_that_both_lead(a: str, b: str, dtype: str,
                                                                               mode: str) -> None:
    c = _pair(a, b, dtype, mode, fit_n_boot=60)
    leads = _leads(c)
    assert len(c.crossovers) == len(leads) - 1  # one line per change of leader, never one per method
    for x, (before, after) in zip(c.crossovers, zip(leads, leads[1:], strict=False), strict=True):
        assert x.method != "fit" and (x.from_label, x.to_label) == ({1: c.a, -1: c.b}[before], {1: c.a, -1: c.b}[after])
        assert x.fits is not None  # the fits were compared: their crossings of this change are merged in, or none
    for x in c.fit_only:  # what stays a note: a side that leads nowhere on its side of the crossing
        assert "leads in no band or run" in x.reason


def test_t4_titanx_one_change_of_leader_is_one_line_with_both_estimates() -> None:
    """Before: a shapes crossover at 32 GFLOP [4.5, 64] and fit crossovers at 4.2 GFLOP [4, 4.5] and 25 GFLOP
    [23, 26], all T4 -> TitanX, each with its own interval."""
    c = _pair("NV_T4", "NV_TitanX", "fp32", "eager", fit_n_boot=60)
    (x,) = c.crossovers
    assert (x.from_label, x.to_label, x.method) == ("NV_T4", "NV_TitanX", "shapes")
    assert len(x.fits) == 2 and all(x.low_flops < f < x.high_flops for f, _, _ in x.fits)
    assert x.text().startswith("NV_T4 -> NV_TitanX at ") and "; the fits cross at 4" in x.text()
    out = CliRunner().invoke(main, ["compare", str(PUBLISHED / "NV_T4.json"), str(PUBLISHED / "NV_TitanX.json"),
                                    "--a", "NV_T4/fp32/eager", "--b", "NV_TitanX/fp32/eager", "--metric", "tflops",
                                    "--fit-n-boot", "60"])
    assert out.exit_code == 0, out.output
    assert [ln for ln in out.output.splitlines() if ln.startswith("crossover")] == [f"crossover: {x.text()}"]


# -- runs called "the same" ------------------------------------------------------------------------------------------


def _flops(n_bands: int, per_band: int) -> np.ndarray:
    """SYNTHETIC FLOP counts: ``per_band`` log-spaced inside each of ``n_bands`` half-decades from 1e9."""
    return np.concatenate([np.geomspace(10 ** (9 + k / 2) * 1.05, 10 ** (9 + (k + 1) / 2) * 0.95, per_band)
                           for k in range(n_bands)])


def test_a_run_is_not_the_same_over_a_band_past_the_margin() -> None:
    """SYNTHETIC: the H100 Aug 2025 vs current case. One band of 107 shapes sits at x0.978 (103 of 107 one way;
    ambiguous alone: its interval reaches across 1/1.02), its neighbours at x1.00; before, the run of the three was
    "the same within 2%" taken together and the sentence called the whole stretch the same."""
    rng = np.random.default_rng(1)
    f = _flops(3, 107)
    d = 0.004 * rng.standard_normal(len(f))
    d[107:214] = math.log(0.978) + 0.016 * rng.standard_normal(107)  # before: "the same" with band 0 taken together
    bands, runs = bands_and_runs(f, d[None, :], np.zeros((1, len(f))))
    assert [b.state for b in bands] == [SAME, 0, SAME] and bands[1].wins_b >= 100
    assert abs(bands[1].estimate) > math.log1p(0.02)
    assert not any(r.state == SAME and r.first <= 1 <= r.last for r in runs)
    assert bands[1].via is None  # no run's "same" copied onto it


def test_runs_called_the_same_hold_only_bands_within_the_margin() -> None:
    """SYNTHETIC identical devices, 8 shapes per decade, 3 passes with 2% noise (tests/synthetic_bands.py): every run
    called "the same" has every band's point estimate inside the margin; before, 21 of 30 seeds called the whole
    range the same over a band whose own estimate lay past 2%."""
    from synthetic_bands import seed_like

    delta = math.log1p(0.02)
    flops, per_seed = seed_like((), per_decade=8, seeds=12, seed=2)
    rng = np.random.default_rng(2)
    checked = 0
    for _ in range(12):
        va, vb = (0.02 * rng.standard_normal((3, len(flops))) for _ in range(2))
        bands, runs = bands_and_runs(flops, va, vb, run_var=run_variance(flops, va, vb))
        for r in runs:
            if r.state == SAME:
                checked += 1
                assert all(abs(b.estimate) < delta for b in bands[r.first:r.last + 1])
        assert not any(b.verdict for b in bands)  # and still no lead between identical devices
    assert checked  # the rule was exercised: some runs are still the same


# -- the printed interval is the verdict's ---------------------------------------------------------------------------


def _past(j: dict, delta: float) -> int:
    lo, hi = j["ratio_low"], j["ratio_high"]
    if lo is None or hi is None:
        return 0
    return 1 if math.log(lo) > delta else -1 if math.log(hi) < -delta else 0


@pytest.mark.parametrize(("a", "b", "dtype", "mode"), [
    ("NV_TitanX_Pascal", "NV_TitanXp", "fp32", "eager"), ("AMD_MI25", "AMD_VegaFE", "fp32", "eager"),
    ("AMD_MI25", "AMD_VegaFE", "fp32", "eager-tn"), ("gfx950", "gfx942", "fp8", "compile"),
    ("sm_90", "gfx950", "bf16", "compile"), ("NV_P100", "NV_TitanXp", "fp32", "eager-tn"),
])
def test_a_band_is_a_lead_exactly_when_its_printed_interval_lies_past_the_margin(a: str, b: str, dtype: str,
                                                                                 mode: str) -> None:
    """Before: TitanX Pascal vs TitanXp, 3.2-100 GFLOP, "x0.9667 [0.9443, 0.9784], ambiguous"; MI25 vs Vega FE
    "x1.025 [1.02, 1.029], ambiguous": the printed 95% interval wholly past the margin, the verdict (Holm) not."""
    c = _pair(a, b, dtype, mode, use_fit=False)
    delta = math.log1p(c.margin)
    for band in c.bands:
        j = band.to_json(c.a, c.b)
        assert band.verdict == _past(j, delta), (band.low_flops, j["ratio_low"], j["ratio_high"], band.call(c.a, c.b))
        assert j["interval"] == "Holm-adjusted" and 1 - c.alpha <= j["interval_level"] < 1
        if band.same:
            assert -delta < math.log(j["ratio_low"]) and math.log(j["ratio_high"]) < delta


def test_the_holm_adjusted_interval_is_the_test_at_its_holm_level() -> None:
    """SYNTHETIC: the interval's ends are where the band's own test starts to reject at alpha * p / p(Holm), so it is
    no narrower than the own 95% interval, and wider where Holm spends more."""
    rng = np.random.default_rng(5)
    f = _flops(5, 15)
    d = 0.03 * rng.standard_normal(len(f)) + 0.025
    bands, _ = bands_and_runs(f, d[None, :], np.zeros((1, len(f))))
    for b in bands:
        lo, hi = b.interval
        assert b.level <= 0.05 and lo <= b.estimate <= hi
        assert lo <= b.low + 1e-9 and hi >= b.high - 1e-9 or b.level == pytest.approx(0.05)


# -- model-based points against exact matches -----------------------------------------------------------------------


def _own_list(tmp_path: Path):
    """SYNTHETIC sides with their own shape lists and one shape in common: b is 1.5x faster on its smooth curve, but
    the one shape both measured is only 1.1x faster (the aiter gfx1250 vs gfx950 case: the model-based band read
    x0.548 [0.512, 0.587] while the one exact match read x0.685)."""
    from synthetic import make_sweep_doc

    sizes_a, sizes_b = (1024, 1280, 1536, 1792, 2048), (960, 1216, 1472, 1728, 1984, 2240)
    common = Shape(1, 1536, 1536, 1536)
    shapes_a = [Shape(1, m, n, k) for m in sizes_a for n in sizes_a for k in sizes_a]
    shapes_b = [Shape(1, m, n, k) for m in sizes_b for n in sizes_b for k in sizes_b] + [common]

    def speed(tflops: float, odd: float):
        return lambda flops, nbytes: flops / (1e12 * (odd if abs(flops - common.flops) < 1 else tflops))

    docs = [make_sweep_doc("own-a", P_tflops=1, W_tbs=1, t0_s=1e-6, shapes=shapes_a, time_fn=speed(100.0, 100.0),
                           noise=0.002, n_samples=5, seed=1, dtype="fp32"),
            make_sweep_doc("own-b", P_tflops=1, W_tbs=1, t0_s=1e-6, shapes=shapes_b, time_fn=speed(150.0, 110.0),
                           noise=0.002, n_samples=5, seed=2, dtype="fp32")]
    series = group_series([s for i, doc in enumerate(docs) for s in parse_document(doc, f"{i}.json")])
    return [series[k] for k in sorted(series)]


def test_a_band_whose_exact_match_lies_outside_its_model_based_interval_says_so(tmp_path: Path) -> None:
    sa, sb = _own_list(tmp_path)
    c = compare_series(sa, sb, "tflops", use_fit=False)
    (band,) = [b for b in c.bands if b.low_flops <= Shape(1, 1536, 1536, 1536).flops < b.high_flops]
    assert band.verdict == 0 and band.too_few  # one exact match cannot carry a verdict: before, "own-b faster"
    split = band.split
    assert split.matched == 1 and split.outside is not None and split.ratio_matched == pytest.approx(100 / 110,
                                                                                                     rel=0.02)
    est, lo, hi = split.outside
    assert est == pytest.approx(100 / 150, rel=0.03) and not lo <= split.ratio_matched <= hi
    assert band.verdict == 0 and band.too_few  # one exact match cannot carry a verdict: before, "own-b faster"
    assert "lies outside the model-based interval" in split.text()
    assert band.to_json(c.a, c.b)["evidence_split"]["matched_outside_model"] is True
    other = [b for b in c.bands if b is not band and b.split is not None and b.split.model]
    assert other and all(b.verdict == -1 for b in other if b.split.outside is None)  # the model still speaks elsewhere


# -- split bands -----------------------------------------------------------------------------------------------------


def test_a_lead_of_a_split_band_says_how_many_shapes_go_the_other_way() -> None:
    """gfx950 vs gfx942 fp8 by MFU, 3.2-10 GFLOP: 53 shapes for gfx950, 54 for gfx942, "gfx942 higher MFU"
    (x0.852): true on average; before, the line did not say that half the shapes go the other way."""
    c = _pair("gfx950", "gfx942", "fp8", "compile", metric="mfu", use_fit=False)
    (band,) = [b for b in c.bands if b.low_flops == pytest.approx(10 ** 9.5)]
    assert (band.wins_a, band.wins_b, band.verdict) == (53, 54, -1)
    assert band.call(c.a, c.b) == "gfx942 higher MFU (53 of 107 shapes the other way)"
    for b in c.bands:  # a lead that 2/3 or more of its shapes favour says nothing more
        ahead = b.wins_a if b.verdict > 0 else b.wins_b
        assert ("the other way" in b.call(c.a, c.b)) == (b.verdict != 0 and ahead < 2 / 3 * b.n)
    from mfu_sweep.analysis.verdicts.bands import split_words

    assert split_words(1, 8, 4, 12) == "" and split_words(1, 7, 4, 12) == "4 of 12 shapes the other way, 1 even"
    assert split_words(0, 1, 11, 12) == "" and split_words(-1, 6, 6, 12) == "6 of 12 shapes the other way"


# -- fp8 formats -----------------------------------------------------------------------------------------------------


def test_a_compare_across_fp8_formats_says_so() -> None:
    c = _pair("gfx950", "gfx942", "fp8", "compile", use_fit=False)
    (note,) = [n for n in c.notes if n.startswith("fp8 formats differ")]
    assert "gfx950 e4m3fn and gfx942 e4m3fnuz" in note
    same = _pair("sm_90", "gfx950", "fp8", "compile", use_fit=False)
    assert not [n for n in same.notes if "fp8 format" in n]
    bf16 = _pair("gfx942", "gfx950", "bf16", "compile", use_fit=False)
    assert not [n for n in bf16.notes if "fp8 format" in n]


# -- layouts ---------------------------------------------------------------------------------------------------------


def test_deepbench_pairs_are_compared_layout_by_layout() -> None:
    """MI25 vs TitanX Pascal: before, one comparison of 83 rows (the TN row standing in where NN was dropped) said
    "NV_TitanX_Pascal leads (+18%)" above 97 GFLOP; now nn, nt and tn are three comparisons, tn ambiguous."""
    from mfu_sweep.analysis.verdicts.compare import compare_all

    comps = compare_all(load_sweeps([PUBLISHED / "AMD_MI25.json", PUBLISHED / "NV_TitanX_Pascal.json"]), "tflops",
                        use_fit=False)
    assert [(c.dtype, c.mode, len(c.points)) for c in comps] == [("fp32", "eager", 77), ("fp32", "eager-nt", 10),
                                                                  ("fp32", "eager-tn", 73)]
    for c in comps:
        assert {p.shape.split(":")[1] if ":" in p.shape else "nn" for p in c.points} == {
            {"eager": "nn", "eager-nt": "nt", "eager-tn": "tn"}[c.mode]}
    tn = comps[2]
    assert all(b.verdict == 0 for b in tn.bands) and "no confident leader" in tn.sentence()


def test_a_compare_over_sources_that_differ_in_layouts_says_what_it_left_out(tmp_path: Path) -> None:
    import json

    doc = json.loads((PUBLISHED / "NV_T4.json").read_text())
    doc["records"] = [r for r in doc["records"] if r["shape"].get("layout", "nn") == "nn" and r["dtype"] == "fp32"]
    doc["device"]["label"] = "t4-nn-only"
    mine = tmp_path / "t4-nn-only.json"
    mine.write_text(json.dumps(doc))
    args = ["compare", str(PUBLISHED / "NV_TitanX.json"), str(mine), "--metric", "tflops", "--no-fit"]
    out = CliRunner().invoke(main, args)
    assert out.exit_code == 0, out.output
    notes = [ln for ln in out.output.splitlines() if ln.startswith("note: left out:")]
    assert notes == [
        "note: left out: NV_TitanX fp32 eager-nt (10 shapes in layout nt): t4-nn-only measured fp32 eager in nn only; "
        "layouts are compared layout by layout, never one against another",
        "note: left out: NV_TitanX fp32 eager-tn (73 shapes in layout tn): t4-nn-only measured fp32 eager in nn only; "
        "layouts are compared layout by layout, never one against another"]
    assert "NV_TitanX vs t4-nn-only (fp32, eager, TFLOP/s)" in out.output and "eager-tn, TFLOP/s" not in out.output
    got = json.loads(CliRunner().invoke(main, [*args, "--json"]).output)
    assert [n.removeprefix("note: ") for n in notes] == got["left_out_layouts"]
    same = CliRunner().invoke(main, ["compare", str(PUBLISHED / "NV_TitanX.json"), str(PUBLISHED / "NV_T4.json"),
                                     "--a", "NV_TitanX", "--b", "NV_T4", "--metric", "tflops", "--no-fit"])
    assert same.exit_code == 0 and "in layout" not in same.output  # the same layouts on both: none left out
