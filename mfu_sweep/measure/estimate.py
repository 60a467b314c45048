"""What a sweep will do and about how long it takes, before any device opens (``sweep --dry-run``).

The time is a cost model, not a measurement: every (pass, shape) runs a first
call, the float64 check and a warm-up, then samples until its 95% CI target or
its budget (``TimingConfig.budget_s``); the upper bound spends the whole budget,
the lower bound stops after ``min_samples`` blocks. That is the *device time*.
The *wall time* adds what surrounds it: worker starts (importing torch), the
worker's inputs and check per shape, and the sweep's own overhead per shape
(the parent's bookkeeping, ``overhead_s`` in every record). Those two per-shape
costs are the medians of the file's records when a resumed file has them
(:func:`measured_costs`), else the constants below, measured by
``benchmarks/sweep_overhead.py``. Call times assume :data:`ASSUMED_FRACTION` of
the peak (the CPU's estimated peak, a ``--chip`` entry or ``--peak-tflops``);
without a peak they count as zero, which the estimate says.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from mfu_sweep.measure.checkpoint import OVERHEAD_FIELD, WORKER_FIELD
from mfu_sweep.measure.task import Task
from mfu_sweep.measure.timing import TimingConfig
from mfu_sweep.records.results import Record

ASSUMED_FRACTION = 0.5  # of the peak; the default CPU sweep reaches 20-60% of its estimated peak
WORKER_START_S = 3.0  # a fresh worker imports torch: 2-4 s on this project's 2-core VMs
COMPILE_S = 10.0  # torch.compile of one shape (inductor on a CPU: 5-20 s)
CALLS_OUTSIDE_SAMPLES = 3  # the first call and the float64 check (about two calls' time)
# Medians per shape in benchmarks/sweep_overhead.py (tiny CPU shapes, 2-core VM at load average 8-11):
SETUP_S = 0.02  # the worker's time on a shape outside its timing loop (inputs, check): worker_s - measure_wall_s;
# a lower bound: larger shapes allocate and fill more operand sets (192^3-512^3 fp32: 1-2 s under that load)
SWEEP_OVERHEAD_S = 0.015  # the parent's own time per shape (overhead_s): pipe, machine reading, journal line


@dataclass(frozen=True)
class PerShape:
    """Seconds per shape beside the device time: the worker's inputs and check, the sweep's own overhead."""

    setup_s: float
    overhead_s: float
    basis: str


def measured_costs(records: Iterable[Record]) -> PerShape:
    """Medians of ``worker_s - measure_wall_s`` and ``overhead_s`` over ``records`` (a resumed file's), or the
    constants :data:`SETUP_S` and :data:`SWEEP_OVERHEAD_S` when no record has them."""
    setups, overheads = [], []
    for r in records:
        worker, wall, overhead = (r.extra.get(k) for k in (WORKER_FIELD, "measure_wall_s", OVERHEAD_FIELD))
        if worker is not None and wall is not None:
            setups.append(max(0.0, float(worker) - float(wall)))
        if overhead is not None:
            overheads.append(float(overhead))
    if not overheads:
        return PerShape(SETUP_S, SWEEP_OVERHEAD_S, "benchmarks/sweep_overhead.py, tiny CPU shapes: larger ones "
                        "spend more on inputs; a resumed file's own medians replace these")
    return PerShape(statistics.median(setups) if setups else SETUP_S, statistics.median(overheads),
                    f"medians of the file's {len(overheads)} records that have them")


@dataclass(frozen=True)
class SweepEstimate:
    """The plan's size and its time range in seconds, with what the time rests on.

    ``planned`` (pass, shape, dtype, mode) slots, ``in_file`` of them already in
    the resumed file, ``measurements`` still to run; ``kept``: the file's records
    this plan does not name (kept as they are). ``device_*``: first calls,
    warm-up and timing loops; ``low_s``/``high_s``: wall time.
    """

    shapes: int
    dtypes: tuple[str, ...]
    modes: tuple[str, ...]
    passes: int
    planned: int
    in_file: int
    kept: int
    measurements: int
    workers: int
    min_flops: float
    max_flops: float
    device_low_s: float
    device_high_s: float
    low_s: float
    high_s: float
    per_shape: PerShape
    basis: str


def _call_s(task: Task, peaks: Mapping[str, float]) -> float:
    peak = peaks.get(task.dtype)
    return task.shape.flops / (ASSUMED_FRACTION * peak * 1e12) if peak else 0.0


def _task_s(task: Task, timing: TimingConfig, peaks: Mapping[str, float]) -> tuple[float, float]:
    call = _call_s(task, peaks)
    fixed = CALLS_OUTSIDE_SAMPLES * call + timing.warmup_s + (COMPILE_S if task.mode == "compile" else 0.0)
    low = timing.min_samples * max(timing.min_block_s, call)
    return fixed + low, fixed + max(low, timing.budget_s)


def _key(task: Task) -> tuple[Hashable, ...]:
    return (task.shape, task.dtype, task.mode)  # Record.key of its records


def _basis(tasks: Sequence[Task], todo: int, timing: TimingConfig, peaks: Mapping[str, float]) -> str:
    """What the time rests on, in words."""
    if not todo:
        return "nothing is left to measure: every measurement is in the file"
    each = "the one measurement stops" if todo == 1 else f"each of {todo} measurements stops"
    basis = (f"cost model, not a measurement: {each} at its {timing.target_rel_ci:.0%} "
             f"CI target (low) or its {timing.budget_s:g} s budget (high), plus first call, check and "
             f"{WORKER_START_S:g} s per worker start")
    if any(t.mode == "compile" for t in tasks):
        basis += f", {COMPILE_S:g} s per compile"
    known = [d for d in dict.fromkeys(t.dtype for t in tasks) if peaks.get(d)]
    return basis + (f"; calls at {ASSUMED_FRACTION:.0%} of the peak of {', '.join(known)}" if known
                    else "; peak unknown before the device opens, so call times count as zero")


def estimate_sweep(tasks: Sequence[Task], repeats: int, timing: TimingConfig, peaks: Mapping[str, float],
                   isolate: str = "sweep", done: Collection[tuple[int, Hashable]] = frozenset(),
                   per_shape: PerShape | None = None) -> SweepEstimate:
    """Size and time range of a sweep of ``tasks`` over ``repeats`` passes.

    ``done``: the (pass, ``Record.key``) slots already in its file; ``peaks``
    maps dtype to peak TFLOP/s (empty when unknown before the device opens);
    ``per_shape``: the costs beside the device time [:func:`measured_costs` of no records].

    Linear in the tasks, and nothing per (pass, task) slot is kept: a million shapes over five passes
    are counted, not listed.
    """
    per_shape = per_shape or measured_costs(())
    planned = todo = 0
    device_low = device_high = 0.0
    todo_passes: set[int] = set()
    for t in tasks:
        n = min(repeats, t.passes or repeats)
        planned += n
        left = [p for p in range(n) if (p, _key(t)) not in done] if done else range(n)
        if not left:
            continue
        low, high = _task_s(t, timing, peaks)
        for _ in left:  # added one slot at a time, in the order the slots run: the sums of the listed slots
            device_low += low
            device_high += high
        todo += len(left)
        todo_passes.update(left)
    workers = {"shape": todo, "none": 1}.get(isolate, len(todo_passes)) if todo else 0
    around = workers * WORKER_START_S + todo * (per_shape.setup_s + per_shape.overhead_s)
    return SweepEstimate(
        shapes=len({t.shape for t in tasks}), dtypes=tuple(dict.fromkeys(t.dtype for t in tasks)),
        modes=tuple(dict.fromkeys(t.mode for t in tasks)), passes=repeats, planned=planned,
        in_file=planned - todo, kept=_kept(tasks, repeats, done), measurements=todo, workers=workers,
        min_flops=min((t.shape.flops for t in tasks), default=0.0),
        max_flops=max((t.shape.flops for t in tasks), default=0.0),
        device_low_s=device_low, device_high_s=device_high, low_s=device_low + around, high_s=device_high + around,
        per_shape=per_shape, basis=_basis(tasks, todo, timing, peaks),
    )


def _kept(tasks: Sequence[Task], repeats: int, done: Collection[tuple[int, Hashable]]) -> int:
    """How many of the file's slots ``done`` the plan does not name (kept as they are)."""
    if not done:
        return 0
    passes: dict[Hashable, int] = {}
    for t in tasks:
        key = _key(t)
        passes[key] = max(passes.get(key, 0), min(repeats, t.passes or repeats))
    return sum(1 for p, key in set(done) if not p < passes.get(key, 0))
