"""Verdicts of a leaderboard from the per-shape evidence (:mod:`mfu_sweep.analysis.fleet.evidence`).

Four verdicts with a practical-equivalence margin ``m`` (``DEFAULT_MARGIN`` of
:mod:`mfu_sweep.analysis.verdicts.margin`, 2%), on the log scale ``d = log(1 + m)``:

* per band (decades of FLOPs by default), the mean log ratio ``e`` over the
  shapes the device measured in the band (a value read off its curve is never
  a test's observation) against the reference, with the shape-level standard error:
  *faster* (*slower*) when ``|e| > d`` is significant (two-sided p of
  ``(|e| - d) / se``), *the same* when ``|e| < d`` is (two one-sided tests,
  TOST), else *ambiguous*; each family Holm-corrected over all devices x bands
  of the (dtype, mode) group. A difference smaller than the margin is never a
  lead; ``m = 0`` is the pure difference test (and nothing is "the same").
  Each band names the median device, the slowest and the top one;
* per FLOP count, for runs: the median log ratio over the device's shapes of
  that FLOP count (one transient shape cannot move it), tested beyond the
  margin, Holm over all devices x FLOP counts; a device is slower (faster) over
  a run when at least ``min_run`` consecutive FLOP counts are significant in
  the same direction, the rule of the pairwise verdicts (``holm`` and
  ``apply_min_run`` of :mod:`mfu_sweep.analysis.verdicts.evidence`;
  :mod:`mfu_sweep.analysis.fleet.view` flags such devices).

This module never imports matplotlib or torch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from mfu_sweep.analysis.fleet.evidence import MEDIAN_SE, Band, _Evidence, _exp, t_ppf, t_sf
from mfu_sweep.analysis.verdicts.evidence import apply_min_run, holm, runs_of
from mfu_sweep.analysis.verdicts.margin import lead_words


@dataclass(frozen=True)
class BandCell:
    """One device in one band: the geometric-mean ratio to the reference, its interval and verdict.

    ``call`` is one of "faster", "slower" (by TFLOP/s; "higher", "lower" by MFU), "same" or "ambiguous";
    ``verdict`` is +1 (ahead), -1 (behind) or 0 (the same or ambiguous: not a lead). A cell is a lead or "the
    same" only when its own ``1 - alpha`` interval (``low``, ``high``) lies beyond or inside the margin.
    ``p_adjusted`` (the lead beyond the margin) and ``p_same`` (within it) are Holm-adjusted over every device
    and band of the leaderboard.
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
    call: str = "ambiguous"
    p_same: float = 1.0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class BandBoard:
    """One band: who is faster, the same, ambiguous or slower, and the median, slowest and top device."""

    band: Band
    ahead: tuple[tuple[str, float], ...]
    same: tuple[str, ...]
    ambiguous: tuple[str, ...]
    behind: tuple[tuple[str, float], ...]
    median: tuple[str, float]
    slowest: tuple[str, float]
    top: tuple[str, float]

    @property
    def tied(self) -> tuple[str, ...]:
        """Devices with no lead either way (the same, or ambiguous)."""
        return self.same + self.ambiguous

    @property
    def n_devices(self) -> int:
        return len(self.ahead) + len(self.tied) + len(self.behind)

    def to_json(self) -> dict[str, Any]:
        def named(items: Iterable[tuple[str, float]]) -> list[dict[str, Any]]:
            return [{"label": lbl, "ratio": r} for lbl, r in items]

        return {"band": self.band.to_json(), "n_devices": self.n_devices, "ahead": named(self.ahead),
                "same": list(self.same), "ambiguous": list(self.ambiguous), "tied": list(self.tied),
                "behind": named(self.behind), "median": named([self.median])[0],
                "slowest": named([self.slowest])[0], "top": named([self.top])[0]}


