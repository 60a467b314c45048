"""Figures 5 and 6: MFU heatmaps of grid sweeps, and the status overview of every record."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.patches import Rectangle

from mfu_sweep.analysis.ground.series import shape_seconds
from mfu_sweep.present.figures.select import choose_value, metric_value, pick_value
from mfu_sweep.present.figures.theme import (
    ANNOTATION_GREY,
    STATUS_ABBREV,
    STATUS_STYLE,
    add_legend,
    check_metric,
    flop_axis,
    metric_label,
    new_ax,
    no_data_panel,
    peak_kind,
    safe_text,
)
from mfu_sweep.records.results import Record, Sweep
from mfu_sweep.records.summaries import all_records

# --------------------------------------------------------------------------- 5. MFU heatmap over m x n


def _grid_records(sweeps: Sequence[Sweep], label: str, dtype: str, mode: str, k: int | None = None
                  ) -> list[tuple[Sweep, Record]]:
    return [(sw, r) for sw, r in all_records(sweeps)
            if sw.label == label and r.dtype == dtype and r.mode == mode and r.shape.batch == 1
            and (k is None or r.shape.k == k)]


def grid_ks(sweeps: Sequence[Sweep], *, label: str, dtype: str, mode: str) -> list[int]:
    """The k values at which one device, dtype and mode measured a grid (at least 2 m and 2 n; batch 1)."""
    ms: dict[int, set[int]] = {}
    ns: dict[int, set[int]] = {}
    for _, r in _grid_records(sweeps, label, dtype, mode):
        ms.setdefault(r.shape.k, set()).add(r.shape.m)
        ns.setdefault(r.shape.k, set()).add(r.shape.n)
    return sorted(k for k in ms if len(ms[k]) >= 2 and len(ns[k]) >= 2)


def heatmap_grids(sweeps: Sequence[Sweep]) -> list[tuple[str, str, str, int]]:
    """Every ``(label, dtype, mode, k)`` for which :func:`plot_heatmap` has a grid to draw.

    One pass over the records (as :func:`grid_ks` per key, which would be quadratic in devices).
    """
    ms: dict[tuple[str, str, str, int], set[int]] = {}
    ns: dict[tuple[str, str, str, int], set[int]] = {}
    for sw in sweeps:
        label = sw.label
        for r in sw.records:
            if r.shape.batch == 1:
                key = (label, r.dtype, r.mode, r.shape.k)
                ms.setdefault(key, set()).add(r.shape.m)
                ns.setdefault(key, set()).add(r.shape.n)
    return sorted(key for key in ms if len(ms[key]) >= 2 and len(ns[key]) >= 2)


def plot_heatmap(sweeps: Sequence[Sweep], *, k: int, label: str | None = None, dtype: str | None = None,
                 mode: str | None = None, metric: str = "mfu", annotate: bool | None = None,
                 ax: Axes | None = None) -> Axes:
    """MFU (or TFLOP/s) over the m × n grid at one k, for one device, dtype and mode.

    Cells show the value (MFU in %); shapes that failed show their status
    (T/O, OOM, ERR, n/a) on a blank cell; unmeasured cells stay blank.
    ``annotate`` defaults to on for grids up to 12 × 12.
    """
    check_metric(metric)
    label = _pick_label(sweeps, label)
    dtype, mode = pick_value(sweeps, "dtype", dtype), pick_value(sweeps, "mode", mode)
    ax = new_ax(ax)
    recs = _grid_records(sweeps, label, dtype, mode, k)
    if not recs:
        return no_data_panel(ax, f"no {label} {dtype} {mode} records at k={k}")
    ms = sorted({r.shape.m for _, r in recs}, reverse=True)
    ns = sorted({r.shape.n for _, r in recs})
    values = np.full((len(ms), len(ns)), np.nan)
    status = np.full((len(ms), len(ns)), "", dtype=object)
    cells: dict[tuple[int, int], list[tuple[Sweep, Record]]] = {}
    for sw, r in recs:
        i, j = ms.index(r.shape.m), ns.index(r.shape.n)
        if r.ok and r.median_s:
            cells.setdefault((i, j), []).append((sw, r))
        elif r.status != "ok":
            status[i, j] = STATUS_ABBREV.get(r.status, r.status)
    for (i, j), cell in cells.items():
        # one value per shape, as in every view: its time is the median of the pass medians
        sw, r = cell[0]
        values[i, j] = metric_value(r, shape_seconds([rec for _, rec in cell]), sw.peak, metric) or math.nan
        status[i, j] = ""
    scale = 100.0 if metric == "mfu" else 1.0
    annotate = len(ms) <= 12 and len(ns) <= 12 if annotate is None else annotate
    text = _cell_text(values * scale) if annotate else False
    kinds = {peak_kind(sw.peak) for sw, _ in recs}
    unit = metric_label(metric, kinds)
    sns.heatmap(values * scale, ax=ax, cmap="viridis", vmin=0, annot=text, fmt="", mask=np.isnan(values),
                xticklabels=ns, yticklabels=ms, linewidths=0.5, linecolor="white", square=False,
                annot_kws={"fontsize": 6}, cbar_kws={"label": unit, "shrink": 0.9})
    for (i, j), st in np.ndenumerate(status):
        if st:
            ax.add_patch(Rectangle((j, i), 1, 1, facecolor="#eeeeee", edgecolor="white", linewidth=0.5))
            ax.text(j + 0.5, i + 0.5, st, ha="center", va="center", fontsize=6, color=ANNOTATION_GREY)
    ax.grid(False)
    ax.set_xlabel("n")
    ax.set_ylabel("m")
    ax.tick_params(axis="y", rotation=0)
    ax.set_title(f"{safe_text(label)} · {dtype} · {mode} · k={k}")
    return ax


def _cell_text(values: np.ndarray) -> np.ndarray:
    """Cell labels with one number of decimals for the whole grid (two or three significant digits)."""
    top = np.nanmax(values) if np.any(~np.isnan(values)) else 1.0
    decimals = 0 if top >= 10 else 1 if top >= 1 else 2 if top >= 0.1 else 3
    return np.vectorize(lambda v: "" if math.isnan(v) else f"{v:.{decimals}f}")(values)


def _pick_label(sweeps: Sequence[Sweep], label: str | None) -> str:
    return choose_value(sorted({sw.label for sw in sweeps}), "label", label, "devices")


# --------------------------------------------------------------------------- 6. status overview


def has_failures(sweeps: Sequence[Sweep]) -> bool:
    """Whether any record's status is not ``ok``."""
    return any(r.status != "ok" for sw in sweeps for r in sw.records)


