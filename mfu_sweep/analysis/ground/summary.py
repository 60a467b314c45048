"""One number per quantity: the per-shape points of a series and its summary (best shape, MFU range).

Every view that shows these numbers (the report's summary table and series
section, its ``analysis.json``, the figures' points, the headline a sweep ends
with) takes them from here, so they cannot disagree::

    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.analysis.ground.summary import summarise
    from mfu_sweep.records.results import load_sweeps

    for key, series in group_series(load_sweeps(["sweeps/amd-epyc-zen5-cpu.json"])).items():
        s = summarise(series)
        print(key, s.best.shape, s.best.tflops, s.mfu_low and s.mfu_low.mfu)

One shape is one point: its time is :func:`~mfu_sweep.analysis.ground.series.shape_seconds`
(the median of the pass medians of a ``--repeats`` sweep, else the record's median),
never an arbitrary or the luckiest pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mfu_sweep.analysis.ground.series import Series, SeriesKey, shape_seconds
from mfu_sweep.records.results import Record


def shape_records(series: Series) -> list[list[Record]]:
    """The records of each shape, in FLOP order: one per pass of a ``--repeats`` sweep, else one."""
    groups: dict[object, list[Record]] = {}
    for rec in series.records:
        groups.setdefault(rec.shape, []).append(rec)
    return list(groups.values())


@dataclass(frozen=True)
class ShapePoint:
    """One shape of a series: its time per call (median over passes), throughput and MFU.

    ``low_s``/``high_s`` are the range of the pass medians (equal to ``seconds`` for one pass).
    """

    shape: str
    flops: float
    bytes: float
    seconds: float
    low_s: float
    high_s: float
    n_passes: int
    peak_tflops: float | None

    @property
    def tflops(self) -> float:
        return self.flops / self.seconds / 1e12

    @property
    def mfu(self) -> float | None:
        """Fraction of the peak (None without a peak for the dtype)."""
        return self.tflops / self.peak_tflops if self.peak_tflops else None

    def to_json(self) -> dict[str, Any]:
        return {"shape": self.shape, "flops": self.flops, "seconds": self.seconds, "tflops": self.tflops,
                "mfu": self.mfu, "passes": self.n_passes}


def shape_point(records: Sequence[Record], peak_tflops: float | None) -> ShapePoint:
    """The point of one shape from its records (one per pass)."""
    medians = [float(r.median_s) for r in records]  # type: ignore[arg-type]
    head = records[0]
    return ShapePoint(shape=str(head.shape), flops=float(head.flops), bytes=float(head.bytes),
                      seconds=shape_seconds(records), low_s=min(medians), high_s=max(medians),
                      n_passes=len(records), peak_tflops=peak_tflops)


def shape_points(series: Series) -> list[ShapePoint]:
    """One :class:`ShapePoint` per shape of ``series``, in FLOP order."""
    return [shape_point(recs, series.peak_tflops) for recs in shape_records(series)]


@dataclass(frozen=True)
class SeriesSummary:
    """Best shape and ranges of one series, one value per shape.

    ``best`` has the highest TFLOP/s (hence the highest MFU); ``worst`` the lowest.
    ``mfu_low``/``mfu_high`` are None without a peak for the dtype.
    """

    key: SeriesKey
    points: tuple[ShapePoint, ...]
    peak_tflops: float | None
    peak_kind: str

    @property
    def best(self) -> ShapePoint:
        return max(self.points, key=lambda p: (p.tflops, -p.flops))

    @property
    def worst(self) -> ShapePoint:
        return min(self.points, key=lambda p: (p.tflops, p.flops))

    @property
    def mfu_low(self) -> float | None:
        return self.worst.mfu

    @property
    def mfu_high(self) -> float | None:
        return self.best.mfu

    @property
    def n_shapes(self) -> int:
        return len(self.points)

    @property
    def n_passes(self) -> int:
        return max(p.n_passes for p in self.points)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.key.label, "dtype": self.key.dtype, "mode": self.key.mode,
                "shapes": self.n_shapes, "passes": self.n_passes, "peak_tflops": self.peak_tflops,
                "peak_kind": self.peak_kind, "best": self.best.to_json(), "worst": self.worst.to_json(),
                "tflops_range": [self.worst.tflops, self.best.tflops],
                "mfu_range": [self.mfu_low, self.mfu_high] if self.peak_tflops else None}


def peak_kind(series: Series) -> str:
    """``"vendor spec"``, ``"estimated"``, ``"override"`` or ``"none"`` (no peak for the dtype)."""
    if not series.peak_tflops:
        return "none"
    return "override" if series.peak.override else "estimated" if series.peak.estimated else "vendor spec"


def summarise(series: Series) -> SeriesSummary:
    """The summary of one series (it has at least one usable record by construction)."""
    return SeriesSummary(key=series.key, points=tuple(shape_points(series)), peak_tflops=series.peak_tflops,
                         peak_kind=peak_kind(series))
