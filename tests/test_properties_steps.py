"""The intervals of ``predict --steps`` over seeds: break-even coverage at R = 2, 3, 5 passes and the width of the
bootstrap against the t interval it stands for.

Every number here is SYNTHETIC (made-up step costs with a known truth, nothing measured): four distinct GEMMs of a
step, eager and compiled (1.3x faster per call, a compile cost of 0.6-2 s per shape), each pass of each shape with
its own normal error (3% on the steady time, 10% on the compile cost). The costs go straight into the library's
own types (:class:`~mfu_sweep.analysis.steps.costs.SeriesCosts`), so thousands of seeds take seconds. Until now
only the transcript of docs/time-to-steps.md noticed a slip in the bootstrap's degrees of freedom (issue 52).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t as student_t

from mfu_sweep.analysis.steps.costs import PassCost, SeriesCosts, ShapeCost, StepKey
from mfu_sweep.analysis.steps.crossings import crossing_interval
from mfu_sweep.analysis.steps.draws import draw_costs, interval
from mfu_sweep.gemm.shapes import Shape

SHAPES = (Shape(1, 64, 4096, 4096), Shape(1, 64, 1024, 4096), Shape(1, 64, 14336, 4096), Shape(1, 64, 4096, 14336))
CALLS = np.array([2, 2, 2, 1])
TAU = np.array([4e-3, 1e-3, 14e-3, 14e-3])  # SYNTHETIC eager seconds per call
KAPPA = np.array([1.0, 0.6, 2.0, 1.5])  # SYNTHETIC compile seconds per shape
EAGER_FIRST = 1e-4  # SYNTHETIC extra seconds of an eager first call
SPEEDUP = 1.3


def _costs(mode: str, repeats: int, rng: np.random.Generator, run: str) -> SeriesCosts:
    """One step series measured in ``repeats`` passes of one run (eager and compile share the run's passes)."""
    steady = TAU if mode == "eager" else TAU / SPEEDUP
    extra = np.full(len(TAU), EAGER_FIRST) if mode == "eager" else KAPPA
    shapes = []
    for shape, calls, tau, over in zip(SHAPES, CALLS.tolist(), steady, extra, strict=True):
        x = tau * (1 + 0.03 * rng.standard_normal(repeats))
        f = x + over * (1 + 0.1 * rng.standard_normal(repeats))
        shapes.append(ShapeCost(shape, calls, tuple(PassCost(run, j, float(x[j]), float(f[j]))
                                                     for j in range(repeats))))
    return SeriesCosts(StepKey("synthetic", "bf16", mode), tuple(shapes), repeats=((run, repeats),))


def _break_even() -> float:
    """The planted N from which the compiled step has finished first: extra one-time cost over steady gain."""
    steady = float(CALLS @ TAU)
    return float(KAPPA.sum() - len(TAU) * EAGER_FIRST) / (steady - steady / SPEEDUP)


@pytest.mark.parametrize("repeats", [2, 3, 5])
def test_break_even_interval_covers_at_its_nominal_rate(repeats: int) -> None:
    """The 95% interval of the break-even N holds the planted N in 93-97% of 1,500 seeds at R = 2, 3 and 5 passes
    (95.9%, 95.4%, 95.1% over 2,000; a standard error of 0.6 points). The bootstrap's t with R degrees of freedom
    instead of R - 1 covers 87.1% at R = 2 and 92.0% at R = 3 (the interval 4x narrower at R = 2)."""
    hits, _ = break_even_coverage(repeats, 1500)
    assert 0.93 <= hits / 1500 <= 0.97, hits


def break_even_coverage(repeats: int, seeds: int) -> tuple[int, float]:
    """(seeds whose 95% break-even interval holds the planted N, median width / N) over ``seeds`` seeds
    (benchmarks/calibration.py --part round6 runs more)."""
    planted, hits, widths = _break_even(), 0, []
    for seed in range(seeds):
        rng = np.random.default_rng([seed, repeats])
        run = f"synthetic-run-{seed}"
        eager = draw_costs(_costs("eager", repeats, rng, run), 1000, seed).line()
        compiled = draw_costs(_costs("compile", repeats, rng, run), 1000, seed).line()
        iv = crossing_interval(eager, compiled, 0.05)
        hits += bool(iv.low <= planted <= iv.high)
        widths.append((iv.high - iv.low) / planted)
    return hits, float(np.median(widths))


@pytest.mark.parametrize("repeats", [2, 3, 5])
def test_one_shapes_interval_is_the_t_interval_of_its_mean(repeats: int) -> None:
    """One shape measured in R passes: the bootstrap's 95% interval of its steady time is, within Monte Carlo error,
    Student's ``mean +- t(0.975, R - 1) s / sqrt(R)``, the analytic interval of a mean of R normal values (mean
    half-width ratio over 25 seeds within 5%). Slips it catches: the t's degrees of freedom taken as R (x0.34 at
    R = 2), the spread divided by R instead of sqrt(R (R - 1)) (x0.71, x0.82, x0.89 at R = 2, 3, 5)."""
    ratios = []
    for seed in range(25):
        rng = np.random.default_rng([seed, repeats, 1])
        x = 1e-3 * (1 + 0.01 * rng.standard_normal(repeats))  # small spread: no draw is clipped at 0
        shape = ShapeCost(SHAPES[0], 1, tuple(PassCost(f"run-{seed}", j, float(v), float(v) + 1.0)
                                              for j, v in enumerate(x)))
        costs = SeriesCosts(StepKey("synthetic", "bf16", "eager"), (shape,), repeats=((f"run-{seed}", repeats),))
        line = draw_costs(costs, 8000, seed).line()
        iv = interval(line.steady, line.steady_draws, 0.05, line.spread)
        half = float(student_t.ppf(0.975, repeats - 1)) * float(np.std(x, ddof=1)) / math.sqrt(repeats)
        assert iv.value == pytest.approx(float(x.mean()), rel=1e-12)
        ratios.append((iv.high - iv.low) / (2 * half))
    assert 0.95 <= float(np.mean(ratios)) <= 1.05, ratios
