"""The roofline-with-overhead model of time per call, its Jacobian, and how it is solved and bootstrapped.

``log_time(x, ln F, ln B)`` with ``x = (ln t0, ln P[TFLOP/s], ln W[TB/s][, ln p])``
is the model :mod:`mfu_sweep.analysis.fits.fit` fits (hard ``max`` roof with 3
parameters, smooth ``pnorm`` knee with 4). Every function here takes one
parameter vector or many at once (shape ``(n_params, B, 1)``), which is what
lets the batch solver of :mod:`mfu_sweep.analysis.fits.lsq` fit all starting points
and all bootstrap resamples together. ``solver="scipy"`` solves the same
problems one by one with ``scipy.optimize.least_squares`` (the reference).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from mfu_sweep.analysis.fits import lsq
from mfu_sweep.analysis.fits.batch import Problem, Steps
from mfu_sweep.analysis.ground.series import Series

# A parameter is "constrained" when, at some measured shape, a 1% change of it
# moves the predicted time by at least this many percent.
MIN_LEVERAGE = 0.2
LN_TERA = 12 * math.log(10)
# Bounds in log space: t0 in [1 ns, 100 s], P in [1e-6, 1e5] TFLOP/s,
# W in [1e-6, 1e4] TB/s, p in [1, 50].
LOWER = np.log([1e-9, 1e-6, 1e-6, 1.0])
UPPER = np.log([1e2, 1e5, 1e4, 50.0])
PARAMS = ("t0_s", "p_tflops", "w_tbs", "blend_p")


@dataclass(frozen=True)
class ShapeData:
    """Distinct shapes of a series with their pooled samples (seconds).

    ``passes`` holds, per shape, the pass (0 .. ``n_passes - 1``, in the order of
    ``Record.run_pass``) of each of its samples; empty when nothing says so.
    """

    flops: np.ndarray
    bytes: np.ndarray
    samples: tuple[np.ndarray, ...]
    passes: tuple[np.ndarray, ...] = ()

    @property
    def n_passes(self) -> int:
        return 1 + max((int(p.max()) for p in self.passes if len(p)), default=0)

    @cached_property
    def log_median(self) -> np.ndarray:
        out = np.empty(len(self.samples))
        sizes = np.array([len(s) for s in self.samples])
        for size in np.unique(sizes):  # np.median's values, shapes with equal sample counts at once
            rows = np.flatnonzero(sizes == size)
            out[rows] = _median_last(np.stack([self.samples[i] for i in rows]))
        return np.log(out)


def shape_data(series: Series) -> ShapeData:
    """Pool the samples of records with the same shape (several runs may measure one shape).

    Each record's shape is looked up once (an import of 200,000 shapes hashed each shape five times)."""
    index: dict[Any, int] = {}
    shapes: list[Any] = []
    pooled: list[list[float]] = []
    run_pass: list[list[int]] = []
    size: list[tuple[float, float]] = []
    dense = {p: i for i, p in enumerate(sorted({rec.run_pass for rec in series.records}))}
    for rec in series.records:
        i = index.setdefault(rec.shape, len(shapes))
        if i == len(shapes):
            shapes.append(rec.shape)
            pooled.append([])
            run_pass.append([])
            size.append((rec.flops, rec.bytes))
        pooled[i].extend(rec.samples_s)
        run_pass[i].extend([dense[rec.run_pass]] * len(rec.samples_s))
        size[i] = (rec.flops, rec.bytes)  # the last record's, as before
    order = sorted(range(len(shapes)), key=lambda i: (size[i][0], shapes[i]))
    return ShapeData(
        flops=np.array([size[i][0] for i in order], dtype=float),
        bytes=np.array([size[i][1] for i in order], dtype=float),
        samples=tuple(np.asarray(pooled[i], dtype=float) for i in order),
        passes=tuple(np.asarray(run_pass[i], dtype=int) for i in order),
    )


