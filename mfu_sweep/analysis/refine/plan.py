"""Where to measure next: the shapes and passes that most reduce what a comparison leaves open.

A sweep's grid spends the same effort everywhere. Once two devices are
compared, most of the FLOP range is settled (one chip leads, with the lead
called after Holm and the run rule) and the question is open only in a few
places: inside a crossover interval wider than the target, and where an
ambiguous stretch leans one way on one side and the other way on the other (a
crossover not yet called). :func:`plan_refinement` proposes square shapes that
fill those places and, where they are already filled finer than the target but
still not called (run-to-run spread, not placement, is what stops the verdict),
one more pass over the shapes there. Nothing is proposed where the verdict is
settled.

Honesty of the verdicts: refining where a test was close is testing again, so
the comparisons that make claims are run at a *spent* level. Every refinement
round is a *look*; at most ``looks`` looks are planned before any data and
each gets ``alpha / looks`` (Bonferroni over looks: the chance that any look
calls a false lead is at most ``alpha`` whatever the dependence between looks
and however the placement used the data). The round a shape was added in
travels with its records (family ``refine-<round>``), so the accounting is the
same on machines that never see each other. Placement itself claims nothing:
it may look at unadjusted p-values to find leanings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.stats import norm

from mfu_sweep.analysis.ground.series import Series
from mfu_sweep.analysis.refine.looks import (
    DEFAULT_ALPHA,
    FAMILY_PREFIX,
    Look,
    RefineError,
    current_look,
    file_repeats,
    shape_passes,
)
from mfu_sweep.analysis.refine.regions import Region, candidate_regions, crossover_regions
from mfu_sweep.analysis.verdicts.comparison import Comparison
from mfu_sweep.analysis.verdicts.margin import DEFAULT_MARGIN
from mfu_sweep.gemm.shapes import Shape, parse_shape, size_align
from mfu_sweep.records.results import Sweep
from mfu_sweep.util.text import counted

DEFAULT_TARGET = 1.5  # crossover interval: high/low FLOPs at most this

MAX_SHAPES = 24  # proposals per round (all regions together), largest gaps first

# a called interval spans about three gaps (the last call of one lead, the uncalled crossing, the first call
# of the next), so gaps of target**(1/3) let it reach the target
GAPS_PER_TARGET = 3

# focus shapes at centre * target**x: the calls that bound an interval of the target width sit near
# x = +-0.5; a step inside them (+-0.45, so rounding cannot push them out) and one outside (+-0.9) in case
# the centre is off, and the centre itself, which anchors the local line the verdicts smooth
FOCUS = (-0.9, -0.45, 0.0, 0.45, 0.9)

PASS_GROWTH = 1.5  # passes grow at most this much per round: the need is estimated from few points

ALIGNS = (64, 32, 16, 8)  # square sizes: the coarsest alignment that lands near the FLOP target



@dataclass(frozen=True)
class Proposal:
    """One shape to measure in passes 0 .. ``passes``-1; ``extra_pass`` when it is measured already."""

    shape: Shape
    reason: str
    passes: int
    extra_pass: bool = False



@dataclass(frozen=True)
class RefinePlan:
    """What to measure next and why; ``status`` is ``open``, ``settled`` or ``looks-spent``."""

    look: Look
    target: float
    regions: tuple[Region, ...]
    proposals: tuple[Proposal, ...]
    repeats: int
    comparisons: tuple[Comparison, ...] = ()
    skipped: tuple[str, ...] = ()
    """Pairs of the files left out, one note each (no shape either side can be compared at, no peak for MFU)."""

    @property
    def family(self) -> str:
        """The family of this round's rows: ``refine-<look>-of-<looks>`` (the round and the plan travel with them)."""
        return f"{FAMILY_PREFIX}{self.look.index}-of-{self.look.looks}"

    @property
    def status(self) -> str:
        if not self.regions:
            return "settled"
        if self.look.last:
            return "looks-spent"
        return "open"

    def widths(self) -> list[float]:
        """Widths (high/low) of the called crossovers of the comparisons."""
        return [c.high_flops / c.low_flops for comp in self.comparisons for c in comp.crossovers
                if c.method != "fit"]

    def _still_ambiguous(self) -> str:
        """What "settled" leaves ambiguous (the largest ambiguous share of a pair), said rather than hidden."""
        shares = [s.share_ambiguous for c in self.comparisons if (s := c.lead_summary()) is not None]
        worst = max(shares, default=0.0)
        if worst < 0.005:
            return ""
        return (f"; still ambiguous over up to {worst:.0%} of a pair's shared range, where the data lean neither "
                "way: no shape is proposed there")

    def sentence(self) -> str:
        look = (f"look {self.look.index} of {self.look.looks} (verdicts at alpha {self.look.alpha_look:.3g}, "
                f"{self.look.spent:.3g} of {self.look.alpha:g} spent)")
        if self.status == "settled":
            return (f"settled at {look}: every crossover is narrower than x{self.target:g} and nothing leans open"
                    + self._still_ambiguous())
        if self.status == "looks-spent":
            stay = "stays" if len(self.regions) == 1 else "stay"
            return f"{look}: the planned looks are used up; {counted(len(self.regions), 'region')} {stay} open"
        n_pass = sum(p.extra_pass for p in self.proposals)
        return (f"{look}: {counted(len(self.regions), 'open region')}; proposing "
                f"{counted(len(self.proposals) - n_pass, 'new shape')} and more passes over "
                f"{counted(n_pass, 'measured one')}")



