"""Which measured shapes a comparison tests: the shapes both sides measured, then unmatched shapes paired by FLOPs.

A value read off the other side's curve at the same FLOP count is not an
observation: shapes of one FLOP count differ systematically (aspect ratio,
alignment, kernel choice), so counting interpolated values as shapes inflates
the evidence by the ratio of the two sides' shape counts. Every point of a
comparison here is two *measured* shapes:

* ``matched``: a shape both sides measured;
* ``paired``: a shape only ``a`` measured with one only ``b`` measured, in the
  same half-decade of FLOPs and within ``PAIR_DECADES`` of each other, each
  shape used once (greedy, the smaller side's shapes in FLOP order, each taking
  the nearest unused shape of the other side, ties broken by the nearest
  aspect). The pairing looks at shapes only, never at the values, so under "no
  difference" the two shapes of a pair are exchangeable and their log ratio is
  symmetric about zero: the band tests stay valid, with the two shapes'
  systematic difference as part of the noise they are calibrated against. The
  small FLOP gap is taken out with the slope of log speed against log FLOPs
  over both sides' measured shapes of that half-decade.

A band of ``n`` points therefore uses ``n`` measured shapes of each side, never
more than the side with fewer measured shapes in the band has.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from mfu_sweep.analysis.verdicts.curves import PassCurve, _log_metric, _Raw

PAIR_DECADES = 0.05  # two unmatched shapes pair only within 12% of each other's FLOPs
LEVELS_PER_DECADE = 2  # and only inside one half-decade (a band is a union of half-decades)


def _dims(name: str) -> np.ndarray:
    """Log of (m, n, k) from a shape's name ``[BATCHx]MxNxK``; zeros when it does not parse."""
    try:
        return np.log([float(x) for x in name.split("x")[-3:]])
    except ValueError:
        return np.zeros(3)


def _level(flops: float) -> int:
    return math.floor(math.log10(flops) * LEVELS_PER_DECADE + 1e-9)


def pair_by_flops(only_a: Mapping[str, float], only_b: Mapping[str, float],
                  decades: float = PAIR_DECADES) -> list[tuple[str, str]]:
    """Pairs ``(shape of a, shape of b)`` of unmatched shapes (name -> FLOPs), each shape used at most once."""
    out = []
    levels = {_level(f) for f in only_a.values()} & {_level(f) for f in only_b.values()}
    for level in sorted(levels):
        sa = sorted((f, n) for n, f in only_a.items() if _level(f) == level)
        sb = sorted((f, n) for n, f in only_b.items() if _level(f) == level)
        small, large, flip = (sa, sb, False) if len(sa) <= len(sb) else (sb, sa, True)
        x = np.log10([f for f, _ in large])
        dims = np.array([_dims(n) for _, n in large])
        free = np.ones(len(large), dtype=bool)
        for f, name in small:
            gap = np.abs(x - math.log10(f))
            ok = free & (gap <= decades)
            if not ok.any():
                continue
            aspect = np.abs(dims - _dims(name)).sum(axis=1)
            key = np.where(ok, np.round(gap, 2) * 1e3 + aspect, np.inf)
            j = int(np.argmin(key))
            free[j] = False
            out.append((large[j][1], name) if flip else (name, large[j][1]))
    return out


def _level_slope(curves: tuple[PassCurve, PassCurve], level: int) -> float:
    """Mean over the two sides of the OLS slope of log speed against log FLOPs in a half-decade (0 if unknown)."""
    slopes = []
    for c in curves:
        pts = [(math.log(f), float(np.nanmean(v))) for f, v in c.shapes.values()
               if _level(f) == level and np.isfinite(v).any()]
        if len(pts) >= 3:
            x, t = np.array(pts).T
            if np.ptp(x) > 0:
                slopes.append(-float(np.polyfit(x, t, 1)[0]) + 1.0)  # log speed = log F - log t
    return float(np.mean(slopes)) if slopes else 0.0


def measured_points(ca: PassCurve, cb: PassCurve) -> list[_Raw]:
    """The points of a comparison, every one two measured shapes: matched shapes, then pairs by FLOPs."""
    both = ca.shapes.keys() & cb.shapes.keys()
    out = []
    for name in both:
        flops = ca.shapes[name][0]
        lf = math.log(flops)
        out.append(_Raw(flops, name, _log_metric(lf, ca.shapes[name][1], ca), _log_metric(lf, cb.shapes[name][1], cb),
                        0.0, "matched", None))
    only_a = {n: v[0] for n, v in ca.shapes.items() if n not in both}
    only_b = {n: v[0] for n, v in cb.shapes.items() if n not in both}
    slopes: dict[int, float] = {}
    for name_a, name_b in pair_by_flops(only_a, only_b):
        fa, fb = only_a[name_a], only_b[name_b]
        mid = math.sqrt(fa * fb)
        level = _level(mid)
        slope = slopes.setdefault(level, _level_slope((ca, cb), level))
        va = _log_metric(math.log(fa), ca.shapes[name_a][1], ca) - slope * math.log(fa / mid)
        vb = _log_metric(math.log(fb), cb.shapes[name_b][1], cb) - slope * math.log(fb / mid)
        out.append(_Raw(mid, f"{name_a}~{name_b}", va, vb, 0.0, "paired", None))
    return sorted(out, key=lambda r: (r.flops, r.shape))


def measured_in(curve: PassCurve, low: float, high: float) -> int:
    """Shapes ``curve`` measured with FLOPs in ``[low, high)``."""
    return int(sum(low <= f < high for f, _ in curve.shapes.values()))
