"""The per-point statistics of a comparison: bootstrapped medians, p-values, Holm, the run rule,
segments and data crossovers."""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.interpolate import PchipInterpolator
from scipy.stats import norm

from mfu_sweep.analysis.comparison import LN_TERA, MIN_SAMPLES, ComparePoint, Crossover, Segment
from mfu_sweep.analysis.series import Series


@dataclass(frozen=True)
class _Curve:
    """One series prepared for comparison: log median time per shape and per FLOP count."""

    label: str
    log_peak: float
    shapes: Mapping[str, tuple[float, float, np.ndarray, int]]  # shape -> (flops, log t, draws, n samples)
    log_f: np.ndarray  # distinct FLOP counts (log), sorted
    log_t: np.ndarray  # log median time at each, averaged over shapes with equal FLOPs
    draws: np.ndarray  # (n_boot, len(log_f)) bootstrap draws of log_t
    seed: int = 0


def _rng(seed: int, label: str, shape: str) -> np.random.Generator:
    """A stream per (seed, series, shape), so results do not depend on input order."""
    return np.random.default_rng([seed, zlib.crc32(f"{label}|{shape}".encode())])


def _boot_log_median(samples: Sequence[float], rng: np.random.Generator, n_boot: int) -> np.ndarray:
    s = np.asarray(samples, dtype=float)
    return np.log(np.median(s[rng.integers(0, len(s), (n_boot, len(s)))], axis=1))


def bootstrap_curve(series: Series, metric: str, seed: int, n_boot: int) -> _Curve:
    pooled: dict[str, tuple[float, list[float]]] = {}
    for rec in series.records:
        pooled.setdefault(str(rec.shape), (rec.flops, []))[1].extend(rec.samples_s)
    shapes = {}
    for name, (flops, samples) in pooled.items():
        draws = _boot_log_median(samples, _rng(seed, series.label, name), n_boot)
        shapes[name] = (flops, float(np.log(np.median(samples))), draws, len(samples))
    by_f: dict[float, list[str]] = {}
    for name, (flops, *_rest) in shapes.items():
        by_f.setdefault(flops, []).append(name)
    fs = sorted(by_f)
    log_peak = math.log(series.peak_tflops) if metric == "mfu" else 0.0
    return _Curve(
        label=series.label, log_peak=log_peak, shapes=shapes, log_f=np.log(fs),
        log_t=np.array([np.mean([shapes[n][1] for n in by_f[f]]) for f in fs]),
        draws=np.stack([np.mean([shapes[n][2] for n in by_f[f]], axis=0) for f in fs], axis=1), seed=seed,
    )


def _at(curve: _Curve, shape: str, flops: float) -> tuple[float, np.ndarray, int, str] | None:
    """Log time (estimate, draws) of ``curve`` at a shape: measured, interpolated, or None outside its range.

    Interpolation is a monotone cubic (PCHIP) in (log FLOPs, log time); its
    difference from straight-line interpolation is added to the draws as
    extra normal noise, so a point read off a sparse curve is not over-trusted.
    """
    if shape in curve.shapes:
        _, lt, draws, n = curve.shapes[shape]
        return lt, draws, n, "matched"
    x = math.log(flops)
    if not curve.log_f[0] <= x <= curve.log_f[-1]:
        return None
    if len(curve.log_f) == 1:
        return float(curve.log_t[0]), curve.draws[:, 0], MIN_SAMPLES, "interp"
    lt = float(PchipInterpolator(curve.log_f, curve.log_t)(x))
    draws = PchipInterpolator(curve.log_f, curve.draws, axis=1)(x)
    bias = abs(lt - float(np.interp(x, curve.log_f, curve.log_t)))
    draws = draws + bias * _rng(curve.seed, curve.label, f"interp|{shape}").standard_normal(len(draws))
    return lt, draws, MIN_SAMPLES, "interp"


def _log_metric(log_f: float, log_t: Any, curve: _Curve) -> Any:
    """Log of TFLOP/s, or of MFU when the curve carries a peak."""
    return log_f - log_t - LN_TERA - curve.log_peak


