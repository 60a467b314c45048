"""Fleet view: the devices of one chip (a ``--distribute replicate`` run) against the median of the rest.

Per device: the ratio of its metric to the median of the other devices at each
shape, its geometric mean over shapes, and whether it is *flagged*: slower than
the rest by more than the margin (2% by default), with confidence, which
:mod:`mfu_sweep.analysis.fleet.cells` tests two ways, both with shape-level noise:
a whole FLOP band slower (band means, Holm over devices x bands), or a run of at
least ``min_run`` consecutive FLOP counts each slower (the median over the shapes
of one FLOP count, Holm over devices x FLOP counts, the pairwise verdicts' run
rule). A difference within the margin is never a flag. Each family is held at ``alpha``; the run
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

from mfu_sweep.analysis.fleet.cells import lead_words
from mfu_sweep.analysis.fleet.evidence import EvidenceMap
from mfu_sweep.analysis.fleet.leaderboard import REST, Band, Leaderboard, Run, rank, ranking_settings
from mfu_sweep.analysis.fleet.spread import RANK_SUFFIX
from mfu_sweep.analysis.ground.series import Series, SeriesKey
from mfu_sweep.analysis.verdicts.margin import VerdictSettings, margin_words
from mfu_sweep.util.text import counted, format_flops


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
    same_bands: int = 0
    n_bands: int = 0

    @property
    def flagged(self) -> bool:
        return bool(self.slow_runs or self.slow_bands)

    def describe(self, margin: float = 0.0, metric: str = "tflops") -> str:
        """The label and, when flagged, one short clause each for its slower bands and runs (never one per shape),
        in the metric's words ("slower" by TFLOP/s, "lower MFU" by MFU)."""
        parts = [p for p in (_bands_text(self.slow_bands), _runs_text(self.slow_runs)) if p]
        if not parts:
            return self.label
        behind = _behind(metric)
        beyond = f"{behind} by more than {margin_words(margin)}" if margin > 0 else behind
        return f"{self.label} ({beyond} {'; '.join(parts)})"

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "mean_ratio": self.mean_ratio, "worst_ratio": self.worst_ratio,
                "worst_shape": self.worst_shape, "flagged": self.flagged, "same_bands": self.same_bands,
                "n_bands": self.n_bands, "slow_bands": [{"band": b.to_json(), "ratio": r} for b, r in self.slow_bands],
                "slow_runs": [r.to_json() for r in self.slow_runs]}


def _behind(metric: str) -> str:
    """"slower" (TFLOP/s) or "lower MFU" (MFU: a lower fraction of its own peak)."""
    return lead_words(metric)[1] + (" MFU" if metric == "mfu" else "")


