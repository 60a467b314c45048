"""Figures: what each plot function draws, the figure set, file formats, and the ``plot`` command.

All inputs are SYNTHETIC sweeps from tests/synthetic.py (made-up numbers).
"""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from synthetic import make_sweep_doc, write_sweep  # noqa: E402

from mfu_sweep.analysis.ground.series import group_series  # noqa: E402
from mfu_sweep.cli import main  # noqa: E402
from mfu_sweep.present.figures import plot as P  # noqa: E402
from mfu_sweep.records.results import Sweep, parse_document  # noqa: E402

FLOPS = [float(f) for f in np.geomspace(1e6, 1e12, 10)]
# the pair's 40 shapes: its FLOP bands lean each way, so its crossover is the data's (a fit crossover needs
# the data to lean both ways, issue 35; ten shapes measured once are one band)
PAIR_FLOPS = [float(f) for f in np.geomspace(1e6, 1e12, 40)]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
GRID = [f"{m}x{n}x{k}" for k in (256, 512) for m in (256, 512, 1024) for n in (256, 512, 1024)]


def doc(label: str, **kw: Any) -> dict[str, Any]:
    """Synthetic sweeps: chip-a has the low overhead (leads small GEMMs), chip-b the high ceiling."""
    base = {
        "chip-a": {"P_tflops": 100.0, "W_tbs": 1.0, "t0_s": 2e-6, "peak_tflops": 200.0, "bandwidth_tbs": 1.2},
        "chip-b": {"P_tflops": 400.0, "W_tbs": 3.0, "t0_s": 5e-5, "peak_tflops": 500.0, "bandwidth_tbs": 3.5},
        "chip-c": {"P_tflops": 250.0, "W_tbs": 2.0, "t0_s": 1e-5},
    }.get(label, {"P_tflops": 250.0, "W_tbs": 2.0, "t0_s": 1e-5})
    args = {"n_samples": 10, "seed": sum(map(ord, label)) + len(kw), **base, **kw}
    if "shapes" not in kw and "flops" not in kw:
        args["flops"] = FLOPS
    return make_sweep_doc(label, **args)


def sweeps_of(*docs: dict[str, Any]) -> list[Sweep]:
    return [sw for d in docs for sw in parse_document(d)]


def new_ax() -> Axes:
    return Figure(figsize=(3.5, 2.6), layout="constrained").subplots()


@pytest.fixture(scope="module")
def pair() -> list[Sweep]:
    return sweeps_of(doc("chip-a", flops=PAIR_FLOPS), doc("chip-b", flops=PAIR_FLOPS),
                     doc("chip-a", flops=PAIR_FLOPS, mode="compile", P_tflops=120.0, t0_s=6e-6))


@pytest.fixture(scope="module")
def pair_analysis(pair: list[Sweep]) -> Any:
    from mfu_sweep.present.report.write import analyse

    return analyse(pair, fit_n_boot=20)


@pytest.fixture(scope="module")
def failing() -> list[Sweep]:
    statuses = ["ok"] * 6 + ["timeout", "oom", "mismatch", "error"]
    return sweeps_of(doc("chip-c", statuses=statuses))


@pytest.fixture(scope="module")
def grid() -> list[Sweep]:
    statuses = ["ok"] * len(GRID)
    statuses[GRID.index("1024x1024x512")] = "oom"
    return sweeps_of(doc("chip-g", shapes=GRID, statuses=statuses))


@pytest.fixture(scope="module")
def all_figures(pair: list[Sweep], pair_analysis: Any, failing: list[Sweep], grid: list[Sweep]) -> dict[str, Figure]:
    sweeps = pair + failing + grid
    fits = {**pair_analysis.fits}
    return P.make_figures(sweeps, fits=fits, comparisons=pair_analysis.comparisons)


def labelled_errorbars(ax: Axes) -> dict[str, ErrorbarContainer]:
    return {c.get_label(): c for c in ax.containers if isinstance(c, ErrorbarContainer)}


def gids(ax: Axes, prefix: str) -> list[Any]:
    return [a for a in [*ax.lines, *ax.patches, *ax.collections] if (a.get_gid() or "").startswith(prefix)]


# -- helpers -------------------------------------------------------------------------------


