"""The one-machine refinement loop: measure, decide where the question is open, measure there, until done.

``sweep --refine-against OTHER.json --until crossover-width=1.5 --refine-budget 20m``
alternates :func:`mfu_sweep.analysis.refine.plan.plan_refinement` (deciding) with a
resumed sweep of the proposed rows (measuring) until every crossover is
narrower than the target (``settled``), the planned looks are used up
(``looks``), or the next round would not fit in what is left of the device-time
budget (``budget``). The measuring is a callable handed in by the caller (the
CLI runs ``measure.sweep.run_sweep``), so this module needs no device and the
loop is tested with a simulated one. Every round's shape file is written next
to the result file, so the rounds can be replayed on another machine.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mfu_sweep.analysis.refine.plan import RefinePlan, plan_refinement, write_shape_file
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.records.results import Record, Sweep, load_sweeps
from mfu_sweep.util.text import counted

UNTIL_KINDS = ("crossover-width", "bend-width")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(s|m|h)?\s*$")


class LoopError(ValueError):
    """The loop cannot start: the message says why (a budget too small, a bad --until)."""


def parse_duration(text: str) -> float:
    """``"20m"`` -> 1200.0 seconds; ``s``, ``m``, ``h`` or a bare number of seconds."""
    m = _DURATION.match(text or "")
    if not m or float(m.group(1)) <= 0:
        raise LoopError(f"budget {text!r} must be a positive duration such as 90s, 20m or 1.5h")
    return float(m.group(1)) * {"s": 1, "m": 60, "h": 3600}[m.group(2) or "s"]


def parse_until(text: str) -> tuple[str, float]:
    """``"crossover-width=1.5"`` -> ("crossover-width", 1.5); ``bend-width`` for one device alone."""
    kind, _, value = (text or "").partition("=")
    try:
        width = float(value)
    except ValueError:
        width = math.nan
    if kind.strip() not in UNTIL_KINDS or not width > 1:
        raise LoopError(f"until {text!r} must be crossover-width=X or bend-width=X with X > 1 (a ratio of FLOPs)")
    return kind.strip(), width


@dataclass(frozen=True)
class LoopSettings:
    """What the loop refines against, to what width, with how much device time."""

    target: float
    budget_s: float
    others: tuple[str, ...] = ()
    bends: bool = False
    looks: int | None = None
    alpha: float = 0.05
    metric: str = "mfu"
    a: str | None = None
    b: str | None = None
    max_shapes: int = 24


@dataclass(frozen=True)
class LoopResult:
    """Why the loop stopped (``settled``, ``looks``, ``budget`` or ``stalled``), its rounds, device seconds and
    last plan."""

    reason: str
    rounds: int
    seconds: float
    plan: RefinePlan | None
    shape_files: tuple[str, ...] = field(default_factory=tuple)

    def sentence(self) -> str:
        why = {"settled": "every crossover is narrower than the target and nothing leans open",
               "looks": "the planned looks are used up (the verdicts' error budget is spent)",
               "budget": "the next round does not fit in the device-time budget left",
               "stalled": "nothing left to propose: the open regions have no room for another shape at the "
                          "target's spacing and no passes to add"}[self.reason]
        tail = f"; {self.plan.sentence()}" if self.plan else ""
        return (f"refine loop stopped after {counted(self.rounds, 'round')}, {self.seconds:.0f} s of device time: "
                f"{why}{tail}")


Rows = Sequence[tuple[Shape, str, int]]  # (shape, family, passes)
Measure = Callable[[Rows], Sweep]


def check_budget(budget_s: float, n_tasks: int, per_task_s: float) -> None:
    """Refuse a budget below one pass over the sweep's tasks at the timing budget per task."""
    need = n_tasks * per_task_s
    if budget_s < need:
        raise LoopError(f"refine budget {budget_s:.0f} s is below one pass over the {counted(n_tasks, 'task')} "
                        f"(at least {need:.0f} s at {per_task_s:g} s per task); give more or fewer shapes")


def seconds_per_slot(records: Sequence[Record], seconds: float) -> float:
    """Device seconds one (pass, shape) slot took so far: ``seconds`` over the records measured."""
    return seconds / max(1, len(records))


def new_slots(plan: RefinePlan, sweep: Sweep) -> int:
    """(pass, shape, dtype, mode) slots the plan's rows add to ``sweep``."""
    keys = {(r.dtype, r.mode) for r in sweep.records} or {("", "")}
    done = {(r.run_pass, r.shape, r.dtype, r.mode) for r in sweep.records}
    return sum(1 for p in plan.proposals for d, m in keys for i in range(p.passes)
               if (i, p.shape, d, m) not in done)


def refine_loop(output: Path, settings: LoopSettings, measure: Measure, spent_s: float = 0.0,
                clock: Callable[[], float] = time.monotonic,
                notify: Callable[[str], None] | None = None) -> LoopResult:
    """Alternate deciding and measuring until settled, out of looks, or out of budget.

    Parameters
    ----------
    output:
        The local result file (already holding the initial sweep).
    settings:
        Target width, device-time budget, the other device's files and the
        comparison options (see :func:`mfu_sweep.analysis.refine.plan.plan_refinement`).
    measure:
        ``measure(rows)`` measures the (shape, family, passes) rows into ``output``
        (a resumed sweep) and returns the sweep.
    spent_s:
        Device seconds already spent (the initial sweep).
    clock, notify:
        A monotonic clock (a fake one in tests) and where progress lines go.
    """
    say = notify or (lambda _: None)
    seconds, rounds, files = spent_s, 0, []
    plan = None
    while True:
        sweeps = load_sweeps([output, *settings.others])
        plan = plan_refinement(sweeps, target=settings.target, looks=settings.looks, alpha=settings.alpha,
                               metric=settings.metric, a=settings.a, b=settings.b, bends_only=settings.bends,
                               max_shapes=settings.max_shapes)
        say(plan.sentence())
        if plan.status != "open":
            return LoopResult("settled" if plan.status == "settled" else "looks", rounds, seconds, plan, tuple(files))
        if not plan.proposals:  # open, but another round would measure nothing and look at the same data
            return LoopResult("stalled", rounds, seconds, plan, tuple(files))
        own = load_sweeps([output])
        records = [r for s in own for r in s.records]
        cost = new_slots(plan, own[0]) * seconds_per_slot(records, seconds)
        if seconds + cost > settings.budget_s:
            say(f"next round: ~{cost:.0f} s, {max(0.0, settings.budget_s - seconds):.0f} s of the budget left")
            return LoopResult("budget", rounds, seconds, plan, tuple(files))
        path = output.with_name(f"{output.stem}.refine-{plan.look.index}.csv")
        write_shape_file(path, plan)
        files.append(str(path))
        family = plan.family
        start = clock()
        after = measure([(p.shape, family, p.passes) for p in plan.proposals])
        seconds += clock() - start
        rounds += 1
        if len(after.records) <= len(records):  # the round added no measurement: the next look would repeat
            return LoopResult("stalled", rounds, seconds, plan, tuple(files))
