"""What a sweep will do and about how long it takes, before any device opens (``sweep --dry-run``).

The time is a cost model, not a measurement: every (pass, shape) runs a first
call, the float64 check and a warm-up, then samples until its 95% CI target or
its budget (``TimingConfig.budget_s``); the upper bound spends the whole budget,
the lower bound stops after ``min_samples`` blocks. Call times assume
:data:`ASSUMED_FRACTION` of the peak (the CPU's estimated peak, a ``--chip``
entry or ``--peak-tflops``); without a peak they count as zero, which the
estimate says. Worker starts (importing torch) and CPU compiles use the
constants below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from mfu_sweep.measure.task import Task
from mfu_sweep.measure.timing import TimingConfig

ASSUMED_FRACTION = 0.5  # of the peak; the default CPU sweep reaches 20-60% of its estimated peak
WORKER_START_S = 3.0  # a fresh worker imports torch: 2-4 s on this project's 2-core VMs
COMPILE_S = 10.0  # torch.compile of one shape (inductor on a CPU: 5-20 s)
CALLS_OUTSIDE_SAMPLES = 3  # the first call and the float64 check (about two calls' time)


@dataclass(frozen=True)
class SweepEstimate:
    """The plan's size and its time range in seconds, with what the time rests on."""

    shapes: int
    dtypes: tuple[str, ...]
    modes: tuple[str, ...]
    passes: int
    measurements: int
    min_flops: float
    max_flops: float
    low_s: float
    high_s: float
    basis: str


def _call_s(task: Task, peaks: Mapping[str, float]) -> float:
    peak = peaks.get(task.dtype)
    return task.shape.flops / (ASSUMED_FRACTION * peak * 1e12) if peak else 0.0


def _task_s(task: Task, timing: TimingConfig, peaks: Mapping[str, float]) -> tuple[float, float]:
    call = _call_s(task, peaks)
    fixed = CALLS_OUTSIDE_SAMPLES * call + timing.warmup_s + (COMPILE_S if task.mode == "compile" else 0.0)
    low = timing.min_samples * max(timing.min_block_s, call)
    return fixed + low, fixed + max(low, timing.budget_s)


def estimate_sweep(tasks: Sequence[Task], repeats: int, timing: TimingConfig, peaks: Mapping[str, float],
                   isolate: str = "sweep", done: int = 0) -> SweepEstimate:
    """Size and time range of a sweep of ``tasks`` over ``repeats`` passes, ``done`` measurements already in its file.

    ``peaks`` maps dtype to peak TFLOP/s (empty when unknown before the device opens).
    """
    per = [_task_s(t, timing, peaks) for t in tasks]
    todo = max(0, len(tasks) * repeats - done)
    share = todo / (len(tasks) * repeats) if tasks else 0.0
    workers = {"sweep": repeats, "shape": todo, "none": 1}.get(isolate, repeats)
    low = share * repeats * sum(lo for lo, _ in per) + workers * WORKER_START_S
    high = share * repeats * sum(hi for _, hi in per) + workers * WORKER_START_S
    flops = [t.shape.flops for t in tasks] or [0.0]
    known = [d for d in dict.fromkeys(t.dtype for t in tasks) if peaks.get(d)]
    each = "the one measurement stops" if todo == 1 else f"each of {todo} measurements stops"
    basis = (f"cost model, not a measurement: {each} at its {timing.target_rel_ci:.0%} "
             f"CI target (low) or its {timing.budget_s:g} s budget (high), plus first call, check and "
             f"{WORKER_START_S:g} s per worker start")
    if any(t.mode == "compile" for t in tasks):
        basis += f", {COMPILE_S:g} s per compile"
    basis += (f"; calls at {ASSUMED_FRACTION:.0%} of the peak of {', '.join(known)}" if known
              else "; peak unknown before the device opens, so call times count as zero")
    return SweepEstimate(
        shapes=len({t.shape for t in tasks}), dtypes=tuple(dict.fromkeys(t.dtype for t in tasks)),
        modes=tuple(dict.fromkeys(t.mode for t in tasks)), passes=repeats, measurements=todo,
        min_flops=min(flops), max_flops=max(flops), low_s=low, high_s=high, basis=basis,
    )


def format_duration(seconds: float) -> str:
    """``45 s``, ``3.2 min``, ``1.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