def test_format_si_and_decade_ticks() -> None:
    assert P.format_si(1e6, "FLOP") == "1 MFLOP"
    assert P.format_si(2e9, "FLOP") == "2 GFLOP"
    assert P.format_si(1e12, "FLOP") == "1 TFLOP"
    assert P.format_si(500, "FLOP") == "500 FLOP"
    loc = P.DecadeLocator(max_ticks=5)
    assert loc.tick_values(1e6, 1e12) == [1e6, 1e9, 1e12]  # stride 3 keeps SI boundaries
    assert loc.tick_values(1e6, 1e9) == [1e6, 1e7, 1e8, 1e9]
    assert loc.tick_values(1.1, 9) == [2, 5]  # under a decade: 1-2-5
    assert 1.0 in P.RatioLocator().tick_values(0.04, 2.0)
    assert P.percent_decimals([0.0, 0.0025, 0.005, 0.0125]) == 2
    assert P.percent_decimals([0.0, 0.25, 0.5]) == 0


def test_series_colors_are_fixed_and_colour_blind_palette() -> None:
    a = P.series_colors(["zeta", "alpha", "mid"])
    b = P.series_colors(["mid", "zeta", "alpha", "mid"])
    assert a == b
    assert a["alpha"] == P.PALETTE[0] and a["mid"] == P.PALETTE[1] and a["zeta"] == P.PALETTE[2]


def test_theme_is_legible_at_column_width() -> None:
    rc = P.theme_rc()
    assert min(rc["font.size"], rc["xtick.labelsize"], rc["ytick.labelsize"], rc["legend.fontsize"]) >= 7
    assert rc["svg.hashsalt"]


# -- 1. MFU vs FLOPs -------------------------------------------------------------------------


def test_plot_mfu_draws_series_fits_crossovers_and_leader_strip(pair: list[Sweep], pair_analysis: Any) -> None:
    ax = P.plot_mfu(pair, dtype="bf16", mode="eager", fits=pair_analysis.fits,
                    comparisons=pair_analysis.comparisons, ax=new_ax())
    assert set(labelled_errorbars(ax)) == {"chip-a", "chip-b"}
    assert ax.get_xscale() == "log"
    assert "MFU" in ax.get_ylabel() and "%" in ax.get_ylabel() and "vendor spec peak" in ax.get_ylabel()
    assert "FLOP" in ax.get_xlabel()
    assert "bf16" in ax.get_title() and "eager" in ax.get_title()
    assert len(gids(ax, "fit:")) == 2
    comps = [c for c in pair_analysis.comparisons if c.mode == "eager"]
    expected = sorted(x.flops for c in comps for x in c.crossovers)
    assert expected, "the synthetic pair must cross"
    drawn = sorted(line.get_xdata()[0] for line in gids(ax, "crossover:"))
    assert drawn == pytest.approx(expected)
    assert len(gids(ax, "crossover-interval:")) == len(expected)
    spans = P.leader_spans(comps)
    strips = gids(ax, "leader:")
    assert [s.get_gid() for s in strips] == [f"leader:{lab}" for *_, lab in spans]
    colors = P.series_colors(sw.label for sw in pair)
    assert all(matplotlib.colors.to_hex(s.get_facecolor()) == colors[s.get_gid()[7:]] for s in strips)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert {"chip-a", "chip-b", "roofline fit", "bars: 95% CI of median"} <= set(legend)
    assert any("crossover" in t for t in legend) and any("leading device" in t for t in legend)
    # example_pair has no pass index: the verdicts rest on the scatter of shapes, and the legend says so
    assert any("leading device" in t and "run-to-run variation not measured" in t for t in legend)
    ax.figure.canvas.draw()
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ticks and all(t.endswith("FLOP") for t in ticks)


def test_the_leader_strip_hatches_a_lead_that_only_adjacent_bands_taken_together_show() -> None:
    """REAL published DeepBench fp32 (cited import), AMD_MI25 vs NV_TitanX_Pascal: MI25's lead from 8.4 MFLOP to
    3.2 GFLOP is the conclusion of a run of three bands, none called alone; the strip draws it hatched, as the
    sentence says "taken together", and NV_TitanX_Pascal's own-band lead above 100 GFLOP plain."""
    from mfu_sweep.analysis.verdicts.compare import compare_series
    from mfu_sweep.present.figures.mfu import together_spans
    from mfu_sweep.records.results import load_sweeps

    published = Path(__file__).resolve().parents[1] / "sweeps" / "published"
    sweeps = load_sweeps([str(published / f"{n}.json") for n in ("AMD_MI25", "NV_TitanX_Pascal")])
    series = group_series(sweeps)
    sa, sb = (next(s for k, s in series.items() if k.label == x and k.dtype == "fp32")
              for x in ("AMD_MI25", "NV_TitanX_Pascal"))
    c = compare_series(sa, sb, "tflops", use_fit=False)
    ax = P.plot_mfu(sweeps, dtype="fp32", mode="eager", metric="tflops", comparisons=[c], show_fit=False,
                    ax=new_ax())
    hatched = gids(ax, "leader-together:")
    assert hatched and {h.get_gid() for h in hatched} == {"leader-together:AMD_MI25"}
    assert all(h.get_hatch() for h in hatched)
    spans = together_spans([c], P.leader_spans([c]))  # the three bands of the run, 3.2 MFLOP to 3.2 GFLOP
    assert len(spans) == len(hatched) == 3 and all(3.1e6 < lo < hi < 3.2e9 for lo, hi, _ in spans)
    assert any("taken together" in t.get_text() for t in ax.get_legend().get_texts())
    assert [s.get_gid() for s in gids(ax, "leader:")] == ["leader:AMD_MI25", "leader:NV_TitanX_Pascal"]