def status_rows(sweeps: Sequence[Sweep]) -> list[tuple[str, str, str]]:
    """The ``(label, dtype, mode)`` rows of the status overview, sorted."""
    return sorted({(sw.label, r.dtype, r.mode) for sw, r in all_records(sweeps)},
                  key=lambda t: (t[0], t[1], t[2] != "eager", t[2]))


def plot_status(sweeps: Sequence[Sweep], *, legend: bool = True, ax: Axes | None = None) -> Axes:
    """Status of every record by GEMM size: one row per device, dtype and mode; a marker per status.

    ``ok`` is a small grey dot so that failures (timeout, oom, mismatch,
    error, unsupported) stand out; the legend counts each status.
    """
    rows = status_rows(sweeps)
    ax = new_ax(ax, height=0.9 + 0.3 * max(1, len(rows)))
    if not rows:
        return no_data_panel(ax, "no records")
    index = {row: i for i, row in enumerate(rows)}
    by_status: dict[str, list[tuple[float, int]]] = {}
    for sw, r in all_records(sweeps):
        by_status.setdefault(r.status, []).append((r.flops, index[(sw.label, r.dtype, r.mode)]))
    for st in sorted(by_status, key=lambda s: list(STATUS_STYLE).index(s) if s in STATUS_STYLE else 99):
        x, y = zip(*by_status[st], strict=True)
        style = STATUS_STYLE.get(st, {"marker": "*", "color": "#000000", "s": 26})
        ax.scatter(x, y, marker=style["marker"], color=style["color"], s=style["s"], linewidths=0.9,
                   label=f"{st} ({len(x)})", zorder=3)
    ax.set_yticks(range(len(rows)), [safe_text(" · ".join(r)) for r in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.grid(axis="y", visible=False)
    flop_axis(ax)
    ax.set_title("Record status by GEMM size")
    if legend:
        add_legend(ax, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return ax
