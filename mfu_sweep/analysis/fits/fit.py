"""Roofline-with-overhead fits of time per call against GEMM shape.

Two models of the time of one call with ``F`` FLOPs and ``B`` bytes:

* ``max``:   ``t = t0 + max(F / P, B / W)`` — the textbook roofline plus a
  fixed per-call overhead ``t0``;
* ``pnorm``: ``t = t0 + ((F / P)**p + (B / W)**p)**(1/p)`` — the same ceilings
  with a smooth knee: ``p = 1`` adds compute and memory time (no overlap),
  ``p -> inf`` is the hard ``max`` (perfect overlap).

Both are fitted by robust least squares on the log of the per-shape median
time (``loss="soft_l1"``), so every shape weighs the same whatever its size
and a few outlying shapes do not drag the ceilings. ``model="auto"``
(default) fits both and keeps ``pnorm`` only when its extra parameter pays for
itself by the Bayesian information criterion. Uncertainty comes from a seeded
bootstrap that resamples shapes (each with all its passes and samples) and,
within each shape, its raw samples; with R >= 2 passes (``sweep --repeats``)
every draw also shifts all shapes by a pass-level offset, t-distributed with
the spread of the passes' offsets (:func:`mfu_sweep.analysis.fits.roofline.resamples`).

Solvers: ``solver="batch"`` (default) solves the starting points and all
bootstrap refits at once with the vectorised Levenberg-Marquardt of
:mod:`mfu_sweep.analysis.fits.lsq`, warm-started at the estimate (about 20-50x
cheaper per series); ``solver="scipy"`` refits each with
``scipy.optimize.least_squares``, one by one, on the same resamples (the
reference the tests check the batch solver against). Fits are cached per
series content and options within a process.

The memory term is kept physical (:mod:`mfu_sweep.analysis.fits.physical`): a
measured copy bandwidth or the spec bandwidth bound W, and when the shapes tie
bytes to FLOPs (square families) an uncorroborated W is reported as
confounded with the overhead, not as a roof. This module never imports matplotlib.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from mfu_sweep.analysis.fits import lsq
from mfu_sweep.analysis.fits.physical import (
    BandwidthRange,
    bytes_tied_to_flops,
    measured_copy_bandwidth,
    plausible_bandwidth,
)
from mfu_sweep.analysis.fits.roofline import (
    LN_TERA,
    LOWER,
    MIN_LEVERAGE,
    PARAMS,
    UPPER,
    Options,
    ShapeData,
    best_fit,
    bic,
    boot_params,
    interval_leverage,
    leverage,
    log_time,
    log_time_jac,
    shape_data,
)
from mfu_sweep.analysis.series import Series, SeriesKey, group_series
from mfu_sweep.analysis.summary import summarise
from mfu_sweep.results import Sweep
from mfu_sweep.text import format_flops

__all__ = ["LN_TERA", "LOWER", "MIN_LEVERAGE", "MODELS", "PARAMS", "UPPER", "RooflineFit", "ShapeData", "fit_all",
           "fit_groups", "fit_series", "log_time", "log_time_jac", "shape_data", "why_unfittable"]

MODELS = ("auto", "max", "pnorm")
MIN_SHAPES = 4
# A poor fit (docs/analysis.md): the recorded CPU sweeps fit to an RMS log error of 0.03-0.29, published tables
# (one rounded value per shape) to 0.08-0.37; above 0.3 a typical shape is 35% off the curve. R² in log time
# below 0.9 leaves a tenth of the spread of times unexplained (0.95-1.0 on those files but three fp8 tables).
POOR_RMS_LOG = 0.3
POOR_R2_LOG = 0.9
# P is "below the measurements" when the best measured shape beats it by more than this factor: the best of
# many noisy shapes sits a little above the asymptote (Zen 5 fp32: 0.188 against P 0.187), 5% is past that.
BELOW_MEASURED = 1.05
SOLVERS = ("batch", "scipy")
# A bounded W within this log distance of a bound "sits at" it.
AT_BOUND = 0.02
CACHE_SIZE = 4096
_CACHE: OrderedDict[str, RooflineFit] = OrderedDict()


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
    ``constrained`` says whether the measured shapes pin a parameter down: at
    the estimate and at both ends of its interval, some shape's time depends on
    it (see ``MIN_LEVERAGE``); an unconstrained ceiling is a bound, not a measurement.
    ``w_status`` says what W is: ``"roof"`` (a measured memory roof),
    ``"not constrained"`` (no shape depends on it), ``"confounded"`` (the shapes
    tie bytes to FLOPs and nothing corroborates W; t0 is then confounded too)
    or ``"at bound"`` (it sits at an end of ``bandwidth_range``, the plausible
    range from a measured copy bandwidth or the spec, used as bounds).
    ``w_free_tbs`` is the W of the unbounded fit when that left the plausible range.
    ``best_tflops`` is the best measured TFLOP/s of the fitted shapes (the summary's value,
    ``mfu_sweep.analysis.summary``): a P below it is no ceiling (:attr:`is_ceiling`).
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
    w_status: str = "roof"
    bandwidth_range: BandwidthRange | None = None
    w_free_tbs: float | None = None
    solver: str = "batch"
    flop_range: tuple[float, float] | None = None
    best_tflops: float | None = None
    boot: np.ndarray = field(default_factory=lambda: np.empty((0, 3)), repr=False, compare=False)

    @property
    def params(self) -> np.ndarray:
        """Model parameters in log space, as ``log_time`` takes them."""
        x = [self.t0_s, self.p_tflops, self.w_tbs] + ([self.blend_p] if self.blend_p is not None else [])
        return np.log(np.array(x, dtype=float))

    @property
    def is_constrained(self) -> bool:
        """Whether the shapes pin down the fit at all: at least one of P, W and t0 is constrained.

        An unconstrained fit follows the points it was fitted to but says nothing beyond them:
        figures do not draw it, ``predict`` does not use it and the headline shows no ceiling.
        """
        return any(self.constrained.get(name, True) for name in NAMES)

    @property
    def unconstrained_reason(self) -> str | None:
        """One phrase saying why the fit is not constrained (None when it is)."""
        if self.is_constrained:
            return None
        where = (f" ({format_flops(self.flop_range[0])} to {format_flops(self.flop_range[1])})"
                 if self.flop_range else "")
        return (f"not constrained: the {self.n_shapes} shapes{where} pin down none of P, W and t0; sweep a wider "
                "FLOP range (a larger --max-flop) or more passes")

    def unsupported_at(self, flops: float, bytes: float) -> str | None:  # noqa: A002
        """Why the fit cannot stand in for a measurement of a GEMM of ``flops`` and ``bytes``, or None.

        The fit cannot when it is not constrained at all, or when that GEMM's predicted time depends
        (leverage ``MIN_LEVERAGE`` or more) on a parameter the measured shapes do not constrain:
        e.g. a compute-bound GEMM far above a sweep of small shapes, where P was never limiting.
        """
        if not self.is_constrained:
            return self.unconstrained_reason
        jac = np.abs(log_time_jac(self.params, np.log([float(flops)]), np.log([float(bytes)])))[0]
        loose = [NAMES[name] for j, name in enumerate(PARAMS[:3])
                 if jac[j] >= MIN_LEVERAGE and not self.constrained.get(name, True)]
        if not loose:
            return None
        return (f"its time there depends on {' and '.join(loose)}, which the measured shapes do not constrain; "
                "sweep shapes of that size")

    @property
    def poor(self) -> bool:
        """Whether the model describes the shapes badly: RMS log residual above :data:`POOR_RMS_LOG` or
        R² (log time) below :data:`POOR_R2_LOG` (docs/analysis.md says how they were chosen)."""
        return self.rms_log_residual > POOR_RMS_LOG or (math.isfinite(self.r2_log) and self.r2_log < POOR_R2_LOG)

    @property
    def below_measured(self) -> bool:
        """Whether P is below the best measured throughput of its shapes by more than :data:`BELOW_MEASURED`."""
        return self.best_tflops is not None and self.best_tflops > self.p_tflops * BELOW_MEASURED

    @property
    def is_ceiling(self) -> bool:
        """Whether P may be called a compute ceiling: constrained by the shapes, a good fit, and not below
        a measured value (a ceiling below the measurements is not one)."""
        return (self.is_constrained and self.constrained.get("p_tflops", True) and not self.poor
                and not self.below_measured)

    def quality_notes(self) -> list[str]:
        """What a reader must know before using P: a poor fit, P below the measurements, P above the peak."""
        notes = []
        if self.poor:
            r2 = f", R² (log time) {self.r2_log:.2f}" if math.isfinite(self.r2_log) else ""
            notes.append(f"poor fit: RMS log error {self.rms_log_residual:.2f} (a typical shape is "
                         f"x{math.exp(self.rms_log_residual):.2f} off the curve){r2}; the roofline does not describe "
                         "these shapes, so read P, W and t0 as rough, not as ceilings")
        if self.below_measured:
            below = 1 - self.p_tflops / self.best_tflops
            notes.append(f"P {self.p_tflops:.3g} TFLOP/s is {below:.0%} below the best measured "
                         f"{self.best_tflops:.3g} TFLOP/s: the fitted curve does not reach the fastest shapes, so P "
                         "is not a ceiling")
        frac = self.compute_fraction
        if frac is not None and frac > 1:
            notes.append(f"P is {frac:.0%} of the {'estimated ' if self.peak_estimated else ''}peak: above 100%, so "
                         "the peak is lower than what this run reached (records above it are flagged above_peak)")
        return notes

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
        if not len(self.boot):
            return np.empty((0, len(log_f)))
        return np.exp(log_time(self.boot.T[:, :, None], log_f, log_b))

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
            "w_status": self.w_status, "w_free_tbs": self.w_free_tbs,
            "bandwidth_range": self.bandwidth_range.to_json() if self.bandwidth_range else None,
            "blend_p": self.blend_p, "blend_p_ci": list(self.blend_p_ci) if self.blend_p_ci else None,
            "constrained": dict(self.constrained),
            "rms_log_residual": self.rms_log_residual,
            "r2_log": self.r2_log if math.isfinite(self.r2_log) else None,
            "n_shapes": self.n_shapes, "n_samples": self.n_samples,
            "n_boot": self.n_boot, "seed": self.seed, "alpha": self.alpha, "solver": self.solver,
            "notes": list(self.notes), "is_constrained": self.is_constrained,
            "unconstrained_reason": self.unconstrained_reason,
            "flop_range": list(self.flop_range) if self.flop_range else None,
            "best_tflops": self.best_tflops, "poor_fit": self.poor, "is_ceiling": self.is_ceiling,
        }


def why_unfittable(series: Series, min_shapes: int = MIN_SHAPES) -> str | None:
    """Why ``series`` cannot be fitted, or None when it can."""
    n = series.n_shapes
    if n < min_shapes:
        return (f"series {series.key}: only {n} distinct shape(s) with timings; "
                f"a roofline fit needs at least {min_shapes}")
    return None


def _choose_model(model: str, y: np.ndarray, data: ShapeData, opts: Options) -> np.ndarray:
    if model == "max" or (model == "auto" and len(y) < 6):
        return best_fit(y, data, 3, opts)[0]
    smooth = best_fit(y, data, 4, opts)[0]
    if model == "pnorm":
        return smooth
    hard = best_fit(y, data, 3, opts)[0]
    return smooth if bic(smooth, y, data) < bic(hard, y, data) else hard


# docs/statistics-calibration.md: a 2% drift in FLOP order leaves P's 95% interval covering 47% of fits
ONE_PASS_FIT = ("intervals from one pass: an offset of the whole pass or a slow drift during the sweep is not "
                "in them; sweep with --repeats 2 or more to include it")
ONE_PASS_PUBLISHED = ("intervals from one pass of a published table: an offset of the whole pass or a drift during "
                      "the source's run is not in them, and a published table cannot be swept again")


def _one_pass(series: Series, n_passes: int) -> list[str]:
    if n_passes >= 2:
        return []
    return [ONE_PASS_PUBLISHED if series.published else ONE_PASS_FIT]


NAMES = {"t0_s": "overhead t0", "p_tflops": "compute ceiling P", "w_tbs": "bandwidth W"}


def _notes(series: Series, constrained: Mapping[str, bool], skip: Iterable[str] = ()) -> list[str]:
    notes = [_unconstrained(name) for name, ok in constrained.items() if not ok and name not in skip]
    if series.peak_tflops is None:
        notes.append(f"no vendor peak for {series.dtype}; fraction of peak unknown")
    elif series.peak.estimated:
        notes.append("vendor peak is an estimate")
    return notes


def _bounded(opts: Options, plausible: BandwidthRange) -> Options:
    lower, upper = opts.lower.copy(), opts.upper.copy()
    if plausible.low_tbs:
        lower[2] = max(lower[2], math.log(plausible.low_tbs))
    if plausible.high_tbs:
        upper[2] = min(upper[2], math.log(plausible.high_tbs))
    return Options(opts.loss, opts.f_scale, opts.solver, lower, upper, opts.kwargs)


def _fit_params(model: str, y: np.ndarray, data: ShapeData, opts: Options, plausible: BandwidthRange
                ) -> tuple[np.ndarray, Options, float | None]:
    """The estimate, the options it was found with (bounds), and the free W when it left the plausible range.

    An unconstrained free W outside the range is moved to the measured (else spec) bandwidth
    without a refit when that keeps the fit as good; otherwise the fit is redone within the range.
    """
    free = _choose_model(model, y, data, opts)
    if not plausible.known:
        return free, opts, None
    w_free = math.exp(free[2])
    outside = (plausible.low_tbs is not None and w_free < plausible.low_tbs) or (
        plausible.high_tbs is not None and w_free > plausible.high_tbs)
    active = leverage(free, np.log(data.flops), np.log(data.bytes))["w_tbs"] >= MIN_LEVERAGE
    bounded = _bounded(opts, plausible)
    best = free
    if outside:
        moved = _at_prior(free, y, data, bounded, plausible) if not active else free
        best = moved if moved is not free else _choose_model(model, y, data, bounded)
    return _at_prior(best, y, data, bounded, plausible), bounded, w_free if outside and active else None


def _robust_cost(x: np.ndarray, y: np.ndarray, data: ShapeData, opts: Options) -> float:
    r = (log_time(x, np.log(data.flops), np.log(data.bytes)) - y) / opts.f_scale
    return float(0.5 * opts.f_scale**2 * np.sum(lsq.rho(r**2, opts.loss)[0]))


def _at_prior(best: np.ndarray, y: np.ndarray, data: ShapeData, opts: Options, plausible: BandwidthRange
              ) -> np.ndarray:
    """Move a W no shape depends on to the measured copy (else spec) bandwidth, when the fit stays as good.

    An unconstrained W is wherever the solver left it; at the plausible value,
    predictions outside the measured shapes use a bandwidth the device has.
    Returns ``best`` itself when nothing moved.
    """
    prior = plausible.copy_tbs or plausible.spec_tbs
    log_f, log_b = np.log(data.flops), np.log(data.bytes)
    if prior is None or leverage(best, log_f, log_b)["w_tbs"] >= MIN_LEVERAGE:
        return best
    moved = best.copy()
    moved[2] = np.clip(math.log(prior), opts.lower[2], opts.upper[2])
    return moved if _robust_cost(moved, y, data, opts) <= _robust_cost(best, y, data, opts) * (1 + 1e-4) else best


def _bandwidth_status(best: np.ndarray, opts: Options, data: ShapeData, lev: Mapping[str, float],
                      plausible: BandwidthRange, w_free: float | None) -> tuple[str, list[str]]:
    """What W is (see :class:`RooflineFit`), and the notes that say why."""
    notes = []
    if w_free:
        notes.append(f"an unbounded fit puts W at {w_free * 1e3:.3g} GB/s, outside the plausible range "
                     f"{plausible.describe()}; W was bounded to that range")
    if lev["w_tbs"] < MIN_LEVERAGE:
        return "not constrained", [*notes, _unconstrained("w_tbs")]
    gbs = math.exp(best[2]) * 1e3
    for side, bound in (("lower", opts.lower[2]), ("upper", opts.upper[2])):
        if plausible.known and abs(best[2] - bound) < AT_BOUND:
            want = "less" if side == "lower" else "more"
            return "at bound", [*notes, f"bandwidth W sits at the {side} end of the plausible range "
                                        f"{plausible.describe()}: the shapes ask for {want}, so W is a bound, "
                                        "not a memory roof"]
    tie = bytes_tied_to_flops(data.flops, data.bytes)
    if tie.tied and not plausible.known:
        return "confounded", [
            f"bandwidth W ({gbs:.3g} GB/s) and overhead t0 are confounded by these shapes: {tie.describe()}, "
            "so a memory term cannot be told from an overhead that fades with size; neither is drawn as a "
            "measurement (store a measured copy bandwidth with `mfu-sweep ceilings --into FILE`, or sweep "
            "shapes of other aspect ratios)"]
    if tie.tied:
        notes.append(f"{tie.describe()}; W ({gbs:.3g} GB/s) lies in the plausible range {plausible.describe()}, "
                     "so it is kept as a roof")
    return "roof", notes


def _unconstrained(name: str) -> str:
    return f"{NAMES[name]} is not constrained by these shapes (no shape where it sets the time)"


def _content_key(series: Series, data: ShapeData, options: Mapping[str, Any]) -> str:
    h = hashlib.blake2b(digest_size=20)
    h.update(json.dumps([str(series.key), series.peak.to_json(), options], sort_keys=True, default=repr).encode())
    h.update(data.flops.tobytes())
    h.update(data.bytes.tobytes())
    for s in data.samples:
        h.update(len(s).to_bytes(8, "little"))
        h.update(s.tobytes())
    for p in data.passes:
        h.update(p.tobytes())
    return h.hexdigest()


def fit_series(series: Series, *, model: str = "auto", n_boot: int = 200, seed: int = 0, alpha: float = 0.05,
               loss: str = "soft_l1", f_scale: float = 0.05, min_shapes: int = MIN_SHAPES,
               copy_bandwidth_tbs: float | None = None, solver: str = "batch", cache: bool = True,
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
        Robust loss and its scale (in log time: 0.05 is about 5%), as scipy defines them.
    min_shapes:
        Fewer distinct shapes than this gives None (see :func:`why_unfittable`).
    copy_bandwidth_tbs:
        Measured copy bandwidth of the device (TB/s; ``mfu-sweep ceilings --into`` stores it,
        :func:`mfu_sweep.analysis.fits.physical.measured_copy_bandwidth` reads it). With it, or with a
        spec bandwidth, W is bounded to the plausible range (:mod:`mfu_sweep.analysis.fits.physical`).
    solver:
        ``"batch"`` (default, vectorised) or ``"scipy"`` (one ``least_squares`` call per start
        and resample; the slow reference).
    cache:
        Reuse a fit of the same series content and options made earlier in this process.
    **kwargs:
        Passed to ``scipy.optimize.least_squares`` (e.g. ``max_nfev``, ``xtol``); giving any
        selects ``solver="scipy"``.

    Returns
    -------
    RooflineFit or None
        None when the series has too few shapes.
    """
    if model not in MODELS:
        raise ValueError(f"model={model!r} must be one of {', '.join(MODELS)}")
    if n_boot < 1:
        raise ValueError(f"n_boot={n_boot!r} must be at least 1")
    if solver not in SOLVERS:
        raise ValueError(f"solver={solver!r} must be one of {', '.join(SOLVERS)}")
    if loss not in lsq.LOSSES:
        raise ValueError(f"loss={loss!r} must be one of {', '.join(lsq.LOSSES)}")
    if why_unfittable(series, min_shapes):
        return None
    solver = "scipy" if kwargs else solver
    data = shape_data(series)
    options = {"model": model, "n_boot": n_boot, "seed": seed, "alpha": alpha, "loss": loss, "f_scale": f_scale,
               "copy": copy_bandwidth_tbs, "solver": solver, "kwargs": kwargs}
    key = _content_key(series, data, options) if cache else ""
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    fit = _fit(series, data, model, n_boot, seed, alpha, copy_bandwidth_tbs,
               Options(loss, f_scale, solver, LOWER, UPPER, kwargs))
    if cache:
        _CACHE[key] = fit
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return fit


