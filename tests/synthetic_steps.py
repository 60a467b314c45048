"""SYNTHETIC sweeps of a model step in both modes with known compile costs and speeds. Every number is MADE UP.

Nothing here was measured on any device. :func:`step_sweep` builds one sweep of a workload's distinct
shapes in eager and compile mode over R passes, each pass in its own shuffled order of (shape, mode)
tasks, from planted truths:

* eager steady time per call ``tau_e`` (a made-up roofline of the shape), compile ``tau_e / speedup``;
* first calls: eager ``tau_e + eager_first_s``, compile ``tau_c + kappa`` with a compile cost ``kappa``
  per shape drawn log-uniformly from ``compile_s``;
* run-to-run noise on both (tests/synthetic.py's :class:`NoiseModel`: per (pass, shape) shifts, a slow
  drift along the sweep, outlying passes, a shift per pass that every shape of the pass shares).

A record's samples are symmetric about its value, so its median is the noisy value itself. The truth of a
step is its expectation (a step is a total): :func:`expected_factor` is the mean of the noise's
multiplier, and :class:`Truth` gives the one-time cost O, the steady step S of each mode and the
break-even ``N× = (O_c − O_e) / (S_e − S_c)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from synthetic import STAMP, NoiseModel, log_noise

from mfu_sweep.analysis.steps.costs import step_calls
from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.gemm.workloads import WorkloadGemm, resolve_family
from mfu_sweep.records.results import Record, Sweep, finish_record
from mfu_sweep.specs import Peak

FAMILY = "llm:llama-3-8b:tokens=64:tp=8:lm_head=0"
STEADY_NOISE = NoiseModel("steps steady", sample=0.0, shape_shift=0.03, drift=0.02, drift_len=4.0,
                          outlier_rate=0.02, outlier_size=0.3, pass_shift=0.03)
FIRST_NOISE = NoiseModel("steps first call", sample=0.0, shape_shift=0.15, outlier_rate=0.03, outlier_size=0.7,
                         pass_shift=0.03)
PEAK = Peak(chip=None, tflops={"bf16": 100.0}, memory_bandwidth_tbs=None,
            source="SYNTHETIC: made-up peak for tests (tests/synthetic_steps.py)")


def expected_factor(model: NoiseModel) -> float:
    """E[exp(log noise)] of a record's value under ``model`` (its samples add nothing: they are symmetric)."""
    var = model.shape_shift**2 + model.drift**2 + model.pass_shift**2
    return math.exp(var / 2) * (1 - model.outlier_rate + model.outlier_rate * math.exp(model.outlier_size))


def made_up_time(shape: Shape) -> float:
    """SYNTHETIC eager seconds per call: 20 TFLOP/s plus 5 µs."""
    return 5e-6 + shape.flops / 20e12


@dataclass(frozen=True)
class Truth:
    """The planted expectation: one-time cost O and steady step S per mode, and the break-even N."""

    overhead_e: float
    overhead_c: float
    steady_e: float
    steady_c: float

    @property
    def break_even(self) -> float:
        return (self.overhead_c - self.overhead_e) / (self.steady_e - self.steady_c)


def _record(shape: Shape, mode: str, value: float, first: float, run_pass: int, family: str,
            rng: np.random.Generator, status: str = "ok") -> Record:
    dt = get_dtype("bf16")
    rec = Record(shape=shape, dtype="bf16", mode=mode, flops=shape.flops, bytes=shape.bytes(dt),
                 intensity=shape.intensity(dt), status=status, family=family, timer="synthetic",
                 pass_index=run_pass)
    if status != "ok":
        return replace(rec, error=f"SYNTHETIC {status}")
    z = np.abs(rng.standard_normal(2)) * 0.01
    samples = tuple(float(value * math.exp(x)) for x in (-z[0], -z[1], 0.0, z[1], z[0]))
    return finish_record(replace(rec, samples_s=samples, block_size=1, first_call_s=first), PEAK)


def step_sweep(seed: int, *, repeats: int = 3, label: str = "synthetic-chip", family: str = FAMILY,
               speedup: float = 1.28, compile_s: tuple[float, float] = (0.5, 3.0), eager_first_s: float = 0.002,
               steady_noise: NoiseModel = STEADY_NOISE, first_noise: NoiseModel = FIRST_NOISE,
               cache: str = "warm", failures: dict[tuple[Shape, str], str] | None = None,
               noise_seed: int | None = None) -> tuple[Sweep, Truth]:
    """One SYNTHETIC sweep of ``family``'s shapes, eager and compile, ``repeats`` passes, and its truth.

    ``failures`` maps (shape, mode) to a status (``timeout``, ``error`` ...) that replaces that task's
    record in the last pass. ``noise_seed`` draws the noise apart from the truth: one ``seed`` with two
    noise seeds is the same machine measured twice.
    """
    gemms: list[WorkloadGemm] = resolve_family(family)
    calls = step_calls(gemms)
    shapes = list(calls)
    rng = np.random.default_rng(seed)
    tau = {"eager": np.array([made_up_time(s) for s in shapes])}
    tau["compile"] = tau["eager"] / speedup
    kappa = np.exp(rng.uniform(math.log(compile_s[0]), math.log(compile_s[1]), len(shapes)))
    first = {"eager": tau["eager"] + eager_first_s, "compile": tau["compile"] + kappa}
    if noise_seed is not None:
        rng = np.random.default_rng([seed, noise_seed])
    tasks = [(i, m) for m in ("eager", "compile") for i in range(len(shapes))]
    steady_mult = np.exp(log_noise(steady_noise, len(tasks), repeats=repeats, n_samples=1, rng=rng)[..., 0])
    first_mult = np.exp(log_noise(first_noise, len(tasks), repeats=repeats, n_samples=1, rng=rng)[..., 0])
    records = []
    for p in range(repeats):
        for j, (i, mode) in enumerate(tasks):
            status = (failures or {}).get((shapes[i], mode), "ok") if p == repeats - 1 else "ok"
            records.append(_record(shapes[i], mode, float(tau[mode][i] * steady_mult[p, j]),
                                   float(first[mode][i] * first_mult[p, j]), p, gemms[0].family, rng, status))
    fs, ff = expected_factor(steady_noise), expected_factor(first_noise)
    c = np.array([calls[s] for s in shapes], dtype=float)
    truth = Truth(*(math.fsum(first[m] * ff - tau[m] * fs) for m in ("eager", "compile")),
                  *(math.fsum(c * tau[m] * fs) for m in ("eager", "compile")))
    sweep = Sweep(
        tool={"name": "mfu-sweep-synthetic", "version": "1"},
        run={"id": f"synthetic-steps-{label}-{seed}-{noise_seed}", "started_at": STAMP, "finished_at": STAMP,
             "argv": ["tests/synthetic_steps.py"], "host": "synthetic-host", "git_sha": None},
        environment={"synthetic": True, "note": "SYNTHETIC: made-up numbers for tests"},
        device={"backend": "synthetic", "name": f"Synthetic {label}", "chip": None, "index": 0, "count": 1,
                "label": label, "synthetic": True},
        peak=PEAK, records=tuple(records),
        settings={"repeats": repeats, "timeout_s": 600.0,
                  "compile_cache": {"cold": "cold (fresh cache per shape)", "warm": "warm (caches reused)"}[cache],
                  "synthetic": {"speedup": speedup, "compile_s": list(compile_s), "seed": seed}},
    )
    return sweep, truth
