"""Segments, crossovers and per-shape detail of a comparison, all from its band verdicts
(:mod:`mfu_sweep.analysis.verdicts.bands`).

Every point takes the leader of the segment it lies in, and segments are runs
of bands with one verdict (a band's own; for bands no test calls alone that a
run of adjacent bands calls taken together, the run's, as a segment of its own
marked ``together``), so the segments, the summary shares
(:meth:`mfu_sweep.analysis.verdicts.comparison.Comparison.lead_summary`) and the
sentence cannot disagree. Two lead segments of the same leader separated by an
ambiguous stretch narrower than one nominal band (half a decade, from the last
point of the first lead to the first point of the second) become one segment.
The per-shape numbers stay as detail: each point's own ratio with its interval
against run-to-run variation (``runs``) or against the scatter of its band's
shapes (``shapes``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.stats import t as student_t

from mfu_sweep.analysis.verdicts.bands import SAME, Band, RunClaim, split_words
from mfu_sweep.analysis.verdicts.comparison import ComparePoint, Crossover, Segment
from mfu_sweep.analysis.verdicts.curves import _Raw, crossing_point


def effective_state(band: Band) -> int:
    """The state a band's stretch of a segment shows: its own verdict, or, for a band no test calls alone that is
    part of a run's conclusion (``via``), the run's claim (a segment "taken together")."""
    return band.state or (band.via[3] if band.via is not None else 0)


def together(band: Band) -> bool:
    """Whether a band shows a run's conclusion rather than its own (see :func:`effective_state`)."""
    return band.state == 0 and band.via is not None


def band_runs(bands: Sequence[Band]) -> list[tuple[int, int, int]]:
    """(first band, last band + 1, state) of the runs of equal states (+1, -1, ``SAME``, 0: ambiguous; a band
    that shows a run's conclusion counts with the run's state, :func:`effective_state`). Two leads of one side
    with an ambiguous band between them stay two: the band in between is what its own test (or a run's test
    it belongs to) says, never the leads' conclusion copied onto it."""
    runs: list[list[int]] = []
    for k, band in enumerate(bands):
        if runs and runs[-1][2] == effective_state(band):
            runs[-1][1] = k + 1
        else:
            runs.append([k, k + 1, effective_state(band)])
    return [(s, e, v) for s, e, v in runs]


def _merged_leader(bands: Sequence[Band], runs: Sequence[tuple[int, int, int]]) -> np.ndarray:
    out = np.zeros(bands[-1].stop if bands else 0, dtype=int)
    for s, e, v in runs:
        out[bands[s].start:bands[e - 1].stop] = v
    return out


def segments(raw: Sequence[_Raw], bands: Sequence[Band], a: str, b: str, method: str,
             runs: Sequence[RunClaim] = ()) -> list[Segment]:
    """One segment per run of bands (:func:`band_runs`), tiled from the first to the last point; a segment that
    shows a run's conclusion (``together``) takes the run's estimate for those bands."""
    stretches = band_runs(bands)
    flops = [r.flops for r in raw]
    names = {1: a, -1: b, 0: None}
    bounds = [flops[0]]
    for (_, e, _), (s, _, _) in zip(stretches, stretches[1:], strict=False):
        bounds.append(math.sqrt(flops[bands[e - 1].stop - 1] * flops[bands[s].start]))
    bounds.append(flops[-1])
    out = []
    for k, (s, e, v) in enumerate(stretches):
        claims = [r for r in runs if s <= r.first and r.last < e and r.state == v]
        own = [bd for bd in bands[s:e] if bd.state == v]
        parts = [(bd.estimate, bd.n) for bd in own] + [(r.estimate, bands[r.last].stop - bands[r.first].start)
                                                      for r in claims]
        log_ratio = _weighted_median(*zip(*parts, strict=True)) if parts else _weighted_median(
            [bd.estimate for bd in bands[s:e]], [bd.n for bd in bands[s:e]])
        ratio = math.exp(log_ratio)
        pts = raw[bands[s].start:bands[e - 1].stop]
        d = np.array([p.log_a - p.log_b for p in pts])
        out.append(Segment(start_flops=bounds[k], end_flops=bounds[k + 1], leader=names.get(v), ratio=ratio,
                           diff=float(np.median([math.exp(p.log_b) * (ratio - 1) for p in pts])),
                           n_points=len(pts), method=method, same=v == SAME,
                           together=v != 0 and any(together(bd) for bd in bands[s:e]),
                           alone=v != 0 and bool(own),
                           against=split_words(v, int((d > 0).sum()), int((d < 0).sum()), len(d))))
    return out