# -- points and their verdicts -----------------------------------------------


@dataclass(frozen=True)
class _Raw:
    flops: float
    shape: str
    log_a: float
    log_b: float
    draws: np.ndarray  # bootstrap draws of log(a/b)
    testable: bool
    method: str
    interpolated: str | None


def raw_points(ca: _Curve, cb: _Curve) -> list[_Raw]:
    names = {**{n: v[0] for n, v in ca.shapes.items()}, **{n: v[0] for n, v in cb.shapes.items()}}
    out = []
    for name, flops in sorted(names.items(), key=lambda kv: (kv[1], kv[0])):
        at_a, at_b = _at(ca, name, flops), _at(cb, name, flops)
        if at_a is None or at_b is None:
            continue
        lf = math.log(flops)
        la, lb = _log_metric(lf, at_a[0], ca), _log_metric(lf, at_b[0], cb)
        draws = _log_metric(lf, at_a[1], ca) - _log_metric(lf, at_b[1], cb)
        interp = ca.label if at_a[3] == "interp" else cb.label if at_b[3] == "interp" else None
        out.append(_Raw(flops, name, la, lb, draws, min(at_a[2], at_b[2]) >= MIN_SAMPLES,
                        "interp" if interp else "matched", interp))
    return out


def _p_value(est: float, draws: np.ndarray, testable: bool) -> float:
    if not testable:
        return 1.0
    se = float(np.std(draws, ddof=1))
    if se == 0.0:
        return 1.0 if est == 0.0 else 0.0
    return float(2 * norm.sf(abs(est) / se))


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (family-wise error control)."""
    p = np.asarray(p_values, dtype=float)
    m = len(p)
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out


def _apply_min_run(verdict: np.ndarray, min_run: int, flops: Sequence[float] | None = None) -> np.ndarray:
    """Demote leads that do not span ``min_run`` consecutive FLOP counts to ambiguous.

    Runs count distinct FLOP counts, not points, so the outcome does not
    depend on how shapes of equal FLOPs (a grid's ``256x512x256`` and
    ``512x256x256``) happen to be ordered: a FLOP count supports a leader when
    any of its points has that leader significant, and a point's lead stands
    when its FLOP count sits in a run of at least ``min_run`` consecutive FLOP
    counts supporting the same leader. Two shapes of one FLOP count are one
    place on the axis, never a run by themselves. Without ``flops`` every
    point is its own FLOP count.
    """
    flops = np.arange(len(verdict), dtype=float) if flops is None else np.asarray(flops, dtype=float)
    positions, where = np.unique(flops, return_inverse=True)
    out = verdict.copy()
    for sign in (1, -1):
        supports = np.zeros(len(positions), dtype=bool)
        supports[where[verdict == sign]] = True
        kept = np.zeros(len(positions), dtype=bool)
        for start, stop in _runs(supports.astype(int)):
            if supports[start] and stop - start >= min_run:
                kept[start:stop] = True
        out[(verdict == sign) & ~kept[where]] = 0
    return out


def _runs(values: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) index ranges of equal consecutive values."""
    runs, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            runs.append((start, i))
            start = i
    return runs


