"""``sweep --timer cputime`` on the CPU: the calling thread's CPU time per call, the wall time kept beside it.

The timer is checked by what a CPU clock must do, not by speed: against fake clocks it returns CPU seconds
and keeps each block's wall seconds; on the real machine a thread's CPU time never exceeds the wall time of
the same block (a process clock of a two-thread GEMM would), so a record's median is at most its
``wall_median_s``; and the CPU time of fixed single-threaded work stays put when the test adds busy loops
beside it, which is what the timer is for (its wall time is free to grow).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.measure.timing import CpuTimeBlockTimer, TimingConfig, measure
from mfu_sweep.records.results import load_sweeps

FAST = ["--device", "cpu", "--budget-s", "0.05", "--max-samples", "10", "--quiet", "--repeats", "1"]


class Clocks:
    """CPU and wall clocks in ns: each call costs ``cpu_s`` of CPU time and ``wall_s`` of wall time."""

    def __init__(self, cpu_s: float, wall_s: float) -> None:
        self.cpu, self.wall = 0.0, 0.0
        self.cpu_s, self.wall_s = cpu_s, wall_s

    def call(self) -> None:
        self.cpu += self.cpu_s
        self.wall += self.wall_s


def test_cputime_block_timer_returns_cpu_seconds_and_keeps_the_wall() -> None:
    c = Clocks(cpu_s=1e-4, wall_s=3e-4)  # a third of the core: others took the rest
    timer = CpuTimeBlockTimer(c.call, cpu_ns=lambda: int(c.cpu * 1e9), wall_ns=lambda: int(c.wall * 1e9))
    m = measure(timer, TimingConfig(budget_s=1.0), wall=lambda: c.wall)
    assert m.median_s == pytest.approx(1e-4, rel=1e-6)
    walls = timer.wall_per_call(len(m.samples_s))
    assert len(walls) == len(m.samples_s) and statistics.median(walls) == pytest.approx(3e-4, rel=1e-6)
    assert timer.walls_s[-1][1] == m.block_size  # the samples are the last blocks, of the block size
    assert timer.wall_per_call(0) == []


def _cpu_and_wall_of_work(busy: int) -> tuple[float, float]:
    """Median CPU and wall seconds of a fixed single-threaded loop, with ``busy`` busy-loop processes beside it."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        time.sleep(0.2 if busy else 0)
        timer = CpuTimeBlockTimer(lambda: sum(range(20_000)))
        cpu = [timer(20) for _ in range(15)]
        return statistics.median(cpu), statistics.median(w for w, _ in timer.walls_s)
    finally:
        for p in loops:
            p.kill()
            p.wait()


def test_cpu_time_of_fixed_work_holds_beside_busy_loops() -> None:
    """Two busy loops per core beside a fixed loop: its CPU time stays within a factor 1.5 (wide: caches,
    clocks and a loaded CI machine move it), and never exceeds its wall time."""
    quiet_cpu, quiet_wall = _cpu_and_wall_of_work(0)
    busy_cpu, busy_wall = _cpu_and_wall_of_work(2 * (os.cpu_count() or 1))
    assert quiet_cpu <= quiet_wall * 1.001 and busy_cpu <= busy_wall * 1.001
    assert 1 / 1.5 < busy_cpu / quiet_cpu < 1.5, (quiet_cpu, busy_cpu, quiet_wall, busy_wall)


def test_sweep_with_timer_cputime_records_cpu_time_and_wall_time(tmp_path: Path, monkeypatch) -> None:
    """In the sweep's worker process (the default isolation), whose OpenMP threads wait passively."""
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["sweep", *FAST, "--timer", "cputime", "--shape", "96x96x96",
                                    "--dtype", "fp32", "--dtype", "bf16", "-o", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    (sweep,) = load_sweeps([out])
    assert sweep.settings["timer"] == "cputime" and sweep.environment["omp_wait_policy"] == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in os.environ  # handed to the worker only
    for r in sweep.records:
        assert r.status == "ok" and r.timer == "thread-cputime", r
        # per block the thread's CPU time is at most the block's wall time, so the medians keep that order
        assert 0 < r.median_s <= r.extra["wall_median_s"] * (1 + 1e-9), r


def test_a_users_own_wait_policy_is_kept(monkeypatch) -> None:
    from mfu_sweep.cli.device import device_options_env

    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    with device_options_env("cputime", 0.0):
        assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
    monkeypatch.delenv("OMP_WAIT_POLICY")
    with device_options_env("cputime", 0.0):
        assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    with device_options_env("auto", 0.0):
        assert "OMP_WAIT_POLICY" not in os.environ
    assert "OMP_WAIT_POLICY" not in os.environ


def test_timer_cputime_is_refused_off_the_cpu() -> None:
    res = CliRunner().invoke(main, ["sweep", "--device", "cuda", "--timer", "cputime", "--shape", "64x64x64",
                                    "--dry-run"])
    assert res.exit_code == 2 and "'cputime' applies to --device cpu only" in res.output


def test_a_contended_cpu_sweep_on_the_host_clock_names_cputime(tmp_path, monkeypatch):
    """The hint follows the contention note of a CPU sweep timed by the host clock, and only then."""
    import mfu_sweep.records.contention as contention

    monkeypatch.setattr(contention, "contention_note", lambda sweeps, excluded=False: "measured under contention: x")
    for timer, hinted in (("auto", True), ("cputime", False)):
        out = tmp_path / f"{timer}.json"
        res = CliRunner().invoke(main, ["sweep", *FAST, "--isolate", "none", "--timer", timer, "--shape", "64x64x64",
                                        "-o", str(out)], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        assert ("hint: --timer cputime" in res.stderr) is hinted, res.stderr