def square_near(flops: float, tolerance: float) -> Shape:
    """The square shape nearest ``flops`` at the coarsest alignment in ``ALIGNS`` within ``tolerance`` (a ratio).

    GPU kernels prefer sizes that are multiples of 64; near small sizes or to land
    within the tolerance a finer multiple is taken (8 at the finest).
    """
    side = (flops / 2.0) ** (1 / 3)
    best = None
    for align in ALIGNS:
        a = min(align, size_align(side, align))
        s = max(a, int(round(side / a)) * a)
        shape = Shape(1, s, s, s)
        if best is None or abs(math.log(shape.flops / flops)) < abs(math.log(best.flops / flops)):
            best = shape
        if abs(math.log(shape.flops / flops)) <= math.log(tolerance):
            return shape
    return best  # type: ignore[return-value]



def gap_targets(levels: Sequence[float], low: float, high: float, gap: float) -> list[tuple[float, float]]:
    """FLOP targets that split every gap between ``levels`` inside ``[low, high]`` to at most ``gap`` wide.

    Returns (target, width of the gap it splits) so callers can take the widest gaps first.
    """
    inside = sorted({f for f in levels if low <= f <= high} | {low, high})
    out = []
    for lo, hi in zip(inside, inside[1:], strict=False):
        ratio = hi / lo
        if ratio <= gap * 1.0001:
            continue
        k = math.ceil(math.log(ratio) / math.log(gap)) - 1
        out += [(lo * ratio ** ((i + 1) / (k + 1)), ratio) for i in range(k)]
    return out



def _shapes_at(c: Comparison) -> dict[float, list[str]]:
    """The measured shapes at each point's FLOPs (a point paired by FLOPs, ``"A~B"``, is two shapes)."""
    out: dict[float, list[str]] = {}
    for p in c.points:
        out.setdefault(p.flops, []).extend(p.shape.split("~"))
    return out



def _new_shapes(targets: Iterable[tuple[float, float]], region: Region, tolerance: float,
                known: set[Shape]) -> list[tuple[float, Shape]]:
    out = []
    for f, rank in targets:
        shape = square_near(f, tolerance)
        if shape not in known and region.low_flops < shape.flops < region.high_flops:
            known.add(shape)
            out.append((rank, shape))
    return out



