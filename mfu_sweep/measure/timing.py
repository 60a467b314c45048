"""Device-agnostic adaptive timing of a GEMM call.

The algorithm only sees a *block timer*, a function that runs ``n`` calls
and returns the seconds they took (host clock with synchronisation, device
events, graph replays ...), and a wall clock for the budget. Both are
injected, so the adaptive logic is unit-tested with a seeded fake clock and
run for real on every backend.

Steps: time the first call alone (compilation, autotuning, page faults);
grow the block size until one block lasts ``min_block_s`` so that timer
overhead is negligible; warm up; then take block samples until the 95% CI of
the median is narrower than ``target_rel_ci`` of it, or the budget is spent,
or ``max_samples`` is reached. Every raw sample is kept, as seconds per call.
"""

from __future__ import annotations

import statistics
import time
from bisect import insort
from collections.abc import Callable
from dataclasses import dataclass

from mfu_sweep.util.stats import median_ci, relative_half_width

BlockTimer = Callable[[int], float]
"""Runs ``n`` calls back to back and returns the elapsed seconds for all of them."""

# Below this many samples the budget never stops sampling: a median of fewer
# than three samples is not a statistic.
MIN_SAMPLES_FLOOR = 3


@dataclass(frozen=True)
class TimingConfig:
    """Knobs of the adaptive loop; defaults suit a CPU, backends may override."""

    target_rel_ci: float = 0.01
    budget_s: float = 2.0
    min_samples: int = 5
    max_samples: int = 100
    min_block_s: float = 2e-3
    max_block: int = 100_000
    warmup_s: float = 0.05
    confidence: float = 0.95

    def __post_init__(self) -> None:
        checks = {
            "target_rel_ci": self.target_rel_ci > 0,
            "budget_s": self.budget_s > 0,
            "min_samples": self.min_samples >= 1,
            "max_samples": self.max_samples >= max(self.min_samples, MIN_SAMPLES_FLOOR),
            "min_block_s": self.min_block_s > 0,
            "max_block": self.max_block >= 1,
            "warmup_s": self.warmup_s >= 0,
            "confidence": 0 < self.confidence < 1,
        }
        for name, ok in checks.items():
            if not ok:
                raise ValueError(f"timing setting {name}={getattr(self, name)!r} is out of range")


@dataclass(frozen=True)
class Measurement:
    """Raw result of :func:`measure`: seconds per call for every block sample."""

    samples_s: tuple[float, ...]
    block_size: int
    first_call_s: float
    warmup_blocks: int
    elapsed_s: float
    stop_reason: str
    ci_s: tuple[float, float]
    counted: int | None = None  # what ``measure``'s ``counter`` advanced by over the sample blocks (None: no counter)

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

    @property
    def timed_s(self) -> float:
        """Seconds spent inside timed sample blocks."""
        return sum(self.samples_s) * self.block_size


def host_block_timer(call: Callable[[], object], clock_ns: Callable[[], int] = time.perf_counter_ns,
                     sync: Callable[[], object] = lambda: None) -> BlockTimer:
    """A block timer reading a host clock, synchronising before each read."""

    def time_block(n: int) -> float:
        sync()
        start = clock_ns()
        for _ in range(n):
            call()
        sync()
        return (clock_ns() - start) / 1e9

    return time_block


