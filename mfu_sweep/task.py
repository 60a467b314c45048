"""A unit of work for a worker, and the record of a task that produced no measurement.

Torch-free, so the sweep's parent process (which only schedules tasks and
writes files) starts fast and leaves the device to its worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mfu_sweep.dtypes import get_dtype
from mfu_sweep.results import Record
from mfu_sweep.shapes import Shape
from mfu_sweep.timing import TimingConfig


@dataclass(frozen=True)
class Task:
    """One unit of work for a worker."""

    shape: Shape
    dtype: str
    mode: str = "eager"
    family: str = "custom"
    seed: int = 0
    timing: TimingConfig = field(default_factory=TimingConfig)
    compile_mode: str | None = None
    check: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"shape": self.shape.to_json(), "dtype": self.dtype, "mode": self.mode, "family": self.family,
                "seed": self.seed, "timing": vars(self.timing), "compile_mode": self.compile_mode, "check": self.check}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Task:
        return cls(shape=Shape.from_json(data["shape"]), dtype=data["dtype"], mode=data["mode"],
                   family=data["family"], seed=data["seed"], timing=TimingConfig(**data["timing"]),
                   compile_mode=data.get("compile_mode"), check=data.get("check", True))


def blank_record(task: Task, status: str, error: str | None = None, **extra: Any) -> Record:
    """A record with shape arithmetic filled in and no measurement."""
    dt = get_dtype(task.dtype)
    return Record(
        shape=task.shape, dtype=task.dtype, mode=task.mode, family=task.family,
        flops=task.shape.flops, bytes=task.shape.bytes(dt), intensity=task.shape.intensity(dt),
        status=status, error=error, extra=extra,
    )
