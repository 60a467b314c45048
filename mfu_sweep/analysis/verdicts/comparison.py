"""What a comparison of two series is: points, segments, crossovers, the lead summary, and their sentences."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mfu_sweep.analysis.verdicts.bands import BAND_TEST, MIN_BAND_SHAPES, Band, RunClaim, run_longest
from mfu_sweep.analysis.verdicts.evidence import NOT_MEASURED
from mfu_sweep.analysis.verdicts.margin import DEFAULT_MARGIN, margin_words
from mfu_sweep.util.text import format_flops

METRICS = ("mfu", "tflops")
FIT_GRID = 256
LN_TERA = 12 * math.log(10)


class CompareError(ValueError):
    """Two series cannot be compared; the message says why."""


class NoSharedShapesError(CompareError):
    """Two series share no shape either side can be compared at: no shape both measured, and none of one side's
    shapes among the other side's closely enough to predict its value there (the message says what to sweep)."""


@dataclass(frozen=True)
class ComparePoint:
    """The ratio a/b of the metric at one shape: the per-shape detail of a comparison.

    ``method`` is ``"matched"`` when both series measured the shape, else
    ``"interp"`` and ``interpolated`` names the series read off its
    log-log interpolation. ``ratio`` is the measured ratio (geometric mean over
    passes) and ``ratio_low``/``ratio_high`` its interval at ``1 - alpha``
    against run-to-run variation (``runs``) or the scatter of the shapes of its
    FLOP band (``shapes``); ``verdict_method`` names which, and ``p_value`` is
    that shape's own two-sided test against the same noise (detail only).
    ``a_value`` and ``b_value`` are each side's metric at its median time over passes (the value the report
    and figures show for the shape); ``ratio`` and its interval come from the mean over passes of the log
    ratio, the statistic the verdicts test, so ``ratio`` can differ slightly from ``a_value / b_value``.

    The verdict is per FLOP band (:mod:`mfu_sweep.analysis.verdicts.bands`): ``band``
    indexes :attr:`Comparison.bands`, ``trend_ratio`` is the band's
    Hodges-Lehmann ratio, ``p_adjusted`` the band's Holm-adjusted p-value and
    ``leader`` the leader of the segment the shape lies in; ``same`` True when
    that segment is "the same within the margin".
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
    verdict_method: str = "shapes"
    trend_ratio: float | None = None
    band: int | None = None
    same: bool = False

    def to_json(self) -> dict[str, Any]:
        # an uncalled point's interval is unbounded: null in JSON, which has no infinity
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Segment:
    """A FLOP range with one verdict; ``leader`` None means the same within the margin (``same`` True) or
    ambiguous.

    ``ratio`` is the Hodges-Lehmann ratio a/b of its bands (the median over
    its lead bands, weighted by shapes), ``diff`` the median of the
    matching ``a - b`` in metric units (MFU as a fraction, or TFLOP/s);
    ``method`` the evidence behind the verdict (``runs`` or ``shapes``); ``together`` True when some band of
    the segment is not called alone and shows the conclusion of a run of adjacent bands taken together, and
    ``alone`` True when some band of it is called alone ("partly taken together" when both); ``against`` says how
    many of a lead's shapes go the other way when under 2/3 favour the leader ("53 of 107 shapes the other way").
    """

    start_flops: float
    end_flops: float
    leader: str | None
    ratio: float
    diff: float
    n_points: int
    method: str = "shapes"
    same: bool = False
    together: bool = False
    alone: bool = True
    against: str = ""

    @property
    def verdict(self) -> str:
        """``"lead"``, ``"same"`` or ``"ambiguous"``."""
        return "lead" if self.leader is not None else "same" if self.same else "ambiguous"

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "verdict": self.verdict}


@dataclass(frozen=True)
class Crossover:
    """Where the leader changes from ``from_label`` to ``to_label``, with an interval.

    ``method`` is the evidence it rests on: ``runs`` or ``shapes`` (the data
    verdicts) or ``fit`` (a crossing of the fitted rooflines; on its own only
    where the data do not support it, ``reason`` saying why). A data crossover
    is the one claim of its change of leader: ``fits`` holds the fits'
    crossings of that change merged into it, each ``(flops, low, high)`` (empty:
    the fits do not cross there; None: no fits were compared), while its interval
    stays the data's, the verdict's.
    """

    flops: float
    low_flops: float
    high_flops: float
    from_label: str
    to_label: str
    method: str
    reason: str = ""
    fits: tuple[tuple[float, float, float], ...] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"flops": self.flops, "low_flops": self.low_flops, "high_flops": self.high_flops,
                               "from": self.from_label, "to": self.to_label, "method": self.method}
        if self.fits is not None:
            out["fits"] = [{"flops": f, "low_flops": lo, "high_flops": hi} for f, lo, hi in self.fits]
        return {**out, "reason": self.reason} if self.reason else out

    def text(self, arrow: str = "->") -> str:
        """The one line of a change of leader, both estimates shown: ``"a -> b at 32 GFLOP [4.5 GFLOP, 64 GFLOP]
        (shapes; the fits cross at 4.2 GFLOP and 25 GFLOP, outside this interval)"``."""
        lo, hi = self.low_flops, self.high_flops
        head = (f"{self.from_label} {arrow} {self.to_label} at {format_flops(self.flops)} "
                f"[{format_flops(lo)}, {format_flops(hi)}]")
        if self.fits is None:
            return f"{head} ({self.method})"
        if not self.fits:
            return f"{head} ({self.method}; the fits do not cross there)"
        where = " and ".join(dict.fromkeys(format_flops(f) for f, _, _ in self.fits))
        outside = [f for f, _, _ in self.fits if not lo <= f <= hi]
        tail = "" if not outside else (", outside this interval" if len(outside) == len(self.fits)
                                       else f", {format_flops(outside[0])} outside this interval")
        return f"{head} ({self.method}; the fits cross at {where}{tail})"


