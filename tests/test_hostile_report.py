"""Issue 47, items 12-16, 22, 24, 26 and 27: the report and its figures say what the command line says, draw
the devices they name, draw no blank figure, and end on Ctrl-C.

REAL data: sweeps/published/ (DeepBench and the OpenXLA tables, cited imports). SYNTHETIC where marked
(tests/synthetic.py).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from synthetic import make_sweep_doc  # noqa: E402
from synthetic_fleet import fleet_docs  # noqa: E402

from mfu_sweep.analysis.fits.parallel import run_tasks  # noqa: E402
from mfu_sweep.analysis.fleet.gate import Failure  # noqa: E402
from mfu_sweep.analysis.fleet.view import fleet_view  # noqa: E402
from mfu_sweep.analysis.ground.series import SeriesKey, group_series  # noqa: E402
from mfu_sweep.analysis.verdicts.comparison import Crossover  # noqa: E402
from mfu_sweep.cli import main  # noqa: E402
from mfu_sweep.present.figures.arrange import blank_notes, figure_legend, figure_stems, make_figures  # noqa: E402
from mfu_sweep.present.figures.choice import best_tflops, choose_figures  # noqa: E402
from mfu_sweep.present.figures.mfu import plot_mfu  # noqa: E402
from mfu_sweep.present.figures.select import curve_bytes, label_colors  # noqa: E402
from mfu_sweep.present.report.caveats import contention_clause  # noqa: E402
from mfu_sweep.present.report.numbers import fitted_p_cell  # noqa: E402
from mfu_sweep.present.report.render import STYLE, to_html, to_markdown  # noqa: E402
from mfu_sweep.present.report.write import analyse, build_report  # noqa: E402
from mfu_sweep.records.contention import flag_record  # noqa: E402
from mfu_sweep.records.results import load_sweeps, parse_document  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = sorted((ROOT / "sweeps" / "published").glob("*.json"))


@pytest.fixture(scope="module")
def published() -> tuple[list[Any], Any, list[Any]]:
    sweeps = load_sweeps([str(p) for p in PUBLISHED])
    analysis = analyse(sweeps, fit_n_boot=2)
    return sweeps, analysis, build_report(sweeps, analysis, [])


def _before_strips(md: str) -> str:
    return md[:md.index("| bf16 · compile · by MFU")]


# -- item 12: the first screen says MFU above 100% and contention ----------------------------------------------

def test_the_first_screen_says_mfu_above_the_peak_before_any_strip(published) -> None:
    """REAL: gfx950 fp32 compile reaches 650% of its fp32 peak; the first screen said so 700 lines down."""
    _, _, blocks = published
    head = _before_strips(to_markdown(blocks))
    assert "MFU above 100% of the peak" in head and "gfx950 fp32 · compile 650%" in head
    assert "no lead" in head


def _pair(contended: bool) -> list[Any]:
    """SYNTHETIC: two devices, every record of dev-b but one measured while others took 60% of the machine."""
    flops = [float(f) for f in np.geomspace(1e8, 1e11, 12)]
    docs = [make_sweep_doc(lab, P_tflops=p, W_tbs=2.0, t0_s=5e-6, peak_tflops=900.0, flops=flops, seed=i)
            for i, (lab, p) in enumerate((("dev-a", 500.0), ("dev-b", 400.0)))]
    sweeps = [s for d in docs for s in parse_document(d)]
    if not contended:
        return sweeps
    busy = {"window_s": 10.0, "other_share": 0.6}
    b = sweeps[1]
    return [sweeps[0], b.with_records([flag_record(r, busy) if i else r for i, r in enumerate(b.records)])]


def test_a_contended_sweep_is_named_on_the_first_screen() -> None:
    sweeps = _pair(True)
    n = len(sweeps[1].records)
    head = _before_strips_any(to_markdown(build_report(sweeps, analyse(sweeps, fit_n_boot=5), [])))
    assert f"measured under contention: dev-b {n - 1} of {n} records" in head and "machines' load" in head
    assert contention_clause(_pair(False)) is None


def _before_strips_any(md: str) -> str:
    return md[:md.index("\n| ", md.index("## Who leads where"))]


# -- item 13: the 50-device report draws the slowest and the leader ----------------------------------------------

def test_fifty_devices_draw_the_actually_slowest_and_the_leader() -> None:
    """SYNTHETIC: 50 devices whose speed has nothing to do with their label order."""
    rng = np.random.default_rng(7)
    speeds = rng.permutation(np.linspace(200.0, 900.0, 50))
    flops = [float(f) for f in np.geomspace(1e9, 1e12, 6)]
    sweeps = [s for i, p in enumerate(speeds) for s in parse_document(make_sweep_doc(
        f"node{i:02d}", P_tflops=float(p), W_tbs=2.0, t0_s=5e-6, flops=flops, seed=i, noise=0.005))]
    best = {lab: v for (lab, _, _), v in best_tflops(sweeps).items()}
    by_speed = sorted(best, key=best.get)
    choice = choose_figures(sweeps)
    [featured] = choice.featured.values()
    assert featured[0] == by_speed[-1]  # the leader is drawn
    assert set(featured[1:]) == set(by_speed[:len(featured) - 1])  # and the slowest, not node00-node03
    sentence = choice.sentence(50)
    assert "fastest and the slowest by best measured TFLOP/s" in sentence and by_speed[0] in sentence
    assert "flagged and slowest first" not in sentence


# -- item 14: no blank first-call figure --------------------------------------------------------------------------

def test_imported_sweeps_draw_no_first_call_figure_and_plot_refuses_the_kind(tmp_path: Path) -> None:
    """REAL: the DeepBench and XLA tables time no first call: eight empty panels before."""
    sweeps = load_sweeps([str(p) for p in PUBLISHED[:3]])
    assert "first-call" not in figure_stems(sweeps)
    assert any("no first-call figure" in n for n in blank_notes(sweeps))
    res = CliRunner().invoke(main, ["plot", str(PUBLISHED[0]), "--figure", "first-call", "-o", str(tmp_path / "p")])
    assert res.exit_code == 1 and "nothing to draw" in res.output and "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1, res.output


# -- item 15: the gate by MFU never says slower ---------------------------------------------------------------------

def test_a_gate_failure_by_mfu_says_lower_mfu_not_slower() -> None:
    f = Failure("node01", "bf16", "eager", "rest", 0.86, "slower", "mfu")
    assert "slower" not in f.text() and "x0.860 of the rest, lower MFU" in f.text()
    assert "slower" in dataclasses.replace(f, metric="tflops").text()


# -- item 16: poor fits marked in the summary -----------------------------------------------------------------------

def test_the_summary_marks_a_fit_whose_p_is_no_ceiling(published) -> None:
    """REAL: gfx950 fp32 compile fits P 130 against a best measured 1020; fit marks it *, the report did not."""
    _, analysis, blocks = published
    cell = fitted_p_cell(analysis.fits[SeriesKey("gfx950", "fp32", "compile")])
    assert "*" in cell and "below the best measured 1020" in cell
    assert "*: P is no ceiling there" in to_markdown(blocks).replace("\\*", "*")


# -- item 22: Ctrl-C ends the report's workers ---------------------------------------------------------------------

def _sigint_handler() -> Any:
    return signal.getsignal(signal.SIGINT)


def test_pool_workers_leave_ctrl_c_to_the_parent() -> None:
    assert run_tasks([_sigint_handler, _sigint_handler], workers=2) == [signal.SIG_IGN, signal.SIG_IGN]


@pytest.mark.skipif(sys.platform != "linux", reason="forked workers")
def test_ctrl_c_while_workers_run_ends_them_instead_of_waiting() -> None:
    """Tasks that would run 10 minutes: after Ctrl-C the parent ends them and raises KeyboardInterrupt (it
    waited for every running task before; a hang guard of 120 s, not a timing)."""
    script = textwrap.dedent("""
        import os, signal, sys, threading, time
        from mfu_sweep.analysis.fits.parallel import run_tasks
        threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            run_tasks([lambda: time.sleep(600)] * 2, workers=2)
        except KeyboardInterrupt:
            print("interrupted"); sys.exit(130)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 130 and "interrupted" in done.stdout, done.stderr


