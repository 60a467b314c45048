"""Many series fitted in lockstep: their solver calls gathered into one batched solve per step.

A fit is written as a generator (:func:`mfu_sweep.analysis.fits.fit.fit_steps`) that yields a
:class:`Problem` wherever it needs :func:`mfu_sweep.analysis.fits.lsq.solve` and is sent the
:class:`~mfu_sweep.analysis.fits.lsq.Solution` back; its branches stay plain Python. :func:`drive`
runs many such generators together: at every step it stacks the problems that share their settings
and their number of shapes and parameters into one ``lsq.solve`` call with one group per problem
(``prune`` and ``settled`` act per group), so each fit ends exactly as it would alone, while numpy
works on thousands of rows at once instead of four. A fleet's starting-point fits are then about
ten times cheaper per series; bootstrap refits (200 rows each) about 1.5 times.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from mfu_sweep.analysis.fits import lsq

T = TypeVar("T")
Steps = Generator["Problem", lsq.Solution, T]
# rows x shapes of one stacked solve: enough to hide numpy's per-call cost, few enough to stay in cache
# (a 40-shape bootstrap of 200 rows stacks with seven others; a 3,375-shape one is solved alone)
MAX_CELLS = 65_536


@dataclass(frozen=True)
class Problem:
    """One ``lsq.solve`` call of one fit: the model's shapes, starts, targets, bounds and settings.

    ``settings`` are the keyword arguments of ``lsq.solve`` as sorted (name, value) pairs (hashable:
    problems with equal settings can be stacked); ``settled`` is the fit's own stop rule, if any.
    """

    model: Callable[[np.ndarray, np.ndarray], lsq.Model]
    log_f: np.ndarray
    log_b: np.ndarray
    x0: np.ndarray
    y: np.ndarray
    weights: np.ndarray | None
    lower: np.ndarray
    upper: np.ndarray
    settings: tuple[tuple[str, Any], ...]
    settled: lsq.Settled | None = None

    @property
    def rows(self) -> int:
        return len(self.x0)

    @property
    def cells(self) -> int:
        return len(self.x0) * len(self.log_f)

    def stack_key(self) -> tuple[Any, ...]:
        return (self.model, self.x0.shape[1], len(self.log_f), self.settings, self.settled is None)

    def solve(self) -> lsq.Solution:
        """Solve alone (the path of a single fit)."""
        return lsq.solve(self.model(self.log_f, self.log_b), self.x0, self.y, self.weights, self.lower, self.upper,
                         settled=self.settled, **dict(self.settings))


def _stacked(problems: Sequence[Problem]) -> list[lsq.Solution]:
    """Solve problems with one stack key in one call; split the solution back per problem."""
    first = problems[0]
    if len(problems) == 1:
        return [first.solve()]
    n = len(first.log_f)

    def rows(p: Problem, a: np.ndarray | None, width: int) -> np.ndarray:
        return np.broadcast_to(np.ones(width) if a is None else a, (p.rows, width))

    log_f = np.concatenate([rows(p, p.log_f, n) for p in problems])
    log_b = np.concatenate([rows(p, p.log_b, n) for p in problems])
    y = np.concatenate([rows(p, p.y, n) for p in problems])
    weights = np.concatenate([rows(p, p.weights, n) for p in problems])
    k = first.x0.shape[1]
    lower = np.concatenate([rows(p, p.lower, k) for p in problems])
    upper = np.concatenate([rows(p, p.upper, k) for p in problems])
    groups = np.repeat(np.arange(len(problems)), [p.rows for p in problems])
    settled = None if first.settled is None else [p.settled for p in problems]
    sol = lsq.solve(first.model(log_f, log_b), np.concatenate([p.x0 for p in problems]), y, weights, lower, upper,
                    settled=settled, groups=groups, **dict(first.settings))
    ends = np.cumsum([0] + [p.rows for p in problems])
    return [lsq.Solution(sol.x[a:b], sol.cost[a:b], sol.iterations, sol.converged[a:b])
            for a, b in zip(ends[:-1], ends[1:], strict=True)]


def solve_all(problems: Sequence[Problem], max_cells: int = MAX_CELLS) -> list[lsq.Solution]:
    """Solve every problem, stacking those that share a stack key into calls of at most ``max_cells``
    rows x shapes (a problem larger than that alone)."""
    by_key: dict[tuple[Any, ...], list[int]] = {}
    for i, p in enumerate(problems):
        by_key.setdefault(p.stack_key(), []).append(i)
    out: list[lsq.Solution | None] = [None] * len(problems)
    for members in by_key.values():
        chunk: list[int] = []
        for i in [*members, -1]:
            if chunk and (i < 0 or sum(problems[j].cells for j in [*chunk, i]) > max_cells):
                for j, sol in zip(chunk, _stacked([problems[j] for j in chunk]), strict=True):
                    out[j] = sol
                chunk = []
            if i >= 0:
                chunk.append(i)
    return out  # type: ignore[return-value]


def drive(steps: Iterable[Steps[T]], max_cells: int = MAX_CELLS) -> list[T]:
    """Run fit generators in lockstep, answering each step's problems with one stacked solve per kind."""
    gens = list(steps)
    results: list[Any] = [None] * len(gens)
    pending: dict[int, Problem] = {}

    def advance(i: int, answer: lsq.Solution | None) -> None:
        try:
            pending[i] = gens[i].send(answer)  # type: ignore[arg-type]
        except StopIteration as stop:
            results[i] = stop.value

    for i in range(len(gens)):
        advance(i, None)
    while pending:
        asked = sorted(pending)
        solutions = solve_all([pending.pop(i) for i in asked], max_cells)
        for i, sol in zip(asked, solutions, strict=True):
            advance(i, sol)
    return results


def run(steps: Steps[T]) -> T:
    """Run one fit generator, solving its problems one by one."""
    return drive([steps])[0]
