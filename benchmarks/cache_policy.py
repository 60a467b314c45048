"""Rotate vs flush: how much the way operands are kept out of cache changes the numbers.

Run:  .venv/bin/python benchmarks/cache_policy.py [--device cpu] [--dtype fp32] [--sizes 128,256,512,1024,2048]
      python benchmarks/cache_policy.py --device cuda --dtype bf16 --sizes 256,512,1024,2048,4096,8192

For each square shape the tool measures the same GEMM twice in one process:
``rotate`` (operand sets larger than the cache, calls back to back, the
default) and ``flush`` (a cache-sized buffer overwritten before each call,
every call timed alone: nvbench's cold mode, triton's do_bench). It prints
both medians, their ratio, and how each stopped. Shapes are interleaved
(rotate, flush, rotate, flush ...) and each pair is run ``--repeats`` times,
reporting the median ratio, so a drifting clock hits both sides alike.
This is a report, not a test; docs/devices.md quotes its output.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.backends import resolve_device
from mfu_sweep.measure.bench import run_task
from mfu_sweep.measure.task import Task
from mfu_sweep.measure.timing import TimingConfig


def median_s(backend: object, shape: Shape, dtype: str, cache: str, budget_s: float) -> tuple[float, str]:
    task = Task(shape=shape, dtype=dtype, cache=cache, timing=TimingConfig(budget_s=budget_s), check=False)
    rec = run_task(backend, task)  # type: ignore[arg-type]
    if rec.status != "ok":
        raise SystemExit(f"{shape} {dtype} {cache}: {rec.status}: {rec.error}")
    return statistics.median(rec.samples_s), str(rec.timer)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default=None, help="default: fp32 on CPU, bf16 elsewhere")
    parser.add_argument("--sizes", default="128,256,512,1024,2048")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=None, help="CPU: torch intra-op threads")
    args = parser.parse_args()
    backend = resolve_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = args.dtype or ("fp32" if backend.device.type == "cpu" else "bf16")
    info = backend.describe()
    print(f"device: {info.name} ({backend.name}); torch {torch.__version__}; threads {torch.get_num_threads()}; "
          f"flush buffer {backend.flush_bytes() / 2**20:.0f} MiB; "
          f"rotation target {backend.rotation_bytes() / 2**20:.0f} MiB")
    print(f"| {'shape':>16} | {'dtype':>5} | {'rotate (s)':>11} | {'flush (s)':>11} | {'flush/rotate':>12} "
          f"| {'timers':>24} |")
    print(f"|{'-' * 18}|{'-' * 7}|{'-' * 13}|{'-' * 13}|{'-' * 14}|{'-' * 26}|")
    for size in (int(s) for s in args.sizes.split(",")):
        shape = Shape(1, size, size, size)
        rot, fl, timers = [], [], ""
        for _ in range(args.repeats):
            r, t_r = median_s(backend, shape, dtype, "rotate", args.budget_s)
            f, t_f = median_s(backend, shape, dtype, "flush", args.budget_s)
            rot.append(r)
            fl.append(f)
            timers = f"{t_r} / {t_f}"
        ratio = statistics.median(f / r for f, r in zip(fl, rot))
        print(f"| {str(shape):>16} | {dtype:>5} | {statistics.median(rot):11.4g} | {statistics.median(fl):11.4g} "
              f"| {ratio:12.3f} | {timers:>24} |")


if __name__ == "__main__":
    main()
