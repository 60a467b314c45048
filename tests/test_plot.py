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

from mfu_sweep.analysis.series import group_series  # noqa: E402
from mfu_sweep.cli import main  # noqa: E402
from mfu_sweep.present import plot as P  # noqa: E402
from mfu_sweep.results import Sweep, parse_document  # noqa: E402

FLOPS = [float(f) for f in np.geomspace(1e6, 1e12, 10)]
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
    if "shapes" not in kw:
        args["flops"] = FLOPS
    return make_sweep_doc(label, **args)


def sweeps_of(*docs: dict[str, Any]) -> list[Sweep]:
    return [sw for d in docs for sw in parse_document(d)]


def new_ax() -> Axes:
    return Figure(figsize=(3.5, 2.6), layout="constrained").subplots()


@pytest.fixture(scope="module")
def pair() -> list[Sweep]:
    return sweeps_of(doc("chip-a"), doc("chip-b"), doc("chip-a", mode="compile", P_tflops=120.0, t0_s=6e-6))


@pytest.fixture(scope="module")
def pair_analysis(pair: list[Sweep]) -> Any:
    from mfu_sweep.present.report import analyse

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
    assert labels == {"ok (36)", "timeout (1)", "oom (1)", "mismatch (1)", "error (1)"}
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
    from mfu_sweep.present.select import metric_points

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
    from mfu_sweep.present.figures import figure_legend
    from mfu_sweep.present.theme import COLUMN_IN

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
    from mfu_sweep.present.figures import _merge_bar_keys

    merged = _merge_bar_keys({"chip": 1, "bars: 95% CI of median": 2, "fit": 3,
                              "bars: 95% CI of median / range over passes": 4})
    assert merged == {"chip": 1, "bars: 95% CI of median / range over passes": 2, "fit": 3}


def test_speedup_of_repeats_sweeps_uses_the_median_of_the_passes() -> None:
    from synthetic import NOISE_MODELS

    from mfu_sweep.analysis.series import shape_seconds
    from mfu_sweep.present.fig_compile import speedup_points

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
