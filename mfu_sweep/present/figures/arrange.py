"""Arranging panels into the figures `plot` and `report` write, and saving them reproducibly."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib as mpl
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from mfu_sweep.analysis.fits.fit import RooflineFit, fit_groups
from mfu_sweep.analysis.fits.physical import measured_copy_bandwidth
from mfu_sweep.analysis.fleet.leaderboard import many_devices
from mfu_sweep.analysis.fleet.view import replicate_fleets, replicate_groups
from mfu_sweep.analysis.ground.series import SeriesKey, group_series
from mfu_sweep.present import FIGURE_KINDS
from mfu_sweep.present.export.steps import family_workloads
from mfu_sweep.present.figures.choice import FigureChoice
from mfu_sweep.present.figures.compile import first_call_dtypes, has_speedup, plot_first_call, plot_speedup
from mfu_sweep.present.figures.fleet import board_of, figure_stem, heatmap_height, plot_fleet_heatmap
from mfu_sweep.present.figures.grid import has_failures, heatmap_grids, plot_heatmap, plot_status, status_rows
from mfu_sweep.present.figures.marks import mark_incomplete
from mfu_sweep.present.figures.mfu import plot_mfu
from mfu_sweep.present.figures.roofline import plot_roofline
from mfu_sweep.present.figures.select import available, label_colors
from mfu_sweep.present.figures.steps import STEPS_FIGURE, figure_results, plot_time_to_steps
from mfu_sweep.present.figures.theme import (
    BARS_PREFIX,
    COLUMN_IN,
    DOUBLE_IN,
    FORMATS,
    LEGEND_ROW_IN,
    PANEL_H_IN,
    PNG_DPI,
    SAVE_METADATA,
    SAVE_RC,
    check_metric,
    series_colors,
    theme,
)
from mfu_sweep.present.group_metric import GroupMetrics
from mfu_sweep.present.words import metric_name
from mfu_sweep.records.results import Sweep
from mfu_sweep.records.step_files import StepFile
from mfu_sweep.util.names import check_distinct_names, safe_name
from mfu_sweep.util.outputs import replacing

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
    entries = _merge_bar_keys(entries)
    series = _series_texts(axes)
    for text in [t for t in entries if t in series]:  # "cpu" beside "cpu (estimated peak)": one device, one entry
        if any(o != text and o.startswith(f"{text} (") for o in entries if o in series):
            del entries[text]
    devices = sorted(t for t in entries if t in series)
    order = devices + [t for t in entries if t not in devices]
    # ~0.055 in per character at 7 pt, plus the handle and padding
    per_entry = 0.45 + 0.055 * max(len(t) for t in entries)
    if per_entry > fig.get_figwidth() * 0.95:  # a long key widens a one-column figure, up to two columns
        fig.set_figwidth(max(fig.get_figwidth(), min(DOUBLE_IN, per_entry / 0.95)))
    width_in = fig.get_figwidth()
    fit_chars = max(20, int((width_in * 0.95 - 0.45) / 0.055))
    texts = [textwrap.fill(t, fit_chars) for t in order]  # still too long: wrapped, never cut off
    per_entry = 0.45 + 0.055 * max(len(line) for t in texts for line in t.splitlines())
    ncols = max(1, min(len(entries), int(width_in * 0.95 // per_entry)))
    # grow the figure by the legend's height rather than shrinking the panels
    lines = sum(t.count("\n") + 1 for t in texts)
    rows = math.ceil(len(entries) / ncols) + (lines - len(texts))
    fig.set_figheight(fig.get_figheight() + LEGEND_ROW_IN * rows + 0.1)
    fig.legend([entries[t] for t in order], texts, loc="outside lower center", ncols=ncols,
               handlelength=1.8, columnspacing=1.2)


def _merge_bar_keys(entries: dict[str, Any]) -> dict[str, Any]:
    """Panels whose bars mean different things ("bars: 95% CI of median", "bars: ... / range over passes")
    share one key naming every meaning, in the place of the first."""
    bars = [t for t in entries if t.startswith(BARS_PREFIX)]
    if len(bars) < 2:
        return entries
    kinds = sorted({k for t in bars for k in t[len(BARS_PREFIX):].split(" / ")})
    merged = BARS_PREFIX + " / ".join(kinds)
    out: dict[str, Any] = {}
    for text, handle in entries.items():
        if text in bars:
            out.setdefault(merged, handle)
        else:
            out[text] = handle
    return out


def _series_texts(axes: Sequence[Axes]) -> set[str]:
    """Legend texts of artists drawn on the axes (devices), as opposed to annotation proxies."""
    return {lab for ax in axes for lab in ax.get_legend_handles_labels()[1]}


def panel_keys(sweeps: Sequence[Sweep]) -> list[tuple[str, str]]:
    """The ``(dtype, mode)`` pairs that have usable records, eager before compile."""
    keys = {(k.dtype, k.mode) for k in group_series(sweeps)}
    return sorted(keys, key=lambda t: (t[0], t[1] != "eager", t[1]))


MetricOf = Callable[[str, str], str]  # (dtype, mode) -> the metric a figure draws them in


def valued(sweeps: Sequence[Sweep], of: MetricOf) -> set[tuple[str, str, str]]:
    """Every ``(label, dtype, mode)`` whose metric ``of(dtype, mode)`` has values, in one pass: MFU needs a peak
    for the dtype, and a figure without values is blank, so it is not drawn."""
    out = set()
    for sw in sweeps:
        for dtype, mode in {(r.dtype, r.series_mode) for r in sw.records}:  # eager-nt: a layout's own series
            if of(dtype, mode) != "mfu" or sw.peak.for_dtype(dtype):
                out.add((sw.label, dtype, mode))
    return out


def _metric_of(metric: str, metrics: GroupMetrics | None) -> MetricOf:
    return metrics.of if metrics is not None else lambda _d, _m: metric


def heatmap_stem(label: str, dtype: str, mode: str, k: int) -> str:
    """``heatmap-<label>-<dtype>-<mode>-k<k>``, the file stem of one m x n heatmap."""
    return f"heatmap-{slug(label)}-{dtype}-{mode}-k{k}"


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
                 colors: Mapping[str, str] | None = None, fleets: Sequence[Any] | None = None,
                 boards: Sequence[Any] = (), kinds: Collection[str] | None = None,
                 y_scale: str = "auto", choice: FigureChoice | None = None,
                 metrics: GroupMetrics | None = None, step_files: Sequence[StepFile] = (),
                 exclude: bool = False) -> dict[str, Figure]:
    """Every figure the sweeps support, by file stem, drawn in the house theme.

    ``mfu-vs-flops`` (``tflops-vs-flops``) and ``roofline`` (a panel per dtype and mode),
    ``first-call`` (per dtype: time and ratio), ``speedup`` (where a device has
    both modes), ``heatmap-<label>-<dtype>-<mode>-k<k>`` (per measured m × n
    grid), ``status`` (when any record is not ok), ``time-to-steps`` (when ``step_files`` are given, the
    measured step, runs flagged contended left out with ``exclude``; or when the records hold a model family's
    shapes, ``sweep --shapes llm:...``), and a device x FLOP band heatmap
    per fleet of a replicate run (``fleet-<label>-<dtype>-<mode>``) and per leaderboard
    in ``boards`` (``leaderboard-<dtype>-<mode>``; none for a leaderboard that is a fleet's own, whose
    heatmap would be the same picture). ``fits``, ``comparisons`` and
    ``fleets`` default to computing them (see ``mfu_sweep.present.report.write.analyse``); with
    more than a handful of devices of one dtype and mode, no pairs are compared. ``kinds``
    (a subset of :data:`FIGURE_KINDS`) draws only those figures; None draws all. ``y_scale``
    (``auto``, ``log``, ``linear``) is the MFU/TFLOP/s axis of the vs-flops panels (see
    :func:`~mfu_sweep.present.figures.mfu.plot_mfu`). ``choice`` (:mod:`mfu_sweep.present.figures.choice`)
    limits the overlays to its featured devices and the heatmaps to its own; None draws every one.
    ``metrics`` (:mod:`mfu_sweep.present.group_metric`, the report's) draws each dtype and mode of the
    vs-flops panels and heatmaps in its own metric; without it every one is in ``metric``. A panel or
    heatmap whose metric has no values (MFU without a peak) is not drawn: :func:`blank_notes` says which.
    """
    check_metric(metric)
    unknown = sorted(set(kinds or ()) - set(FIGURE_KINDS))
    if unknown:
        raise ValueError(f"figure kind {unknown[0]!r} is not one of {', '.join(FIGURE_KINDS)}")
    want = set(FIGURE_KINDS if kinds is None else kinds)
    if want & {"heatmap", "fleet"}:  # the figures named after a label
        check_distinct_names((s.label for s in sweeps), "figure", "relabel one (mfu-sweep merge --relabel "
                             "FILE:OLD=NEW)", "series")
    keys = panel_keys(sweeps)
    of = _metric_of(metric, metrics)
    if not sweeps:  # step files alone: the time-to-steps figure
        fits, comparisons, fleets = fits or {}, comparisons or [], fleets or []
    elif fits is None or comparisons is None or fleets is None:
        from mfu_sweep.analysis.verdicts.compare import compare_pairs

        series = group_series(sweeps)
        fits = fit_groups(series, copy_bandwidth=measured_copy_bandwidth(sweeps))[0] if fits is None else fits
        if comparisons is None:
            comparisons = [] if many_devices(series) else compare_pairs(series, fits, metric)[0]
        fleets = replicate_fleets(series) if fleets is None else fleets
    figs: dict[str, Figure] = {}
    featured = None if choice is None else choice.labels
    shown = sweeps if featured is None else [sw for sw in sweeps if sw.label in featured]
    colors = label_colors(shown, colors)  # distinct among the devices the panels draw together
    have = valued(sweeps, of)
    panels = {(d, m) for lab, d, m in valued(shown, of)}
    drawn = [k for k in keys if k in panels]
    with theme():
        if drawn and "vs-flops" in want:
            figs[f"{metric}-vs-flops"] = _panels(shown, lambda ax, k: _vs_flops(
                shown, k, of(*k), metric, fits=fits, comparisons=comparisons, colors=colors, y_scale=y_scale,
                ax=ax), drawn)
        if keys and "roofline" in want:
            figs["roofline"] = _panels(shown, lambda ax, k: plot_roofline(
                shown, dtype=k[0], mode=k[1], fits=fits, colors=colors, ax=ax), keys)
        if keys and "first-call" in want and first_call_dtypes(shown):
            figs["first-call"] = _first_call_figure(shown, colors)
        speed = [d for d in available(shown, "dtype") if has_speedup(shown, d)] if "speedup" in want else []
        if speed:
            figs["speedup"] = _panels(shown, lambda ax, d: plot_speedup(shown, dtype=d, colors=colors, ax=ax),
                                      speed)
        in_fleets = {id(f.board) for f in fleets}  # a replicate fleet's leaderboard: its heatmap is the fleet's
        for view in [*fleets, *(b for b in boards if id(b) not in in_fleets)] if "fleet" in want else []:
            if not board_of(view).cells:  # every device left out (no shape it shares with the reference): blank
                continue
            fig, (ax,) = _figure(1, 1, height=heatmap_height(len(board_of(view).devices)), width=DOUBLE_IN)
            plot_fleet_heatmap(view, ax=ax)
            figs[figure_stem(view)] = fig
        grids = heatmap_grids(sweeps) if choice is None else choice.heatmaps
        for label, dtype, mode, k in grids if "heatmap" in want else []:
            if (label, dtype, mode) not in have:
                continue
            fig, (ax,) = _figure(1, 1, height=3.0)
            plot_heatmap(sweeps, k=k, label=label, dtype=dtype, mode=mode, metric=of(dtype, mode), ax=ax)
            figs[heatmap_stem(label, dtype, mode, k)] = fig
        if "status" in want and has_failures(sweeps):
            rows = len(status_rows(sweeps))
            fig, (ax,) = _figure(1, 1, height=1.2 + 0.3 * rows, width=DOUBLE_IN)
            plot_status(sweeps, ax=ax)
            figs["status"] = fig
        steps = figure_results(shown, step_files=step_files, exclude=exclude) if "steps" in want else []
        if steps:
            labels = {t.key.label for r in steps for t in r.series}  # step files may name devices no sweep has
            tinted = colors if labels <= set(colors) else series_colors(labels | set(colors))
            figs[STEPS_FIGURE] = _panels(shown, lambda ax, r: plot_time_to_steps(r, colors=tinted, ax=ax), steps)
    mark_incomplete(figs, sweeps)
    return figs


def _vs_flops(sweeps: Sequence[Sweep], key: tuple[str, str], metric: str, figure_metric: str, *,
              comparisons: Sequence[Any], **kw: Any) -> Axes:
    """One panel of the vs-flops figure in its own ``metric`` (its title says so when the figure's differs)."""
    ax = plot_mfu(sweeps, dtype=key[0], mode=key[1], metric=metric,
                  comparisons=[c for c in comparisons if c.metric == metric], **kw)
    if metric != figure_metric:
        ax.set_title(f"{key[0]} · {key[1]} · TFLOP/s (a device has no {key[0]} peak)")
    return ax


def blank_notes(sweeps: Sequence[Sweep], metric: str = "mfu", *, metrics: GroupMetrics | None = None,
                kinds: Collection[str] | None = None, heatmaps: Sequence[tuple[str, str, str, int]] | None = None,
                ) -> list[str]:
    """What :func:`make_figures` leaves out because its metric has no values (MFU without a peak), and why.

    E.g. "no MFU panel for fp32 · eager in the vs-flops figure: no device has a peak for fp32 (--metric tflops
    draws it)" and "8 MFU heatmaps not drawn, their device has no peak for the dtype (blank): AMD_MI25 fp32
    eager (k 512, ...); --metric tflops draws them".
    ``heatmaps`` are the ones asked for (default: every grid).
    """
    want = set(FIGURE_KINDS if kinds is None else kinds)
    of = _metric_of(metric, metrics)
    have = valued(sweeps, of)
    panels = {(d, m) for _, d, m in have}
    notes = [f"no {metric_name(of(d, m))} panel for {d} · {m} in the vs-flops figure: no device has a peak for {d} "
             "(--metric tflops draws it)" for d, m in panel_keys(sweeps) if "vs-flops" in want and (d, m) not in panels]
    if "first-call" in want and panel_keys(sweeps) and not first_call_dtypes(sweeps):
        notes.append("no first-call figure: no record has a first-call time (an imported table has none)")
    skipped: dict[tuple[str, str, str], list[int]] = {}
    for label, d, m, k in (heatmap_grids(sweeps) if heatmaps is None else heatmaps) if "heatmap" in want else []:
        if (label, d, m) not in have:
            skipped.setdefault((label, d, m), []).append(k)
    if skipped:
        what = "; ".join(f"{lab} {d} {m} (k {', '.join(map(str, ks))})" for (lab, d, m), ks in skipped.items())
        notes.append(f"{sum(map(len, skipped.values()))} MFU heatmaps not drawn, their device has no peak for the "
                     f"dtype (blank): {what}; --metric tflops draws them")
    return notes


def figure_stems(sweeps: Sequence[Sweep], *, metric: str = "mfu", kinds: Collection[str] | None = None,
                 step_files: Sequence[StepFile] = ()) -> list[str]:
    """The file stems :func:`make_figures` gives ``sweeps`` (without leaderboards), found without fitting or
    drawing: ``plot`` checks its output directory for them before any work."""
    check_metric(metric)
    want = set(FIGURE_KINDS if kinds is None else kinds)
    keys = panel_keys(sweeps)
    have = valued(sweeps, _metric_of(metric, None))
    stems = [stem for kind, stem in (("vs-flops", f"{metric}-vs-flops"), ("roofline", "roofline"),
                                     ("first-call", "first-call")) if keys and kind in want]
    if "first-call" in stems and not first_call_dtypes(sweeps):  # imported tables: no first call was timed
        stems.remove("first-call")
    if not have and f"{metric}-vs-flops" in stems:
        stems.remove(f"{metric}-vs-flops")
    if "speedup" in want and any(has_speedup(sweeps, d) for d in available(sweeps, "dtype")):
        stems.append("speedup")
    if "fleet" in want:
        stems += [f"fleet-{slug(base)}-{dtype}-{mode}" for base, dtype, mode in replicate_groups(group_series(sweeps))]
    if "heatmap" in want:
        stems += [heatmap_stem(label, dtype, mode, k) for label, dtype, mode, k in heatmap_grids(sweeps)
                  if (label, dtype, mode) in have]
    if "status" in want and has_failures(sweeps):
        stems.append("status")
    if "steps" in want and (step_files or family_workloads(sweeps)):
        stems.append(STEPS_FIGURE)
    return stems


def _first_call_figure(sweeps: Sequence[Sweep], colors: Mapping[str, str]) -> Figure:
    timed = set(first_call_dtypes(sweeps))
    dtypes = [d for d in available(sweeps, "dtype") if d in timed and any(k.dtype == d for k in group_series(sweeps))]
    fig, axes = _figure(len(dtypes), 2)
    for i, d in enumerate(dtypes):
        plot_first_call(sweeps, dtype=d, quantity="time", colors=colors, ax=axes[2 * i])
        plot_first_call(sweeps, dtype=d, quantity="ratio", colors=colors, ax=axes[2 * i + 1])
    figure_legend(fig, axes)
    return fig


def slug(text: str) -> str:
    """A label as a file-name part (:func:`mfu_sweep.util.names.safe_name`, the rule of every file named after a
    label)."""
    return safe_name(text, "series")


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
        with mpl.rc_context(SAVE_RC), replacing(path) as tmp:  # a symlink at path is replaced, not written through
            fig.savefig(tmp, format=fmt, dpi=dpi, metadata=SAVE_METADATA[fmt])
        out.append(path)
    return out