def test_plot_mfu_marks_estimated_and_mixed_peaks() -> None:
    est = doc("chip-b")
    est["peak"]["estimated"] = True
    ax = P.plot_mfu(sweeps_of(est), show_fit=False, show_compare=False, ax=new_ax())
    assert "estimated peak" in ax.get_ylabel()
    ax = P.plot_mfu(sweeps_of(doc("chip-a"), est), show_fit=False, show_compare=False, ax=new_ax())
    assert set(labelled_errorbars(ax)) == {"chip-a", "chip-b (estimated peak)"}
    assert "estimated" in ax.get_ylabel() and "vendor spec" in ax.get_ylabel()


def test_plot_mfu_tflops_metric_and_interval_points(pair: list[Sweep]) -> None:
    ax = P.plot_mfu(pair, dtype="bf16", mode="eager", metric="tflops", show_fit=False, show_compare=False,
                    ax=new_ax())
    assert ax.get_ylabel() == "Throughput (TFLOP/s)"
    series = group_series(pair)
    rec = next(s for k, s in series.items() if k.label == "chip-a" and k.mode == "eager").records[3]
    line = labelled_errorbars(ax)["chip-a"].lines[0]
    i = list(line.get_xdata()).index(rec.flops)
    assert line.get_ydata()[i] == pytest.approx(rec.tflops)
    with pytest.raises(ValueError, match="several modes"):
        P.plot_mfu(pair, dtype="bf16", ax=new_ax())


# -- 2. roofline -------------------------------------------------------------------------------


def test_plot_roofline_draws_spec_and_fitted_roofs_with_ridges(pair: list[Sweep], pair_analysis: Any) -> None:
    ax = P.plot_roofline(pair, dtype="bf16", mode="eager", fits=pair_analysis.fits, ax=new_ax())
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_ylabel() == "Throughput (TFLOP/s)" and "FLOP/byte" in ax.get_xlabel()
    assert set(labelled_errorbars(ax)) == {"chip-a", "chip-b"}
    assert len(gids(ax, "roof:spec")) == 2
    ridges = sorted(float(line.get_xdata()[0]) for line in gids(ax, "ridge:spec"))
    assert ridges == pytest.approx(sorted([200.0 / 1.2, 500.0 / 3.5]))
    fitted = [f for k, f in pair_analysis.fits.items() if k.mode == "eager"]
    n_fit_ridges = sum(f.constrained["p_tflops"] and f.constrained["w_tbs"] for f in fitted)
    assert len(gids(ax, "ridge:fit")) == n_fit_ridges
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "spec roof: vendor spec peak, in the device's colour" in legend
    assert "fitted roof min(P, W × intensity), without t0" in legend


# -- 3./4. first call and compile speedup ----------------------------------------------------------


def test_plot_first_call_time_and_ratio(pair: list[Sweep]) -> None:
    ax = P.plot_first_call(pair, quantity="time", ax=new_ax())
    assert set(labelled_errorbars(ax)) == {"chip-a · eager", "chip-a · compile", "chip-b · eager"}
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "First call (s)"
    ax = P.plot_first_call(pair, quantity="ratio", ax=new_ax())
    assert "×" in ax.get_ylabel() and ax.get_xscale() == "log"
    with pytest.raises(ValueError, match="quantity"):
        P.plot_first_call(pair, quantity="bogus")