@dataclass(frozen=True)
class Run:
    """At least ``min_run`` consecutive FLOP counts where a device is faster (+1) or slower (-1) beyond the margin.

    ``n_points`` counts FLOP counts, ``n_shapes`` the shapes at them; ``ratio`` is the median over the run.
    """

    label: str
    direction: int
    start_flops: float
    end_flops: float
    ratio: float
    n_points: int
    n_shapes: int = 0

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def lead_p(est: np.ndarray, se: np.ndarray, dof: np.ndarray, delta: float) -> np.ndarray:
    """Two-sided p of a difference beyond ``+-delta`` (log scale): ``2 P(T > (|est| - delta) / se)``, at most 1."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.minimum(1.0, 2 * t_sf((np.abs(est) - delta) / se, dof))


def same_p(est: np.ndarray, se: np.ndarray, dof: np.ndarray, delta: float) -> np.ndarray:
    """p of two one-sided tests that ``|est| < delta``: ``P(T > (delta - |est|) / se)``; 1 with no margin."""
    if delta <= 0:
        return np.ones(np.shape(est))
    with np.errstate(invalid="ignore", divide="ignore"):
        return t_sf((delta - np.abs(est)) / se, dof)


def calls(est: np.ndarray, p_lead: np.ndarray, p_same: np.ndarray, alpha: float, inside: np.ndarray,
          metric: str = "tflops") -> tuple[np.ndarray, list[str]]:
    """(verdict, call) per test from Holm-adjusted p-values: a lead beyond the margin, else the same (only where
    the cell's own ``1 - alpha`` interval lies inside the margin, ``inside``), else ambiguous; a lead is called
    by the metric's words (:func:`~mfu_sweep.analysis.verdicts.margin.lead_words`)."""
    ahead, behind = lead_words(metric)
    verdict = np.where(p_lead < alpha, np.sign(est), 0).astype(int)
    words = [ahead if v > 0 else behind if v < 0 else "same" if ps < alpha and ok else "ambiguous"
             for v, ps, ok in zip(verdict, p_same, inside, strict=True)]
    return verdict, words


def _band_means(tested: np.ndarray, band_of: np.ndarray, n_bands: int) -> tuple[np.ndarray, np.ndarray]:
    """(mean, count) of every device's non-NaN values in every band: (devices, bands) each, NaN / 0 where none.

    The shapes are sorted by FLOPs, so a band is a slice of columns; a device that measured the whole slice
    is averaged with its neighbours in one ``mean`` along the row (the sum one row's own ``mean`` makes), one
    with gaps on its own."""
    n_dev = tested.shape[0]
    mean, count = np.full((n_dev, n_bands), np.nan), np.zeros((n_dev, n_bands), dtype=int)
    for b in range(n_bands):
        cols = np.flatnonzero(band_of == b)
        if not len(cols):
            continue
        block = tested[:, cols[0]:cols[-1] + 1] if cols[-1] - cols[0] + 1 == len(cols) else tested[:, cols]
        ok = ~np.isnan(block)
        count[:, b] = ok.sum(axis=1)
        whole = np.flatnonzero(count[:, b] == len(cols))
        if len(whole):
            mean[whole, b] = np.mean(block[whole], axis=1)
        for d in np.flatnonzero((count[:, b] > 0) & (count[:, b] < len(cols))):
            mean[d, b] = np.mean(block[d][ok[d]])
    return mean, count


def _band_rows(ev: _Evidence, skip: int | None) -> tuple[list[tuple[str, int, int]], np.ndarray, np.ndarray,
                                                          np.ndarray]:
    """For every device and band it measured in (device by device, bands in order): (label, band, measured
    shapes), and the mean log ratio, its standard error and degrees of freedom, as arrays."""
    mean, count = _band_means(ev.tested, ev.band_of, len(ev.bands))
    has = count > 0
    if skip is not None:
        has[skip] = False
    dev, band = np.nonzero(has)
    n = count[dev, band]
    labels = ev.grid.labels
    rows = [(labels[d], b, k) for d, b, k in zip(dev.tolist(), band.tolist(), n.tolist(), strict=True)]
    return rows, mean[dev, band], np.sqrt(ev.var[dev] / n), ev.dof[dev].astype(float)


def _band_cells(ev: _Evidence, alpha: float, skip: int | None, delta: float = 0.0,
                metric: str = "tflops") -> list[BandCell]:
    """The cells of every device and band; ``delta`` is the margin on the log scale
    (:func:`~mfu_sweep.analysis.verdicts.margin.log_margin`)."""
    rows, est, se, dof = _band_rows(ev, skip)
    if not rows:
        return []
    p = lead_p(est, se, dof, delta)
    adj, adj_same = holm(p), holm(same_p(est, se, dof, delta))
    half = t_ppf(1 - alpha / 2, dof) * se
    verdict, words = calls(est, adj, adj_same, alpha, np.abs(est) + half < delta, metric)
    return [_cell((label, b, math.exp(e), math.exp(e - h), _exp(e + h), pv, pa, v, n, w, ps))
            for (label, b, n), e, h, pv, pa, v, w, ps in zip(rows, est.tolist(), half.tolist(), p.tolist(),
                                                             adj.tolist(), verdict.tolist(), words,
                                                             adj_same.tolist(), strict=True)]


_CELL_FIELDS = tuple(f.name for f in fields(BandCell))


def _cell(values: tuple[Any, ...]) -> BandCell:
    """``BandCell(*values)`` without the frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field,
    for a quarter of a million cells in a pod's leaderboards); the same object."""
    cell = object.__new__(BandCell)
    cell.__dict__.update(zip(_CELL_FIELDS, values, strict=True))
    return cell


def _boards(cells: Sequence[BandCell], bands: Sequence[Band]) -> tuple[BandBoard, ...]:
    out = []
    by_band: dict[int, list[BandCell]] = {}
    for c in cells:
        by_band.setdefault(c.band, []).append(c)
    for b, band in enumerate(bands):
        here = sorted(by_band.get(b, ()), key=lambda c: (-c.ratio, c.label))
        if not here:
            continue
        ahead = tuple((c.label, c.ratio) for c in here if c.verdict > 0)
        behind = tuple((c.label, c.ratio) for c in reversed(here) if c.verdict < 0)
        same = tuple(c.label for c in here if c.verdict == 0 and c.call == "same")
        unsure = tuple(c.label for c in here if c.verdict == 0 and c.call != "same")
        mid = here[len(here) // 2]
        out.append(BandBoard(band, ahead, same, unsure, behind, (mid.label, mid.ratio),
                             (here[-1].label, here[-1].ratio), (here[0].label, here[0].ratio)))
    return tuple(out)


def flop_medians(log_ratio: np.ndarray, flops: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(FLOP counts, per device the median log ratio over its shapes at each, how many shapes): (L,), (N, L), (N, L)."""
    levels, where = np.unique(flops, return_inverse=True)
    med = np.full((log_ratio.shape[0], len(levels)), np.nan)
    count = np.zeros(med.shape, dtype=int)
    for j in range(len(levels)):
        block = log_ratio[:, where == j]
        count[:, j] = np.sum(~np.isnan(block), axis=1)
        with np.errstate(all="ignore"):
            rows = count[:, j] > 0
            med[rows, j] = np.nanmedian(block[rows], axis=1)
    return levels, med, count


def median_se(sd: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Standard error of a median of ``count`` values of noise ``sd``: the mean's for 1 or 2, x sqrt(pi/2) above."""
    with np.errstate(divide="ignore"):
        return sd * np.where(count >= 3, MEDIAN_SE, 1.0) / np.sqrt(count)


def _runs(ev: _Evidence, alpha: float, min_run: int, skip: int | None, delta: float = 0.0) -> list[Run]:
    """Runs per device from per-FLOP-count tests beyond the margin, Holm-corrected over every device and count.

    The run rule is the pairwise verdicts' (:func:`mfu_sweep.analysis.verdicts.evidence.apply_min_run`).
    """
    levels, med, count = flop_medians(ev.tested, ev.grid.flops)
    valid = count > 0
    if skip is not None:
        valid[skip] = False
    p = lead_p(med, median_se(np.sqrt(ev.var)[:, None], count), ev.dof[:, None], delta)
    adj = np.ones_like(p)
    adj[valid] = holm(p[valid])
    verdict = np.where(valid & (adj < alpha), np.sign(np.nan_to_num(med)), 0).astype(int)
    out = []
    for d in np.flatnonzero(verdict.any(axis=1)):  # a device without one significant FLOP count has no run
        label, cols = ev.grid.labels[d], np.flatnonzero(valid[d])
        kept = apply_min_run(verdict[d, cols], min_run, levels[cols])
        for start, stop in runs_of(kept):
            if kept[start] == 0:
                continue
            pts = cols[start:stop]
            out.append(Run(label, int(kept[start]), float(levels[pts].min()), float(levels[pts].max()),
                           math.exp(float(np.median(med[d, pts]))), len(pts), int(count[d, pts].sum())))
    return sorted(out, key=lambda r: (r.label, r.start_flops))
