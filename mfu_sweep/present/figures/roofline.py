"""Figure 2: the roofline: measured TFLOP/s vs arithmetic intensity under the fitted and spec roofs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from mfu_sweep.analysis.fits.fit import RooflineFit, fit_groups
from mfu_sweep.analysis.fits.physical import measured_copy_bandwidth
from mfu_sweep.analysis.ground.series import Series, SeriesKey
from mfu_sweep.present.figures.select import interval_proxy, label_colors, metric_points, pick_series, pick_value
from mfu_sweep.present.figures.theme import (
    ANNOTATION_GREY,
    SHARED_ROOF_COLOR,
    UNCONSTRAINED_FIT,
    add_legend,
    mode_style,
    new_ax,
    no_data_panel,
    peak_kind,
    plain_log_axis,
    point_style,
    safe_text,
    series_name,
)
from mfu_sweep.records.results import Sweep, is_published


def _roof(x: np.ndarray, p_tflops: float | None, w_tbs: float | None) -> np.ndarray:
    """``min(P, W * x)``; a missing P leaves the bandwidth line, a missing W the flat ceiling."""
    flat = np.full_like(x, p_tflops if p_tflops else np.inf)
    return np.minimum(flat, w_tbs * x) if w_tbs else flat


def _roofs(series: Sequence[Series], fits: Mapping[SeriesKey, RooflineFit] | None, colors: Mapping[str, str]
           ) -> tuple[list[tuple[str, float | None, float | None, str]], set[str], list[list[str]]]:
    """``(colour, P, W, "spec"|"fit")`` per roof to draw, the kinds of the spec peaks, and the labels of
    each spec roof that several devices share.

    Identical spec roofs (one chip, several labels) are drawn once in dark grey;
    fitted parameters the shapes do not constrain are left out (a bound, not a measurement),
    and so is a fit that constrains nothing.
    """
    spec: dict[tuple[float, float | None], list[str]] = {}
    kinds: set[str] = set()
    roofs: list[tuple[str, float | None, float | None, str]] = []
    for s in series:
        if s.peak_tflops:
            spec.setdefault((s.peak_tflops, s.peak.memory_bandwidth_tbs), []).append(s.label)
            kinds.add(peak_kind(s.peak))
        fit = (fits or {}).get(s.key)
        if fit is not None and fit.is_constrained:
            c = fit.constrained
            p = fit.p_tflops if c.get("p_tflops", True) else None
            w = fit.w_tbs if c.get("w_tbs", True) else None
            if p or w:
                roofs.append((colors[s.label], p, w, "fit"))
    shared = []
    for (p, w), labels in spec.items():
        one = len(set(labels)) == 1
        roofs.insert(0, (colors[labels[0]] if one else SHARED_ROOF_COLOR, p, w, "spec"))
        if not one:
            shared.append(sorted(set(labels)))
    return roofs, kinds, shared


def plot_roofline(sweeps: Sequence[Sweep], *, dtype: str | None = None, mode: str | None = None,
                  fits: Mapping[SeriesKey, RooflineFit] | None = None, show_fit: bool = True,
                  colors: Mapping[str, str] | None = None, legend: bool = True, ax: Axes | None = None) -> Axes:
    """Achieved TFLOP/s against arithmetic intensity (FLOP/byte), log-log, for one dtype and mode.

    Per device: the measured points (one per shape, with intervals), the peak roof
    ``min(P, W * I)`` from the spec (dotted; only the flat part when the spec
    has no bandwidth; dark grey when several devices share it, the legend names them), the fitted
    roof from ``fits`` (dashed; a ceiling the shapes do not constrain is left
    out) and the ridge points ``I = P / W`` of both (open diamond: spec,
    filled: fit). The fitted roof leaves out the per-call overhead ``t0``, so
    small GEMMs sit below it.

    Parameters are as for :func:`plot_mfu`.
    """
    dtype, mode = pick_value(sweeps, "dtype", dtype), pick_value(sweeps, "mode", mode)
    ax = new_ax(ax)
    colors = label_colors(sweeps, colors)
    series = pick_series(sweeps, dtype, mode)
    if not series:
        return no_data_panel(ax, f"no usable {dtype} {mode} records")
    if show_fit and fits is None:
        fits = fit_groups({s.key: s for s in series}, copy_bandwidth=measured_copy_bandwidth(sweeps))[0]
    intens = np.array([r.intensity for s in series for r in s.records])
    lo, hi = intens.min() / 2, intens.max() * 2
    roofs, kinds, shared = _roofs(series, fits if show_fit else None, colors)
    for _, p, w, _ in roofs:
        if p and w:
            lo, hi = min(lo, p / w / 2), max(hi, p / w * 2)
    grid = np.geomspace(lo, hi, 400)
    interval_kinds: set[str] = set()
    for s in series:
        x, y, yerr, k = metric_points(s, "tflops", x="intensity")
        interval_kinds |= k
        ax.errorbar(x, y, yerr=yerr, color=colors[s.label], marker=mode_style(mode)["marker"], linestyle="none",
                    elinewidth=0.8, markersize=3.5, zorder=3, **point_style(s.device),
                    label=series_name(s.label, published=is_published(s.device)))
    for color, p, w, kind in roofs:
        line = ":" if kind == "spec" else "--"
        ax.plot(grid, _roof(grid, p, w), color=color, linestyle=line, linewidth=1.0, zorder=2, gid=f"roof:{kind}")
        if p and w:
            face = "white" if kind == "spec" else color
            ax.plot([p / w], [p], marker="D", markersize=4.5, color=color, markerfacecolor=face, gid=f"ridge:{kind}",
                    linestyle="none", zorder=4)
    ax.set_xlim(lo, hi)
    plain_log_axis(ax, "x")
    plain_log_axis(ax, "y")
    ax.set_xlabel("Arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("Throughput (TFLOP/s)")
    ax.set_title(f"{dtype} · {mode}")
    extra: list[Any] = [Line2D([], [], linestyle="none", label=f"{safe_text(s.label)}: {UNCONSTRAINED_FIT}")
                        for s in series if show_fit and (f := (fits or {}).get(s.key)) and not f.is_constrained]
    proxy = interval_proxy(interval_kinds)
    if proxy is not None:
        extra.append(proxy)
    if kinds:
        flat = any(w is None for _, _, w, kind in roofs if kind == "spec")
        extra.append(Line2D([], [], color=ANNOTATION_GREY, linestyle=":",
                            label=f"spec roof: {' / '.join(sorted(kinds))} peak"
                                  + (" (flat: the spec gives no memory bandwidth)" if flat else "")
                                  + ", in the device's colour"))
    for labels in shared:
        extra.append(Line2D([], [], color=SHARED_ROOF_COLOR, linestyle=":",
                            label=f"spec roof shared by {', '.join(safe_text(lab) for lab in labels)}"))
    if any(kind == "fit" for *_, kind in roofs):
        extra.append(Line2D([], [], color=ANNOTATION_GREY, linestyle="--",
                            label="fitted roof min(P, W × intensity), without t0"))
    if any(p and w for _, p, w, _ in roofs):
        extra.append(Line2D([], [], color=ANNOTATION_GREY, marker="D", markerfacecolor="white", markersize=4.5,
                            linestyle="none", label="ridge point (filled: fit)"))
    if legend:
        add_legend(ax, extra)
    return ax
