"""One series as per-shape medians: the log median time per call of each shape and its standard error.

What the leaderboards, the fleet view and the gate need of a series (:mod:`mfu_sweep.analysis.fleet`) is not
its samples but, per shape, the median of every sample of that shape (the passes of a ``--repeats`` sweep
pooled) and the standard error of that median, read off its distribution-free 95% interval (no resampling,
one sort per shape). :func:`shape_table` computes it from records; a file's digest
(:mod:`mfu_sweep.analysis.sources.digest`) stores it per sweep, so that a fleet of thousands of files is
ranked without holding their samples.

Ground of ``analysis/``: imports numpy and the top-level modules only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mfu_sweep.util.stats import median_ci_indices

Z95 = 1.959964


@dataclass(frozen=True, eq=False)
class ShapeTable:
    """Per shape, sorted by (FLOPs, name): ``flops``, ``log_s`` (log of the median seconds per call of every
    sample of the shape) and ``se`` (its standard error, 0 for a single sample)."""

    names: tuple[str, ...]
    flops: np.ndarray
    log_s: np.ndarray
    se: np.ndarray

    def __len__(self) -> int:
        return len(self.names)

    @classmethod
    def of(cls, rows: Iterable[tuple[str, float, float, float]]) -> ShapeTable:
        """A table of ``(name, flops, log_s, se)`` rows in any order (one per name)."""
        ordered = sorted(rows, key=lambda r: (r[1], r[0]))
        return cls(tuple(r[0] for r in ordered), np.array([r[1] for r in ordered], float),
                   np.array([r[2] for r in ordered], float), np.array([r[3] for r in ordered], float))

    def rows(self) -> list[tuple[str, float, float, float]]:
        return list(zip(self.names, self.flops.tolist(), self.log_s.tolist(), self.se.tolist(), strict=True))


def log_median_se(samples: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Log median per shape and its standard error from the distribution-free 95% interval of the median.

    The interval's half-width in log time over 1.96 (0 for a single sample);
    no resampling, so it costs one sort per shape.
    """
    med = np.empty(len(samples))
    se = np.zeros(len(samples))
    sizes = np.array([len(s) for s in samples])
    for size in np.unique(sizes):
        rows = np.flatnonzero(sizes == size)
        logs = np.sort(np.log(np.stack([samples[i] for i in rows])), axis=1)
        mid = logs[:, size // 2] if size % 2 else 0.5 * (logs[:, size // 2 - 1] + logs[:, size // 2])
        med[rows] = mid
        if size > 1:
            lo, hi = median_ci_indices(int(size))
            se[rows] = (logs[:, hi] - logs[:, lo]) / (2 * Z95)
    return med, se


def pooled_table(pooled: dict[str, tuple[float, list[float]]]) -> ShapeTable:
    """The table of ``name -> (flops, every sample of the shape)``."""
    names = sorted(pooled, key=lambda n: (pooled[n][0], n))
    log_s, se = log_median_se([np.asarray(pooled[n][1], float) for n in names])
    return ShapeTable(tuple(names), np.array([pooled[n][0] for n in names], float), log_s, se)


def shape_table(records: Iterable[Any]) -> ShapeTable:
    """The table of ``records`` (usable ones, with samples): the samples of one shape pooled over its records."""
    pooled: dict[str, tuple[float, list[float]]] = {}
    for rec in records:
        pooled.setdefault(str(rec.shape), (rec.flops, []))[1].extend(rec.samples_s)
    return pooled_table(pooled)