def focus_targets(levels: Sequence[float], region: Region, centre: float, target: float) -> list[tuple[float, float]]:
    """FLOP targets where a call decides a crossover's interval: ``centre * target**x`` for x in ``FOCUS``.

    A point is called only where the two devices differ by more than the noise,
    so the calls that bound the interval lie about ``sqrt(target)`` either side
    of the crossing; shapes there (and one step inside and outside) are what
    narrows it. Targets within ``target**(1/8)`` of a measured FLOP count are
    left out. Ranked by the region's width, so wide regions come first.
    """
    near = target ** (1 / 8)
    out = []
    for x in FOCUS:
        f = centre * target ** x
        if region.low_flops < f < region.high_flops and all(abs(math.log(f / x)) > math.log(near) for x in levels):
            out.append((f, region.width))
    return out



def in_focus(flops: float, region: Region, target: float) -> bool:
    """Whether ``flops`` lies within a factor ``target`` of a crossover region's centre (any flops without one)."""
    return region.centre is None or abs(math.log(flops / region.centre)) <= math.log(target) * 1.0001



def region_shapes(region: Region, levels: Sequence[float], target: float,
                  known: set[Shape]) -> list[tuple[float, Shape]]:
    """New shapes for a region, ranked (rank, shape); ``known`` grows by them.

    With a ``centre`` (a called crossover's estimate) the shapes go where the
    calls that bound it would be (:func:`focus_targets`), plus a coarse split of
    the region's gaps into steps of at most ``width**(1/4)`` in case the
    estimate is off; without one (a leaning sign change, a bend, whose place is
    not known) every gap is split to ``target**(1/3)``.
    """
    flops = list(levels)
    if region.centre is None:
        targets = gap_targets(flops, region.low_flops, region.high_flops, target ** (1 / GAPS_PER_TARGET))
    else:
        coarse = max(target ** (1 / GAPS_PER_TARGET), region.width ** 0.25)
        targets = focus_targets(flops, region, region.centre, target)
        targets += gap_targets(flops + [f for f, _ in targets], region.low_flops, region.high_flops, coarse)
    return _new_shapes(targets, region, target ** (1 / 16), known)



def passes_needed(c: Comparison, region: Region, target: float, base: int) -> int:
    """Passes at which a point ``sqrt(target)`` from the crossing would be called, at most ``PASS_GROWTH * base``.

    ``base`` is the passes the region's shapes have now. The slope of the log
    ratio across the region and the standard error of its points (from their
    ``1 - alpha`` intervals) give the error the calls need, at the Holm level of
    the first call (``alpha / points``); run-to-run error shrinks as
    ``1 / sqrt(passes)``. Never fewer than ``base + 1``: a region still open
    gets at least one more pass.
    """
    inside = [p for p in c.points if region.low_flops <= p.flops <= region.high_flops]
    ends = [p for p in inside if p.flops in (region.low_flops, region.high_flops)]
    half = [math.log(p.ratio_high / p.ratio_low) / 2 for p in inside
            if p.ratio_low > 0 and math.isfinite(p.ratio_high)]
    if len(ends) < 2 or not half:
        return base + 1
    slope = abs(math.log(ends[-1].ratio / ends[0].ratio)) / math.log(region.width)
    se = float(np.median(half)) / float(norm.ppf(1 - c.alpha / 2))
    need = float(norm.ppf(1 - c.alpha / (2 * len(c.points)))) * se
    reach = slope * math.log(target) / 2
    factor = (need / reach) ** 2 if reach > 0 else math.inf
    return int(min(math.ceil(PASS_GROWTH * base), max(base + 1, math.ceil(base * factor))))



