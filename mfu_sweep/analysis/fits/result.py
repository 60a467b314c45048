"""What a roofline fit of one series is: :class:`RooflineFit`, its parameters, intervals and predictions.

Made by :mod:`mfu_sweep.analysis.fits.fit`; figures, comparisons and predictions read it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mfu_sweep.analysis.fits.physical import BandwidthRange
from mfu_sweep.analysis.fits.roofline import MIN_LEVERAGE, PARAMS, log_time, log_time_jac
from mfu_sweep.analysis.ground.series import SeriesKey
from mfu_sweep.util.text import format_flops

NAMES = {"t0_s": "overhead t0", "p_tflops": "compute ceiling P", "w_tbs": "bandwidth W"}
# A poor fit (docs/analysis.md): the recorded CPU sweeps fit to an RMS log error of 0.03-0.29, published tables
# (one rounded value per shape) to 0.08-0.37; above 0.3 a typical shape is 35% off the curve. R² in log time
# below 0.9 leaves a tenth of the spread of times unexplained (0.95-1.0 on those files but three fp8 tables).
POOR_RMS_LOG = 0.3
POOR_R2_LOG = 0.9
# P is "below the measurements" when the best measured shape beats it by more than this factor: the best of
# many noisy shapes sits a little above the asymptote (Zen 5 fp32: 0.188 against P 0.187), 5% is past that.
BELOW_MEASURED = 1.05


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
    ``mfu_sweep.analysis.ground.summary``): a P below it is no ceiling (:attr:`is_ceiling`).
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
