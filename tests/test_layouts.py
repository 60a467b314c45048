"""Operand layouts (nn, nt, tn, tt) as a sweep axis: shapes, operands laid out for real on the CPU, a real
CPU sweep, and series and comparisons that keep layouts apart (SYNTHETIC series from tests/synthetic.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from synthetic import NOISE_MODELS, make_sweep_doc, square_shapes

from mfu_sweep.analysis.ground.series import SeriesKey, group_series
from mfu_sweep.analysis.verdicts.compare import compare_all
from mfu_sweep.cli import main
from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shape_files import read_shape_rows
from mfu_sweep.gemm.shapes import LAYOUTS, Shape, ShapeError, parse_layouts, parse_shape, with_layout
from mfu_sweep.measure.backends.cpu import CpuBackend
from mfu_sweep.measure.backends.operands import relative_error
from mfu_sweep.measure.layouts import in_layouts, runnable_tasks
from mfu_sweep.measure.planning import make_tasks
from mfu_sweep.records.results import load_sweeps, parse_document, validate_file


# ----- the shape carries its layout ------------------------------------------------------------------------
def test_layout_is_part_of_the_shape_and_round_trips() -> None:
    s = Shape(1, 64, 32, 16, "nt")
    assert s != Shape(1, 64, 32, 16) and s.flops == Shape(1, 64, 32, 16).flops
    assert str(s) == "64x32x16:nt" and parse_shape(str(s)) == s
    assert Shape.from_json(s.to_json()) == s and s.to_json()["layout"] == "nt"
    assert "layout" not in Shape(1, 64, 32, 16).to_json()  # files without a layout are nn, unchanged
    assert parse_shape("2x8x8x8:TT") == Shape(2, 8, 8, 8, "tt")
    with pytest.raises(ShapeError, match="'xy' is not a layout"):
        parse_shape("8x8x8:xy")
    with pytest.raises(ShapeError, match="layout='nx'"):
        Shape(1, 8, 8, 8, "nx")
    assert parse_layouts("nt, NN,nt") == ("nt", "nn")
    with pytest.raises(ShapeError, match="'ab' is not one of nn, nt, tn, tt"):
        parse_layouts("nn,ab")


def test_shape_file_layout_column_is_swept(tmp_path) -> None:
    f = tmp_path / "s.csv"
    f.write_text("m,n,k,layout\n8,16,32,tn\n8,16,32,\n8,16,32,NT\n")
    assert [r.shape.layout for r in read_shape_rows(f)] == ["tn", "nn", "nt"]
    f.write_text("m,n,k,layout\n8,16,32,xx\n")
    with pytest.raises(ShapeError, match="line 2: column 'layout' = 'xx'"):
        read_shape_rows(f)


def test_in_layouts_and_the_scaled_dtypes_single_layout() -> None:
    base = [(Shape(1, 64, 64, 64), "custom"), (Shape(1, 32, 32, 32, "tn"), "csv")]
    assert in_layouts(base, None) == base
    every = in_layouts(base, LAYOUTS)
    assert [str(s) for s, _ in every] == ["64x64x64", "32x32x32", "64x64x64:nt", "32x32x32:nt", "64x64x64:tn",
                                          "32x32x32:tn", "64x64x64:tt", "32x32x32:tt"]
    tasks, notes = runnable_tasks(make_tasks(every, ["fp32", "fp8"], ["eager"]))
    assert sum(t.dtype == "fp32" for t in tasks) == 8
    fp8 = sorted(str(t.shape) for t in tasks if t.dtype == "fp8")
    assert fp8 == ["32x32x32:nt", "64x64x64:nt"]  # four layouts asked, one runs: swept once, in nt
    assert notes == ["fp8 takes layout nt only (A row-major, B column-major): shapes asked in nn, tn, tt are "
                     "swept in nt"]
    grouped = [(Shape(1, 48, 8, 64, "nt", (16, 32)), "custom"), (Shape(2, 8, 8, 64, "nt"), "custom"),
               (Shape(1, 8, 8, 48, "nt"), "custom")]
    tasks, notes = runnable_tasks(make_tasks(grouped, ["mxfp8"], ["eager"]))
    assert tasks == [] and notes == ["left out 3 shapes in mxfp8: mxfp8 (a scaled matmul) runs batch 1 only, not "
                                     "grouped shapes (and others)"]


# ----- operands laid out for real (CPU) -----------------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
def test_operands_are_stored_in_their_layout_and_the_gemm_is_right(layout: str) -> None:
    backend, shape, dt = CpuBackend(), Shape(1, 48, 40, 24, layout), get_dtype("fp32")
    inputs = backend.make_inputs(shape, dt, 2, seed=3)
    a, b = inputs.a[0][0], inputs.b[0][0]
    assert a.shape == (48, 24) and b.shape == (24, 40)
    # n: rows contiguous; t: the transpose is what is stored (columns contiguous), a view is what the GEMM gets
    assert (a.stride(1) == 1) == (layout[0] == "n") and (a.stride(0) == 1) == (layout[0] == "t")
    assert (b.stride(1) == 1) == (layout[1] == "n") and (b.stride(0) == 1) == (layout[1] == "t")
    got = backend.gemm_fn(shape, dt, "eager", inputs)(0)
    assert relative_error(inputs, shape, seed=3, got=got) < dt.rel_tolerance
    torch.testing.assert_close(got, a @ b)


def test_a_cpu_sweep_over_four_layouts_keeps_each(tmp_path) -> None:
    out = tmp_path / "lay.json"
    run = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--dtype", "fp32", "--layout", "nn,nt",
                                    "--layout", "tn,tt", "--shape", "64x48x32", "--budget-s", "0.02",
                                    "--min-samples", "3", "--isolate", "none", "--quiet", "--repeats", "1",
                                    "-o", str(out)])
    assert run.exit_code == 0, run.output
    [sweep] = load_sweeps([out])
    assert sorted(r.shape.layout for r in sweep.records) == list(LAYOUTS)
    assert all(r.status == "ok" for r in sweep.records)
    assert validate_file(out) == []
    keys = sorted(group_series([sweep]))
    assert [k.mode for k in keys] == ["eager", "eager-nt", "eager-tn", "eager-tt"]
    raw = json.loads(out.read_text())["records"]
    assert {r["shape"].get("layout", "nn") for r in raw} == set(LAYOUTS)


def test_bad_layout_option_is_a_one_line_error() -> None:
    out = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--layout", "nq", "--dry-run"])
    assert out.exit_code == 2 and "Invalid value for --layout: layout 'nq' is not one of nn, nt, tn, tt" \
        in out.output and "Traceback" not in out.output


# ----- series and comparisons per layout (SYNTHETIC) --------------------------------------------------
def _docs(label: str, slow_nt: float, seed: int) -> list[dict]:
    """SYNTHETIC: one label measured in nn and in nt; nt ``slow_nt`` times slower than the roofline."""
    shapes = square_shapes(np.geomspace(1e8, 1e12, 12))
    base = {"P_tflops": 500, "W_tbs": 2.0, "t0_s": 5e-6, "noise_model": NOISE_MODELS["per-shape 2%"], "repeats": 3}
    nn = make_sweep_doc(label, shapes=shapes, seed=seed, **base)
    nt = make_sweep_doc(label, shapes=[with_layout(s, "nt") for s in shapes], seed=seed + 1,
                        time_fn=lambda f, b: slow_nt * (5e-6 + max(f / 500e12, b / 2e12)), **base)
    return [nn, nt]


def test_layouts_are_their_own_series_and_get_their_own_verdicts() -> None:
    sweeps = [s for d in _docs("a", 1.0, 1) + _docs("b", 1.4, 5) for s in parse_document(d)]
    series = group_series(sweeps)
    assert sorted(series) == [SeriesKey("a", "bf16", "eager"), SeriesKey("a", "bf16", "eager-nt"),
                              SeriesKey("b", "bf16", "eager"), SeriesKey("b", "bf16", "eager-nt")]
    assert all(len({r.shape.layout for r in s.records}) == 1 for s in series.values())  # never pooled
    comps = {c.mode: c for c in compare_all(sweeps, "tflops", use_fit=False)}
    assert sorted(comps) == ["eager", "eager-nt"]  # a-nn is never paired with b-nt
    assert all(p.shape.endswith(":nt") for p in comps["eager-nt"].points)
    assert comps["eager-nt"].lead_summary().share_a > 0.9  # b's nt is 40% slower: a leads there
    assert comps["eager"].lead_summary().share_a < 0.1 and comps["eager"].lead_summary().share_b < 0.1


def test_figures_and_filters_see_each_layout() -> None:
    from mfu_sweep.present.figures.mfu import plot_mfu
    from mfu_sweep.records.summaries import available, filter_sweeps

    sweeps = [s for d in _docs("a", 1.0, 1) for s in parse_document(d)]
    assert available(sweeps, "mode") == ["eager", "eager-nt"]
    only_nt = filter_sweeps(sweeps, modes=["eager-nt"])
    assert {r.shape.layout for sw in only_nt for r in sw.records} == {"nt"}
    assert sum(len(sw.records) for sw in filter_sweeps(sweeps, modes=["eager"])) == 2 * 12 * 3  # every layout
    ax = plot_mfu(sweeps, dtype="bf16", mode="eager-nt", show_fit=False, show_compare=False)
    assert ax.get_title() == "bf16 · eager-nt" and ax.lines


def test_a_layouts_mfu_panel_is_drawn_where_its_device_has_a_peak() -> None:
    """The MFU panel and heatmap checks look at a layout's own series (eager-nt), not at the bare mode: a sweep
    with a peak gets no 'no device has a peak' note for its nt and tn series, and one choice of featured devices
    and colours covers each of them."""
    from mfu_sweep.present.figures.arrange import blank_notes, valued
    from mfu_sweep.present.figures.choice import choose_figures

    sweeps = [s for d in _docs("a", 1.0, 1) for s in parse_document(d)]
    assert {m for _, _, m in valued(sweeps, lambda _d, _m: "mfu")} == {"eager", "eager-nt"}
    assert blank_notes(sweeps) == []
    choice = choose_figures(sweeps)
    assert choice.featured is None or ("bf16", "eager-nt") in choice.featured


def test_a_grouped_shape_round_trips_and_refuses_inconsistent_groups() -> None:
    g = Shape(1, 96, 40, 24, "nt", (32, 0, 48, 16))
    assert str(g) == "96x40x24:nt:m=32,0,48,16" and parse_shape(str(g)) == g and Shape.from_json(g.to_json()) == g
    balanced = Shape(1, 2048, 8, 8, "nn", (512,) * 4)
    assert str(balanced) == "2048x8x8:m=512*4" and parse_shape(str(balanced)) == balanced
    k = parse_shape("8x8x100:tn:k=70,30")
    assert (k.group_dim, k.groups, k.operand_elements()) == ("k", (70, 30), (800, 800, 2 * 64))
    for bad, fragment in [("96x40x24:m=32,48", "groups sum to 80, not m=96"), ("2x96x40x24:m=96", "batch 1"),
                          ("8x8x8:q=8", "must be m=SIZES or k=SIZES"), ("8x8x8:m=4*x", "'4*x' is not SIZE")]:
        with pytest.raises(ShapeError, match=".*") as err:
            parse_shape(bad)
        assert fragment in str(err.value), bad