class CpuTimeBlockTimer:
    """A block timer reading the CPU time of the thread that makes the calls (``--timer cputime``, CPU only).

    A thread's CPU clock does not advance while the thread waits for a core, so time others take from the
    cores is not in it: the timer measures through contention that would inflate the host clock. The
    calling thread is the GEMM's critical path: it runs its share of the parallel region (it is thread 0
    of the OpenMP team torch's CPU GEMMs run on) and waits at the region's end for the others. The wall
    time of every block is kept too (``walls_s``), so a record can say how far the two clocks drifted.
    docs/fidelity.md argues this choice against process CPU time divided by the threads.
    """

    def __init__(self, call: Callable[[], object], cpu_ns: Callable[[], int] = time.thread_time_ns,
                 wall_ns: Callable[[], int] = time.perf_counter_ns) -> None:
        self.call, self.cpu_ns, self.wall_ns = call, cpu_ns, wall_ns
        self.walls_s: list[tuple[float, int]] = []  # (wall seconds of the block, its calls), in order

    def __call__(self, n: int) -> float:
        wall, cpu = self.wall_ns(), self.cpu_ns()
        for _ in range(n):
            self.call()
        cpu, wall = self.cpu_ns() - cpu, self.wall_ns() - wall
        self.walls_s.append((wall / 1e9, n))
        return cpu / 1e9

    def wall_per_call(self, last: int) -> list[float]:
        """Wall seconds per call of the last ``last`` blocks (a measurement's samples are its last blocks)."""
        return [w / n for w, n in self.walls_s[len(self.walls_s) - last:]] if last > 0 else []


def host_flush_timer(call: Callable[[], object], flush: Callable[[], object],
                     clock_ns: Callable[[], int] = time.perf_counter_ns,
                     sync: Callable[[], object] = lambda: None) -> BlockTimer:
    """A block timer that times each call alone, right after ``flush`` evicted the caches.

    The flush (overwriting a cache-sized buffer) runs outside the timed
    region; the block's time is the sum of its calls' times. This is the
    cold-cache method of nvbench and triton's ``do_bench``, on the host clock.
    """

    def time_block(n: int) -> float:
        total = 0
        for _ in range(n):
            flush()
            sync()
            start = clock_ns()
            call()
            sync()
            total += clock_ns() - start
        return total / 1e9

    return time_block


def _next_block(n: int, elapsed: float, cfg: TimingConfig) -> int:
    if elapsed <= 0:
        return min(cfg.max_block, n * 10)
    # Jump most of the way to the target, but at least double.
    guess = int(n * cfg.min_block_s / elapsed * 1.2) + 1
    return min(cfg.max_block, max(2 * n, guess))


def _find_block_size(time_block: BlockTimer, cfg: TimingConfig, first_s: float) -> tuple[int, int]:
    """Grow the block until one block lasts ``min_block_s``; returns (n, blocks run)."""
    n, elapsed, runs = 1, first_s, 0
    while True:
        if elapsed >= cfg.min_block_s or n >= cfg.max_block:
            return n, runs
        n = _next_block(n, elapsed, cfg)
        elapsed = time_block(n)
        runs += 1


def measure(time_block: BlockTimer, cfg: TimingConfig = TimingConfig(),
            wall: Callable[[], float] = time.perf_counter, counter: Callable[[], int] | None = None) -> Measurement:
    """Adaptively time ``time_block``; see the module docstring for the steps.

    ``counter`` (optional) is read before the first sample block and after the last one (never inside a
    block); ``Measurement.counted`` is how far it advanced, e.g. the page faults of the sampled calls.
    """
    start = wall()
    first = time_block(1)
    # the first call is never a sample: time a second single call to size the block
    n, runs = _find_block_size(time_block, cfg, time_block(1))
    while wall() - start < cfg.warmup_s + first:
        time_block(n)
        runs += 1
        if wall() - start >= cfg.budget_s:
            break
    samples: list[float] = []
    ordered: list[float] = []  # kept sorted as samples arrive: a check costs no sort, also at 100,000 samples
    reason = "max_samples"
    counted_from = counter() if counter is not None else 0
    while len(samples) < cfg.max_samples:
        samples.append(time_block(n) / n)
        insort(ordered, samples[-1])
        count = len(samples)
        if count >= cfg.min_samples and relative_half_width(ordered, cfg.confidence, ordered=True) <= cfg.target_rel_ci:
            reason = "converged"
            break
        if count >= MIN_SAMPLES_FLOOR and wall() - start >= cfg.budget_s + first:
            reason = "budget"
            break
    counted = counter() - counted_from if counter is not None else None
    return Measurement(
        samples_s=tuple(samples), block_size=n, first_call_s=first, warmup_blocks=runs,
        elapsed_s=wall() - start, stop_reason=reason, ci_s=median_ci(samples, cfg.confidence), counted=counted,
    )
