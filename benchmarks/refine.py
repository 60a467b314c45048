"""Adaptive refinement vs the uniform grid: crossovers located, interval widths, device time, false crossovers.

Run:  .venv/bin/python benchmarks/refine.py [--seeds 40] [--real]

SYNTHETIC part (the default; every number comes from tests/synthetic_refine.py,
nothing is measured): a simulated device and a reference whose true speed ratio
changes sign at two known FLOP counts (10^8.5 and 10^11), with per-(pass, shape)
shifts, a slow drift within each pass, whole-pass shifts and outlying passes.
Both start from the default accelerator sweep (4 square sizes per decade, 1
MFLOP to 10 TFLOP, 3 passes); ``refine`` then runs the cross-machine loop (both
devices measure the proposed shape file) until it says settled or its looks are
spent. The uniform grids are denser square families with more passes, compared
once at alpha 0.05 as ``mfu-sweep compare`` does. Device time is simulated per
shape and pass (``synthetic_refine.shape_pass_cost``: the 1 s timing budget plus
first call and overhead), per device. It prints, per strategy: device seconds,
the share of seeds that locate both crossovers within a factor 1.5 of the truth,
the median of the wider crossover interval, the share of seeds whose both
intervals are at most x1.5; and, on two identical devices, the share of seeds
with any crossover (false crossovers).

REAL part (``--real``): see ``benchmarks/refine_real.py``.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from synthetic_refine import SimDevice, SimSweep, crossing_ratio  # noqa: E402  (SYNTHETIC)

from mfu_sweep.analysis.refine.looks import DEFAULT_LOOKS  # noqa: E402
from mfu_sweep.analysis.refine.plan import plan_refinement  # noqa: E402
from mfu_sweep.analysis.verdicts.compare import compare_all  # noqa: E402
from mfu_sweep.gemm.shapes import points_for_range, square_family  # noqa: E402

TRUTH = (8.5, 11.0)  # log10 FLOPs of the planted crossovers
RANGE = (1e6, 1e13)
TARGET = 1.5


@dataclass(frozen=True)
class Outcome:
    seconds: float  # device seconds, one device
    crossovers: tuple[tuple[float, float, float], ...]  # (flops, low, high) of the data crossovers

    def located(self, truth: Sequence[float]) -> bool:
        """Exactly one crossover per planted one, each within a factor 1.5 of it."""
        if len(self.crossovers) != len(truth):
            return False
        return all(abs(math.log10(f) - t) <= math.log10(1.5) for (f, _, _), t in zip(self.crossovers, truth))

    def width(self) -> float:
        return max((hi / lo for _, lo, hi in self.crossovers), default=math.inf)


def _crossovers(comparison) -> tuple[tuple[float, float, float], ...]:  # noqa: ANN001
    return tuple((c.flops, c.low_flops, c.high_flops) for c in comparison.crossovers if c.method != "fit")


def uniform(devices: tuple[SimDevice, SimDevice], per_decade: float, repeats: int, seed: int) -> Outcome:
    rng = np.random.default_rng(seed)
    grid = square_family(*RANGE, points_for_range(*RANGE, per_decade))
    a, b = SimSweep(devices[0], repeats), SimSweep(devices[1], repeats)
    a.run(grid, "square", rng)
    b.run(grid, "square", rng)
    [comp] = compare_all([a.sweep(), b.sweep()], use_fit=False)
    return Outcome(a.seconds, _crossovers(comp))


def refine(devices: tuple[SimDevice, SimDevice], seed: int, looks: int = DEFAULT_LOOKS) -> tuple[Outcome, int]:
    rng = np.random.default_rng(seed)
    grid = square_family(*RANGE, points_for_range(*RANGE, 4))
    a, b = SimSweep(devices[0], 3), SimSweep(devices[1], 3)
    a.run(grid, "square", rng)
    b.run(grid, "square", rng)
    while True:
        plan = plan_refinement([a.sweep(), b.sweep()], target=TARGET, looks=looks)
        if plan.status != "open":
            return Outcome(a.seconds, _crossovers(plan.comparisons[0])), plan.look.index
        rows = [(p.shape, p.passes) for p in plan.proposals]
        family = plan.family
        a.run(rows, family, rng)
        b.run(rows, family, rng)


def summarise(name: str, outs: Sequence[Outcome], truth: Sequence[float]) -> dict[str, float]:
    w = np.array([o.width() for o in outs])
    row = {"seconds": float(np.mean([o.seconds for o in outs])),
           "located": float(np.mean([o.located(truth) for o in outs])),
           "median_width": float(np.median(w)), "within_target": float(np.mean(w <= TARGET))}
    print(f"| {name} | {row['seconds']:.0f} | {row['located']:.0%} | x{row['median_width']:.2f} | "
          f"{row['within_target']:.0%} |", flush=True)
    return row


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--grids", default="4x3,8x6,12x6,12x12,16x12", help="uniform grids PER_DECADExPASSES")
    ap.add_argument("--real", action="store_true", help="the two real CPU series instead (refine_real.py)")
    args = ap.parse_args(argv)
    if args.real:
        from refine_real import main as real_main

        real_main()
        return
    pair = (SimDevice("dev", crossing_ratio(TRUTH)), SimDevice("ref"))
    same = (SimDevice("dev"), SimDevice("ref"))
    seeds = range(args.seeds)
    print(f"SYNTHETIC pair, crossovers at 10^{TRUTH[0]} and 10^{TRUTH[1]} FLOP, {args.seeds} seeds\n")
    print("| strategy | device s | both located (x1.5) | median wider interval | both <= x1.5 |")
    print("|---|---|---|---|---|")
    results = [refine(pair, s) for s in seeds]
    summarise(f"refine (looks used: median {np.median([r[1] for r in results]):.0f})", [r[0] for r in results], TRUTH)
    for grid in args.grids.split(","):
        per, reps = (float(x) for x in grid.split("x"))
        summarise(f"uniform {per:g}/decade x {reps:g} passes", [uniform(pair, per, int(reps), s) for s in seeds],
                  TRUTH)
    print("\nSYNTHETIC identical devices: share of seeds with any crossover (false crossovers)\n")
    false_refine = [refine(same, 1000 + s)[0] for s in seeds]
    print(f"refine: {np.mean([len(o.crossovers) > 0 for o in false_refine]):.1%} "
          f"(mean device s {np.mean([o.seconds for o in false_refine]):.0f})")
    for grid in args.grids.split(","):
        per, reps = (float(x) for x in grid.split("x"))
        outs = [uniform(same, per, int(reps), 1000 + s) for s in seeds]
        print(f"uniform {per:g}/decade x {reps:g} passes: {np.mean([len(o.crossovers) > 0 for o in outs]):.1%}")


if __name__ == "__main__":
    main()