def test_plot_speedup_is_eager_over_compiled_time(pair: list[Sweep]) -> None:
    ax = P.plot_speedup(pair, ax=new_ax())
    bars = labelled_errorbars(ax)
    assert set(bars) == {"chip-a"}
    groups = group_series(pair)
    eager = next(s for k, s in groups.items() if k.label == "chip-a" and k.mode == "eager")
    comp = next(s for k, s in groups.items() if k.label == "chip-a" and k.mode == "compile")
    expected = [e.median_s / c.median_s for e, c in zip(eager.records, comp.records, strict=True)]
    assert list(bars["chip-a"].lines[0].get_ydata()) == pytest.approx(expected)
    assert "speedup" in ax.get_ylabel().lower() and ax.get_yscale() == "log"
    assert P.has_speedup(pair) and not P.has_speedup(pair[:2])
    ax = P.plot_speedup(pair[:2], ax=new_ax())  # nothing to compare: a message, not an error
    assert "no device with both" in ax.texts[0].get_text()


# -- 5. heatmap ----------------------------------------------------------------------------------


def test_heatmap_over_m_n_at_each_k(grid: list[Sweep]) -> None:
    assert P.grid_ks(grid, label="chip-g", dtype="bf16", mode="eager") == [256, 512]
    assert P.heatmap_grids(grid) == [("chip-g", "bf16", "eager", 256), ("chip-g", "bf16", "eager", 512)]
    ax = P.plot_heatmap(grid, k=512, ax=new_ax())
    values = ax.collections[0].get_array().reshape(3, 3)
    rec = next(r for r in grid[0].records if str(r.shape) == "256x1024x512")
    # rows are m from large to small, columns n from small to large
    assert values[2, 2] == pytest.approx(rec.mfu * 100)
    assert np.ma.is_masked(values[0, 2])  # 1024x1024x512 failed
    assert "OOM" in [t.get_text() for t in ax.texts]
    assert "k=512" in ax.get_title() and ax.get_xlabel() == "n" and ax.get_ylabel() == "m"
    cbar_label = ax.figure.axes[-1].get_ylabel()
    assert "MFU" in cbar_label and "vendor spec peak" in cbar_label


# -- 6. status -----------------------------------------------------------------------------------


def test_status_overview_counts_each_status(failing: list[Sweep], pair: list[Sweep]) -> None:
    assert P.has_failures(failing) and not P.has_failures(pair)
    ax = P.plot_status(failing + pair, ax=new_ax())
    labels = {c.get_label() for c in ax.collections}
    assert labels == {f"ok ({6 + 3 * len(PAIR_FLOPS)})", "timeout (1)", "oom (1)", "mismatch (1)", "error (1)"}
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "chip-a · bf16 · eager", "chip-a · bf16 · compile", "chip-b · bf16 · eager", "chip-c · bf16 · eager"]
    assert ax.get_xscale() == "log"


# -- the figure set ------------------------------------------------------------------------------


def test_make_figures_names_and_fixed_colours(all_figures: dict[str, Figure]) -> None:
    assert set(all_figures) == {"mfu-vs-flops", "roofline", "first-call", "speedup", "status",
                                "heatmap-chip-g-bf16-eager-k256", "heatmap-chip-g-bf16-eager-k512"}
    colors = P.series_colors(["chip-a", "chip-b", "chip-c", "chip-g"])
    for name in ("mfu-vs-flops", "roofline"):
        legend = all_figures[name].legends[0]
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
            if text.get_text() in colors:
                assert matplotlib.colors.to_hex(handle.get_color()) == colors[text.get_text()], (name, text)
    mfu = all_figures["mfu-vs-flops"]
    assert [ax.get_title() for ax in mfu.axes] == ["bf16 · eager", "bf16 · compile"]
    assert mfu.get_figwidth() == pytest.approx(P.DOUBLE_IN)


def _overlaps(boxes: list[Any]) -> list[tuple[int, int]]:
    return [(i, j) for (i, a), (j, b) in itertools.combinations(enumerate(boxes), 2) if a.overlaps(b)]


def test_no_overlapping_tick_labels_or_titles(all_figures: dict[str, Figure]) -> None:
    for name, fig in all_figures.items():
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                boxes = [t.get_window_extent(renderer) for t in axis.get_ticklabels() if t.get_text()]
                assert not _overlaps(boxes), (name, ax.get_title())
        legend_box = fig.legends[0].get_window_extent(renderer) if fig.legends else None
        for ax in fig.axes:
            if legend_box is not None:
                assert not legend_box.overlaps(ax.get_window_extent(renderer)), name


