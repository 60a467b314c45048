"""Which shapes a comparison tests, and how: shapes both sides measured, and shapes one side measured compared
with the other side's value *predicted at that very shape*.

A shape only one side measured cannot be set against a shape of equal FLOPs that
the other side measured: at one FLOP count, skinny, square and batched GEMMs run
at very different fractions of peak (2x on real tables), and two sides with their
own shape lists sample those aspects differently, so FLOP-paired shapes carry a
bias as large as the leads. Every point of a comparison here is one of:

* ``matched``: a shape both sides measured; its log ratio is exact, and whatever
  is particular to the shape cancels;
* ``model``: a shape one side measured, against the other side's log speed
  predicted at the same (batch, M, N, K) from its shapes of the same kind (layout,
  and a grouped GEMM's group dimension and count: :func:`kind`) by a local quadratic in
  ``log2 M, N, K`` and linear in ``log2 batch`` (so in log FLOPs, log intensity
  and aspect alike; in the directions the neighbours span: along FLOPs only
  for square shapes)
  over the other side's ``NEIGHBOURS`` nearest measured shapes. A plane would do at the same reach, but speed peaks near
  square shapes, and a plane through shapes around a square one (a side that
  measured skinny shapes, predicted at the other side's square one) reads it
  low: 3% too low on SYNTHETIC sides as different as real shape lists
  (``benchmarks/unmatched_shapes.py``), where the quadratic is within 1%.
  The model only interpolates: the shape must lie inside the span of those
  shapes in every coordinate and on the directions they span (a batched shape
  against unbatched ones, or a skinny shape against square ones, is left out), they must lie within
  ``MAX_REACH`` octaves, and the prediction's leverage must stay below
  ``MAX_LEVERAGE``. Its uncertainty is kept: the point's log ratio is a linear
  combination of measured values (``combo``), each with the residual variance
  ``sigma2`` of the local fit (what a shape deviates from a smooth surface, the
  same on both sides under "no difference"), so the variance of any band's mean
  of such points, neighbours shared between predictions included, is exact
  under that model (:mod:`mfu_sweep.analysis.verdicts.mixed`).

Shapes that can be neither matched nor predicted are *left out* and counted.
The points look at shapes only, never at the values, to decide what is
compared, so the tests' null distributions hold.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mfu_sweep.analysis.verdicts.curves import PassCurve, _log_metric, _Raw
from mfu_sweep.analysis.verdicts.run_test import ModelTerms
from mfu_sweep.gemm.shapes import ShapeError, parse_shape

NEIGHBOURS = 24  # measured shapes of the other side a prediction rests on (a quadratic: up to 11 parameters)
MAX_REACH = 3.5  # every neighbour within this many octaves (Euclidean in log2 B, M, N, K) of the shape
MAX_LEVERAGE = 1.0  # the prediction's variance at most one shape's residual variance (||L||^2 <= 1)
MIN_RESIDUAL_DF = 3  # a local fit needs this many degrees of freedom left to estimate its residual variance
SIGMA2_FLOOR = 1e-5  # residual variance floor (0.3% in log speed): a table truncated to whole ns is not exact


def features(name: str) -> np.ndarray | None:
    """``log2`` of (batch, M, N, K) of a shape's name ``[BATCHx]MxNxK``; None when the name does not parse."""
    try:
        s = parse_shape(name.split("~")[0])
    except ShapeError:
        return None
    return np.log2([float(s.batch), float(s.m), float(s.n), float(s.k)])


@dataclass(frozen=True)
class LocalFit:
    """The other side's log speed predicted at one shape: per pass, the smoother weights over its neighbours
    (``weights``, summing to 1), the residual variance of the fit and its df."""

    values: np.ndarray
    neighbours: tuple[str, ...]
    weights: np.ndarray
    sigma2: float
    df: float

    @property
    def leverage(self) -> float:
        """``||L||^2``: the prediction's variance in units of the residual variance."""
        return float(self.weights @ self.weights)

    @property
    def point_var(self) -> float:
        """Variance of the predicted value against the shape's true one: the estimate's (``sigma2 * ||L||^2``)
        and the shape's own departure from the smooth surface (``sigma2``)."""
        return self.sigma2 * (1.0 + self.leverage)


SPAN_TOL = 0.05  # octaves: a coordinate (or direction) the neighbours do not vary along is constant for the fit


