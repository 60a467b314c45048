"""Compare two series along FLOPs: who leads where, and where the lead changes.

For a pair of series with the same dtype and mode, every shape either series
measured becomes a *point*: the ratio a/b of the metric (MFU, or TFLOP/s with
``metric="tflops"``) at that shape. Shapes both measured are matched exactly;
a shape only one measured is compared against the other series interpolated
linearly in (log FLOPs, log time) between its neighbouring measurements
(``method="interp"``), never extrapolated.

Statistics, per pair:

* every median comes with a seeded bootstrap of its raw ``samples_s``; the
  ratio's interval is the percentile interval of the bootstrapped ratio, and
  its p-value (H0: ratio = 1) a normal test on the bootstrap standard error of
  the log ratio;
* a point has a *leader* only if its p-value survives Holm's step-down
  correction over all points of the pair (family-wise error ``alpha``) **and**
  it sits in a run of at least ``min_run`` (default 2) consecutive FLOP
  counts with the same leader (shapes of equal FLOPs are one place on the
  axis, so their order never matters); everything else is *ambiguous*
  (leader None);
* segments are the maximal runs of points with one verdict, tiled along FLOPs;
  a crossover is a change of leader (possibly across an ambiguous gap), placed
  where the log ratio crosses zero and bracketed by the bootstrap;
* the *summary* (:class:`LeadSummary`) condenses the same per-point verdicts
  into the share of the shared FLOP range, on a log10 scale, where each series
  leads and where neither does, plus the longest lead: readable however many
  short segments a non-square grid produces;
* with fits of both series (:mod:`mfu_sweep.fit`) the fitted curves give
  crossovers too (``method="fit"``), from a simultaneous bootstrap band; when
  data and fit crossovers disagree beyond their intervals a note says so.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import Any

import numpy as np
from scipy.interpolate import PchipInterpolator
from scipy.stats import norm

from mfu_sweep.fit import RooflineFit, fit_series, why_unfittable
from mfu_sweep.results import Sweep
from mfu_sweep.series import Series, SeriesKey, group_series

METRICS = ("mfu", "tflops")
MIN_SAMPLES = 3
FIT_GRID = 256
LN_TERA = 12 * math.log(10)
SI = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


class CompareError(ValueError):
    """Two series cannot be compared; the message says why."""


@dataclass(frozen=True)
class ComparePoint:
    """The ratio a/b of the metric at one shape.

    ``method`` is ``"matched"`` when both series measured the shape, else
    ``"interp"`` and ``interpolated`` names the series read off its
    log-log interpolation. ``ratio_low``/``ratio_high`` are the per-point
    interval at ``1 - alpha``; ``p_adjusted`` is Holm-adjusted over the pair.
    """

    flops: float
    shape: str
    a_value: float
    b_value: float
    ratio: float
    ratio_low: float
    ratio_high: float
    p_value: float
    p_adjusted: float
    leader: str | None
    method: str
    interpolated: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Segment:
    """A FLOP range with one verdict; ``leader`` None means ambiguous.

    ``ratio`` is the median ratio a/b of its points, ``diff`` the median of
    ``a - b`` in metric units (MFU as a fraction, or TFLOP/s).
    """

    start_flops: float
    end_flops: float
    leader: str | None
    ratio: float
    diff: float
    n_points: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Crossover:
    """Where the leader changes from ``from_label`` to ``to_label``, with an interval."""

    flops: float
    low_flops: float
    high_flops: float
    from_label: str
    to_label: str
    method: str

    def to_json(self) -> dict[str, Any]:
        return {"flops": self.flops, "low_flops": self.low_flops, "high_flops": self.high_flops,
                "from": self.from_label, "to": self.to_label, "method": self.method}


@dataclass(frozen=True)
class LeadSummary:
    """How much of the shared FLOP range each verdict covers (log10-FLOP scale), and the longest lead.

    Uses the per-point verdicts of the comparison as they are (Holm and
    ``min_run`` already applied), no new statistics. Each point speaks for the
    log10-FLOP interval reaching halfway to the neighbouring FLOP counts (the
    first and last reach only the ends of the range); points with the same
    FLOP count share their interval equally. ``share_a``, ``share_b`` and
    ``share_ambiguous`` are the fractions of ``[low_flops, high_flops]`` (in
    log10 FLOPs) held by points where ``a`` leads, ``b`` leads, or neither;
    they add up to 1. When the range is a single FLOP count, each point counts
    equally. ``longest`` is the lead segment widest in log FLOPs (ties: the
    one with more points, then the first), or None when nobody leads.
    """

    low_flops: float
    high_flops: float
    share_a: float
    share_b: float
    share_ambiguous: float
    longest: Segment | None

    def to_json(self) -> dict[str, Any]:
        return {"low_flops": self.low_flops, "high_flops": self.high_flops, "share_a": self.share_a,
                "share_b": self.share_b, "share_ambiguous": self.share_ambiguous,
                "longest_lead": self.longest.to_json() if self.longest else None}


def point_weights(flops: Sequence[float]) -> np.ndarray:
    """The share of the log10-FLOP range ``[min(flops), max(flops)]`` each point speaks for (sums to 1).

    Each distinct FLOP count owns the interval halfway to its neighbours
    (clipped to the range); points with equal FLOP counts split it equally.
    """
    f = np.asarray(flops, dtype=float)
    levels, inverse, counts = np.unique(f, return_inverse=True, return_counts=True)
    if len(levels) == 1:
        return np.full(len(f), 1.0 / len(f))
    x = np.log10(levels)
    edges = np.concatenate(([x[0]], (x[:-1] + x[1:]) / 2, [x[-1]]))
    return (np.diff(edges) / (x[-1] - x[0]) / counts)[inverse]


@dataclass(frozen=True)
class Comparison:
    """The comparison of series ``a`` and ``b`` (same dtype and mode) along FLOPs."""

    a: str
    b: str
    dtype: str
    mode: str
    metric: str
    points: tuple[ComparePoint, ...]
    segments: tuple[Segment, ...]
    crossovers: tuple[Crossover, ...]
    notes: tuple[str, ...] = ()
    alpha: float = 0.05
    n_boot: int = 2000
    seed: int = 0
    min_run: int = 2

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a, "b": self.b, "dtype": self.dtype, "mode": self.mode, "metric": self.metric,
            "alpha": self.alpha, "n_boot": self.n_boot, "seed": self.seed, "min_run": self.min_run,
            "summary": self._summary_json(),
            "segments": [s.to_json() for s in self.segments],
            "crossovers": [c.to_json() for c in self.crossovers],
            "points": [p.to_json() for p in self.points],
            "notes": list(self.notes), "sentence": self.sentence(),
        }

    def sentence(self) -> str:
        """One sentence saying who leads where, e.g. "A leads from 1.1 GFLOP to 96 GFLOP (MFU +6.2 points), ..."."""
        head = f"{self.a} vs {self.b} ({self.dtype}, {self.mode}, {metric_name(self.metric)}): "
        if not self.segments:
            return head + "no shapes in a common FLOP range."
        n = len(self.segments)
        parts = [_segment_phrase(s, i, n, self.a, self.b, self.metric) for i, s in enumerate(self.segments)]
        return head + ", ".join(parts) + "."

    def lead_summary(self) -> LeadSummary | None:
        """Shares of the shared FLOP range per verdict and the longest lead; None without points."""
        if not self.points:
            return None
        weights = point_weights([p.flops for p in self.points])
        # divided by the same sum, a verdict held by every point gets exactly 1
        share = {name: float(weights[[p.leader == name for p in self.points]].sum() / weights.sum())
                 for name in (self.a, self.b, None)}
        leads = [s for s in self.segments if s.leader is not None]
        longest = max(leads, key=lambda s: (math.log(s.end_flops / s.start_flops), s.n_points), default=None)
        return LeadSummary(low_flops=self.points[0].flops, high_flops=self.points[-1].flops, share_a=share[self.a],
                           share_b=share[self.b], share_ambiguous=share[None], longest=longest)

    def summary(self) -> str:
        """One line, however fragmented the segments, from :meth:`lead_summary`.

        E.g. "A leads over 85% of the shared FLOP range (log scale, 1 GFLOP to 1 TFLOP), B over 5%,
        ambiguous over 10%; longest lead: A from 3 GFLOP to 900 GFLOP (MFU +6.2 points, x1.10)."
        """
        s = self.lead_summary()
        if s is None:
            return "no shapes in a common FLOP range."
        lo, hi = format_flops(s.low_flops), format_flops(s.high_flops)
        where = f"log scale, {lo} to {hi}" if s.low_flops < s.high_flops else f"all at {lo}, shares by shape"
        text = (f"{self.a} leads over {_share(s.share_a)} of the shared FLOP range ({where}), "
                f"{self.b} over {_share(s.share_b)}, ambiguous over {_share(s.share_ambiguous)}; ")
        if s.longest is None:
            return text + "no lead anywhere."
        return (text + f"longest lead: {s.longest.leader} {_span(s.longest)} "
                f"({_effect(s.longest, self.a, self.metric)}).")

    def _summary_json(self) -> dict[str, Any]:
        s = self.lead_summary()
        numbers = s.to_json() if s else dict.fromkeys(
            ("low_flops", "high_flops", "share_a", "share_b", "share_ambiguous", "longest_lead"))
        return {"text": self.summary(), **numbers}


def metric_name(metric: str) -> str:
    return "MFU" if metric == "mfu" else "TFLOP/s"


def format_flops(value: float) -> str:
    """``1.1e9 -> "1.1 GFLOP"``: two significant digits, SI prefix, no exponent."""
    scale, prefix = next(((s, p) for s, p in SI if abs(value) >= s * 0.9995), SI[-1])
    v = float(f"{value / scale:.2g}")
    text = f"{v:.0f}" if v >= 10 else f"{v:g}"
    return f"{text} {prefix}FLOP"


def _effect(seg: Segment, a: str, metric: str) -> str:
    sign = 1.0 if seg.leader == a else -1.0
    ratio = seg.ratio if seg.leader == a else 1.0 / seg.ratio
    if metric == "mfu":
        return f"MFU {sign * seg.diff * 100:+.1f} points, x{ratio:.2f}"
    return f"{(ratio - 1) * 100:+.0f}% TFLOP/s"


def _share(fraction: float) -> str:
    """``0.853 -> "85%"``; a share that is not exactly 0 or 1 never rounds to "0%" or "100%"."""
    pct = round(fraction * 100)
    if 0 < fraction and pct == 0:
        return "<1%"
    if fraction < 1 and pct == 100:
        return ">99%"
    return f"{pct}%"


def _span(seg: Segment) -> str:
    lo, hi = format_flops(seg.start_flops), format_flops(seg.end_flops)
    return f"at {lo}" if lo == hi else f"from {lo} to {hi}"


def _segment_phrase(seg: Segment, i: int, n: int, a: str, b: str, metric: str) -> str:
    lo, hi = format_flops(seg.start_flops), format_flops(seg.end_flops)
    span = _span(seg)
    if seg.leader is not None:
        return f"{seg.leader} leads {span} ({_effect(seg, a, metric)})"
    if n == 1:
        return f"no confident leader {span} (ambiguous throughout)"
    if i == 0:
        return f"ambiguous below {hi}"
    if i == n - 1:
        return f"ambiguous above {lo}"
    return f"ambiguous {span}"


# -- bootstrap of per-shape medians ------------------------------------------


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


def _curve(series: Series, metric: str, seed: int, n_boot: int) -> _Curve:
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


def _raw_points(ca: _Curve, cb: _Curve) -> list[_Raw]:
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


def _verdicts(raw: Sequence[_Raw], alpha: float, min_run: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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


def _crossing(log_f: np.ndarray, values: np.ndarray) -> float:
    """Median zero crossing of one curve; midpoint of the range when it has none."""
    xs = _crossings(log_f, values)
    xs = xs[~np.isnan(xs)]
    return float(np.median(xs)) if len(xs) else float((log_f[0] + log_f[-1]) / 2)


def _lead_runs(verdict: np.ndarray) -> list[tuple[int, int, int]]:
    """(first index, last index, sign) of the runs with a leader."""
    return [(s, e - 1, int(verdict[s])) for s, e in _runs(verdict) if verdict[s] != 0]


def _data_crossovers(raw: Sequence[_Raw], verdict: np.ndarray, a: str, b: str) -> list[Crossover]:
    log_f = np.log([r.flops for r in raw])
    est = np.array([r.log_a - r.log_b for r in raw])
    names = {1: a, -1: b}
    out = []
    leads = _lead_runs(verdict)
    for (_, i, s0), (j, _, s1) in zip(leads, leads[1:], strict=False):
        if s0 != s1:
            x = _crossing(log_f[i:j + 1], est[i:j + 1])
            out.append(Crossover(math.exp(x), raw[i].flops, raw[j].flops, names[s0], names[s1], "data"))
    return out


def _segments(raw: Sequence[_Raw], verdict: np.ndarray, crossovers: Sequence[Crossover],
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


def _points(raw: Sequence[_Raw], p: np.ndarray, adj: np.ndarray, verdict: np.ndarray, a: str, b: str,
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


def _bytes_along(series: Sequence[Series], log_f: np.ndarray) -> np.ndarray:
    """Bytes as a function of FLOPs along the measured shapes (log-log interpolation)."""
    pairs: dict[float, list[float]] = {}
    for s in series:
        for r in s.records:
            pairs.setdefault(math.log(r.flops), []).append(math.log(r.bytes))
    xs = sorted(pairs)
    return np.exp(np.interp(log_f, xs, [np.mean(pairs[x]) for x in xs]))


def _fit_crossovers(fa: RooflineFit, fb: RooflineFit, sa: Series, sb: Series, metric: str, lo: float, hi: float,
                    alpha: float) -> list[Crossover]:
    log_f = np.linspace(math.log(lo), math.log(hi), FIT_GRID)
    f, nbytes = np.exp(log_f), _bytes_along([sa, sb], log_f)
    # log(MFU_a / MFU_b) = log(t_b / t_a) + log(peak_b / peak_a)
    shift = math.log(sb.peak_tflops) - math.log(sa.peak_tflops) if metric == "mfu" else 0.0
    central = np.log(fb.predict_time(f, nbytes)) - np.log(fa.predict_time(f, nbytes)) + shift
    n = min(len(fa.boot), len(fb.boot))
    if n < 2:
        return []
    draws = (np.log(fb.predict_time_draws(f, nbytes)[:n]) - np.log(fa.predict_time_draws(f, nbytes)[:n]) + shift)
    se = np.maximum(np.std(draws, axis=0, ddof=1), 1e-12)
    crit = float(np.quantile(np.max(np.abs(draws - central) / se, axis=1), 1 - alpha))
    verdict = np.where(central - crit * se > 0, 1, np.where(central + crit * se < 0, -1, 0))
    names = {1: sa.label, -1: sb.label}
    out = []
    leads = _lead_runs(verdict)
    for (_, i, s0), (j, _, s1) in zip(leads, leads[1:], strict=False):
        if s0 != s1:
            x = _crossing(log_f[i:j + 1], central[i:j + 1])
            out.append(Crossover(math.exp(x), float(f[i]), float(f[j]), names[s0], names[s1], "fit"))
    return out


def _agreement(data: Sequence[Crossover], fitted: Sequence[Crossover]) -> list[str]:
    def show(cs: Sequence[Crossover]) -> str:
        return ", ".join(f"{c.from_label}->{c.to_label} at {format_flops(c.flops)}" for c in cs) or "none"

    if [(c.from_label, c.to_label) for c in data] != [(c.from_label, c.to_label) for c in fitted]:
        return [f"data and fit disagree on the crossovers: data finds {show(data)}; fit finds {show(fitted)}"]
    notes = []
    for d, f in zip(data, fitted, strict=True):
        if d.high_flops < f.low_flops or f.high_flops < d.low_flops:
            notes.append(
                f"data and fit disagree on the {d.from_label}->{d.to_label} crossover beyond their intervals: "
                f"data {format_flops(d.flops)} [{format_flops(d.low_flops)}, {format_flops(d.high_flops)}], "
                f"fit {format_flops(f.flops)} [{format_flops(f.low_flops)}, {format_flops(f.high_flops)}]"
            )
    return notes


# -- public API ----------------------------------------------------------------


def _check_pair(a: Series, b: Series, metric: str) -> None:
    if metric not in METRICS:
        raise CompareError(f"metric={metric!r} must be one of {', '.join(METRICS)}")
    if (a.dtype, a.mode) != (b.dtype, b.mode):
        raise CompareError(f"cannot compare {a.key} with {b.key}: dtype and mode must match")
    if a.label == b.label:
        raise CompareError(f"cannot compare series {a.key} with itself")
    for s in (a, b):
        if metric == "mfu" and s.peak_tflops is None:
            raise CompareError(f"series {s.key} has no peak for {s.dtype}, so its MFU is undefined; "
                               f"use --metric tflops (metric='tflops')")


def _peak_notes(a: Series, b: Series, metric: str) -> list[str]:
    if metric != "mfu":
        return []
    return [f"MFU of {s.label} is against an estimated peak" for s in (a, b) if s.peak.estimated]


def _fits(a: Series, b: Series, fit_a: RooflineFit | None, fit_b: RooflineFit | None, use_fit: bool,
          seed: int, fit_n_boot: int) -> tuple[RooflineFit | None, RooflineFit | None, list[str]]:
    if not use_fit:
        return None, None, []
    fit_a = fit_a or fit_series(a, seed=seed, n_boot=fit_n_boot)
    fit_b = fit_b or fit_series(b, seed=seed, n_boot=fit_n_boot)
    notes = [f"no fit crossovers: {why_unfittable(s) or f'no fit for {s.key}'}"
             for s, f in ((a, fit_a), (b, fit_b)) if f is None]
    return fit_a, fit_b, notes


def compare_series(a: Series, b: Series, metric: str = "mfu", *, seed: int = 0, n_boot: int = 2000,
                   alpha: float = 0.05, min_run: int = 2, fit_a: RooflineFit | None = None,
                   fit_b: RooflineFit | None = None, use_fit: bool = True, fit_n_boot: int = 200) -> Comparison:
    """Compare series ``a`` and ``b`` (same dtype and mode) along FLOPs.

    Parameters
    ----------
    a, b:
        Series from :func:`mfu_sweep.series.group_series`; ratios are a/b.
    metric:
        ``"mfu"`` (needs a peak for both) or ``"tflops"``.
    seed, n_boot:
        Seed and size of the bootstrap of the per-shape medians.
    alpha:
        Family-wise error rate of the per-pair leader calls, and interval level ``1 - alpha``.
    min_run:
        Fewest consecutive significant points that make a lead.
    fit_a, fit_b, use_fit, fit_n_boot:
        Fits for the ``"fit"`` crossovers: given, or fitted here (with ``fit_n_boot``
        resamples) unless ``use_fit`` is False.

    Returns
    -------
    Comparison
        Points, segments, crossovers (data, then fit) and notes.
    """
    _check_pair(a, b, metric)
    if n_boot < 2 or min_run < 1 or not 0 < alpha < 1:
        raise CompareError(f"need n_boot >= 2, min_run >= 1 and 0 < alpha < 1 (got {n_boot}, {min_run}, {alpha})")
    ca, cb = _curve(a, metric, seed, n_boot), _curve(b, metric, seed, n_boot)
    raw = _raw_points(ca, cb)
    notes = _peak_notes(a, b, metric)
    fa, fb, fit_notes = _fits(a, b, fit_a, fit_b, use_fit, seed, fit_n_boot)
    common = dict(a=a.label, b=b.label, dtype=a.dtype, mode=a.mode, metric=metric, alpha=alpha, n_boot=n_boot,
                  seed=seed, min_run=min_run)
    if not raw:
        return Comparison(points=(), segments=(), crossovers=(),
                          notes=(*notes, "the two series share no FLOP range"), **common)
    p, adj, verdict = _verdicts(raw, alpha, min_run)
    data = _data_crossovers(raw, verdict, a.label, b.label)
    fitted = (_fit_crossovers(fa, fb, a, b, metric, raw[0].flops, raw[-1].flops, alpha)
              if fa is not None and fb is not None else [])
    if fa is not None and fb is not None:
        notes += _agreement(data, fitted)
    untestable = sum(not r.testable for r in raw)
    if untestable:
        notes.append(f"{untestable} point(s) with fewer than {MIN_SAMPLES} samples are never called")
    return Comparison(
        points=tuple(_points(raw, p, adj, verdict, a.label, b.label, alpha)),
        segments=tuple(_segments(raw, verdict, data, a.label, b.label)),
        crossovers=tuple(data + fitted), notes=tuple(notes + fit_notes), **common,
    )


def _pairs(series: Mapping[SeriesKey, Series], a: str | None, b: str | None) -> list[tuple[SeriesKey, SeriesKey]]:
    labels = sorted({k.label for k in series})
    for name in (a, b):
        if name is not None and name not in labels:
            raise CompareError(f"no series labelled {name!r} (have: {', '.join(labels)})")
    if a is None and b is not None:
        a, b = b, None
    groups: dict[tuple[str, str], list[SeriesKey]] = {}
    for k in series:
        groups.setdefault((k.dtype, k.mode), []).append(k)
    pairs = []
    for keys in groups.values():
        for x, y in combinations(sorted(keys), 2):
            if a is not None and a not in (x.label, y.label):
                continue
            if b is not None and b not in (x.label, y.label):
                continue
            pairs.append((y, x) if y.label == a else (x, y))
    return sorted(pairs)


def _no_pairs_message(series: Mapping[SeriesKey, Series], a: str | None, b: str | None) -> str:
    have = "; ".join(str(k) for k in series) or "none"
    if a and b:
        da = sorted(f"{k.dtype} {k.mode}" for k in series if k.label == a)
        db = sorted(f"{k.dtype} {k.mode}" for k in series if k.label == b)
        return (f"series {a!r} ({', '.join(da)}) and {b!r} ({', '.join(db)}) share no dtype and mode; "
                f"nothing to compare")
    return f"need two series with the same dtype and mode to compare; have: {have}"


def parse_selector(text: str) -> tuple[str, str | None, str | None]:
    """``LABEL``, ``LABEL/DTYPE`` or ``LABEL/DTYPE/MODE`` -> (label, dtype or None, mode or None)."""
    parts = text.split("/")
    if len(parts) > 3 or not all(parts):
        raise CompareError(f"series selector {text!r} must be LABEL, LABEL/DTYPE or LABEL/DTYPE/MODE")
    label, dtype, mode = (*parts, None, None)[:3]
    return label, dtype, mode


def _select(series: Mapping[SeriesKey, Series], text: str, other: tuple[str | None, str | None]) -> Series:
    label, dtype, mode = parse_selector(text)
    dtype, mode = dtype or other[0], mode or other[1]
    found = [s for k, s in series.items()
             if k.label == label and dtype in (None, k.dtype) and mode in (None, k.mode)]
    if len(found) != 1:
        have = ", ".join(f"{k.label}/{k.dtype}/{k.mode}" for k in series)
        what = "no series" if not found else f"{len(found)} series"
        raise CompareError(f"{what} match {text!r}; be explicit as LABEL/DTYPE/MODE (have: {have})")
    return found[0]


def _as_view(s: Series, differ_dtype: bool, differ_mode: bool, view: tuple[str, str]) -> Series:
    """Relabel one side of a cross comparison: the label names what differs, dtype/mode name the pair."""
    suffix = " ".join(x for x, d in ((s.dtype, differ_dtype), (s.mode, differ_mode)) if d)
    peak = s.peak
    if differ_dtype:
        own = s.peak.for_dtype(s.dtype)
        peak = replace(s.peak, tflops={view[0]: own} if own else {})
    return replace(s, key=SeriesKey(f"{s.label} {suffix}", view[0], view[1]), peak=peak)


def compare_across(sweeps: Iterable[Sweep], a: str, b: str, metric: str = "mfu", *,
                   fits: Mapping[SeriesKey, RooflineFit | None] | None = None, **kw: Any) -> Comparison:
    """Compare two series that differ in dtype and/or mode, e.g. ``cpu/fp32/eager`` vs ``cpu/fp32/compile``.

    The same machinery as :func:`compare_series` answers "where does compiling pay?" or
    "where does bf16 beat fp32?"; MFU compares each side against its own dtype's peak.
    ``fits`` (keyed by the series' own keys) are reused instead of fitting again.
    """
    series = group_series(sweeps)
    sa = _select(series, a, (None, None))
    sb = _select(series, b, (sa.dtype if "/" not in b else None, sa.mode if b.count("/") < 2 else None))
    if fits:
        kw = {"fit_a": fits.get(sa.key), "fit_b": fits.get(sb.key), **kw}
    differ_dtype, differ_mode = sa.dtype != sb.dtype, sa.mode != sb.mode
    if not (differ_dtype or differ_mode):
        return compare_series(sa, sb, metric, **kw)
    view = (f"{sa.dtype}|{sb.dtype}" if differ_dtype else sa.dtype, f"{sa.mode}|{sb.mode}" if differ_mode else sa.mode)
    va, vb = _as_view(sa, differ_dtype, differ_mode, view), _as_view(sb, differ_dtype, differ_mode, view)
    _check_pair(va, vb, metric)
    return compare_series(va, vb, metric, **kw)


OnError = Callable[[CompareError], None]


def _comparable(a: Series, b: Series, metric: str, on_error: OnError | None) -> bool:
    try:
        _check_pair(a, b, metric)
    except CompareError as exc:
        if on_error is None:
            raise
        on_error(exc)
        return False
    return True


def _fits_for(series: Mapping[SeriesKey, Series], keys: Iterable[SeriesKey],
              given: Mapping[SeriesKey, RooflineFit | None], kw: Mapping[str, Any]
              ) -> dict[SeriesKey, RooflineFit | None]:
    """``given``, plus a fit of every series in ``keys`` it lacks (none when ``use_fit=False``)."""
    fits = dict(given)
    if kw.get("use_fit", True):
        for key in sorted(set(keys) - set(fits)):
            fits[key] = fit_series(series[key], seed=kw.get("seed", 0), n_boot=kw.get("fit_n_boot", 200))
    return fits


def compare_groups(series: Mapping[SeriesKey, Series], metric: str = "mfu", a: str | None = None,
                   b: str | None = None, *, fits: Mapping[SeriesKey, RooflineFit | None] | None = None,
                   on_error: OnError | None = None, **kw: Any) -> list[Comparison]:
    """:func:`compare_all` for series already grouped (``mfu_sweep.series.group_series``).

    Pairs come sorted by (first key, second key); ``a`` and ``b`` pick pairs by label
    (``a`` becomes the first series of its pairs). See :func:`compare_all` for
    ``fits``, ``on_error`` and the other keyword arguments.
    """
    pairs = _pairs(series, a, b)
    if not pairs and on_error is None:
        raise CompareError(_no_pairs_message(series, a, b))
    pairs = [(x, y) for x, y in pairs if _comparable(series[x], series[y], metric, on_error)]
    fits = _fits_for(series, {k for pair in pairs for k in pair}, fits or {}, kw)
    out = []
    for x, y in pairs:
        try:
            out.append(compare_series(series[x], series[y], metric, fit_a=fits.get(x), fit_b=fits.get(y), **kw))
        except CompareError as exc:
            if on_error is None:
                raise
            on_error(exc)
    return out


def compare_all(sweeps: Iterable[Sweep], metric: str = "mfu", a: str | None = None, b: str | None = None, *,
                fits: Mapping[SeriesKey, RooflineFit | None] | None = None, on_error: OnError | None = None,
                **kw: Any) -> list[Comparison]:
    """Compare every pair of series with the same dtype and mode (or only the pairs with ``a`` and/or ``b``).

    Parameters
    ----------
    sweeps:
        From ``mfu_sweep.results.load_sweeps``.
    metric, a, b:
        ``"mfu"`` or ``"tflops"``; labels that select pairs, or ``LABEL/DTYPE[/MODE]``
        selectors (both needed) to compare across dtypes or modes (:func:`compare_across`).
    fits:
        ``SeriesKey -> fit`` to reuse (e.g. from ``mfu_sweep.fit.fit_groups``); each
        series not in it is fitted once here (unless ``use_fit=False``).
    on_error:
        Called with the :class:`CompareError` of each pair that cannot be compared
        (e.g. MFU without a peak), which is then skipped, like ``os.walk``'s
        ``onerror``; having no pair at all then gives ``[]``. By default the first
        such error is raised, before anything is fitted. Errors of selectors, and
        of pairs named by ``LABEL/DTYPE[/MODE]``, are always raised.
    **kw:
        Passed to :func:`compare_series` (``seed``, ``n_boot``, ``alpha``, ``min_run``,
        ``use_fit``, ``fit_n_boot``).

    Raises
    ------
    CompareError
        When a label is unknown, no pair exists, or MFU is asked for a series without a peak
        (the last two only without ``on_error``).
    """
    if any(x is not None and "/" in x for x in (a, b)):
        if a is None or b is None:
            raise CompareError("a series selector with /DTYPE or /MODE needs both --a and --b")
        return [compare_across(sweeps, a, b, metric, fits=fits, **kw)]
    return compare_groups(group_series(sweeps), metric, a, b, fits=fits, on_error=on_error, **kw)