def _weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    order = np.argsort(values)
    v, w = np.asarray(values, float)[order], np.asarray(weights, float)[order]
    return float(v[np.searchsorted(np.cumsum(w), w.sum() / 2)])


def crossovers(raw: Sequence[_Raw], bands: Sequence[Band], a: str, b: str, method: str,
               alpha: float = 0.05) -> list[Crossover]:
    """A change of leader between two lead runs: bracketed by the median FLOPs of the last band of the first
    lead and of the first band of the second, placed where the shapes' log ratio crosses zero between them.

    The interval is the line's ``1 - alpha`` Fieller interval (the comparison's own level, so a stricter
    look never gets a narrower interval) when the shapes' own crossing lies inside the line's interval at
    ``CHECK_ALPHA`` (or the comparison's level when looser: one test for every stricter look); a crossing
    outside means the line does not describe the shapes there, and the interval is the whole bracket."""
    leads = [r for r in band_runs(bands) if r[2] in (1, -1)]
    log_f = np.log([r.flops for r in raw])
    d = np.array([r.log_a - r.log_b for r in raw])
    names = {1: a, -1: b}
    out = []
    for (_, e0, v0), (s1, _, v1) in zip(leads, leads[1:], strict=False):
        if v0 == v1:
            continue
        lo, hi = bands[e0 - 1].median_flops, bands[s1].median_flops
        inside = (log_f >= math.log(lo)) & (log_f <= math.log(hi))
        x = crossing_point(log_f[inside], d[inside]) if inside.sum() >= 2 else math.log(math.sqrt(lo * hi))
        x_lo, x_hi = local_crossing(log_f[inside], d[inside], math.log(lo), math.log(hi), alpha, CHECK_ALPHA)
        c_lo, c_hi = local_crossing(log_f[inside], d[inside], math.log(lo), math.log(hi), max(alpha, CHECK_ALPHA),
                                    CHECK_ALPHA)
        if not c_lo <= x <= c_hi:  # judged at one level for every look, so a stricter look never narrows it
            x_lo, x_hi = math.log(lo), math.log(hi)
            x = min(max(x, x_lo), x_hi)
        out.append(Crossover(math.exp(x), math.exp(x_lo), math.exp(x_hi), names[v0], names[v1], method))
    return out


CHECK_ALPHA = 0.05  # the level at which the shapes' own crossing must lie inside the line's interval


def local_crossing(x: np.ndarray, d: np.ndarray, lo: float, hi: float, alpha: float = 0.05,
                   window_alpha: float | None = None) -> tuple[float, float]:
    """:func:`fieller_crossing` over the bracket, then once more over the shapes within three interval widths
    of the first interval (where a line describes the log ratio better than over the whole bracket); the
    bracket when those shapes do not bound the crossing at this level.

    ``window_alpha`` (default ``alpha``) is the level of the first interval that picks those shapes: one level
    for every look picks the same shapes, so a stricter look (smaller ``alpha``) widens the interval over them
    instead of choosing other shapes, or falling back to the first interval, either of which could narrow it."""
    x_lo, x_hi = fieller_crossing(x, d, lo, hi, alpha)
    if (x_lo, x_hi) == (lo, hi):
        return lo, hi
    w_lo, w_hi = (x_lo, x_hi) if window_alpha is None else fieller_crossing(x, d, lo, hi, window_alpha)
    width = w_hi - w_lo
    near = (x >= w_lo - width) & (x <= w_hi + width)
    if near.sum() < FIELLER_MIN_POINTS or near.all():
        return x_lo, x_hi
    return fieller_crossing(x[near], d[near], lo, hi, alpha)


FIELLER_MIN_POINTS = 6  # a line through fewer shapes has too few degrees of freedom to narrow the bracket


