"""Figure 7: device x FLOP band heatmap of each device's ratio to its reference (fleet view or leaderboard).

Rows are devices (slowest mean ratio at the top), columns FLOP bands; the
colour is the band's geometric-mean ratio of the metric to the reference (the
median of the other devices, or a baseline) on a diverging scale centred on
1; a dot marks a cell that is ahead or behind by more than the margin, with
confidence (Holm over devices x bands). With many devices the rows thin out their labels, never
their cells.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import TwoSlopeNorm

from mfu_sweep.analysis.fleet.leaderboard import Leaderboard
from mfu_sweep.analysis.fleet.view import FleetView
from mfu_sweep.analysis.verdicts.margin import margin_words
from mfu_sweep.present.figures.theme import DOUBLE_IN, PANEL_H_IN, new_ax, safe_text
from mfu_sweep.present.words import ahead_words, metric_name
from mfu_sweep.util.names import safe_name

MAX_ROW_LABELS = 40
ROW_IN = 0.12  # figure height per device row, up to MAX_HEIGHT_IN
MAX_HEIGHT_IN = 9.0


def heatmap_height(n_devices: int) -> float:
    """A figure height that keeps rows readable: one panel height up to ~20 devices, capped at 9 in."""
    return min(MAX_HEIGHT_IN, max(PANEL_H_IN, 0.9 + ROW_IN * n_devices))


def board_of(view: FleetView | Leaderboard) -> Leaderboard:
    return view.board if isinstance(view, FleetView) else view


def _board(view: FleetView | Leaderboard) -> tuple[Leaderboard, str]:
    if isinstance(view, FleetView):
        return view.board, f"{view.label} · {view.dtype} · {view.mode}: device / median of the others"
    ref = "median of the others" if view.reference == "rest" else view.reference
    return view, f"{view.dtype} · {view.mode}: device / {ref}"


def plot_fleet_heatmap(view: FleetView | Leaderboard, *, ax: Axes | None = None, **_: Any) -> Axes:
    """Device x FLOP band heatmap of the ratio to the reference; dots mark cells beyond the margin."""
    board, title = _board(view)
    ax = new_ax(ax, width=DOUBLE_IN, height=heatmap_height(len(board.devices)))
    ratio, verdict = board.matrix()
    devices = board.devices
    order = np.argsort([board.overall.get(lbl, math.inf) for lbl in devices], kind="stable")
    ratio, verdict = ratio[order], verdict[order]
    labels = [devices[i] for i in order]
    finite = ratio[np.isfinite(ratio)]
    spread = max(float(np.max(np.abs(np.log(finite)))) if len(finite) else 0.0, math.log(1.02))
    norm = TwoSlopeNorm(vcenter=1.0, vmin=math.exp(-spread), vmax=math.exp(spread))
    image = ax.imshow(np.ma.masked_invalid(ratio), cmap="RdBu", norm=norm, aspect="auto", interpolation="nearest")
    rows, cols = np.nonzero(verdict != 0)
    ax.scatter(cols, rows, s=9 if len(labels) <= MAX_ROW_LABELS else 2, c="black", marker="o", linewidths=0)
    ax.set_xticks(range(len(board.bands)), [b.name.replace(" - ", "–") for b in board.bands], rotation=35,
                  ha="right")
    step = max(1, math.ceil(len(labels) / MAX_ROW_LABELS))
    ax.set_yticks(range(0, len(labels), step), [safe_text(labels[i]) for i in range(0, len(labels), step)])
    ax.grid(False)
    ahead, behind = ahead_words(board.metric)
    ax.set_xlabel(f"FLOP band (dot: {ahead} or {behind} by more than {margin_words(board.margin)}, Holm over "
                  "devices x bands)")
    ax.set_ylabel(f"device ({len(labels)}, lowest on top)")
    ax.set_title(safe_text(title))
    bar = ax.figure.colorbar(image, ax=ax, shrink=0.9)
    bar.set_label(f"{metric_name(board.metric)} ratio")
    return ax


def _slug(text: str) -> str:
    return safe_name(text, "series")


def figure_stem(view: FleetView | Leaderboard) -> str:
    """``fleet-<label>-<dtype>-<mode>`` or ``leaderboard-<dtype>-<mode>[-vs-<baseline>]``."""
    if isinstance(view, FleetView):
        return f"fleet-{_slug(view.label)}-{view.dtype}-{view.mode}"
    tail = "" if view.reference == "rest" else f"-vs-{_slug(view.reference)}"
    return f"leaderboard-{view.dtype}-{view.mode}{tail}"
