"""Figure: time to N steps against N (log-log), one line per device, mode and compile cache.

Colour is the device, line style the mode (eager solid, compile dashed), markers the cache (filled: cold,
hollow: warm). Each line's 95% interval is shaded; the N where the leader changes is a vertical line with
its interval shaded (compile against eager per device, and the crossovers between devices). A series
that did not finish has no line: the legend names it and why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.ticker as mticker
import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from mfu_sweep.analysis.steps.crossings import first_n
from mfu_sweep.analysis.steps.draws import Interval
from mfu_sweep.analysis.steps.time_to_n import StepsResult, StepTimes, predict_steps
from mfu_sweep.present.report_steps import dense_steps, family_workloads, series_name
from mfu_sweep.present.theme import (
    ANNOTATION_GREY,
    add_legend,
    log_axis,
    mode_style,
    new_ax,
    no_data_panel,
    series_colors,
)
from mfu_sweep.results import Sweep

MAX_MARKED = 6  # crossovers marked per panel: every break-even, then the earliest crossovers between devices
# Ticks of the time axis at round durations, so a reader sees minutes and hours rather than kiloseconds.
TIME_TICKS = ((1e-6, "1 µs"), (1e-5, "10 µs"), (1e-4, "100 µs"), (1e-3, "1 ms"), (1e-2, "10 ms"), (0.1, "100 ms"),
              (1.0, "1 s"), (10.0, "10 s"), (60.0, "1 min"), (600.0, "10 min"), (3600.0, "1 h"), (36000.0, "10 h"),
              (86400.0, "1 d"), (864000.0, "10 d"), (8640000.0, "100 d"), (86400000.0, "1000 d"))


def time_axis(ax: Axes, max_ticks: int = 6) -> None:
    """A log time axis ticked at round durations (1 s, 1 min, 1 h, 1 d ...), at most ``max_ticks`` of them."""
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    ticks = [(v, text) for v, text in TIME_TICKS if lo <= v <= hi]
    while len(ticks) > max_ticks:
        ticks = ticks[::2]
    ax.set_yticks([v for v, _ in ticks], [text for _, text in ticks])
    ax.yaxis.set_minor_formatter(mticker.NullFormatter())


def _line(ax: Axes, t: StepTimes, steps: Sequence[int], color: str) -> None:
    x = np.array(steps, dtype=float)
    y = np.array([iv.value for _, iv in t.times])
    style = mode_style(t.key.mode)
    hollow = {"markerfacecolor": "white"} if t.key.cache == "warm" else {}
    decades = [i for i, n in enumerate(steps) if math.log10(n).is_integer()]
    ax.plot(x, y, color=color, linestyle=style["linestyle"], marker=style["marker"], markevery=decades,
            markersize=3.5, label=series_name(t.key), **hollow)
    lows = [iv.low for _, iv in t.times]
    highs = [iv.high for _, iv in t.times]
    if all(v is not None for v in lows + highs):
        ax.fill_between(x, np.array(lows, dtype=float), np.array(highs, dtype=float), color=color, alpha=0.12,
                        linewidth=0)


def _marks(result: StepsResult) -> list[tuple[Interval, str]]:
    out = [(b.n, f"{b.compile.label}: compile") for b in result.break_evens
           if b.n is not None and math.isfinite(b.n.value) and b.n.value > 0]
    out += [(c.n, f"{c.after.label} {c.after.mode}") for c in result.crossings
            if (c.before.label, c.before.dtype, c.before.cache) != (c.after.label, c.after.dtype, c.after.cache)]
    return out[:MAX_MARKED]


def _mark(ax: Axes, n: Interval, text: str, top: int) -> None:
    x = first_n(n.value)
    if x is None or x > top:
        return
    ax.axvline(x, color=ANNOTATION_GREY, linewidth=0.8, linestyle=":", zorder=1)
    if n.low is not None and n.high is not None:
        ax.axvspan(max(1.0, n.low), min(float(top), n.high), color=ANNOTATION_GREY, alpha=0.08, linewidth=0)
    ax.annotate(f"{text} from N={x}", (x, 0.98), xycoords=("data", "axes fraction"), rotation=90, va="top",
                ha="right", fontsize=6, color=ANNOTATION_GREY)


def plot_time_to_steps(result: StepsResult, *, colors: Mapping[str, str] | None = None,
                       ax: Axes | None = None) -> Axes:
    """Time to N steps against N for every series of ``result`` (its ``steps`` are the x values).

    Give ``result`` many N (:func:`~mfu_sweep.present.report_steps.dense_steps`) for smooth lines.
    """
    ax = new_ax(ax)
    colors = colors or series_colors(t.key.label for t in result.series)
    done = [t for t in result.series if t.finished]
    for t in done:
        _line(ax, t, result.steps, colors[t.key.label])
    if not done:
        return no_data_panel(ax, f"no series finished the step of {result.family}")
    top = max(result.steps)
    for n, text in _marks(result):
        _mark(ax, n, text, top)
    log_axis(ax, "x")
    time_axis(ax)
    ax.set_xlabel("Steps N")
    ax.set_ylabel("Time to N steps (GEMMs only)")
    ax.set_title(f"{result.family} · {result.dtype}", fontsize=7)
    extra = [Line2D([], [], color=colors[t.key.label], linestyle="none", marker="x",
                    label=f"{series_name(t.key)}: {t.state}") for t in result.series if not t.finished]
    add_legend(ax, extra, fontsize=6)
    return ax


def figure_results(sweeps: Sequence[Sweep], seed: int = 0) -> list[StepsResult]:
    """One result per model family and dtype of the sweeps, at many N for the figure (empty without a family)."""
    out = []
    for _, dtype, gemms in family_workloads(sweeps):
        coarse = predict_steps(sweeps, gemms, dtype=dtype, seed=seed)
        out.append(predict_steps(sweeps, gemms, dtype=dtype, seed=seed, steps=dense_steps(coarse.steps)))
    return out
