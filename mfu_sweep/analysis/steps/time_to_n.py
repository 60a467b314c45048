"""Time to N steps on every step series: first step, steady step and N steps, each with its interval.

With ``t_s`` the steady time per call of shape ``s`` (mean over passes of the record medians),
``f_s`` its first call and ``c_s`` its calls per step:

* steady step ``S = Σ c_s t_s``;
* first step ``F = Σ f_s + Σ (c_s − 1) t_s`` (a shape that recurs pays its first call once);
* time to N steps ``T(N) = F + (N − 1) S = O + N S`` with ``O = Σ (f_s − t_s)``, the one-time cost.

A step is a total, so passes are averaged (the mean is what N steps add up to); ``predict`` without
``--steps`` shows the median of passes, a typical call. Intervals: :mod:`mfu_sweep.analysis.steps.draws`.
Entry point :func:`predict_steps`::

    from mfu_sweep.analysis.steps.time_to_n import predict_steps
    from mfu_sweep.records.results import load_sweeps
    from mfu_sweep.gemm.workloads import resolve_family

    gemms = resolve_family("llm:llama-3-8b:tokens=32:tp=8:lm_head=0")
    result = predict_steps(load_sweeps(["sweeps/a.json"]), gemms, dtype="fp32", steps=(1, 100, 10_000))
    for t in result.series:
        print(t.key, t.state, t.first, t.steady)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from mfu_sweep.analysis.steps.costs import FINISHED, SeriesCosts, StepKey, collect_costs
from mfu_sweep.analysis.steps.counts import StepsError, auto_steps
from mfu_sweep.analysis.steps.crossings import (
    BreakEven,
    Crossing,
    DevicePayoffs,
    crossing_interval,
    mode_pairs,
    pair_crossings,
    shape_payoffs,
)
from mfu_sweep.analysis.steps.draws import DEFAULT_N_BOOT, Interval, ShapeDraws, StepLine, draw_costs, interval
from mfu_sweep.analysis.steps.gemm_sum import LEFT_OUT
from mfu_sweep.analysis.steps.runs import RunFacts
from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.gemm.workloads import WorkloadGemm
from mfu_sweep.records.results import Sweep
from mfu_sweep.util.text import counted

# Version of the JSON of a StepsResult (predict --steps --json, each object of analysis.json's "steps"
# list); one constant, one place; a reader checks "version".
# 1 - first version. Fields added since, none renamed: "source", "step_kind", "model", "gemm_sum" and
#     "of_which_gemms" of the result; "source", "compile_mode" and a measured series' run counts, reasons,
#     first-step breakdown and GEMM share (analysis/steps/runs.py) of each series.
STEPS_VERSION = 1
GEMM_SUM, MEASURED = "gemm sum", "measured"  # where a result's step times come from
MAX_PAIRED = 16  # finished series up to which every pair's crossover in N is looked for (120 pairs)
STEPS_LEFT_OUT = (
    "compiling the model as a whole: torch.compile traces and compiles graphs (fusions, graph breaks, "
    "recompiles on new shapes), not one GEMM at a time, so a model's compile time is not the sum of its "
    "GEMMs' first calls",
    "graph capture of the whole step (CUDA graphs, Neuron or XLA graphs of a model), process start, device "
    "initialisation, model load and data loading",
    *LEFT_OUT,
)


@dataclass(frozen=True)
class StepTimes:
    """First step, steady step and time to N steps of one step series, or why it has none.

    ``state`` is ``finished``, ``did not finish`` (a shape timed out or failed, or no run of a measured step
    finished: ``why`` names it and ``limit_s`` is the limit it ran into) or ``incomplete`` (shapes without a
    time). ``ratio`` is first step / steady step (the article's 30x and 55x). ``times`` pairs each N with the
    time to N steps. ``facts``: a measured series' runs (counts, reasons, compile breakdown, GEMM share);
    None for a GEMM sum, whose ``shapes`` and ``passes`` say what it sums.
    """

    key: StepKey
    state: str
    why: str = ""
    shapes: int = 0
    passes: int = 0
    first: Interval | None = None
    steady: Interval | None = None
    ratio: Interval | None = None
    times: tuple[tuple[int, Interval], ...] = ()
    limit_s: float | None = None
    facts: RunFacts | None = None

    @property
    def finished(self) -> bool:
        return self.state == FINISHED

    @property
    def source(self) -> str:
        return GEMM_SUM if self.facts is None else MEASURED

    def to_json(self) -> dict[str, Any]:
        def iv(x: Interval | None) -> dict[str, Any] | None:
            return None if x is None else x.to_json()

        return {**self.key.to_json(), "source": self.source, "state": self.state, "why": self.why or None,
                "shapes": self.shapes, "passes": self.passes, "limit_s": self.limit_s, "first_step_s": iv(self.first),
                "steady_step_s": iv(self.steady), "first_over_steady": iv(self.ratio),
                "time_to_n_s": [{"n": n, **t.to_json()} for n, t in self.times],
                **(self.facts.to_json() if self.facts is not None else {})}


def costs_times(costs: SeriesCosts) -> StepTimes:
    """A GEMM sum's series without its times yet: what it sums and why it has no time, if so."""
    return StepTimes(costs.key, costs.state, costs.why(), len(costs.shapes), costs.passes, limit_s=costs.limit_s)


def _times(base: StepTimes, line: StepLine | None, steps: Sequence[int], alpha: float) -> StepTimes:
    if line is None:
        return base
    spread = line.spread
    first = interval(line.at(1), line.draws_at(1), alpha, spread)
    steady = interval(line.steady, line.steady_draws, alpha, spread)
    with np.errstate(divide="ignore", invalid="ignore"):  # a steady draw of 0 (clipped): an infinite ratio
        ratio_draws = np.where(line.steady_draws > 0, line.draws_at(1) / line.steady_draws, np.inf)
    ratio = interval(line.at(1) / line.steady if line.steady > 0 else math.inf, ratio_draws, alpha, spread)
    times = tuple((n, interval(line.at(n), line.draws_at(n), alpha, spread)) for n in steps)
    return replace(base, why="", first=first, steady=steady, ratio=ratio, times=times)


@dataclass(frozen=True)
class StepsResult:
    """Time to N steps of one model step on every step series, with break-evens and crossovers.

    ``source`` says where the times come from: ``gemm sum`` (sweeps of the step's GEMMs, ``family`` the
    workload) or ``measured`` (step files, ``family`` the model spec; ``model`` its size and GEMM family).
    ``gemm_sum`` is the GEMM sum of a measured step's GEMM family where sweeps of it were given, and
    ``of_which`` its share of each measured series (:mod:`mfu_sweep.analysis.steps.measured`): the
    breakdown, never the step time.
    """

    family: str
    dtype: str
    steps: tuple[int, ...]
    series: tuple[StepTimes, ...]
    break_evens: tuple[BreakEven, ...]
    crossings: tuple[Crossing, ...]
    payoffs: tuple[DevicePayoffs, ...]
    n_boot: int = DEFAULT_N_BOOT
    seed: int = 0
    alpha: float = 0.05
    notes: tuple[str, ...] = ()
    source: str = GEMM_SUM
    step_kind: str = "train"
    model: Mapping[str, Any] | None = None
    gemm_sum: StepsResult | None = None
    of_which: tuple[Any, ...] = ()

    @property
    def measured(self) -> bool:
        return self.source == MEASURED

    def to_json(self) -> dict[str, Any]:
        how = ("t over the runs (fresh processes): one weight per run, shared by its first and steady step "
               "(analysis/steps/runs.py)" if self.measured else
               "bootstrap over passes: t-scaled normal pass weights (analysis/steps/draws.py)")
        return {
            "version": STEPS_VERSION, "source": self.source, "family": self.family, "step_kind": self.step_kind,
            "model": None if self.model is None else dict(self.model), "dtype": self.dtype,
            "steps": list(self.steps), "series": [s.to_json() for s in self.series],
            "break_even": [b.to_json() for b in self.break_evens],
            "crossovers": [c.to_json() for c in self.crossings],
            "shape_payoff": [p.to_json() for p in self.payoffs],
            "gemm_sum": None if self.gemm_sum is None else self.gemm_sum.to_json(),
            "of_which_gemms": [o.to_json() for o in self.of_which],
            "settings": {"n_boot": self.n_boot, "seed": self.seed, "alpha": self.alpha, "interval": how},
            "notes": list(self.notes), "left_out": [] if self.measured else list(STEPS_LEFT_OUT),
        }


Lines = dict[StepKey, StepLine]


def _break_even(eager: StepTimes, comp: StepTimes, lines: Lines, alpha: float) -> BreakEven:
    e, c = lines.get(eager.key), lines.get(comp.key)
    if e is not None and c is not None:
        return BreakEven(eager.key, comp.key, crossing_interval(e, c, alpha), e.steady, c.steady)
    notes = [f"{t.key.mode_name} {t.why}" for t in (comp, eager) if t.state != FINISHED]
    winner = eager.key.mode if e is not None else comp.key.mode_name if c is not None else None
    if winner and all(x.state != "incomplete" for x in (eager, comp)):
        notes.append(f"{winner} finishes first at every N")
    return BreakEven(eager.key, comp.key, None, None if e is None else e.steady, None if c is None else c.steady,
                     "; ".join(notes))


@dataclass(frozen=True)
class Marks:
    """What the lines of a set of series say together: the N shown, the series' times, break-evens, crossovers."""

    steps: tuple[int, ...]
    series: tuple[StepTimes, ...]
    break_evens: tuple[BreakEven, ...]
    crossings: tuple[Crossing, ...]
    notes: tuple[str, ...]


def mark_lines(bases: Sequence[StepTimes], lines: Lines, steps: Iterable[int] | None, alpha: float,
               replicates: str = "passes") -> Marks:
    """Times at the N asked (None: decades up to ten times the largest crossing), break-evens of each graph mode
    against eager, and crossovers in N between the other pairs, for either source of step times
    (``replicates``: what the intervals come from, ``passes`` or ``runs``, for the notes)."""
    by_key = {b.key: b for b in bases}
    pairs = mode_pairs(list(by_key))
    break_evens = tuple(_break_even(by_key[e], by_key[c], lines, alpha) for e, c in pairs)
    notes: tuple[str, ...] = ()
    if len(lines) <= MAX_PAIRED:
        found, unresolved = pair_crossings(lines, alpha, skip=pairs)
        crossings = tuple(found)
        if unresolved:
            notes = (f"{counted(unresolved, 'more pair')} of series whose lines cross only at the estimate: their "
                     f"steady steps are not told apart by the {replicates} (the crossing's interval ends in never), so "
                     "no crossover is claimed",)
    else:
        crossings = ()
        notes = (f"{len(lines)} series finished: crossovers between every pair are given for at most {MAX_PAIRED} "
                 "(select devices with the files or --mode)",)
    marks = [b.n.value for b in break_evens if b.n is not None] + [x.n.value for x in crossings]
    shown = tuple(sorted(set(steps))) if steps is not None else auto_steps(marks)
    series = tuple(_times(b, lines.get(b.key), shown, alpha) for b in bases)
    return Marks(shown, series, break_evens, crossings, notes)


def _failed(eager: SeriesCosts, comp: SeriesCosts) -> dict[Shape, str]:
    """The shapes that did not finish in some pass, with the mode (compile first)."""
    return {f.shape: mode for mode, costs in (("eager", eager), ("compile", comp)) for f in costs.failures}


def check_settings(dtype: str, n_boot: int, alpha: float) -> None:
    """A one-line :class:`StepsError` for an unknown dtype, too few draws or an alpha outside (0, 0.5)."""
    get_dtype(dtype)
    if not (isinstance(n_boot, int) and n_boot >= 100):
        raise StepsError(f"n_boot={n_boot!r} must be a whole number of at least 100 bootstrap draws")
    if not (0 < alpha < 0.5):
        raise StepsError(f"alpha={alpha!r} must be between 0 and 0.5")


def _nothing_matches(sweeps: Sequence[Sweep], family: str, dtype: str) -> StepsError:
    have = sorted({(r.dtype, r.mode) for s in sweeps for r in s.records})
    listing = ", ".join(f"{d}/{m}" for d, m in have) or "none"
    return StepsError(f"no {dtype} records of the shapes of {family} in the files (they hold: {listing}); sweep "
                      f"them with `mfu-sweep sweep --shapes {family} --mode eager --mode compile`")


@dataclass(frozen=True)
class GemmLines:
    """The GEMM sum's series before their times: bases, the lines of those that finished, per-shape payoffs."""

    family: str
    bases: tuple[StepTimes, ...]
    lines: Lines
    payoffs: tuple[DevicePayoffs, ...]


def gemm_lines(sweeps: Sequence[Sweep], gemms: Sequence[WorkloadGemm], dtype: str,
               modes: Collection[str] | None = None, n_boot: int = DEFAULT_N_BOOT, seed: int = 0,
               alpha: float = 0.05) -> GemmLines:
    """The GEMM sum of ``gemms`` on every step series of ``sweeps`` (a :class:`StepsError` when none holds them)."""
    if not gemms:
        raise StepsError("the workload has no GEMMs")
    check_settings(dtype, n_boot, alpha)
    family = gemms[0].family
    costs = collect_costs(sweeps, gemms, dtype, modes)
    if not costs:
        raise _nothing_matches(sweeps, family, dtype)
    by_key = {c.key: c for c in costs}
    lines, payoffs = _lines_and_payoffs(by_key, mode_pairs(list(by_key)), n_boot, seed, alpha)
    return GemmLines(family, tuple(costs_times(c) for c in costs), lines, payoffs)


def predict_steps(sweeps: Sequence[Sweep], gemms: Sequence[WorkloadGemm], *, dtype: str = "bf16",
                  modes: Collection[str] | None = None, steps: Iterable[int] | None = None,
                  n_boot: int = DEFAULT_N_BOOT, seed: int = 0, alpha: float = 0.05,
                  step_kind: str = "train") -> StepsResult:
    """Time to N steps of the workload ``gemms`` on every step series of ``sweeps``, from the GEMM sum.

    Parameters
    ----------
    sweeps:
        Loaded sweeps; a step series is a label, dtype, mode and compile cache (cold and warm apart).
    gemms:
        The workload, e.g. ``resolve_family("llm:qwen3-32b:tokens=8192")``; for an inference step only its
        forward GEMMs (:func:`~mfu_sweep.analysis.steps.gemm_sum.step_gemms`).
    dtype:
        Which records to use.
    modes:
        Only these modes (None: all); break-evens need both eager and compile.
    steps:
        The step counts N to give times for (None: decades up to ten times the largest crossing).
    n_boot, seed, alpha:
        Bootstrap draws, their seed, and the interval level ``1 - alpha``.
    step_kind:
        ``train`` or ``infer``: what ``gemms`` are the GEMMs of (recorded in the result).

    Raises
    ------
    StepsError
        No record of the workload's shapes in ``dtype``, or a bad argument.
    """
    g = gemm_lines(sweeps, gemms, dtype, modes, n_boot, seed, alpha)
    m = mark_lines(g.bases, g.lines, steps, alpha)
    return StepsResult(g.family, dtype, m.steps, m.series, m.break_evens, m.crossings, g.payoffs, n_boot, seed,
                       alpha, m.notes, step_kind=step_kind)


def _lines_and_payoffs(by_key: Mapping[StepKey, SeriesCosts], pairs: Sequence[tuple[StepKey, StepKey]],
                       n_boot: int, seed: int, alpha: float) -> tuple[Lines, tuple[DevicePayoffs, ...]]:
    """The line of every finished series and the per-shape payoffs of every mode pair, one pair's per-shape
    draws in memory at a time (a fleet has thousands of series)."""
    lines: dict[StepKey, StepLine] = {}
    payoffs = []

    def draw(key: StepKey) -> ShapeDraws | None:
        costs = by_key[key]
        if not costs.shapes:
            return None
        d = draw_costs(costs, n_boot, seed)
        if costs.state == FINISHED:
            lines.setdefault(key, d.line())
        return d

    for e, c in pairs:
        de, dc = draw(e), draw(c)
        if de is not None and dc is not None:
            payoffs.append(DevicePayoffs(e, c, shape_payoffs(de, dc, alpha, _failed(by_key[e], by_key[c]))))
    paired = {k for pair in pairs for k in pair}
    for key in by_key:
        if key not in paired:
            draw(key)
    return lines, tuple(payoffs)
