"""Figures of sweeps: MFU vs FLOPs, roofline, first-call cost, compile speedup, MFU heatmaps, status.

Every ``plot_*`` function draws one panel: it takes the sweeps (as
``mfu_sweep.results.load_sweeps`` returns them), the dtype and mode to show
and ``ax=None``, and returns the Axes, so figures compose in a notebook::

    import matplotlib.pyplot as plt
    from mfu_sweep.plot import plot_mfu, plot_roofline, theme
    from mfu_sweep.results import load_sweeps

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

import math
import statistics
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib as mpl
import matplotlib.ticker as mticker
import numpy as np
import seaborn as sns
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from mfu_sweep.fit import RooflineFit, fit_groups
from mfu_sweep.results import Record, Sweep
from mfu_sweep.series import Series, SeriesKey, group_series
from mfu_sweep.specs import Peak

METRICS = ("mfu", "tflops")
FORMATS = ("png", "pdf", "svg")
# Paper column widths in inches: one column, two columns.
COLUMN_IN = 3.5
DOUBLE_IN = 7.0
PANEL_H_IN = 2.6
PNG_DPI = 300
# Seaborn's colour-blind palette without its grey (used for annotations) and yellow (too pale on white),
# with reddish purple moved before vermillion so that the first four devices never pair orange with vermillion.
PALETTE = ("#0173b2", "#de8f05", "#029e73", "#cc78bc", "#d55e00", "#ca9161", "#56b4e9", "#fbafe4")
MODE_STYLE = {
    "eager": {"marker": "o", "linestyle": "-"},
    "compile": {"marker": "s", "linestyle": "--"},
}
OTHER_MODE_STYLE = {"marker": "^", "linestyle": ":"}
STATUS_STYLE = {
    "ok": {"marker": "o", "color": "#bbbbbb", "s": 10},
    "mismatch": {"marker": "D", "color": "#cc78bc", "s": 22},
    "timeout": {"marker": "v", "color": "#de8f05", "s": 26},
    "oom": {"marker": "X", "color": "#d55e00", "s": 30},
    "error": {"marker": "x", "color": "#000000", "s": 26},
    "unsupported": {"marker": "s", "color": "#949494", "s": 18},
}
ANNOTATION_GREY = "#595959"
SHARED_ROOF_COLOR = "#333333"  # a spec roof that several devices share
# Height of the leader strip along the top of an MFU panel, as a fraction of the axes.
LEADER_STRIP = 0.045
# Fit bands are drawn only up to this many devices per panel; more overlapping bands hide the data.
MAX_BANDS = 2
CROSSOVER_STYLE = {"data": "-", "fit": (0, (1, 1.5))}
INTERVAL_TEXT = {"ci": "95% CI of median", "iqr": "interquartile range", None: "no interval"}
STATUS_ABBREV = {"timeout": "T/O", "oom": "OOM", "error": "ERR", "unsupported": "n/a", "mismatch": "MIS"}
LEGEND_ROW_IN = 0.16  # height of one row of a figure legend at 7 pt
SVG_HASHSALT = "mfu-sweep"
# Settings read when a file is written: fixed SVG ids, embedded TrueType fonts in PDF (journals ask for it).
SAVE_RC = {"svg.hashsalt": SVG_HASHSALT, "svg.fonttype": "path", "pdf.fonttype": 42, "ps.fonttype": 42}
SAVE_METADATA = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
    "svg": {"Creator": None, "Date": None},
}


# --------------------------------------------------------------------------- theme, colours, labels


def theme_rc() -> dict[str, Any]:
    """Matplotlib rc settings of the house theme: seaborn ``whitegrid`` at paper size, 7-8 pt text."""
    rc: dict[str, Any] = {}
    rc.update(sns.axes_style("whitegrid"))
    rc.update(sns.plotting_context("paper", font_scale=0.8))
    rc.update({
        "font.size": 7.5, "axes.labelsize": 7.5, "axes.titlesize": 8, "xtick.labelsize": 7, "ytick.labelsize": 7,
        "legend.fontsize": 7, "legend.title_fontsize": 7, "legend.frameon": False,
        "axes.edgecolor": ".6", "axes.linewidth": 0.6, "grid.linewidth": 0.4, "grid.color": ".88",
        "xtick.bottom": True, "ytick.left": True, "xtick.major.size": 3, "ytick.major.size": 3,
        "xtick.minor.size": 1.5, "ytick.minor.size": 1.5, "xtick.major.width": 0.6, "ytick.major.width": 0.6,
        "xtick.minor.width": 0.4, "ytick.minor.width": 0.4, "lines.linewidth": 1.1, "lines.markersize": 3.5,
        "errorbar.capsize": 0, "figure.dpi": 100, "savefig.dpi": PNG_DPI,
        "svg.hashsalt": SVG_HASHSALT, "svg.fonttype": "path", "pdf.fonttype": 42, "ps.fonttype": 42,
        "axes.prop_cycle": mpl.cycler(color=list(PALETTE)),
    })
    return rc


@contextmanager
def theme() -> Iterator[None]:
    """Use the house theme inside a ``with`` block (rc settings are restored afterwards)."""
    with mpl.rc_context(theme_rc()):
        yield


def series_colors(labels: Iterable[str]) -> dict[str, str]:
    """A fixed colour per device label: sorted labels take the palette in order (it repeats after 8)."""
    return {lab: PALETTE[i % len(PALETTE)] for i, lab in enumerate(sorted(set(labels)))}


def mode_style(mode: str) -> dict[str, str]:
    """Marker and line style of a mode (eager: circles, solid; compile: squares, dashed)."""
    return dict(MODE_STYLE.get(mode, OTHER_MODE_STYLE))


def peak_kind(peak: Peak) -> str:
    """Where a peak comes from: ``"override"``, ``"estimated"`` or ``"vendor spec"``."""
    if peak.override:
        return "override"
    return "estimated" if peak.estimated else "vendor spec"


def metric_label(metric: str, kinds: Iterable[str] = ("vendor spec",)) -> str:
    """Axis label of a metric with its unit; MFU names the kind of peak it is measured against."""
    _check_metric(metric)
    if metric == "tflops":
        return "Throughput (TFLOP/s)"
    kinds = sorted(set(kinds))
    if len(kinds) == 1:
        return f"MFU (% of {kinds[0]} peak)"
    return "MFU (% of peak; " + " / ".join(kinds) + ")"


def series_name(label: str, peak: Peak | None = None, mode: str | None = None) -> str:
    """Legend text of a series: the label, the mode when given, and a non-vendor peak flagged."""
    text = safe_text(label) if mode is None else f"{safe_text(label)} · {mode}"
    if peak is not None and peak_kind(peak) != "vendor spec":
        text += f" ({peak_kind(peak)} peak)"
    return text


def safe_text(text: str) -> str:
    """``text`` with ``$`` escaped, so a label from a result file is never parsed as mathtext."""
    return text.replace("$", r"\$")


def _check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise ValueError(f"metric={metric!r} must be one of {', '.join(METRICS)}")


_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def format_si(value: float, unit: str = "") -> str:
    """``2e9, "FLOP"`` -> ``"2 GFLOP"``; three significant digits, SI prefixes from k to P."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".strip()
    for scale, prefix in _SI:
        if abs(value) >= scale * 0.9995:
            return f"{value / scale:.3g} {prefix}{unit}".strip()
    return f"{value:.3g} {unit}".strip()


