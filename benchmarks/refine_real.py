"""Refinement on two REAL CPU series of this machine: fp32 at 1 thread vs fp32 at 2 threads.

Run:  .venv/bin/python benchmarks/refine_real.py [--max-flop 2e9] [--rounds 3] [--out DIR]

Measured, not simulated: both series are swept with the default CPU settings
except a short per-shape budget (``--budget-s 0.05``, 3 passes, no numerical
check, in-process), labelled ``cpu-t1`` and ``cpu-t2``; then the cross-machine
loop runs as a user would: ``mfu-sweep refine`` writes a shape file, both files
are resumed with it, and again, until refine exits 3 (settled or looks spent)
or ``--rounds`` rounds. Printed: the device seconds (wall time of the sweeps)
of the first sweep and of each round, the crossovers and their widths, and the
same for a uniform grid twice as dense (8 sizes per decade, same passes).
Timings come from a shared, loaded machine: say so when quoting them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mfu_sweep.analysis.verdicts.compare import compare_all
from mfu_sweep.gemm.shapes import points_for_range
from mfu_sweep.records.results import load_sweeps

COMMON = ["--device", "cpu", "--dtype", "fp32", "--budget-s", "0.05", "--repeats", "3", "--no-check",
          "--isolate", "none", "--quiet"]


def mfu(*args: str) -> tuple[int, float, str]:
    start = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "mfu_sweep", *args], capture_output=True, text=True)
    return res.returncode, time.monotonic() - start, res.stdout + res.stderr


def sweep_pair(folder: Path, extra: list[str]) -> tuple[list[Path], float]:
    files, seconds = [], 0.0
    for threads in (1, 2):
        path = folder / f"cpu-t{threads}.json"
        rc, sec, out = mfu("sweep", *COMMON, *extra, "--threads", str(threads), "--label", f"cpu-t{threads}",
                           "-o", str(path), "--resume" if path.exists() else "--force")
        if rc != 0:
            raise SystemExit(out)
        files.append(path)
        seconds += sec
    return files, seconds


def crossovers(files: list[Path]) -> str:
    [comp] = compare_all(load_sweeps(files), metric="tflops", use_fit=False)
    xs = [f"{c.flops:.3g} [{c.low_flops:.3g}, {c.high_flops:.3g}] x{c.high_flops / c.low_flops:.2f}"
          for c in comp.crossovers if c.method != "fit"]
    return "; ".join(xs) or "none"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-flop", default="1e5")
    ap.add_argument("--max-flop", default="2e9")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None, help="Keep the files here (default: a temporary folder).")
    args = ap.parse_args(argv)
    folder = Path(args.out or tempfile.mkdtemp(prefix="mfu-refine-real-"))
    folder.mkdir(parents=True, exist_ok=True)
    grid = ["--min-flop", args.min_flop, "--max-flop", args.max_flop]
    for sub in ("refine", "uniform"):
        (folder / sub).mkdir(exist_ok=True)
    files, total = sweep_pair(folder / "refine", grid)
    print(f"REAL CPU (loaded, shared machine), fp32 1 vs 2 threads, TFLOP/s; files in {folder}")
    print(f"default grid (4/decade, 3 passes): {total:.0f} s; crossovers: {crossovers(files)}")
    for k in range(1, args.rounds + 1):
        shapes = folder / "refine" / f"round-{k}.csv"
        rc, _, out = mfu("refine", *map(str, files), "--metric", "tflops", "-o", str(shapes), "--force")
        print(out.strip().splitlines()[-1] if rc == 3 else f"round {k}: {out.strip().splitlines()[-3]}")
        if rc != 0:
            break
        _, sec = sweep_pair(folder / "refine", ["--shape-file", str(shapes)])
        total += sec
        print(f"  after round {k}: {total:.0f} s in all; crossovers: {crossovers(files)}")
    dense = points_for_range(float(args.min_flop), float(args.max_flop), 8)
    ufiles, usec = sweep_pair(folder / "uniform", [*grid, "--points", str(dense)])
    print(f"uniform grid twice as dense (8/decade, 3 passes): {usec:.0f} s; crossovers: {crossovers(ufiles)}")


if __name__ == "__main__":
    main()
