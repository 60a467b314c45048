"""Leaderboards per FLOP band: many devices against one reference, linear in devices.

Pairwise comparison (``mfu-sweep compare``) costs N² pairs. Here every device
is compared once with a *reference*: the median of the other devices at each
shape ("the rest"), or one baseline device (``compare --baseline LABEL``).

Evidence, per device and shape (:class:`ShapeEvidence`, the seam the verdicts
rest on): the log ratio of the metric (MFU, or TFLOP/s) to the reference, its
uncertainty and a two-sided p-value. Shapes a device did not measure are read
off its curve by linear interpolation in log FLOPs (never extrapolated).

The uncertainty is taken at the level of *shapes*, not samples: a median's
bootstrap only knows the noise within one run, while what moves a whole shape
from run to run (clocks, a busy neighbour, a different kernel) is what makes
false leads. So each device's per-shape log ratios are compared with their
FLOP-band means, and the robust spread of those residuals (MAD, pooled over
bands, corrected for the degrees of freedom the band means take) is the
per-shape noise; it is floored by the median spread over all devices and by
the variance of the medians themselves (from their distribution-free 95%
intervals, no resampling). Tests use Student's t with those degrees
of freedom.

Verdicts:

* per band (decades of FLOPs by default): the mean log ratio over the band's
  shapes; a device is *ahead* or *behind* when it is significant after Holm's
  correction over all devices x bands of the (dtype, mode) group, else *tied*;
  each band names the median device, the slowest and the top one;
* per shape, for runs: Holm over all devices x shapes; a device is slower
  (faster) over a run when at least ``min_run`` consecutive FLOP counts are
  significant in the same direction, the rule of the pairwise verdicts
  (``holm`` and ``apply_min_run`` of :mod:`mfu_sweep.analysis.verdicts.evidence`;
  :mod:`mfu_sweep.analysis.fleet.view` flags such devices).

The per-shape noise model is this module's own (band-mean residuals, pooled
over the devices); :func:`mfu_sweep.analysis.verdicts.evidence.shapes_evidence`, which
smooths one pair's log ratio along FLOPs, could replace it per device behind
:func:`shape_evidence`.

This module never imports matplotlib or torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from mfu_sweep.analysis.series import Series, SeriesKey
from mfu_sweep.analysis.verdicts.evidence import apply_min_run, holm, runs_of
from mfu_sweep.stats import median_ci_indices
from mfu_sweep.text import format_flops

LN_TERA = 12 * math.log(10)
METRICS = ("mfu", "tflops")
MAD_TO_SIGMA = 1.4826
MAD_EFFICIENCY = 0.37  # asymptotic efficiency of the MAD against the sd, normal noise: its effective df share
Z95 = 1.959964
# Standard error of a median relative to that of one value, for normal noise.
MEDIAN_SE = math.sqrt(math.pi / 2)
REST = "rest"
# More devices than this in one dtype and mode, and the analysis ranks them instead of comparing every pair.
HANDFUL = 4


class LeaderboardError(ValueError):
    """Series cannot be ranked together; the message says why."""


@dataclass(frozen=True)
class ShapeEvidence:
    """How a device differs from its reference at one shape.

    ``log_ratio`` is ln(metric / reference metric), ``se`` its standard error
    (shape-level noise included), ``p_value`` two-sided for H0: ratio = 1.
    """

    flops: float
    shape: str
    log_ratio: float
    se: float
    p_value: float
    interpolated: bool = False

    @property
    def ratio(self) -> float:
        return math.exp(self.log_ratio)

    def to_json(self) -> dict[str, Any]:
        return {"flops": self.flops, "shape": self.shape, "ratio": self.ratio, "log_ratio": self.log_ratio,
                "se": self.se, "p_value": self.p_value, "interpolated": self.interpolated}


@dataclass(frozen=True)
class Profile:
    """One series as the leaderboard sees it: log metric and the standard error of its median per shape."""

    label: str
    shapes: tuple[str, ...]
    flops: np.ndarray
    log_metric: np.ndarray
    se: np.ndarray


def _log_median_se(samples: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Log median per shape and its standard error from the distribution-free 95% interval of the median.

    The interval's half-width in log time over 1.96 (0 for a single sample);
    no resampling, so it costs one sort per shape.
    """
    med = np.empty(len(samples))
    se = np.zeros(len(samples))
    sizes = np.array([len(s) for s in samples])
    for size in np.unique(sizes):
        rows = np.flatnonzero(sizes == size)
        logs = np.sort(np.log(np.stack([samples[i] for i in rows])), axis=1)
        mid = logs[:, size // 2] if size % 2 else 0.5 * (logs[:, size // 2 - 1] + logs[:, size // 2])
        med[rows] = mid
        if size > 1:
            lo, hi = median_ci_indices(int(size))
            se[rows] = (logs[:, hi] - logs[:, lo]) / (2 * Z95)
    return med, se


def profile(series: Series, metric: str = "mfu") -> Profile:
    """The per-shape log metric of ``series`` (samples of one shape pooled) with the standard errors of the medians."""
    if metric not in METRICS:
        raise LeaderboardError(f"metric={metric!r} must be one of {', '.join(METRICS)}")
    if metric == "mfu" and series.peak_tflops is None:
        raise LeaderboardError(f"series {series.key} has no peak for {series.dtype}, so its MFU is undefined; "
                               "use --metric tflops (metric='tflops')")
    pooled: dict[str, tuple[float, list[float]]] = {}
    for rec in series.records:
        pooled.setdefault(str(rec.shape), (rec.flops, []))[1].extend(rec.samples_s)
    names = sorted(pooled, key=lambda n: (pooled[n][0], n))
    flops = np.array([pooled[n][0] for n in names])
    log_t, se = _log_median_se([np.asarray(pooled[n][1], float) for n in names])
    shift = math.log(series.peak_tflops) if metric == "mfu" else 0.0  # type: ignore[arg-type]
    return Profile(series.label, tuple(names), flops, np.log(flops) - log_t - LN_TERA - shift, se)


# -- alignment on one grid of shapes -------------------------------------------------------------------


@dataclass(frozen=True)
class Grid:
    """Every device's log metric on the union of the shapes (NaN where it cannot be read)."""

    labels: tuple[str, ...]
    shapes: tuple[str, ...]
    flops: np.ndarray  # (S,)
    values: np.ndarray  # (N, S)
    se: np.ndarray  # (N, S)
    interpolated: np.ndarray  # (N, S) bool


def _read_off(p: Profile, flops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Linear interpolation in log FLOPs of the profile (equal-FLOP shapes averaged); NaN outside its range."""
    levels, inverse = np.unique(p.flops, return_inverse=True)
    mean_v = np.bincount(inverse, p.log_metric) / np.bincount(inverse)
    mean_se = np.bincount(inverse, p.se) / np.bincount(inverse)
    x, xs = np.log(flops), np.log(levels)
    inside = (x >= xs[0]) & (x <= xs[-1])
    return (np.where(inside, np.interp(x, xs, mean_v), np.nan), np.where(inside, np.interp(x, xs, mean_se), np.nan))


def align(profiles: Sequence[Profile]) -> Grid:
    """Put ``profiles`` on the union of their shapes, ordered by FLOPs."""
    where: dict[str, float] = {}
    for p in profiles:
        where.update(zip(p.shapes, p.flops.tolist(), strict=True))
    shapes = sorted(where, key=lambda n: (where[n], n))
    flops = np.array([where[n] for n in shapes])
    column = {n: i for i, n in enumerate(shapes)}
    values = np.full((len(profiles), len(shapes)), np.nan)
    se = np.full_like(values, np.nan)
    interp = np.zeros(values.shape, dtype=bool)
    for d, p in enumerate(profiles):
        v, s = _read_off(p, flops)
        values[d], se[d] = v, s
        interp[d] = ~np.isnan(v)
        cols = [column[n] for n in p.shapes]
        values[d, cols], se[d, cols], interp[d, cols] = p.log_metric, p.se, False
    return Grid(tuple(p.label for p in profiles), tuple(shapes), flops, values, se, interp)


def rest_median(values: np.ndarray) -> np.ndarray:
    """Per column, each row's median of the *other* rows' values (NaN ignored; NaN with no other value)."""
    out = np.full(values.shape, np.nan)
    for s in range(values.shape[1]):
        col = values[:, s]
        ok = np.flatnonzero(~np.isnan(col))
        m = len(ok) - 1
        if m < 1:
            continue
        order = np.argsort(col[ok], kind="stable")
        sv = col[ok][order]
        rank = np.empty(len(ok), dtype=int)
        rank[order] = np.arange(len(ok))

        def without(j: int, r: np.ndarray = rank, sorted_values: np.ndarray = sv) -> np.ndarray:
            return sorted_values[j + (j >= r)]

        out[ok, s] = without(m // 2) if m % 2 else 0.5 * (without(m // 2 - 1) + without(m // 2))
    return out


# -- bands, noise and the per-shape evidence -----------------------------------------------------------


@dataclass(frozen=True)
class Band:
    """A FLOP range ``[low_flops, high_flops)``."""

    low_flops: float
    high_flops: float

    @property
    def name(self) -> str:
        return f"{format_flops(self.low_flops)} - {format_flops(self.high_flops)}"

    def to_json(self) -> dict[str, Any]:
        return {"low_flops": self.low_flops, "high_flops": self.high_flops, "name": self.name}


def flop_bands(flops: np.ndarray, per_decade: int = 1) -> tuple[tuple[Band, ...], np.ndarray]:
    """Decade bands (``per_decade`` per decade) covering ``flops``, and each shape's band index."""
    pos = np.floor(np.log10(flops) * per_decade + 1e-9).astype(int)
    levels, index = np.unique(pos, return_inverse=True)
    bands = tuple(Band(10 ** (lv / per_decade), 10 ** ((lv + 1) / per_decade)) for lv in levels)
    return bands, index


def _noise(log_ratio: np.ndarray, median_var: np.ndarray, band: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per device: the per-shape noise variance and its degrees of freedom (see the module docstring)."""
    n_dev = log_ratio.shape[0]
    own, dof = np.full(n_dev, np.nan), np.zeros(n_dev)
    for d in range(n_dev):
        ok = ~np.isnan(log_ratio[d])
        if not ok.any():
            continue
        b, x = band[ok], log_ratio[d, ok]
        counts = np.bincount(b)
        means = np.bincount(b, x) / np.maximum(counts, 1)
        k = counts[b]
        keep = k > 1
        dof[d] = float(np.sum(counts[counts > 1] - 1))
        if dof[d] >= 1:
            resid = (x - means[b])[keep] * np.sqrt(k[keep] / (k[keep] - 1))
            own[d] = (MAD_TO_SIGMA * float(np.median(np.abs(resid - np.median(resid))))) ** 2
    pooled = float(np.nanmedian(own)) if np.isfinite(own).any() else 0.0
    floor = np.nan_to_num(np.nanmean(np.where(np.isnan(log_ratio), np.nan, median_var), axis=1))
    var = np.fmax(np.nan_to_num(own, nan=pooled), np.maximum(pooled, floor))
    pooled_dof = float(np.median(dof[dof >= 1])) if (dof >= 1).any() else 1.0
    # A MAD is worth 37% of the residuals a standard deviation would use (normal noise); the floor by the
    # median over devices adds what the other devices measured, nothing with 2 or 3 (whose log ratios to
    # the median of the others mirror each other), about one device's worth for each further device.
    worth = MAD_EFFICIENCY * max(1, n_dev - 2)
    return np.maximum(var, 1e-300), worth * np.where(dof >= 1, dof, pooled_dof)


@dataclass(frozen=True)
class _Evidence:
    grid: Grid
    log_ratio: np.ndarray  # (N, S)
    var: np.ndarray  # (N,) per-shape noise variance
    dof: np.ndarray  # (N,)
    bands: tuple[Band, ...]
    band_of: np.ndarray  # (S,)


def _evidence(grid: Grid, reference: str, per_decade: int) -> _Evidence:
    if reference == REST:
        ref = rest_median(grid.values)
        k = np.sum(~np.isnan(grid.values), axis=0)
        ref_se = MEDIAN_SE * np.nanmedian(grid.se, axis=0) / np.sqrt(np.maximum(k - 1, 1))
        ref_var = np.broadcast_to(ref_se**2, grid.values.shape)
    else:
        base = grid.labels.index(reference)
        ref = np.broadcast_to(grid.values[base], grid.values.shape)
        ref_var = np.broadcast_to(grid.se[base] ** 2, grid.values.shape)
    log_ratio = grid.values - ref
    bands, band_of = flop_bands(grid.flops, per_decade)
    var, dof = _noise(log_ratio, grid.se**2 + ref_var, band_of)
    return _Evidence(grid, log_ratio, var, dof, bands, band_of)


def _exp(x: float) -> float:
    """``exp(x)``, infinite where it overflows (an interval from a t quantile of very few degrees of freedom)."""
    return math.exp(x) if x < 709.0 else math.inf


def _p(est: np.ndarray, se: np.ndarray, dof: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return 2 * student_t.sf(np.abs(est) / se, dof)


def shape_evidence(ev: _Evidence, d: int) -> tuple[ShapeEvidence, ...]:
    """The per-shape evidence of device ``d`` (shapes it has a value at)."""
    g = ev.grid
    se = math.sqrt(ev.var[d])
    lr = ev.log_ratio[d]
    p = _p(lr, np.full(lr.shape, se), np.full(lr.shape, ev.dof[d]))
    return tuple(ShapeEvidence(float(g.flops[s]), g.shapes[s], float(lr[s]), se, float(p[s]),
                               bool(g.interpolated[d, s]))
                 for s in range(len(g.shapes)) if not np.isnan(lr[s]))


# -- verdicts per band and per run ---------------------------------------------------------------------


@dataclass(frozen=True)
class BandCell:
    """One device in one band: the geometric-mean ratio to the reference, its interval and verdict.

    ``verdict`` is +1 (ahead), -1 (behind) or 0 (tied); ``p_adjusted`` is
    Holm-adjusted over every device and band of the leaderboard.
    """

    label: str
    band: int
    ratio: float
    low: float
    high: float
    p_value: float
    p_adjusted: float
    verdict: int
    n_shapes: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class BandBoard:
    """One band: who is ahead, behind or tied, and the median, slowest and top device (label, ratio)."""

    band: Band
    ahead: tuple[tuple[str, float], ...]
    tied: tuple[str, ...]
    behind: tuple[tuple[str, float], ...]
    median: tuple[str, float]
    slowest: tuple[str, float]
    top: tuple[str, float]

    @property
    def n_devices(self) -> int:
        return len(self.ahead) + len(self.tied) + len(self.behind)

    def to_json(self) -> dict[str, Any]:
        def named(items: Iterable[tuple[str, float]]) -> list[dict[str, Any]]:
            return [{"label": lbl, "ratio": r} for lbl, r in items]

        return {"band": self.band.to_json(), "n_devices": self.n_devices, "ahead": named(self.ahead),
                "tied": list(self.tied), "behind": named(self.behind), "median": named([self.median])[0],
                "slowest": named([self.slowest])[0], "top": named([self.top])[0]}


@dataclass(frozen=True)
class Run:
    """A run of at least ``min_run`` consecutive FLOP counts where a device is significantly faster (+1) or slower."""

    label: str
    direction: int
    start_flops: float
    end_flops: float
    ratio: float
    n_points: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _band_cells(ev: _Evidence, alpha: float, skip: int | None) -> list[BandCell]:
    rows = []
    for d, label in enumerate(ev.grid.labels):
        if d == skip:
            continue
        for b in range(len(ev.bands)):
            x = ev.log_ratio[d, ev.band_of == b]
            x = x[~np.isnan(x)]
            if len(x):
                rows.append((label, b, float(np.mean(x)), math.sqrt(ev.var[d] / len(x)), float(ev.dof[d]), len(x)))
    if not rows:
        return []
    est, se, dof = (np.array([r[i] for r in rows]) for i in (2, 3, 4))
    p = _p(est, se, dof)
    adj = holm(p)
    half = student_t.ppf(1 - alpha / 2, dof) * se
    return [BandCell(label, b, math.exp(e), math.exp(e - h), _exp(e + h), float(pv), float(pa),
                     int(np.sign(e)) if pa < alpha else 0, n)
            for (label, b, e, _, _, n), h, pv, pa in zip(rows, half, p, adj, strict=True)]


def _boards(cells: Sequence[BandCell], bands: Sequence[Band]) -> tuple[BandBoard, ...]:
    out = []
    for b, band in enumerate(bands):
        here = sorted((c for c in cells if c.band == b), key=lambda c: (-c.ratio, c.label))
        if not here:
            continue
        ahead = tuple((c.label, c.ratio) for c in here if c.verdict > 0)
        behind = tuple((c.label, c.ratio) for c in reversed(here) if c.verdict < 0)
        mid = here[len(here) // 2]
        out.append(BandBoard(band, ahead, tuple(c.label for c in here if c.verdict == 0), behind,
                             (mid.label, mid.ratio), (here[-1].label, here[-1].ratio), (here[0].label, here[0].ratio)))
    return tuple(out)


def _runs(ev: _Evidence, alpha: float, min_run: int, skip: int | None) -> list[Run]:
    """Runs per device from the per-shape tests, Holm-corrected over every device and shape.

    The run rule is the pairwise verdicts' (:func:`mfu_sweep.analysis.verdicts.evidence.apply_min_run`).
    """
    p = _p(ev.log_ratio, np.sqrt(ev.var)[:, None], ev.dof[:, None])
    valid = ~np.isnan(ev.log_ratio)
    if skip is not None:
        valid[skip] = False
    adj = np.ones_like(p)
    adj[valid] = holm(p[valid])
    verdict = np.where(valid & (adj < alpha), np.sign(np.nan_to_num(ev.log_ratio)), 0).astype(int)
    out = []
    for d, label in enumerate(ev.grid.labels):
        cols = np.flatnonzero(valid[d])
        kept = apply_min_run(verdict[d, cols], min_run, ev.grid.flops[cols])
        for start, stop in runs_of(kept):
            if kept[start] == 0:
                continue
            pts = cols[start:stop]
            out.append(Run(label, int(kept[start]), float(ev.grid.flops[pts].min()), float(ev.grid.flops[pts].max()),
                           math.exp(float(np.median(ev.log_ratio[d, pts]))), len(pts)))
    return sorted(out, key=lambda r: (r.label, r.start_flops))


# -- the leaderboard -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Leaderboard:
    """Devices of one dtype and mode against a reference (``"rest"`` or a baseline label), per FLOP band.

    ``overall`` is each device's geometric-mean ratio to the reference over its shapes;
    ``evidence`` the per-shape evidence (the seam both verdicts rest on).
    """

    dtype: str
    mode: str
    metric: str
    reference: str
    alpha: float
    min_run: int
    labels: tuple[str, ...]
    bands: tuple[Band, ...]
    cells: tuple[BandCell, ...]
    boards: tuple[BandBoard, ...]
    runs: tuple[Run, ...]
    overall: Mapping[str, float]
    evidence: Mapping[str, tuple[ShapeEvidence, ...]]
    notes: tuple[str, ...] = ()

    @property
    def devices(self) -> tuple[str, ...]:
        """The ranked devices (all labels but a baseline reference)."""
        return tuple(lbl for lbl in self.labels if lbl != self.reference)

    def matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """(ratio, verdict) arrays of shape (devices, bands); NaN / 0 where a device has no shape in a band."""
        row = {lbl: i for i, lbl in enumerate(self.devices)}
        ratio = np.full((len(self.devices), len(self.bands)), np.nan)
        verdict = np.zeros(ratio.shape, dtype=int)
        for c in self.cells:
            ratio[row[c.label], c.band], verdict[row[c.label], c.band] = c.ratio, c.verdict
        return ratio, verdict

    def reference_text(self) -> str:
        return "the median of the other devices" if self.reference == REST else f"baseline {self.reference}"

    def to_json(self, shapes: bool = False) -> dict[str, Any]:
        out = {"dtype": self.dtype, "mode": self.mode, "metric": self.metric, "reference": self.reference,
               "alpha": self.alpha, "min_run": self.min_run, "devices": list(self.devices),
               "bands": [b.to_json() for b in self.bands], "boards": [b.to_json() for b in self.boards],
               "cells": [c.to_json() for c in self.cells], "runs": [r.to_json() for r in self.runs],
               "overall": dict(self.overall), "notes": list(self.notes)}
        if shapes:
            out["evidence"] = {lbl: [e.to_json() for e in ev] for lbl, ev in self.evidence.items()}
        return out

    def lines(self, most: int = 3) -> list[str]:
        """A text table: one line per band."""
        name = "MFU" if self.metric == "mfu" else "TFLOP/s"
        head = (f"leaderboard {self.dtype} {self.mode} ({name}), {len(self.devices)} devices vs "
                f"{self.reference_text()}; ahead/behind = Holm-corrected p < {self.alpha:g} over "
                f"{len(self.devices)} devices x {len(self.bands)} bands")
        rows = [head, f"{'band':<24} {'ahead':<34} {'tied':>5}  {'behind':<34} {'median':<22} slowest"]
        for b in self.boards:
            rows.append(f"{b.band.name:<24} {_few(b.ahead, most):<34} {len(b.tied):>5}  {_few(b.behind, most):<34} "
                        f"{_named(b.median):<22} {_named(b.slowest)}")
        return rows + [f"note: {n}" for n in self.notes]


def _named(item: tuple[str, float]) -> str:
    return f"{item[0]} x{item[1]:.3f}"


def _few(items: Sequence[tuple[str, float]], most: int) -> str:
    if not items:
        return "-"
    text = ", ".join(_named(i) for i in items[:most])
    return text + (f" +{len(items) - most} more" if len(items) > most else "")


def _check(series: Sequence[Series], reference: str, alpha: float, min_run: int) -> None:
    if len({(s.dtype, s.mode) for s in series}) > 1:
        raise LeaderboardError("a leaderboard ranks series of one dtype and mode; got "
                               + ", ".join(sorted({f'{s.dtype} {s.mode}' for s in series})))
    if len(series) < 2:
        raise LeaderboardError(f"a leaderboard needs at least two devices; got {len(series)}")
    labels = [s.label for s in series]
    if len(set(labels)) != len(labels):
        raise LeaderboardError("a leaderboard needs one series per label")
    if reference != REST and reference not in labels:
        raise LeaderboardError(f"no series labelled {reference!r} to be the baseline (have: {', '.join(labels)})")
    if not 0 < alpha < 1 or min_run < 1:
        raise LeaderboardError(f"need 0 < alpha < 1 and min_run >= 1 (got {alpha}, {min_run})")


def leaderboard(series: Sequence[Series], metric: str = "mfu", *, reference: str = REST, alpha: float = 0.05,
                min_run: int = 2, per_decade: int = 1) -> Leaderboard:
    """Rank the ``series`` (one per device, one dtype and mode) against ``reference`` per FLOP band.

    Parameters
    ----------
    series:
        From :func:`mfu_sweep.series.group_series`, one per label.
    metric:
        ``"mfu"`` (needs every peak) or ``"tflops"``.
    reference:
        ``"rest"`` (default: at each shape, the median of the other devices) or the label of a baseline.
    alpha, min_run:
        Family-wise error rate over devices x bands (and devices x shapes for runs), and the run length.
    per_decade:
        FLOP bands per decade.

    Cost is linear in the number of devices.
    """
    series = sorted(series, key=lambda s: s.label)
    _check(series, reference, alpha, min_run)
    grid = align([profile(s, metric) for s in series])
    ev = _evidence(grid, reference, per_decade)
    skip = grid.labels.index(reference) if reference != REST else None
    cells = _band_cells(ev, alpha, skip)
    overall = {lbl: math.exp(float(np.nanmean(ev.log_ratio[d]))) for d, lbl in enumerate(grid.labels)
               if d != skip and np.isfinite(ev.log_ratio[d]).any()}
    notes = [f"{lbl} shares no FLOP range with the reference" for d, lbl in enumerate(grid.labels)
             if d != skip and lbl not in overall]
    if metric == "mfu" and any(s.peak.estimated for s in series):
        notes.append("some MFU values are against an estimated peak")
    return Leaderboard(
        dtype=series[0].dtype, mode=series[0].mode, metric=metric, reference=reference, alpha=alpha,
        min_run=min_run, labels=grid.labels, bands=ev.bands, cells=tuple(cells), boards=_boards(cells, ev.bands),
        runs=tuple(_runs(ev, alpha, min_run, skip)), overall=overall,
        evidence={lbl: shape_evidence(ev, d) for d, lbl in enumerate(grid.labels) if d != skip},
        notes=tuple(notes),
    )


def many_devices(series: Iterable[SeriesKey]) -> bool:
    """Whether some dtype and mode has more than :data:`HANDFUL` devices (then rank, do not pair)."""
    sizes: dict[tuple[str, str], int] = {}
    for key in series:
        sizes[(key.dtype, key.mode)] = sizes.get((key.dtype, key.mode), 0) + 1
    return max(sizes.values(), default=0) > HANDFUL


def leaderboards(series: Mapping[SeriesKey, Series], metric: str = "mfu", *, reference: str = REST,
                 **kw: Any) -> tuple[list[Leaderboard], list[str]]:
    """One :func:`leaderboard` per (dtype, mode) with at least two devices; notes for the groups left out.

    With a baseline ``reference``, groups the baseline did not measure are left out (a note each);
    a baseline found in no group is an error.
    """
    groups: dict[tuple[str, str], list[Series]] = {}
    for key in sorted(series):
        groups.setdefault((key.dtype, key.mode), []).append(series[key])
    if reference != REST and not any(s.label == reference for g in groups.values() for s in g):
        raise LeaderboardError(f"no series labelled {reference!r} to be the baseline "
                               f"(have: {', '.join(sorted({k.label for k in series}))})")
    boards, notes = [], []
    for (dtype, mode), group in sorted(groups.items()):
        if reference != REST and reference not in {s.label for s in group}:
            notes.append(f"{dtype} {mode}: baseline {reference} has no series here")
        elif len(group) < 2:
            notes.append(f"{dtype} {mode}: only {group[0].label}, nothing to rank")
        else:
            boards.append(leaderboard(group, metric, reference=reference, **kw))
    return boards, notes
