"""Contention goals, measured on this machine with real busy-loop processes (results: docs/machine-state.md).

1. Busy half-way: a CPU sweep of R passes; two busy-loop processes start when pass R/2 begins and run
   to the end. Every pass that overlapped them must be flagged ``contended`` (recall over runs).
2. Clean: the same sweep with nothing started. Count flagged passes (false alarms, or a machine that
   was busy with somebody else's work: the per-record shares printed say which).
3. ``compare`` of a clean and a contended sweep must name contention as the reason.
4. Overhead of watching the machine: the same clean sweep with and without the watch, interleaved;
   plus the cost of one per-shape reading and of the one-off checks (busy check, clock probe).

Sweeps run in-process (``--isolate none``) to keep the benchmark short on a 2-core machine; the
per-shape readings are the same with a worker process. Every number depends on what else runs on
the machine: the script prints the load average at start and end.

Run: ``PYTHONPATH=. python benchmarks/contention.py [--runs 10] [--overhead-runs 5] [--out DIR]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.machine.clockprobe import measure_clock
from mfu_sweep.measure.machine.cores import HostMonitor, busy_before
from mfu_sweep.measure.sweep import SweepPlan, run_sweep
from mfu_sweep.measure.task import Task
from mfu_sweep.measure.timing import TimingConfig
from mfu_sweep.records.contention import CONTENDED_SHARE, contention_share, pass_summaries

BUSY = [sys.executable, "-c", "import time\nend = time.time() + 600\nwhile time.time() < end: pass"]


def start_busy(n: int) -> list[int]:
    """``n`` busy loops outside this process's family (double fork): what a neighbour's job looks like."""
    cmd = " ".join(f"{subprocess.list2cmdline(BUSY)} >/dev/null 2>&1 & echo $!;" for _ in range(n))
    return [int(p) for p in subprocess.run(["sh", "-c", cmd], capture_output=True, text=True).stdout.split()]


def stop_busy(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass


def tasks(budget_s: float, whole_budget: bool = False) -> list[Task]:
    """4 fp32 squares; ``whole_budget``: sample until the budget is spent (a sweep's time then does not
    depend on the load, so watched and unwatched sweeps compare)."""
    timing = TimingConfig(budget_s=budget_s, min_samples=3, max_samples=30) if not whole_budget else \
        TimingConfig(budget_s=budget_s, target_rel_ci=1e-9, min_samples=3, max_samples=100_000)
    return [Task(shape=Shape(1, s, s, s), dtype="fp32", timing=timing, check=False) for s in (128, 256, 384, 512)]


def sweep_once(out: Path, repeats: int, budget_s: float, busy_from: int | None, watch: bool = True,
               label: str | None = None, whole_budget: bool = False) -> tuple[object, float]:
    """One sweep; busy loops start when pass ``busy_from`` begins (None: never). (sweep, seconds)."""
    pids: list[int] = []

    def on_pass(index: int, *_: object) -> None:
        if busy_from is not None and index == busy_from and not pids:
            pids.extend(start_busy(2))
            time.sleep(0.1)

    plan = SweepPlan(device="cpu", tasks=tasks(budget_s, whole_budget), output=out, isolate="none", force=True,
                     repeats=repeats, watch=watch, label=label)
    t0 = time.perf_counter()
    try:
        sweep = run_sweep(plan, on_pass=on_pass)
    finally:
        stop_busy(pids)
    return sweep, time.perf_counter() - t0


def shares(sweep: object, passes: set[int]) -> list[float]:
    return [contention_share(r.extra["machine"]) or 0.0 for r in sweep.records  # type: ignore[attr-defined]
            if r.run_pass in passes and "machine" in r.extra]


def goal_flags(runs: int, repeats: int, budget_s: float, tmp: Path) -> None:
    half = repeats // 2
    recall, false_alarms, busy_sh, clean_sh, quiet_before = [], [], [], [], []
    for i in range(runs):
        s, _ = sweep_once(tmp / f"busy{i}.json", repeats, budget_s, busy_from=half)
        rows = pass_summaries(s.records)  # type: ignore[attr-defined]
        recall.append(sum(r["contended"] for r in rows if r["pass"] >= half) / (repeats - half))
        quiet_before.append(sum(r["contended"] for r in rows if r["pass"] < half))
        busy_sh += shares(s, set(range(half, repeats)))
        c, _ = sweep_once(tmp / f"clean{i}.json", repeats, budget_s, busy_from=None)
        false_alarms.append(sum(r["contended"] for r in pass_summaries(c.records)))  # type: ignore[attr-defined]
        clean_sh += shares(c, set(range(repeats)))
        print(f"run {i + 1}/{runs}: busy-half recall {recall[-1]:.0%}, flagged passes before the busy loops "
              f"{quiet_before[-1]}/{half}; clean sweep flagged passes {false_alarms[-1]}/{repeats}", flush=True)
    print(f"GOAL busy half-way: passes overlapping the busy loops flagged in {sum(recall) / runs:.0%} "
          f"(runs with every overlapping pass flagged: {sum(r == 1 for r in recall)}/{runs})")
    print(f"GOAL clean: sweeps with no flagged pass {sum(f == 0 for f in false_alarms)}/{runs} "
          f"(flagged passes {sum(false_alarms)}/{runs * repeats}); passes before the busy loops flagged "
          f"{sum(quiet_before)}/{runs * half}")
    for name, xs in (("overlapping busy loops", busy_sh), ("clean sweeps", clean_sh)):
        if xs:
            q = statistics.quantiles(xs, n=20) if len(xs) > 1 else xs * 19
            print(f"per-record others' share, {name}: min {min(xs):.3f}, 5% {q[0]:.3f}, median "
                  f"{statistics.median(xs):.3f}, 95% {q[-1]:.3f}, max {max(xs):.3f} (n={len(xs)}; "
                  f"threshold {CONTENDED_SHARE})")


def calibrate(windows: int, window_s: float = 1.0) -> None:
    """Others' share per window beside a sweep-like own load (one busy child per core, the sweep's own)
    with 0, 1 and 2 busy-loop neighbours: where the threshold must sit."""
    own = [subprocess.Popen(BUSY, start_new_session=True) for _ in range(len(os.sched_getaffinity(0)))]
    try:
        for n in (0, 1, 2):
            pids = start_busy(n)
            try:
                time.sleep(0.2)
                m, got = HostMonitor(), []
                for _ in range(windows):
                    m.begin()
                    time.sleep(window_s)
                    got.append(m.end()["other_share"])
            finally:
                stop_busy(pids)
            print(f"CALIBRATE {n} busy neighbour(s) beside {len(own)} own busy threads: others' share per "
                  f"{window_s:g} s window min {min(got):.3f}, median {statistics.median(got):.3f}, "
                  f"max {max(got):.3f} (n={windows})", flush=True)
    finally:
        for p in own:
            p.kill()
            p.wait()


def goal_compare(repeats: int, budget_s: float, tmp: Path) -> None:
    clean, busy = tmp / "cmp-clean.json", tmp / "cmp-busy.json"
    sweep_once(clean, repeats, budget_s, busy_from=None, label="quiet-run")
    sweep_once(busy, repeats, budget_s, busy_from=0, label="busy-run")
    out = subprocess.run([sys.executable, "-m", "mfu_sweep", "compare", str(clean), str(busy), "--no-fit"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    lines = [x for x in (out.stdout + out.stderr).splitlines() if "contention" in x]
    print(f"GOAL compare names contention: {'yes' if any(x.startswith('contention:') for x in lines) else 'NO'}")
    for x in lines:
        print(f"  {x}")


def goal_overhead(runs: int, repeats: int, budget_s: float, tmp: Path) -> None:
    """Watched against unwatched sweeps of 4 shapes x ``repeats`` passes at ``budget_s`` (make sweep: 5 x 1 s)."""
    on, off = [], []
    for i in range(runs):  # interleaved, so a change of load hits both
        for watch, xs in ((True, on), (False, off)) if i % 2 == 0 else ((False, off), (True, on)):
            xs.append(sweep_once(tmp / f"ovh{i}-{watch}.json", repeats, budget_s, None, watch=watch,
                                 whole_budget=True)[1])
    m = HostMonitor()
    t0 = time.perf_counter()
    for _ in range(50):
        m.begin()
        m.end()
    per_shape = (time.perf_counter() - t0) / 50
    t0 = time.perf_counter()
    busy_before(m)
    check = time.perf_counter() - t0
    t0 = time.perf_counter()
    measure_clock(len(os.sched_getaffinity(0)))
    clock = time.perf_counter() - t0
    shapes = len(tasks(budget_s)) * repeats
    print(f"GOAL overhead: sweep of {shapes} shapes, median {statistics.median(on):.2f} s watched vs "
          f"{statistics.median(off):.2f} s unwatched over {runs} runs each: ratio "
          f"{statistics.median(on) / statistics.median(off):.3f} (runs: on {[round(x, 2) for x in on]}, "
          f"off {[round(x, 2) for x in off]})")
    print(f"  cost per shape reading {per_shape * 1e3:.1f} ms; once per sweep: busy check {check:.2f} s, "
          f"clock probe {clock:.2f} s")
    default_s = 29 * 5 * 1.3  # make sweep: 29 shapes x 5 passes at ~1.3 s each (1 s budget + first call)
    print(f"  estimated overhead of `make sweep`'s fp32 half (~{default_s:.0f} s): "
          f"{(per_shape * 29 * 5 + check + clock) / default_s:.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="runs of the busy-half-way and clean sweeps each")
    ap.add_argument("--overhead-runs", type=int, default=5, help="watched and unwatched sweeps each")
    ap.add_argument("--repeats", type=int, default=4, help="passes per sweep")
    ap.add_argument("--budget-s", type=float, default=0.25, help="measurement budget per shape and pass")
    ap.add_argument("--overhead-repeats", type=int, default=5, help="passes of the overhead sweeps (make sweep: 5)")
    ap.add_argument("--overhead-budget-s", type=float, default=1.0,
                    help="budget per shape of the overhead sweeps (make sweep: 1 s)")
    ap.add_argument("--skip", action="append", default=[], choices=["calibrate", "flags", "compare", "overhead"])
    args = ap.parse_args()
    print(f"load average at start: {Path('/proc/loadavg').read_text().split()[:3]}, cores "
          f"{len(os.sched_getaffinity(0))}")
    with tempfile.TemporaryDirectory(prefix="mfu-contention-") as d:
        tmp = Path(d)
        if "calibrate" not in args.skip:
            calibrate(args.runs)
        if "flags" not in args.skip:
            goal_flags(args.runs, args.repeats, args.budget_s, tmp)
        if "compare" not in args.skip:
            goal_compare(args.repeats, args.budget_s, tmp)
        if "overhead" not in args.skip:
            goal_overhead(args.overhead_runs, args.overhead_repeats, args.overhead_budget_s, tmp)
    print(f"load average at end: {Path('/proc/loadavg').read_text().split()[:3]}")


if __name__ == "__main__":
    main()