def point_verdicts(raw: Sequence[_Raw], alpha: float, min_run: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per point: p-value, Holm-adjusted p-value, and verdict +1 (a leads), -1 (b leads) or 0."""
    est = np.array([r.log_a - r.log_b for r in raw])
    p = np.array([_p_value(e, r.draws, r.testable) for e, r in zip(est, raw, strict=True)])
    adj = holm(p)
    verdict = np.where(adj < alpha, np.sign(est), 0).astype(int)
    return p, adj, _apply_min_run(verdict, min_run, [r.flops for r in raw])


# -- crossings along log FLOPs -------------------------------------------------


def _crossings(log_f: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Log FLOPs where piecewise-linear ``values`` (last axis along ``log_f``) changes sign; NaN-padded."""
    v0, v1 = values[..., :-1], values[..., 1:]
    change = (np.sign(v0) != np.sign(v1)) & (v0 != v1)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = log_f[:-1] + (log_f[1:] - log_f[:-1]) * v0 / (v0 - v1)
    return np.where(change, x, np.nan)


def crossing_point(log_f: np.ndarray, values: np.ndarray) -> float:
    """Median zero crossing of one curve; midpoint of the range when it has none."""
    xs = _crossings(log_f, values)
    xs = xs[~np.isnan(xs)]
    return float(np.median(xs)) if len(xs) else float((log_f[0] + log_f[-1]) / 2)


def lead_runs(verdict: np.ndarray) -> list[tuple[int, int, int]]:
    """(first index, last index, sign) of the runs with a leader."""
    return [(s, e - 1, int(verdict[s])) for s, e in _runs(verdict) if verdict[s] != 0]


def data_crossovers(raw: Sequence[_Raw], verdict: np.ndarray, a: str, b: str) -> list[Crossover]:
    log_f = np.log([r.flops for r in raw])
    est = np.array([r.log_a - r.log_b for r in raw])
    names = {1: a, -1: b}
    out = []
    leads = lead_runs(verdict)
    for (_, i, s0), (j, _, s1) in zip(leads, leads[1:], strict=False):
        if s0 != s1:
            x = crossing_point(log_f[i:j + 1], est[i:j + 1])
            out.append(Crossover(math.exp(x), raw[i].flops, raw[j].flops, names[s0], names[s1], "data"))
    return out


def tile_segments(raw: Sequence[_Raw], verdict: np.ndarray, crossovers: Sequence[Crossover],
              a: str, b: str) -> list[Segment]:
    runs = _runs(verdict)
    flops = [r.flops for r in raw]
    bounds = [flops[0]]
    for (_, stop), (start, _) in zip(runs, runs[1:], strict=False):
        direct = verdict[stop - 1] * verdict[start] == -1
        cross = [c.flops for c in crossovers if flops[stop - 1] <= c.flops <= flops[start]]
        bounds.append(cross[0] if direct and cross else math.sqrt(flops[stop - 1] * flops[start]))
    bounds.append(flops[-1])
    names = {1: a, -1: b, 0: None}
    segs = []
    for k, (start, stop) in enumerate(runs):
        pts = raw[start:stop]
        segs.append(Segment(
            start_flops=bounds[k], end_flops=bounds[k + 1], leader=names[int(verdict[start])],
            ratio=float(np.exp(np.median([p.log_a - p.log_b for p in pts]))),
            diff=float(np.median([math.exp(p.log_a) - math.exp(p.log_b) for p in pts])), n_points=stop - start,
        ))
    return segs


def compare_points(raw: Sequence[_Raw], p: np.ndarray, adj: np.ndarray, verdict: np.ndarray, a: str, b: str,
            alpha: float) -> list[ComparePoint]:
    names = {1: a, -1: b, 0: None}
    out = []
    for r, pv, pa, v in zip(raw, p, adj, verdict, strict=True):
        lo, hi = np.quantile(r.draws, [alpha / 2, 1 - alpha / 2])
        out.append(ComparePoint(
            flops=r.flops, shape=r.shape, a_value=math.exp(r.log_a), b_value=math.exp(r.log_b),
            ratio=math.exp(r.log_a - r.log_b), ratio_low=math.exp(lo), ratio_high=math.exp(hi),
            p_value=float(pv), p_adjusted=float(pa), leader=names[int(v)], method=r.method,
            interpolated=r.interpolated,
        ))
    return out


# -- crossovers implied by the fits --------------------------------------------


def bytes_along(series: Sequence[Series], log_f: np.ndarray) -> np.ndarray:
    """Bytes as a function of FLOPs along the measured shapes (log-log interpolation)."""
    pairs: dict[float, list[float]] = {}
    for s in series:
        for r in s.records:
            pairs.setdefault(math.log(r.flops), []).append(math.log(r.bytes))
    xs = sorted(pairs)
    return np.exp(np.interp(log_f, xs, [np.mean(pairs[x]) for x in xs]))
