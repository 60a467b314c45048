"""Figures of sweeps: MFU vs FLOPs, roofline, first-call cost, compile speedup, MFU heatmaps, status.

Every ``plot_*`` function draws one panel: it takes the sweeps (as
``mfu_sweep.records.results.load_sweeps`` returns them), the dtype and mode to show
and ``ax=None``, and returns the Axes, so figures compose in a notebook::

    import matplotlib.pyplot as plt
    from mfu_sweep.present.figures.plot import plot_mfu, plot_roofline, theme
    from mfu_sweep.records.results import load_sweeps

    sweeps = load_sweeps(["sweeps/a.json", "sweeps/b.json"])
    with theme():
        fig, (left, right) = plt.subplots(1, 2, figsize=(7, 2.8), layout="constrained")
        plot_mfu(sweeps, dtype="bf16", mode="eager", ax=left)
        plot_roofline(sweeps, dtype="bf16", mode="eager", ax=right)

Colours are fixed per device label (sorted labels -> a colour-blind-safe
palette, :func:`series_colors`), so one device has one colour in every figure
made from the same sweeps; the mode is told by marker and line style.
:func:`make_figures` arranges the panels into the figures the ``plot`` and
``report`` commands write; :func:`save_figure` writes them reproducibly.
"""

from __future__ import annotations

from mfu_sweep.present.figures.arrange import make_figures, save_figure

# One import for notebooks: the panels, the figure builders and the theme. The code lives in
# theme (look), select (what is drawn), fig_* (one module per figure kind) and figures (layout, saving).
from mfu_sweep.present.figures.compile import has_speedup, plot_first_call, plot_speedup
from mfu_sweep.present.figures.grid import grid_ks, has_failures, heatmap_grids, plot_heatmap, plot_status
from mfu_sweep.present.figures.mfu import leader_spans, plot_mfu
from mfu_sweep.present.figures.roofline import plot_roofline
from mfu_sweep.present.figures.theme import (
    DOUBLE_IN,
    FORMATS,
    PALETTE,
    DecadeLocator,
    RatioLocator,
    format_si,
    percent_decimals,
    series_colors,
    theme,
    theme_rc,
)
from mfu_sweep.records.summaries import filter_sweeps

__all__ = [
    "DOUBLE_IN", "FORMATS", "PALETTE", "DecadeLocator", "RatioLocator", "filter_sweeps", "format_si", "grid_ks",
    "has_failures", "has_speedup", "heatmap_grids", "leader_spans", "make_figures", "percent_decimals",
    "plot_first_call", "plot_heatmap", "plot_mfu", "plot_roofline", "plot_speedup", "plot_status", "save_figure",
    "series_colors", "theme", "theme_rc",
]
