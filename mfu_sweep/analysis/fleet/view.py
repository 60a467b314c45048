"""Fleet view: the devices of one chip (a ``--distribute replicate`` run) against the median of the rest.

Per device: the ratio of its metric to the median of the other devices at each
shape, its geometric mean over shapes, and whether it is *flagged*: significantly
slower than the rest over a run of shapes, which :mod:`mfu_sweep.analysis.fleet.leaderboard`
tests two ways, both with shape-level noise: a whole FLOP band behind the rest
(band means, Holm over devices x bands), or a run of at least ``min_run``
consecutive FLOP counts each significantly slower (Holm over devices x shapes,
the pairwise verdicts' run rule). Each family is held at ``alpha``; the run
family is far stricter than its nominal level, so the flag's family-wise error
is about ``alpha`` (at most twice it). The slowest device is the one with the
lowest mean ratio, flagged or not. The band-by-band picture comes with it,
for the device x band heatmap. Cost is linear in devices; nothing here compares pairs.

Replicate runs label each rank's series ``<label>.r<rank>``;
:func:`replicate_fleets` groups them back by base label, dtype and mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mfu_sweep.analysis.fleet.leaderboard import REST, Band, Leaderboard, Run, leaderboard
from mfu_sweep.analysis.fleet.spread import RANK_SUFFIX
from mfu_sweep.analysis.series import Series, SeriesKey
from mfu_sweep.text import format_flops


@dataclass(frozen=True)
class DeviceHealth:
    """One device of a fleet: its mean and worst ratio to the rest, the bands it is behind in, its slow runs.

    ``mean_ratio`` is the geometric mean over its shapes of its metric over the median of the other devices.
    """

    label: str
    mean_ratio: float
    worst_ratio: float
    worst_shape: str
    slow_bands: tuple[tuple[Band, float], ...]
    slow_runs: tuple[Run, ...]

    @property
    def flagged(self) -> bool:
        return bool(self.slow_runs or self.slow_bands)

    def describe(self) -> str:
        parts = []
        if self.slow_bands:
            lo, hi = self.slow_bands[0][0].low_flops, self.slow_bands[-1][0].high_flops
            ratios = ", ".join(f"x{r:.3f}" for _, r in self.slow_bands)
            parts.append(f"behind in {len(self.slow_bands)} band(s) between {format_flops(lo)} and "
                         f"{format_flops(hi)}: {ratios}")
        parts += [f"slower run x{r.ratio:.3f} {_span(r)}" for r in self.slow_runs]
        return f"{self.label} ({'; '.join(parts)})" if parts else self.label

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "mean_ratio": self.mean_ratio, "worst_ratio": self.worst_ratio,
                "worst_shape": self.worst_shape, "flagged": self.flagged,
                "slow_bands": [{"band": b.to_json(), "ratio": r} for b, r in self.slow_bands],
                "slow_runs": [r.to_json() for r in self.slow_runs]}


def _span(run: Run) -> str:
    lo, hi = format_flops(run.start_flops), format_flops(run.end_flops)
    return f"at {lo}" if lo == hi else f"from {lo} to {hi}"


@dataclass(frozen=True)
class FleetView:
    """The devices of one chip, dtype and mode against the median of the others."""

    label: str
    board: Leaderboard
    health: tuple[DeviceHealth, ...]  # slowest first

    @property
    def dtype(self) -> str:
        return self.board.dtype

    @property
    def mode(self) -> str:
        return self.board.mode

    @property
    def flagged(self) -> tuple[DeviceHealth, ...]:
        return tuple(h for h in self.health if h.flagged)

    @property
    def slowest(self) -> DeviceHealth:
        return self.health[0]

    def sentence(self, most: int = 5) -> str:
        """E.g. "h100 (bf16, eager) over 8 devices: flagged r5 (x0.870 from 1 GFLOP to 100 GFLOP); slowest ..."."""
        head = f"{self.label} ({self.dtype}, {self.mode}) over {len(self.health)} devices: "
        flagged = sorted(self.flagged, key=lambda h: (h.mean_ratio, h.label))
        if flagged:
            more = f" and {len(flagged) - most} more" if len(flagged) > most else ""
            text = "flagged " + "; ".join(h.describe() for h in flagged[:most]) + more
        else:
            text = "no device is significantly slower than the rest in any FLOP band or run of shapes"
        s = self.slowest
        return (head + text + f"; slowest {s.label} (x{s.mean_ratio:.3f} of the rest on average, "
                f"worst x{s.worst_ratio:.3f} at {s.worst_shape}).")

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "dtype": self.dtype, "mode": self.mode, "metric": self.board.metric,
                "alpha": self.board.alpha, "min_run": self.board.min_run, "n_devices": len(self.health),
                "flagged": [h.label for h in self.flagged], "slowest": self.slowest.label,
                "devices": [h.to_json() for h in self.health], "sentence": self.sentence(),
                "bands": self.board.to_json()}


def _health(board: Leaderboard, label: str) -> DeviceHealth:
    ev = board.evidence[label]
    worst = min(ev, key=lambda e: e.log_ratio)
    bands = tuple((board.bands[c.band], c.ratio) for c in board.cells if c.label == label and c.verdict < 0)
    return DeviceHealth(label, board.overall[label], worst.ratio, worst.shape, bands,
                        tuple(r for r in board.runs if r.label == label and r.direction < 0))


def fleet_view(series: Sequence[Series], label: str | None = None, metric: str = "tflops", *,
               board: Leaderboard | None = None, **kw: Any) -> FleetView:
    """The fleet view of ``series`` (one per device, one dtype and mode).

    ``label`` names the fleet (default: the common base label of ``.r<rank>`` labels, else the first);
    ``metric`` defaults to TFLOP/s (devices of one chip share a peak, and it works without one);
    ``board`` reuses a leaderboard of exactly these series against the rest; other keyword
    arguments go to :func:`mfu_sweep.analysis.fleet.leaderboard.leaderboard` (not ``reference``).
    """
    board = board or leaderboard(series, metric, reference=REST, **kw)
    health = sorted((_health(board, lbl) for lbl in board.devices if lbl in board.overall),
                    key=lambda h: (h.mean_ratio, h.label))
    if label is None:
        bases = {m["base"] for s in series if (m := RANK_SUFFIX.match(s.label))}
        label = bases.pop() if len(bases) == 1 else board.labels[0]
    return FleetView(label, board, tuple(health))


def _same(board: Leaderboard, group: Sequence[Series]) -> bool:
    return (board.reference == REST and (board.dtype, board.mode) == (group[0].dtype, group[0].mode)
            and set(board.labels) == {s.label for s in group})


def replicate_fleets(series: Mapping[SeriesKey, Series], metric: str = "tflops", *,
                     boards: Sequence[Leaderboard] = (), **kw: Any) -> list[FleetView]:
    """One :func:`fleet_view` per base label, dtype and mode with at least two ``.r<rank>`` series.

    A leaderboard in ``boards`` of exactly one group's series against the rest is reused (with its metric).
    """
    return [fleet_view(group, base, metric, board=next((b for b in boards if _same(b, group)), None), **kw)
            for (base, _, _), group in replicate_groups(series).items()]


def replicate_groups(series: Mapping[SeriesKey, Series]) -> dict[tuple[str, str, str], list[Series]]:
    """``(base label, dtype, mode) -> series`` of every replicate group with at least two ``.r<rank>`` series,
    sorted: the groups :func:`replicate_fleets` views, found without computing anything."""
    groups: dict[tuple[str, str, str], list[Series]] = {}
    for key, s in series.items():
        m = RANK_SUFFIX.match(key.label)
        if m:
            groups.setdefault((m["base"], key.dtype, key.mode), []).append(s)
    return {k: g for k, g in sorted(groups.items()) if len(g) >= 2}


def heatmap_rows(view: FleetView | Leaderboard) -> tuple[list[str], list[str], Any, Any]:
    """(device labels, band names, ratio matrix, verdict matrix) for a device x FLOP band heatmap."""
    board = view.board if isinstance(view, FleetView) else view
    ratio, verdict = board.matrix()
    return list(board.devices), [b.name for b in board.bands], ratio, verdict
