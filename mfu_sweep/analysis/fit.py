"""Roofline-with-overhead fits of time per call against GEMM shape.

Two models of the time of one call with ``F`` FLOPs and ``B`` bytes:

* ``max``:   ``t = t0 + max(F / P, B / W)`` — the textbook roofline plus a
  fixed per-call overhead ``t0``;
* ``pnorm``: ``t = t0 + ((F / P)**p + (B / W)**p)**(1/p)`` — the same ceilings
  with a smooth knee: ``p = 1`` adds compute and memory time (no overlap),
  ``p -> inf`` is the hard ``max`` (perfect overlap).

Both are fitted by robust least squares on the log of the per-shape median
time (``scipy.optimize.least_squares``, ``loss="soft_l1"``), so every shape
weighs the same whatever its size and a few outlying shapes do not drag the
ceilings. ``model="auto"`` (default) fits both and keeps ``pnorm`` only when
its extra parameter pays for itself by the Bayesian information criterion.
Uncertainty comes from a seeded bootstrap that resamples shapes and, within
each shape, its raw samples. This module never imports matplotlib.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from mfu_sweep.analysis.series import Series, SeriesKey, group_series
from mfu_sweep.results import Sweep

MODELS = ("auto", "max", "pnorm")
MIN_SHAPES = 4
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
    """Distinct shapes of a series with their pooled samples (seconds)."""

    flops: np.ndarray
    bytes: np.ndarray
    samples: tuple[np.ndarray, ...]

    @property
    def log_median(self) -> np.ndarray:
        return np.log([np.median(s) for s in self.samples])


def shape_data(series: Series) -> ShapeData:
    """Pool the samples of records with the same shape (several runs may measure one shape)."""
    pooled: dict[Any, list[float]] = {}
    size: dict[Any, tuple[float, float]] = {}
    for rec in series.records:
        pooled.setdefault(rec.shape, []).extend(rec.samples_s)
        size[rec.shape] = (rec.flops, rec.bytes)
    order = sorted(pooled, key=lambda s: (size[s][0], s))
    return ShapeData(
        flops=np.array([size[s][0] for s in order], dtype=float),
        bytes=np.array([size[s][1] for s in order], dtype=float),
        samples=tuple(np.asarray(pooled[s], dtype=float) for s in order),
    )


def _roof(x: np.ndarray, log_f: np.ndarray, log_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Log seconds of the roofline term, and the share of it that is compute."""
    compute = log_f - x[1] - LN_TERA
    memory = log_b - x[2] - LN_TERA
    if len(x) == 3:
        return np.maximum(compute, memory), (compute >= memory).astype(float)
    p = math.exp(x[3])
    return np.logaddexp(p * compute, p * memory) / p, 1.0 / (1.0 + np.exp(p * (memory - compute)))


def log_time(x: np.ndarray, log_f: np.ndarray, log_b: np.ndarray) -> np.ndarray:
    """Log seconds per call; ``x`` is (ln t0, ln P[TFLOP/s], ln W[TB/s]) plus ln p for pnorm."""
    return np.logaddexp(x[0], _roof(x, log_f, log_b)[0])


def log_time_jac(x: np.ndarray, log_f: np.ndarray, log_b: np.ndarray) -> np.ndarray:
    """Jacobian of :func:`log_time` with respect to ``x``: shape (shapes, len(x))."""
    roof, share_c = _roof(x, log_f, log_b)
    share_t0 = np.exp(x[0] - np.logaddexp(x[0], roof))
    cols = [share_t0, -(1 - share_t0) * share_c, -(1 - share_t0) * (1 - share_c)]
    if len(x) == 4:
        compute, memory = log_f - x[1] - LN_TERA, log_b - x[2] - LN_TERA
        cols.append((1 - share_t0) * (share_c * compute + (1 - share_c) * memory - roof))
    return np.stack(cols, axis=1)


def _leverage(x: np.ndarray, log_f: np.ndarray, log_b: np.ndarray) -> dict[str, float]:
    """Largest |d ln t / d ln param| over the shapes, per parameter."""
    jac = np.abs(log_time_jac(x, log_f, log_b))
    return {name: float(np.max(jac[:, j])) for j, name in enumerate(PARAMS[:3])}


