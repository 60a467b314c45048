"""The adaptive timing loop, driven by a seeded fake clock (deterministic) and for real on the CPU."""

from __future__ import annotations

import random
import statistics
import time

import pytest
import torch

from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.timing import MIN_SAMPLES_FLOOR, TimingConfig, host_block_timer, host_flush_timer, measure
from mfu_sweep.util.errors import BackendError
from mfu_sweep.util.stats import median_ci, median_ci_indices


class FakeClock:
    """A nanosecond clock that only moves when the fake GEMM 'runs'.

    Each call costs ``call_s`` seconds times lognormal noise; the first call
    costs ``first_s`` (a compile); every clock read costs ``read_s``.
    """

    def __init__(self, call_s: float, noise: float = 0.0, first_s: float = 0.0, read_s: float = 0.0,
                 seed: int = 0) -> None:
        self.t = 0.0
        self.call_s, self.noise, self.first_s, self.read_s = call_s, noise, first_s, read_s
        self.rng = random.Random(seed)
        self.calls = 0

    def call(self) -> None:
        if self.calls == 0 and self.first_s:
            self.t += self.first_s
        else:
            self.t += self.call_s * self.rng.lognormvariate(0.0, self.noise) if self.noise else self.call_s
        self.calls += 1

    def ns(self) -> int:
        self.t += self.read_s
        return int(self.t * 1e9)

    def wall(self) -> float:
        return self.t


def run(clock: FakeClock, cfg: TimingConfig):
    return measure(host_block_timer(clock.call, clock_ns=clock.ns), cfg, wall=clock.wall)


def test_noiseless_converges_to_exact_time() -> None:
    clock = FakeClock(call_s=1e-5)
    m = run(clock, TimingConfig())
    assert m.stop_reason == "converged"
    assert len(m.samples_s) == TimingConfig().min_samples
    assert m.median_s == pytest.approx(1e-5, rel=1e-6)
    # the block grew until a block lasts min_block_s
    assert m.block_size * 1e-5 >= TimingConfig().min_block_s


def test_block_size_makes_timer_overhead_negligible() -> None:
    # a clock read costs 1 us, a call 100 ns: without blocking the timer would dominate
    clock = FakeClock(call_s=1e-7, read_s=1e-6)
    m = run(clock, TimingConfig())
    assert m.block_size >= 10_000
    assert m.median_s == pytest.approx(1e-7, rel=0.01)


def test_first_call_is_kept_apart() -> None:
    clock = FakeClock(call_s=1e-3, first_s=2.0)
    m = run(clock, TimingConfig())
    assert m.first_call_s == pytest.approx(2.0, rel=1e-6)
    assert m.median_s == pytest.approx(1e-3, rel=1e-6)
    assert max(m.samples_s) < 0.01, "the compile must never be a sample"


def test_noisy_stops_at_budget_and_is_deterministic() -> None:
    cfg = TimingConfig(budget_s=0.5, target_rel_ci=0.001, max_samples=10_000)
    a = run(FakeClock(call_s=1e-3, noise=0.3, seed=7), cfg)
    b = run(FakeClock(call_s=1e-3, noise=0.3, seed=7), cfg)
    assert a.samples_s == b.samples_s
    assert a.stop_reason == "budget"
    assert 0.5 <= a.elapsed_s < 0.6
    assert statistics.median(a.samples_s) == pytest.approx(1e-3, rel=0.15)


def test_moderate_noise_converges_with_more_samples() -> None:
    cfg = TimingConfig(budget_s=100.0, target_rel_ci=0.01)
    m = run(FakeClock(call_s=1e-3, noise=0.05, seed=3), cfg)
    assert m.stop_reason == "converged"
    assert len(m.samples_s) > cfg.min_samples
    lo, hi = m.ci_s
    assert (hi - lo) / 2 / m.median_s <= 0.01


def test_max_samples_caps() -> None:
    cfg = TimingConfig(budget_s=1e9, target_rel_ci=1e-6, max_samples=12)
    m = run(FakeClock(call_s=1e-3, noise=0.2, seed=1), cfg)
    assert m.stop_reason == "max_samples" and len(m.samples_s) == 12


def test_slow_call_still_gets_floor_samples() -> None:
    cfg = TimingConfig(budget_s=0.1)
    m = run(FakeClock(call_s=1.0, noise=0.1, seed=2), cfg)
    assert len(m.samples_s) == MIN_SAMPLES_FLOOR and m.block_size == 1


@pytest.mark.parametrize("field,value", [("budget_s", 0), ("min_samples", 0), ("target_rel_ci", -1),
                                         ("confidence", 1.5)])
