"""Per-shape evidence of many devices against one reference: profiles, one grid of shapes, the noise model.

Evidence, per device and shape (:class:`ShapeEvidence`, the seam the verdicts
rest on): the log ratio of the metric (MFU, or TFLOP/s) to the reference, its
uncertainty and a two-sided p-value. A device's value at a shape it did not
measure (another device's shape) is *predicted at that very shape* by the local
model ``compare`` uses (:class:`mfu_sweep.analysis.verdicts.matching.ShapeModel`:
a local quadratic in log2 M, N, K and linear in log2 batch over its nearest
measured shapes of the same layout and grouping, never extrapolated), not read off its curve at equal FLOPs: a
skinny layer shape and a square one of equal FLOPs run up to 2x apart, so a
reference read along FLOPs would carry the aspect of the shapes the other
devices measured. Where no prediction holds (a shape outside the span of the
device's shapes, a batched shape against unbatched ones) the device has no value
there, and a shape no other device has a value at is left out of its tests
(counted per device by ``_Evidence.left_out``, a note of the leaderboard).

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

The per-shape noise model is this module's own (band-mean residuals, pooled
over the devices), behind :func:`shape_evidence`.

This module never imports matplotlib or torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import stdtr, stdtrit

from mfu_sweep.analysis.ground.series import Series
from mfu_sweep.analysis.sources.medians import shape_table
from mfu_sweep.util.text import format_flops

LN_TERA = 12 * math.log(10)
METRICS = ("mfu", "tflops")
MAD_TO_SIGMA = 1.4826
MAD_EFFICIENCY = 0.37  # asymptotic efficiency of the MAD against the sd, normal noise: its effective df share
# Standard error of a median relative to that of one value, for normal noise.
MEDIAN_SE = math.sqrt(math.pi / 2)
REST = "rest"


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


def profile(series: Series, metric: str = "mfu") -> Profile:
    """The per-shape log metric of ``series`` (samples of one shape pooled) with the standard errors of the medians.

    A series read from file digests carries its :class:`~mfu_sweep.analysis.sources.medians.ShapeTable`
    (``Series.table``); otherwise the table is computed from its records, the same way."""
    if metric not in METRICS:
        raise LeaderboardError(f"metric={metric!r} must be one of {', '.join(METRICS)}")
    if metric == "mfu" and series.peak_tflops is None:
        raise LeaderboardError(f"series {series.key} has no peak for {series.dtype}, so its MFU is undefined; "
                               "use --metric tflops")
    table = series.table if series.table is not None else shape_table(series.records)
    shift = math.log(series.peak_tflops) if metric == "mfu" else 0.0  # type: ignore[arg-type]
    return Profile(series.label, table.names, table.flops, np.log(table.flops) - table.log_s - LN_TERA - shift,
                   table.se)


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


def _read_off(p: Profile, shapes: Sequence[str], flops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The profile's log metric and its standard error predicted at ``shapes`` (it did not measure them) by
    :class:`~mfu_sweep.analysis.verdicts.matching.ShapeModel` over its measured shapes of each one's kind; NaN
    where no prediction holds. The standard error carries the fit's residual variance (what one shape deviates
    from the smooth surface) beside the estimate's, as ``compare``'s model-based points do, and the medians' own
    errors."""
    values, se = np.full(len(shapes), np.nan), np.full(len(shapes), np.nan)
    if not len(shapes):  # the device measured every shape of the grid (a fleet of one grid): nothing to predict
        return values, se
    from mfu_sweep.analysis.verdicts.matching import ShapeModel  # here: it brings the pairwise verdicts along

    model = ShapeModel.of(p.shapes, p.log_metric[None, :])
    if not model.names:
        return values, se
    own_var = dict(zip(p.shapes, (p.se**2).tolist(), strict=True))
    low, high = float(p.flops.min()), float(p.flops.max())
    for j, (name, f) in enumerate(zip(shapes, flops.tolist(), strict=True)):
        fit = model.predict(name) if low <= f <= high else None
        if fit is None:
            continue
        values[j] = float(fit.values[0])
        spread = float(fit.weights**2 @ np.array([own_var[n] for n in fit.neighbours]))
        se[j] = math.sqrt(fit.point_var + spread)
    return values, se


