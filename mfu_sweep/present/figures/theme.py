"""The house look of every figure: rc theme, colours per device, mode styles, axis locators and labels,
panel and legend helpers."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib as mpl
import matplotlib.ticker as mticker
import seaborn as sns
from matplotlib.axes import Axes

from mfu_sweep.records.results import is_published
from mfu_sweep.specs import Peak

METRICS = ("mfu", "tflops")
FORMATS = ("png", "pdf", "svg")
# Paper column widths in inches: one column, two columns.
COLUMN_IN = 3.5
DOUBLE_IN = 7.0
PANEL_H_IN = 2.6
PNG_DPI = 300
# Okabe-Ito's colour-blind-safe blue, orange, green and reddish purple first, then Paul Tol's red, sky, indigo,
# olive and wine, and black, then a dark green, a brown, a lavender, a violet and a salmon (so that the 15
# published devices each have their own colour in a figure's one legend): every two of them differ by a
# CIEDE2000 distance of at least 20 (tests/test_plot.py), none is pale on white or the annotation grey.
# (Seaborn's palette had orange, vermillion and tan: B200 and gfx950, the headline crossover pair, came out
# in two near-identical oranges, 15 apart.)
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#cc3311", "#66ccee", "#000000", "#332288", "#999933",
           "#882255", "#335500", "#553300", "#9999ff", "#bb00ff", "#ff9977")
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
CROSSOVER_STYLE = {"runs": "-", "shapes": "-", "fit": (0, (1, 1.5))}
UNCONSTRAINED_FIT = "fit not constrained, not drawn"  # legend text of a fit the shapes do not pin down
BARS_PREFIX = "bars: "  # the legend key of error bars: "bars: <what they mean>"
INTERVAL_TEXT = {"ci": "95% CI of median", "iqr": "interquartile range", "passes": "range over passes",
                 None: "no interval"}
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


def series_colors(labels: Iterable[str], together: Iterable[Iterable[str]] = ()) -> dict[str, str]:
    """A fixed colour per device label, distinct among the labels drawn together.

    ``together`` are the sets of labels that share a panel (the devices of one dtype and mode). Sorted labels
    take, each in turn, the first palette colour no label it is drawn with has yet; only a panel with more
    devices than :data:`PALETTE` has colours repeats one (the least used). Without ``together``, every label
    is drawn with every other: sorted labels take the palette in order.
    """
    names = sorted(set(labels))
    groups = [set(g) for g in together] or [set(names)]
    of: dict[str, list[int]] = {lab: [i for i, g in enumerate(groups) if lab in g] for lab in names}
    used: list[dict[int, int]] = [{} for _ in groups]  # per group: palette index -> labels that have it
    out = {}
    for lab in names:
        count = {i: sum(used[g].get(i, 0) for g in of[lab]) for i in range(len(PALETTE))}
        pick = min(range(len(PALETTE)), key=lambda i: (count[i], i))
        for g in of[lab]:
            used[g][pick] = used[g].get(pick, 0) + 1
        out[lab] = PALETTE[pick]
    return out


def mode_style(mode: str) -> dict[str, str]:
    """Marker and line style of a mode (eager: circles, solid; compile: squares, dashed)."""
    return dict(MODE_STYLE.get(mode, OTHER_MODE_STYLE))


def peak_kind(peak: Peak) -> str:
    """Where a peak comes from: ``"override"``, ``"estimated"``, ``"vendor spec"``, or ``"none"`` when the
    sweep has no peak figure at all (an imported chip without a spec entry: MFU is empty)."""
    if not peak.tflops:
        return "none"
    if peak.override:
        return "override"
    return "estimated" if peak.estimated else "vendor spec"


def metric_label(metric: str, kinds: Iterable[str] = ("vendor spec",)) -> str:
    """Axis label of a metric with its unit; MFU names the kind of peak it is measured against."""
    check_metric(metric)
    if metric == "tflops":
        return "Throughput (TFLOP/s)"
    kinds = sorted(set(kinds))
    if len(kinds) == 1:
        return f"MFU (% of {kinds[0]} peak)"
    return "MFU (% of peak; " + " / ".join(kinds) + ")"


def series_name(label: str, peak: Peak | None = None, mode: str | None = None, published: bool = False) -> str:
    """Legend text of a series: the label, the mode when given, a non-vendor peak flagged, "published"
    for another team's imported measurement."""
    text = safe_text(label) if mode is None else f"{safe_text(label)} · {mode}"
    kind = peak_kind(peak) if peak is not None else "vendor spec"
    if kind != "vendor spec":
        text += " (no peak)" if kind == "none" else f" ({kind} peak)"
    return text + (" (published)" if published else "")


