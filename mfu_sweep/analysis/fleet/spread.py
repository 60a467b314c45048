"""Spread across devices of one chip, from a ``--distribute replicate`` run.

A replicate run labels each rank's series ``<label>.r<rank>``; this module
groups them back by base label, dtype and mode and reports, per shape, how far
apart the devices are: the ratio of the fastest to the slowest median, and
which rank was slowest. Chip-to-chip variance and busy neighbours show up here.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mfu_sweep.analysis.ground.series import Series, SeriesKey, group_series, shape_seconds
from mfu_sweep.records.results import Record, Sweep

RANK_SUFFIX = re.compile(r"^(?P<base>.+)\.r(?P<rank>\d+)$")


@dataclass(frozen=True)
class ShapeSpread:
    """Medians of one shape on every device of a group."""

    shape: str
    flops: float
    medians_s: Mapping[str, float]

    @property
    def ratio(self) -> float:
        """Slowest over fastest median (1.0 = identical devices)."""
        return max(self.medians_s.values()) / min(self.medians_s.values())

    @property
    def slowest(self) -> str:
        return max(self.medians_s, key=self.medians_s.__getitem__)


@dataclass(frozen=True)
class Spread:
    """Spread of one (base label, dtype, mode) over its replicated devices."""

    label: str
    dtype: str
    mode: str
    devices: tuple[str, ...]
    shapes: tuple[ShapeSpread, ...]

    @property
    def median_ratio(self) -> float:
        return statistics.median(s.ratio for s in self.shapes)

    @property
    def worst(self) -> ShapeSpread:
        return max(self.shapes, key=lambda s: s.ratio)

    def sentence(self) -> str:
        w = self.worst
        return (f"{self.label} ({self.dtype}, {self.mode}) over {len(self.devices)} devices: slowest/fastest "
                f"median {self.median_ratio:.3f}x across {len(self.shapes)} shapes, worst {w.ratio:.3f}x at "
                f"{w.shape} (slowest: {w.slowest})")

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "dtype": self.dtype, "mode": self.mode, "devices": list(self.devices),
                "median_ratio": self.median_ratio,
                "shapes": [{"shape": s.shape, "flops": s.flops, "ratio": s.ratio, "slowest": s.slowest,
                            "medians_s": dict(s.medians_s)} for s in self.shapes]}


def _medians(series: Series) -> dict[str, tuple[float, float]]:
    by: dict[str, list[Record]] = {}
    for r in series.records:
        by.setdefault(str(r.shape), []).append(r)
    return {s: (recs[0].flops, shape_seconds(recs)) for s, recs in by.items()}


def replicate_spreads(sweeps: Iterable[Sweep], series: Mapping[SeriesKey, Series] | None = None) -> list[Spread]:
    """One :class:`Spread` per base label, dtype and mode that has two or more ``.r<rank>`` series.

    ``series`` is ``group_series(sweeps)`` when the caller has it already (grouping a fleet takes seconds).
    """
    groups: dict[tuple[str, str, str], list[SeriesKey]] = {}
    series = group_series(sweeps) if series is None else series
    for key in series:
        m = RANK_SUFFIX.match(key.label)
        if m:
            groups.setdefault((m["base"], key.dtype, key.mode), []).append(key)
    out = []
    for (base, dtype, mode), keys in sorted(groups.items()):
        if len(keys) < 2:
            continue
        per = {k.label: _medians(series[k]) for k in keys}
        common = set.intersection(*(set(v) for v in per.values()))
        shapes = sorted(common, key=lambda s: next(iter(per.values()))[s][0])
        rows = tuple(ShapeSpread(s, next(iter(per.values()))[s][0], {lbl: per[lbl][s][1] for lbl in per})
                     for s in shapes)
        if rows:
            out.append(Spread(base, dtype, mode, tuple(sorted(per)), rows))
    return out
