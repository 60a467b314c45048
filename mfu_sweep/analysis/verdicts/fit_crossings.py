"""Where the fitted rooflines of two series cross, and whether the data cross there too.

The fits are smooth curves through each series; where they cross, the *fits* change
leader. That is a claim about the data only where the data themselves lean both
ways: some FLOP band below the crossing leans to the side that leads there, and
some band above it to the other (a band "leans" when its own difference test,
unadjusted, gives ``p < LEAN_P`` that way). Elsewhere a fit crossover is an artefact
of two smooth curves through shapes that favour one side throughout (B200 against
H100 on the OpenXLA table: B200 ahead in every band, yet the fits crossed at 220
MFLOP), and it is reported as "the fits cross at X, the data do not".

A kept crossover's interval comes from the fits' bootstrap: each draw's crossing
nearest the central one, whose ``alpha/2`` and ``1 - alpha/2`` quantiles bound
it, never narrower than one step of the grid either side.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from mfu_sweep.analysis.fits.result import RooflineFit
from mfu_sweep.analysis.series import Series
from mfu_sweep.analysis.verdicts.bands import Band
from mfu_sweep.analysis.verdicts.comparison import FIT_GRID, Crossover, format_flops
from mfu_sweep.analysis.verdicts.curves import _crossings, bytes_along, crossing_point, lead_runs

LEAN_P = 0.05  # a band leans one way when its own difference test (unadjusted) says so at this level


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


def _leans(band: Band, sign: int) -> bool:
    return band.p_shapes < LEAN_P and band.estimate * sign > 0


def supported(crossings: Sequence[Crossover], bands: Sequence[Band], a: str) -> tuple[list[Crossover],
                                                                                       list[Crossover]]:
    """The fit crossovers the data support (a band below leaning to the side the fits put ahead there, a band
    above leaning to the other) and, with the reason, those they do not."""
    keep, drop = [], []
    for c in crossings:
        before = 1 if c.from_label == a else -1
        below = any(_leans(b, before) for b in bands if b.median_flops < c.flops)
        above = any(_leans(b, -before) for b in bands if b.median_flops > c.flops)
        if below and above:
            keep.append(c)
            continue
        why = " and ".join(w for w, ok in ((f"no band below it leans to {c.from_label}", below),
                                          (f"no band above it leans to {c.to_label}", above)) if not ok)
        drop.append(Crossover(c.flops, c.low_flops, c.high_flops, c.from_label, c.to_label, "fit", why))
    return keep, drop


def unsupported_note(c: Crossover) -> str:
    """E.g. "the fits cross at 220 MFLOP (sm_90 -> sm_100_B200), the data do not: no band below it leans to sm_90"."""
    return (f"the fits cross at {format_flops(c.flops)} ({c.from_label} -> {c.to_label}), the data do not: "
            f"{c.reason}; no crossover reported")
