"""Which figures a report draws when there is too much to draw every one.

A node of eight GPUs measured at 3,375 shapes each has 120 m x n grids (one heatmap per device,
dtype, mode and k), and a fleet of hundreds of devices puts hundreds of curves and legend
entries on every overlay; drawing them all made a 10 MB page that nobody reads to the end. So a
report draws, besides the fleet and leaderboard heatmaps (one row per device, already the
overview):

* the overlays (MFU vs FLOPs, roofline, first call, compile speedup) of at most
  :data:`~mfu_sweep.analysis.fleet.leaderboard.HANDFUL` devices per dtype and mode when there are
  more: the flagged devices first, worst first, then the slowest, then the others by label;
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

    @property
    def labels(self) -> set[str] | None:
        """Every featured label (None: all)."""
        return None if self.featured is None else {lab for labs in self.featured.values() for lab in labs}

    def sentence(self, n_labels: int) -> str | None:
        """What was left out and how to get it, or None when nothing was."""
        parts = []
        if self.labels is not None and len(self.labels) < n_labels:
            parts.append(f"the figures below draw {len(self.labels)} of the {n_labels} devices (flagged and "
                         f"slowest first: {', '.join(sorted(self.labels))})")
        if len(self.heatmaps) < len(self.grids):
            parts.append(f"{len(self.heatmaps)} of {len(self.grids)} m x n heatmaps are drawn (one device per "
                         f"dtype and mode, at most {MAX_K} values of k)")
        if not parts:
            return None
        return "; ".join(parts).capitalize() + "; mfu-sweep report --detail writes every figure beside the report."


def _ranked(label_order: Sequence[str], views: Sequence[Any], dtype: str, mode: str) -> list[str]:
    """Labels of one dtype and mode, flagged (worst first) and slowest first, then by label."""
    first: list[str] = []
    for view in views:
        if (view.dtype, view.mode) != (dtype, mode):
            continue
        health = getattr(view, "health", ())
        flagged = sorted((h for h in health if h.flagged), key=lambda h: (h.mean_ratio, h.label))
        first += [h.label for h in [*flagged, *health]]
    known = set(label_order)
    order = [lab for lab in dict.fromkeys(first) if lab in known]
    taken = set(order)
    return order + [lab for lab in label_order if lab not in taken]


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
    ranked = {key: _ranked(sorted(labs), fleets, *key) for key, labs in labels.items()}
    many = any(len(labs) > most for labs in ranked.values())
    featured = {key: tuple(labs[:most]) for key, labs in ranked.items()} if many else None
    grids = heatmap_grids(sweeps)
    if len(grids) <= MAX_HEATMAPS:
        return FigureChoice(featured, tuple(grids), tuple(grids))
    chosen: list[Grid] = []
    for (dtype, mode), labs in ranked.items():
        for label in labs:
            ks = sorted(k for lab, d, m, k in grids if (lab, d, m) == (label, dtype, mode))
            if ks:
                chosen += [(label, dtype, mode, k) for k in _spread(ks, MAX_K)]
                break
    return FigureChoice(featured, tuple(sorted(chosen)), tuple(grids))