@dataclass(frozen=True)
class LeadSummary:
    """How much of the shared FLOP range each verdict covers (log10-FLOP scale), and the longest lead.

    Uses the per-point leaders of the comparison as they are, which are those
    of the band segments, so shares and segments agree; no new statistics. Each point speaks for the
    log10-FLOP interval reaching halfway to the neighbouring FLOP counts (the
    first and last reach only the ends of the range); points with the same
    FLOP count share their interval equally. ``share_a``, ``share_b`` and
    ``share_ambiguous`` are the fractions of ``[low_flops, high_flops]`` (in
    log10 FLOPs) held by points where ``a`` leads, ``b`` leads, or neither
    (``share_same``: the same within the margin; ``share_ambiguous``: the rest);
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
    share_same: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"low_flops": self.low_flops, "high_flops": self.high_flops, "share_a": self.share_a,
                "share_b": self.share_b, "share_same": self.share_same, "share_ambiguous": self.share_ambiguous,
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
    seed: int = 0
    min_run: int = 2
    method: str = "shapes"
    passes: tuple[int, int] = (1, 1)
    bands: tuple[Band, ...] = ()
    timing: Mapping[str, Any] = field(default_factory=dict)
    margin: float = DEFAULT_MARGIN
    runs: tuple[RunClaim, ...] = ()
    fit_only: tuple[Crossover, ...] = ()
    left_out: tuple[int, int] = (0, 0)

    @property
    def runs_measured(self) -> bool:
        """Whether the verdicts rest on measured run-to-run variation (method ``runs``)."""
        return self.method == "runs"

    def evidence_note(self) -> str:
        """What the verdicts rest on, e.g. "method runs, 3 and 3 passes" or
        "method shapes; run-to-run variation not measured"."""
        if self.runs_measured:
            return f"method runs, {self.passes[0]} and {self.passes[1]} passes"
        return f"method shapes; {NOT_MEASURED}"

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a, "b": self.b, "dtype": self.dtype, "mode": self.mode, "metric": self.metric,
            "alpha": self.alpha, "margin": self.margin, "seed": self.seed,
            "min_run": self.min_run,
            "method": self.method, "runs_measured": self.runs_measured,
            "passes": {"a": self.passes[0], "b": self.passes[1]}, "evidence": self.evidence_note(),
            "band_test": self.band_test(),
            "summary": self._summary_json(),
            "bands": [band.to_json(self.a, self.b) for band in self.bands],
            "run_claims": [r.to_json(self.a, self.b) for r in self.runs],
            "segments": [s.to_json() for s in self.segments],
            "crossovers": [c.to_json() for c in self.crossovers],
            "unsupported_fit_crossings": [c.to_json() for c in self.fit_only],
            "left_out": {"a": self.left_out[0], "b": self.left_out[1]},
            "points": [p.to_json() for p in self.points],
            "timing": dict(self.timing), "notes": list(self.notes), "sentence": self.sentence(),
        }

    def band_test(self) -> str:
        """How the verdicts were reached, e.g. "signed-rank over shapes per FLOP band (half-decades, >= 10
        shapes), Holm over 7 bands"."""
        m, longest = len(self.bands), run_longest(self.runs_measured)
        runs = sum(m - k for k in range(1, min(m, longest)))
        if m == 1:
            holm = "1 band"
        elif longest == 1:
            holm = f"Holm over {m} bands and the whole range"
        else:
            holm = f"Holm over {m} bands and {runs} runs of 2-{min(m, longest)} adjacent bands"
        same = (f"; margin {margin_words(self.margin)} (a lead must clear it, 'the same' lies within it)"
                if self.margin > 0 else "; margin 0 (pure difference test)")
        if self.runs_measured:
            return (f"band mean with shape as a random effect against run-to-run variation per FLOP band "
                    f"(half-decades), {holm}{same}")
        return f"{BAND_TEST} (half-decades, >= {MIN_BAND_SHAPES} shapes), {holm}{same}"

    def sentence(self) -> str:
        """One sentence saying who leads where, e.g. "A leads from 1.1 GFLOP to 96 GFLOP (closer to its own peak:
        MFU +6.2 points, x1.10), ..."."""
        head = f"{self.a} vs {self.b} ({self.dtype}, {self.mode}, {metric_name(self.metric)}): "
        if not self.segments:
            return head + "no shapes in a common FLOP range."
        n = len(self.segments)
        parts = [_segment_phrase(s, i, n, self.a, self.b, self.metric, self.margin)
                 for i, s in enumerate(self.segments)]
        return head + ", ".join(parts) + f" [{self.evidence_note()}]."

    def lead_summary(self) -> LeadSummary | None:
        """Shares of the shared FLOP range per verdict and the longest lead; None without points."""
        if not self.points:
            return None
        weights = point_weights([p.flops for p in self.points])
        # divided by the same sum, a verdict held by every point gets exactly 1
        state = [p.leader if p.leader is not None else "=" if p.same else None for p in self.points]
        share = {name: float(weights[[x == name for x in state]].sum() / weights.sum())
                 for name in (self.a, self.b, "=", None)}
        leads = [s for s in self.segments if s.leader is not None]
        longest = max(leads, key=lambda s: (math.log(s.end_flops / s.start_flops), s.n_points), default=None)
        return LeadSummary(low_flops=self.points[0].flops, high_flops=self.points[-1].flops, share_a=share[self.a],
                           share_b=share[self.b], share_ambiguous=share[None], longest=longest,
                           share_same=share["="])

    def summary(self) -> str:
        """One line, however fragmented the segments, from :meth:`lead_summary`.

        E.g. "A leads over 85% of the shared FLOP range (log scale, 1 GFLOP to 1 TFLOP), B over 5%,
        ambiguous over 10%; longest lead: A from 3 GFLOP to 900 GFLOP (closer to its own peak: MFU +6.2 points, x1.10)
        [method runs, 3 and 3 passes]."
        """
        s = self.lead_summary()
        if s is None:
            return "no shapes in a common FLOP range."
        lo, hi = format_flops(s.low_flops), format_flops(s.high_flops)
        where = f"log scale, {lo} to {hi}" if s.low_flops < s.high_flops else f"all at {lo}, shares by shape"
        same = f"the same within {margin_words(self.margin)} over {_share(s.share_same)}, " if self.margin > 0 else ""
        text = (f"{self.a} leads over {_share(s.share_a)} of the shared FLOP range ({where}), "
                f"{self.b} over {_share(s.share_b)}, {same}ambiguous over {_share(s.share_ambiguous)}; ")
        tail = f" [{self.evidence_note()}]."
        if s.longest is None:
            beyond = f" beyond {margin_words(self.margin)}" if self.margin > 0 else ""
            return text + f"no lead{beyond} anywhere" + tail
        return (text + f"longest lead: {s.longest.leader} {verdict_span(s.longest)} "
                f"({_effect(s.longest, self.a, self.metric)})" + tail)

    def _summary_json(self) -> dict[str, Any]:
        s = self.lead_summary()
        numbers = s.to_json() if s else dict.fromkeys(
            ("low_flops", "high_flops", "share_a", "share_b", "share_ambiguous", "longest_lead"))
        return {"text": self.summary(), **numbers}