def test_single_series_and_failed_records_still_render(failing: list[Sweep]) -> None:
    figs = P.make_figures(failing, fits={}, comparisons=[])
    assert set(figs) == {"mfu-vs-flops", "roofline", "first-call", "status"}
    ax = figs["mfu-vs-flops"].axes[0]
    assert set(labelled_errorbars(ax)) == {"chip-c"} and ax.get_legend() is None  # moved to the figure legend
    assert not gids(ax, "crossover") and not gids(ax, "leader:")
    texts = [t.get_text() for t in figs["mfu-vs-flops"].legends[0].get_texts()]
    assert "chip-c" in texts


def test_filter_sweeps_names_the_filter(pair: list[Sweep]) -> None:
    assert {r.mode for sw in P.filter_sweeps(pair, modes=["compile"]) for r in sw.records} == {"compile"}
    with pytest.raises(ValueError, match=r"--dtype fp16 matches no records \(present: bf16\)"):
        P.filter_sweeps(pair, dtypes=["fp16"])


# -- files ---------------------------------------------------------------------------------------


def test_saved_files_are_valid_and_deterministic(tmp_path: Path, failing: list[Sweep]) -> None:
    def render(directory: Path) -> list[Path]:
        fig = Figure(figsize=(3.5, 2.6), layout="constrained")
        with P.theme():
            P.plot_status(failing, ax=fig.subplots())
        return P.save_figure(fig, directory, "status", P.FORMATS)

    first, second = render(tmp_path / "one"), render(tmp_path / "two")
    png, pdf, svg = first
    assert png.read_bytes().startswith(PNG_MAGIC)
    assert pdf.read_bytes().startswith(b"%PDF-")
    assert ET.parse(svg).getroot().tag.endswith("svg")
    for a, b in zip(first, second, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.suffix
    with pytest.raises(ValueError, match="format 'gif'"):
        P.save_figure(Figure(), tmp_path, "x", ["gif"])


# -- the command ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("sweeps")
    return [str(write_sweep(d, doc(label, flops=FLOPS[::2], n_samples=5))) for label in ("chip-a", "chip-b")]


def test_plot_command_writes_every_format(files: list[str], tmp_path: Path) -> None:
    out = tmp_path / "plots"
    res = CliRunner().invoke(main, ["plot", *files, "-o", str(out), "--format", "png", "--format", "svg",
                                    "--n-boot", "10"])
    assert res.exit_code == 0, res.output
    names = sorted(p.name for p in out.iterdir())
    assert names == ["first-call.png", "first-call.svg", "mfu-vs-flops.png", "mfu-vs-flops.svg",
                     "roofline.png", "roofline.svg"]
    assert f"wrote {out / 'roofline.svg'}" in res.output
    assert (out / "mfu-vs-flops.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize("case", ["missing", "invalid-json", "unknown-dtype", "output-is-file", "output-under-file"])
def test_plot_command_bad_input_is_one_line(case: str, files: list[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    args = {
        "missing": [str(tmp_path / "nope.json")],
        "invalid-json": [str(bad)],
        "unknown-dtype": [*files, "--dtype", "fp16"],
        "output-is-file": [*files, "-o", str(blocker)],
        "output-under-file": [*files, "-o", str(blocker / "sub")],
    }[case]
    if "-o" not in args:
        args += ["-o", str(tmp_path / "out")]
    res = CliRunner().invoke(main, ["plot", *args])
    assert res.exit_code != 0
    assert "Traceback" not in res.output and not isinstance(res.exception, (TypeError, AttributeError, KeyError))
    errors = [ln for ln in res.output.splitlines() if ln.startswith("Error")]
    assert len(errors) == 1, res.output
    expected = {"missing": "no such file", "invalid-json": "not valid JSON", "unknown-dtype": "matches no records",
                "output-is-file": "not a directory", "output-under-file": "cannot be created"}[case]
    assert expected in res.output


def test_plot_command_help_has_example() -> None:
    res = CliRunner().invoke(main, ["plot", "--help"])
    assert res.exit_code == 0 and "Example:" in res.output and "mfu-sweep plot" in res.output


def test_passes_of_a_repeats_sweep_are_one_point_per_shape_with_their_range() -> None:
    from synthetic import NOISE_MODELS

    sweeps = sweeps_of(doc("chip-a", repeats=3, noise_model=NOISE_MODELS["per-shape 5%"]))
    (series,) = group_series(sweeps).values()
    assert len(series.records) == 3 * len(FLOPS)
    from mfu_sweep.present.figures.select import metric_points

    xs, ys, bars, kinds = metric_points(series, "tflops")
    assert len(xs) == len(FLOPS) and kinds == {"passes"}
    first = [r for r in series.records if r.shape == series.records[0].shape]
    tflops = sorted(r.flops / r.median_s / 1e12 for r in first)
    assert ys[0] == pytest.approx(tflops[1])
    assert (ys[0] - bars[0][0], ys[0] + bars[1][0]) == pytest.approx((tflops[0], tflops[-1]))
    ax = P.plot_mfu(sweeps, metric="tflops", ax=new_ax())
    assert "range over passes" in " ".join(t.get_text() for t in ax.get_legend().get_texts())


def test_plot_figure_option_draws_only_the_kinds_asked_for(tmp_path: Path) -> None:
    files = [write_sweep(tmp_path, doc(lab)) for lab in ("chip-a", "chip-b")]
    out = tmp_path / "figs"
    done = CliRunner().invoke(main, ["plot", *map(str, files), "-o", str(out), "--figure", "roofline"])
    assert done.exit_code == 0, done.output
    assert sorted(p.name for p in out.iterdir()) == ["roofline.png"]
    bad = CliRunner().invoke(main, ["plot", *map(str, files), "-o", str(out), "--figure", "pie"])
    assert bad.exit_code == 2 and "'pie' is not one of" in bad.output


def test_a_long_legend_key_widens_a_one_panel_figure_instead_of_being_cut_off() -> None:
    from mfu_sweep.present.figures.arrange import figure_legend
    from mfu_sweep.present.figures.theme import COLUMN_IN

    fig = Figure(figsize=(COLUMN_IN, 2.6), layout="constrained")
    ax = fig.subplots()
    ax.plot([1, 2], [1, 2], label="a device")
    ax.plot([1, 2], [2, 1], label="x" * 150)
    ax.legend()
    figure_legend(fig, [ax])
    assert COLUMN_IN < fig.get_figwidth() <= P.DOUBLE_IN
    (legend,) = fig.legends
    assert max(len(line) for t in legend.get_texts() for line in t.get_text().splitlines()) < 150


def test_panels_with_different_bars_share_one_legend_key() -> None:
    from mfu_sweep.present.figures.arrange import _merge_bar_keys

    merged = _merge_bar_keys({"chip": 1, "bars: 95% CI of median": 2, "fit": 3,
                              "bars: 95% CI of median / range over passes": 4})
    assert merged == {"chip": 1, "bars: 95% CI of median / range over passes": 2, "fit": 3}


def test_speedup_of_repeats_sweeps_uses_the_median_of_the_passes() -> None:
    from synthetic import NOISE_MODELS

    from mfu_sweep.analysis.ground.series import shape_seconds
    from mfu_sweep.present.figures.compile import speedup_points

    noise = NOISE_MODELS["per-shape 5%"]
    series = group_series(sweeps_of(doc("chip-a", repeats=3, noise_model=noise),
                                    doc("chip-a", mode="compile", P_tflops=120.0, repeats=3, noise_model=noise)))
    eager, compiled = (series[k] for k in sorted(series, key=lambda k: k.mode != "eager"))
    (flops, ratio, low, high), *_ = speedup_points(eager, compiled)
    passes_e = [r for r in eager.records if r.flops == flops]
    passes_c = [r for r in compiled.records if r.flops == flops]
    assert len(passes_e) == len(passes_c) == 3
    assert ratio == pytest.approx(shape_seconds(passes_e) / shape_seconds(passes_c))
    assert low <= ratio <= high


def test_plot_of_a_figure_the_sweeps_do_not_give_is_refused_before_fitting(tmp_path: Path) -> None:
    """SYNTHETIC sweep with every record ok: no status overview to draw. ``plot --figure status`` says so in one
    line, names what the sweeps do give, exits 1 and writes nothing (it used to exit 0 with no file, no word)."""
    path = write_sweep(tmp_path, make_sweep_doc("chip-a", seed=1, P_tflops=600, W_tbs=2.0, t0_s=8e-6))
    out = tmp_path / "figs"
    res = CliRunner().invoke(main, ["plot", str(path), "--figure", "status", "-o", str(out)])
    assert res.exit_code == 1, res.output
    assert "nothing to draw: these sweeps give no figure for --figure status; they give: mfu-vs-flops" in res.output
    assert "fitting" not in res.output and not out.exists()


# -- blank figures and distinct colours (issue 35) -------------------------------------------------------

PUBLISHED = Path(__file__).resolve().parents[1] / "sweeps" / "published"


def _lab(color: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB colour."""
    rgb = [((v + 0.055) / 1.055) ** 2.4 if v > 0.04045 else v / 12.92 for v in matplotlib.colors.to_rgb(color)]
    xyz = (np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ rgb
           / np.array([0.95047, 1.0, 1.08883]))
    f = np.where(xyz > 216 / 24389, np.cbrt(xyz), (24389 / 27 * xyz + 16) / 116)
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def delta_e(c1: str, c2: str) -> float:
    """CIEDE2000 colour difference of two sRGB colours; about 2 is just noticeable, 20 plainly another colour."""
    return de2000(_lab(c1), _lab(c2))


def de2000(lab1: tuple[float, float, float], lab2: tuple[float, float, float]) -> float:
    """CIEDE2000 of two L*a*b* colours (Sharma, Wu and Dalal 2005)."""
    (l1, a1, b1), (l2, a2, b2) = lab1, lab2
    cbar = (np.hypot(a1, b1) + np.hypot(a2, b2)) / 2
    g = 0.5 * (1 - np.sqrt(cbar**7 / (cbar**7 + 25**7)))
    a1p, a2p = (1 + g) * a1, (1 + g) * a2
    c1p, c2p = np.hypot(a1p, b1), np.hypot(a2p, b2)
    h1p, h2p = np.degrees(np.arctan2(b1, a1p)) % 360, np.degrees(np.arctan2(b2, a2p)) % 360
    dh = 0.0 if c1p * c2p == 0 else (h2p - h1p + 180) % 360 - 180
    dhp = 2 * np.sqrt(c1p * c2p) * np.sin(np.radians(dh / 2))
    lbar, cbarp = (l1 + l2) / 2, (c1p + c2p) / 2
    hbar = (h1p + h2p + (360 if abs(h1p - h2p) > 180 else 0)) / 2 if c1p * c2p else h1p + h2p
    t = (1 - 0.17 * np.cos(np.radians(hbar - 30)) + 0.24 * np.cos(np.radians(2 * hbar))
         + 0.32 * np.cos(np.radians(3 * hbar + 6)) - 0.20 * np.cos(np.radians(4 * hbar - 63)))
    rt = (-np.sin(np.radians(60 * np.exp(-(((hbar - 275) / 25) ** 2))))
          * 2 * np.sqrt(cbarp**7 / (cbarp**7 + 25**7)))
    sl = 1 + 0.015 * (lbar - 50) ** 2 / np.sqrt(20 + (lbar - 50) ** 2)
    sc, sh = 1 + 0.045 * cbarp, 1 + 0.015 * cbarp * t
    dl, dc, dhh = (l2 - l1) / sl, (c2p - c1p) / sc, dhp / sh
    return float(np.sqrt(dl**2 + dc**2 + dhh**2 + rt * dc * dhh))


def test_delta_e_matches_the_published_test_data() -> None:
    """Pairs 1, 7 and 17 of Sharma, Wu and Dalal's CIEDE2000 test data, and what the eye sees: seaborn's orange
    and tan close, blue and orange far, black and white 100 apart."""
    assert de2000((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485)) == pytest.approx(2.0425, abs=1e-4)
    assert de2000((50.0, 0.0, 0.0), (50.0, -1.0, 2.0)) == pytest.approx(2.3669, abs=1e-4)
    assert de2000((50.0, 2.5, 0.0), (73.0, 25.0, -18.0)) == pytest.approx(27.1492, abs=1e-4)
    assert delta_e("#000000", "#000000") == 0
    assert delta_e("#de8f05", "#ca9161") < 15 < 50 < delta_e("#0072b2", "#e69f00")
    assert delta_e("#ffffff", "#000000") == pytest.approx(100, abs=0.5)


def test_every_two_palette_colours_are_plainly_different() -> None:
    pairs = {(a, b): delta_e(a, b) for a, b in itertools.combinations(P.PALETTE, 2)}
    assert min(pairs.values()) >= 20, min(pairs.items(), key=lambda kv: kv[1])
    from mfu_sweep.present.figures.theme import ANNOTATION_GREY

    assert min(delta_e(c, ANNOTATION_GREY) for c in P.PALETTE) >= 20 and len(set(P.PALETTE)) == len(P.PALETTE) >= 8


def test_devices_drawn_together_get_distinct_colours_b200_and_gfx950_above_all() -> None:
    """On the published data the headline crossover pair (B200, gfx950) were two near-identical oranges
    (CIEDE2000 15); every two devices that share a dtype and mode now differ by at least 20."""
    from mfu_sweep.present.figures.select import label_colors
    from mfu_sweep.records.results import load_sweeps

    sweeps = load_sweeps(sorted(str(p) for p in PUBLISHED.glob("*.json")))
    colors = label_colors(sweeps, None)
    assert delta_e(colors["sm_100_B200"], colors["gfx950"]) >= 20
    panels: dict[tuple[str, str], set[str]] = {}
    for sw in sweeps:
        for r in sw.records:
            panels.setdefault((r.dtype, r.mode), set()).add(sw.label)
    for key, labels in panels.items():
        shown = sorted(labels)[:len(P.PALETTE)]  # a panel of more devices than colours must repeat one
        for a, b in itertools.combinations(shown, 2):
            assert delta_e(colors[a], colors[b]) >= 20, (key, a, b)


def test_colours_are_distinct_per_panel_and_repeat_only_beyond_the_palette() -> None:
    assert P.series_colors(["x", "a", "b"]) == {"a": P.PALETTE[0], "b": P.PALETTE[1], "x": P.PALETTE[2]}
    two = P.series_colors(["a", "b", "c", "d"], [{"a", "b"}, {"c", "d"}])
    assert two["a"] != two["b"] and two["c"] != two["d"] and two["a"] == two["c"] == P.PALETTE[0]
    many = [f"gpu{i:02d}" for i in range(len(P.PALETTE) + 3)]
    crowd = P.series_colors(many, [set(many)])
    assert len(set(crowd.values())) == len(P.PALETTE)  # every colour used, none more than twice
    assert max(list(crowd.values()).count(c) for c in P.PALETTE) == 2


def test_a_figure_whose_metric_has_no_values_is_not_drawn_and_a_note_says_so() -> None:
    """DeepBench's MI25 table names no peak: by MFU its heatmaps were blank ("MFU (% of none peak)"). plot skips
    them and the vs-flops panel, with a note; the report draws them by TFLOP/s (its metric for that dtype)."""
    from mfu_sweep.present.figures.arrange import blank_notes, figure_stems
    from mfu_sweep.present.figures.choice import FigureChoice
    from mfu_sweep.present.group_metric import group_metrics
    from mfu_sweep.records.results import load_sweeps

    mi25 = load_sweeps([str(PUBLISHED / "AMD_MI25.json")])
    grids = P.heatmap_grids(mi25)
    assert len(grids) == 8 and not mi25[0].peak.for_dtype("fp32")
    assert P.make_figures(mi25, metric="mfu", kinds=["heatmap", "vs-flops"], fits={}, comparisons=[],
                          fleets=[]) == {}
    assert figure_stems(mi25, metric="mfu", kinds=["heatmap", "vs-flops"]) == []
    notes = blank_notes(mi25, "mfu")
    assert any("no MFU panel for fp32 · eager" in n for n in notes)
    assert any(n.startswith("8 MFU heatmaps not drawn") and "AMD_MI25 fp32 eager (k 512, 1536," in n for n in notes)
    by_group = group_metrics(group_series(mi25), "mfu")
    two = FigureChoice(None, tuple(grids[:2]), tuple(grids))  # two are enough to see the metric they are drawn in
    drawn = P.make_figures(mi25, metric="mfu", kinds=["heatmap"], fits={}, comparisons=[], fleets=[],
                           metrics=by_group, choice=two)
    assert len(drawn) == 2  # (an imported table times no first call: that note stays, issue 47)
    assert [n for n in blank_notes(mi25, "mfu", metrics=by_group) if "first-call" not in n] == []
    for fig in drawn.values():
        assert fig.axes[-1].get_ylabel() == "Throughput (TFLOP/s)"  # the colour bar: never "% of none peak"
    assert [n for n in blank_notes(mi25, "tflops") if "first-call" not in n] == []


def test_the_reports_panels_draw_each_device_in_its_own_colour() -> None:
    """The report draws a choice of devices (four per dtype and mode, with their other dtypes): on the published
    data five share the fp32 eager panel (seven before the choice drew the fastest and the slowest, issue 47);
    no two points of one panel share a colour."""
    from mfu_sweep.present.figures.choice import choose_figures
    from mfu_sweep.records.results import load_sweeps

    sweeps = load_sweeps(sorted(str(p) for p in PUBLISHED.glob("*.json")))
    figs = P.make_figures(sweeps, metric="tflops", kinds=["vs-flops"], fits={}, comparisons=[], fleets=[],
                          choice=choose_figures(sweeps))
    sizes = []
    for ax in figs["tflops-vs-flops"].axes:
        colors = [matplotlib.colors.to_hex(c.lines[0].get_color()) for c in labelled_errorbars(ax).values()]
        assert len(set(colors)) == len(colors), ax.get_title()
        sizes.append(len(colors))
    assert max(sizes) == 5