class _ViewLocator(mticker.Locator):
    """A locator that computes ticks from the view interval, at most ``max_ticks`` of them."""

    def __init__(self, max_ticks: int = 5) -> None:
        self.max_ticks = max_ticks

    def __call__(self) -> list[float]:
        lo, hi = self.axis.get_view_interval()
        return self.tick_values(lo, hi)


class DecadeLocator(_ViewLocator):
    """Major ticks on powers of ten, thinned to at most ``max_ticks`` (every 3rd, 6th ... decade).

    A stride of 3 keeps ticks on SI prefix boundaries (1 M, 1 G, 1 T).
    """

    def tick_values(self, vmin: float, vmax: float) -> list[float]:
        vmin, vmax = sorted((vmin, vmax))
        if vmin <= 0 or not math.isfinite(vmax):
            return []
        a, b = math.ceil(math.log10(vmin) - 1e-9), math.floor(math.log10(vmax) + 1e-9)
        step = next((s for s in (1, 3, 6, 9, 12) if (b - a) // s + 1 <= self.max_ticks), 12)
        start = math.ceil(a / step) * step
        ticks = [10.0**e for e in range(start, b + 1, step)]
        for mantissas in ((1, 2, 5), (1, 2, 3, 4, 5, 6, 7, 8, 9)):
            if len(ticks) >= 2:
                break
            # less than a decade in view: 1-2-5 steps, else every integer mantissa
            ticks = [m * 10.0**e for e in range(a - 1, b + 1) for m in mantissas if vmin <= m * 10.0**e <= vmax]
        while len(ticks) > self.max_ticks:
            ticks = ticks[::2]
        return ticks


class RatioLocator(_ViewLocator):
    """Ticks for ratios on a log axis: 1× and round factors either side (0.5×, 2×, 10× ...)."""

    COARSE = tuple(m * 10.0**e for e in range(-3, 4) for m in (1, 2, 5))
    FINE = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.5, 1.75, 2.0)

    def __init__(self, max_ticks: int = 6) -> None:
        super().__init__(max_ticks)

    def tick_values(self, vmin: float, vmax: float) -> list[float]:
        vmin, vmax = sorted((vmin, vmax))
        ticks = [t for t in self.COARSE if vmin <= t <= vmax]
        if len(ticks) < 3:
            ticks = sorted(set(ticks) | {t for t in self.FINE if vmin <= t <= vmax})
        while len(ticks) > self.max_ticks:
            ticks = sorted(set(ticks[::2]) | ({1.0} & set(ticks)))
        return ticks


def log_axis(ax: Axes, which: str = "x", unit: str = "", max_ticks: int = 5) -> None:
    """Log scale with SI-prefixed decade labels (``1 MFLOP``, ``1 GFLOP``) and unlabelled minor ticks."""
    (ax.set_xscale if which == "x" else ax.set_yscale)("log")
    axis = ax.xaxis if which == "x" else ax.yaxis
    axis.set_major_locator(DecadeLocator(max_ticks))
    axis.set_major_formatter(mticker.FuncFormatter(lambda v, _: format_si(v, unit)))
    axis.set_minor_locator(mticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=40))
    axis.set_minor_formatter(mticker.NullFormatter())


FLOP_LABEL = "GEMM size (FLOP per call)"


def flop_axis(ax: Axes, which: str = "x") -> None:
    """The GEMM-size axis: log FLOP per call with SI tick labels."""
    log_axis(ax, which, "FLOP")
    (ax.set_xlabel if which == "x" else ax.set_ylabel)(FLOP_LABEL)


def _new_ax(ax: Axes | None, width: float = COLUMN_IN, height: float = PANEL_H_IN) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=(width, height), layout="constrained")
    return ax