def interval_words(j: Mapping[str, Any]) -> str:
    """A band's or run's printed interval from its ``to_json``: ``"[0.8889, 0.9855] (98.8% Holm-adjusted)"`` (four
    digits: a 2% margin is read at the third; the level never rounds up to 100%)."""
    level = f"{j['interval_level'] * 100:.3g}%"
    level = f"{j['interval_level'] * 100:.4g}%" if level == "100%" and j["interval_level"] < 1 else level
    return f"[{j['ratio_low']:.4g}, {j['ratio_high']:.4g}] ({level} Holm-adjusted)"


def metric_name(metric: str) -> str:
    return "MFU" if metric == "mfu" else "TFLOP/s"


def metric_words(metric: str) -> str:
    """What leading means in words: "closer to its own peak" (MFU) or "faster" (TFLOP/s)."""
    return "closer to its own peak" if metric == "mfu" else "faster"


def _effect(seg: Segment, a: str, metric: str) -> str:
    sign = 1.0 if seg.leader == a else -1.0
    ratio = seg.ratio if seg.leader == a else 1.0 / seg.ratio
    split = f"; {seg.against}" if seg.against else ""
    if metric == "mfu":
        return f"{metric_words(metric)}: MFU {sign * seg.diff * 100:+.1f} points, x{ratio:.2f}{split}"
    pct = (ratio - 1) * 100
    return (f"{metric_words(metric)}: {pct:+.1f}% TFLOP/s" if abs(pct) < 9.5 else
            f"{metric_words(metric)}: {pct:+.0f}% TFLOP/s") + split


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