# -- item 24: strips stay in the text column -------------------------------------------------------------------------

def test_band_strips_are_never_wider_than_the_text_column() -> None:
    """A strip wider than the column was cut at 800 px: the stylesheet caps it and lets a cell wrap anywhere."""
    rule = next(line for line in STYLE.splitlines() if line.startswith("table.strip {"))
    assert "max-width: 100%" in rule
    assert "overflow-wrap: anywhere" in next(line for line in STYLE.splitlines()
                                               if line.startswith("table.strip th, table.strip td"))
    assert "white-space: nowrap" not in "".join(line for line in STYLE.splitlines() if "strip" in line)


# -- item 25: crossover labels never overlap each other or the strip; fitted curves are smooth in FLOPs ---------

FOUR = [str(ROOT / "sweeps" / "published" / f"{n}.json") for n in ("sm_100_B200", "sm_90", "gfx950", "gfx942")]


def _drawn(fig: Figure) -> Any:
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _crowded_comparison() -> Any:
    """SYNTHETIC crossovers over REAL bf16 sweeps: a shapes and a fit crossover 5% apart (the issue's picture), a
    third beside them and one at the panel's left edge, under a leader strip over the whole range."""
    lo, hi = 5e7, 1e12
    segment = SimpleNamespace(start_flops=lo, end_flops=hi, leader="sm_90")
    crossovers = [Crossover(flops, flops / 1.3, flops * 1.3, a, b, method) for flops, a, b, method in (
        (1.0e9, "gfx950", "sm_100_B200", "shapes"), (1.05e9, "gfx950", "sm_100_B200", "fit"),
        (1.2e9, "gfx942", "sm_100_B200", "shapes"), (lo * 1.05, "gfx942", "gfx950", "fit"))]
    return SimpleNamespace(dtype="bf16", mode="compile", metric="mfu", a="sm_90", b="gfx950", segments=[segment],
                           bands=[], runs_measured=True, crossovers=crossovers)


