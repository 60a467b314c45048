"""Batched robust least squares: many small bounded problems solved at once in numpy.

A roofline fit has 3 or 4 parameters and tens of shapes; its bootstrap refits
the same model to a few hundred resamples. Solving them one by one with
``scipy.optimize.least_squares`` costs a few milliseconds each, almost all of
it Python overhead. :func:`solve` runs one Levenberg-Marquardt iteration for
*every* problem with a handful of array operations instead, so a whole
bootstrap costs about as much as one scipy call.

The objective is scipy's: ``0.5 * f_scale**2 * sum_i c_i * rho((r_i / f_scale)**2)``
with the same robust losses (``linear``, ``soft_l1``, ``huber``, ``cauchy``,
``arctan``); ``c_i`` are per-residual weights (a bootstrap's resample counts).
Each iteration takes a Gauss-Newton step of the robust cost (gradient weights
``rho'``, curvature weights ``rho' + 2 z rho''``, as scipy scales them), damped
per problem (Levenberg-Marquardt), with the parameters at an active bound held
fixed and the rest clipped into the bounds, accepted only when it lowers the
cost. Problems that have converged stop moving. From the same starts it finds
the same minima as scipy's ``trf``; the roofline tests check that against scipy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

# model(X (b, p), rows) -> (prediction (b, n), jacobian (b, n, p)); X holds the problems ``rows`` of the batch
Rows = np.ndarray | slice
Model = Callable[[np.ndarray, Rows], tuple[np.ndarray, np.ndarray]]
# settled(X) -> whether the problems of X may all stop
Settled = Callable[[np.ndarray], bool]
LOSSES = ("linear", "soft_l1", "huber", "cauchy", "arctan")
EPS = np.finfo(float).eps


def rho(z: np.ndarray, loss: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A robust loss of squared scaled residuals ``z`` with its first and second derivatives, as scipy defines it."""
    if loss == "linear":
        return z, np.ones_like(z), np.zeros_like(z)
    if loss == "soft_l1":
        t = 1.0 + z
        s = np.sqrt(t)
        return 2.0 * (s - 1.0), 1.0 / s, -0.5 / (t * s)
    if loss == "huber":
        big = z > 1.0
        root = np.sqrt(np.where(big, z, 1.0))
        return (np.where(big, 2.0 * root - 1.0, z), np.where(big, 1.0 / root, 1.0),
                np.where(big, -0.5 / (root * root * root), 0.0))
    if loss == "cauchy":
        t = 1.0 + z
        return np.log1p(z), 1.0 / t, -1.0 / (t * t)
    if loss == "arctan":
        t = 1.0 + z * z
        return np.arctan(z), 1.0 / t, -2.0 * z / (t * t)
    raise ValueError(f"loss={loss!r} must be one of {', '.join(LOSSES)}")


@dataclass(frozen=True)
class Solution:
    """Per problem: parameters, cost (scipy's definition), iterations used and whether it converged."""

    x: np.ndarray  # (B, p)
    cost: np.ndarray  # (B,)
    iterations: int
    converged: np.ndarray  # (B,) bool


# Rows x residuals evaluated at once: a bootstrap of 200 rows over 50,000 shapes held its residuals, weights
# and Jacobian whole (2 GB); in blocks of this many cells a row's numbers are computed exactly as before.
EVAL_CELLS = 1 << 20


@dataclass
class _State:
    """Where every problem stands: parameters, cost, and the gradient and curvature of the robust cost there
    (the Gauss-Newton step needs nothing else of the residuals and Jacobian)."""

    x: np.ndarray
    cost: np.ndarray
    grad: np.ndarray  # (B, p): J^T (c rho' r)
    hess: np.ndarray  # (B, p, p): J^T diag(c max(rho' + 2 z rho'', eps)) J


