"""The backend interface and the torch code every device stack shares.

A backend describes its device, allocates seeded inputs, builds the GEMM
callable for a dtype and mode, hands the timing loop a block timer, and
classifies failures. Device-specific modules (``cpu``, ``cuda``, ``neuron``,
``xla``, ``generic``) subclass :class:`TorchBackend` and override only what
differs: the timer, synchronisation, device description and peak lookup.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from mfu_sweep.gemm.dtypes import DType
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.backends.operands import Inputs, Unsupported, gemm_call, make_inputs_for
from mfu_sweep.measure.machine.energy import EnergyReader
from mfu_sweep.measure.machine.memory import Free
from mfu_sweep.measure.machine.throttle import Probe
from mfu_sweep.measure.task import fast_accum_from_env
from mfu_sweep.measure.timing import BlockTimer, TimingConfig, host_block_timer, host_flush_timer
from mfu_sweep.specs import ChipSpec, Peak, find_chip, get_chip

GemmFn = Callable[[int], torch.Tensor]
"""Runs one GEMM on input set ``i`` and returns the output tensor."""

# What the row- and block-scaled formats need, said when a device refuses one.
_MX_GPUS = "NVIDIA compute capability 10.x (B200, B300) or AMD gfx950 (MI355X)"
SCALED_NEEDS = {
    "fp8-rowwise": "torch._scaled_mm with row-wise scales (the CPU, NVIDIA compute capability >= 8.9, AMD gfx94x+)",
    "mxfp8": f"torch.nn.functional.scaled_mm on block-scaled tensor cores: {_MX_GPUS}",
    "mxfp4": f"torch.nn.functional.scaled_mm on block-scaled tensor cores: {_MX_GPUS}",
    "nvfp4": "torch.nn.functional.scaled_mm on block-scaled tensor cores: NVIDIA compute capability 10.x (B200, B300)",
}
PROBE_SHAPE = Shape(1, 128, 128, 128, "nt")  # multiples of every tile and block the scaled kernels ask for


def scaled_probe(backend: TorchBackend, dtype: DType) -> str | None:
    """The first line of the error one tiny ``dtype`` GEMM raises on ``backend``, or None when it runs."""
    try:
        inputs = backend.make_inputs(PROBE_SHAPE, dtype, 1, seed=0)
        backend.gemm_fn(PROBE_SHAPE, dtype, "eager", inputs)(0)
        backend.sync()
    except (RuntimeError, ValueError, TypeError, NotImplementedError, AttributeError, Unsupported) as exc:
        text = str(exc).strip().splitlines()
        return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]
    return None


@dataclass(frozen=True)
class DeviceInfo:
    """What the ``device`` block of a result records."""

    backend: str
    name: str
    index: int = 0
    count: int = 1
    chip: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self, label: str) -> dict[str, Any]:
        return {"backend": self.backend, "name": self.name, "chip": self.chip, "index": self.index,
                "count": self.count, "label": label, **self.details}


@dataclass(frozen=True)
class Telemetry:
    """What a backend observed while one shape was measured.

    ``extra`` goes into the record's extra fields, ``flags`` into its flags
    (e.g. ``throttled``); ``compile_s`` fills the record's ``compile_s`` when
    the stack compiles outside torch.compile (XLA graphs).
    """

    extra: Mapping[str, Any] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    compile_s: float | None = None


class TorchBackend:
    """Shared torch implementation; subclasses set ``name`` and ``device``."""

    name = "torch"
    timer_name = "host"
    timer = "auto"  # --timer; "profiler" switches every backend that has the profiler to it
    compile_backend = "inductor"

    draws_on_device = False  # operands drawn by a generator on the device (CUDA) rather than the host

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.device = torch.device(self.name, index)
        self.fp8_fast_accum = fast_accum_from_env()

    # ----- description -------------------------------------------------
    def describe(self) -> DeviceInfo:
        raise NotImplementedError

    def environment(self) -> dict[str, Any]:
        return {"python": platform.python_version(), "torch": torch.__version__,
                "platform": platform.platform(), "torch_threads": torch.get_num_threads()}

    def chip_spec(self, chips: Mapping[str, ChipSpec], forced: str | None = None) -> ChipSpec | None:
        if forced:
            return get_chip(forced, chips)
        return find_chip(self.describe().name, chips)

    def peak(self, chips: Mapping[str, ChipSpec], forced: str | None = None) -> Peak:
        chip = self.chip_spec(chips, forced)
        if chip is None:
            return Peak(chip=None, tflops={}, memory_bandwidth_tbs=None,
                        source=f"no spec entry matches {self.describe().name!r}; use --chip or --peak-tflops")
        return Peak.from_chip(chip)

    # ----- execution ---------------------------------------------------
    def sync(self) -> None:
        """Wait for queued work; the host clock is only read after this."""

    def timing_config(self, base: TimingConfig) -> TimingConfig:
        return base

    def rotation_bytes(self) -> int:
        """Bytes of operands to cycle through so no call finds its inputs in cache."""
        return 64 * 2**20

    def flush_bytes(self) -> int:
        """Size of the buffer ``--cache flush`` overwrites before every call (at least the cache size)."""
        return self.rotation_bytes()

    def make_flush(self) -> Callable[[], object]:
        """A callable that evicts the caches by overwriting a :meth:`flush_bytes` buffer on the device."""
        buf = torch.empty(self.flush_bytes() // 4, dtype=torch.int32, device=self.device)
        return buf.zero_

    def flush_timer(self, call: Callable[[], object]) -> tuple[BlockTimer, str]:
        """A timer for ``--cache flush``: each call timed alone after :meth:`make_flush`'s flush, never timed."""
        return host_flush_timer(call, self.make_flush(), sync=self.sync), f"{self.timer_name}+flush"

    def torch_dtype(self, dtype: DType) -> torch.dtype:
        return getattr(torch, dtype.torch_name)

    def check_supported(self, dtype: DType, mode: str) -> None:
        """Raise :class:`Unsupported` for combinations this device cannot run."""
        if dtype.name == "tf32":
            raise Unsupported(f"tf32 is not a {self.name} math mode")
        if dtype.quantized:
            self.check_scaled(dtype)

    def check_scaled(self, dtype: DType) -> None:
        """Run one tiny GEMM of the row- or block-scaled ``dtype``: :class:`Unsupported` naming what it needs
        when this device and torch build refuse it (the answer is kept: asked once per worker and dtype)."""
        cache: dict[str, str | None] = self.__dict__.setdefault("_scaled_probe", {})
        if dtype.name not in cache:
            cache[dtype.name] = scaled_probe(self, dtype)
        if cache[dtype.name]:
            raise Unsupported(f"{dtype.name} needs {SCALED_NEEDS[dtype.name]}; torch {torch.__version__} on "
                              f"{self.device.type} refuses it ({cache[dtype.name]})")

    def set_math_mode(self, dtype: DType) -> None:
        """Strict fp32 unless tf32 was asked for."""
        allow = dtype.name == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = allow
        torch.backends.cudnn.allow_tf32 = allow

    def make_inputs(self, shape: Shape, dtype: DType, sets: int, seed: int) -> Inputs:
        """Seeded standard-normal operands (never zeros) in the shape's layout, quantized for the scaled formats,
        and preallocated outputs, written once (their pages are faulted in here, never inside a timed call)."""
        return make_inputs_for(shape, dtype, self.torch_dtype(dtype), sets, seed, self.device,
                               self.scale_layout(dtype), self.draws_on_device)

    def scale_layout(self, dtype: DType) -> str:
        """The layout block scales of ``dtype`` go to the GEMM in (``none``: row-major; ``32x4x4``: cuBLAS's tiled
        layout, NVIDIA; ``32x8``: hipBLASLt's pre-swizzled one, gfx950): a key of ``scaled.SCALE_LAYOUTS``."""
        return "none"

    def scales_json(self, dtype: DType) -> dict[str, Any]:
        """The record's ``scales`` block of a scaled ``dtype``: how the operands carry scales, the block scales'
        layout on this device, and, for the fp8 formats, whether the GEMM accumulated fast."""
        out: dict[str, Any] = dict(dtype.scaling_json())
        if dtype.block:
            layout = self.scale_layout(dtype)
            out.update(swizzled=layout != "none", layout=layout)
        return out

    def gemm_fn(self, shape: Shape, dtype: DType, mode: str, inputs: Inputs,
                compile_mode: str | None = None) -> GemmFn:
        """The callable that is timed: one GEMM on input set ``i`` (eager: into a fixed buffer where the op has
        ``out=``; compile: the allocating op, which inductor compiles without a copy into that buffer)."""
        op, args = gemm_call(shape, dtype, inputs, self.scale_layout(dtype), in_place=mode != "compile",
                             fast_accum=self.fp8_fast_accum)
        if mode == "compile":
            op = torch.compile(op, backend=self.compile_backend, mode=compile_mode, dynamic=False, fullgraph=True)
        return lambda i: op(*args[i])

    def block_timer(self, call: Callable[[], object], shape: Shape | None = None, dtype: DType | None = None,
                    mode: str = "eager") -> tuple[BlockTimer, str]:
        """A block timer for ``call`` and its name, recorded as the record's ``timer``.

        ``shape``, ``dtype`` and ``mode`` let a backend pick its timer (CUDA
        graphs for tiny GEMMs); ``None`` means "not a GEMM" (a copy, say).
        """
        if shape is not None and self.timer == "profiler":
            return self.profiler_timer(call)
        return host_block_timer(call, sync=self.sync), self.timer_name

    def profiler_timer(self, call: Callable[[], object]) -> tuple[BlockTimer, str]:
        """``--timer profiler``: the GEMM ops' (CPU) or kernels' (CUDA) time from torch.profiler events."""
        from mfu_sweep.measure.backends.profiler_timer import profiler_block_timer

        kind = "kernels" if self.device.type == "cuda" else "ops"
        return profiler_block_timer(call, self.device.type, self.sync), f"{self.device.type}-profiler-{kind}"

    # ----- what a sweep may ask of the device ---------------------------
    def throttle_probe(self) -> Probe | None:
        """Whether the device throttles now (``sweep --on-throttle``); None where nothing tells."""
        return None

    def energy_reader(self) -> EnergyReader | None:
        """The device's cumulative energy counter in millijoules; None where there is none."""
        return None

    # ----- per-shape hooks ----------------------------------------------
    def telemetry_start(self) -> None:
        """Called right before a shape's measurement starts (sampler threads, counters)."""

    def telemetry_stop(self) -> Telemetry:
        """Called right after it ends, also when it raised; returns what was observed."""
        return Telemetry()

    def soak_shape(self) -> tuple[Shape, DType]:
        """The GEMM :meth:`soak` runs: large enough to keep every unit busy."""
        from mfu_sweep.gemm.dtypes import get_dtype

        if self.device.type == "cpu":
            return Shape(1, 512, 512, 512), get_dtype("fp32")
        return Shape(1, 4096, 4096, 4096), get_dtype("bf16")

    def soak(self, seconds: float) -> dict[str, Any]:
        """Run a large GEMM back to back for ``seconds`` so clocks and temperature settle.

        Calls go through this backend's own block timer (so lazy backends
        really execute each one), in blocks that grow until one lasts ~0.1 s,
        so the device never idles waiting for the host. Returns what ran, for
        the sweep's environment block (``tflops`` is approximate).
        """
        shape, dtype = self.soak_shape()
        self.set_math_mode(dtype)
        inputs = self.make_inputs(shape, dtype, 1, seed=12345)
        fn = self.gemm_fn(shape, dtype, "eager", inputs)
        time_block, timer = self.block_timer(lambda: fn(0), shape, dtype)
        start = time.perf_counter()
        calls, block, elapsed = 0, 1, 0.0
        while elapsed < seconds:
            took = time_block(block)
            calls += block
            if took < 0.1:
                block *= 2
            elapsed = time.perf_counter() - start
        return {"seconds": elapsed, "shape": str(shape), "dtype": dtype.name, "calls": calls, "timer": timer,
                "tflops": shape.flops * calls / elapsed / 1e12}

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()

    def memory_bytes(self) -> int | None:
        return None

    def free_memory(self) -> Free | None:
        """Memory free for a shape's working set now (:mod:`mfu_sweep.measure.machine.memory`); None: unknown, no
        check."""
        return None

