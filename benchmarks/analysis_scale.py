"""How the analysis commands scale with devices, on SYNTHETIC fleets (made-up numbers, never measured).

Run:  python benchmarks/analysis_scale.py                       # after: 8, 64, 512 devices
      python benchmarks/analysis_scale.py --before --code OLD   # before: the old CLI at 2, 8, 16 devices

Builds ``--distribute replicate``-style fleets from ``tests/synthetic_fleet.py``
(labels ``synthetic-gpu.r<rank>``; bf16 and fp8, eager and compile: 4 series per
device; 40 square shapes from 1 MFLOP to 2 TFLOP; 30 samples per shape with 1%
sample and 2% per-shape noise), writes one file per device and series to a
temporary directory, and times each command as its own process, the way a
user runs it: ``fit``, ``compare --baseline`` (one vs rest), ``compare`` (the
leaderboard, the default above 4 devices) and ``report``, plus ``load`` (only
reading and schema-validating the files, which every command pays). It prints
wall and CPU seconds, peak memory of the process, the load average of the
machine around each run (other work on a shared machine slows everything), and
how each step grows from one fleet size to the next (x1 per x1 devices is linear).

``--before`` times the old command set instead (``compare`` = every pair) with
the checkout given by ``--code``; the default sizes are then 2, 8 and 16. This
is a report, not a test: docs/tests.md quotes its output.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

SERIES = (("bf16", "eager"), ("bf16", "compile"), ("fp8", "eager"), ("fp8", "compile"))


def write_fleet(directory: Path, n: int, n_shapes: int, n_samples: int) -> list[str]:
    import numpy as np
    from synthetic import write_sweep
    from synthetic_fleet import fleet_docs

    flops = [float(f) for f in np.geomspace(1e6, 2e12, n_shapes)]
    docs = fleet_docs(n, series=SERIES, flops=flops, n_samples=n_samples, sample_noise=0.01, shape_noise=0.02,
                      slow={n // 2: (1.1, 1e9, 1e11)}, seed=n)
    return [str(write_sweep(directory, d, name=f"dev{i // len(SERIES):04d}-{i % len(SERIES)}.json"))
            for i, d in enumerate(docs)]


def run(cmd: list[str], code: Path) -> tuple[float, float, float, int, tuple[float, float]]:
    """(wall s, cpu s, peak RSS MiB, exit code, load average before/after) of one command in its own process."""
    env = {**os.environ, "PYTHONPATH": str(code), "MPLBACKEND": "Agg"}
    before = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode() if proc.stderr else ""
    code_ = os.waitstatus_to_exitcode(status)
    if code_:
        print(f"  ! {' '.join(cmd[:4])} ... exited {code_}: {err.strip().splitlines()[-1:] }", file=sys.stderr)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, code_, (before, os.getloadavg()[0])


def steps(files: list[str], out: Path, before: bool, skip_report: bool) -> list[tuple[str, list[str]]]:
    cli = [sys.executable, "-m", "mfu_sweep"]
    listing = out / "files.txt"
    listing.write_text("\n".join(files))
    load = [sys.executable, "-c", "import sys; from mfu_sweep.results import load_sweeps; "
            "load_sweeps(open(sys.argv[1]).read().split())", str(listing)]
    todo = [("load", load), ("fit", [*cli, "fit", *files])]
    if before:
        todo.append(("compare (all pairs)", [*cli, "compare", *files]))
    else:
        todo += [("compare --baseline", [*cli, "compare", *files, "--baseline", "synthetic-gpu.r0"]),
                 ("leaderboard", [*cli, "compare", *files])]
    if not skip_report:
        todo.append(("report", [*cli, "report", *files, "-o", str(out / "report")]))
    return todo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", default=None, help="Comma-separated fleet sizes [8,64,512; --before: 2,8,16].")
    parser.add_argument("--before", action="store_true", help="Time the old command set (compare = every pair).")
    parser.add_argument("--code", type=Path, default=ROOT, help="Checkout whose mfu_sweep is timed [this one].")
    parser.add_argument("--shapes", type=int, default=40)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--report-max", type=int, default=64, help="Skip report above this many devices.")
    parser.add_argument("--steps", default=None, help="Comma-separated steps to run (default: all).")
    args = parser.parse_args()
    sizes = [int(x) for x in (args.devices or ("2,8,16" if args.before else "8,64,512")).split(",")]
    print(f"SYNTHETIC fleets: {len(SERIES)} series x {args.shapes} shapes x {args.samples} samples per device; "
          f"code {args.code}; {os.cpu_count()} CPUs; load average at start {os.getloadavg()[0]:.2f}")
    print(f"{'devices':>7}  {'step':<20} {'wall s':>8} {'cpu s':>8} {'peak MiB':>9} {'load':>11}  growth")
    last: dict[str, tuple[int, float]] = {}
    for n in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            files = write_fleet(out, n, args.shapes, args.samples)
            chosen = [(name, cmd) for name, cmd in steps(files, out, args.before, n > args.report_max)
                      if args.steps is None or name in args.steps.split(",")]
            for name, cmd in chosen:
                wall, cpu, rss, code, (l0, l1) = run(cmd, args.code)
                grow = ""
                if name in last:
                    n0, w0 = last[name]
                    grow = f"x{wall / w0:.1f} for x{n / n0:.0f} devices"
                last[name] = (n, wall)
                flag = "" if code == 0 else f"  (exit {code})"
                print(f"{n:>7}  {name:<20} {wall:>8.1f} {cpu:>8.1f} {rss:>9.0f} {l0:>5.2f}-{l1:<5.2f}  {grow}{flag}",
                      flush=True)


if __name__ == "__main__":
    main()