def fieller_crossing(x: np.ndarray, d: np.ndarray, lo: float, hi: float, alpha: float = 0.05) -> tuple[float, float]:
    """Where a straight line through the log ratios ``d`` of the shapes between two opposite leads crosses
    zero, with Fieller's ``1 - alpha`` interval, clipped to the bracket ``[lo, hi]`` (log FLOPs). The bracket
    itself (the two bands' median FLOPs) when the shapes do not bound the crossing: too few of them, a slope
    indistinguishable from flat, or an interval reaching past the bracket. Dense shapes near a crossing
    (what ``refine`` adds) narrow it below a band's width; the residual scatter of the shapes about the line
    is the noise, so shape-to-shape differences widen it rather than pass for precision."""
    n = len(x)
    if n < FIELLER_MIN_POINTS:
        return lo, hi
    xc = x - x.mean()
    sxx = float(xc @ xc)
    if sxx <= 0:
        return lo, hi
    slope = float(xc @ (d - d.mean())) / sxx
    level = float(d.mean())
    resid = d - level - slope * xc
    s2 = float(resid @ resid) / (n - 2)
    tq = float(student_t.ppf(1 - alpha / 2, n - 2))
    g = tq**2 * s2 / (sxx * slope**2) if slope else math.inf
    if g >= 1:
        return lo, hi
    # Fieller: theta = level/slope, the crossing is at mean(x) - theta
    disc = slope**2 / n + level**2 / sxx - tq**2 * s2 / (n * sxx)
    root = tq * math.sqrt(s2 * max(disc, 0.0))
    denom = slope**2 - tq**2 * s2 / sxx
    thetas = ((level * slope - root) / denom, (level * slope + root) / denom)
    x_lo, x_hi = sorted(x.mean() - t for t in thetas)
    if x_lo >= hi or x_hi <= lo:  # the line crosses outside the bracket: it does not describe these shapes
        return lo, hi
    return max(lo, x_lo), min(hi, x_hi)


def _point_noise(raw: Sequence[_Raw], bands: Sequence[Band],
                 run_var: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """Per point: sd of its log ratio and the df, from run-to-run variation or the scatter of its band."""
    if run_var is not None:
        return np.sqrt(run_var[0]), run_var[1]
    d = np.array([r.log_a - r.log_b for r in raw])
    sd, df = np.full(len(d), np.inf), np.ones(len(d))
    for band in bands:
        x = d[band.start:band.stop]
        mad = 1.4826 * float(np.median(np.abs(x - np.median(x))))
        if band.n >= 3 and mad > 0:
            sd[band.start:band.stop], df[band.start:band.stop] = mad, band.n - 1
    return sd, df


def points(raw: Sequence[_Raw], bands: Sequence[Band], a: str, b: str, method: str, alpha: float,
           run_var: tuple[np.ndarray, np.ndarray] | None) -> list[ComparePoint]:
    """Per-shape detail; ``leader`` is that of the point's segment, ``p_adjusted`` its band's."""
    names = {1: a, -1: b, 0: None}
    leader = _merged_leader(bands, band_runs(bands))
    sd, df = _point_noise(raw, bands, run_var)
    q = student_t.ppf(1 - alpha / 2, df)
    out = []
    for k, band in enumerate(bands):
        for i in range(band.start, band.stop):
            r = raw[i]
            d = r.log_a - r.log_b
            with np.errstate(invalid="ignore", divide="ignore"):
                p = float(2 * student_t.sf(abs(d) / sd[i], df[i])) if np.isfinite(sd[i]) and sd[i] > 0 else 1.0
            out.append(ComparePoint(
                flops=r.flops, shape=r.shape, a_value=r.shown[0], b_value=r.shown[1],
                ratio=math.exp(d), ratio_low=math.exp(d - q[i] * sd[i]), ratio_high=math.exp(d + q[i] * sd[i]),
                p_value=p, p_adjusted=band.p_adjusted, leader=names.get(int(leader[i])), method=r.method,
                interpolated=r.interpolated, verdict_method=method, trend_ratio=math.exp(band.estimate), band=k,
                same=int(leader[i]) == SAME,
            ))
    return out