def _starts(data: ShapeData, n_params: int) -> list[np.ndarray]:
    med = np.exp(data.log_median)
    t_min = float(np.min(med))
    p_guess = float(np.max(data.flops / med)) / 1e12
    w_guess = float(np.max(data.bytes / med)) / 1e12
    starts = []
    for t0f in (0.2, 0.8):
        for wf in (1.0, 10.0):
            x = [math.log(t0f * t_min), math.log(1.2 * p_guess), math.log(wf * w_guess)]
            if n_params == 4:
                x.append(math.log(4.0))
            starts.append(np.clip(np.array(x), LOWER[:n_params] + 1e-9, UPPER[:n_params] - 1e-9))
    return starts


def _solve(y: np.ndarray, data: ShapeData, x0: np.ndarray, loss: str, f_scale: float,
           kwargs: Mapping[str, Any]) -> tuple[np.ndarray, float]:
    log_f, log_b = np.log(data.flops), np.log(data.bytes)
    n = len(x0)
    res = least_squares(lambda x: log_time(x, log_f, log_b) - y, x0, jac=lambda x: log_time_jac(x, log_f, log_b),
                        bounds=(LOWER[:n], UPPER[:n]), loss=loss, f_scale=f_scale, **kwargs)
    return res.x, float(res.cost)


def _best_fit(y: np.ndarray, data: ShapeData, n_params: int, loss: str, f_scale: float,
              kwargs: Mapping[str, Any]) -> np.ndarray:
    fits = [_solve(y, data, x0, loss, f_scale, kwargs) for x0 in _starts(data, n_params)]
    return min(fits, key=lambda f: f[1])[0]


def _bic(x: np.ndarray, y: np.ndarray, data: ShapeData) -> float:
    resid = y - log_time(x, np.log(data.flops), np.log(data.bytes))
    n = len(y)
    return n * math.log(max(float(np.mean(resid**2)), 1e-300)) + len(x) * math.log(n)


def _boot_params(best: np.ndarray, data: ShapeData, n_boot: int, seed: int, loss: str, f_scale: float,
                 kwargs: Mapping[str, Any]) -> np.ndarray:
    """Refit on ``n_boot`` resamples of shapes and, within each shape, of its samples."""
    rng = np.random.default_rng(seed)
    n = len(data.samples)
    draws = np.empty((n, n_boot))
    for i, s in enumerate(data.samples):
        draws[i] = np.log(np.median(s[rng.integers(0, len(s), (n_boot, len(s)))], axis=1))
    out = np.empty((n_boot, len(best)))
    for b in range(n_boot):
        idx = np.sort(rng.integers(0, n, n))
        sub = ShapeData(flops=data.flops[idx], bytes=data.bytes[idx], samples=())
        out[b] = _solve(draws[idx, b], sub, best, loss, f_scale, kwargs)[0]
    return out


def _interval(values: np.ndarray, alpha: float) -> tuple[float, float]:
    lo, hi = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def _natural(x: np.ndarray) -> np.ndarray:
    """(ln t0, ln P, ln W[, ln p]) -> (t0 s, P TFLOP/s, W TB/s[, p])."""
    return np.exp(x)