def _fit(series: Series, data: ShapeData, model: str, n_boot: int, seed: int, alpha: float,
         copy_tbs: float | None, opts: Options) -> RooflineFit:
    y = data.log_median
    log_f, log_b = np.log(data.flops), np.log(data.bytes)
    plausible = plausible_bandwidth(series.peak.memory_bandwidth_tbs, copy_tbs)
    best, opts, w_free = _fit_params(model, y, data, opts, plausible)
    boot = boot_params(best, data, n_boot, seed, alpha, opts)
    boot.flags.writeable = False
    resid = y - log_time(best, log_f, log_b)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    nat, nat_boot = _natural(best), _natural(boot)
    cis = [_interval(nat_boot[:, j], alpha) for j in range(len(best))]
    lev = interval_leverage(best, boot, alpha, log_f, log_b)
    constrained = {k: v >= MIN_LEVERAGE for k, v in lev.items()}
    status, w_notes = _bandwidth_status(best, opts, data, lev, plausible, w_free)
    if status in ("confounded", "at bound"):
        constrained["w_tbs"] = False
    if status == "confounded":
        constrained["t0_s"] = False
    fit = RooflineFit(
        key=series.key, model="pnorm" if len(best) == 4 else "max",
        t0_s=float(nat[0]), p_tflops=float(nat[1]), w_tbs=float(nat[2]),
        blend_p=float(nat[3]) if len(best) == 4 else None,
        t0_s_ci=cis[0], p_tflops_ci=cis[1], w_tbs_ci=cis[2], blend_p_ci=cis[3] if len(best) == 4 else None,
        peak_tflops=series.peak_tflops, peak_estimated=series.peak.estimated,
        peak_bandwidth_tbs=series.peak.memory_bandwidth_tbs, constrained=constrained,
        rms_log_residual=float(np.sqrt(np.mean(resid**2))),
        r2_log=1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else math.nan,
        n_shapes=len(y), n_samples=sum(len(s) for s in data.samples), n_boot=n_boot, seed=seed, alpha=alpha,
        notes=tuple(w_notes + _notes(series, constrained, skip=("t0_s", "w_tbs") if status == "confounded"
                                     else ("w_tbs",)) + _one_pass(series, data.n_passes)),
        w_status=status, bandwidth_range=plausible if plausible.known else None, w_free_tbs=w_free,
        solver=opts.solver, flop_range=(float(data.flops.min()), float(data.flops.max())), boot=boot,
        best_tflops=summarise(series).best.tflops,
    )
    if fit.is_constrained:
        return replace(fit, notes=(*fit.notes, *fit.quality_notes()))
    # one phrase instead of one note per parameter
    per_param = {_unconstrained(name) for name in NAMES}
    return replace(fit, notes=(fit.unconstrained_reason, *(n for n in fit.notes if n not in per_param)))


