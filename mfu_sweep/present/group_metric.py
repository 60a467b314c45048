"""Which metric a report compares each dtype and mode by.

MFU (each device against its own peak) where every device of the dtype and mode has a peak for it; where
one has none, MFU would silently leave that device out (the DeepBench tables name no peak: MFU drops 11 of
its 11 fp32 devices), so that dtype and mode is compared by TFLOP/s instead, and a note says so. With
``metric="tflops"`` everything is TFLOP/s::

    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.present.group_metric import group_metrics

    chosen = group_metrics(group_series(sweeps), "mfu")
    chosen.of("fp32", "eager"), chosen.notes
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from mfu_sweep.analysis.ground.series import Series, SeriesKey
from mfu_sweep.util.text import counted

MOST_NAMED = 4

Group = tuple[str, str]  # dtype, mode


@dataclass(frozen=True)
class GroupMetrics:
    """The metric of each ``(dtype, mode)`` (``by_group``) and one note per group switched to TFLOP/s."""

    asked: str
    by_group: Mapping[Group, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def of(self, dtype: str, mode: str) -> str:
        """The metric ``dtype`` and ``mode`` are compared by (the one asked for when the group is unknown)."""
        return self.by_group.get((dtype, mode), self.asked)

    def split(self, series: Mapping[SeriesKey, Series]) -> dict[str, dict[SeriesKey, Series]]:
        """``series`` by the metric their group is compared by: ``{"mfu": ..., "tflops": ...}``, no empty part."""
        out: dict[str, dict[SeriesKey, Series]] = {}
        for key, s in series.items():
            out.setdefault(self.of(key.dtype, key.mode), {})[key] = s
        return out

    def to_json(self) -> dict[str, object]:
        return {"asked": self.asked, "by_group": {f"{d} {m}": v for (d, m), v in sorted(self.by_group.items())},
                "notes": list(self.notes)}


def group_metrics(series: Mapping[SeriesKey, Series], metric: str) -> GroupMetrics:
    """MFU per dtype and mode where every device has a peak for the dtype, else TFLOP/s (see the module)."""
    if metric not in ("mfu", "tflops"):
        raise ValueError(f"metric={metric!r} must be one of mfu, tflops")
    groups: dict[Group, list[Series]] = {}
    for key in sorted(series):
        groups.setdefault((key.dtype, key.mode), []).append(series[key])
    by_group, notes = {}, []
    for (dtype, mode), members in groups.items():
        missing = [s.label for s in members if metric == "mfu" and s.peak_tflops is None]
        by_group[(dtype, mode)] = "tflops" if missing else metric
        if missing and len(members) > 1:
            notes.append(switch_note(dtype, mode, missing, len(members)))
    return GroupMetrics(asked=metric, by_group=by_group, notes=tuple(notes))


def switch_note(dtype: str, mode: str, missing: list[str], n_devices: int) -> str:
    """E.g. "fp32 · eager compared by TFLOP/s: MFU would leave out 11 of its 11 devices (no fp32 peak: A, B ...)"."""
    named = ", ".join(missing[:MOST_NAMED]) + (f" +{len(missing) - MOST_NAMED} more" if len(missing) > MOST_NAMED
                                               else "")
    return (f"{dtype} · {mode} compared by TFLOP/s (speed): MFU would leave out {len(missing)} of its "
            f"{counted(n_devices, 'device')} (no {dtype} peak: {named})")
