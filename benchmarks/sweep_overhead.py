"""The sweep's own cost at 100, 1,000 and 10,000 records, the append goal, and reading a 10,125-record file.

Run:  .venv/bin/python benchmarks/sweep_overhead.py            # all three parts (~5 min on an idle 2-core VM)
      .venv/bin/python benchmarks/sweep_overhead.py --parts overhead --rounds 3 --shapes 40

A report, not a test. Every number comes from real CPU sweeps of tiny shapes (``--budget-s 0.02``) run
by the real command line. The files they extend are SYNTHETIC padding: one real record of this machine
copied under made-up shapes, since only the bookkeeping reads them; they live in a temporary directory.

1. ``overhead``: for each size, a file of that many records is extended by ``--shapes`` new shapes with
   ``sweep --resume``, the sizes interleaved in a fresh order each round (paired runs, one process tree).
   Per size: the median and 90th percentile over shapes of ``overhead_s`` (the parent's time per shape
   beside the worker, recorded in every record), the median of ``worker_s - measure_wall_s`` (the worker's
   inputs and check beside its timing loop), the bytes of one journal line per record, and the bytes the
   run wrote whole (the file at its start and at its end: twice per run, not per record).
   Goal: overhead per shape <= 20 ms median on an idle 2-core VM, flat from 100 to 10,000 records, and
   bytes per record independent of the record count.
2. ``append``: ``--append`` shapes swept into a fresh file against the same shapes appended to a
   10,000-record file, alternating. Goal: appended <= 1.5 x fresh + 10 s (before the journal: 199 s vs 30 s).
   The fresh file holds the seed's one record, so both runs take the same path (a resume: no clock probe).
3. ``reading``: ``validate``, ``merge -o`` and a ``load_sweeps`` of a 10,125-record file, each its own
   process, wall and CPU seconds. Goal: each <= 2 s on an idle 2-core VM.

Each sweep runs as a child of this script (``--child``): the real ``mfu-sweep`` command in a process that
also counts the bytes of every journal line and whole-file write, by wrapping (not replacing) the writers.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BUDGET = ["--budget-s", "0.02", "--max-samples", "10", "--repeats", "1"]
SEED_SHAPE = "64x64x64"


def child(out: str, args: list[str]) -> None:
    """Run ``mfu-sweep ARGS`` in this process, counting what it writes; the counts go to ``out`` as JSON."""
    from mfu_sweep.cli import main
    from mfu_sweep.records import journal, results

    lines: list[int] = []
    whole: list[int] = []
    append, write = journal.Journal.append, results.write_json_atomic

    def counted_append(self: Any, record: Any) -> int:
        lines.append(append(self, record))
        return lines[-1]

    def counted_write(path: Any, data: Any) -> None:
        write(path, data)
        whole.append(os.path.getsize(path))

    journal.Journal.append = counted_append  # type: ignore[method-assign]
    results.write_json_atomic = counted_write
    start = time.perf_counter()
    main(args, standalone_mode=False)
    Path(out).write_text(json.dumps({"journal_lines": lines, "whole_writes": whole,
                                     "wall_s": time.perf_counter() - start}))


def run_child(args: list[str], tmp: Path) -> dict[str, Any]:
    out = tmp / "child.json"
    subprocess.run([sys.executable, __file__, "--child", str(out), "--", *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return json.loads(out.read_text())


def seed_record(tmp: Path) -> dict[str, Any]:
    """One real sweep of one shape on this CPU: the document every padded file starts from."""
    path = tmp / "seed.json"
    subprocess.run([sys.executable, "-m", "mfu_sweep", "sweep", "--device", "cpu", "--quiet", *BUDGET,
                    "--shape", SEED_SHAPE, "-o", str(path)], check=True, capture_output=True)
    return json.loads(path.read_text())


def padded(seed: dict[str, Any], n: int, path: Path) -> Path:
    """``seed`` with its record copied under ``n`` made-up shapes (SYNTHETIC padding), none of the new shapes."""
    from mfu_sweep.gemm.dtypes import get_dtype
    from mfu_sweep.gemm.shapes import Shape

    doc = copy.deepcopy(seed)
    (rec,) = doc["records"]
    dt, peak = get_dtype(rec["dtype"]), rec["tflops"] / rec["mfu"]

    def under(shape: Shape) -> dict[str, Any]:
        # the record's samples under another shape, its FLOPs, bytes, TFLOP/s and MFU those of that shape, so
        # the file passes `validate` (which checks that they agree)
        tflops = shape.flops / rec["median_s"] / 1e12
        return dict(rec, shape={"batch": 1, "m": shape.m, "n": shape.n, "k": shape.k}, flops=shape.flops,
                    bytes=shape.bytes(dt), intensity=shape.intensity(dt), tflops=tflops, mfu=tflops / peak)

    doc["records"] = [under(Shape(1, 8 * (i + 1), 16, 16)) for i in range(n)]
    doc["run"]["planned"] = n
    path.write_text(json.dumps(doc))
    return path


def new_shapes(count: int) -> list[str]:
    return [a for i in range(count) for a in ("--shape", f"{8 * (i + 1)}x24x24")]


def _overheads(row: dict[str, Any]) -> list[float]:
    return [x["overhead_s"] for x in row["records"] if "overhead_s" in x]


def overhead_part(seed: dict[str, Any], sizes: list[int], shapes: int, rounds: int, tmp: Path) -> None:
    rows: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    rng = random.Random(0)
    for r in range(rounds):
        order = rng.sample(sizes, len(sizes))
        for n in order:
            path = padded(seed, n, tmp / f"n{n}.json")
            counts = run_child(["sweep", "--resume", "--quiet", "-o", str(path), *new_shapes(shapes)], tmp)
            recs = json.loads(path.read_text())["records"][n:]
            rows[n].append({"round": r, "counts": counts, "records": recs})
    print(f"\n# overhead: {shapes} new shapes appended with sweep --resume, {rounds} rounds, sizes interleaved")
    print(f"{'records':>8} {'overhead ms':>12} {'p90 ms':>7} {'worker ms':>10} {'journal B/rec':>14} "
          f"{'whole MB/run':>13} {'run wall s':>11}  per round (overhead ms)")
    for n in sizes:
        over = [x["overhead_s"] * 1e3 for row in rows[n] for x in row["records"] if "overhead_s" in x]
        setup = [(x["worker_s"] - x["measure_wall_s"]) * 1e3 for row in rows[n] for x in row["records"]]
        line = [b for row in rows[n] for b in row["counts"]["journal_lines"]]
        whole = statistics.median(sum(row["counts"]["whole_writes"]) / 1e6 for row in rows[n])
        wall = statistics.median(row["counts"]["wall_s"] for row in rows[n])
        per_round = ", ".join(f"{statistics.median(_overheads(row)) * 1e3:.1f}" for row in rows[n])
        p90 = statistics.quantiles(over, n=10)[-1] if len(over) > 1 else over[0]
        print(f"{n:>8} {statistics.median(over):>12.1f} {p90:>7.1f} {statistics.median(setup):>10.0f} "
              f"{statistics.median(line):>14.0f} {whole:>13.2f} {wall:>11.1f}  {per_round}")


def append_part(seed: dict[str, Any], shapes: int, rounds: int, tmp: Path) -> None:
    walls: dict[str, list[float]] = {"fresh": [], "appended to 10,000": []}
    for _ in range(rounds):
        for kind in walls:
            # "fresh": the seed's one record, so both take the same path (a resume, no clock probe)
            path = padded(seed, 1 if kind == "fresh" else 10_000, tmp / "append.json")
            start = time.perf_counter()
            run_child(["sweep", "--resume", "--quiet", "-o", str(path), *new_shapes(shapes)], tmp)
            walls[kind].append(time.perf_counter() - start)
    fresh, big = (statistics.median(v) for v in walls.values())
    print(f"\n# append: {shapes} shapes into a fresh file and appended to a 10,000-record file, alternating")
    for kind, values in walls.items():
        print(f"{kind:>20}: " + ", ".join(f"{v:.1f} s" for v in values))
    print(f"goal: appended <= 1.5 x fresh + 10 s = {1.5 * fresh + 10:.1f} s; median appended {big:.1f} s: "
          + ("met" if big <= 1.5 * fresh + 10 else "NOT met"))


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of ``cmd`` as a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def reading_part(seed: dict[str, Any], rounds: int, tmp: Path) -> None:
    path = padded(seed, 10_125, tmp / "big.json")
    cli = [sys.executable, "-m", "mfu_sweep"]
    steps = {"validate": [*cli, "validate", str(path)],
             "merge -o": [*cli, "merge", str(path), "-o", str(tmp / "merged.json"), "--force"],
             "load_sweeps": [sys.executable, "-c", f"from mfu_sweep.records.results import load_sweeps; "
                                                   f"load_sweeps([{str(path)!r}])"]}
    print(f"\n# reading a 10,125-record sweep ({path.stat().st_size / 1e6:.1f} MB), each step its own process")
    for name, cmd in steps.items():
        runs = [timed(cmd) for _ in range(rounds)]
        print(f"{name:>12}: wall {min(w for w, _ in runs):.2f} s, CPU {min(c for _, c in runs):.2f} s "
              f"(best of {rounds}; goal 2 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="overhead,append,reading")
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--shapes", type=int, default=30, help="new shapes per overhead run")
    parser.add_argument("--append", type=int, default=200, help="shapes of the append goal")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.child:
        child(args.child, [a for a in rest if a != "--"])
        return
    print(f"code {Path(__file__).resolve().parent.parent}; {os.cpu_count()} CPUs; "
          f"load average at start {os.getloadavg()[0]:.2f}")
    parts = args.parts.split(",")
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        seed = seed_record(tmp)
        if "overhead" in parts:
            overhead_part(seed, [int(s) for s in args.sizes.split(",")], args.shapes, args.rounds, tmp)
        if "append" in parts:
            append_part(seed, args.append, max(1, args.rounds // 2), tmp)
        if "reading" in parts:
            reading_part(seed, max(3, args.rounds), tmp)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
