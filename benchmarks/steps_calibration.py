"""Coverage of the break-even interval of ``predict --steps`` on SYNTHETIC sweeps with known compile costs and speeds.

Run:  make steps-calibration    (or: .venv/bin/python benchmarks/steps_calibration.py [--seeds 400])

Every number comes from tests/synthetic_steps.py (made-up chips, nothing measured): the shapes of
llm:llama-3-8b:tokens=64:tp=8:lm_head=0 in eager and compile mode, compile 1.28x faster per call, a compile
cost per shape drawn from 0.5-3 s, R passes, and the noise of real machines: per (pass, shape) shifts, a slow
drift along the sweep, outlying passes (slow compiles too), a shift per pass shared by every shape of it.
The truth is the expected one-time cost and steady step, so the planted break-even N is known per seed.

Per case it prints how often the 95% interval of the break-even N holds the planted N, with its two-sided
95% Clopper-Pearson interval, and the median width of the interval relative to N. The goal (issue 39):
90-98% at every case. The last table shows why the library does not resample each shape's passes with
replacement (a percentile bootstrap of the mean of R values): too narrow with few passes.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from scipy.stats import beta  # noqa: E402
from synthetic import NoiseModel  # noqa: E402
from synthetic_steps import FAMILY, FIRST_NOISE, STEADY_NOISE, step_sweep  # noqa: E402

from mfu_sweep.analysis.steps.costs import collect_costs  # noqa: E402
from mfu_sweep.analysis.steps.time_to_n import predict_steps  # noqa: E402
from mfu_sweep.gemm.workloads import resolve_family  # noqa: E402

GEMMS = resolve_family(FAMILY)
CASES = {
    "all of them (the default)": (STEADY_NOISE, FIRST_NOISE),
    "per-shape shifts only": (NoiseModel("s", sample=0.0, shape_shift=0.03), NoiseModel("f", sample=0.0,
                                                                                         shape_shift=0.15)),
    "pass shifts 5%": (NoiseModel("s", sample=0.0, shape_shift=0.02, pass_shift=0.05),
                       NoiseModel("f", sample=0.0, shape_shift=0.15, pass_shift=0.05)),
    "drift 3%": (NoiseModel("s", sample=0.0, shape_shift=0.01, drift=0.03, drift_len=6.0),
                 NoiseModel("f", sample=0.0, shape_shift=0.15)),
    "outliers (5% of passes)": (NoiseModel("s", sample=0.0, shape_shift=0.02, outlier_rate=0.05),
                                NoiseModel("f", sample=0.0, shape_shift=0.1, outlier_rate=0.05, outlier_size=0.7)),
    "noisy compiles (30%)": (NoiseModel("s", sample=0.0, shape_shift=0.03),
                             NoiseModel("f", sample=0.0, shape_shift=0.3)),
}


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(beta.ppf(0.025, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(0.975, k + 1, n - k))
    return lo, hi


def score(seeds: int, repeats: int, steady: NoiseModel, first: NoiseModel, n_boot: int) -> tuple[int, float]:
    """(seeds whose interval holds the planted N, median relative width)."""
    hits, widths = 0, []
    for seed in range(seeds):
        sweep, truth = step_sweep(seed, repeats=repeats, steady_noise=steady, first_noise=first)
        [b] = predict_steps([sweep], GEMMS, dtype="bf16", steps=(1,), n_boot=n_boot, seed=seed).break_evens
        hits += b.n.low <= truth.break_even <= b.n.high
        widths.append((b.n.high - b.n.low) / truth.break_even)
    return hits, float(np.median(widths))


def naive(seeds: int, repeats: int, n_boot: int) -> int:
    """Seeds whose percentile interval from resampling each shape's passes with replacement holds the N."""
    hits = 0
    for seed in range(seeds):
        sweep, truth = step_sweep(seed, repeats=repeats)
        rng = np.random.default_rng(seed)
        totals = {}
        for costs in collect_costs([sweep], GEMMS, "bf16"):
            over, step = np.zeros(n_boot), np.zeros(n_boot)
            for shape in costs.shapes:
                x = np.array([p.steady_s for p in shape.passes])
                f = np.array([p.first_s for p in shape.passes])
                pick = rng.integers(0, len(x), (n_boot, len(x)))
                over += f[pick].mean(axis=1) - x[pick].mean(axis=1)
                step += shape.calls * x[pick].mean(axis=1)
            totals[costs.key.mode] = (over, step)
        gain = totals["eager"][1] - totals["compile"][1]
        with np.errstate(divide="ignore", invalid="ignore"):
            n = np.where(gain > 0, (totals["compile"][0] - totals["eager"][0]) / gain, np.inf)
        lo, hi = np.quantile(n, [0.025, 0.975], method="inverted_cdf")
        hits += lo <= truth.break_even <= hi
    return hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=400, help="seeds per case (at least 200)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap draws per prediction")
    args = parser.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)
    t0 = time.perf_counter()
    print(f"Break-even interval (95%) against the planted N, SYNTHETIC, {args.seeds} seeds per case, "
          f"{args.n_boot} draws")
    print("| noise | passes | coverage [95% CI] | median width / N |")
    print("|---|---:|---:|---:|")
    for name, (steady, first) in CASES.items():
        for repeats in (2, 3, 5):
            hits, width = score(args.seeds, repeats, steady, first, args.n_boot)
            lo, hi = clopper_pearson(hits, args.seeds)
            print(f"| {name} | {repeats} | {hits / args.seeds:.1%} [{lo:.1%}, {hi:.1%}] | {width:.2f} |", flush=True)
    print("\nFor comparison, resampling each shape's passes with replacement (default noise):")
    print("| passes | coverage [95% CI] |")
    print("|---:|---:|")
    for repeats in (2, 3, 5):
        hits = naive(args.seeds, repeats, args.n_boot)
        lo, hi = clopper_pearson(hits, args.seeds)
        print(f"| {repeats} | {hits / args.seeds:.1%} [{lo:.1%}, {hi:.1%}] |", flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
