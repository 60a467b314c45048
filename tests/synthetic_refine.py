"""SYNTHETIC devices for the refinement loop. Every number here is MADE UP.

Nothing produced by this module was measured on any device. A
:class:`SimDevice` has a known true time per call for every square shape (a
roofline with overhead, times a planted log ratio against a reference), so the
crossovers between two simulated devices are at known FLOP counts; that is the
point: placement rules can only be scored where the truth is known. Measuring
a list of shapes in R passes (each pass in its own shuffled order, like
``sweep --repeats``) adds the noise real machines show:

* ``shape_sd``: a shift per (pass, shape), moving all samples of that shape in that pass;
* ``drift_sd``/``drift_len``: a slow AR(1) drift along the order shapes are measured in within a pass,
  plus ``pass_sd``: a shift of a whole pass;
* ``outlier_rate``/``outlier_size``: a (pass, shape) slowed by a hiccup;
* ``sample_sd``: independent noise per sample.

The device time a measurement costs is simulated too (:func:`shape_pass_cost`):
the per-shape timing budget of ``sweep`` plus a first call and the samples.
Records are real :class:`mfu_sweep.records.results.Record` objects with family, pass
and samples, so the analysis code runs on them unchanged; the device block
says ``"synthetic": true``. Never write its output into ``sweeps/`` or ``plots/``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.records.results import Record, Sweep, finish_record
from mfu_sweep.specs import Peak
from mfu_sweep.util.stats import median_ci

DTYPE = "bf16"
PEAK_TFLOPS = 1000.0
BUDGET_S = 1.0  # sweep's --budget-s per shape and pass with several passes
OVERHEAD_S = 0.3  # worker round trip, allocation, numerical check (made up)
N_SAMPLES = 8


@dataclass(frozen=True)
class Noise:
    """SYNTHETIC run-to-run noise, in log time (0.02 is about 2%)."""

    sample_sd: float = 0.01
    shape_sd: float = 0.02
    drift_sd: float = 0.015
    drift_len: float = 4.0
    pass_sd: float = 0.01
    outlier_rate: float = 0.03
    outlier_size: float = 0.3


def base_time(flops: np.ndarray | float, P_tflops: float = 700.0, W_tbs: float = 3.0,  # noqa: N803
              t0_s: float = 6e-6) -> np.ndarray:
    """SYNTHETIC roofline time per call of a square bf16 GEMM of ``flops`` FLOPs."""
    f = np.asarray(flops, dtype=float)
    side = (f / 2.0) ** (1 / 3)
    nbytes = 3 * side**2 * 2.0
    return t0_s + np.maximum(f / (P_tflops * 1e12), nbytes / (W_tbs * 1e12))


def crossing_ratio(crossings: Sequence[float], size: float = 0.25, width: float = 0.5) -> Callable:
    """SYNTHETIC planted log speed ratio (device over reference) that changes sign at each log10 FLOP in
    ``crossings``: ``size * prod(tanh((x - c) / width))``, positive below the first crossing."""
    cs = [float(c) for c in crossings]

    def ratio(log10_flops: np.ndarray) -> np.ndarray:
        x = np.asarray(log10_flops, dtype=float)
        out = np.full(x.shape, float(size))
        for c in cs:
            out = out * np.tanh((c - x) / width)
        return out

    return ratio


def no_ratio(log10_flops: np.ndarray) -> np.ndarray:
    return np.zeros(np.shape(log10_flops))


@dataclass(frozen=True)
class SimDevice:
    """A SYNTHETIC device: true time = ``base_time(F) * exp(-log_ratio(log10 F))``, plus :class:`Noise`."""

    label: str
    log_ratio: Callable[[np.ndarray], np.ndarray] = no_ratio
    noise: Noise = field(default_factory=Noise)

    def true_time(self, flops: np.ndarray | float) -> np.ndarray:
        f = np.asarray(flops, dtype=float)
        return base_time(f) * np.exp(-self.log_ratio(np.log10(f)))


def shape_pass_cost(true_s: float) -> float:
    """SYNTHETIC device seconds of one shape in one pass: budget (or the samples, if longer) + first call."""
    return max(BUDGET_S, N_SAMPLES * true_s) + 5 * true_s + OVERHEAD_S


def _peak() -> Peak:
    return Peak(chip=None, tflops={DTYPE: PEAK_TFLOPS}, memory_bandwidth_tbs=None,
                source="SYNTHETIC: made-up peak (tests/synthetic_refine.py)")


def _ar1(n: int, sd: float, corr_len: float, rng: np.random.Generator) -> np.ndarray:
    phi = math.exp(-1.0 / corr_len)
    out = np.empty(n)
    prev = sd * rng.standard_normal()
    for i in range(n):
        out[i] = prev
        prev = phi * prev + sd * math.sqrt(1 - phi**2) * rng.standard_normal()
    return out


def measure(device: SimDevice, todo: Sequence[tuple[int, Shape, str]], rng: np.random.Generator
            ) -> tuple[list[Record], float]:
    """SYNTHETIC records of (pass, shape, family) slots, measured pass by pass in shuffled order; device seconds."""
    dt, peak, noise = get_dtype(DTYPE), _peak(), device.noise
    out, cost = [], 0.0
    for p in sorted({t[0] for t in todo}):
        slots = [t for t in todo if t[0] == p]
        order = rng.permutation(len(slots))
        drift = _ar1(len(slots), noise.drift_sd, noise.drift_len, rng) + noise.pass_sd * rng.standard_normal()
        for pos, i in enumerate(order):
            _, shape, family = slots[i]
            true_s = float(device.true_time(shape.flops))
            shift = drift[pos] + noise.shape_sd * rng.standard_normal()
            shift += noise.outlier_size * (rng.random() < noise.outlier_rate)
            samples = true_s * np.exp(shift + noise.sample_sd * rng.standard_normal(N_SAMPLES))
            rec = Record(shape=shape, dtype=DTYPE, mode="eager", flops=shape.flops, bytes=shape.bytes(dt),
                         intensity=shape.intensity(dt), status="ok", family=family, timer="synthetic",
                         samples_s=tuple(float(s) for s in samples), block_size=1, first_call_s=5 * true_s,
                         rel_error=1e-3, pass_index=p)
            out.append(finish_record(rec, peak, ci=median_ci(rec.samples_s)))
            cost += shape_pass_cost(true_s)
    return out, cost


@dataclass
class SimSweep:
    """A SYNTHETIC result file that grows: records of one device, ``repeats`` passes, device seconds spent."""

    device: SimDevice
    repeats: int
    records: list[Record] = field(default_factory=list)
    seconds: float = 0.0

    def run(self, shapes: Sequence[Shape | tuple[Shape, int]], family: str, rng: np.random.Generator) -> None:
        """Like ``sweep --shape-file --resume``: every missing (pass, shape) slot of ``shapes``,
        given as shapes (``repeats`` passes) or (shape, passes) pairs (a shape file's ``passes`` column)."""
        rows = [s if isinstance(s, tuple) else (s, self.repeats) for s in shapes]
        self.repeats = max([self.repeats, *(n for _, n in rows)])
        done = {(r.run_pass, r.shape) for r in self.records}
        todo = [(p, s, family) for s, n in rows for p in range(n) if (p, s) not in done]
        recs, cost = measure(self.device, todo, rng)
        self.records += recs
        self.seconds += cost

    def sweep(self) -> Sweep:
        return Sweep(
            tool={"name": "mfu-sweep-synthetic", "version": "1"},
            run={"id": f"synthetic-{self.device.label}", "started_at": "2025-01-01T00:00:00Z", "finished_at": None,
                 "argv": ["tests/synthetic_refine.py"], "host": f"synthetic-{self.device.label}", "git_sha": None},
            environment={"synthetic": True, "note": "SYNTHETIC: made-up numbers for tests"},
            device={"backend": "synthetic", "name": f"Synthetic {self.device.label}", "chip": None, "index": 0,
                    "count": 1, "label": self.device.label, "synthetic": True},
            peak=_peak(), records=tuple(self.records), settings={"repeats": self.repeats, "synthetic": True},
        )


def with_family(records: Sequence[Record], family: str) -> list[Record]:
    return [replace(r, family=family) for r in records]