def _ratios(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    return f"x{lo:.3f}" if f"{lo:.3f}" == f"{hi:.3f}" else f"x{lo:.3f} to x{hi:.3f}"


def _bands_text(bands: Sequence[tuple[Band, float]]) -> str:
    if not bands:
        return ""
    lo, hi = format_flops(bands[0][0].low_flops), format_flops(bands[-1][0].high_flops)
    return f"in {counted(len(bands), 'FLOP band')} from {lo} to {hi}, {_ratios([r for _, r in bands])}"


def _runs_text(runs: Sequence[Run]) -> str:
    if not runs:
        return ""
    lo, hi = format_flops(min(r.start_flops for r in runs)), format_flops(max(r.end_flops for r in runs))
    span = f"at {lo}" if lo == hi else f"from {lo} to {hi}"
    counts = sum(r.n_points for r in runs)
    where = f"a run of {counts} FLOP counts" if len(runs) == 1 else f"{len(runs)} runs of {counts} FLOP counts"
    return f"over {where} {span}, {_ratios([r.ratio for r in runs])}"


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

    @property
    def margin(self) -> float:
        return self.board.margin

    def sentence(self, most: int = 5) -> str:
        """E.g. "h100 (bf16, eager, by TFLOP/s) over 8 devices: flagged h100.r5 (slower by more than 2% in 2 FLOP
        band(s) ...); slowest h100.r5 (...)" ("lowest MFU" by MFU: never slower or faster by MFU)."""
        m = margin_words(self.margin)
        metric = self.board.metric
        name = "MFU" if metric == "mfu" else "TFLOP/s"
        head = f"{self.label} ({self.dtype}, {self.mode}, by {name}) over {len(self.health)} devices: "
        flagged = sorted(self.flagged, key=lambda h: (h.mean_ratio, h.label))
        behind = _behind(metric)
        if flagged:
            more = f" and {len(flagged) - most} more" if len(flagged) > most else ""
            text = "flagged " + "; ".join(h.describe(self.margin, metric) for h in flagged[:most]) + more
        else:
            text = (f"no device is {behind} than the rest by more than {m} in any FLOP band or run of FLOP counts"
                    if self.margin > 0 else
                    f"no device is significantly {behind} than the rest in any FLOP band or run of FLOP counts")
        if self.margin > 0:
            same = sum(h.same_bands == h.n_bands > 0 for h in self.health)
            text += f"; {same} of {len(self.health)} the same as the rest within {m} in every band"
        s = self.slowest
        lowest = "lowest MFU" if metric == "mfu" else "slowest"
        return (head + text + f"; {lowest} {s.label} (x{s.mean_ratio:.3f} of the rest on average, "
                f"worst x{s.worst_ratio:.3f} at {s.worst_shape}).")

    def to_json(self, leaderboard: int | None = None) -> dict[str, Any]:
        """The view; its leaderboard in full under ``bands``, or, when the same document lists it among its
        ``leaderboards``, as ``"leaderboard": index`` there (a 1,024-device leaderboard is 2 MB of JSON)."""
        out = {"label": self.label, "dtype": self.dtype, "mode": self.mode, "metric": self.board.metric,
               "alpha": self.board.alpha, "margin": self.margin, "min_run": self.board.min_run,
               "n_devices": len(self.health),
               "flagged": [h.label for h in self.flagged], "slowest": self.slowest.label,
               "devices": [h.to_json() for h in self.health], "sentence": self.sentence()}
        if leaderboard is None:
            out["bands"] = self.board.to_json()
        else:
            out["leaderboard"] = leaderboard
        return out


def _health(board: Leaderboard, label: str) -> DeviceHealth:
    ev = board.evidence
    worst = ev.worst(label) if isinstance(ev, EvidenceMap) else min(ev[label], key=lambda e: e.log_ratio)
    cells = board.cells_of.get(label, ())
    bands = tuple((board.bands[c.band], c.ratio) for c in cells if c.verdict < 0)
    return DeviceHealth(label, board.overall[label], worst.ratio, worst.shape, bands,
                        tuple(r for r in board.runs_of.get(label, ()) if r.direction < 0),
                        sum(c.call == "same" for c in cells), len(cells))


def fleet_view(series: Sequence[Series], label: str | None = None, metric: str = "tflops", *,
               board: Leaderboard | None = None, settings: VerdictSettings | None = None, **kw: Any) -> FleetView:
    """The fleet view of ``series`` (one per device, one dtype and mode).

    ``label`` names the fleet (default: the common base label of ``.r<rank>`` labels, else the first);
    ``metric`` defaults to TFLOP/s (devices of one chip share a peak, and it works without one);
    ``board`` reuses a leaderboard of exactly these series against the rest; ``settings`` (or the keywords
    ``alpha``, ``min_run`` and ``margin``: :func:`~mfu_sweep.analysis.fleet.leaderboard.ranking_settings`) rank them.
    """
    board = board or rank(series, metric, ranking_settings(settings, **kw), reference=REST)
    health = sorted((_health(board, lbl) for lbl in board.devices if lbl in board.overall),
                    key=lambda h: (h.mean_ratio, h.label))
    if label is None:
        bases = {m["base"] for s in series if (m := RANK_SUFFIX.match(s.label))}
        label = bases.pop() if len(bases) == 1 else board.labels[0]
    return FleetView(label, board, tuple(health))


def _same(board: Leaderboard, group: Sequence[Series]) -> bool:
    return (board.reference == REST and (board.dtype, board.mode) == (group[0].dtype, group[0].mode)
            and set(board.labels) == {s.label for s in group})


def replicate_fleets(series: Mapping[SeriesKey, Series], metric: str = "tflops",
                     settings: VerdictSettings | None = None, *, boards: Sequence[Leaderboard] = (), **kw: Any
                     ) -> list[FleetView]:
    """One :func:`fleet_view` per base label, dtype and mode with at least two ``.r<rank>`` series.

    A leaderboard in ``boards`` of exactly one group's series against the rest is reused (with its metric);
    ``settings`` and the keywords are :func:`fleet_view`'s.
    """
    settings = ranking_settings(settings, **kw)
    return [fleet_view(group, base, metric, board=next((b for b in boards if _same(b, group)), None),
                       settings=settings) for (base, _, _), group in replicate_groups(series).items()]


def fleets_json(fleets: Sequence[FleetView], boards: Sequence[Leaderboard]) -> list[dict[str, Any]]:
    """Every fleet view as JSON beside ``boards`` (the document's ``leaderboards``): a view whose leaderboard
    is one of them points at it by index instead of repeating it."""
    index = {id(b): i for i, b in enumerate(boards)}
    return [f.to_json(index.get(id(f.board))) for f in fleets]


def replicate_groups(series: Mapping[SeriesKey, Series]) -> dict[tuple[str, str, str], list[Series]]:
    """``(base label, dtype, mode) -> series`` of every replicate group with at least two ``.r<rank>`` series,
    sorted: the groups :func:`replicate_fleets` views, found without computing anything."""
    groups: dict[tuple[str, str, str], list[Series]] = {}
    for key, s in series.items():
        m = RANK_SUFFIX.match(key.label)
        if m:
            groups.setdefault((m["base"], key.dtype, key.mode), []).append(s)
    return {k: g for k, g in sorted(groups.items()) if len(g) >= 2}