def point_style(device: Mapping[str, Any]) -> dict[str, Any]:
    """Marker fill of a series' points: hollow for published (imported) data, filled for measured."""
    return {"markerfacecolor": "white", "markeredgewidth": 0.9} if is_published(device) else {}


def safe_text(text: str) -> str:
    """``text`` with ``$`` escaped, so a label from a result file is never parsed as mathtext."""
    return text.replace("$", r"\$")


def check_metric(metric: str) -> None:
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


def new_ax(ax: Axes | None, width: float = COLUMN_IN, height: float = PANEL_H_IN) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=(width, height), layout="constrained")
    return ax


def add_legend(ax: Axes, extra: Sequence[Any] = (), **kw: Any) -> None:
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


def _plain(value: float, _pos: Any = None) -> str:
    return f"{value:g}"


def plain_log_axis(ax: Axes, which: str = "y", max_ticks: int = 6) -> None:
    log_axis(ax, which, max_ticks=max_ticks)
    (ax.xaxis if which == "x" else ax.yaxis).set_major_formatter(mticker.FuncFormatter(_plain))


def no_data_panel(ax: Axes, text: str) -> Axes:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color=ANNOTATION_GREY, wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])
    return ax


# --------------------------------------------------------------------------- 1. MFU vs FLOPs
def percent_decimals(fractions: Sequence[float]) -> int:
    """Fewest decimals that write every fraction exactly as a percentage (0.0025 -> 2: "0.25%")."""
    return next((d for d in range(4) if all(abs(v * 100 - round(v * 100, d)) < 1e-9 for v in fractions)), 4)


def percent_axis(axis: Any) -> None:
    """Tick labels in percent of a fraction, with as few decimals as the ticks need."""
    def fmt(value: float, _pos: Any) -> str:
        return f"{value * 100:.{percent_decimals(axis.get_majorticklocs())}f}%"

    axis.set_major_formatter(mticker.FuncFormatter(fmt))


Y_SCALES = ("auto", "log", "linear")


def spans_decades(values: Iterable[float], decades: float = 1.0) -> bool:
    """Whether the positive ``values`` span more than ``decades`` powers of ten (``auto`` picks a log axis)."""
    pos = [v for v in values if v > 0 and math.isfinite(v)]
    return bool(pos) and max(pos) / min(pos) > 10**decades


def check_y_scale(scale: str) -> None:
    if scale not in Y_SCALES:
        raise ValueError(f"y_scale={scale!r} must be one of {', '.join(Y_SCALES)}")


def log_value_axis(ax: Axes, percent: bool) -> None:
    """Log y axis for MFU (``percent``: fractions shown as ``1%``, ``10%``) or TFLOP/s (``0.1``, ``10``)."""
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(DecadeLocator(6))
    ax.yaxis.set_minor_locator(mticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=40))
    ax.yaxis.set_minor_formatter(mticker.NullFormatter())
    ax.yaxis.set_major_formatter(mticker.FuncFormatter(
        (lambda v, _: f"{v * 100:.6g}%") if percent else (lambda v, _: f"{v:.6g}")))


# --------------------------------------------------------------------------- 2. roofline
