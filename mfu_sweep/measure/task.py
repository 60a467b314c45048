"""A unit of work for a worker, and the record of a task that produced no measurement.

Torch-free, so the sweep's parent process (which only schedules tasks and
writes files) starts fast and leaves the device to its worker.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.timing import TimingConfig
from mfu_sweep.records.results import Record

CACHE_POLICIES = ("rotate", "flush", "none")  # none: one operand set, hot in cache (what Timer times)

# Device options a sweep hands to its workers through their environment
# (set by ``sweep``, read where the worker opens its device).
TIMER_ENV = "MFU_SWEEP_TIMER"  # --timer: the CUDA timer choice, or profiler (CUDA and CPU)
ON_THROTTLE_ENV = "MFU_SWEEP_ON_THROTTLE"  # --on-throttle: keep, discard or wait (measure.throttle)
SOAK_ENV = "MFU_SWEEP_SOAK_S"  # --soak: seconds of large-GEMM warm-up after opening the device
THREADS_ENV = "MFU_SWEEP_THREADS"  # --threads: torch intra-op threads on the CPU
FAST_ACCUM_ENV = "MFU_SWEEP_FP8_FAST_ACCUM"  # --fp8-fast-accum: on or off (fp8 and fp8-rowwise's use_fast_accum)
FAST_ACCUM_CHOICES = ("on", "off")
DEFAULT_FAST_ACCUM = "on"  # what NVIDIA's published Hopper fp8 throughput uses


def fast_accum_from_env(raw: str | None = None) -> bool:
    """The ``--fp8-fast-accum`` a sweep handed its worker (:data:`DEFAULT_FAST_ACCUM` when unset) as a bool;
    ValueError naming a bad value."""
    value = (os.environ.get(FAST_ACCUM_ENV) if raw is None else raw) or DEFAULT_FAST_ACCUM
    if value not in FAST_ACCUM_CHOICES:
        raise ValueError(f"{FAST_ACCUM_ENV}={value!r} is not one of {', '.join(FAST_ACCUM_CHOICES)}")
    return value == "on"


def check_threads(threads: int) -> int:
    """``threads`` when it is from 1 to the cores this process may use; ValueError naming the bound otherwise."""
    usable = len(os.sched_getaffinity(0))
    if threads < 1:
        raise ValueError(f"{threads} must be at least 1")
    if threads > usable:
        raise ValueError(f"{threads} is more than the {usable} usable cores")
    return threads


@dataclass(frozen=True, slots=True)  # slots: a million-shape plan holds a task per shape, dtype and mode
class Task:
    """One unit of work for a worker.

    ``cache`` is how the GEMM's operands are kept out of cache: ``rotate``
    cycles operand sets larger than the cache with calls back to back;
    ``flush`` overwrites a cache-sized buffer before each call and times
    every call alone.
    """

    shape: Shape
    dtype: str
    mode: str = "eager"
    family: str = "custom"
    seed: int = 0
    timing: TimingConfig = field(default_factory=TimingConfig)
    compile_mode: str | None = None
    check: bool = True
    cache: str = "rotate"
    passes: int | None = None  # a shape file's ``passes`` column: measured in passes 0 .. passes-1 only

    def __post_init__(self) -> None:
        if self.cache not in CACHE_POLICIES:
            raise ValueError(f"cache={self.cache!r} is not one of {', '.join(CACHE_POLICIES)}")

    def to_json(self) -> dict[str, Any]:
        return {"shape": self.shape.to_json(), "dtype": self.dtype, "mode": self.mode, "family": self.family,
                "seed": self.seed, "timing": vars(self.timing), "compile_mode": self.compile_mode, "check": self.check,
                "cache": self.cache}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Task:
        return cls(shape=Shape.from_json(data["shape"]), dtype=data["dtype"], mode=data["mode"],
                   family=data["family"], seed=data["seed"], timing=TimingConfig(**data["timing"]),
                   compile_mode=data.get("compile_mode"), check=data.get("check", True),
                   cache=data.get("cache", "rotate"))


def blank_record(task: Task, status: str, error: str | None = None, **extra: Any) -> Record:
    """A record with shape arithmetic filled in and no measurement."""
    dt = get_dtype(task.dtype)
    return Record(
        shape=task.shape, dtype=task.dtype, mode=task.mode, family=task.family,
        flops=task.shape.flops, bytes=task.shape.bytes(dt), intensity=task.shape.intensity(dt),
        status=status, error=error, extra=extra,
    )
