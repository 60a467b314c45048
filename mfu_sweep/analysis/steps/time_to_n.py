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
    from mfu_sweep.results import load_sweeps
    from mfu_sweep.workloads import resolve_family

    gemms = resolve_family("llm:llama-3-8b:tokens=32:tp=8:lm_head=0")
    result = predict_steps(load_sweeps(["sweeps/a.json"]), gemms, dtype="fp32", steps=(1, 100, 10_000))
    for t in result.series:
        print(t.key, t.state, t.first, t.steady)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mfu_sweep.analysis.predict import LEFT_OUT
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
from mfu_sweep.dtypes import get_dtype
from mfu_sweep.results import Sweep
from mfu_sweep.shapes import Shape
from mfu_sweep.text import counted
from mfu_sweep.workloads import WorkloadGemm

# Version of the JSON of a StepsResult (predict --steps --json, each object of analysis.json's "steps"
# list); one constant, one place; a reader checks "version".
# 1 - first version.
STEPS_VERSION = 1
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

    ``state`` is ``finished``, ``did not finish`` (a shape timed out or failed: ``why`` names it and
    ``limit_s`` is the sweep's per-shape limit) or ``incomplete`` (shapes without a time). ``ratio`` is
    first step / steady step (the article's 30x and 55x). ``times`` pairs each N with the time to N steps.
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

    @property
    def finished(self) -> bool:
        return self.state == FINISHED

    def to_json(self) -> dict[str, Any]:
        def iv(x: Interval | None) -> dict[str, Any] | None:
            return None if x is None else x.to_json()

        return {**self.key.to_json(), "state": self.state, "why": self.why or None, "shapes": self.shapes,
                "passes": self.passes, "limit_s": self.limit_s, "first_step_s": iv(self.first),
                "steady_step_s": iv(self.steady), "first_over_steady": iv(self.ratio),
                "time_to_n_s": [{"n": n, **t.to_json()} for n, t in self.times]}


def _times(costs: SeriesCosts, line: StepLine | None, steps: Sequence[int], alpha: float) -> StepTimes:
    base = StepTimes(costs.key, costs.state, costs.why(), len(costs.shapes), costs.passes, limit_s=costs.limit_s)
    if line is None:
        return base
    spread = line.spread
    first = interval(line.at(1), line.draws_at(1), alpha, spread)
    steady = interval(line.steady, line.steady_draws, alpha, spread)
    with np.errstate(divide="ignore", invalid="ignore"):  # a steady draw of 0 (clipped): an infinite ratio
        ratio_draws = np.where(line.steady_draws > 0, line.draws_at(1) / line.steady_draws, np.inf)
    ratio = interval(line.at(1) / line.steady if line.steady > 0 else math.inf, ratio_draws, alpha, spread)
    times = tuple((n, interval(line.at(n), line.draws_at(n), alpha, spread)) for n in steps)
    return StepTimes(costs.key, costs.state, "", len(costs.shapes), costs.passes, first, steady, ratio, times)


@dataclass(frozen=True)
class StepsResult:
    """Time to N steps of one workload on every step series of the sweeps, with break-evens and crossovers."""

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

    def to_json(self) -> dict[str, Any]:
        return {
            "version": STEPS_VERSION, "family": self.family, "dtype": self.dtype, "steps": list(self.steps),
            "series": [s.to_json() for s in self.series],
            "break_even": [b.to_json() for b in self.break_evens],
            "crossovers": [c.to_json() for c in self.crossings],
            "shape_payoff": [p.to_json() for p in self.payoffs],
            "settings": {"n_boot": self.n_boot, "seed": self.seed, "alpha": self.alpha,
                         "interval": "bootstrap over passes: t-scaled normal pass weights (analysis/steps/draws.py)"},
            "notes": list(self.notes), "left_out": list(STEPS_LEFT_OUT),
        }


def _break_even(eager: SeriesCosts, comp: SeriesCosts, lines: dict[StepKey, StepLine], alpha: float) -> BreakEven:
    e, c = lines.get(eager.key), lines.get(comp.key)
    if e is not None and c is not None:
        return BreakEven(eager.key, comp.key, crossing_interval(e, c, alpha), e.steady, c.steady)
    notes = [f"{m} {costs.why()}" for m, costs in (("compile", comp), ("eager", eager)) if costs.state != FINISHED]
    winner = "eager" if e is not None else "compile" if c is not None else None
    if winner and all(x.state != "incomplete" for x in (eager, comp)):
        notes.append(f"{winner} finishes first at every N")
    return BreakEven(eager.key, comp.key, None, None if e is None else e.steady, None if c is None else c.steady,
                     "; ".join(notes))


def _failed(eager: SeriesCosts, comp: SeriesCosts) -> dict[Shape, str]:
    """The shapes that did not finish in some pass, with the mode (compile first)."""
    return {f.shape: mode for mode, costs in (("eager", eager), ("compile", comp)) for f in costs.failures}


def _check(gemms: Sequence[WorkloadGemm], dtype: str, n_boot: int, alpha: float) -> None:
    if not gemms:
        raise StepsError("the workload has no GEMMs")
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


def predict_steps(sweeps: Sequence[Sweep], gemms: Sequence[WorkloadGemm], *, dtype: str = "bf16",
                  modes: Collection[str] | None = None, steps: Iterable[int] | None = None,
                  n_boot: int = DEFAULT_N_BOOT, seed: int = 0, alpha: float = 0.05) -> StepsResult:
    """Time to N steps of the workload ``gemms`` on every step series of ``sweeps``.

    Parameters
    ----------
    sweeps:
        Loaded sweeps; a step series is a label, dtype, mode and compile cache (cold and warm apart).
    gemms:
        The workload, e.g. ``resolve_family("llm:qwen3-32b:tokens=8192")``.
    dtype:
        Which records to use.
    modes:
        Only these modes (None: all); break-evens need both eager and compile.
    steps:
        The step counts N to give times for (None: decades up to ten times the largest crossing).
    n_boot, seed, alpha:
        Bootstrap draws, their seed, and the interval level ``1 - alpha``.

    Raises
    ------
    StepsError
        No record of the workload's shapes in ``dtype``, or a bad argument.
    """
    _check(gemms, dtype, n_boot, alpha)
    family = gemms[0].family
    costs = collect_costs(sweeps, gemms, dtype, modes)
    if not costs:
        raise _nothing_matches(sweeps, family, dtype)
    by_key = {c.key: c for c in costs}
    pairs = mode_pairs(list(by_key))
    lines, payoffs = _lines_and_payoffs(by_key, pairs, n_boot, seed, alpha)
    break_evens = tuple(_break_even(by_key[e], by_key[c], lines, alpha) for e, c in pairs)
    notes: tuple[str, ...] = ()
    if len(lines) <= MAX_PAIRED:
        found, unresolved = pair_crossings(lines, alpha, skip=pairs)
        crossings = tuple(found)
        if unresolved:
            notes = (f"{counted(unresolved, 'more pair')} of series whose lines cross only at the estimate: their "
                     "steady steps are not told apart by the passes (the crossing's interval ends in never), so no "
                     "crossover is claimed",)
    else:
        crossings = ()
        notes = (f"{len(lines)} series finished: crossovers between every pair are given for at most {MAX_PAIRED} "
                 "(select devices with sweep files or --mode)",)
    marks = [b.n.value for b in break_evens if b.n is not None] + [x.n.value for x in crossings]
    steps = tuple(sorted(set(steps))) if steps is not None else auto_steps(marks)
    series = tuple(_times(c, lines.get(c.key), steps, alpha) for c in costs)
    return StepsResult(family, dtype, steps, series, break_evens, crossings, payoffs, n_boot, seed, alpha, notes)


Lines = dict[StepKey, StepLine]


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
