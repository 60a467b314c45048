"""Which figures a report draws when there is too much to draw every one.

A node of eight GPUs measured at 3,375 shapes each has 120 m x n grids (one heatmap per device,
dtype, mode and k), and a fleet of hundreds of devices puts hundreds of curves and legend
entries on every overlay; drawing them all made a 10 MB page that nobody reads to the end. So a
report draws, besides the fleet and leaderboard heatmaps (one row per device, already the
overview):

* the overlays (MFU vs FLOPs, roofline, first call, compile speedup) of at most
  :data:`~mfu_sweep.analysis.fleet.leaderboard.HANDFUL` devices per dtype and mode when there are
  more: the flagged devices of a replicate run first, worst first, then the fastest (the leader) and the
  slowest by best measured TFLOP/s, slowest first;
* the m x n heatmaps, when there are more than :data:`MAX_HEATMAPS`, of one device per dtype and
  mode (the first featured one) at up to :data:`MAX_K` values of k, spread over the measured range.

``report --detail`` draws every figure too; those beyond the choice are written beside the
report and linked from it, not embedded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mfu_sweep.analysis.fleet.leaderboard import HANDFUL
from mfu_sweep.present.figures.grid import heatmap_grids
from mfu_sweep.records.results import Sweep

MAX_K = 4
# up to this many heatmaps in all, every one is drawn
MAX_HEATMAPS = 8
Grid = tuple[str, str, str, int]  # label, dtype, mode, k


@dataclass(frozen=True)
class FigureChoice:
    """What a report draws: ``featured`` labels per (dtype, mode) (None: every label) and the heatmaps.

    ``grids`` is every heatmap the sweeps support, ``heatmaps`` the ones chosen.
    """

    featured: dict[tuple[str, str], tuple[str, ...]] | None
    heatmaps: tuple[Grid, ...]
    grids: tuple[Grid, ...]
    flagged: bool = False  # whether a replicate run flagged any featured device

    @property
    def labels(self) -> set[str] | None:
        """Every featured label (None: all)."""
        return None if self.featured is None else {lab for labs in self.featured.values() for lab in labs}

    def sentence(self, n_labels: int) -> str | None:
        """What was left out and how to get it, or None when nothing was."""
        parts = []
        if self.labels is not None and len(self.labels) < n_labels:
            first = "the flagged, then " if self.flagged else ""
            named = dict.fromkeys(lab for labs in (self.featured or {}).values() for lab in labs)
            parts.append(f"the figures below draw {len(self.labels)} of the {n_labels} devices ({first}per dtype "
                         f"and mode the fastest and the slowest by best measured TFLOP/s: {', '.join(named)})")
        if len(self.heatmaps) < len(self.grids):
            parts.append(f"{len(self.heatmaps)} of {len(self.grids)} m x n heatmaps are drawn (one device per "
                         f"dtype and mode, at most {MAX_K} values of k)")
        if not parts:
            return None
        text = "; ".join(parts)
        return text[0].upper() + text[1:] + "; mfu-sweep report --detail writes every figure beside the report."


def _flagged(views: Sequence[Any], dtype: str, mode: str) -> list[str]:
    """The devices the replicate runs' fleet views of one dtype and mode flag, worst first."""
    out: list[str] = []
    for view in views:
        if (view.dtype, view.mode) == (dtype, mode):
            health = getattr(view, "health", ())
            out += [h.label for h in sorted((h for h in health if h.flagged), key=lambda h: (h.mean_ratio, h.label))]
    return out


def best_tflops(sweeps: Sequence[Sweep]) -> dict[tuple[str, str, str], float]:
    """``(label, dtype, mode) -> `` the best TFLOP/s of its ok records (0 without one)."""
    best: dict[tuple[str, str, str], float] = {}
    for sw in sweeps:
        for r in sw.records:
            key = (sw.label, r.dtype, r.series_mode)
            value = r.tflops if r.status == "ok" and r.tflops else 0.0
            best[key] = max(best.get(key, 0.0), value)
    return best


def _flagged_first(labels: Sequence[str], views: Sequence[Any], dtype: str, mode: str) -> list[str]:
    """Labels of one dtype and mode, the flagged first (worst first), then by label."""
    return list(dict.fromkeys([*(lab for lab in _flagged(views, dtype, mode) if lab in set(labels)), *labels]))


def _ranked(labels: Sequence[str], views: Sequence[Any], dtype: str, mode: str,
            best: dict[tuple[str, str, str], float]) -> list[str]:
    """Labels of one dtype and mode: the flagged (worst first), the fastest by best TFLOP/s (the leader), then
    the others slowest first."""
    speed = sorted(labels, key=lambda lab: (best.get((lab, dtype, mode), 0.0), lab))
    first = [lab for lab in _flagged(views, dtype, mode) if lab in set(labels)]
    order = [*first, *speed[-1:], *speed[:-1]]
    return list(dict.fromkeys(order))


def _spread(ks: Sequence[int], most: int) -> list[int]:
    """Up to ``most`` of the sorted ``ks``, evenly spread, the smallest and largest included."""
    if len(ks) <= most:
        return list(ks)
    return sorted({ks[round(i * (len(ks) - 1) / (most - 1))] for i in range(most)})


def choose_figures(sweeps: Sequence[Sweep], fleets: Sequence[Any] = (), most: int = HANDFUL) -> FigureChoice:
    """The figures a report draws (see the module docstring); ``fleets`` are its fleet views, worst first."""
    labels: dict[tuple[str, str], set[str]] = {}
    for sw in sweeps:
        for key in {(r.dtype, r.series_mode) for r in sw.records}:
            labels.setdefault(key, set()).add(sw.label)
    many = any(len(labs) > most for labs in labels.values())
    best = best_tflops(sweeps) if many else {}  # a few devices: every one drawn, the heatmaps' first by label
    ranked = {key: _ranked(sorted(labs), fleets, *key, best) if many else _flagged_first(sorted(labs), fleets, *key)
              for key, labs in labels.items()}
    featured = {key: tuple(labs[:most]) for key, labs in ranked.items()} if many else None
    flagged = many and any(set(_flagged(fleets, *key)) & set(labs[:most]) for key, labs in ranked.items())
    grids = heatmap_grids(sweeps)
    if len(grids) <= MAX_HEATMAPS:
        return FigureChoice(featured, tuple(grids), tuple(grids), flagged)
    chosen: list[Grid] = []
    for (dtype, mode), labs in ranked.items():
        for label in labs:
            ks = sorted(k for lab, d, m, k in grids if (lab, d, m) == (label, dtype, mode))
            if ks:
                chosen += [(label, dtype, mode, k) for k in _spread(ks, MAX_K)]
                break
    return FigureChoice(featured, tuple(sorted(chosen)), tuple(grids), flagged)
