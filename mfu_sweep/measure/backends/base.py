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

from mfu_sweep.dtypes import DType
from mfu_sweep.measure.timing import BlockTimer, TimingConfig, host_block_timer, host_flush_timer
from mfu_sweep.shapes import Shape
from mfu_sweep.specs import ChipSpec, Peak, find_chip, get_chip

GemmFn = Callable[[int], torch.Tensor]
"""Runs one GEMM on input set ``i`` and returns the output tensor."""


class Unsupported(Exception):
    """This (dtype, mode) cannot run on this device; becomes status ``unsupported``."""


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


@dataclass
class Inputs:
    """Rotating operand sets of one shape, plus output buffers."""

    a: list[torch.Tensor]
    b: list[torch.Tensor]
    out: list[torch.Tensor]
    scales: tuple[torch.Tensor, torch.Tensor] | None = None


class TorchBackend:
    """Shared torch implementation; subclasses set ``name`` and ``device``."""

    name = "torch"
    timer_name = "host"
    compile_backend = "inductor"

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.device = torch.device(self.name, index)

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

    def set_math_mode(self, dtype: DType) -> None:
        """Strict fp32 unless tf32 was asked for."""
        allow = dtype.name == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = allow
        torch.backends.cudnn.allow_tf32 = allow

    def make_inputs(self, shape: Shape, dtype: DType, sets: int, seed: int) -> Inputs:
        """Seeded standard-normal operands (never zeros) and preallocated outputs, written once (their pages are
        faulted in here, never inside a timed call)."""
        gen = torch.Generator(device="cpu").manual_seed(seed)
        dims_a = (shape.batch, shape.m, shape.k)
        dims_b = (shape.batch, shape.k, shape.n)
        target = self.torch_dtype(dtype)
        out_dtype = torch.bfloat16 if dtype.name == "fp8" else target
        a, b, out = [], [], []
        for _ in range(sets):
            a.append(self._normal(dims_a, gen, target))
            b.append(self._normal(dims_b, gen, target, transpose_for_fp8=dtype.name == "fp8"))
            out.append(torch.zeros((shape.batch, shape.m, shape.n), dtype=out_dtype, device=self.device))
        scales = None
        if dtype.name == "fp8":
            one = torch.ones((), dtype=torch.float32, device=self.device)
            scales = (one, one.clone())
        return Inputs(a, b, out, scales)

    def _normal(self, dims: tuple[int, int, int], gen: torch.Generator, target: torch.dtype,
                transpose_for_fp8: bool = False) -> torch.Tensor:
        x = torch.randn(dims, generator=gen, dtype=torch.float32)
        if transpose_for_fp8:
            # _scaled_mm wants B column-major: store (b, n, k) contiguous, view as (b, k, n)
            x = x.transpose(1, 2).contiguous().transpose(1, 2)
        return x.to(device=self.device, dtype=target)

    def gemm_fn(self, shape: Shape, dtype: DType, mode: str, inputs: Inputs,
                compile_mode: str | None = None) -> GemmFn:
        """The callable that is timed: one GEMM on input set ``i`` into a fixed buffer."""
        op = self._op(shape, dtype, inputs)
        if mode == "compile":
            op = torch.compile(op, backend=self.compile_backend, mode=compile_mode, dynamic=False, fullgraph=True)
        a, b, out = inputs.a, inputs.b, inputs.out
        return lambda i: op(a[i], b[i], out[i])

    def _op(self, shape: Shape, dtype: DType, inputs: Inputs) -> Callable[..., torch.Tensor]:
        if dtype.name == "fp8":
            if shape.batch != 1:
                raise Unsupported("fp8 (_scaled_mm) supports batch 1 only")
            sa, sb = inputs.scales  # type: ignore[misc]

            def fp8_mm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
                return torch._scaled_mm(a[0], b[0], scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, out=out[0])

            return fp8_mm
        if shape.batch == 1:
            return lambda a, b, out: torch.mm(a[0], b[0], out=out[0])
        return lambda a, b, out: torch.bmm(a, b, out=out)

    def block_timer(self, call: Callable[[], object], shape: Shape | None = None, dtype: DType | None = None,
                    mode: str = "eager") -> tuple[BlockTimer, str]:
        """A block timer for ``call`` and its name, recorded as the record's ``timer``.

        ``shape``, ``dtype`` and ``mode`` let a backend pick its timer (CUDA
        graphs for tiny GEMMs); ``None`` means "not a GEMM" (a copy, say).
        """
        return host_block_timer(call, sync=self.sync), self.timer_name

    # ----- per-shape hooks ----------------------------------------------
    def telemetry_start(self) -> None:
        """Called right before a shape's measurement starts (sampler threads, counters)."""

    def telemetry_stop(self) -> Telemetry:
        """Called right after it ends, also when it raised; returns what was observed."""
        return Telemetry()

    def soak_shape(self) -> tuple[Shape, DType]:
        """The GEMM :meth:`soak` runs: large enough to keep every unit busy."""
        from mfu_sweep.dtypes import get_dtype

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