def pair_plan(comparisons: Sequence[Comparison], look: Look, target: float = DEFAULT_TARGET,
              max_shapes: int = MAX_SHAPES, repeats: int = 1, passes: Mapping[Shape, int] | None = None
              ) -> RefinePlan:
    """The next round for compared pairs: open regions, new shapes (widest regions first) and extra passes.

    ``comparisons`` must have been run at ``look.alpha_look`` (see :func:`plan_refinement`).
    ``repeats`` is the passes of the files and ``passes`` how many each shape has now
    (the fewest over the series; default ``repeats``). Shapes in focus around a
    called crossover get the passes :func:`passes_needed` asks for, measured ones
    included; other new shapes get ``repeats``; a leaning region with no room for
    new shapes gets one more pass over its shapes.
    """
    if target <= 1:
        raise RefineError(f"crossover-width target={target} must be above 1 (a ratio of FLOPs, e.g. 1.5)")
    have = dict(passes or {})
    seen = {parse_shape(n) for c in comparisons for p in c.points for n in p.shape.split("~")}
    regions: list[Region] = []
    ranked: list[tuple[float, Proposal]] = []
    extra: dict[Shape, Proposal] = {}
    for c in comparisons:
        levels = _shapes_at(c)
        for region in crossover_regions(c, target) + candidate_regions(c):
            regions.append(region)
            new = region_shapes(region, list(levels), target, seen)
            measured = [parse_shape(n) for f, names in levels.items()
                        if region.low_flops <= f <= region.high_flops and in_focus(f, region, target) for n in names]
            base = int(np.median([have.get(s, repeats) for s in measured])) if measured else repeats
            if region.kind == "crossover":
                need = passes_needed(c, region, target, base)
            else:  # a leaning sign change: new shapes first, one more pass once there is no room for them
                need = base if new else base + 1
            why = region.describe()
            ranked += [(rank, Proposal(s, why, need if in_focus(s.flops, region, target) else repeats))
                       for rank, s in new]
            for s in measured:
                if need > have.get(s, repeats):
                    extra[s] = Proposal(s, f"more passes: {why}", max(need, extra[s].passes if s in extra else 0),
                                        extra_pass=True)
    return _finish(look, target, regions, ranked, list(extra.values()), repeats, max_shapes, tuple(comparisons))



def _finish(look: Look, target: float, regions: list[Region], ranked: list[tuple[float, Proposal]],
            extra: list[Proposal], repeats: int, max_shapes: int, comparisons: tuple[Comparison, ...]) -> RefinePlan:
    """Rank and cap the proposals (at most ``max_shapes`` new shapes and as many extra-pass rows)."""
    if look.last or not regions:
        return RefinePlan(look, target, tuple(regions), (), repeats, comparisons)
    ranked.sort(key=lambda rp: -rp[0])  # widest regions first; stable, so region order breaks ties
    chosen = tuple(p for _, p in ranked[:max_shapes]) + tuple(extra[:max_shapes])
    most = max([repeats, *(p.passes for p in chosen)])
    return RefinePlan(look, target, tuple(regions), chosen, most, comparisons)



def shape_file_text(plan: RefinePlan, header: Sequence[str] = ()) -> str:
    """The proposals as a shape file (``sweep --shape-file``): ``batch,m,n,k,family,passes``.

    The family is :attr:`RefinePlan.family`.

    Comment lines say the look, the level and the command to run on every device.
    """
    family = plan.family
    lines = [f"# mfu-sweep refine: {plan.sentence()}", *(f"# {h}" for h in header)]
    lines += [f"# {r.describe()}" for r in plan.regions]
    lines.append("batch,m,n,k,family,passes")
    lines += [f"{p.shape.batch},{p.shape.m},{p.shape.n},{p.shape.k},{family},{p.passes}" for p in plan.proposals]
    return "\n".join(lines) + "\n"



def write_shape_file(path: str | Path, plan: RefinePlan, header: Sequence[str] = ()) -> None:
    """Write :func:`shape_file_text` atomically (``-``: to standard output)."""
    from mfu_sweep.records.results import write_text_atomic

    write_text_atomic(path, shape_file_text(plan, header))