def _label_boxes(ax: Any, renderer: Any) -> tuple[list[Any], int]:
    labels = [t for t in ax.texts if str(t.get_gid()).startswith("crossover-label")]
    return [t.get_window_extent(renderer) for t in labels if t.get_visible()], len(labels)


@pytest.mark.parametrize("width", [3.5, 7.0])
def test_crossover_labels_overlap_neither_each_other_nor_the_strip(width: float) -> None:
    """Crossovers of fit and shapes at nearly the same FLOPs were labelled on top of each other."""
    sweeps = load_sweeps(FOUR)
    fig = Figure(figsize=(width, 3.0), layout="constrained")
    ax = plot_mfu(sweeps, dtype="bf16", mode="compile", comparisons=[_crowded_comparison()], legend=False,
                  ax=fig.add_subplot())
    renderer = _drawn(fig)
    boxes, n = _label_boxes(ax, renderer)
    assert n == 4 and len(boxes) >= 3  # at most one left out (the report's table lists every crossover)
    strips = [p.get_window_extent(renderer) for p in ax.patches if str(p.get_gid()).startswith("leader:")]
    assert strips
    frame = ax.get_window_extent(renderer)
    for i, box in enumerate(boxes):
        assert not any(box.overlaps(other) for other in boxes[i + 1:])
        assert not any(box.overlaps(strip) for strip in strips)
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0


@pytest.fixture(scope="module")
def four_panels() -> Figure:
    return make_figures(load_sweeps(FOUR), kinds=["vs-flops"])["mfu-vs-flops"]


def test_the_published_panels_label_every_crossover_without_overlap(four_panels: Figure) -> None:
    """REAL: the report's four-device vs-flops figure keeps every label, none on another or on the strip."""
    fig = four_panels
    renderer = _drawn(fig)
    total = 0
    for ax in fig.axes:
        boxes, n = _label_boxes(ax, renderer)
        total += n
        assert len(boxes) == n
        strips = [p.get_window_extent(renderer) for p in ax.patches if str(p.get_gid()).startswith("leader:")]
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in [*boxes[i + 1:], *strips])
    assert total >= 5