def _design(x: np.ndarray, target: np.ndarray) -> np.ndarray | None:
    """Columns of a local model centred at ``target``: linear in log2 batch where the neighbours ``x`` vary in
    it, quadratic in the directions of log2 M, N, K they span (their principal axes: square shapes alone span
    one direction, a full grid three). None when ``target`` lies outside the neighbours' span in some
    coordinate or off the directions they span (extrapolation)."""
    lo, hi = x.min(axis=0), x.max(axis=0)
    if ((target < lo - 1e-9) | (target > hi + 1e-9)).any():
        return None
    rel = x - target
    dims = rel[:, 1:]
    centre = dims.mean(axis=0)
    _, sv, vt = np.linalg.svd(dims - centre, full_matrices=False)
    axes = vt[sv / math.sqrt(len(x)) > SPAN_TOL]
    off = -centre - (-centre @ axes.T) @ axes  # the target's offset from the neighbours' affine span
    if float(np.sqrt(off @ off)) > SPAN_TOL:
        return None
    z = dims @ axes.T
    k = z.shape[1]
    cols = [np.ones(len(x))] + ([rel[:, 0]] if hi[0] - lo[0] > SPAN_TOL else [])
    cols += [z[:, i] for i in range(k)] + [z[:, i] * z[:, j] for i in range(k) for j in range(i, k)]
    return _independent(cols)


def _independent(cols: list[np.ndarray]) -> np.ndarray:
    """The columns, in order, that add a direction the ones before do not span (on a grid whose neighbours
    take two values along an axis, its square is its line: the square is dropped)."""
    kept: list[np.ndarray] = []
    basis = np.empty((len(cols[0]), 0))
    for c in cols:
        resid = c - basis @ (basis.T @ c)
        if float(np.linalg.norm(resid)) > 1e-6 * max(float(np.linalg.norm(c)), 1e-12):
            kept.append(c)
            basis = np.column_stack([basis, resid / np.linalg.norm(resid)])
    return np.column_stack(kept)


def local_fit(target: np.ndarray, x: np.ndarray, y: np.ndarray, names: Sequence[str]) -> LocalFit | None:
    """Predict the log speed at ``target`` from measured shapes at ``x`` (log2 B, M, N, K) with values ``y``
    (passes, shapes): a local quadratic through the ``NEIGHBOURS`` nearest within ``MAX_REACH``; None when the
    shape is not inside them, the fit has too few degrees of freedom, or the prediction's leverage is too high."""
    dist = np.sqrt(((x - target) ** 2).sum(axis=1))
    order = np.argsort(dist, kind="stable")[:NEIGHBOURS]
    order = order[dist[order] <= MAX_REACH]
    if len(order) < 2:
        return None
    design = _design(x[order], target)
    if design is None or len(order) - design.shape[1] < MIN_RESIDUAL_DF:
        return None
    gram = design.T @ design
    if np.linalg.cond(gram) > 1e8:
        return None
    smoother = np.linalg.solve(gram, design.T)  # (params, neighbours): beta = smoother @ y
    weights = smoother[0]
    if float(weights @ weights) > MAX_LEVERAGE:
        return None
    ys = y[:, order]
    mean = np.nanmean(ys, axis=0)
    filled = np.where(np.isfinite(ys), ys, mean[None, :])
    resid = mean - design @ (smoother @ mean)
    df = float(len(order) - design.shape[1])
    sigma2 = max(float(resid @ resid) / df, SIGMA2_FLOOR)
    return LocalFit(filled @ weights, tuple(names[i] for i in order), weights, sigma2, df)


def kind(name: str) -> tuple[str, str, int] | None:
    """What a shape is besides its sizes: its operand layout and, for a grouped GEMM, the dimension and number
    of its groups; None when the name does not parse. The local model predicts a shape only from measured
    shapes of its own kind: an ``nt`` GEMM reads an operand transposed, and a grouped GEMM of 8 experts is not
    a dense one of the same total M, though their sizes (:func:`features`) are equal."""
    try:
        s = parse_shape(name.split("~")[0])
    except ShapeError:
        return None
    return s.layout, s.group_dim if s.groups else "", len(s.groups)


@dataclass(frozen=True)
class ShapeModel:
    """One series' measured shapes as the local model sees them: names, features (log2 B, M, N, K), log metric
    per (pass, shape), and the columns of each :func:`kind`. :meth:`predict` is the series' value at a shape it
    did not measure, from its shapes of that shape's kind (``compare``'s model-based points, the fleet's
    reference)."""

    names: tuple[str, ...]
    x: np.ndarray
    y: np.ndarray
    kinds: Mapping[tuple[str, str, int], np.ndarray]

    @classmethod
    def of(cls, names: Sequence[str], y: np.ndarray) -> ShapeModel:
        """From shape names and their log metric ``y`` (passes, shapes); names that do not parse are dropped."""
        rows = [(i, n, features(n), kind(n)) for i, n in enumerate(names)]
        rows = [r for r in rows if r[2] is not None and r[3] is not None]
        by_kind: dict[tuple[str, str, int], list[int]] = {}
        for j, (_, _, _, k) in enumerate(rows):
            by_kind.setdefault(k, []).append(j)
        return cls(tuple(n for _, n, _, _ in rows), np.array([f for _, _, f, _ in rows]).reshape(-1, 4),
                   np.asarray(y)[:, [i for i, _, _, _ in rows]], {k: np.array(v) for k, v in by_kind.items()})

    def predict(self, name: str) -> LocalFit | None:
        """:func:`local_fit` at ``name`` from the measured shapes of its kind; None where none holds."""
        target, k = features(name), kind(name)
        cols = self.kinds.get(k) if k is not None else None
        if target is None or cols is None:
            return None
        return local_fit(target, self.x[cols], self.y[:, cols], [self.names[i] for i in cols])


