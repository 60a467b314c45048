"""Device backends and the choice between them.

``resolve_device("auto")`` picks CUDA (and ROCm), then Neuron (TorchNeuron),
then XLA (never XLA on the host CPU), then any other torch accelerator, then
the CPU. Each backend module imports its stack lazily, so this package
imports without any accelerator software installed. A backend class may
define ``available()`` (and a stricter ``auto_available()`` for ``auto``);
its constructor raises :class:`BackendError` with the reason when the
device is absent or the index is out of range.

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``), torch and the rest of ``measure/``; never
``analysis/``, ``present/``, ``workflow/``, ``cli/``, matplotlib or Click.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mfu_sweep.util.errors import BackendError

if TYPE_CHECKING:  # the torch-free parent process parses --device without importing torch
    from mfu_sweep.measure.backends.base import TorchBackend

# backend name -> "module:Class"; modules are imported only when chosen
REGISTRY: dict[str, str] = {
    "cuda": "mfu_sweep.measure.backends.cuda:CudaBackend",
    "neuron": "mfu_sweep.measure.backends.neuron:NeuronBackend",
    "xla": "mfu_sweep.measure.backends.xla:XlaBackend",
    "accelerator": "mfu_sweep.measure.backends.generic:AcceleratorBackend",
    "cpu": "mfu_sweep.measure.backends.cpu:CpuBackend",
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
    if name == "cpu" and idx and int(idx) != 0:
        raise BackendError(f"device {text!r}: the CPU is one device: use --device cpu "
                           "(its threads are set with --threads)")
    return DeviceRequest(name, int(idx) if idx else 0)


def _load(name: str) -> type[TorchBackend]:
    module, _, cls = REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def _available(name: str, auto: bool = False) -> bool:
    """Whether backend ``name`` can run here; ``auto`` asks the stricter ``auto_available`` where defined."""
    if name not in REGISTRY:
        return False
    cls = _load(name)
    probe: Callable[[], bool] | None = (getattr(cls, "auto_available", None) if auto else None) or getattr(
        cls, "available", None)
    return True if probe is None else bool(probe())


def auto_backend(order: tuple[str, ...] = AUTO_ORDER,
                 available: Callable[[str], bool] = lambda n: _available(n, auto=True)) -> str:
    """Name of the first backend in ``order`` that is available (what ``--device auto`` picks)."""
    for name in order:
        if available(name):
            return name
    raise BackendError("no usable device found")


def resolve_device(text: str) -> TorchBackend:
    """Instantiate the backend for a ``--device`` value; ``auto`` picks the best present.

    An absent or unusable device raises :class:`BackendError` with a one-line
    reason; errors the device stack raises while opening become one too.
    """
    req = parse_device(text)
    name = auto_backend() if req.backend == "auto" else req.backend
    try:
        return _load(name)(req.index)
    except BackendError:
        raise
    except (RuntimeError, OSError, ImportError) as exc:
        raise BackendError(f"device {text!r} cannot be opened: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
