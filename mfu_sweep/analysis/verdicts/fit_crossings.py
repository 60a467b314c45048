"""Where the fitted rooflines of two series cross, and whether the data cross there too.

The fits are smooth curves through each series; where they cross, the *fits* change
leader. That is a claim about the data only where the data themselves change
leader there: the side the fits put ahead below the crossing leads some FLOP band
(or run of adjacent bands taken together) below it by the band verdicts' own test
(Holm over the bands, the margin), and the other side leads one above it.
Elsewhere a fit crossover is an artefact of two smooth curves through shapes that
favour one side, or neither, throughout (B200 against H100 on the OpenXLA table:
B200 ahead in every band, yet the fits crossed at 220 MFLOP; gfx950 against B200
fp32: gfx950 clear in no band, yet the fits crossed to B200 at 340 MFLOP), and it
is reported as "the fits cross at X; the data do not".

A kept crossing is no claim of its own: it is merged into the data crossover of
the same change of leader (:func:`merge`), one line with one interval (the
data's, the verdict's) and both estimates. Its own interval comes from the fits'
bootstrap: each draw's crossing nearest the central one, whose ``alpha/2`` and
``1 - alpha/2`` quantiles bound it, never narrower than one step of the grid
either side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from mfu_sweep.analysis.fits.result import RooflineFit
from mfu_sweep.analysis.ground.series import Series
from mfu_sweep.analysis.verdicts.bands import Band
from mfu_sweep.analysis.verdicts.comparison import FIT_GRID, Crossover, format_flops
from mfu_sweep.analysis.verdicts.curves import _crossings, bytes_along, crossing_point, lead_runs


def _curves(fa: RooflineFit, fb: RooflineFit, sa: Series, sb: Series, metric: str, log_f: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray] | None:
    """The fits' log ratio a/b along ``log_f``: central curve and bootstrap draws (None without draws)."""
    f, nbytes = np.exp(log_f), bytes_along([sa, sb], log_f)
    # log(MFU_a / MFU_b) = log(t_b / t_a) + log(peak_b / peak_a)
    shift = math.log(sb.peak_tflops) - math.log(sa.peak_tflops) if metric == "mfu" else 0.0
    central = np.log(fb.predict_time(f, nbytes)) - np.log(fa.predict_time(f, nbytes)) + shift
    n = min(len(fa.boot), len(fb.boot))
    if n < 2:
        return None
    draws = (np.log(fb.predict_time_draws(f, nbytes)[:n]) - np.log(fa.predict_time_draws(f, nbytes)[:n]) + shift)
    return central, draws


def _interval(log_f: np.ndarray, draws: np.ndarray, x: float, alpha: float) -> tuple[float, float]:
    """The bootstrap interval of a crossing at ``x``: every draw's crossing nearest ``x`` (a draw that does not
    cross counts at the far end of the range), its quantiles, widened to at least one grid step either side."""
    found = _crossings(log_f, draws)
    nearest = np.array([row[np.nanargmin(np.abs(row - x))] if np.isfinite(row).any() else np.nan for row in found])
    far = np.where(np.isnan(nearest), np.where(np.arange(len(nearest)) % 2, log_f[-1], log_f[0]), nearest)
    lo, hi = np.quantile(far, [alpha / 2, 1 - alpha / 2])
    step = float(log_f[1] - log_f[0])
    return math.exp(min(float(lo), x - step)), math.exp(max(float(hi), x + step))


def fit_crossovers(fa: RooflineFit, fb: RooflineFit, sa: Series, sb: Series, metric: str, lo: float, hi: float,
                   alpha: float) -> list[Crossover]:
    """Every change of leader of the fits between ``lo`` and ``hi`` FLOPs (both fits' simultaneous bootstrap band
    must exclude equality on either side), placed where the central curves cross, with its bootstrap interval."""
    log_f = np.linspace(math.log(lo), math.log(hi), FIT_GRID)
    curves = _curves(fa, fb, sa, sb, metric, log_f)
    if curves is None:
        return []
    central, draws = curves
    se = np.maximum(np.std(draws, axis=0, ddof=1), 1e-12)
    crit = float(np.quantile(np.max(np.abs(draws - central) / se, axis=1), 1 - alpha))
    verdict = np.where(central - crit * se > 0, 1, np.where(central + crit * se < 0, -1, 0))
    names = {1: sa.label, -1: sb.label}
    out = []
    leads = lead_runs(verdict)
    for (_, i, s0), (j, _, s1) in zip(leads, leads[1:], strict=False):
        if s0 != s1:
            x = crossing_point(log_f[i:j + 1], central[i:j + 1])
            low, high = _interval(log_f, draws, x, alpha)
            out.append(Crossover(math.exp(x), low, high, names[s0], names[s1], "fit"))
    return out


def _leads(band: Band, sign: int) -> bool:
    """Whether the band's verdict, its own or the run's it is part of taken together, is a lead of ``sign``."""
    return (band.state or (band.via[3] if band.via is not None else 0)) == sign


def supported(crossings: Sequence[Crossover], bands: Sequence[Band], a: str) -> tuple[list[Crossover],
                                                                                       list[Crossover]]:
    """The fit crossovers the data support (the side the fits put ahead below leads a band or a run below the
    crossing, the other side one above it) and, with the reason, those they do not."""
    keep, drop = [], []
    for c in crossings:
        before = 1 if c.from_label == a else -1
        below = any(_leads(b, before) for b in bands if b.median_flops < c.flops)
        above = any(_leads(b, -before) for b in bands if b.median_flops > c.flops)
        if below and above:
            keep.append(c)
            continue
        why = " and ".join(w for w, ok in ((f"{c.from_label} leads in no band or run below it", below),
                                          (f"{c.to_label} leads in no band or run above it", above)) if not ok)
        drop.append(Crossover(c.flops, c.low_flops, c.high_flops, c.from_label, c.to_label, "fit", why))
    return keep, drop


def merge(data: Sequence[Crossover], fitted: Sequence[Crossover] | None) -> list[Crossover]:
    """One line per change of leader: every supported fit crossing joins the data crossover of its change (the same
    direction, the nearest in log FLOPs to its interval) as a second estimate; the interval stays the data's.
    ``fitted`` None: no fits were compared (the data crossovers say nothing of fits); a fit crossing no data
    crossover takes (none, by :func:`supported`) stays a line of its own."""
    if fitted is None:
        return list(data)
    owner: dict[int, list[tuple[float, float, float]]] = {i: [] for i in range(len(data))}
    alone = []
    for f in fitted:
        same = [i for i, d in enumerate(data) if (d.from_label, d.to_label) == (f.from_label, f.to_label)]
        if not same:
            alone.append(f)
            continue
        best = min(same, key=lambda i: _distance(data[i], f.flops))
        owner[best].append((f.flops, f.low_flops, f.high_flops))
    merged = [replace(d, fits=tuple(sorted(owner[i]))) for i, d in enumerate(data)]
    return sorted(merged + alone, key=lambda c: c.flops)


def _distance(c: Crossover, flops: float) -> float:
    """How far ``flops`` lies outside ``c``'s interval, in log FLOPs (0 inside)."""
    return max(0.0, math.log(c.low_flops / flops), math.log(flops / c.high_flops))


def unsupported_note(c: Crossover) -> str:
    """E.g. "the fits cross at 220 MFLOP (sm_90 -> sm_100_B200); the data do not: sm_90 leads in no band or run below
    it; no crossover reported"."""
    return (f"the fits cross at {format_flops(c.flops)} ({c.from_label} -> {c.to_label}); the data do not: "
            f"{c.reason}; no crossover reported")
