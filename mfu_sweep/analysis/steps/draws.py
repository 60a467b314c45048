"""The intervals of step times: a bootstrap over the passes.

The workload fixes the shapes, so every draw keeps every shape, each with all its passes; what a draw
varies is the weight of each pass. Draw ``b`` gives a shape measured in R passes (values ``x_j``, mean
``x̄``) the value

    x̄ + g_b · Σ_j z_bj (x_j − x̄) / √(R (R − 1))

with ``z_bj`` standard normal and ``g_b = √(ν / χ²_ν)``, ``ν = R − 1``: a wild bootstrap whose draws
are Student's t with R − 1 degrees of freedom about the mean, the same t the fits' pass shifts use
(:func:`mfu_sweep.analysis.fits.roofline.pass_shifts`). A pass keeps its multiplier ``z`` in every
shape, both modes and every series of its run (the stream is seeded by the run id and the pass), so a
pass that ran slow for every shape (a busy machine, a lower clock) moves the whole step, and cancels
where two series of one run are compared, as it does in the data. Steady time and first call of one
shape in one pass share the multiplier too.

Why not resample each shape's passes with replacement: with the 2 to 5 passes sweeps make, the
bootstrap distribution of a mean of R values is too narrow (79% coverage of the break-even at R = 2,
89% at R = 3, 94% at R = 5 on SYNTHETIC sweeps); the t-scaled weights keep it at 89-97% for every R
and noise ``benchmarks/steps_calibration.py`` tries. A shape measured in one pass contributes no
spread: with only such shapes there is no interval (``spread`` is false), and ``sweep --repeats``
gives one.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mfu_sweep.analysis.steps.costs import SeriesCosts
from mfu_sweep.gemm.shapes import Shape

DEFAULT_N_BOOT = 2000
WEIGHT_STREAM, SCALE_STREAM = 1, 2  # second and third words of the generators' seeds


@dataclass(frozen=True)
class Interval:
    """An estimate and its interval; ``low``/``high`` None: no interval (one pass); ``high`` inf: never."""

    value: float
    low: float | None = None
    high: float | None = None

    def to_json(self) -> dict[str, float | None]:
        return {"value": _finite(self.value), "low": _finite(self.low), "high": _finite(self.high)}


def _finite(x: float | None) -> float | None:
    """JSON has no infinity: None stands for "never" (or no interval, where the value is given)."""
    return None if x is None or not math.isfinite(x) else float(x)


def interval(value: float, draws: np.ndarray, alpha: float, spread: bool) -> Interval:
    """``value`` with the equal-tailed ``1 - alpha`` percentile interval of ``draws`` (inf allowed)."""
    if not spread:
        return Interval(float(value))
    lo, hi = np.quantile(draws, [alpha / 2, 1 - alpha / 2], method="inverted_cdf")
    return Interval(float(value), float(lo), float(hi))


def _word(run: str) -> int:
    return int.from_bytes(hashlib.blake2b(run.encode(), digest_size=8).digest(), "little")


def pass_weights(keys: Sequence[tuple[str, int]], repeats: Mapping[str, int], n_boot: int,
                 seed: int) -> np.ndarray:
    """``g_b · z_bj`` for every pass key (run id, pass): shape ``(n_boot, len(keys))``.

    ``z`` comes from a stream of its own pass, ``g`` from one of its run with ``repeats[run] − 1``
    degrees of freedom (at least 1), so any series of the run draws the same weights for the pass.
    """
    out = np.empty((n_boot, len(keys)))
    scales: dict[str, np.ndarray] = {}
    for i, (run, run_pass) in enumerate(keys):
        if run not in scales:
            df = max(1, repeats.get(run, 2) - 1)
            chi2 = np.random.default_rng([seed, _word(run), SCALE_STREAM]).chisquare(df, n_boot)
            scales[run] = np.sqrt(df / chi2)
        z = np.random.default_rng([seed, _word(run), WEIGHT_STREAM, run_pass]).standard_normal(n_boot)
        out[:, i] = scales[run] * z
    return out


@dataclass(frozen=True)
class StepLine:
    """Time to N steps (or N calls) as a line in N: ``overhead + N * steady``, with bootstrap draws of both.

    ``overhead`` is what the first step costs beyond a steady one (first calls minus one steady call of
    every distinct shape); the first step is ``overhead + steady``. ``spread`` false: no interval.
    """

    overhead: float
    steady: float
    overhead_draws: np.ndarray
    steady_draws: np.ndarray
    spread: bool

    def at(self, n: float) -> float:
        return self.overhead + n * self.steady

    def draws_at(self, n: float) -> np.ndarray:
        return self.overhead_draws + n * self.steady_draws


@dataclass(frozen=True)
class ShapeDraws:
    """Point values and bootstrap draws of every shape of one step series.

    ``steady`` and ``first`` are the means over passes (seconds, one per shape); ``*_draws`` are
    ``(n_boot, shapes)``; ``calls`` the calls per step; ``spread``: some shape had two passes or more.
    """

    shapes: tuple[Shape, ...]
    calls: np.ndarray
    steady: np.ndarray
    first: np.ndarray
    steady_draws: np.ndarray
    first_draws: np.ndarray
    spread: bool

    @property
    def overhead(self) -> np.ndarray:
        """Per shape, what the first call costs beyond a steady call."""
        return self.first - self.steady

    @property
    def overhead_draws(self) -> np.ndarray:
        return self.first_draws - self.steady_draws

    def line(self) -> StepLine:
        """The whole step: one-time overhead plus N steady steps."""
        return StepLine(math.fsum(self.overhead), math.fsum(self.calls * self.steady),
                        self.overhead_draws.sum(axis=1), self.steady_draws @ self.calls, self.spread)

    def shape_line(self, i: int) -> StepLine:
        """Shape ``i`` alone, per call: its first call's overhead plus N steady calls."""
        return StepLine(float(self.overhead[i]), float(self.steady[i]), self.overhead_draws[:, i],
                        self.steady_draws[:, i], self.spread)


