"""``--timer cputime`` against the default host clock on the CPU: idle, and beside two busy loops per core.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/cputime.py [--pairs 6] [--sizes 256,1024,2048] [--dtypes fp32,bf16]

Each pair is two real CLI sweeps (``mfu-sweep sweep --device cpu --repeats 1 --cache none`` over every size
and dtype, in the sweep's worker), one with the default timer and one with ``--timer cputime``, in
alternating order (the VM's speed moves between minutes). ``--pairs`` pairs run on the machine as it is
(meant: idle), then as many again with two busy loops per core (``python -c 'while True: pass'``, started and
stopped here). Printed per size and dtype:

* idle: cputime/default, the median over the idle pairs (goal 0.97-1.03, issue 51);
* busy: each timer's median under the busy loops over its own idle median (goal: cputime within 10%,
  where the default is not).

Also the load average at each phase: run it on a quiet machine, where the idle phase is idle. This is a
report, not a test; the result goes in docs/fidelity.md.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fidelity import load, machine, tool_run  # noqa: E402

TIMERS = {"default": [], "cputime": ["--timer", "cputime"]}


def phase(pairs: int, sizes: list[int], dtypes: list[str], tmp: Path, tag: str) -> dict[str, list[dict[str, float]]]:
    """``pairs`` alternating pairs of sweeps: per timer, one {size/dtype: median s} per pair."""
    got: dict[str, list[dict[str, float]]] = {t: [] for t in TIMERS}
    for i in range(pairs):
        order = list(TIMERS) if i % 2 == 0 else list(reversed(TIMERS))
        for timer in order:
            run = tool_run(sizes, dtypes, tmp / f"{tag}{i}-{timer}.json", ["--cache", "none", *TIMERS[timer]])
            got[timer].append(run["medians"])
        print(f"{tag} pair {i + 1}/{pairs} ({' then '.join(order)}, load {load()}): "
              + ", ".join(f"{k} {got['cputime'][-1][k] / got['default'][-1][k]:.3f}" for k in got["default"][-1]
                          if k in got["cputime"][-1]), flush=True)
    return got


def _median(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs if key in r)


def busy_loops(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="256,1024,2048")
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--pairs", type=int, default=6, help="pairs per phase [6]")
    parser.add_argument("--per-core", type=int, default=2, help="busy loops per core in the busy phase [2]")
    args = parser.parse_args()
    sizes, dtypes = [int(s) for s in args.sizes.split(",")], args.dtypes.split(",")
    t0 = time.perf_counter()
    print(f"machine: {machine()}; load average at start {load()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        idle = phase(args.pairs, sizes, dtypes, Path(tmp), "idle")
        loops = busy_loops(args.per_core * (os.cpu_count() or 1))
        try:
            time.sleep(2.0)
            busy = phase(args.pairs, sizes, dtypes, Path(tmp), "busy")
        finally:
            for p in loops:
                p.kill()
                p.wait()
    print(f"\n{'shape':>7} {'dtype':>5} {'idle cputime/default':>21} {'busy/idle cputime':>18} "
          f"{'busy/idle default':>18}")
    for dtype in dtypes:
        for size in sizes:
            key = f"{size}/{dtype}"
            pairs = [c[key] / d[key] for c, d in zip(idle["cputime"], idle["default"], strict=True)
                     if key in c and key in d]
            if not pairs:
                continue
            drift = {t: _median(busy[t], key) / _median(idle[t], key) for t in TIMERS}
            print(f"{f'{size}^3':>7} {dtype:>5} {statistics.median(pairs):>14.3f} ({min(pairs):.3f}-{max(pairs):.3f})"
                  f" {drift['cputime']:>18.3f} {drift['default']:>18.3f}")
    print(f"goals: idle 0.97-1.03; busy/idle cputime within 0.90-1.10 where the default is not; "
          f"load average at end {load()}; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
