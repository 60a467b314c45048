"""Where a comparison is still open: crossovers wider than the target, leaning sign changes, trends.

Placement claims nothing: it may look at unadjusted p-values (``LEAN_P``) to find leanings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr

from mfu_sweep.analysis.verdicts.bands import SAME
from mfu_sweep.analysis.verdicts.comparison import ComparePoint, Comparison, format_flops
from mfu_sweep.analysis.verdicts.evidence import apply_min_run

LEAN_P = 0.05  # unadjusted p-value at which a point "leans" (placement only, never a claim)


@dataclass(frozen=True)
class Region:
    """A FLOP range still open: a crossover wider than the target, a leaning sign change, or a bend."""

    kind: str  # "crossover", "candidate" or "bend"
    low_flops: float
    high_flops: float
    where: str  # the pair or series it belongs to
    centre: float | None = None  # a called crossover's estimate

    @property
    def width(self) -> float:
        """high / low."""
        return self.high_flops / self.low_flops

    def describe(self) -> str:
        span = f"[{format_flops(self.low_flops)}, {format_flops(self.high_flops)}]"
        what = {"crossover": "crossover", "candidate": "possible crossover (leaning, not called)",
                "bend": "bend of the curve"}[self.kind]
        return f"{self.where}: {what} in {span} (x{self.width:.2g} wide)"


def _pair_name(c: Comparison) -> str:
    return f"{c.a} vs {c.b} ({c.dtype}, {c.mode})"


def crossover_regions(c: Comparison, target: float) -> list[Region]:
    """Called data crossovers wider than ``target``."""
    return [Region("crossover", x.low_flops, x.high_flops, _pair_name(c), x.flops) for x in c.crossovers
            if x.method != "fit" and x.high_flops / x.low_flops > target]


def _leanings(points: Sequence[ComparePoint], min_run: int) -> np.ndarray:
    """+1/-1 where a point's unadjusted p-value is below ``LEAN_P``, held over ``min_run`` FLOP counts."""
    # the point's own ratio: its p-value tests that ratio (trend_ratio is its whole band's, one sign per band)
    lean = np.array([int(np.sign(math.log(p.ratio))) if p.p_value < LEAN_P else 0 for p in points], dtype=int)
    return apply_min_run(lean, min_run, [p.flops for p in points])


def _flop_leanings(points: Sequence[ComparePoint], min_run: int) -> tuple[np.ndarray, np.ndarray]:
    """(FLOP counts, one leaning each) over the measured points: +1/-1 where every leaning point of that FLOP
    count leans that way, 0 where none leans or they lean both ways (shapes of one FLOP count that differ
    are a shape effect, not a crossover along FLOPs). Model-based points (one side's shape against the other
    side's prediction there) are left out: placement leans on shapes both sides measured."""
    measured = [p for p in points if not p.interpolated]
    if not measured:
        return np.empty(0), np.empty(0, dtype=int)
    lean = _leanings(measured, min_run)
    flops = np.array([p.flops for p in measured])
    levels = np.unique(flops)
    out = np.zeros(len(levels), dtype=int)
    for i, f in enumerate(levels):
        signs = set(lean[flops == f].tolist()) - {0}
        out[i] = signs.pop() if len(signs) == 1 else 0
    return levels, out


def candidate_regions(c: Comparison) -> list[Region]:
    """Sign changes between leaning stretches that the called verdicts do not (yet) make a crossover.

    A leaning point is not a claim: its p-value is not adjusted. The region
    reaches from the last FLOP count of one leaning stretch to the first of the
    next, so it is never empty, and each sign change gives one region.
    """
    if not c.points:
        return []
    levels, lean = _flop_leanings(c.points, c.min_run)
    called = [(x.low_flops, x.high_flops) for x in c.crossovers if x.method != "fit"]
    idx = np.flatnonzero(lean)
    settled = _settled(c)
    out: list[Region] = []
    for i, j in zip(idx, idx[1:], strict=False):
        if lean[i] == lean[j]:
            continue
        lo, hi = float(levels[i]), float(levels[j])
        if any(a < hi and lo < b for a, b in called):
            continue  # overlaps a called crossover's interval: the same sign change, that region covers it
        if any(a <= lo and hi <= b for a, b in settled):
            continue  # inside a stretch shown the same within the margin: a sign change there is no lead
        out.append(Region("candidate", lo, hi, _pair_name(c)))
    return out + trend_regions(c, called + [(r.low_flops, r.high_flops) for r in out])


def _settled(c: Comparison) -> list[tuple[float, float]]:
    """FLOP ranges shown "the same within the margin": a band by its own test, or a run of bands taken together."""
    out = [(b.low_flops, b.high_flops) for b in c.bands if b.same]
    return out + [(b.via[0], b.via[1]) for b in c.bands if b.via is not None and b.via[3] == SAME]


def trend_regions(c: Comparison, covered: Sequence[tuple[float, float]]) -> list[Region]:
    """Inside a band with no leader, a log ratio that trends with FLOPs (Spearman p < ``LEAN_P``) and changes
    sign: the shapes on either side of where a line through them crosses zero. The band's scatter hides a
    crossover from the per-shape p-values when the ratio sweeps through 1 within one band (a sparse sweep)."""
    out = []
    for band in (b for b in c.bands if b.verdict == 0 and not b.same):  # "the same within the margin" is settled
        pts = [p for p in c.points if band.low_flops <= p.flops <= band.high_flops]
        if len(pts) < 4:
            continue
        x = np.log([p.flops for p in pts])
        d = np.log([p.ratio for p in pts])
        if np.all(d > 0) or np.all(d < 0) or np.ptp(x) == 0 or spearmanr(x, d).pvalue >= LEAN_P:
            continue
        slope, level = np.polyfit(x, d, 1)
        cross = -level / slope
        below, above = x[x <= cross], x[x > cross]
        if not len(below) or not len(above):
            continue
        lo, hi = math.exp(below.max()), math.exp(above.min())
        if not any(a < hi and lo < b for a, b in covered):
            out.append(Region("candidate", lo, hi, _pair_name(c)))
    return out

