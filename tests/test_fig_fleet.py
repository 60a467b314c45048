"""The device x FLOP band heatmap on a SYNTHETIC fleet (tests/synthetic_fleet.py)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")

from synthetic_fleet import fleet_docs  # noqa: E402

from mfu_sweep.analysis.fleet.view import replicate_fleets  # noqa: E402
from mfu_sweep.analysis.ground.series import group_series  # noqa: E402
from mfu_sweep.present.figures.arrange import make_figures, save_figure  # noqa: E402
from mfu_sweep.present.figures.fleet import figure_stem, heatmap_height, plot_fleet_heatmap  # noqa: E402
from mfu_sweep.records.results import parse_document  # noqa: E402

FLOPS = [float(f) for f in np.geomspace(1e6, 2e12, 16)]


def _sweeps(n: int):
    return [sw for d in fleet_docs(n, flops=FLOPS, slow={1: (1.3, 1e8, 1e12)}) for sw in parse_document(d)]


def test_heatmap_puts_the_slowest_on_top_and_dots_the_significant_cells(tmp_path: Path) -> None:
    [view] = replicate_fleets(group_series(_sweeps(5)))
    ax = plot_fleet_heatmap(view)
    assert ax.get_yticklabels()[0].get_text() == "synthetic-gpu.r1"
    [image] = ax.get_images()
    assert image.get_array().shape == (5, len(view.board.bands))
    [dots] = ax.collections
    _, verdict = view.board.matrix()
    assert len(dots.get_offsets()) == int((verdict != 0).sum()) > 0
    assert figure_stem(view) == "fleet-synthetic-gpu-bf16-eager"
    (path,) = save_figure(ax.figure, tmp_path, figure_stem(view))
    assert path.stat().st_size > 1000


def test_make_figures_adds_the_fleet_heatmap_and_compares_no_pairs_for_many_devices() -> None:
    figs = make_figures(_sweeps(6), metric="tflops")
    assert "fleet-synthetic-gpu-bf16-eager" in figs and "tflops-vs-flops" in figs
    assert heatmap_height(6) < heatmap_height(200) <= 9.0


def test_a_leaderboard_that_ranks_no_device_draws_no_blank_heatmap() -> None:
    # SYNTHETIC: one device measured squares, the other one skinny aspect (2s x s x s/2): neither's shapes span
    # the other's, so no model reaches across; both are left out of the board (notes say so) and the report
    # gets no empty heatmap for it
    from synthetic import make_sweep_doc
    from synthetic_fleet import aspect_shapes

    from mfu_sweep.analysis.fleet.leaderboard import leaderboard

    shapes = aspect_shapes(12, 128, 4096)
    squares = [s for s in shapes if s.m == s.n == s.k]
    docs = [make_sweep_doc("sq", shapes=squares, P_tflops=600, W_tbs=2.5, t0_s=6e-6),
            make_sweep_doc("skinny", shapes=[s for s in shapes if s.m == 2 * s.n], P_tflops=600, W_tbs=2.5,
                           t0_s=6e-6)]
    sweeps = [sw for d in docs for sw in parse_document(d)]
    board = leaderboard(list(group_series(sweeps).values()), "tflops")
    assert not board.cells and len(board.notes) == 2 and board.lines()[0].count("0 devices (2 left out")
    figs = make_figures(sweeps, metric="tflops", fleets=[], comparisons=[], boards=[board], kinds={"fleet"})
    assert figure_stem(board) not in figs
    from mfu_sweep.present.report.fleet import board_blocks

    kinds = [type(b).__name__ for b in board_blocks([board], [], [])]
    assert "Table" not in kinds and "Bullets" in kinds  # no empty table; the notes say why
