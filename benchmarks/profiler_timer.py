"""``--timer profiler`` against the default timer: the same GEMM, timed both ways in alternation.

Run:  .venv/bin/python benchmarks/profiler_timer.py [--device cpu] [--size 1024] [--pairs 7]
      python benchmarks/profiler_timer.py --device cuda --dtype bf16 --size 8192

Each pair measures one square GEMM with the device's default timer (the host clock on the CPU, CUDA
events on a GPU) and with the profiler timer (the matmul ops' time on the CPU, the kernels' on CUDA),
in alternating order, in one process and on one operand set size; the pair's ratio is
profiler median / default median. The goal: the median ratio over the pairs within 5% of 1 at
1024^3. On a loaded machine both timers see the load; the pairing and the median over pairs cancel
most of it, the load average is printed with the result. With ``--check`` the exit status is 1 when
the goal is missed.
This is a report, not a test; docs/devices.md quotes its output.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.backends import resolve_device
from mfu_sweep.measure.bench import run_task
from mfu_sweep.measure.task import Task
from mfu_sweep.measure.timing import TimingConfig

GOAL = 0.05


def median_s(backend: object, timer: str, shape: Shape, dtype: str, budget_s: float) -> tuple[float, str]:
    """One measurement of ``shape`` with ``timer`` (``auto`` is the device's default): median and timer name."""
    backend.timer = timer  # type: ignore[attr-defined]
    rec = run_task(backend, Task(shape=shape, dtype=dtype, timing=TimingConfig(budget_s=budget_s), check=False))
    if rec.status != "ok":
        raise SystemExit(f"{shape} {dtype} timer {timer}: {rec.status}: {rec.error}")
    return statistics.median(rec.samples_s), str(rec.timer)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default=None, help="default: fp32 on CPU, bf16 elsewhere")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--pairs", type=int, default=7)
    parser.add_argument("--budget-s", type=float, default=1.0)
    parser.add_argument("--json", default=None, help="also write the pairs to this file")
    parser.add_argument("--check", action="store_true", help="exit 1 when the median ratio misses the goal")
    args = parser.parse_args()
    backend = resolve_device(args.device)
    dtype = args.dtype or ("fp32" if backend.device.type == "cpu" else "bf16")
    shape = Shape(1, args.size, args.size, args.size)
    load = os.getloadavg()
    print(f"device: {backend.describe().name} ({backend.name}); torch {torch.__version__}; "
          f"threads {torch.get_num_threads()}; load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"| pair | {'default (s)':>12} | {'profiler (s)':>12} | ratio | timers")
    pairs = []
    for i in range(args.pairs):
        order = ("auto", "profiler") if i % 2 == 0 else ("profiler", "auto")
        got = {t: median_s(backend, t, shape, dtype, args.budget_s) for t in order}
        ratio = got["profiler"][0] / got["auto"][0]
        pairs.append({"default_s": got["auto"][0], "profiler_s": got["profiler"][0], "ratio": ratio,
                      "timers": [got["auto"][1], got["profiler"][1]]})
        print(f"| {i:>4} | {got['auto'][0]:>12.6g} | {got['profiler'][0]:>12.6g} | {ratio:.3f} | "
              f"{got['auto'][1]} vs {got['profiler'][1]}")
    ratio = statistics.median(p["ratio"] for p in pairs)
    load = os.getloadavg()
    met = abs(ratio - 1) <= GOAL
    print(f"{shape} {dtype}: median profiler/default over {len(pairs)} pairs = {ratio:.4f} "
          f"({'within' if met else 'NOT within'} {GOAL:.0%}); load average after: {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"shape": str(shape), "dtype": dtype, "device": args.device, "pairs": pairs,
                       "median_ratio": ratio, "goal": GOAL, "met": met}, fh, indent=1)
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main())