def mean_draws(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Draws of the mean of ``values`` (one per pass or run) under ``weights`` (``(n_boot, len(values))``,
    from :func:`pass_weights`): Student's t with ``len(values) - 1`` degrees of freedom about the mean."""
    mean = values.mean()
    if len(values) < 2:
        return np.full(weights.shape[0], mean)
    dev = weights @ (values - mean) / math.sqrt(len(values) * (len(values) - 1))
    return np.maximum(mean + dev, 0.0)  # a time is never negative, whatever the tails of t with few passes


def draw_costs(costs: SeriesCosts, n_boot: int = DEFAULT_N_BOOT, seed: int = 0) -> ShapeDraws:
    """Means and bootstrap draws of every shape's steady time and first call on one step series."""
    keys = sorted({(p.run, p.run_pass) for s in costs.shapes for p in s.passes})
    column = {k: i for i, k in enumerate(keys)}
    weights = pass_weights(keys, dict(costs.repeats), n_boot, seed)
    n = len(costs.shapes)
    steady, first = np.empty(n), np.empty(n)
    steady_draws, first_draws = np.empty((n_boot, n)), np.empty((n_boot, n))
    for i, shape in enumerate(costs.shapes):
        w = weights[:, [column[(p.run, p.run_pass)] for p in shape.passes]]
        x = np.array([p.steady_s for p in shape.passes])
        f = np.array([p.first_s for p in shape.passes])
        steady[i], first[i] = x.mean(), f.mean()
        steady_draws[:, i], first_draws[:, i] = mean_draws(x, w), mean_draws(f, w)
    return ShapeDraws(shapes=tuple(s.shape for s in costs.shapes),
                      calls=np.array([s.calls for s in costs.shapes], dtype=float), steady=steady, first=first,
                      steady_draws=steady_draws, first_draws=first_draws,
                      spread=any(len(s.passes) > 1 for s in costs.shapes))
