"""What the figures show, checked on their artists: axis scales, one point per shape with the same numbers as
the report, no curve for an unconstrained fit, every roofline line explained, crossovers named by pair.

Inputs are real: the committed CPU sweep (5 passes per shape), the short CPU sweep of tests/data/short-sweep/
and two committed published imports.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from mfu_sweep.analysis.fits.fit import fit_groups  # noqa: E402
from mfu_sweep.analysis.ground.series import group_series  # noqa: E402
from mfu_sweep.analysis.ground.summary import summarise  # noqa: E402
from mfu_sweep.present.figures.compile import plot_first_call  # noqa: E402
from mfu_sweep.present.figures.grid import plot_heatmap  # noqa: E402
from mfu_sweep.present.figures.mfu import plot_mfu  # noqa: E402
from mfu_sweep.present.figures.roofline import plot_roofline  # noqa: E402
from mfu_sweep.present.figures.theme import SHARED_ROOF_COLOR, UNCONSTRAINED_FIT  # noqa: E402
from mfu_sweep.present.report.write import analyse  # noqa: E402
from mfu_sweep.records.results import Sweep, load_sweeps
from mfu_sweep.records.summaries import filter_sweeps

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = ROOT / "sweeps"


def _ax() -> Axes:
    return Figure().add_subplot()


def _bars(ax: Axes) -> dict[str, ErrorbarContainer]:
    return {c.get_label(): c for c in ax.containers if isinstance(c, ErrorbarContainer)}


def _legend(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def _gids(ax: Axes, prefix: str) -> list[object]:
    return [a for a in [*ax.lines, *ax.collections, *ax.patches, *ax.texts] if str(a.get_gid()).startswith(prefix)]


@pytest.fixture(scope="module")
def cpu() -> list[Sweep]:
    return load_sweeps([SWEEPS / "amd-epyc-zen5-cpu.json"])


@pytest.fixture(scope="module")
def cpu_fits(cpu: list[Sweep]) -> dict:
    return fit_groups(group_series(cpu), n_boot=20)[0]


def test_mfu_axis_is_log_where_the_values_span_more_than_a_decade(cpu: list[Sweep], cpu_fits: dict) -> None:
    kw = {"fits": cpu_fits, "comparisons": [], "mode": "eager"}
    # bf16 spans 7% to 118% MFU, fp32 20% to 57% (summaries of the same file)
    spans = {k.dtype: summarise(s) for k, s in group_series(cpu).items()}
    assert spans["bf16"].mfu_high / spans["bf16"].mfu_low > 10 > spans["fp32"].mfu_high / spans["fp32"].mfu_low
    assert plot_mfu(cpu, dtype="bf16", ax=_ax(), **kw).get_yscale() == "log"
    assert plot_mfu(cpu, dtype="fp32", ax=_ax(), **kw).get_yscale() == "linear"
    assert plot_mfu(cpu, dtype="bf16", y_scale="linear", ax=_ax(), **kw).get_yscale() == "linear"
    ax = plot_mfu(cpu, dtype="fp32", y_scale="log", ax=_ax(), **kw)
    assert ax.get_yscale() == "log"
    lo, hi = ax.get_ylim()
    assert 0 < lo < spans["fp32"].mfu_low and hi > spans["fp32"].mfu_high
    with pytest.raises(ValueError, match="y_scale"):
        plot_mfu(cpu, dtype="fp32", y_scale="logarithmic", ax=_ax(), **kw)


def test_one_point_per_shape_with_the_numbers_of_the_report(cpu: list[Sweep], cpu_fits: dict) -> None:
    for key, s in group_series(cpu).items():
        ax = plot_mfu(cpu, dtype=key.dtype, mode=key.mode, fits=cpu_fits, comparisons=[], ax=_ax())
        (bar,) = _bars(ax).values()
        x, y = bar.lines[0].get_data()
        summary = summarise(s)
        assert summary.n_passes == 5 and len(y) == summary.n_shapes
        np.testing.assert_allclose(y, [p.mfu for p in summary.points], rtol=1e-12)
        assert max(y) == pytest.approx(summary.mfu_high, rel=1e-12)
        assert "bars: range over passes" in _legend(ax)


def test_first_call_passes_are_one_point_per_shape_with_their_range(cpu: list[Sweep]) -> None:
    ax = plot_first_call(cpu, dtype="fp32", quantity="time", ax=_ax())
    (bar,) = _bars(ax).values()
    (s,) = [s for k, s in group_series(cpu).items() if k.dtype == "fp32"]
    x, y = bar.lines[0].get_data()
    assert len(x) == len(set(x)) == summarise(s).n_shapes  # no comb of points at one FLOP count
    assert "bars: range over passes" in _legend(ax)
    segments = bar.lines[2][0].get_segments()
    assert len(segments) == len(x) and any(seg[1][1] > seg[0][1] for seg in segments)


def test_an_unconstrained_fit_draws_no_curve_band_or_roof_and_says_so() -> None:
    short = load_sweeps([ROOT / "tests/data/short-sweep/cpu-4-shapes.json"])
    fits = fit_groups(group_series(short), n_boot=50)[0]
    assert not any(f.is_constrained for f in fits.values())
    ax = plot_mfu(short, fits=fits, comparisons=[], ax=_ax())
    assert not _gids(ax, "fit") and f"amd-epyc-zen4-cpu: {UNCONSTRAINED_FIT}" in _legend(ax)
    assert "roofline fit" not in _legend(ax)
    ax = plot_roofline(short, fits=fits, ax=_ax())
    assert not _gids(ax, "roof:fit") and not _gids(ax, "ridge:fit")
    assert f"amd-epyc-zen4-cpu: {UNCONSTRAINED_FIT}" in _legend(ax)


def test_every_roofline_line_is_explained_by_the_legend() -> None:
    sweeps = load_sweeps(sorted(SWEEPS.glob("*.json")))
    series = group_series(sweeps)
    ax = plot_roofline(sweeps, dtype="fp32", mode="eager", fits=fit_groups(series, n_boot=20)[0], ax=_ax())
    legend = _legend(ax)
    roofs = _gids(ax, "roof:")
    assert {r.get_gid() for r in roofs} == {"roof:spec", "roof:fit"}
    # the dark grey roof is the one spec roof that two labels of one machine share: the legend names them
    shared = [r for r in roofs if r.get_color() == SHARED_ROOF_COLOR]
    assert len(shared) == 1 and "spec roof shared by amd-epyc-cpu, amd-epyc-cpu-grid" in legend
    assert any(t.startswith("spec roof: estimated peak (flat: the spec gives no memory bandwidth)") for t in legend)
    assert "fitted roof min(P, W × intensity), without t0" in legend
    styles = {h.get_linestyle() for h in ax.get_legend().legend_handles if isinstance(h, Line2D)}
    assert {r.get_linestyle() for r in roofs} <= styles


def test_published_crossovers_are_labelled_with_their_pair() -> None:
    files = [SWEEPS / "published" / "gfx950.json", SWEEPS / "published" / "sm_100_B200.json"]
    sweeps = filter_sweeps(load_sweeps(files), ["bf16"], ["compile"])
    analysis = analyse(sweeps, "tflops", fit_n_boot=20)
    ax = plot_mfu(sweeps, dtype="bf16", mode="compile", metric="tflops", fits=analysis.fits,
                  comparisons=analysis.comparisons, ax=_ax())
    crossings = [x for c in analysis.comparisons if (c.dtype, c.mode) == ("bf16", "compile") for x in c.crossovers]
    assert crossings
    labels = _gids(ax, "crossover-label:")
    assert len(labels) == len(crossings) == len(_gids(ax, "crossover:"))
    for x, text in zip(crossings, labels, strict=True):
        assert text.get_position()[0] == x.flops
        assert text.get_text().strip() == f"{x.from_label} → {x.to_label}"
    assert ax.get_yscale() == "log"  # 5 to 1700 TFLOP/s


def test_grid_heatmap_cells_are_the_shapes_values_of_the_report() -> None:
    grid = load_sweeps([SWEEPS / "amd-epyc-cpu-grid.json"])
    (s,) = group_series(grid).values()
    ax = plot_heatmap(grid, k=256, ax=_ax())
    cells = np.ma.compressed(ax.collections[0].get_array())
    expected = [100 * p.mfu for p in summarise(s).points if p.shape.endswith("x256")]
    assert len(cells) == len(expected) > 4
    np.testing.assert_allclose(sorted(cells), sorted(expected), rtol=1e-12)