def _side(curve: PassCurve, names: Sequence[str]) -> ShapeModel:
    y = np.column_stack([_log_metric(math.log(curve.shapes[n][0]), curve.shapes[n][1], curve) for n in names]) \
        if names else np.empty((len(curve.passes), 0))
    return ShapeModel.of(names, y)


@dataclass(frozen=True)
class Matching:
    """The points of a comparison (sorted by FLOPs) and the unmatched shapes of each side left out (no
    prediction of the other side at them)."""

    points: tuple[_Raw, ...]
    left_out_a: tuple[str, ...]
    left_out_b: tuple[str, ...]


def _model_point(curve: PassCurve, name: str, fit: LocalFit, measured: str, other: str, label: str) -> _Raw:
    """A point: the measured side's values at ``name`` against the other side's prediction there."""
    flops, log_t = curve.shapes[name]
    own = _log_metric(math.log(flops), log_t, curve)
    sign = 1.0 if measured == "a" else -1.0  # the log ratio is a - b
    combo = ((measured, name, sign),) + tuple((other, n, -sign * w) for n, w in zip(fit.neighbours, fit.weights,
                                                                                     strict=True))
    va, vb = (own, fit.values) if measured == "a" else (fit.values, own)
    return _Raw(flops, name, va, vb, fit.point_var, "model", label, combo=combo, sigma2=fit.sigma2,
                df=fit.df)


def _predict_all(curve: PassCurve, names: Sequence[str], side: ShapeModel, measured: str, label: str
                 ) -> tuple[list[_Raw], list[str]]:
    points, left = [], []
    other = "b" if measured == "a" else "a"
    for name in names:
        fit = side.predict(name)
        if fit is None:
            left.append(name)
        else:
            points.append(_model_point(curve, name, fit, measured, other, label))
    return points, left


def match_shapes(ca: PassCurve, cb: PassCurve) -> Matching:
    """Matched shapes, then each side's unmatched shapes against the other side's prediction there."""
    both = sorted(ca.shapes.keys() & cb.shapes.keys())
    out = []
    for name in both:
        lf = math.log(ca.shapes[name][0])
        out.append(_Raw(ca.shapes[name][0], name, _log_metric(lf, ca.shapes[name][1], ca),
                        _log_metric(lf, cb.shapes[name][1], cb), 0.0, "matched", None,
                        combo=(("a", name, 1.0), ("b", name, -1.0))))
    side_a, side_b = _side(ca, sorted(ca.shapes)), _side(cb, sorted(cb.shapes))
    only_a = sorted(set(ca.shapes) - set(both))
    only_b = sorted(set(cb.shapes) - set(both))
    pa, left_a = _predict_all(ca, only_a, side_b, "a", cb.label)
    pb, left_b = _predict_all(cb, only_b, side_a, "b", ca.label)
    points = sorted(out + pa + pb, key=lambda r: (r.flops, r.shape, r.method))
    return Matching(tuple(points), tuple(left_a), tuple(left_b))


def measured_points(ca: PassCurve, cb: PassCurve) -> list[_Raw]:
    """The points of :func:`match_shapes`, sorted by FLOPs."""
    return list(match_shapes(ca, cb).points)


def terms_of(points: Sequence[_Raw]) -> ModelTerms:
    """What the band tests need of the model-based points (:class:`.run_test.ModelTerms`)."""
    return ModelTerms(np.array([r.method == "model" for r in points], dtype=bool), tuple(r.combo for r in points),
                      np.array([r.sigma2 for r in points]), np.array([r.df for r in points]))


def measured_in(curve: PassCurve, low: float, high: float) -> int:
    """Shapes ``curve`` measured with FLOPs in ``[low, high)``."""
    return int(sum(low <= f < high for f, _ in curve.shapes.values()))


def left_out_in(names: Sequence[str], shapes: Mapping[str, tuple[float, np.ndarray]], low: float, high: float) -> int:
    """How many of ``names`` (shapes left out) have FLOPs in ``[low, high)``."""
    return int(sum(low <= shapes[n][0] < high for n in names))