def _evaluate(model: Model, x: np.ndarray, rows: Rows, y: np.ndarray, weights: np.ndarray, loss: str,
              f_scale: float) -> _State:
    """Cost, gradient and curvature of the problems ``rows`` at ``x``, in blocks of at most
    :data:`EVAL_CELLS` residuals (each row on its own, so the blocks change no number)."""
    index = np.arange(len(x)) if isinstance(rows, slice) and rows == slice(None) else rows
    block = max(1, EVAL_CELLS // max(1, y.shape[-1]))
    if len(x) <= block:
        return _evaluate_block(model, x, rows, y, weights, loss, f_scale)
    parts = [_evaluate_block(model, x[a:a + block], np.asarray(index)[a:a + block] if not isinstance(index, slice)
                             else index, y[a:a + block], weights[a:a + block], loss, f_scale)
             for a in range(0, len(x), block)]
    return _State(x, *(np.concatenate([getattr(p, name) for p in parts]) for name in ("cost", "grad", "hess")))


def _evaluate_block(model: Model, x: np.ndarray, rows: Rows, y: np.ndarray, weights: np.ndarray, loss: str,
                    f_scale: float) -> _State:
    pred, jac = model(x, rows)
    r = pred - y
    z = (r / f_scale) ** 2
    r0, r1, r2 = rho(z, loss)
    cost = 0.5 * f_scale**2 * np.sum(weights * r0, axis=-1)
    grad_w, curv_w = weights * r1, weights * np.maximum(r1 + 2.0 * z * r2, EPS)
    grad = np.matmul((grad_w * r)[:, None, :], jac)[:, 0, :]
    hess = np.matmul((jac * curv_w[:, :, None]).transpose(0, 2, 1), jac)
    return _State(x, cost, grad, hess)


def _take(s: _State, rows: np.ndarray | slice) -> _State:
    return _State(s.x[rows], s.cost[rows], s.grad[rows], s.hess[rows])


def _put(s: _State, rows: np.ndarray, new: _State, keep: np.ndarray) -> None:
    for name in ("x", "cost", "grad", "hess"):
        getattr(s, name)[rows[keep]] = getattr(new, name)[keep]


def _damped_solve(grad: np.ndarray, hess: np.ndarray, lam: np.ndarray, held: np.ndarray) -> np.ndarray:
    free = ~held
    h = hess * (free[:, :, None] & free[:, None, :])
    eye = np.eye(h.shape[1])
    diag = np.diagonal(h, axis1=1, axis2=2)
    damped = h + (lam[:, None] * diag + 1e-12 * (1.0 + diag) + held)[:, :, None] * eye
    delta = -np.linalg.solve(damped, np.where(held, 0.0, grad)[:, :, None])[:, :, 0]
    return np.where(held, 0.0, delta)


def _step(s: _State, lam: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Damped Gauss-Newton step with the parameters at an active bound held, and the projected gradient norm.

    A parameter is held when it sits at a bound and the gradient, or the step
    computed without holding it, points out of the box.
    """
    grad, hess = s.grad, s.hess
    span = upper - lower
    at_low, at_high = s.x <= lower + 1e-10 * span, s.x >= upper - 1e-10 * span
    held = (at_low & (grad > 0)) | (at_high & (grad < 0))
    delta = _damped_solve(grad, hess, lam, held)
    out = (at_low & (delta < 0)) | (at_high & (delta > 0))
    if out.any():
        held |= out
        delta = _damped_solve(grad, hess, lam, held)
    return delta, np.max(np.abs(np.where(held, 0.0, grad)), axis=1)


def solve(model: Model, x0: np.ndarray, y: np.ndarray, weights: np.ndarray | None, lower: np.ndarray,
          upper: np.ndarray, *, loss: str = "soft_l1", f_scale: float = 1.0, max_iter: int = 200,
          ftol: float = 1e-8, xtol: float = 1e-8, gtol: float = 1e-12, max_damping: float = 1e8,
          settled: Settled | Sequence[Settled] | None = None, check_every: int = 5,
          damping: float = 1e-3, prune: tuple[int, float] | None = None,
          groups: np.ndarray | None = None) -> Solution:
    """Minimise the robust cost of ``model(x) - y`` for every row of ``x0`` at once, within ``[lower, upper]``.

    Parameters
    ----------
    model:
        ``model(X, rows)`` for ``X`` of shape (b, p), the parameters of the problems ``rows`` (an index
        array or a slice of the B problems), returns predictions (b, n) and their Jacobian (b, n, p).
    x0:
        Starting points (B, p); clipped into the bounds.
    y, weights:
        Targets (B, n) or (n,), and per-residual weights of the same shape (None: all 1).
    lower, upper:
        Bounds (p,), or per problem (B, p).
    loss, f_scale:
        As in ``scipy.optimize.least_squares``.
    max_iter, ftol, xtol, gtol, max_damping:
        Iteration cap; a problem stops when an accepted step lowers the cost by less than ``ftol``
        relative, a step (accepted or not) moves no parameter by more than ``xtol``, the projected
        gradient is below ``gtol``, or the damping has grown past ``max_damping`` (no step helps).
    settled, check_every:
        ``settled(x)``, asked every ``check_every`` iterations with all current parameters, may stop
        every problem at once (e.g. when the bootstrap interval it cares about no longer moves).
        With ``groups``, a sequence of such callables, one per group, each asked with its group's
        rows; a settled group stops and the others go on.
    damping:
        Initial Levenberg-Marquardt damping (relative to the curvature's diagonal): small for warm
        starts, about 1 for starts far from the minimum.
    prune:
        ``(iteration, factor)``: for rows that are starting points of one problem, stop at that
        iteration every row whose cost is above ``factor`` times the lowest (it will not be the best).
    groups:
        (B,) group number (0 .. G-1) of every row: rows of independent problem sets solved in one
        batch (:mod:`mfu_sweep.analysis.fits.batch`). ``prune`` and ``settled`` then act within each
        group, so every group ends exactly as it would solved alone.
    """
    x = np.clip(np.array(x0, dtype=float), lower, upper)
    n_prob = x.shape[0]
    lower, upper = np.broadcast_to(lower, x.shape), np.broadcast_to(upper, x.shape)
    y = np.broadcast_to(y, (n_prob, np.shape(y)[-1]))
    weights = np.ones_like(y) if weights is None else np.broadcast_to(weights, y.shape)
    members = _members(groups, n_prob)
    state = _evaluate(model, x, slice(None), y, weights, loss, f_scale)
    lam = np.full(n_prob, float(damping))
    done = np.zeros(n_prob, dtype=bool)
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is reported
        act = np.flatnonzero(~done)
        if not len(act):
            break
        rows = slice(None) if len(act) == n_prob else act
        cur = _take(state, rows)
        delta, gnorm = _step(cur, lam[act], lower[rows], upper[rows])
        trial = _evaluate(model, np.clip(cur.x + delta, lower[rows], upper[rows]), rows, y[rows], weights[rows],
                          loss, f_scale)
        better = trial.cost < cur.cost
        gain = cur.cost - trial.cost
        moved = np.max(np.abs(trial.x - cur.x), axis=1)
        _put(state, act, trial, better)
        lam[act] = np.where(better, np.maximum(lam[act] * 0.3, 1e-12), lam[act] * 10.0)
        flat = better & (gain <= ftol * np.maximum(trial.cost, 1e-300))
        done[act] = flat | (moved <= xtol) | (gnorm <= gtol) | (lam[act] > max_damping)
        if settled is not None and it % check_every == 0 and _settle(settled, state.x, members, done):
            break
        if prune is not None and it == prune[0]:
            for m in members:
                done[m] |= state.cost[m] > prune[1] * np.min(state.cost[m])
    return Solution(x=state.x, cost=state.cost, iterations=it, converged=done)


def _members(groups: np.ndarray | None, n_prob: int) -> list[np.ndarray | slice]:
    """The rows of every group (one group of all rows without ``groups``)."""
    if groups is None:
        return [slice(None)]
    order = np.argsort(groups, kind="stable")
    bounds = np.flatnonzero(np.diff(groups[order])) + 1
    return list(np.split(order, bounds))


def _settle(settled: Settled | Sequence[Settled], x: np.ndarray,
            members: list[np.ndarray | slice], done: np.ndarray) -> bool:
    """Mark the rows of every settled group done; True when every group has settled."""
    if callable(settled):
        return bool(settled(x))
    for ask, m in zip(settled, members, strict=True):
        if not done[m].all() and ask(x[m]):
            done[m] = True
    return bool(done.all())