def fit_groups(series: Mapping[SeriesKey, Series], *, copy_bandwidth: Mapping[str, float] | None = None,
               **kw: Any) -> tuple[dict[SeriesKey, RooflineFit], dict[SeriesKey, str]]:
    """Fit every series; return the fits and, for the others, why they were skipped.

    ``copy_bandwidth`` maps labels to measured copy bandwidths (TB/s), e.g. from
    :func:`mfu_sweep.analysis.fits.physical.measured_copy_bandwidth`; other keyword
    arguments go to :func:`fit_series`.
    """
    fits: dict[SeriesKey, RooflineFit] = {}
    skipped: dict[SeriesKey, str] = {}
    for key, s in series.items():
        result = fit_series(s, copy_bandwidth_tbs=(copy_bandwidth or {}).get(key.label), **kw)
        if result is None:
            skipped[key] = why_unfittable(s, kw.get("min_shapes", MIN_SHAPES)) or "not fittable"
        else:
            fits[key] = result
    return fits, skipped


def fit_all(sweeps: Iterable[Sweep], **kw: Any) -> dict[SeriesKey, RooflineFit]:
    """Fit every series of ``sweeps`` that has enough shapes (keyword arguments go to :func:`fit_series`).

    A copy bandwidth measured by ``mfu-sweep ceilings --into`` and stored in the sweeps bounds W.
    """
    sweeps = list(sweeps)
    return fit_groups(group_series(sweeps), copy_bandwidth=measured_copy_bandwidth(sweeps), **kw)[0]