def _log_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``log(e^a + e^b)`` and the share ``e^a / (e^a + e^b)``, with one exp."""
    e = np.exp(-np.abs(a - b))
    return np.maximum(a, b) + np.log1p(e), np.where(a >= b, 1.0, e) / (1.0 + e)


def _terms(x: np.ndarray, log_f: np.ndarray, log_b: np.ndarray) -> tuple[np.ndarray, ...]:
    """Log time, the overhead's and compute's shares, the roof term and its compute and memory parts."""
    compute = log_f - x[1] - LN_TERA
    memory = log_b - x[2] - LN_TERA
    if len(x) == 3:
        roof, share_c = np.maximum(compute, memory), (compute >= memory).astype(float)
    else:
        p = np.exp(x[3])
        scaled, share_c = _log_sum(p * compute, p * memory)
        roof = scaled / p
    total, share_t0 = _log_sum(x[0] + 0.0 * roof, roof)
    return total, share_t0, share_c, roof, compute, memory


def _jac(x: np.ndarray, terms: tuple[np.ndarray, ...]) -> np.ndarray:
    _, share_t0, share_c, roof, compute, memory = terms
    out = np.empty((*roof.shape, len(x)))
    rest = 1.0 - share_t0
    out[..., 0] = share_t0
    out[..., 1] = -rest * share_c
    out[..., 2] = -rest * (1.0 - share_c)
    if len(x) == 4:
        out[..., 3] = rest * (share_c * compute + (1.0 - share_c) * memory - roof)
    return out


def log_time(x: np.ndarray, log_f: np.ndarray, log_b: np.ndarray) -> np.ndarray:
    """Log seconds per call; ``x`` is (ln t0, ln P[TFLOP/s], ln W[TB/s]) plus ln p for pnorm.

    ``x`` may also hold many parameter sets as shape (n_params, B, 1): the result is then (B, shapes).
    """
    return _terms(x, log_f, log_b)[0]


def log_time_jac(x: np.ndarray, log_f: np.ndarray, log_b: np.ndarray) -> np.ndarray:
    """Jacobian of :func:`log_time` with respect to ``x``: shape (shapes, len(x)), or (B, shapes, n_params)."""
    return _jac(x, _terms(x, log_f, log_b))


def batch_model(log_f: np.ndarray, log_b: np.ndarray) -> lsq.Model:
    """The model for :func:`mfu_sweep.analysis.fits.lsq.solve`: shapes (n,), or per problem (B, n)."""

    def model(xs: np.ndarray, rows: lsq.Rows = slice(None)) -> tuple[np.ndarray, np.ndarray]:
        x = xs.T[:, :, None]
        terms = _terms(x, *((log_f, log_b) if log_f.ndim == 1 else (log_f[rows], log_b[rows])))
        return terms[0], _jac(x, terms)

    return model


def leverage(x: np.ndarray, log_f: np.ndarray, log_b: np.ndarray) -> dict[str, float]:
    """Largest |d ln t / d ln param| over the shapes, per parameter."""
    jac = np.abs(log_time_jac(x, log_f, log_b))
    return {name: float(np.max(jac[:, j])) for j, name in enumerate(PARAMS[:3])}


def interval_leverage(x: np.ndarray, boot: np.ndarray, alpha: float, log_f: np.ndarray,
                       log_b: np.ndarray) -> dict[str, float]:
    """Per parameter, its smallest leverage at the estimate and at both ends of its bootstrap interval.

    A ceiling that the shapes bound only from one side (a W that could be ten
    times higher without any shape noticing) has no leverage at the far end.
    """
    out = leverage(x, log_f, log_b)
    ends = np.quantile(boot, [alpha / 2, 1 - alpha / 2], axis=0) if len(boot) > 1 else np.array([x, x])
    for j, name in enumerate(PARAMS[:3]):
        for end in ends[:, j]:
            moved = x.copy()
            moved[j] = end
            out[name] = min(out[name], float(np.max(np.abs(log_time_jac(moved, log_f, log_b)[:, j]))))
    return out


@dataclass(frozen=True)
class Options:
    """How to solve: loss, scale, solver, bounds (log space) and scipy's keyword arguments."""

    loss: str
    f_scale: float
    solver: str
    lower: np.ndarray
    upper: np.ndarray
    kwargs: Mapping[str, Any]

    def bounds(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        return self.lower[:n], self.upper[:n]


def starts(data: ShapeData, opts: Options, n_params: int) -> np.ndarray:
    med = np.exp(data.log_median)
    t_min = float(np.min(med))
    p_guess = float(np.max(data.flops / med)) / 1e12
    w_guess = float(np.max(data.bytes / med)) / 1e12
    lo, hi = opts.bounds(n_params)
    starts = []
    for t0f in (0.2, 0.8):
        for wf in (1.0, 10.0):
            x = [math.log(t0f * t_min), math.log(1.2 * p_guess), math.log(wf * w_guess)]
            if n_params == 4:
                x.append(math.log(4.0))
            starts.append(np.clip(np.array(x), lo + 1e-9, hi - 1e-9))
    return np.array(starts)


def solve_scipy(y: np.ndarray, log_f: np.ndarray, log_b: np.ndarray, x0: np.ndarray,
                 opts: Options) -> tuple[np.ndarray, float]:
    res = least_squares(lambda x: log_time(x, log_f, log_b) - y, x0, jac=lambda x: log_time_jac(x, log_f, log_b),
                        bounds=opts.bounds(len(x0)), loss=opts.loss, f_scale=opts.f_scale, **opts.kwargs)
    return res.x, float(res.cost)


# Starting points still above twice the best cost after 10 iterations are dropped (they will not be the best);
# the rest stop after START_ITER iterations (by then only directions no shape constrains still move).
PRUNE = (10, 2.0)
START_ITER = 60


def _problem(data: ShapeData, x0: np.ndarray, y: np.ndarray, weights: np.ndarray | None, opts: Options,
             settled: lsq.Settled | None = None, **settings: Any) -> Problem:
    lower, upper = opts.bounds(x0.shape[1])
    return Problem(batch_model, np.log(data.flops), np.log(data.bytes), x0, y, weights, lower, upper,
                   tuple(sorted({"loss": opts.loss, "f_scale": opts.f_scale, **settings}.items())), settled)


def best_fit_steps(y: np.ndarray, data: ShapeData, n_params: int, opts: Options
                   ) -> Steps[tuple[np.ndarray, float]]:
    """Best of the starting points: parameters and robust cost (a fit step, see :mod:`.batch`)."""
    x0s = starts(data, opts, n_params)
    if opts.solver == "scipy":
        log_f, log_b = np.log(data.flops), np.log(data.bytes)
        fits = [solve_scipy(y, log_f, log_b, x0, opts) for x0 in x0s]
        return min(fits, key=lambda f: f[1])
    sol = yield _problem(data, x0s, y, None, opts, damping=1.0, prune=PRUNE, max_iter=START_ITER)
    i = int(np.argmin(sol.cost))
    return sol.x[i], float(sol.cost[i])


def bic(x: np.ndarray, y: np.ndarray, data: ShapeData) -> float:
    resid = y - log_time(x, np.log(data.flops), np.log(data.bytes))
    n = len(y)
    return n * math.log(max(float(np.mean(resid**2)), 1e-300)) + len(x) * math.log(n)


def _median_last(a: np.ndarray) -> np.ndarray:
    """Median along the last axis; sorting short rows is ~10x faster than numpy's partition-based median."""
    s = np.sort(a, axis=-1)
    m = a.shape[-1]
    return s[..., m // 2] if m % 2 else 0.5 * (s[..., m // 2 - 1] + s[..., m // 2])


def resamples(data: ShapeData, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap resamples: log medians of resampled samples (n_boot, shapes) and resampled shape indices.

    Shapes are drawn with replacement, each with all its passes and samples (a cluster bootstrap:
    whatever moves the samples of a shape together, in one pass or in all, stays with the shape and
    shows as the scatter of shapes about the fit), and within each shape its pooled samples; both
    solvers refit exactly these resamples. :func:`pass_shifts` adds what no resampling of shapes sees.
    """
    rng = np.random.default_rng(seed)
    n = len(data.samples)
    draws = np.empty((n, n_boot))
    sizes = np.array([len(s) for s in data.samples])
    for size in np.unique(sizes):  # shapes with equal sample counts in one array operation
        rows = np.flatnonzero(sizes == size)
        stack = np.stack([data.samples[i] for i in rows])
        picks = rng.integers(0, size, (len(rows), n_boot, size))
        picks += (np.arange(len(rows)) * size)[:, None, None]  # flat positions: take is ~4x take_along_axis
        draws[rows] = np.log(_median_last(stack.ravel().take(picks)))
    idx = np.sort(rng.integers(0, n, (n_boot, n)), axis=1)
    return draws.T, idx


PASS_STREAM = 1  # second entropy word of the pass-shift generator (the resamples use the seed alone)


def pass_offsets(data: ShapeData) -> np.ndarray:
    """Per pass, the median over shapes of its log median time minus the shape's pooled log median.

    What moves every shape of one pass together (a slow phase of the machine, a warmer chip); only
    shapes measured in two or more passes count. One value of 0 with a single pass.
    """
    n_passes = data.n_passes
    if n_passes < 2:
        return np.zeros(1)
    diffs: list[list[float]] = [[] for _ in range(n_passes)]
    for samples, passes, pooled in zip(data.samples, data.passes, data.log_median, strict=True):
        present = np.unique(passes)
        for q in present if len(present) >= 2 else ():
            diffs[q].append(math.log(float(np.median(samples[passes == q]))) - pooled)
    return np.array([float(np.median(d)) if d else 0.0 for d in diffs])


def pass_shifts(data: ShapeData, n_boot: int, seed: int) -> np.ndarray:
    """Per bootstrap draw, a shift of the log time of every shape: the pass-level offset (n_boot,).

    An offset that moves *every* shape of a pass together (a slow phase of the machine, a warmer
    chip, a lower clock for a whole run) is common to all shapes, so no resampling of shapes sees
    it, yet it moves t0, P and W from run to run. With R >= 2 passes each draw gets
    ``s / sqrt(R) * T``: ``s`` the standard deviation of the R offsets of :func:`pass_offsets`, ``T``
    Student's t with R - 1 degrees of freedom, the distribution of the error of a mean of R passes
    whose spread is estimated from those R (the ``runs`` method of :mod:`mfu_sweep.analysis.verdicts.evidence`
    adds the same pass-level variance, with the same degrees of freedom). With one pass the offset
    is not measured: all zeros. Its own random stream (from the seed and the samples, see
    :func:`_content_word`), so the resamples do not depend on R.
    """
    n_passes = data.n_passes
    if n_passes < 2:
        return np.zeros(n_boot)
    spread = float(np.std(pass_offsets(data), ddof=1)) / math.sqrt(n_passes)
    return spread * np.random.default_rng([seed, PASS_STREAM, _content_word(data)]).standard_t(n_passes - 1, n_boot)


def _content_word(data: ShapeData) -> int:
    """A 64-bit word from the samples: two series fitted with one seed get independent pass shifts.

    Comparisons pair the bootstrap draws of two fits by index; with one stream for both, a shift
    common to both series would cancel in their ratio instead of adding up.
    """
    h = hashlib.blake2b(digest_size=8)
    for samples in data.samples:
        h.update(samples.tobytes())
    return int.from_bytes(h.digest(), "little")


def shifted(boot: np.ndarray, shift: np.ndarray, opts: Options) -> np.ndarray:
    """Parameters whose log times are those of ``boot`` plus ``shift``, within the bounds.

    ``t0 e^d + max(F / (P e^-d), B / (W e^-d))`` is ``e^d`` times the time (pnorm too: its knee
    ``p`` does not move), so a common shift of every shape needs no refit.
    """
    out = boot.copy()
    out[:, 0] += shift
    out[:, 1:3] -= shift[:, None]
    lo, hi = opts.bounds(boot.shape[1])
    return np.clip(out, lo, hi)


def boot_params_steps(best: np.ndarray, data: ShapeData, n_boot: int, seed: int, alpha: float,
                      opts: Options) -> Steps[np.ndarray]:
    """Refit on ``n_boot`` resamples (:func:`resamples`), warm-started at ``best``, plus :func:`pass_shifts`.

    A fit step (see :mod:`mfu_sweep.analysis.fits.batch`), which runs it alone or in lockstep with others.
    """
    y, idx = resamples(data, n_boot, seed)
    if opts.solver == "scipy":
        log_f, log_b = np.log(data.flops), np.log(data.bytes)
        boot = np.array([solve_scipy(y[b, idx[b]], log_f[idx[b]], log_b[idx[b]], best, opts)[0]
                         for b in range(n_boot)])
    else:
        n = y.shape[1]  # how often each resample drew each shape (a bincount: np.add.at took seconds at 50,000)
        counts = np.bincount((idx + n * np.arange(n_boot)[:, None]).ravel(),
                             minlength=n_boot * n).reshape(n_boot, n).astype(float)
        x0 = np.broadcast_to(best, (n_boot, len(best)))
        boot = (yield _problem(data, x0, y, counts, opts, _IntervalSettled(alpha))).x
    shift = pass_shifts(data, n_boot, seed)
    return shifted(boot, shift, opts) if shift.any() else boot


class _IntervalSettled:
    """Stops the bootstrap refits once the percentile intervals of every parameter stop moving.

    Refits still running then are the slow ones creeping along a direction no
    shape constrains; the interval moved less than ``tol`` (log units, 0.1%)
    since the previous check.
    """

    def __init__(self, alpha: float, tol: float = 1e-3) -> None:
        self.q, self.tol, self.last = [alpha / 2, 0.5, 1 - alpha / 2], tol, None

    def __call__(self, x: np.ndarray) -> bool:
        now = np.quantile(x, self.q, axis=0)
        done = self.last is not None and float(np.max(np.abs(now - self.last))) < self.tol
        self.last = now
        return done