def test_fitted_curves_are_smooth_functions_of_flops(four_panels: Figure) -> None:
    """REAL: the fitted curves zig-zagged through shapes of different aspects at nearly equal FLOPs (the fp8 panel):
    drawn along one representative aspect, each is sorted in FLOPs and never turns down (the roofline with
    overhead rises with FLOPs when bytes grow slower than FLOPs)."""
    lines = [ln for ax in four_panels.axes for ln in ax.get_lines() if str(ln.get_gid()).startswith("fit:")]
    assert len(lines) == 13
    for line in lines:
        x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        assert np.all(np.diff(x) > 0), line.get_gid()
        assert np.all(np.diff(y) >= -1e-9 * y[:-1]), line.get_gid()


def test_curve_bytes_follow_one_aspect_whatever_the_order_of_the_shapes() -> None:
    """REAL: B200's fp8 shapes (several aspects at nearly equal FLOPs): the bytes along the curve are a power law of
    FLOPs (monotone), not the shapes' own bytes joined in FLOP order, and do not depend on the records' order."""
    sweep = load_sweeps(FOUR[:1])[0]
    (series,) = [s for s in group_series([sweep]).values() if s.dtype == "fp8"]
    grid = np.geomspace(min(r.flops for r in series.records), max(r.flops for r in series.records), 50)
    b = curve_bytes(series, grid)
    assert np.all(np.diff(b) > 0)
    shuffled = dataclasses.replace(series, records=tuple(reversed(series.records)))
    assert np.allclose(curve_bytes(shuffled, grid), b)


# -- item 26: one colour per device, one legend entry per device --------------------------------------------------

def test_each_published_device_has_its_own_colour() -> None:
    """REAL: NV_V100 and gfx950 were one blue in a figure whose one legend lists both."""
    colors = label_colors(load_sweeps([str(p) for p in PUBLISHED]), None)
    assert len(colors) == 15 and len(set(colors.values())) == 15
    assert colors["NV_V100"] != colors["gfx950"]


def test_a_device_is_one_legend_entry_with_or_without_its_peak_note() -> None:
    fig = Figure()
    left, right = fig.subplots(1, 2)
    left.plot([1, 2], [1, 2], label="IA_KNL7250 (estimated peak)")
    right.plot([1, 2], [1, 2], label="IA_KNL7250")
    left.legend()
    right.legend()
    figure_legend(fig, [left, right])
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == ["IA_KNL7250 (estimated peak)"]


# -- item 27: "Nothing to compare" once ----------------------------------------------------------------------------

def test_a_single_device_report_says_nothing_to_compare_once() -> None:
    sweeps = _pair(False)[:1]
    blocks = build_report(sweeps, analyse(sweeps, fit_n_boot=5), [])
    assert to_markdown(blocks).count("Nothing to compare") == 1
    assert to_html(blocks, {}).count("Nothing to compare") == 1


# -- item 15 (fleet sentence): by MFU the fleet names its lowest MFU, never its slowest ---------------------------

def test_the_fleet_sentence_by_mfu_names_the_lowest_mfu_not_the_slowest() -> None:
    """SYNTHETIC: eight replicate GPUs, one 6% behind; the sentence by MFU said "slowest h100.r3"."""
    docs = fleet_docs(8, flops=tuple(float(f) for f in np.geomspace(1e6, 2e12, 25)), slow={3: (1.07, 1e6, 2e12)})
    series = list(group_series([sw for d in docs for sw in parse_document(d, validate=False)]).values())
    by_mfu, by_tflops = fleet_view(series, metric="mfu").sentence(), fleet_view(series).sentence()
    assert "; lowest MFU synthetic-gpu.r3 (" in by_mfu and "slow" not in by_mfu
    assert "; slowest synthetic-gpu.r3 (" in by_tflops