def align(profiles: Sequence[Profile]) -> Grid:
    """Put ``profiles`` on the union of their shapes, ordered by FLOPs."""
    if profiles and all(p.shapes == profiles[0].shapes for p in profiles):  # one grid (a fleet): stack it
        values = np.stack([p.log_metric for p in profiles]) if profiles[0].shapes else np.empty((len(profiles), 0))
        se = np.stack([p.se for p in profiles]) if profiles[0].shapes else np.empty((len(profiles), 0))
        return Grid(tuple(p.label for p in profiles), profiles[0].shapes, profiles[0].flops.copy(), values, se,
                    np.zeros(values.shape, dtype=bool))
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
        cols = [column[n] for n in p.shapes]
        others = np.setdiff1d(np.arange(len(shapes)), cols)
        v, s = _read_off(p, [shapes[i] for i in others], flops[others])
        values[d, others], se[d, others], interp[d, others] = v, s, ~np.isnan(v)
        values[d, cols], se[d, cols] = p.log_metric, p.se
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


def _row_medians(values: np.ndarray) -> np.ndarray:
    """Per row, the median of its non-NaN values (NaN for a row without any), rows of equal counts at once."""
    out = np.full(values.shape[0], np.nan)
    if not values.size:
        return out
    count = np.sum(~np.isnan(values), axis=1)
    ordered = np.sort(values, axis=1)  # NaN last
    for k in np.unique(count[count > 0]):
        rows = np.flatnonzero(count == k)
        out[rows] = np.median(ordered[rows, :k], axis=1)
    return out


