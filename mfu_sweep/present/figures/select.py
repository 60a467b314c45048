"""What the figures draw: records and series picked from the sweeps, metric values, intervals, fit curves."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.lines import Line2D

from mfu_sweep.analysis.fits.fit import RooflineFit
from mfu_sweep.analysis.ground.series import Series, group_series
from mfu_sweep.analysis.ground.summary import shape_point, shape_records
from mfu_sweep.present.figures.theme import ANNOTATION_GREY, BARS_PREFIX, INTERVAL_TEXT, PALETTE, series_colors
from mfu_sweep.records.results import Record, Sweep
from mfu_sweep.records.summaries import available
from mfu_sweep.specs import Peak

# --------------------------------------------------------------------------- selecting data


def choose_value(have: Sequence[str], field: str, value: str | None, plural: str) -> str:
    """``value`` if the sweeps hold it, else the only value they hold; a ValueError names the choices."""
    if value is not None:
        if value not in have:
            raise ValueError(f"{field}={value!r} not in these sweeps (present: {', '.join(have) or 'none'})")
        return value
    if len(have) != 1:
        raise ValueError(f"these sweeps hold several {plural} ({', '.join(have)}); pass {field}=...")
    return have[0]


def pick_value(sweeps: Sequence[Sweep], field: str, value: str | None) -> str:
    return choose_value(available(sweeps, field), field, value, f"{field}s")


def pick_series(sweeps: Sequence[Sweep], dtype: str | None, mode: str | None) -> list[Series]:
    return [s for k, s in group_series(sweeps).items()
            if (dtype is None or k.dtype == dtype) and (mode is None or k.mode == mode)]


def label_colors(sweeps: Sequence[Sweep], colors: Mapping[str, str] | None) -> Mapping[str, str]:
    """``colors``, or :func:`~mfu_sweep.present.figures.theme.series_colors` of the sweeps: distinct among every device
    when the palette has a colour for each (a figure's one legend lists the devices of all its panels), else
    distinct among the devices of each dtype and mode (those that share a panel)."""
    if colors is not None:
        return colors
    if len({sw.label for sw in sweeps}) <= len(PALETTE):
        return series_colors(sw.label for sw in sweeps)
    panels: dict[tuple[str, str], set[str]] = {}
    for sw in sweeps:
        for key in {(r.dtype, r.series_mode) for r in sw.records}:
            panels.setdefault(key, set()).add(sw.label)
    return series_colors((sw.label for sw in sweeps), panels.values())


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


def shape_groups(series: Series) -> list[list[Record]]:
    """The records of each shape, in FLOP order (:func:`mfu_sweep.analysis.ground.summary.shape_records`)."""
    return shape_records(series)


def shape_interval_kind(records: Sequence[Record]) -> str | None:
    """What a shape's interval is (a key of ``INTERVAL_TEXT``): ``"passes"`` for several records, else the
    record's ``"ci"`` or ``"iqr"`` (None: no interval)."""
    return "passes" if len(records) > 1 else time_interval(records[0])[1]


def shape_time(records: Sequence[Record]) -> tuple[float, tuple[float, float] | None, str | None]:
    """A shape's per-call time and its interval: one record's median and CI (or IQR); with several
    passes, the median of the pass medians and their range (the run-to-run variation)."""
    if len(records) == 1:
        interval, kind = time_interval(records[0])
        return records[0].median_s, interval, kind
    point = shape_point(records, None)
    return point.seconds, (point.low_s, point.high_s), "passes"


def metric_points(series: Series, metric: str, x: str = "flops") -> tuple[np.ndarray, np.ndarray, np.ndarray, set[str]]:
    """``x`` (a record field), metric values and (2, n) error-bar extents, plus the interval kinds used.

    One point per shape: the passes of a ``--repeats`` sweep are one point at the median of their
    medians, with the range over passes as its bar.
    """
    xs, ys, lo, hi, kinds = [], [], [], [], set()
    for records in shape_groups(series):
        rec = records[0]
        seconds, interval, kind = shape_time(records)
        y = metric_value(rec, seconds, series.peak, metric)
        if y is None:
            continue
        kinds.add(kind)
        # a longer time is a lower throughput: the interval flips
        y_lo, y_hi = (metric_value(rec, interval[1], series.peak, metric),
                      metric_value(rec, interval[0], series.peak, metric)) if interval else (y, y)
        xs.append(getattr(rec, x))
        ys.append(y)
        lo.append(max(y - y_lo, 0.0))
        hi.append(max(y_hi - y, 0.0))
    return np.array(xs), np.array(ys), np.array([lo, hi]), kinds


def interval_proxy(kinds: set[str]) -> Line2D | None:
    kinds = {k for k in kinds if k}
    if not kinds:
        return None
    text = " / ".join(INTERVAL_TEXT[k] for k in sorted(kinds))
    return Line2D([], [], color=ANNOTATION_GREY, marker="|", markersize=7, linestyle="none",
                  label=f"{BARS_PREFIX}{text}")


def is_family(series: Series) -> bool:
    """Whether the shapes form one curve in FLOPs (one shape per FLOP count), so lines may join them."""
    return len({r.flops for r in series.records}) == len({r.shape for r in series.records})


def curve_bytes(series: Series, grid: np.ndarray) -> np.ndarray:
    """Bytes moved along one representative aspect at each FLOP count of ``grid`` (sorted): a power law
    ln bytes = a + c ln FLOPs fitted over the series' shapes (exact for shapes of one aspect, e.g. squares).

    Interpolating the shapes' own bytes zig-zagged where shapes of different aspects have nearly equal FLOPs;
    a fit drawn along this path is a smooth function of FLOPs.
    """
    log_f = np.log([r.flops for r in series.records])
    log_b = np.log([r.bytes for r in series.records])
    if np.ptp(log_f) == 0:  # one FLOP count: its median bytes
        return np.full(len(grid), math.exp(float(np.median(log_b))))
    slope, intercept = np.polyfit(log_f, log_b, 1)
    return np.exp(intercept + slope * np.log(grid))


def fit_curve(series: Series, fit: RooflineFit, metric: str, n: int = 200
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Fitted metric along the series on a sorted FLOP grid, bytes along :func:`curve_bytes`."""
    f = np.array([r.flops for r in series.records])
    grid = np.geomspace(f.min(), f.max(), n)
    bytes_grid = curve_bytes(series, grid)
    scale = 1e12 * (1.0 if metric == "tflops" else (series.peak_tflops or math.nan))
    y = grid / fit.predict_time(grid, bytes_grid) / scale
    band = None
    if len(fit.boot):
        draws = grid / fit.predict_time_draws(grid, bytes_grid) / scale
        band = np.quantile(draws, [fit.alpha / 2, 1 - fit.alpha / 2], axis=0)
    return grid, y, band