def verdict_span(seg: Segment) -> str:
    """Where a segment's verdict holds, said as whose it is: ``"from 1 GFLOP to 10 GFLOP"`` (its bands' own),
    ``"over 1 GFLOP-10 GFLOP taken together"`` (a run of adjacent bands' conclusion that no band of it reaches
    alone) or ``"from ... to ..., partly taken together"`` (both)."""
    lo, hi = format_flops(seg.start_flops), format_flops(seg.end_flops)
    if seg.together:
        return f"from {lo} to {hi}, partly taken together" if seg.alone else f"over {lo}-{hi} taken together"
    return _span(seg)


def _segment_phrase(seg: Segment, i: int, n: int, a: str, b: str, metric: str, margin: float = 0.0) -> str:
    lo, hi = format_flops(seg.start_flops), format_flops(seg.end_flops)
    span = verdict_span(seg)
    if seg.leader is not None:
        return f"{seg.leader} leads {span} ({_effect(seg, a, metric)})"
    if seg.same:
        return f"the same within {margin_words(margin)} {span} ({a}/{b} x{seg.ratio:.3f})"
    if n == 1:
        return f"no confident leader {span} (neither is clearly {metric_words(metric)}; ambiguous throughout)"
    if i == 0:
        return f"ambiguous below {hi}"
    if i == n - 1:
        return f"ambiguous above {lo}"
    return f"ambiguous {span}"


# -- bootstrap of per-shape medians ------------------------------------------