def _legend(ax: Axes, extra: Sequence[Any] = (), **kw: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    for h in extra:
        handles.append(h)
        labels.append(h.get_label())
    seen: dict[str, Any] = {}
    for h, lab in zip(handles, labels, strict=True):
        if lab and not lab.startswith("_"):
            seen.setdefault(lab, h)
    if seen:
        ax.legend(list(seen.values()), list(seen), **{"loc": "best", "handlelength": 1.8, **kw})


# --------------------------------------------------------------------------- selecting data


def all_records(sweeps: Iterable[Sweep]) -> list[tuple[Sweep, Record]]:
    """Every record of every sweep (any status), with its sweep."""
    return [(sw, r) for sw in sweeps for r in sw.records]


def available(sweeps: Iterable[Sweep], field: str) -> list[str]:
    """Distinct ``dtype`` or ``mode`` values among the records, sorted (eager before compile)."""
    values = {getattr(r, field) for _, r in all_records(sweeps)}
    return sorted(values, key=lambda v: (v != "eager", v))


def filter_sweeps(sweeps: Sequence[Sweep], dtypes: Sequence[str] = (), modes: Sequence[str] = ()) -> list[Sweep]:
    """Keep only records of the given dtypes and modes (all when empty).

    Raises ``ValueError`` naming the filter and the values present when nothing is left.
    """
    for name, wanted in (("dtype", dtypes), ("mode", modes)):
        have = available(sweeps, name)
        missing = [w for w in wanted if w not in have]
        if missing:
            raise ValueError(f"--{name} {missing[0]} matches no records (present: {', '.join(have) or 'none'})")
    out = [sw.with_records(r for r in sw.records if (not dtypes or r.dtype in dtypes)
                           and (not modes or r.mode in modes)) for sw in sweeps]
    if not any(sw.records for sw in out):
        raise ValueError(f"no records with dtype in {list(dtypes)} and mode in {list(modes)}")
    return out


def _choose(have: Sequence[str], field: str, value: str | None, plural: str) -> str:
    """``value`` if the sweeps hold it, else the only value they hold; a ValueError names the choices."""
    if value is not None:
        if value not in have:
            raise ValueError(f"{field}={value!r} not in these sweeps (present: {', '.join(have) or 'none'})")
        return value
    if len(have) != 1:
        raise ValueError(f"these sweeps hold several {plural} ({', '.join(have)}); pass {field}=...")
    return have[0]


def _pick(sweeps: Sequence[Sweep], field: str, value: str | None) -> str:
    return _choose(available(sweeps, field), field, value, f"{field}s")


def _series(sweeps: Sequence[Sweep], dtype: str | None, mode: str | None) -> list[Series]:
    return [s for k, s in group_series(sweeps).items()
            if (dtype is None or k.dtype == dtype) and (mode is None or k.mode == mode)]


def _colors(sweeps: Sequence[Sweep], colors: Mapping[str, str] | None) -> Mapping[str, str]:
    return colors if colors is not None else series_colors(sw.label for sw in sweeps)


# --------------------------------------------------------------------------- values and intervals


def metric_value(record: Record, seconds: float, peak: Peak, metric: str) -> float | None:
    """``metric`` ("mfu" as a fraction, or "tflops") of ``record``'s GEMM at ``seconds`` per call."""
    if seconds is None or seconds <= 0:
        return None
    tflops = record.flops / seconds / 1e12
    if metric == "tflops":
        return tflops
    peak_tflops = peak.for_dtype(record.dtype)
    return tflops / peak_tflops if peak_tflops else None


def time_interval(record: Record) -> tuple[tuple[float, float] | None, str | None]:
    """Interval of the per-call time: the stored CI of the median, else the IQR of the samples."""
    if record.ci_low_s and record.ci_high_s:
        return (record.ci_low_s, record.ci_high_s), "ci"
    if len(record.samples_s) >= 2:
        q = statistics.quantiles(record.samples_s, n=4, method="inclusive")
        return (q[0], q[2]), "iqr"
    return None, None


def _points(series: Series, metric: str, x: str = "flops") -> tuple[np.ndarray, np.ndarray, np.ndarray, set[str]]:
    """``x`` (a record field), metric values and (2, n) error-bar extents, plus the interval kinds used."""
    xs, ys, lo, hi, kinds = [], [], [], [], set()
    for rec in series.records:
        y = metric_value(rec, rec.median_s, series.peak, metric)
        if y is None:
            continue
        interval, kind = time_interval(rec)
        kinds.add(kind)
        # a longer time is a lower throughput: the interval flips
        y_lo, y_hi = (metric_value(rec, interval[1], series.peak, metric),
                      metric_value(rec, interval[0], series.peak, metric)) if interval else (y, y)
        xs.append(getattr(rec, x))
        ys.append(y)
        lo.append(max(y - y_lo, 0.0))
        hi.append(max(y_hi - y, 0.0))
    return np.array(xs), np.array(ys), np.array([lo, hi]), kinds


def _interval_proxy(kinds: set[str]) -> Line2D | None:
    kinds = {k for k in kinds if k}
    if not kinds:
        return None
    text = " / ".join(INTERVAL_TEXT[k] for k in sorted(kinds))
    return Line2D([], [], color=ANNOTATION_GREY, marker="|", markersize=7, linestyle="none",
                  label=f"bars: {text}")


def is_family(series: Series) -> bool:
    """Whether the shapes form one curve in FLOPs (one shape per FLOP count), so lines may join them."""
    return len({r.flops for r in series.records}) == len({r.shape for r in series.records})


def _fit_curve(series: Series, fit: RooflineFit, metric: str, n: int = 200
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Fitted metric along the series: bytes follow the measured shapes (log-interpolated in FLOPs)."""
    f = np.array([r.flops for r in series.records])
    b = np.array([r.bytes for r in series.records])
    grid = np.geomspace(f.min(), f.max(), n)
    bytes_grid = np.exp(np.interp(np.log(grid), np.log(f), np.log(b)))
    scale = 1e12 * (1.0 if metric == "tflops" else (series.peak_tflops or math.nan))
    y = grid / fit.predict_time(grid, bytes_grid) / scale
    band = None
    if len(fit.boot):
        draws = grid / fit.predict_time_draws(grid, bytes_grid) / scale
        band = np.quantile(draws, [fit.alpha / 2, 1 - fit.alpha / 2], axis=0)
    return grid, y, band


def _plain(value: float, _pos: Any = None) -> str:
    return f"{value:g}"


def _plain_log_axis(ax: Axes, which: str = "y", max_ticks: int = 6) -> None:
    log_axis(ax, which, max_ticks=max_ticks)
    (ax.xaxis if which == "x" else ax.yaxis).set_major_formatter(mticker.FuncFormatter(_plain))


def _no_data(ax: Axes, text: str) -> Axes:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color=ANNOTATION_GREY, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


# --------------------------------------------------------------------------- 1. MFU vs FLOPs


def plot_mfu(sweeps: Sequence[Sweep], *, dtype: str | None = None, mode: str | None = None, metric: str = "mfu",
             fits: Mapping[SeriesKey, RooflineFit] | None = None, comparisons: Sequence[Any] | None = None,
             show_fit: bool = True, show_compare: bool = True, colors: Mapping[str, str] | None = None,
             legend: bool = True, ax: Axes | None = None) -> Axes:
    """MFU (or TFLOP/s) against GEMM size for every device of one dtype and mode.

    Draws the measured medians with their intervals (the stored 95% CI of the
    median, else the samples' IQR; the legend says which), the fitted
    roofline-with-overhead curve (with its bootstrap band when the panel has
    at most ``MAX_BANDS`` devices), and, where devices are compared, a strip
    along the top coloured by the device that leads each FLOP range
    (ambiguous ranges stay blank; see :func:`leader_spans`) and a vertical line
    at each crossover (solid: from data, dotted: from the fits) with its
    interval shaded.

    Parameters
    ----------
    sweeps:
        From ``mfu_sweep.results.load_sweeps``.
    dtype, mode:
        What to show; may be left out when the sweeps hold only one.
    metric:
        ``"mfu"`` (fraction of the peak, shown in %) or ``"tflops"``.
    fits:
        ``SeriesKey -> RooflineFit`` (``mfu_sweep.fit.fit_groups``); computed when None and ``show_fit``.
    comparisons:
        ``mfu_sweep.compare.compare_all`` results; computed when None and ``show_compare``.
    colors:
        Label -> colour; default :func:`series_colors` of every label in ``sweeps``.
    legend:
        Draw a legend on the Axes; :func:`figure_legend` moves it below a multi-panel figure.
    ax:
        Axes to draw on; a new single-column figure when None.

    Returns
    -------
    matplotlib.axes.Axes
    """
    _check_metric(metric)
    dtype, mode = _pick(sweeps, "dtype", dtype), _pick(sweeps, "mode", mode)
    ax = _new_ax(ax)
    colors = _colors(sweeps, colors)
    series = _series(sweeps, dtype, mode)
    no_peak = [s.label for s in series if metric == "mfu" and not s.peak_tflops]
    series = [s for s in series if s.label not in no_peak]
    if not series:
        return _no_data(ax, f"no usable {dtype} {mode} records" + (" with a peak" if metric == "mfu" else ""))
    if show_fit and fits is None:
        fits = fit_groups({s.key: s for s in series})[0]
    kinds: set[str] = set()
    fitted = banded = False
    mixed = len({peak_kind(s.peak) for s in series}) > 1
    top = 0.0  # highest point, error bar or fitted value: bootstrap bands may not stretch the axis
    for s in series:
        x, y, yerr, k = _points(s, metric)
        kinds |= k
        top = max(top, float(np.max(y + yerr[1], initial=0.0)))
        style = mode_style(mode)
        ax.errorbar(x, y, yerr=yerr, color=colors[s.label], marker=style["marker"], linestyle="none",
                    elinewidth=0.8, markersize=3.5, label=series_name(s.label, s.peak if mixed else None), zorder=3)
        fit = (fits or {}).get(s.key) if show_fit else None
        if fit is not None:
            grid, yf, band = _fit_curve(s, fit, metric)
            ax.plot(grid, yf, color=colors[s.label], linewidth=1.0, zorder=2, gid=f"fit:{s.label}")
            top = max(top, float(np.nanmax(yf, initial=0.0)))
            if band is not None and len(series) <= MAX_BANDS:
                banded = True
                ax.fill_between(grid, band[0], band[1], color=colors[s.label], alpha=0.15, linewidth=0, zorder=1,
                                gid=f"fit-band:{s.label}")
            fitted = True
    extra: list[Any] = [Line2D([], [], linestyle="none", label=f"{safe_text(lab)}: no {dtype} peak, not shown")
                        for lab in no_peak]
    if show_compare:
        extra += _draw_comparisons(ax, sweeps, dtype, mode, metric, comparisons, colors)
    flop_axis(ax)
    ax.set_ylabel(metric_label(metric, {peak_kind(s.peak) for s in series}))
    if metric == "mfu":
        percent_axis(ax.yaxis)
    strip = any(isinstance(h, Patch) for h in extra)  # headroom so the leader strip covers no data
    ax.set_ylim(0, (top or 1.0) * 1.08 / (1 - 1.5 * LEADER_STRIP if strip else 1.0))
    ax.set_title(f"{dtype} · {mode}")
    if banded:
        extra.insert(0, Patch(facecolor=ANNOTATION_GREY, alpha=0.25, linewidth=0, label="fit: 95% bootstrap band"))
    if fitted:
        extra.insert(0, Line2D([], [], color=ANNOTATION_GREY, label="roofline fit"))
    proxy = _interval_proxy(kinds)
    if proxy is not None:
        extra.insert(0, proxy)
    if legend:
        _legend(ax, extra)
    return ax


def _panel_comparisons(sweeps: Sequence[Sweep], dtype: str, mode: str, metric: str,
                       comparisons: Sequence[Any] | None) -> list[Any]:
    if comparisons is None:
        from mfu_sweep.report import compare_pairs

        series = {s.key: s for s in _series(sweeps, dtype, mode)}
        comparisons = compare_pairs(series, fit_groups(series)[0], metric)[0]
    return [c for c in comparisons if c.dtype == dtype and c.mode == mode]


def _segment_at(comparison: Any, x: float) -> Any:
    return next((s for s in comparison.segments if s.start_flops <= x <= s.end_flops), None)


def leader_spans(comparisons: Sequence[Any]) -> list[tuple[float, float, str]]:
    """FLOP ranges in which one device leads every comparison it takes part in.

    With one comparison these are its segments with a leader; with several,
    a range is kept only where a single device beats each rival measured
    there. Ambiguous ranges are left out.
    """
    bounds = sorted({b for c in comparisons for s in c.segments for b in (s.start_flops, s.end_flops)})
    labels = sorted({x for c in comparisons for x in (c.a, c.b)})
    spans: list[tuple[float, float, str]] = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        mid = math.sqrt(lo * hi)
        leaders = []
        for lab in labels:
            segs = [seg for c in comparisons if lab in (c.a, c.b) and (seg := _segment_at(c, mid)) is not None]
            if segs and all(seg.leader == lab for seg in segs):
                leaders.append(lab)
        if len(leaders) == 1:
            if spans and spans[-1][2] == leaders[0] and spans[-1][1] == lo:
                spans[-1] = (spans[-1][0], hi, leaders[0])
            else:
                spans.append((lo, hi, leaders[0]))
    return spans


def _draw_comparisons(ax: Axes, sweeps: Sequence[Sweep], dtype: str, mode: str, metric: str,
                      comparisons: Sequence[Any] | None, colors: Mapping[str, str]) -> list[Any]:
    """Leader bands and crossover markers with their intervals; returns legend proxies."""
    comps = _panel_comparisons(sweeps, dtype, mode, metric, comparisons)
    spans = leader_spans(comps)
    for lo, hi, lab in spans:
        ax.axvspan(lo, hi, ymin=1 - LEADER_STRIP, ymax=1.0, color=colors[lab], alpha=0.9, linewidth=0, zorder=4,
                   gid=f"leader:{lab}")
    methods = set()
    for c in comps:
        for x in c.crossovers:
            methods.add(x.method)
            ax.axvspan(x.low_flops, x.high_flops, color=ANNOTATION_GREY, alpha=0.12, linewidth=0, zorder=0,
                       gid=f"crossover-interval:{x.method}")
            ax.axvline(x.flops, color=ANNOTATION_GREY, linestyle=CROSSOVER_STYLE.get(x.method, ":"),
                       linewidth=0.9, zorder=1, gid=f"crossover:{x.method}")
    proxies: list[Any] = []
    if spans:
        proxies.append(Patch(facecolor=ANNOTATION_GREY, linewidth=0,
                             label="top strip: leading device (blank: ambiguous)"))
    for m in sorted(methods):
        proxies.append(Line2D([], [], color=ANNOTATION_GREY, linestyle=CROSSOVER_STYLE.get(m, ":"),
                              label=f"crossover ({m}) ± interval"))
    return proxies


def percent_decimals(fractions: Sequence[float]) -> int:
    """Fewest decimals that write every fraction exactly as a percentage (0.0025 -> 2: "0.25%")."""
    return next((d for d in range(4) if all(abs(v * 100 - round(v * 100, d)) < 1e-9 for v in fractions)), 4)


def percent_axis(axis: Any) -> None:
    """Tick labels in percent of a fraction, with as few decimals as the ticks need."""
    def fmt(value: float, _pos: Any) -> str:
        return f"{value * 100:.{percent_decimals(axis.get_majorticklocs())}f}%"

    axis.set_major_formatter(mticker.FuncFormatter(fmt))


# --------------------------------------------------------------------------- 2. roofline


def _roof(x: np.ndarray, p_tflops: float | None, w_tbs: float | None) -> np.ndarray:
    """``min(P, W * x)``; a missing P leaves the bandwidth line, a missing W the flat ceiling."""
    flat = np.full_like(x, p_tflops if p_tflops else np.inf)
    return np.minimum(flat, w_tbs * x) if w_tbs else flat


def _roofs(series: Sequence[Series], fits: Mapping[SeriesKey, RooflineFit] | None, colors: Mapping[str, str]
           ) -> tuple[list[tuple[str, float | None, float | None, str]], set[str]]:
    """``(colour, P, W, "spec"|"fit")`` per roof to draw, and the kinds of the spec peaks.

    Identical spec roofs (one chip, several labels) are drawn once in dark grey;
    fitted parameters the shapes do not constrain are left out (a bound, not a measurement).
    """
    spec: dict[tuple[float, float | None], list[str]] = {}
    kinds: set[str] = set()
    roofs: list[tuple[str, float | None, float | None, str]] = []
    for s in series:
        if s.peak_tflops:
            spec.setdefault((s.peak_tflops, s.peak.memory_bandwidth_tbs), []).append(s.label)
            kinds.add(peak_kind(s.peak))
        fit = (fits or {}).get(s.key)
        if fit is not None:
            c = fit.constrained
            p = fit.p_tflops if c.get("p_tflops", True) else None
            w = fit.w_tbs if c.get("w_tbs", True) else None
            if p or w:
                roofs.append((colors[s.label], p, w, "fit"))
    for (p, w), labels in spec.items():
        roofs.insert(0, (colors[labels[0]] if len(set(labels)) == 1 else SHARED_ROOF_COLOR, p, w, "spec"))
    return roofs, kinds


def plot_roofline(sweeps: Sequence[Sweep], *, dtype: str | None = None, mode: str | None = None,
                  fits: Mapping[SeriesKey, RooflineFit] | None = None, show_fit: bool = True,
                  colors: Mapping[str, str] | None = None, legend: bool = True, ax: Axes | None = None) -> Axes:
    """Achieved TFLOP/s against arithmetic intensity (FLOP/byte), log-log, for one dtype and mode.

    Per device: the measured points (with intervals), the peak roof
    ``min(P, W * I)`` from the spec (dotted; only the flat part when the spec
    has no bandwidth; dark grey when several devices share it), the fitted
    roof from ``fits`` (dashed; a ceiling the shapes do not constrain is left
    out) and the ridge points ``I = P / W`` of both (open diamond: spec,
    filled: fit). The fitted roof leaves out the per-call overhead ``t0``, so
    small GEMMs sit below it.

    Parameters are as for :func:`plot_mfu`.
    """
    dtype, mode = _pick(sweeps, "dtype", dtype), _pick(sweeps, "mode", mode)
    ax = _new_ax(ax)
    colors = _colors(sweeps, colors)
    series = _series(sweeps, dtype, mode)
    if not series:
        return _no_data(ax, f"no usable {dtype} {mode} records")
    if show_fit and fits is None:
        fits = fit_groups({s.key: s for s in series})[0]
    intens = np.array([r.intensity for s in series for r in s.records])
    lo, hi = intens.min() / 2, intens.max() * 2
    roofs, kinds = _roofs(series, fits if show_fit else None, colors)
    for _, p, w, _ in roofs:
        if p and w:
            lo, hi = min(lo, p / w / 2), max(hi, p / w * 2)
    grid = np.geomspace(lo, hi, 400)
    interval_kinds: set[str] = set()
    for s in series:
        x, y, yerr, k = _points(s, "tflops", x="intensity")
        interval_kinds |= k
        ax.errorbar(x, y, yerr=yerr, color=colors[s.label], marker=mode_style(mode)["marker"], linestyle="none",
                    elinewidth=0.8, markersize=3.5, label=series_name(s.label), zorder=3)
    for color, p, w, kind in roofs:
        line = ":" if kind == "spec" else "--"
        ax.plot(grid, _roof(grid, p, w), color=color, linestyle=line, linewidth=1.0, zorder=2, gid=f"roof:{kind}")
        if p and w:
            face = "white" if kind == "spec" else color
            ax.plot([p / w], [p], marker="D", markersize=4.5, color=color, markerfacecolor=face, gid=f"ridge:{kind}",
                    linestyle="none", zorder=4)
    ax.set_xlim(lo, hi)
    _plain_log_axis(ax, "x")
    _plain_log_axis(ax, "y")
    ax.set_xlabel("Arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("Throughput (TFLOP/s)")
    ax.set_title(f"{dtype} · {mode}")
    extra: list[Any] = []
    proxy = _interval_proxy(interval_kinds)
    if proxy is not None:
        extra.append(proxy)
    if kinds:
        extra.append(Line2D([], [], color=ANNOTATION_GREY, linestyle=":",
                            label=f"{' / '.join(sorted(kinds))} peak roof"))
    if any(kind == "fit" for *_, kind in roofs):
        extra.append(Line2D([], [], color=ANNOTATION_GREY, linestyle="--", label="fitted roof (without t0)"))
    if any(p and w for _, p, w, _ in roofs):
        extra.append(Line2D([], [], color=ANNOTATION_GREY, marker="D", markerfacecolor="white", markersize=4.5,
                            linestyle="none", label="ridge point (filled: fit)"))
    if legend:
        _legend(ax, extra)
    return ax


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
    dtype = _pick(sweeps, "dtype", dtype)
    ax = _new_ax(ax)
    colors = _colors(sweeps, colors)
    drawn = False
    for s in _series(sweeps, dtype, None):
        pts = [(r.flops, getattr(r, field)) for r in s.records if getattr(r, field)]
        if not pts:
            continue
        x, y = zip(*pts, strict=True)
        style = mode_style(s.mode)
        ax.plot(x, y, color=colors[s.label], marker=style["marker"], label=series_name(s.label, mode=s.mode),
                linestyle=style["linestyle"] if is_family(s) else "none")
        drawn = True
    if not drawn:
        return _no_data(ax, f"no first-call times for {dtype}")
    flop_axis(ax)
    _plain_log_axis(ax, "y")
    if quantity == "ratio":
        ax.axhline(1.0, color=ANNOTATION_GREY, linewidth=0.7, zorder=1)
        ax.yaxis.set_major_formatter(mticker.FuncFormatter(_times_formatter))
    ax.set_ylabel(ylabel)
    ax.set_title(f"{dtype} · first call" + (" / steady" if quantity == "ratio" else ""))
    if legend:
        _legend(ax)
    return ax


# --------------------------------------------------------------------------- 4. compile speedup


def _by_shape(series: Series) -> dict[Any, Record]:
    out: dict[Any, Record] = {}
    for r in series.records:
        out.setdefault(r.shape, r)
    return out


def speedup_points(eager: Series, compiled: Series) -> list[tuple[float, float, float, float]]:
    """``(flops, speedup, low, high)`` per shape both series measured; speedup = eager / compiled time.

    The interval combines the two time intervals (CI, else IQR) at their extremes.
    """
    a, b = _by_shape(eager), _by_shape(compiled)
    out = []
    for shape in sorted(set(a) & set(b), key=lambda s: (a[s].flops, s)):
        ra, rb = a[shape], b[shape]
        ia, ib = time_interval(ra)[0] or (ra.median_s,) * 2, time_interval(rb)[0] or (rb.median_s,) * 2
        out.append((ra.flops, ra.median_s / rb.median_s, ia[0] / ib[1], ia[1] / ib[0]))
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
    dtype = _pick(sweeps, "dtype", dtype)
    ax = _new_ax(ax)
    colors = _colors(sweeps, colors)
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
        return _no_data(ax, f"no device with both eager and compile {dtype} records")
    ax.axhline(1.0, color=ANNOTATION_GREY, linewidth=0.7, zorder=1)
    flop_axis(ax)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(RatioLocator())
    ax.yaxis.set_major_formatter(mticker.FuncFormatter(_times_formatter))
    ax.yaxis.set_minor_formatter(mticker.NullFormatter())
    ax.set_ylabel("Compile speedup over eager (×)")
    ax.set_title(f"{dtype} · compile vs eager")
    if legend:
        _legend(ax)
    return ax


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
    """Every ``(label, dtype, mode, k)`` for which :func:`plot_heatmap` has a grid to draw."""
    keys = sorted({(sw.label, r.dtype, r.mode) for sw, r in all_records(sweeps)})
    return [(lab, d, m, k) for lab, d, m in keys for k in grid_ks(sweeps, label=lab, dtype=d, mode=m)]


def plot_heatmap(sweeps: Sequence[Sweep], *, k: int, label: str | None = None, dtype: str | None = None,
                 mode: str | None = None, metric: str = "mfu", annotate: bool | None = None,
                 ax: Axes | None = None) -> Axes:
    """MFU (or TFLOP/s) over the m × n grid at one k, for one device, dtype and mode.

    Cells show the value (MFU in %); shapes that failed show their status
    (T/O, OOM, ERR, n/a) on a blank cell; unmeasured cells stay blank.
    ``annotate`` defaults to on for grids up to 12 × 12.
    """
    _check_metric(metric)
    label = _pick_label(sweeps, label)
    dtype, mode = _pick(sweeps, "dtype", dtype), _pick(sweeps, "mode", mode)
    ax = _new_ax(ax)
    recs = _grid_records(sweeps, label, dtype, mode, k)
    if not recs:
        return _no_data(ax, f"no {label} {dtype} {mode} records at k={k}")
    ms = sorted({r.shape.m for _, r in recs}, reverse=True)
    ns = sorted({r.shape.n for _, r in recs})
    values = np.full((len(ms), len(ns)), np.nan)
    status = np.full((len(ms), len(ns)), "", dtype=object)
    cells: dict[tuple[int, int], list[float]] = {}
    for sw, r in recs:
        i, j = ms.index(r.shape.m), ns.index(r.shape.n)
        v = metric_value(r, r.median_s, sw.peak, metric) if r.ok else None
        if v is not None:
            cells.setdefault((i, j), []).append(v)
        elif r.status != "ok":
            status[i, j] = STATUS_ABBREV.get(r.status, r.status)
    for (i, j), vs in cells.items():
        values[i, j] = statistics.median(vs)
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
    return _choose(sorted({sw.label for sw in sweeps}), "label", label, "devices")


# --------------------------------------------------------------------------- 6. status overview


def has_failures(sweeps: Sequence[Sweep]) -> bool:
    """Whether any record's status is not ``ok``."""
    return any(r.status != "ok" for _, r in all_records(sweeps))


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
    ax = _new_ax(ax, height=0.9 + 0.3 * max(1, len(rows)))
    if not rows:
        return _no_data(ax, "no records")
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
        _legend(ax, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return ax


# --------------------------------------------------------------------------- arranging and saving figures


def _grid(n: int, max_cols: int = 2) -> tuple[int, int]:
    cols = 1 if n == 1 else max_cols
    return math.ceil(n / cols), cols


def _figure(rows: int, cols: int, height: float = PANEL_H_IN, width: float | None = None) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(width or (COLUMN_IN if cols == 1 else DOUBLE_IN), height * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, [ax for row in axes for ax in row]


def _drop_unused(axes: Sequence[Axes], used: int) -> None:
    for ax in axes[used:]:
        ax.remove()


def figure_legend(fig: Figure, axes: Sequence[Axes]) -> None:
    """Move the legends of ``axes`` into one legend below the figure, entries deduplicated.

    Device entries come first (sorted), then the annotation keys in the order they appeared.
    """
    entries: dict[str, Any] = {}
    for ax in axes:
        leg = ax.get_legend()
        if leg is None:
            continue
        originals = dict(zip(*reversed(ax.get_legend_handles_labels()), strict=True))
        for handle, text in zip(leg.legend_handles, leg.get_texts(), strict=True):
            entries.setdefault(text.get_text(), originals.get(text.get_text(), handle))
        leg.remove()
    if not entries:
        return
    devices = sorted(t for t in entries if t in _series_texts(axes))
    order = devices + [t for t in entries if t not in devices]
    width_in = fig.get_figwidth()
    longest = max(len(t) for t in entries)
    # ~0.055 in per character at 7 pt, plus the handle and padding
    per_entry = 0.45 + 0.055 * longest
    ncols = max(1, min(len(entries), int(width_in * 0.95 // per_entry)))
    # grow the figure by the legend's height rather than shrinking the panels
    rows = math.ceil(len(entries) / ncols)
    fig.set_figheight(fig.get_figheight() + LEGEND_ROW_IN * rows + 0.1)
    fig.legend([entries[t] for t in order], order, loc="outside lower center", ncols=ncols,
               handlelength=1.8, columnspacing=1.2)


def _series_texts(axes: Sequence[Axes]) -> set[str]:
    """Legend texts of artists drawn on the axes (devices), as opposed to annotation proxies."""
    return {lab for ax in axes for lab in ax.get_legend_handles_labels()[1]}


def panel_keys(sweeps: Sequence[Sweep]) -> list[tuple[str, str]]:
    """The ``(dtype, mode)`` pairs that have usable records, eager before compile."""
    keys = {(k.dtype, k.mode) for k in group_series(sweeps)}
    return sorted(keys, key=lambda t: (t[0], t[1] != "eager", t[1]))


def _panels(sweeps: Sequence[Sweep], draw: Any, keys: Sequence[Any], height: float = PANEL_H_IN) -> Figure:
    rows, cols = _grid(len(keys))
    fig, axes = _figure(rows, cols, height)
    for ax, key in zip(axes, keys, strict=False):
        draw(ax, key)
    _drop_unused(axes, len(keys))
    figure_legend(fig, axes[:len(keys)])
    return fig


def make_figures(sweeps: Sequence[Sweep], *, metric: str = "mfu",
                 fits: Mapping[SeriesKey, RooflineFit] | None = None, comparisons: Sequence[Any] | None = None,
                 colors: Mapping[str, str] | None = None) -> dict[str, Figure]:
    """Every figure the sweeps support, by file stem, drawn in the house theme.

    ``mfu-vs-flops`` (``tflops-vs-flops``) and ``roofline`` (a panel per dtype and mode),
    ``first-call`` (per dtype: time and ratio), ``speedup`` (where a device has
    both modes), ``heatmap-<label>-<dtype>-<mode>-k<k>`` (per measured m × n
    grid) and ``status`` (when any record is not ok). ``fits`` and
    ``comparisons`` default to computing them (see ``mfu_sweep.report.analyse``).
    """
    _check_metric(metric)
    colors = _colors(sweeps, colors)
    keys = panel_keys(sweeps)
    if fits is None or comparisons is None:
        from mfu_sweep.report import compare_pairs

        series = group_series(sweeps)
        fits = fit_groups(series)[0] if fits is None else fits
        comparisons = compare_pairs(series, fits, metric)[0] if comparisons is None else comparisons
    figs: dict[str, Figure] = {}
    with theme():
        if keys:
            figs[f"{metric}-vs-flops"] = _panels(sweeps, lambda ax, k: plot_mfu(
                sweeps, dtype=k[0], mode=k[1], metric=metric, fits=fits, comparisons=comparisons, colors=colors,
                ax=ax), keys)
            figs["roofline"] = _panels(sweeps, lambda ax, k: plot_roofline(
                sweeps, dtype=k[0], mode=k[1], fits=fits, colors=colors, ax=ax), keys)
            figs["first-call"] = _first_call_figure(sweeps, colors)
        speed = [d for d in available(sweeps, "dtype") if has_speedup(sweeps, d)]
        if speed:
            figs["speedup"] = _panels(sweeps, lambda ax, d: plot_speedup(sweeps, dtype=d, colors=colors, ax=ax),
                                      speed)
        for label, dtype, mode, k in heatmap_grids(sweeps):
            fig, (ax,) = _figure(1, 1, height=3.0)
            plot_heatmap(sweeps, k=k, label=label, dtype=dtype, mode=mode, metric=metric, ax=ax)
            figs[f"heatmap-{_slug(label)}-{dtype}-{mode}-k{k}"] = fig
        if has_failures(sweeps):
            rows = len(status_rows(sweeps))
            fig, (ax,) = _figure(1, 1, height=1.2 + 0.3 * rows, width=DOUBLE_IN)
            plot_status(sweeps, ax=ax)
            figs["status"] = fig
    return figs


def _first_call_figure(sweeps: Sequence[Sweep], colors: Mapping[str, str]) -> Figure:
    dtypes = [d for d in available(sweeps, "dtype") if any(k.dtype == d for k in group_series(sweeps))]
    fig, axes = _figure(len(dtypes), 2)
    for i, d in enumerate(dtypes):
        plot_first_call(sweeps, dtype=d, quantity="time", colors=colors, ax=axes[2 * i])
        plot_first_call(sweeps, dtype=d, quantity="ratio", colors=colors, ax=axes[2 * i + 1])
    figure_legend(fig, axes)
    return fig


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text).strip("-") or "series"


def save_figure(fig: Figure, directory: str | Path, stem: str, formats: Sequence[str] = ("png",),
                dpi: int = PNG_DPI) -> list[Path]:
    """Write ``fig`` as ``directory/stem.<format>`` for each format; the bytes depend only on the figure.

    PNG carries no software tag, PDF no creation date or producer, SVG a fixed
    hash salt and no date, so rerunning on the same sweeps gives identical files.
    PDFs embed TrueType fonts; SVG text is drawn as paths (no font needed to view it).
    """
    out = []
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for fmt in formats:
        if fmt not in FORMATS:
            raise ValueError(f"format {fmt!r} must be one of {', '.join(FORMATS)}")
        path = directory / f"{stem}.{fmt}"
        with mpl.rc_context(SAVE_RC):
            fig.savefig(path, format=fmt, dpi=dpi, metadata=SAVE_METADATA[fmt])
        out.append(path)
    return out