@dataclass(frozen=True)
class RooflineFit:
    """A fitted roofline-with-overhead model of one series. Times in seconds.

    ``*_ci`` are bootstrap percentile intervals at level ``1 - alpha``.
    ``constrained`` says whether the measured shapes pin a parameter down (see
    ``MIN_LEVERAGE``); an unconstrained ceiling is a bound, not a measurement.
    """

    key: SeriesKey
    model: str
    t0_s: float
    p_tflops: float
    w_tbs: float
    blend_p: float | None
    t0_s_ci: tuple[float, float]
    p_tflops_ci: tuple[float, float]
    w_tbs_ci: tuple[float, float]
    blend_p_ci: tuple[float, float] | None
    peak_tflops: float | None
    peak_estimated: bool
    peak_bandwidth_tbs: float | None
    constrained: Mapping[str, bool]
    rms_log_residual: float
    r2_log: float
    n_shapes: int
    n_samples: int
    n_boot: int
    seed: int
    alpha: float
    notes: tuple[str, ...] = ()
    boot: np.ndarray = field(default_factory=lambda: np.empty((0, 3)), repr=False, compare=False)

    @property
    def params(self) -> np.ndarray:
        """Model parameters in log space, as ``log_time`` takes them."""
        x = [self.t0_s, self.p_tflops, self.w_tbs] + ([self.blend_p] if self.blend_p is not None else [])
        return np.log(np.array(x, dtype=float))

    @property
    def compute_fraction(self) -> float | None:
        """P as a fraction of the vendor peak TFLOP/s (None without a peak)."""
        return self.p_tflops / self.peak_tflops if self.peak_tflops else None

    @property
    def bandwidth_fraction(self) -> float | None:
        """W as a fraction of the vendor memory bandwidth (None without one)."""
        return self.w_tbs / self.peak_bandwidth_tbs if self.peak_bandwidth_tbs else None

    def predict_time(self, flops: Any, bytes: Any) -> Any:  # noqa: A002
        """Predicted seconds per call; scalars give a float, arrays an array."""
        out = np.exp(log_time(self.params, np.log(np.asarray(flops, float)), np.log(np.asarray(bytes, float))))
        return float(out) if np.ndim(out) == 0 else out

    def predict_time_draws(self, flops: Any, bytes: Any) -> np.ndarray:  # noqa: A002
        """Predicted seconds per call under every bootstrap draw: shape (n_boot, len(flops))."""
        log_f, log_b = np.log(np.atleast_1d(np.asarray(flops, float))), np.log(np.atleast_1d(np.asarray(bytes, float)))
        return np.exp(np.array([log_time(x, log_f, log_b) for x in self.boot]))

    def to_json(self) -> dict[str, Any]:
        frac_ci = [c / self.peak_tflops for c in self.p_tflops_ci] if self.peak_tflops else None
        bw_ci = [c / self.peak_bandwidth_tbs for c in self.w_tbs_ci] if self.peak_bandwidth_tbs else None
        return {
            "label": self.key.label, "dtype": self.key.dtype, "mode": self.key.mode, "model": self.model,
            "t0_s": self.t0_s, "t0_s_ci": list(self.t0_s_ci),
            "p_tflops": self.p_tflops, "p_tflops_ci": list(self.p_tflops_ci),
            "peak_tflops": self.peak_tflops, "peak_estimated": self.peak_estimated,
            "compute_fraction": self.compute_fraction, "compute_fraction_ci": frac_ci,
            "w_tbs": self.w_tbs, "w_tbs_ci": list(self.w_tbs_ci),
            "peak_bandwidth_tbs": self.peak_bandwidth_tbs,
            "bandwidth_fraction": self.bandwidth_fraction, "bandwidth_fraction_ci": bw_ci,
            "blend_p": self.blend_p, "blend_p_ci": list(self.blend_p_ci) if self.blend_p_ci else None,
            "constrained": dict(self.constrained),
            "rms_log_residual": self.rms_log_residual,
            "r2_log": self.r2_log if math.isfinite(self.r2_log) else None,
            "n_shapes": self.n_shapes, "n_samples": self.n_samples,
            "n_boot": self.n_boot, "seed": self.seed, "alpha": self.alpha, "notes": list(self.notes),
        }


def why_unfittable(series: Series, min_shapes: int = MIN_SHAPES) -> str | None:
    """Why ``series`` cannot be fitted, or None when it can."""
    n = series.n_shapes
    if n < min_shapes:
        return (f"series {series.key}: only {n} distinct shape(s) with timings; "
                f"a roofline fit needs at least {min_shapes}")
    return None


def _choose_model(model: str, y: np.ndarray, data: ShapeData, loss: str, f_scale: float,
                  kwargs: Mapping[str, Any]) -> np.ndarray:
    if model == "max" or (model == "auto" and len(y) < 6):
        return _best_fit(y, data, 3, loss, f_scale, kwargs)
    smooth = _best_fit(y, data, 4, loss, f_scale, kwargs)
    if model == "pnorm":
        return smooth
    hard = _best_fit(y, data, 3, loss, f_scale, kwargs)
    return smooth if _bic(smooth, y, data) < _bic(hard, y, data) else hard


