"""NVIDIA GPUs through CUDA, and AMD GPUs through ROCm (same torch.cuda API).

Timing uses device events around a block of back-to-back calls. For GEMMs so
small that the host's launch cost rivals the kernel, the block is captured
once in a CUDA graph and replays are timed instead (``timer="graph"``);
``"auto"`` picks the graph when the GEMM's estimated time at peak is below
:data:`GRAPH_BELOW_S`. The choice is an argument of :class:`CudaBackend`, or
the environment variable :data:`TIMER_ENV` (what ``sweep --timer`` sets).

Operand sets rotate through at least four times the L2 (and 512 MiB, which
also covers AMD's 256 MB Infinity Cache), so a call does not find its inputs
in cache. NVML (``pip install nvidia-ml-py``) adds clocks, power, temperature
and clock-throttle reasons sampled while each shape runs; on ROCm the same
readings come through ``torch.cuda``'s amdsmi helpers where installed.
Nothing here runs at import: the module imports on machines without a GPU.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

import torch

from mfu_sweep.gemm.dtypes import DType
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.backends.base import DeviceInfo, Telemetry, TorchBackend, Unsupported
from mfu_sweep.measure.backends.cuda_telemetry import (
    NvmlDevice,
    Reader,
    Sampler,
    load_nvml,
    summarize_telemetry,
    torch_reader,
)
from mfu_sweep.measure.backends.generic import event_flush_timer
from mfu_sweep.measure.backends.scaled import rocm_32x8_swizzler
from mfu_sweep.measure.layouts import grouped_problem
from mfu_sweep.measure.machine.memory import Free
from mfu_sweep.measure.task import TIMER_ENV
from mfu_sweep.measure.timing import BlockTimer
from mfu_sweep.records.fingerprint import Fingerprint, fingerprint_from_fields, gpu_fields
from mfu_sweep.specs import ChipSpec, find_chip, load_chips
from mfu_sweep.util.errors import BackendError

TIMERS = ("auto", "events", "graph", "profiler")
# Eager launch cost of one torch.mm is ~5-10 us of host time; a kernel that is
# estimated (at peak, so optimistically) below this runs from a CUDA graph.
GRAPH_BELOW_S = 50e-6
# A captured graph holds at least this many calls, so one replay's launch cost
# is spread over many GEMMs.
MIN_GRAPH_CALLS = 16
L2_ROTATION_FACTOR = 4
MIN_ROTATION_BYTES = 512 * 2**20
# Used for the timer choice when no spec entry matches the device name.
FALLBACK_TFLOPS = 1000.0
FALLBACK_BANDWIDTH_TBS = 3.0


# ----- pure decisions (unit-tested without a GPU) ---------------------------
def estimate_call_s(shape: Shape, dtype: DType, peak_tflops: float | None,
                    bandwidth_tbs: float | None) -> float:
    """Roofline time of one GEMM at the vendor peak: an optimistic lower bound."""
    tflops = peak_tflops or FALLBACK_TFLOPS
    bw = bandwidth_tbs or FALLBACK_BANDWIDTH_TBS
    return max(shape.flops / (tflops * 1e12), shape.bytes(dtype) / (bw * 1e12))


def choose_timer(estimated_call_s: float, override: str = "auto", mode: str = "eager",
                 threshold_s: float = GRAPH_BELOW_S) -> str:
    """``"events"`` or ``"graph"`` for one shape.

    An explicit override wins. ``auto`` uses a graph for short eager GEMMs
    only: compiled callables may hold their own graphs (mode
    ``reduce-overhead``) and must not be captured again.
    """
    if override not in TIMERS:
        raise ValueError(f"timer {override!r} is not one of {', '.join(TIMERS)}")
    if override != "auto":
        return override
    return "graph" if mode == "eager" and estimated_call_s < threshold_s else "events"


def graph_calls(sets: int, minimum: int = MIN_GRAPH_CALLS) -> int:
    """Calls captured in one graph: whole passes over the operand sets, at least ``minimum``."""
    sets = max(1, sets)
    return sets * max(1, math.ceil(minimum / sets))


def rotation_bytes_for(l2_bytes: int | None) -> int:
    """Operand bytes to cycle: ``L2_ROTATION_FACTOR`` x L2, at least :data:`MIN_ROTATION_BYTES`.

    Rotation keeps GEMMs back to back. The alternative, ``--cache flush``
    (overwriting a buffer of this size before every call, as nvbench's cold
    mode and triton's do_bench do), needs an event pair per call so the
    flush is not timed, and so adds per-call event overhead and idle gaps.
    Rotation is limited by the bench's cap on operand sets (64): the tiniest
    shapes still fit in L2 and are measured L2-warm; flush has no such limit.
    """
    return max(L2_ROTATION_FACTOR * (l2_bytes or 0), MIN_ROTATION_BYTES)


def fp8_dtype_name(is_hip: bool, arch: str | None) -> str:
    """torch float8 type for e4m3 inputs: ``fnuz`` on MI300-class (gfx94x), OCP ``fn`` elsewhere."""
    return "float8_e4m3fnuz" if is_hip and (arch or "").startswith("gfx94") else "float8_e4m3fn"


# The row- and block-scaled formats: the NVIDIA compute capabilities (lowest, below) and AMD targets that run them.
# fp8-rowwise runs from sm_89 (Ada): torch's _scaled_mm takes row-wise scales there through a CUTLASS kernel.
SCALED_GPUS: dict[str, tuple[tuple[int, int], tuple[int, int], tuple[str, ...]]] = {
    "fp8-rowwise": ((8, 9), (99, 0), ("gfx94", "gfx95")),
    "mxfp8": ((10, 0), (11, 0), ("gfx95",)),
    "mxfp4": ((10, 0), (11, 0), ("gfx95",)),
    "nvfp4": ((10, 0), (11, 0), ()),
}


def scaled_reason(dtype: str, capability: tuple[int, int], is_hip: bool, arch: str) -> str | None:
    """Why the row- or block-scaled ``dtype`` cannot run on this GPU (by its architecture), or None."""
    low, high, amd = SCALED_GPUS[dtype]
    if is_hip:
        if amd and arch.startswith(amd):
            return None
        where = f"AMD {'/'.join(a + 'x' for a in amd)}" if amd else "no AMD GPU (NVFP4 is NVIDIA's format)"
        return f"{dtype} needs {where}, this is {arch or 'unknown'}"
    if low <= capability < high:
        return None
    span = f">= {low[0]}.{low[1]}" if high[0] == 99 else f"{low[0]}.x"
    return f"{dtype} needs compute capability {span}, this GPU has {capability[0]}.{capability[1]}"


def unsupported_reason(dtype: str, capability: tuple[int, int], is_hip: bool, arch: str | None,
                       bf16_ok: bool = True) -> str | None:
    """Why ``dtype`` cannot run on this GPU, or None when it can."""
    arch = arch or ""
    if dtype in SCALED_GPUS:
        return scaled_reason(dtype, capability, is_hip, arch)
    if dtype == "fp8":
        if is_hip:
            if arch.startswith(("gfx94", "gfx95")):
                return None
            return f"fp8 needs MI300-class or newer (gfx94x/gfx95x), this is {arch or 'unknown'}"
        if capability < (8, 9):
            return f"fp8 (_scaled_mm) needs compute capability >= 8.9, this GPU has {capability[0]}.{capability[1]}"
    if dtype == "tf32":
        if is_hip:
            return "tf32 on ROCm is not controlled by torch's allow_tf32 flag; not swept"
        if capability < (8, 0):
            return f"tf32 needs compute capability >= 8.0, this GPU has {capability[0]}.{capability[1]}"
    if dtype == "bf16" and not bf16_ok:
        return "bf16 matmul is not supported on this GPU"
    return None


# hipBLASLt reads gfx950's MX block scales pre-swizzled in 32 x 8 tiles from these ROCm versions on.
ROCM_32X8 = {"mxfp4": (7, 13), "mxfp8": (7, 14)}


def rocm_version(hip: str | None) -> tuple[int, int] | None:
    """(major, minor) of a ``torch.version.hip`` string such as ``7.14.60000-abc``; None when unreadable."""
    match = re.match(r"(\d+)\.(\d+)", hip or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def rocm_scale_layout(dtype: str, hip: str | None, torch_has_32x8: bool) -> str:
    """The block-scale layout of ``dtype`` on gfx950: ``32x8`` where ROCm (:data:`ROCM_32X8`) and the torch build
    (``SwizzleType.SWIZZLE_32_8`` and its builder) both have it, else ``none`` (row-major, which hipBLASLt also
    takes)."""
    version, since = rocm_version(hip), ROCM_32X8.get(dtype)
    return "32x8" if torch_has_32x8 and since and version and version >= since else "none"


def grouped_fast_path(capability: tuple[int, int], is_hip: bool, dtype: str) -> bool:
    """Whether ``torch._grouped_mm`` runs its CUTLASS kernel here (bf16 on NVIDIA compute capability 9.x or 10.x),
    whose device-side asserts check the group sizes (:func:`~mfu_sweep.measure.layouts.grouped_problem`)."""
    return not is_hip and capability[0] in (9, 10) and dtype == "bf16"


# ----- timers ---------------------------------------------------------------
def event_block_timer(call: Callable[[], object], device: torch.device) -> BlockTimer:
    """CUDA events around ``n`` back-to-back calls on the current stream."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)

    def time_block(n: int) -> float:
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(n):
            call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3

    return time_block


class GraphBlockTimer:
    """Replays of a CUDA graph holding ``calls_per_graph`` calls, timed with events (a block timer).

    The first invocation runs its ``n`` calls eagerly (so the record's first call still contains first-use
    costs), then warms up on a side stream and captures. A later block of ``n`` calls replays
    ``ceil(n / calls_per_graph)`` graphs and returns the time scaled to ``n`` calls; ``last_calls`` says how many
    calls it really ran (:data:`mfu_sweep.measure.machine.energy.RAN_ATTR`: the energy meter counts those).
    """

    def __init__(self, call: Callable[[], object], device: torch.device, calls_per_graph: int) -> None:
        self.call = call
        self.device = device
        self.calls_per_graph = calls_per_graph
        self.events = event_block_timer(call, device)
        self.graph: Any = None
        self.last_calls = 0

    def capture(self) -> Any:
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(3):
                self.call()
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(self.calls_per_graph):
                self.call()
        torch.cuda.synchronize(self.device)
        return graph

    def __call__(self, n: int) -> float:
        if self.graph is None:
            first = self.events(n)
            self.last_calls = n
            self.graph = self.capture()
            return first
        replays = math.ceil(n / self.calls_per_graph)
        self.last_calls = replays * self.calls_per_graph
        elapsed = _time_replays(self.graph, replays, self.device)
        return elapsed * n / self.last_calls


def graph_block_timer(call: Callable[[], object], device: torch.device, calls_per_graph: int) -> GraphBlockTimer:
    """The block timer of :class:`GraphBlockTimer`."""
    return GraphBlockTimer(call, device, calls_per_graph)


def _time_replays(graph: torch.cuda.CUDAGraph, replays: int, device: torch.device) -> float:
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(device)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


# ----- the backend ----------------------------------------------------------
class CudaBackend(TorchBackend):
    """One CUDA (or ROCm) device; ``timer`` is ``auto``, ``events`` or ``graph``."""

    name = "cuda"
    timer_name = "cuda-events"
    compile_backend = "inductor"
    draws_on_device = True  # a device generator fills the operands (one host thread would take minutes)

    @staticmethod
    def available() -> bool:
        return torch.cuda.is_available()

    def __init__(self, index: int = 0, timer: str | None = None) -> None:
        if not torch.cuda.is_available():
            raise BackendError(f"no CUDA/ROCm device: torch.cuda.is_available() is False (torch {torch.__version__}, "
                               f"built for CUDA {torch.version.cuda}, HIP {torch.version.hip})")
        count = torch.cuda.device_count()
        if index >= count:
            raise BackendError(f"cuda:{index} requested but only {count} CUDA device(s) are visible")
        super().__init__(index)
        torch.cuda.set_device(self.device)
        self.timer = timer or os.environ.get(TIMER_ENV, "auto")
        if self.timer not in TIMERS:
            raise BackendError(f"{TIMER_ENV}={self.timer!r} is not one of {', '.join(TIMERS)}")
        self.is_hip = torch.version.hip is not None
        self._sets = 1
        self._sampler: Sampler | None = None
        self._nvml_device = self._open_nvml()

    # ----- description -------------------------------------------------
    @cached_property
    def props(self) -> Any:
        return torch.cuda.get_device_properties(self.device)

    @property
    def capability(self) -> tuple[int, int]:
        return (self.props.major, self.props.minor)

    @property
    def arch(self) -> str | None:
        return getattr(self.props, "gcnArchName", None) if self.is_hip else f"sm_{self.props.major}{self.props.minor}"

    def l2_bytes(self) -> int | None:
        size = getattr(self.props, "L2_cache_size", None)
        return int(size) if size else None

    def _open_nvml(self) -> NvmlDevice | None:
        if self.is_hip:
            return None
        nvml = load_nvml()
        if nvml is None:
            return None
        uuid = getattr(self.props, "uuid", None)
        try:
            return NvmlDevice(nvml, self.index, str(uuid) if uuid else None)
        except (BackendError, nvml.NVMLError):
            return None

    @cached_property
    def _info(self) -> DeviceInfo:
        p = self.props
        details: dict[str, Any] = {
            "memory_bytes": int(p.total_memory),
            "compute_capability": f"{p.major}.{p.minor}",
            "arch": self.arch,
            "sm_count": int(p.multi_processor_count),
            "l2_bytes": self.l2_bytes(),
            "sm_clock_max_khz": getattr(p, "clock_rate", None),
            "memory_clock_khz": getattr(p, "memory_clock_rate", None),
            "memory_bus_width_bits": getattr(p, "memory_bus_width", None),
            "cuda_version": torch.version.cuda,
            "hip_version": torch.version.hip,
            "uuid": str(getattr(p, "uuid", "")) or None,
            "timer_setting": self.timer,
            "telemetry": "nvml" if self._nvml_device else (
                "torch.cuda" if self.is_hip else "none (pip install nvidia-ml-py)"),
        }
        if self._nvml_device is not None:
            details.update(self._nvml_device.static())
        details.update(self._fingerprint(details).device_fields())
        return DeviceInfo(backend="cuda", name=torch.cuda.get_device_name(self.device), index=self.index,
                          count=torch.cuda.device_count(), chip=self._chip_id(), details=details)

    def _fingerprint(self, d: Mapping[str, Any]) -> Fingerprint:
        """From torch.cuda.get_device_properties and, on NVIDIA with nvidia-ml-py, NVML's maximum clocks and driver."""
        max_sm = d.get("max_sm_clock_mhz") or (d["sm_clock_max_khz"] // 1000 if d.get("sm_clock_max_khz") else None)
        max_mem = d.get("max_mem_clock_mhz") or (d["memory_clock_khz"] // 1000 if d.get("memory_clock_khz") else None)
        fields = gpu_fields(
            torch.cuda.get_device_name(self.device), uuid=d.get("uuid"), sm_count=d.get("sm_count"),
            memory_bytes=d.get("memory_bytes"), max_sm_clock_mhz=max_sm, max_mem_clock_mhz=max_mem,
            compute_capability=self.arch if self.is_hip else d.get("compute_capability"),
            driver=d.get("driver_version"), runtime=d.get("hip_version") or d.get("cuda_version"))
        return fingerprint_from_fields("rocm" if self.is_hip else "cuda", fields)

    def _chip_id(self) -> str | None:
        chip = find_chip(torch.cuda.get_device_name(self.device))
        return chip.id if chip else None

    def describe(self) -> DeviceInfo:
        return self._info

    def environment(self) -> dict[str, Any]:
        env = super().environment()
        matmul = torch.backends.cuda.matmul
        env.update({"torch_cuda": torch.version.cuda, "torch_hip": torch.version.hip,
                    "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
                    "allow_bf16_reduced_precision_reduction": matmul.allow_bf16_reduced_precision_reduction,
                    "allow_fp16_reduced_precision_reduction": matmul.allow_fp16_reduced_precision_reduction})
        try:
            import triton

            env["triton"] = triton.__version__
        except ImportError:
            pass
        return env

    def memory_bytes(self) -> int | None:
        return int(self.props.total_memory)

    def free_memory(self) -> Free | None:
        free, _ = torch.cuda.mem_get_info(self.device)  # the driver's count: other processes' use is out of it
        return Free(int(free), f"torch.cuda.mem_get_info on {self.device}")

    # ----- execution ---------------------------------------------------
    def sync(self) -> None:
        torch.cuda.synchronize(self.device)

    def rotation_bytes(self) -> int:
        return rotation_bytes_for(self.l2_bytes())

    def torch_dtype(self, dtype: DType) -> torch.dtype:
        if dtype.scaling in ("tensor", "row"):
            return getattr(torch, fp8_dtype_name(self.is_hip, self.arch))
        return super().torch_dtype(dtype)

    def check_supported(self, dtype: DType, mode: str) -> None:
        reason = unsupported_reason(dtype.name, self.capability, self.is_hip, self.arch,
                                    bf16_ok=torch.cuda.is_bf16_supported())
        if reason:
            raise Unsupported(reason)
        if dtype.quantized:
            self.check_scaled(dtype)  # the architecture can; can this torch build?

    def check_launch(self, shape: Shape, dtype: DType) -> None:
        """:class:`Unsupported` for a shape the GEMM's kernel would stop with a device-side assert, which poisons the
        CUDA context for every later shape in this worker: asked before any operand is made or kernel launched."""
        if dtype.scaling != "none" and any(d % 16 for d in (shape.m, shape.n, shape.k)):
            raise Unsupported(f"{dtype.name} (cuBLASLt scaled matmul) needs m, n, k divisible by 16; shape is {shape}")
        if shape.grouped and grouped_fast_path(self.capability, self.is_hip, dtype.name):
            problem = grouped_problem(shape, dtype.element_bytes)
            if problem:
                raise Unsupported(problem)

    def make_inputs(self, shape: Shape, dtype: DType, sets: int, seed: int) -> Any:
        self.check_launch(shape, dtype)
        self._sets = sets
        return super().make_inputs(shape, dtype, sets, seed)

    def gemm_fn(self, shape: Shape, dtype: DType, mode: str, inputs: Any, compile_mode: str | None = None) -> Any:
        self.check_launch(shape, dtype)
        return super().gemm_fn(shape, dtype, mode, inputs, compile_mode)

    def scale_layout(self, dtype: DType) -> str:
        """cuBLASLt reads block scales in its 128 x 4 tiled layout (``32x4x4``); hipBLASLt (gfx950) in row-major
        order, or pre-swizzled 32 x 8 where ROCm and torch offer it (:func:`rocm_scale_layout`)."""
        if not self.is_hip:
            return "32x4x4"
        return rocm_scale_layout(dtype.name, torch.version.hip, rocm_32x8_swizzler() is not None)

    def _peak_for(self, dtype: DType) -> tuple[float | None, float | None]:
        chip: ChipSpec | None = find_chip(self.describe().name, load_chips())
        if chip is None:
            return None, None
        return chip.peak_tflops.get(dtype.name) or chip.peak_tflops.get(dtype.peak_key), chip.memory_bandwidth_tbs

    def block_timer(self, call: Callable[[], object], shape: Shape | None = None, dtype: DType | None = None,
                    mode: str = "eager") -> tuple[BlockTimer, str]:
        if shape is not None and self.timer == "profiler":
            return self.profiler_timer(call)
        if shape is None or dtype is None:
            kind = "events" if self.timer in ("auto", "profiler") else self.timer
        else:
            kind = choose_timer(estimate_call_s(shape, dtype, *self._peak_for(dtype)), self.timer, mode)
        if kind == "graph":
            calls = graph_calls(self._sets)
            return graph_block_timer(call, self.device, calls), f"cuda-graph[{calls}]"
        return event_block_timer(call, self.device), "cuda-events"

    def flush_timer(self, call: Callable[[], object]) -> tuple[BlockTimer, str]:
        return event_flush_timer(call, self.make_flush(), lambda: torch.cuda.Event(enable_timing=True), self.sync), \
            "cuda-events+flush"

    # ----- telemetry ---------------------------------------------------
    def throttle_probe(self) -> Any:
        """NVML's throttle reasons and SM clock, read at once (None without nvidia-ml-py, and on ROCm)."""
        return self._nvml_device.probe if self._nvml_device is not None else None

    def energy_reader(self) -> Any:
        """NVML's cumulative energy counter (mJ; Volta and newer), None where the driver has none."""
        dev = self._nvml_device
        if dev is None:
            return None
        try:
            dev.energy_mj()
        except dev.nvml.NVMLError:
            return None
        return dev.energy_mj

    def _reader(self) -> Reader | None:
        if self._nvml_device is not None:
            return self._nvml_device.read
        return torch_reader(self.device) if self.is_hip else None

    def telemetry_start(self) -> None:
        read = self._reader()
        self._sampler = Sampler(read) if read else None
        if self._sampler:
            self._sampler.start()

    def telemetry_stop(self) -> Telemetry:
        if self._sampler is None:
            return Telemetry()
        samples = self._sampler.stop()
        self._sampler = None
        max_clock = self._info.details.get("max_sm_clock_mhz")
        if max_clock is None and self._info.details.get("sm_clock_max_khz"):
            max_clock = self._info.details["sm_clock_max_khz"] / 1000
        return summarize_telemetry(samples, max_clock)

    def soak_shape(self) -> tuple[Shape, DType]:
        from mfu_sweep.gemm.dtypes import get_dtype

        return Shape(1, 8192, 8192, 8192), get_dtype("bf16")
