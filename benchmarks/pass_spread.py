"""How much a shape's median moves between passes, against the interval one pass gives it.

Reads one sweep made with ``--repeats R`` (its passes), or several one-pass
sweeps of the same settings (each file one pass), and prints per shape: the
median of every pass, the spread between passes (max/min - 1 and the standard
deviation of log medians), and the half-width of the within-pass 95% CI of the
median (the mean over passes). Real measurements only; nothing is simulated.

    python benchmarks/pass_spread.py sweeps/my-cpu.json
    python benchmarks/pass_spread.py run1.json run2.json run3.json
"""

from __future__ import annotations

import math
import statistics
import sys
from collections import defaultdict

from mfu_sweep.records.results import load_sweeps


def main(paths: list[str]) -> None:
    sweeps = load_sweeps(paths)
    one_pass_each = len(sweeps) > 1
    medians: dict[tuple, dict[int, float]] = defaultdict(dict)
    halfwidths: dict[tuple, list[float]] = defaultdict(list)
    for i, sw in enumerate(sweeps):
        for r in sw.records:
            if not r.ok or not r.ci_low_s or not r.ci_high_s:
                continue
            key = (r.flops, str(r.shape), r.dtype, r.mode)
            medians[key][i if one_pass_each else r.run_pass] = r.median_s
            halfwidths[key].append((r.ci_high_s - r.ci_low_s) / 2 / r.median_s)
    print(f"{'shape':>14} {'dtype':>5} {'GFLOP':>9} {'passes':>6} {'max/min-1':>9} {'sd(log)':>8} "
          f"{'CI half':>8} {'ratio':>6}")
    between, within = [], []
    for key in sorted(medians):
        meds = list(medians[key].values())
        if len(meds) < 2:
            continue
        spread = max(meds) / min(meds) - 1
        sd = statistics.stdev(math.log(m) for m in meds)
        half = statistics.mean(halfwidths[key])
        between.append(sd)
        within.append(half / 1.96)
        print(f"{key[1]:>14} {key[2]:>5} {key[0] / 1e9:>9.3g} {len(meds):>6} {spread:>9.1%} {sd:>8.2%} "
              f"{half:>8.2%} {sd / (half / 1.96):>6.1f}")
    if between:
        print(f"median over shapes: between-pass sd(log) {statistics.median(between):.2%}, "
              f"within-pass CI sd {statistics.median(within):.2%}, "
              f"ratio {statistics.median(b / w for b, w in zip(between, within, strict=True)):.1f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
