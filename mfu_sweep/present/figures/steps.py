"""Figure: time to N steps against N (log-log), one line per device, mode and compile cache.

Colour is the device, line style the mode (eager solid, compile dashed), markers the cache (filled: cold,
hollow: warm). Each line's 95% interval is shaded; the N where the leader changes is a vertical line with
its interval shaded (compile against eager per device, and the crossovers between devices). The lines are
the measured step where step files are given (``mfu-sweep steps``), else the GEMM sum of a swept model
family. A series that did not finish has no line: one that ran into a time limit is an upward triangle at
N = 1 on the limit (its first step took longer), the legend names every one and why, and a panel where
nothing finished says so in words, never blank.
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
from mfu_sweep.analysis.steps.time_to_n import StepsResult, StepTimes
from mfu_sweep.present.export.steps import series_name, state_text, steps_results
from mfu_sweep.present.figures.theme import (
    ANNOTATION_GREY,
    add_legend,
    log_axis,
    mode_style,
    new_ax,
    no_data_panel,
    series_colors,
)
from mfu_sweep.records.results import Sweep
from mfu_sweep.records.step_files import StepFile

STEPS_FIGURE = "time-to-steps"
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
    dash = ":" if t.key.compile_mode else style["linestyle"]  # a compile mode other than default: dotted
    ax.plot(x, y, color=color, linestyle=dash, marker=style["marker"], markevery=decades,
            markersize=3.5, label=series_name(t.key), **hollow)
    lows = [iv.low for _, iv in t.times]
    highs = [iv.high for _, iv in t.times]
    if all(v is not None for v in lows + highs):
        ax.fill_between(x, np.array(lows, dtype=float), np.array(highs, dtype=float), color=color, alpha=0.12,
                        linewidth=0)


def _marks(result: StepsResult) -> list[tuple[Interval, str]]:
    out = [(b.n, f"{b.compile.label}: {b.compile.mode_name}") for b in result.break_evens
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

    Give ``result`` many N (:func:`~mfu_sweep.present.export.steps.dense_steps`) for smooth lines.
    """
    ax = new_ax(ax)
    colors = colors or series_colors(t.key.label for t in result.series)
    done = [t for t in result.series if t.finished]
    for t in done:
        _line(ax, t, result.steps, colors[t.key.label])
    limited = [t for t in result.series if not t.finished and t.limit_s]
    for t in limited:
        _at_limit(ax, t, colors[t.key.label])
    if not done and not limited:
        return no_data_panel(ax, f"{result.family}: no series finished a step\n" + "\n".join(
            f"{series_name(t.key)}: {t.why}" for t in result.series[:6]))
    top = max(result.steps)
    for n, text in _marks(result):
        _mark(ax, n, text, top)
    ax.set_xlim(0.8, top * 1.25)
    log_axis(ax, "x")
    time_axis(ax)
    ax.set_xlabel("Steps N")
    ax.set_ylabel("Time to N steps" + ("" if result.measured else " (GEMMs only)"))
    ax.set_title(f"{result.family} · {result.dtype} · {result.step_kind}" + (", measured" if result.measured else ""),
                 fontsize=7)
    extra = [Line2D([], [], color=colors[t.key.label], linestyle="none", marker="x",
                    label=f"{series_name(t.key)}: {state_text(t)}")
             for t in result.series if not t.finished and not t.limit_s]
    if not done:
        ax.annotate("no series finished: ▲ marks the time limit its first step ran past", (0.02, 0.02),
                    xycoords="axes fraction", fontsize=6, color=ANNOTATION_GREY)
    add_legend(ax, extra, fontsize=6)
    return ax


def _at_limit(ax: Axes, t: StepTimes, color: str) -> None:
    """A series that did not finish within its limit: ▲ at N = 1 on the limit (the first step took longer)."""
    hollow = {"markerfacecolor": "white"} if t.key.cache == "warm" else {}
    short = state_text(t) if t.facts is None else t.why.split(": ", 1)[-1]
    ax.plot([1], [t.limit_s], color=color, linestyle="none", marker="^", markersize=6,
            label=f"{series_name(t.key)}: {short} (▲ at the limit)", alpha=0.9, zorder=3, **hollow)
    ax.annotate(f"> {t.limit_s:g} s", (1, t.limit_s), textcoords="offset points", xytext=(5, 3), fontsize=6,
                color=color)


def figure_results(sweeps: Sequence[Sweep], seed: int = 0, step_files: Sequence[StepFile] = (),
                   exclude: bool = False) -> list[StepsResult]:
    """One result per measured model (step files) and per model family of the sweeps no step file measured, at
    many N for the figure (empty without either)."""
    return steps_results(sweeps, seed, step_files, exclude, dense=True)
