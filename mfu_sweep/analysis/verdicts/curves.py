"""The points of a comparison: per-pass values of each series at every measured shape,
the zero crossings of a log-ratio curve, and bytes along FLOPs for the fit crossovers."""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mfu_sweep.analysis.ground.series import Series
from mfu_sweep.analysis.verdicts.comparison import LN_TERA
from mfu_sweep.analysis.verdicts.evidence import runs_of
from mfu_sweep.records.results import Record


@dataclass(frozen=True)
class PassCurve:
    """One series prepared for comparison: log median time per (pass, shape) and per (pass, FLOP count).

    ``passes`` are the pass indices of the records (0 for records without one);
    ``pass_indexed`` says whether any record carried a pass index.
    """

    label: str
    log_peak: float
    passes: tuple[int, ...]
    pass_indexed: bool
    shapes: Mapping[str, tuple[float, np.ndarray]]  # shape -> (flops, log median time per pass, NaN if absent)
    log_f: np.ndarray  # distinct FLOP counts (log), sorted
    log_t: np.ndarray  # (passes, FLOP counts): averaged over shapes of equal FLOPs, NaN where a pass lacks all


def pass_of(record: Record) -> int | None:
    """The pass (``sweep --repeats``) a record comes from, or None for files without a pass index."""
    value = getattr(record, "pass_index", None)  # Record.pass_index, JSON "pass" (sweep --repeats)
    if value is None:
        value = record.extra.get("pass")
    return None if value is None else int(value)


def _per_pass(series: Series) -> tuple[dict[str, tuple[float, dict[int, list[float]]]], bool]:
    per: dict[str, tuple[float, dict[int, list[float]]]] = {}
    indexed = False
    for rec in series.records:
        key = pass_of(rec)
        indexed |= key is not None
        per.setdefault(str(rec.shape), (rec.flops, {}))[1].setdefault(key or 0, []).extend(rec.samples_s)
    return per, indexed


def pass_curve(series: Series, metric: str) -> PassCurve:
    """Log median time of every shape in every pass of ``series`` (samples of one pass and shape pooled)."""
    per, indexed = _per_pass(series)
    passes = tuple(sorted({k for _, runs in per.values() for k in runs}))
    shapes = {name: (flops, np.array([math.log(float(np.median(runs[p]))) if p in runs else math.nan
                                      for p in passes]))
              for name, (flops, runs) in per.items()}
    by_f: dict[float, list[np.ndarray]] = {}
    for flops, values in shapes.values():
        by_f.setdefault(flops, []).append(values)
    fs = sorted(by_f)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a pass that measured none of a FLOP count's shapes: NaN
        log_t = np.stack([np.nanmean(np.stack(by_f[f]), axis=0) if np.isfinite(by_f[f]).any() else
                          np.full(len(passes), math.nan) for f in fs], axis=1)
    log_peak = math.log(series.peak_tflops) if metric == "mfu" else 0.0
    return PassCurve(label=series.label, log_peak=log_peak, passes=passes, pass_indexed=indexed, shapes=shapes,
                     log_f=np.log(fs), log_t=log_t)


def _log_metric(log_f: float, log_t: Any, curve: PassCurve) -> Any:
    """Log of TFLOP/s, or of MFU when the curve carries a peak."""
    return log_f - log_t - LN_TERA - curve.log_peak


# -- points --------------------------------------------------------------------


@dataclass(frozen=True)
class _Raw:
    """One point of a comparison: a shape both measured (``matched``), or one side's shape against the other side's
    prediction there (``model``; ``interpolated`` names the predicted series); see
    :mod:`mfu_sweep.analysis.verdicts.matching`."""

    flops: float
    shape: str
    values_a: np.ndarray  # log metric of a per pass (NaN where a pass lacks the shape)
    values_b: np.ndarray
    extra_var: float  # the prediction's variance (model points), 0 for matched shapes
    method: str  # "matched" or "model"
    interpolated: str | None
    combo: tuple[tuple[str, str, float], ...] = ()  # the log ratio as sum(coef * measured value of (side, shape))
    sigma2: float = 0.0  # residual variance of each measured value in ``combo`` (model points)
    df: float = math.inf  # its degrees of freedom

    @property
    def log_a(self) -> float:
        return float(np.nanmean(self.values_a))

    @property
    def log_b(self) -> float:
        return float(np.nanmean(self.values_b))

    @property
    def shown(self) -> tuple[float, float]:
        """The values a table shows for a and b: each the metric at the median time over passes, the one
        number per shape of :func:`~mfu_sweep.analysis.ground.series.shape_seconds` (the report's, the figures'),
        where the ratio and its test use the mean of the log over passes."""
        return _median_over_passes(self.values_a), _median_over_passes(self.values_b)


def _median_over_passes(log_values: np.ndarray) -> float:
    """The metric at the median time over passes: time is proportional to 1 / metric, so the median is taken
    of ``1 / metric`` (``statistics.median``, as ``shape_seconds``: the mean of the middle two when even)."""
    inverse = [math.exp(-v) for v in log_values if math.isfinite(v)]
    return 1.0 / statistics.median(inverse) if inverse else math.nan


# -- crossings along log FLOPs -------------------------------------------------


def _crossings(log_f: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Log FLOPs where piecewise-linear ``values`` (last axis along ``log_f``) changes sign; NaN-padded."""
    v0, v1 = values[..., :-1], values[..., 1:]
    change = (np.sign(v0) != np.sign(v1)) & (v0 != v1)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = log_f[:-1] + (log_f[1:] - log_f[:-1]) * v0 / (v0 - v1)
    return np.where(change, x, np.nan)


def crossing_point(log_f: np.ndarray, values: np.ndarray) -> float:
    """Median zero crossing of one curve; midpoint of the range when it has none."""
    xs = _crossings(log_f, values)
    xs = xs[~np.isnan(xs)]
    return float(np.median(xs)) if len(xs) else float((log_f[0] + log_f[-1]) / 2)


def lead_runs(verdict: np.ndarray) -> list[tuple[int, int, int]]:
    """(first index, last index, sign) of the runs with a leader."""
    return [(s, e - 1, int(verdict[s])) for s, e in runs_of(verdict) if verdict[s] != 0]


# -- crossovers implied by the fits --------------------------------------------


def bytes_along(series: Sequence[Series], log_f: np.ndarray) -> np.ndarray:
    """Bytes as a function of FLOPs along the measured shapes (log-log interpolation)."""
    pairs: dict[float, list[float]] = {}
    for s in series:
        for r in s.records:
            pairs.setdefault(math.log(r.flops), []).append(math.log(r.bytes))
    xs = sorted(pairs)
    return np.exp(np.interp(log_f, xs, [np.mean(pairs[x]) for x in xs]))
