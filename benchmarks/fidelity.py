"""Timing fidelity: the tool's median against torch.utils.benchmark, same process, same threads.

Run:  .venv/bin/python benchmarks/fidelity.py [--sizes 128,512,1024,2048] [--dtypes fp32,bf16]

For each square shape it prints the tool's median per call (default: input
sets rotated to defeat the last-level cache; and with rotation off, which is
what Timer does) next to ``Timer.blocked_autorange`` with the same thread
count, and their ratio. Then it runs a short default-style sweep in a worker
and prints the sweep overhead: wall time vs time spent inside timed calls.
Goal: ratio within 3% from 512^3 up. This is a report, not a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.utils.benchmark as tb

from mfu_sweep.measure.backends.cpu import CpuBackend
from mfu_sweep.measure.bench import Task, run_task
from mfu_sweep.measure.timing import TimingConfig
from mfu_sweep.shapes import Shape

SLOW_CALL_S = 1.0


class NoRotation(CpuBackend):
    """The CPU backend with one input set, as torch's Timer uses."""

    def rotation_bytes(self) -> int:
        return 0


def timer_median(size: int, dtype: torch.dtype) -> float:
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    out = torch.empty(size, size, dtype=dtype)
    timer = tb.Timer("torch.mm(a, b, out=out)", globals={"torch": torch, "a": a, "b": b, "out": out},
                     num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=1.0).median


def one_call_s(size: int, dtype: torch.dtype) -> float:
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    torch.mm(a, b)
    start = time.perf_counter()
    torch.mm(a, b)
    return time.perf_counter() - start


def fidelity(sizes: list[int], dtypes: list[str]) -> None:
    cfg = TimingConfig(budget_s=2.0)
    print(f"threads: {torch.get_num_threads()}  torch {torch.__version__}")
    print(f"{'shape':>16} {'dtype':>5} {'tool rot (s)':>13} {'tool 1set (s)':>14} {'Timer (s)':>11} "
          f"{'1set/Timer':>10} {'rot/Timer':>9}")
    for dtype in dtypes:
        tdt = getattr(torch, {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}[dtype])
        for size in sizes:
            if one_call_s(size, tdt) > SLOW_CALL_S:
                print(f"{f'{size}^3':>16} {dtype:>5}  skipped: one call takes over {SLOW_CALL_S:g} s on this CPU")
                continue
            task = Task(shape=Shape(1, size, size, size), dtype=dtype, timing=cfg, check=False)
            rot = run_task(CpuBackend(), task).samples_s
            single = run_task(NoRotation(), task).samples_s
            ref = timer_median(size, tdt)
            med_rot = sorted(rot)[len(rot) // 2]
            med_one = sorted(single)[len(single) // 2]
            print(f"{f'{size}^3':>16} {dtype:>5} {med_rot:>13.4e} {med_one:>14.4e} {ref:>11.4e} "
                  f"{med_one / ref:>10.3f} {med_rot / ref:>9.3f}")


def sweep_overhead() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "s.json"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "mfu_sweep", "sweep", "--device", "cpu", "--quiet", "-o", str(out)],
                       check=True, capture_output=True)
        wall = time.perf_counter() - start
        recs = json.loads(out.read_text())["records"]
    timed = sum(r.get("timed_s") or 0.0 for r in recs)
    measuring = sum(r.get("measure_wall_s") or 0.0 for r in recs)
    print(f"\ndefault CPU sweep ({len(recs)} shapes): wall {wall:.1f} s; inside timed sample blocks {timed:.1f} s "
          f"({timed / wall:.0%}); inside the per-shape timing loop incl. first call/warm-up {measuring:.1f} s "
          f"({measuring / wall:.0%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="128,512,1024,2048")
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--no-sweep", action="store_true", help="skip the sweep-overhead part")
    args = parser.parse_args()
    fidelity([int(s) for s in args.sizes.split(",")], args.dtypes.split(","))
    if not args.no_sweep:
        sweep_overhead()


if __name__ == "__main__":
    main()