def test_config_validation_names_field(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        TimingConfig(**{field: value})


def test_median_ci_coverage_by_simulation() -> None:
    rng = random.Random(0)
    hits = 0
    trials = 2000
    for _ in range(trials):
        xs = [rng.gauss(0, 1) for _ in range(30)]
        lo, hi = median_ci(xs)
        hits += lo <= 0.0 <= hi
    assert 0.93 <= hits / trials <= 0.995


def test_median_ci_indices_small_n_is_full_range() -> None:
    assert median_ci_indices(5) == (0, 4)
    lo, hi = median_ci_indices(100)
    assert (lo, hi) == (39, 60)


def _per_call_s(call, n: int = 8) -> float:
    """Seconds per call of ``n`` calls in a row, timed with perf_counter: an independent reading."""
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n


def test_real_cpu_timing_is_plausible() -> None:
    """The timer's median against perf_counter readings taken before and after it, in the same run: load
    slows both alike (an absolute floor of 0.5 GFLOP/s failed beside two busy loops), while a slip of
    units or of the block size would put them a factor of 1000 or more apart."""
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    out = torch.empty(256, 256)

    def call() -> None:
        torch.mm(a, b, out=out)

    before = [_per_call_s(call) for _ in range(5)]
    m = measure(host_block_timer(call), TimingConfig(budget_s=0.5))
    after = [_per_call_s(call) for _ in range(5)]
    reference = statistics.median(before + after)
    assert 0.1 < m.median_s / reference < 10, (m.median_s, before, after)
    assert 2 * 256**3 / m.median_s / 1e9 < 5000  # load only slows a GEMM; faster than any CPU is a bug
    assert all(s > 0 for s in m.samples_s) and m.block_size >= 1


def test_flush_timer_times_each_call_alone_and_never_the_flush() -> None:
    clock = FakeClock(call_s=10e-6)
    order: list[str] = []

    def flush() -> None:
        order.append("flush")
        clock.t += 5e-3  # a flush far slower than the call: if it were timed it would dominate

    def call() -> None:
        order.append("call")
        clock.call()

    time_block = host_flush_timer(call, flush, clock_ns=clock.ns)
    assert time_block(4) == pytest.approx(4 * 10e-6, rel=1e-6)
    assert order == ["flush", "call"] * 4


def test_flush_timer_in_the_adaptive_loop_reports_the_call_time() -> None:
    clock = FakeClock(call_s=20e-6, noise=0.02, seed=3)
    timer = host_flush_timer(clock.call, lambda: setattr(clock, "t", clock.t + 1e-3), clock_ns=clock.ns)
    m = measure(timer, TimingConfig(budget_s=5.0, min_block_s=2e-4), wall=clock.wall)
    assert m.median_s == pytest.approx(20e-6, rel=0.05)
    assert m.block_size >= 10  # 10 calls of 20 us fill the 0.2 ms block


# ----- --timer profiler, for real on the CPU -------------------------------------------------------------
def _profiled_events(fn, n: int = 3):  # noqa: ANN001, ANN202
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            fn()
    return prof.events()


def test_profiler_counts_each_gemm_call_once_even_when_ops_nest() -> None:
    from mfu_sweep.measure.backends.profiler_timer import op_seconds

    a, b, out = torch.randn(64, 48), torch.randn(48, 32), torch.empty(64, 32)
    seconds, count = op_seconds(_profiled_events(lambda: torch.mm(a, b, out=out)))
    assert count == 3 and seconds > 0
    nested = _profiled_events(lambda: torch.matmul(a, b))  # aten::matmul calls aten::mm inside: one GEMM, not two
    assert sum(e.name == "aten::mm" for e in nested) == 3
    assert op_seconds(nested)[1] == 3
    assert op_seconds(_profiled_events(lambda: a.add_(1)))[1] == 0
    # under an op that is no GEMM (F.linear, a compiled region, a record_function): still counted, once
    assert op_seconds(_profiled_events(lambda: torch.nn.functional.linear(a, b.T)))[1] == 3


def test_profiler_timer_agrees_with_the_host_clock_on_the_cpu() -> None:
    from mfu_sweep.measure.backends.profiler_timer import profiler_block_timer

    a, b, out = torch.randn(256, 256), torch.randn(256, 256), torch.empty(256, 256)

    def call() -> None:
        torch.mm(a, b, out=out)

    profiled, host = profiler_block_timer(call, "cpu", lambda: None), host_block_timer(call)
    ratios = []
    for _ in range(3):
        t0 = time.perf_counter()
        p = profiled(8)
        wall = time.perf_counter() - t0
        assert 0 < p <= wall  # the ops' own time is inside the block's wall time (session start/stop outside it)
        ratios.append(p / host(8))
    assert 1 / 3 < statistics.median(ratios) < 3  # same GEMMs, same clock: no unit or event-choice error


def test_profiler_timer_refuses_to_time_a_block_without_a_gemm() -> None:
    from mfu_sweep.measure.backends.profiler_timer import profiler_block_timer

    x = torch.zeros(16)
    with pytest.raises(RuntimeError, match="recorded no GEMM op"):
        profiler_block_timer(lambda: x.add_(1), "cpu", lambda: None)(4)


def test_cpu_sweep_with_the_profiler_timer(monkeypatch) -> None:
    from mfu_sweep.measure.backends.cpu import CpuBackend
    from mfu_sweep.measure.bench import Task, run_task
    from mfu_sweep.measure.task import TIMER_ENV

    monkeypatch.setenv(TIMER_ENV, "profiler")
    quick = TimingConfig(budget_s=0.05, min_samples=3, max_samples=5, min_block_s=1e-3, warmup_s=0.0)
    rec = run_task(CpuBackend(), Task(shape=Shape(1, 96, 64, 32, "tn"), dtype="fp32", timing=quick))
    assert rec.status == "ok" and rec.timer == "cpu-profiler-ops" and rec.samples_s
    monkeypatch.setenv(TIMER_ENV, "graph")
    with pytest.raises(BackendError, match="the CPU times with auto or profiler"):
        CpuBackend()


def test_profiler_timer_where_no_profiler_timer_exists_is_a_one_line_error() -> None:
    from click.testing import CliRunner

    from mfu_sweep.cli import main

    out = CliRunner().invoke(main, ["sweep", "--device", "neuron", "--timer", "profiler", "--dry-run"])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert out.output.strip().splitlines()[-1] == \
        "Error: Invalid value for --timer: 'profiler' applies to --device cuda or cpu only"
