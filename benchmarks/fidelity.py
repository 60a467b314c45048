"""Timing fidelity: the tool's median per call against torch.utils.benchmark's ``Timer``, alternating runs.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/fidelity.py [--runs 3] [--sizes 256,1024,2048] [--dtypes fp32,bf16]

A run of the tool is one real CLI sweep (``mfu-sweep sweep --device cpu --repeats 1`` over every
size and dtype, in a worker process, watched, as a user runs it); a run of ``Timer`` is a fresh
Python process timing ``torch.mm`` of the same shapes with ``Timer.blocked_autorange`` and the
thread count the sweep recorded (``device.threads``), in its own session as the sweep's worker is
(Linux's autogroup scheduler shares the CPU between sessions). Runs alternate, tool first in even runs and
Timer first in odd ones, because this VM's speed swings up to 2x between minutes: each ratio is
tool/Timer of the two runs of one pair, and the table shows the median over pairs with the lowest
and highest. ``--timer-operands`` says what ``Timer`` times: ``hot`` (one operand set, output
preallocated: what a user's ``Timer`` check times), ``alloc`` (``a @ b``, a new output per call) or
``rotate`` (the tool's own operand sets and GEMM callable: same work, only the timing loop and the
process differ). Each pair's line gives the worker's page faults per timed call (``page_faults_per_call``
of the record: a per-call allocation the worker faults in shows there, see docs/fidelity.md). Prints the
load average before and after: the numbers mean little under load.
This is a report, not a test; the result is in docs/fidelity.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DTYPES = {"fp32": "float32", "bf16": "bfloat16"}


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def tool_run(sizes: list[int], dtypes: list[str], out: Path, extra: list[str]) -> dict[str, object]:
    """One CLI sweep of every shape and dtype, one pass: {(size, dtype): median s}, threads."""
    cmd = [sys.executable, "-m", "mfu_sweep", "sweep", "--device", "cpu", "--quiet", "--repeats", "1", "--force",
           "-o", str(out), *[a for d in dtypes for a in ("--dtype", d)],
           *[a for s in sizes for a in ("--shape", f"{s}x{s}x{s}")], *extra]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    data = json.loads(out.read_text())
    ok = [r for r in data["records"] if r["status"] == "ok"]
    medians = {f"{r['shape']['m']}/{r['dtype']}": r["median_s"] for r in ok}
    faults = {f"{r['shape']['m']}/{r['dtype']}": r.get("page_faults_per_call") for r in ok}
    return {"medians": medians, "threads": data["device"]["threads"], "faults": faults}


def timer_run(sizes: list[int], dtypes: list[str], threads: int, operands: str, min_run_time: float) -> dict:
    """``Timer`` in a fresh process over the same shapes: {(size, dtype): median s}."""
    cmd = [sys.executable, __file__, "--timer-worker", "--sizes", ",".join(map(str, sizes)),
           "--dtypes", ",".join(dtypes), "--threads", str(threads), "--timer-operands", operands,
           "--min-run-time", str(min_run_time)]
    # its own session, as the sweep's worker is: with autogroup scheduling a session is one group
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, start_new_session=True)
    return {"medians": json.loads(done.stdout.splitlines()[-1])}


def timer_worker(sizes: list[int], dtypes: list[str], threads: int, operands: str, min_run_time: float) -> None:
    import torch
    import torch.utils.benchmark as tb

    out: dict[str, float] = {}
    for dtype in dtypes:
        for size in sizes:
            out[f"{size}/{dtype}"] = timer_median(tb, torch, size, dtype, threads, operands, min_run_time)
    print(json.dumps(out))


def timer_median(tb, torch, size: int, dtype: str, threads: int, operands: str, min_run_time: float) -> float:
    torch.manual_seed(0)
    tdt = getattr(torch, DTYPES[dtype])
    if operands == "rotate":
        from mfu_sweep.gemm.dtypes import get_dtype
        from mfu_sweep.gemm.shapes import Shape
        from mfu_sweep.measure.backends.cpu import CpuBackend
        from mfu_sweep.measure.bench import input_sets

        backend, shape, dt = CpuBackend(), Shape(1, size, size, size), get_dtype(dtype)
        sets = input_sets(shape, dt, backend.rotation_bytes())
        fn = backend.gemm_fn(shape, dt, "eager", backend.make_inputs(shape, dt, sets, 0))
        counter = [0]

        def call() -> None:
            i = counter[0]
            counter[0] = i + 1 if i + 1 < sets else 0
            fn(i)

        stmt, glob = "call()", {"call": call}
    else:
        a, b = torch.randn(size, size).to(tdt), torch.randn(size, size).to(tdt)
        c = torch.empty(size, size, dtype=tdt)
        stmt = "torch.mm(a, b, out=c)" if operands == "hot" else "a @ b"
        glob = {"torch": torch, "a": a, "b": b, "c": c}
    timer = tb.Timer(stmt, globals=glob, num_threads=threads)
    return timer.blocked_autorange(min_run_time=min_run_time).median


def alternate(args: argparse.Namespace, sizes: list[int], dtypes: list[str]) -> list[dict[str, float]]:
    """``args.runs`` pairs of (tool, Timer) runs, the order flipped every pair; tool/Timer per key and pair."""
    ratios: list[dict[str, float]] = []
    threads = args.threads
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            order = ("tool", "timer") if i % 2 == 0 else ("timer", "tool")
            got: dict[str, dict] = {}
            for who in order:
                if who == "tool":
                    got["tool"] = tool_run(sizes, dtypes, Path(tmp) / f"run{i}.json", args.tool_arg)
                    threads = threads or int(got["tool"]["threads"])
                else:
                    if threads is None:  # the first run: ask a sweep how many threads it uses
                        threads = int(tool_run([64], dtypes[:1], Path(tmp) / "probe.json", [])["threads"])
                    got["timer"] = timer_run(sizes, dtypes, threads, args.timer_operands, args.min_run_time)
            tool, ref = got["tool"]["medians"], got["timer"]["medians"]
            ratios.append({k: tool[k] / ref[k] for k in ref if k in tool})
            faults = got["tool"]["faults"]
            print(f"pair {i + 1}/{args.runs} ({' then '.join(order)}, load {load()}): "
                  + ", ".join(f"{k} {v:.3f} ({faults.get(k)} faults/call)" for k, v in ratios[-1].items()),
                  flush=True)
    return ratios


def table(ratios: list[dict[str, float]], sizes: list[int], dtypes: list[str]) -> str:
    lines = [f"{'shape':>7} {'dtype':>5} {'tool/Timer':>10} {'lowest':>7} {'highest':>7} {'pairs':>5}"]
    for dtype in dtypes:
        for size in sizes:
            vals = [r[f"{size}/{dtype}"] for r in ratios if f"{size}/{dtype}" in r]
            if vals:
                lines.append(f"{f'{size}^3':>7} {dtype:>5} {statistics.median(vals):>10.3f} {min(vals):>7.3f} "
                             f"{max(vals):>7.3f} {len(vals):>5}")
    return "\n".join(lines)


def machine() -> str:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    fam = [line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
           if line.startswith(("cpu family", "model\t"))][:2]
    return f"{model} (family {'/model '.join(fam)}), {os.cpu_count()} CPUs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256,1024,2048")
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--runs", type=int, default=3, help="pairs of alternating runs [3]")
    parser.add_argument("--threads", type=int, help="Timer's threads [the sweep's device.threads]")
    parser.add_argument("--timer-operands", choices=("hot", "alloc", "rotate"), default="hot")
    parser.add_argument("--min-run-time", type=float, default=1.0, help="Timer.blocked_autorange's [1.0 s]")
    parser.add_argument("--tool-arg", action="append", default=[], help="extra sweep option, repeatable "
                        "(e.g. --tool-arg=--cache=flush)")
    parser.add_argument("--timer-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes, dtypes = [int(s) for s in args.sizes.split(",")], args.dtypes.split(",")
    if args.timer_worker:
        timer_worker(sizes, dtypes, args.threads, args.timer_operands, args.min_run_time)
        return
    start, t0 = load(), time.perf_counter()
    print(f"machine: {machine()}; load average at start {start}", flush=True)
    ratios = alternate(args, sizes, dtypes)
    print(f"\ntool/Timer (Timer operands: {args.timer_operands}), median of {args.runs} alternating pairs:")
    print(table(ratios, sizes, dtypes))
    print(f"load average: {start} at start, {load()} at end; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
