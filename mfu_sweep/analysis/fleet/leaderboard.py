"""Leaderboards per FLOP band: many devices against one reference, linear in devices.

Pairwise comparison (``mfu-sweep compare``) costs N² pairs. Here every device
is compared once with a *reference*: the median of the other devices at each
shape ("the rest"), or one baseline device (``compare --baseline LABEL``).

The per-shape evidence and its noise model are in :mod:`mfu_sweep.analysis.fleet.evidence`, the
verdicts per band and per run in :mod:`mfu_sweep.analysis.fleet.cells`; this module assembles them.

This module never imports matplotlib or torch.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from mfu_sweep.analysis.fleet.cells import BandBoard, BandCell, Run, _band_cells, _boards, _runs
from mfu_sweep.analysis.fleet.evidence import (
    LN_TERA,
    MAD_EFFICIENCY,
    MAD_TO_SIGMA,
    MEDIAN_SE,
    METRICS,
    REST,
    Band,
    EvidenceMap,
    Grid,
    LeaderboardError,
    Profile,
    ShapeEvidence,
    _evidence,
    align,
    flop_bands,
    profile,
    rest_median,
    shape_evidence,
)
from mfu_sweep.analysis.ground.series import Series, SeriesKey
from mfu_sweep.analysis.sources.medians import Z95
from mfu_sweep.analysis.verdicts.margin import DEFAULT_MARGIN, MarginError, VerdictSettings, lead_words, margin_words
from mfu_sweep.util.text import counted

__all__ = ["HANDFUL", "LN_TERA", "MAD_EFFICIENCY", "MAD_TO_SIGMA", "MEDIAN_SE", "METRICS", "REST", "Z95", "Band",
           "BandBoard", "BandCell", "Grid", "Leaderboard", "LeaderboardError", "Profile", "Run", "ShapeEvidence",
           "align", "flop_bands", "leaderboard", "leaderboards", "many_devices", "profile", "rank", "ranking_settings",
           "rest_median", "shape_evidence"]

# More devices than this in one dtype and mode, and the analysis ranks them instead of comparing every pair.
HANDFUL = 4




def _grouped(items: Iterable[Any]) -> dict[str, tuple[Any, ...]]:
    out: dict[str, list[Any]] = {}
    for item in items:
        out.setdefault(item.label, []).append(item)
    return {label: tuple(group) for label, group in out.items()}


@dataclass(frozen=True)
class Leaderboard:
    """Devices of one dtype and mode against a reference (``"rest"`` or a baseline label), per FLOP band.

    ``overall`` is each device's geometric-mean ratio to the reference over the shapes it measured;
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
    margin: float = 0.0

    @cached_property
    def devices(self) -> tuple[str, ...]:
        """The ranked devices (all labels but a baseline reference); computed once (figures index it per row)."""
        return tuple(lbl for lbl in self.labels if lbl != self.reference)

    @property
    def left_out(self) -> tuple[str, ...]:
        """The devices this board could not rank (no shape shared with the reference; a note each says why)."""
        return tuple(lbl for lbl in self.devices if lbl not in self.overall)

    @cached_property
    def cells_of(self) -> Mapping[str, tuple[BandCell, ...]]:
        """Each device's cells in the order of ``cells``, grouped in one pass (a filter per device is N²)."""
        return _grouped(self.cells)

    @cached_property
    def runs_of(self) -> Mapping[str, tuple[Run, ...]]:
        """Each device's runs in the order of ``runs``, grouped in one pass."""
        return _grouped(self.runs)

    def matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """(ratio, verdict) arrays of shape (devices, bands); NaN / 0 where a device has no shape in a band."""
        row = {lbl: i for i, lbl in enumerate(self.devices)}
        ratio = np.full((len(self.devices), len(self.bands)), np.nan)
        verdict = np.zeros(ratio.shape, dtype=int)
        for c in self.cells:
            ratio[row[c.label], c.band], verdict[row[c.label], c.band] = c.ratio, c.verdict
        return ratio, verdict

    def verdict_text(self) -> str:
        """What ahead, behind and the same mean here in the metric's words, e.g. "faster/slower = beyond +-2%,
        same = within +-2%" (TFLOP/s) or "higher/lower MFU = ..." (MFU)."""
        ahead, behind = lead_words(self.metric)
        words = f"{ahead}/{behind}" + (" MFU" if self.metric == "mfu" else "")
        if self.margin <= 0:
            return f"{words} = any difference (margin 0: nothing is called the same)"
        m = margin_words(self.margin)
        return f"{words} = beyond +-{m}, same = within +-{m} (equivalence test)"

    def reference_text(self) -> str:
        return "the median of the other devices" if self.reference == REST else f"baseline {self.reference}"

    def to_json(self, shapes: bool = False) -> dict[str, Any]:
        out = {"dtype": self.dtype, "mode": self.mode, "metric": self.metric, "reference": self.reference,
               "alpha": self.alpha, "margin": self.margin, "min_run": self.min_run, "devices": list(self.devices),
               "bands": [b.to_json() for b in self.bands], "boards": [b.to_json() for b in self.boards],
               "cells": [c.to_json() for c in self.cells], "runs": [r.to_json() for r in self.runs],
               "overall": dict(self.overall), "notes": list(self.notes)}
        if shapes:
            out["evidence"] = {lbl: [e.to_json() for e in ev] for lbl, ev in self.evidence.items()}
        return out

    def lines(self, most: int = 3) -> list[str]:
        """A text table: one line per band."""
        name = "MFU" if self.metric == "mfu" else "TFLOP/s"
        ahead, behind = (f"{w} {name}" if self.metric == "mfu" else w for w in lead_words(self.metric))
        ranked = len(self.cells_of)
        left = f" ({len(self.devices) - ranked} left out, see the notes)" if ranked < len(self.devices) else ""
        head = (f"leaderboard {self.dtype} {self.mode} (by {name}), {counted(ranked, 'device')}{left} vs "
                f"{self.reference_text()}; {self.verdict_text()}, Holm-corrected p < {self.alpha:g} over "
                f"{counted(len(self.cells), 'cell')} (a device in a band it has shapes in)")
        if not self.boards:
            return [head] + [f"note: {n}" for n in self.notes]
        rows = [head, f"{'band':<24} {ahead:<34} {'same':>5} {'ambig':>5}  {behind:<34} {'median':<22} "
                      f"{'lowest' if self.metric == 'mfu' else 'slowest'}"]
        for b in self.boards:
            rows.append(f"{b.band.name:<24} {_few(b.ahead, most):<34} {len(b.same):>5} {len(b.ambiguous):>5}  "
                        f"{_few(b.behind, most):<34} {_named(b.median):<22} {_named(b.slowest)}")
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