def plan_series(series: Sequence[Series], look: Look, target: float = DEFAULT_TARGET, max_shapes: int = MAX_SHAPES,
                repeats: int = 1) -> RefinePlan:
    """The next round for single series: split the gaps beside every bend (:mod:`mfu_sweep.analysis.refine.knees`)."""
    from mfu_sweep.analysis.refine.knees import bends

    if target <= 1:
        raise RefineError(f"width target={target} must be above 1 (a ratio of FLOPs, e.g. 1.5)")
    seen = {r.shape for s in series for r in s.records}
    regions, ranked = [], []
    for s in series:
        levels: dict[float, list[str]] = {}
        for r in s.records:
            levels.setdefault(r.flops, []).append(str(r.shape))
        for lo, hi, size in bends(s):
            region = Region("bend", lo, hi, f"{s.label} ({s.dtype}, {s.mode}), {size:+.0%} off the line")
            new = region_shapes(region, list(levels), target, seen)
            if new:  # a bend already split finer than target**(1/3) is resolved
                regions.append(region)
                ranked += [(rank, Proposal(shape, region.describe(), repeats)) for rank, shape in new]
    return _finish(look, target, regions, ranked, [], repeats, max_shapes, ())



def plan_refinement(sweeps: Sequence[Sweep], *, target: float = DEFAULT_TARGET, looks: int | None = None,
                    alpha: float = DEFAULT_ALPHA, metric: str = "mfu", a: str | None = None, b: str | None = None,
                    bends_only: bool = False, max_shapes: int = MAX_SHAPES,
                    margin: float = DEFAULT_MARGIN) -> RefinePlan:
    """The next refinement round for ``sweeps`` (sweep or merged files of two or more devices).

    Parameters
    ----------
    sweeps:
        From ``mfu_sweep.records.results.load_sweeps``.
    target:
        Crossover intervals (high/low FLOPs) to reach.
    looks, alpha:
        Looks planned before any data (default: what earlier rounds planned, else
        ``DEFAULT_LOOKS``) and the family-wise error over all of them; the verdicts
        of this look are tested at ``alpha / looks``.
    metric, a, b:
        As ``mfu-sweep compare``: the metric, and labels or ``LABEL/DTYPE[/MODE]`` selectors of the pair.
    bends_only:
        Place shapes where each series' curve bends instead of comparing (one device alone).
    max_shapes:
        New shapes per round, at most (widest gaps first).
    margin:
        Compare's practical-equivalence margin: bands "the same within" it are settled, and leads must clear it.

    Raises
    ------
    RefineError
        One device only (without ``bends_only``), or no pair that can be compared.
    """
    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.analysis.verdicts.compare import CompareError, compare_all

    if max_shapes < 1:
        raise RefineError(f"max-shapes={max_shapes} must be at least 1")
    look = current_look(sweeps, looks, alpha)
    repeats = file_repeats(sweeps)
    series = group_series(sweeps)
    if not series:
        raise RefineError("the files hold no usable records (every shape failed?); nothing to refine")
    if bends_only:
        return plan_series(list(series.values()), look, target, max_shapes, repeats)
    labels = sorted({k.label for k in series})
    if len(labels) < 2 and not (a and b and "/" in a + b):
        raise RefineError(f"refine compares devices, and the files hold one only ({labels[0]}); give the other "
                          f"device's sweep, compare two dtypes with --a {labels[0]}/DTYPE --b {labels[0]}/DTYPE, "
                          f"or use --bends to place shapes where its curve bends")
    if not (a or b):
        kinds = {label: sorted({f"{k.dtype} {k.mode}" for k in series if k.label == label}) for label in labels}
        if not set.intersection(*(set(v) for v in kinds.values())) and len(labels) == 2:
            raise RefineError("the devices share no dtype and mode: " + "; ".join(
                f"{label} has {', '.join(v)}" for label, v in kinds.items()) + "; nothing to compare")
    skipped: list[str] = []
    try:
        comps = compare_all(sweeps, metric, a, b, alpha=look.alpha_look, use_fit=False, margin=margin,
                            on_skip=lambda exc: skipped.append(str(exc)))
    except CompareError as exc:
        raise RefineError(f"nothing to refine: {exc}") from None
    plan = pair_plan(comps, look, target, max_shapes, repeats, shape_passes(sweeps))
    return replace(plan, skipped=tuple(skipped))

