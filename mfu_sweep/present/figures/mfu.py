"""Figure 1: MFU (or TFLOP/s) vs GEMM size, with fits and the leader strip from the comparisons."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import Bbox

from mfu_sweep.analysis.fits.fit import RooflineFit, fit_groups
from mfu_sweep.analysis.fits.physical import measured_copy_bandwidth
from mfu_sweep.analysis.ground.series import SeriesKey
from mfu_sweep.present.figures.select import (
    fit_curve,
    interval_proxy,
    label_colors,
    metric_points,
    pick_series,
    pick_value,
)
from mfu_sweep.present.figures.theme import (
    ANNOTATION_GREY,
    CROSSOVER_STYLE,
    LEADER_STRIP,
    MAX_BANDS,
    UNCONSTRAINED_FIT,
    add_legend,
    check_metric,
    check_y_scale,
    flop_axis,
    log_value_axis,
    metric_label,
    mode_style,
    new_ax,
    no_data_panel,
    peak_kind,
    percent_axis,
    point_style,
    safe_text,
    series_name,
    spans_decades,
)
from mfu_sweep.present.machine_facts import legend_notes
from mfu_sweep.records.results import Sweep, is_published


def plot_mfu(sweeps: Sequence[Sweep], *, dtype: str | None = None, mode: str | None = None, metric: str = "mfu",
             fits: Mapping[SeriesKey, RooflineFit] | None = None, comparisons: Sequence[Any] | None = None,
             show_fit: bool = True, show_compare: bool = True, colors: Mapping[str, str] | None = None,
             legend: bool = True, y_scale: str = "auto", ax: Axes | None = None) -> Axes:
    """MFU (or TFLOP/s) against GEMM size for every device of one dtype and mode.

    Draws the measured medians with their intervals (the stored 95% CI of the
    median, else the samples' IQR; the legend says which), the fitted
    roofline-with-overhead curve (with its bootstrap band when the panel has
    at most ``MAX_BANDS`` devices), and, where devices are compared, a strip
    along the top coloured by the device that leads each FLOP range
    (ambiguous ranges stay blank; see :func:`leader_spans`; hatched where the lead is a run of adjacent
    bands' conclusion taken together, :func:`together_spans`) and a vertical line
    at each crossover (one per change of leader, from the data; the fits' crossings are its second estimate) with its
    interval shaded and a label that overlaps no other label nor the strip (:class:`CrossoverLabels`). Fitted
    curves follow one representative aspect (:func:`~mfu_sweep.present.figures.select.curve_bytes`).

    Parameters
    ----------
    sweeps:
        From ``mfu_sweep.records.results.load_sweeps``.
    dtype, mode:
        What to show; may be left out when the sweeps hold only one.
    metric:
        ``"mfu"`` (fraction of the peak, shown in %) or ``"tflops"``.
    fits:
        ``SeriesKey -> RooflineFit`` (``mfu_sweep.analysis.fits.fit.fit_groups``); computed when None and ``show_fit``.
    comparisons:
        ``mfu_sweep.analysis.verdicts.compare.compare_all`` results; computed when None and ``show_compare``.
    colors:
        Label -> colour; default :func:`series_colors` of every label in ``sweeps``.
    legend:
        Draw a legend on the Axes; :func:`figure_legend` moves it below a multi-panel figure.
    y_scale:
        ``"log"``, ``"linear"`` or ``"auto"`` (default: log when the points span more than a decade,
        so values near zero, e.g. a CPU's bf16 MFU of 1%, are not flattened against the axis).
    ax:
        Axes to draw on; a new single-column figure when None.

    Returns
    -------
    matplotlib.axes.Axes
    """
    check_metric(metric)
    check_y_scale(y_scale)
    dtype, mode = pick_value(sweeps, "dtype", dtype), pick_value(sweeps, "mode", mode)
    ax = new_ax(ax)
    colors = label_colors(sweeps, colors)
    series = pick_series(sweeps, dtype, mode)
    no_peak = [s.label for s in series if metric == "mfu" and not s.peak_tflops]
    series = [s for s in series if s.label not in no_peak]
    if not series:
        return no_data_panel(ax, f"no usable {dtype} {mode} records" + (" with a peak" if metric == "mfu" else ""))
    if show_fit and fits is None:
        fits = fit_groups({s.key: s for s in series}, copy_bandwidth=measured_copy_bandwidth(sweeps))[0]
    kinds: set[str] = set()
    extra: list[Any] = []
    fitted = banded = False
    mixed = len({peak_kind(s.peak) for s in series}) > 1
    top = 0.0  # highest point, error bar or fitted value: bootstrap bands may not stretch the axis
    values: list[float] = []  # every point and bar end, for the log axis' decision and its lower limit
    above = False  # a point above 100% of its peak (MFU)
    for s in series:
        x, y, yerr, k = metric_points(s, metric)
        above |= metric == "mfu" and bool(np.any(np.asarray(y) > 1))
        kinds |= k
        top = max(top, float(np.max(y + yerr[1], initial=0.0)))
        values += [*y, *(y - yerr[0]), *(y + yerr[1])]
        style = mode_style(mode)
        ax.errorbar(x, y, yerr=yerr, color=colors[s.label], marker=style["marker"], linestyle="none",
                    elinewidth=0.8, markersize=3.5, zorder=3, **point_style(s.device),
                    label=series_name(s.label, s.peak if mixed else None, published=is_published(s.device)))
        fit = (fits or {}).get(s.key) if show_fit else None
        if fit is not None and not fit.is_constrained:
            extra.append(Line2D([], [], linestyle="none", label=f"{safe_text(s.label)}: {UNCONSTRAINED_FIT}"))
        elif fit is not None:
            grid, yf, band = fit_curve(s, fit, metric)
            ax.plot(grid, yf, color=colors[s.label], linewidth=1.0, zorder=2, gid=f"fit:{s.label}")
            top = max(top, float(np.nanmax(yf, initial=0.0)))
            if band is not None and len(series) <= MAX_BANDS:
                banded = True
                ax.fill_between(grid, band[0], band[1], color=colors[s.label], alpha=0.15, linewidth=0, zorder=1,
                                gid=f"fit-band:{s.label}")
            fitted = True
    extra += [Line2D([], [], linestyle="none", label=f"{safe_text(lab)}: no {dtype} peak, not shown")
              for lab in no_peak]
    extra += [Line2D([], [], linestyle="none", label=safe_text(note))
              for s in series for note in legend_notes(s.label, s.peak, s.records)]
    if above:
        ax.axhline(1.0, color=ANNOTATION_GREY, linestyle=(0, (1, 1.5)), linewidth=0.8, zorder=1, gid="peak-100")
        extra.append(Line2D([], [], color=ANNOTATION_GREY, linestyle=(0, (1, 1.5)), linewidth=0.8,
                            label="100% of peak: points above it mean the peak is lower than this run reached "
                                  "(flag above_peak, kept)"))
    if show_compare:
        extra += _draw_comparisons(ax, sweeps, dtype, mode, metric, comparisons, colors)
    flop_axis(ax)
    ax.set_ylabel(metric_label(metric, {peak_kind(s.peak) for s in series}))
    strip = any(isinstance(h, Patch) for h in extra)  # headroom so the leader strip covers no data
    _scale_y(ax, metric, values, top, strip, y_scale)
    ax.set_title(f"{dtype} · {mode}")
    if banded:
        extra.insert(0, Patch(facecolor=ANNOTATION_GREY, alpha=0.25, linewidth=0, label="fit: 95% bootstrap band"))
    if fitted:
        extra.insert(0, Line2D([], [], color=ANNOTATION_GREY, label="roofline fit"))
    proxy = interval_proxy(kinds)
    if proxy is not None:
        extra.insert(0, proxy)
    if legend:
        add_legend(ax, extra)
    return ax


def _scale_y(ax: Axes, metric: str, values: Sequence[float], top: float, strip: bool, y_scale: str) -> None:
    """Log or linear y axis (``auto``: log over more than a decade) with room for the leader strip on top."""
    room = 1 - 1.5 * LEADER_STRIP if strip else 1.0
    if y_scale == "log" or (y_scale == "auto" and spans_decades(values)):
        log_value_axis(ax, percent=metric == "mfu")
        pos = [v for v in values if v > 0]
        lo, hi = math.log10(min(pos) / 1.3), math.log10((top or max(pos)) * 1.15)
        ax.set_ylim(10**lo, 10 ** (lo + (hi - lo) / room))
        return
    if metric == "mfu":
        percent_axis(ax.yaxis)
    ax.set_ylim(0, (top or 1.0) * 1.08 / room)


def _panel_comparisons(sweeps: Sequence[Sweep], dtype: str, mode: str, metric: str,
                       comparisons: Sequence[Any] | None) -> list[Any]:
    if comparisons is None:
        from mfu_sweep.analysis.verdicts.compare import compare_pairs

        series = {s.key: s for s in pick_series(sweeps, dtype, mode)}
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


def together_spans(comparisons: Sequence[Any], spans: Sequence[tuple[float, float, str]]
                   ) -> list[tuple[float, float, str]]:
    """The parts of ``spans`` (:func:`leader_spans`) where the lead is a run of adjacent bands' conclusion taken
    together, which none of its bands reaches alone (``Band.via``): the strip hatches them, as the sentences
    say "taken together"."""
    out = []
    for lo, hi, lab in spans:
        for c in comparisons:
            for band in c.bands:
                if band.state == 0 and band.via is not None and {1: c.a, -1: c.b}.get(band.via[3]) == lab:
                    left, right = max(lo, band.low_flops), min(hi, band.high_flops)
                    if left < right:
                        out.append((left, right, lab))
    return out


def _draw_comparisons(ax: Axes, sweeps: Sequence[Sweep], dtype: str, mode: str, metric: str,
                      comparisons: Sequence[Any] | None, colors: Mapping[str, str]) -> list[Any]:
    """Leader bands and crossover markers with their intervals; returns legend proxies."""
    comps = _panel_comparisons(sweeps, dtype, mode, metric, comparisons)
    spans = leader_spans(comps)
    for lo, hi, lab in spans:
        ax.axvspan(lo, hi, ymin=1 - LEADER_STRIP, ymax=1.0, color=colors[lab], alpha=0.9, linewidth=0, zorder=4,
                   gid=f"leader:{lab}")
    together = together_spans(comps, spans)
    for lo, hi, lab in together:
        ax.axvspan(lo, hi, ymin=1 - LEADER_STRIP, ymax=1.0, facecolor="none", edgecolor="white", hatch="////",
                   linewidth=0, zorder=4.5, gid=f"leader-together:{lab}")
    methods = set()
    labels = []
    for c in comps:
        for x in c.crossovers:
            methods.add(x.method)
            ax.axvspan(x.low_flops, x.high_flops, color=ANNOTATION_GREY, alpha=0.12, linewidth=0, zorder=0,
                       gid=f"crossover-interval:{x.method}")
            ax.axvline(x.flops, color=ANNOTATION_GREY, linestyle=CROSSOVER_STYLE.get(x.method, ":"),
                       linewidth=0.9, zorder=1, gid=f"crossover:{x.method}")
            labels.append(ax.text(x.flops, LABEL_TOP, f" {safe_text(x.from_label)} → {safe_text(x.to_label)} ",
                                  transform=ax.get_xaxis_transform(), rotation=90, ha="right", va="top",
                                  fontsize=5.5, color=ANNOTATION_GREY, zorder=5, gid=f"crossover-label:{x.method}",
                                  bbox={"facecolor": "white", "alpha": 0.75, "linewidth": 0, "pad": 0.6}))
    if labels:
        ax.add_artist(CrossoverLabels(ax, sorted(labels, key=lambda t: t.get_position()[0])))
    proxies: list[Any] = []
    if spans:
        unmeasured = any(not c.runs_measured for c in comps)
        proxies.append(Patch(facecolor=ANNOTATION_GREY, linewidth=0,
                             label="top strip: leading device (blank: ambiguous)"
                                   + ("; run-to-run variation not measured" if unmeasured else "")))
    if together:
        proxies.append(Patch(facecolor=ANNOTATION_GREY, edgecolor="white", hatch="////", linewidth=0,
                             label="hatched: a lead of adjacent bands taken together"))
    for m in sorted(methods):
        proxies.append(Line2D([], [], color=ANNOTATION_GREY, linestyle=CROSSOVER_STYLE.get(m, ":"),
                              label=f"crossover ({m}) ± interval, labelled old leader → new leader"))
    return proxies


LABEL_TOP = 1 - 1.6 * LEADER_STRIP  # axes fraction of the first row of crossover labels, below the leader strip
LABEL_STEPS = 12  # rows tried below it before a label is left out (the report's crossover table lists it)


class CrossoverLabels(Artist):
    """Places an Axes' crossover labels when it is drawn, where they overlap neither each other nor the leader
    strip and stay inside the Axes: each, in FLOP order, at the highest free row below the strip, left of its
    line, else right of it; a label with no free place is left out. Drawn just before the labels (zorder),
    with the renderer and the final layout, so a figure laid out again (a legend moved below) is placed again."""

    def __init__(self, ax: Axes, texts: Sequence[Any]) -> None:
        super().__init__()
        self._ax, self._texts = ax, list(texts)
        self.set_zorder(4.95)
        self.set_in_layout(False)

    def draw(self, renderer: Any) -> None:
        box = self._ax.get_window_extent(renderer)
        top = self._ax.transAxes.transform((0, LABEL_TOP))[1]
        placed: list[Bbox] = []
        for text in self._texts:
            spot = _free_spot(text, renderer, box, top, placed)
            if text.get_visible() != (spot is not None):
                text.set_visible(spot is not None)
            if spot is not None:
                placed.append(spot)
        self.stale = False


def _free_spot(text: Any, renderer: Any, box: Bbox, top: float, placed: Sequence[Bbox]) -> Bbox | None:
    """Moves ``text`` to its first free place (rows from ``top`` down, left then right of its line) and returns
    its padded extent there; None (text unmoved) when no row has room."""
    x = text.get_position()[0]
    to_axes = text.axes.transAxes.inverted()
    step = (top - box.y0) / LABEL_STEPS
    for row in range(LABEL_STEPS):
        y = to_axes.transform((0, top - row * step))[1]
        for ha in ("right", "left"):
            _move(text, (x, y), ha)
            ext = text.get_window_extent(renderer).padded(2)
            inside = box.x0 <= ext.x0 and ext.x1 <= box.x1 and box.y0 <= ext.y0 and ext.y1 <= top + 2
            if inside and not any(ext.overlaps(p) for p in placed):
                return ext
    return None


def _move(text: Any, xy: tuple[float, float], ha: str) -> None:
    if tuple(text.get_position()) != xy:
        text.set_position(xy)
    if text.get_horizontalalignment() != ha:
        text.set_horizontalalignment(ha)