def ranking_settings(settings: VerdictSettings | None = None, **kw: Any) -> VerdictSettings:
    """``settings`` (the defaults when None) with the keywords ``alpha``, ``min_run`` and ``margin`` of a call put
    in: what a leaderboard is ranked with; a margin outside [0, 50%] is a :class:`LeaderboardError`."""
    try:
        return replace(settings or VerdictSettings(), **kw)
    except MarginError as exc:
        raise LeaderboardError(str(exc)) from None


def leaderboard(series: Sequence[Series], metric: str = "mfu", *, reference: str = REST, alpha: float = 0.05,
                min_run: int = 2, per_decade: int = 1, margin: float = DEFAULT_MARGIN) -> Leaderboard:
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
        Family-wise error rate over devices x bands (and devices x FLOP counts for runs), and the run length.
    margin:
        Practical-equivalence margin (0.02: a ratio within 1 +- 2% is "the same", never a lead); 0 for a
        pure difference test.
    per_decade:
        FLOP bands per decade.

    Cost is linear in the number of devices.
    """
    return rank(series, metric, ranking_settings(alpha=alpha, min_run=min_run, margin=margin), reference=reference,
                per_decade=per_decade)


def rank(series: Sequence[Series], metric: str, settings: VerdictSettings, *, reference: str = REST,
         per_decade: int = 1) -> Leaderboard:
    """:func:`leaderboard` with its ``alpha``, ``min_run`` and ``margin`` given as one :class:`VerdictSettings`."""
    series = sorted(series, key=lambda s: s.label)
    alpha, min_run, margin = settings.alpha, settings.min_run, settings.margin
    _check(series, reference, alpha, min_run)
    who = "another device" if reference == REST else f"the baseline {reference}"
    grid = align([profile(s, metric) for s in series])
    ev = _evidence(grid, reference, per_decade)
    skip = grid.labels.index(reference) if reference != REST else None
    cells = _band_cells(ev, alpha, skip, settings.delta, metric)
    tested = ev.tested  # over the shapes each device measured (its predicted values are not its results)
    measured = np.isfinite(tested).any(axis=1)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row of NaN (left out below)
        means = np.nanmean(tested, axis=1) if tested.size else np.full(len(grid.labels), np.nan)
    overall = {lbl: math.exp(m) for d, (lbl, m) in enumerate(zip(grid.labels, means.tolist(), strict=True))
               if d != skip and measured[d]}
    notes = [f"{lbl} is left out: no shape where both it and {who} have a value (measured, or predicted by the "
             "local model inside the span of measured shapes)" for d, lbl in enumerate(grid.labels)
             if d != skip and lbl not in overall]
    why = ("no other device measured them, and none has shapes around them to predict them from"
           if reference == REST else f"the baseline {reference} did not measure them and has no shapes around "
           "them to predict them from")
    notes += [f"{lbl}: {n} of its shapes left out: {why}" for d, (lbl, n) in
              enumerate(zip(grid.labels, ev.left_out.tolist(), strict=True)) if d != skip and lbl in overall and n]
    if metric == "mfu" and any(s.peak.estimated for s in series):
        notes.append("some MFU values are against an estimated peak")
    return Leaderboard(
        dtype=series[0].dtype, mode=series[0].mode, metric=metric, reference=reference, alpha=alpha,
        min_run=min_run, labels=grid.labels, bands=ev.bands, cells=tuple(cells), boards=_boards(cells, ev.bands),
        runs=tuple(_runs(ev, alpha, min_run, skip, settings.delta)), overall=overall,
        evidence=EvidenceMap(ev, skip),
        notes=tuple(notes), margin=margin,
    )


def many_devices(series: Iterable[SeriesKey]) -> bool:
    """Whether some dtype and mode has more than :data:`HANDFUL` devices (then rank, do not pair)."""
    sizes: dict[tuple[str, str], int] = {}
    for key in series:
        sizes[(key.dtype, key.mode)] = sizes.get((key.dtype, key.mode), 0) + 1
    return max(sizes.values(), default=0) > HANDFUL


def leaderboards(series: Mapping[SeriesKey, Series], metric: str = "mfu", settings: VerdictSettings | None = None,
                 *, reference: str = REST, **kw: Any) -> tuple[list[Leaderboard], list[str]]:
    """One :func:`leaderboard` per (dtype, mode) with at least two devices; notes for the groups left out.

    With a baseline ``reference``, groups the baseline did not measure are left out (a note each);
    a baseline found in no group is an error. ``settings`` (or the keywords ``alpha``, ``min_run`` and ``margin``:
    :func:`ranking_settings`) rank every group.
    """
    settings = ranking_settings(settings, **kw)
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
            boards.append(rank(group, metric, settings, reference=reference))
    return boards, notes