def _notes(series: Series, constrained: Mapping[str, bool]) -> tuple[str, ...]:
    notes = []
    names = {"t0_s": "overhead t0", "p_tflops": "compute ceiling P", "w_tbs": "bandwidth W"}
    for name, ok in constrained.items():
        if not ok:
            notes.append(f"{names[name]} is not constrained by these shapes (no shape where it sets the time)")
    if series.peak_tflops is None:
        notes.append(f"no vendor peak for {series.dtype}; fraction of peak unknown")
    elif series.peak.estimated:
        notes.append("vendor peak is an estimate")
    return tuple(notes)


def fit_series(series: Series, *, model: str = "auto", n_boot: int = 200, seed: int = 0, alpha: float = 0.05,
               loss: str = "soft_l1", f_scale: float = 0.05, min_shapes: int = MIN_SHAPES,
               **kwargs: Any) -> RooflineFit | None:
    """Fit the roofline-with-overhead model to one series.

    Parameters
    ----------
    series:
        From :func:`mfu_sweep.analysis.series.group_series`.
    model:
        ``"auto"`` (default: ``pnorm`` if it wins on BIC, else ``max``), ``"max"`` or ``"pnorm"``.
    n_boot, seed, alpha:
        Bootstrap resamples, their seed, and the interval level ``1 - alpha``.
    loss, f_scale:
        Robust loss and its scale (in log time: 0.05 is about 5%), passed to scipy.
    min_shapes:
        Fewer distinct shapes than this gives None (see :func:`why_unfittable`).
    **kwargs:
        Passed to ``scipy.optimize.least_squares`` (e.g. ``max_nfev``, ``xtol``).

    Returns
    -------
    RooflineFit or None
        None when the series has too few shapes.
    """
    if model not in MODELS:
        raise ValueError(f"model={model!r} must be one of {', '.join(MODELS)}")
    if n_boot < 1:
        raise ValueError(f"n_boot={n_boot!r} must be at least 1")
    if why_unfittable(series, min_shapes):
        return None
    data = shape_data(series)
    y = data.log_median
    best = _choose_model(model, y, data, loss, f_scale, kwargs)
    boot = _boot_params(best, data, n_boot, seed, loss, f_scale, kwargs)
    resid = y - log_time(best, np.log(data.flops), np.log(data.bytes))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    nat, nat_boot = _natural(best), _natural(boot)
    cis = [_interval(nat_boot[:, j], alpha) for j in range(len(best))]
    lev = _leverage(best, np.log(data.flops), np.log(data.bytes))
    constrained = {k: v >= MIN_LEVERAGE for k, v in lev.items()}
    return RooflineFit(
        key=series.key, model="pnorm" if len(best) == 4 else "max",
        t0_s=float(nat[0]), p_tflops=float(nat[1]), w_tbs=float(nat[2]),
        blend_p=float(nat[3]) if len(best) == 4 else None,
        t0_s_ci=cis[0], p_tflops_ci=cis[1], w_tbs_ci=cis[2], blend_p_ci=cis[3] if len(best) == 4 else None,
        peak_tflops=series.peak_tflops, peak_estimated=series.peak.estimated,
        peak_bandwidth_tbs=series.peak.memory_bandwidth_tbs, constrained=constrained,
        rms_log_residual=float(np.sqrt(np.mean(resid**2))),
        r2_log=1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else math.nan,
        n_shapes=len(y), n_samples=sum(len(s) for s in data.samples), n_boot=n_boot, seed=seed, alpha=alpha,
        notes=_notes(series, constrained), boot=boot,
    )


def fit_groups(series: Mapping[SeriesKey, Series], **kw: Any) -> tuple[dict[SeriesKey, RooflineFit],
                                                                       dict[SeriesKey, str]]:
    """Fit every series; return the fits and, for the others, why they were skipped."""
    fits: dict[SeriesKey, RooflineFit] = {}
    skipped: dict[SeriesKey, str] = {}
    for key, s in series.items():
        result = fit_series(s, **kw)
        if result is None:
            skipped[key] = why_unfittable(s, kw.get("min_shapes", MIN_SHAPES)) or "not fittable"
        else:
            fits[key] = result
    return fits, skipped


def fit_all(sweeps: Iterable[Sweep], **kw: Any) -> dict[SeriesKey, RooflineFit]:
    """Fit every series of ``sweeps`` that has enough shapes (keyword arguments go to :func:`fit_series`)."""
    return fit_groups(group_series(sweeps), **kw)[0]
