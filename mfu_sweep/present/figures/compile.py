"""Figures 3 and 4: first-call cost (compile, autotune) per shape, and the compile-mode speedup."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.ticker as mticker
import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from mfu_sweep.analysis.ground.series import Series, SeriesKey, group_series
from mfu_sweep.present.figures.select import is_family, label_colors, pick_series, pick_value, shape_groups, shape_time
from mfu_sweep.present.figures.theme import (
    ANNOTATION_GREY,
    BARS_PREFIX,
    INTERVAL_TEXT,
    RatioLocator,
    add_legend,
    flop_axis,
    mode_style,
    new_ax,
    no_data_panel,
    plain_log_axis,
    series_name,
)
from mfu_sweep.records.results import Record, Sweep

# --------------------------------------------------------------------------- 3. first call


FIRST_CALL = {
    "ratio": ("first_call_ratio", "First call / steady median (×)"),
    "time": ("first_call_s", "First call (s)"),
}


def plot_first_call(sweeps: Sequence[Sweep], *, dtype: str | None = None, quantity: str = "ratio",
                    colors: Mapping[str, str] | None = None, legend: bool = True, ax: Axes | None = None) -> Axes:
    """The time to first result against GEMM size, per device and mode (the compile tax).

    ``quantity="ratio"`` plots first-call time over the steady median (log y,
    with 1× marked); ``"time"`` plots the first-call time in seconds.
    """
    if quantity not in FIRST_CALL:
        raise ValueError(f"quantity={quantity!r} must be one of {', '.join(FIRST_CALL)}")
    field, ylabel = FIRST_CALL[quantity]
    dtype = pick_value(sweeps, "dtype", dtype)
    ax = new_ax(ax)
    colors = label_colors(sweeps, colors)
    drawn = False
    several = False
    for s in pick_series(sweeps, dtype, None):
        pts = first_call_points(s, field)
        if not pts:
            continue
        x, y, lo, hi = (np.array(c) for c in zip(*pts, strict=True))
        several |= bool(np.any(hi > lo))
        style = mode_style(s.mode)
        ax.errorbar(x, y, yerr=[y - lo, hi - y], color=colors[s.label], marker=style["marker"], elinewidth=0.8,
                    label=series_name(s.label, mode=s.mode), linestyle=style["linestyle"] if is_family(s) else "none")
        drawn = True
    if not drawn:
        return no_data_panel(ax, f"no first-call times for {dtype}")
    flop_axis(ax)
    plain_log_axis(ax, "y")
    if quantity == "ratio":
        ax.axhline(1.0, color=ANNOTATION_GREY, linewidth=0.7, zorder=1)
        ax.yaxis.set_major_formatter(mticker.FuncFormatter(_times_formatter))
    ax.set_ylabel(ylabel)
    ax.set_title(f"{dtype} · first call" + (" / steady" if quantity == "ratio" else ""))
    if legend:
        bars = [Line2D([], [], color=ANNOTATION_GREY, marker="|", markersize=7, linestyle="none",
                       label=f"{BARS_PREFIX}{INTERVAL_TEXT['passes']}")] if several else []
        add_legend(ax, bars)
    return ax


def first_call_dtypes(sweeps: Sequence[Sweep]) -> list[str]:
    """The dtypes with a first-call time in some record (imported tables have none: their panels would be
    blank, so the first-call figure draws only these, and none at all without them)."""
    return sorted({r.dtype for sw in sweeps for r in sw.records if r.first_call_s})


def first_call_points(series: Series, field: str) -> list[tuple[float, float, float, float]]:
    """``(flops, median, low, high)`` of ``field`` (first-call time or ratio) per shape over its passes.

    One point per shape, like every other figure: the passes of a ``--repeats`` sweep are their
    median with the range over passes, not a comb of points.
    """
    out = []
    for records in shape_groups(series):
        values = [float(v) for r in records if (v := getattr(r, field))]
        if values:
            out.append((records[0].flops, float(np.median(values)), min(values), max(values)))
    return out


# --------------------------------------------------------------------------- 4. compile speedup


def _by_shape(series: Series) -> dict[Any, list[Record]]:
    return {records[0].shape: records for records in shape_groups(series)}


def speedup_points(eager: Series, compiled: Series) -> list[tuple[float, float, float, float]]:
    """``(flops, speedup, low, high)`` per shape both series measured; speedup = eager / compiled time.

    The interval combines the two time intervals (CI, else IQR; the range over passes of a
    ``--repeats`` sweep) at their extremes; each time is :func:`~mfu_sweep.present.figures.select.shape_time`.
    """
    a, b = _by_shape(eager), _by_shape(compiled)
    out = []
    for shape in sorted(set(a) & set(b), key=lambda s: (a[s][0].flops, s)):
        (ta, ia, _), (tb, ib, _) = shape_time(a[shape]), shape_time(b[shape])
        ia, ib = ia or (ta, ta), ib or (tb, tb)
        out.append((a[shape][0].flops, ta / tb, ia[0] / ib[1], ia[1] / ib[0]))
    return out


def has_speedup(sweeps: Sequence[Sweep], dtype: str | None = None) -> bool:
    """Whether some device and dtype has both eager and compile records."""
    keys = {k for k in group_series(sweeps) if dtype is None or k.dtype == dtype}
    return any(SeriesKey(k.label, k.dtype, "compile") in keys for k in keys if k.mode == "eager")


def _times_formatter(value: float, _pos: Any = None) -> str:
    return f"{value:g}×"


def plot_speedup(sweeps: Sequence[Sweep], *, dtype: str | None = None, colors: Mapping[str, str] | None = None,
                 legend: bool = True, ax: Axes | None = None) -> Axes:
    """``torch.compile`` speedup over eager (eager time / compiled time) against GEMM size, per device.

    Only devices measured in both modes appear; bars combine both time
    intervals; above 1× compiled code is faster.
    """
    dtype = pick_value(sweeps, "dtype", dtype)
    ax = new_ax(ax)
    colors = label_colors(sweeps, colors)
    groups = group_series(sweeps)
    drawn = False
    for key, eager in groups.items():
        other = groups.get(SeriesKey(key.label, key.dtype, "compile"))
        if key.dtype != dtype or key.mode != "eager" or other is None:
            continue
        pts = speedup_points(eager, other)
        if not pts:
            continue
        f, sp, lo, hi = (np.array(c) for c in zip(*pts, strict=True))
        ax.errorbar(f, sp, yerr=[np.maximum(sp - lo, 0), np.maximum(hi - sp, 0)], color=colors[key.label],
                    marker="o", linestyle="-" if is_family(eager) else "none", elinewidth=0.8,
                    label=series_name(key.label))
        drawn = True
    if not drawn:
        return no_data_panel(ax, f"no device with both eager and compile {dtype} records")
    ax.axhline(1.0, color=ANNOTATION_GREY, linewidth=0.7, zorder=1)
    flop_axis(ax)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(RatioLocator())
    ax.yaxis.set_major_formatter(mticker.FuncFormatter(_times_formatter))
    ax.yaxis.set_minor_formatter(mticker.NullFormatter())
    ax.set_ylabel("Compile speedup over eager (×)")
    ax.set_title(f"{dtype} · compile vs eager")
    if legend:
        add_legend(ax)
    return ax
