"""Device backends and the choice between them.

``resolve_device("auto")`` picks CUDA, then Neuron (TorchNeuron), then XLA,
then any other registered torch accelerator, then the CPU. Each backend
module imports its stack lazily, so this package imports without any
accelerator software installed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

from mfu_sweep.backends.base import BackendError, TorchBackend

# backend name -> "module:Class"; modules are imported only when chosen
REGISTRY: dict[str, str] = {
    "cpu": "mfu_sweep.backends.cpu:CpuBackend",
}
AUTO_ORDER = ("cuda", "neuron", "xla", "accelerator", "cpu")


@dataclass(frozen=True)
class DeviceRequest:
    """A parsed ``--device`` value such as ``cuda:3``."""

    backend: str
    index: int = 0

    def __str__(self) -> str:
        return f"{self.backend}:{self.index}"


def parse_device(text: str) -> DeviceRequest:
    """Parse ``auto``, ``cpu``, ``cuda:3``, ``neuron:1`` ... (validates the syntax only)."""
    name, _, idx = text.strip().lower().partition(":")
    known = ("auto", *REGISTRY)
    if name not in known:
        raise BackendError(f"unknown device {text!r} (known: {', '.join(known)})")
    if idx and not idx.isdigit():
        raise BackendError(f"device {text!r}: index {idx!r} is not a non-negative integer")
    return DeviceRequest(name, int(idx) if idx else 0)


def _load(name: str) -> type[TorchBackend]:
    module, _, cls = REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def _available(name: str) -> bool:
    if name not in REGISTRY:
        return False
    probe: Callable[[], bool] | None = getattr(_load(name), "available", None)
    return True if probe is None else bool(probe())


def resolve_device(text: str) -> TorchBackend:
    """Instantiate the backend for a ``--device`` value; ``auto`` picks the best present."""
    req = parse_device(text)
    if req.backend == "auto":
        for name in AUTO_ORDER:
            if _available(name):
                return _load(name)(0)
        raise BackendError("no usable device found")
    cls = _load(req.backend)
    probe = getattr(cls, "available", None)
    if probe is not None and not probe():
        raise BackendError(f"device {text!r} is not available on this machine")
    return cls(req.index)
