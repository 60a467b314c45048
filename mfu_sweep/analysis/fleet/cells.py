"""Verdicts of a leaderboard from the per-shape evidence (:mod:`mfu_sweep.analysis.fleet.evidence`).

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

This module never imports matplotlib or torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import t as student_t

from mfu_sweep.analysis.fleet.evidence import Band, _Evidence, _exp, _p
from mfu_sweep.analysis.verdicts.evidence import apply_min_run, holm, runs_of


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