def _noise(log_ratio: np.ndarray, median_var: np.ndarray, band: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per device: the per-shape noise variance and its degrees of freedom (see the module docstring).

    Every device at once: band counts and sums by one ``bincount`` over (device, band) cells (each device's
    values summed in shape order, as one device's own would be), the medians row by row."""
    n_dev = log_ratio.shape[0]
    n_bands = int(band.max()) + 1 if band.size else 0
    ok = ~np.isnan(log_ratio)
    cell = band[None, :] + n_bands * np.arange(n_dev)[:, None]
    counts = np.bincount(cell[ok], minlength=n_dev * n_bands).reshape(n_dev, n_bands)
    sums = np.bincount(cell[ok], log_ratio[ok], minlength=n_dev * n_bands).reshape(n_dev, n_bands)
    means = sums / np.maximum(counts, 1)
    k = np.take_along_axis(counts, np.broadcast_to(band, log_ratio.shape), axis=1)
    dof = np.sum(np.where(counts > 1, counts - 1, 0), axis=1).astype(float)
    keep = ok & (k > 1) & (dof >= 1)[:, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = (log_ratio - np.take_along_axis(means, np.broadcast_to(band, log_ratio.shape), axis=1)) \
            * np.sqrt(k / (k - 1))
    resid = np.where(keep, scaled, np.nan)
    centre = _row_medians(resid)
    spread = MAD_TO_SIGMA * _row_medians(np.abs(resid - centre[:, None]))
    own = np.array([x**2 for x in spread.tolist()])  # Python's float power, as one device's own (numpy squares)
    pooled = float(np.nanmedian(own)) if np.isfinite(own).any() else 0.0
    seen = ~np.isnan(log_ratio) & ~np.isnan(median_var)
    floor = np.where(seen, median_var, 0.0).sum(axis=1) / np.maximum(seen.sum(axis=1), 1)  # 0 with no shape
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

    @property
    def tested(self) -> np.ndarray:
        """The log ratios the tests use: NaN where the device's own value was predicted (not measured)."""
        return np.where(self.grid.interpolated, np.nan, self.log_ratio)

    @property
    def left_out(self) -> np.ndarray:
        """Per device, how many of the shapes it measured have no reference value (no other device measured
        them or can be predicted there), so no test sees them."""
        measured = ~self.grid.interpolated & ~np.isnan(self.grid.values)
        return np.sum(measured & np.isnan(self.log_ratio), axis=1)


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
    var, dof = _noise(np.where(grid.interpolated, np.nan, log_ratio), grid.se**2 + ref_var, band_of)
    return _Evidence(grid, log_ratio, var, dof, bands, band_of)


def t_sf(x: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Student's t survival function, as ``scipy.stats.t.sf`` gives it for these arguments (the same special
    function: ``stdtr(df, -x)``; NaN where ``df`` is not positive or ``x`` is NaN), without importing
    scipy.stats (half a second of a gate's start)."""
    x, df = np.broadcast_arrays(np.asarray(x, float), np.asarray(df, float))
    return np.where(df > 0, stdtr(df, -x), np.nan)


def t_ppf(q: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Student's t quantile for ``0 < q < 1``, as ``scipy.stats.t.ppf`` gives it (``stdtrit(df, q)``)."""
    q, df = np.broadcast_arrays(np.asarray(q, float), np.asarray(df, float))
    return np.where(df > 0, stdtrit(df, q), np.nan)


def _exp(x: float) -> float:
    """``exp(x)``, infinite where it overflows (an interval from a t quantile of very few degrees of freedom)."""
    return math.exp(x) if x < 709.0 else math.inf


def _p(est: np.ndarray, se: np.ndarray, dof: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return 2 * t_sf(np.abs(est) / se, dof)


class EvidenceMap(Mapping[str, tuple[ShapeEvidence, ...]]):
    """Each ranked device's :func:`shape_evidence`, built when first asked for (a fleet of 8,192 devices holds
    a third of a million of them, and the gate reads none), and each device's worst shape without them."""

    def __init__(self, ev: _Evidence, skip: int | None) -> None:
        self._ev, self._p = ev, shape_p_values(ev)
        self._row = {lbl: d for d, lbl in enumerate(ev.grid.labels) if d != skip}
        self._made: dict[str, tuple[ShapeEvidence, ...]] = {}
        self._worst: np.ndarray | None = None

    def __getitem__(self, label: str) -> tuple[ShapeEvidence, ...]:
        if label not in self._made:
            self._made[label] = shape_evidence(self._ev, self._row[label], self._p)
        return self._made[label]

    def __iter__(self) -> Iterator[str]:
        return iter(self._row)

    def __len__(self) -> int:
        return len(self._row)

    def worst(self, label: str) -> ShapeEvidence:
        """The device's shape of the lowest log ratio (the first in FLOP order on a tie), as
        ``min(self[label], key=log_ratio)`` finds it."""
        if self._worst is None:  # every device's at once: the first lowest, NaN never
            self._worst = np.where(np.isnan(self._ev.log_ratio), np.inf, self._ev.log_ratio).argmin(axis=1)
        d = self._row[label]
        s = int(self._worst[d])
        g = self._ev.grid
        return ShapeEvidence(float(g.flops[s]), g.shapes[s], float(self._ev.log_ratio[d, s]),
                             math.sqrt(self._ev.var[d]), float(self._p[d, s]), bool(g.interpolated[d, s]))


def shape_evidence(ev: _Evidence, d: int, p: np.ndarray | None = None) -> tuple[ShapeEvidence, ...]:
    """The per-shape evidence of device ``d`` (shapes it has a value at).

    ``p``: the p-values of :func:`shape_p_values` (computed here when not given; one call for every device
    is a thousand times cheaper in a fleet)."""
    g = ev.grid
    se = math.sqrt(ev.var[d])
    lr = ev.log_ratio[d]
    p = shape_p_values(ev)[d] if p is None else p[d]
    flops, shapes, interpolated = g.flops.tolist(), g.shapes, g.interpolated[d].tolist()
    return tuple(ShapeEvidence(flops[s], shapes[s], value, se, float(p[s]), interpolated[s])
                 for s, value in enumerate(lr.tolist()) if value == value)  # NaN: no value at this shape


def shape_p_values(ev: _Evidence) -> np.ndarray:
    """Two-sided p-value of every device's log ratio at every shape: (devices, shapes), NaN where none."""
    se = np.sqrt(np.asarray(ev.var, float))[:, None]
    dof = np.asarray(ev.dof, float)[:, None]
    return _p(ev.log_ratio, np.broadcast_to(se, ev.log_ratio.shape), np.broadcast_to(dof, ev.log_ratio.shape))

