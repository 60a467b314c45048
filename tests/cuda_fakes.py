"""A fake ``torch.cuda`` and a fake NVML for tests/test_cuda_fake.py: they test logic, never numbers.

The fake GPU is the CPU. :class:`FakeGpu` is a ``TorchDispatchMode``: every GEMM op that runs while it is active
(``aten::mm``, ``bmm``, ``_scaled_mm``, ``_grouped_mm`` ...) is one kernel on the fake device, whose clock advances
``kernel_s`` per kernel, and whose energy counter ``mj_per_kernel``. CUDA events read that clock, so a block of
``n`` calls times exactly ``n * kernel_s``; a CUDA graph counts the kernels launched while it is captured and
replays that many. ``torch._grouped_mm`` checks the group sizes as the CUTLASS kernel of torch's
``GroupMMCommon.cuh`` does on the device (bf16, compute capability 9.x/10.x) and, when a check fails, poisons the
context as a device-side assert does: every later op fails.

:func:`fake_nvml` builds a ``pynvml`` module from the real bindings (nvidia-ml-py): its constants, its
``NVMLError`` and its ctypes structures (``c_nvmlFieldValue_t``, process records), with the device functions
answering from a :class:`NvmlState`.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pynvml
import torch
from torch.utils._python_dispatch import TorchDispatchMode

GEMM_OPS = frozenset({"mm", "bmm", "addmm", "baddbmm", "_scaled_mm", "_scaled_mm_v2", "_grouped_mm"})


class DeviceAssert(RuntimeError):
    pass


class FakeGpu(TorchDispatchMode):
    """The device model (see the module docstring)."""

    def __init__(self, name: str = "NVIDIA H100 80GB HBM3", capability: tuple[int, int] = (9, 0),
                 kernel_s: float = 1e-4, mj_per_kernel: float = 50.0) -> None:
        super().__init__()
        self.name = name
        self.capability = capability
        self.kernel_s = kernel_s
        self.mj_per_kernel = mj_per_kernel
        self.kernels = 0
        self.capturing: FakeGraph | None = None
        self.poisoned: str | None = None
        self.syncs = 0

    @property
    def clock_s(self) -> float:
        return self.kernels * self.kernel_s

    @property
    def energy_mj(self) -> float:
        return self.kernels * self.mj_per_kernel

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self.poisoned:
            raise DeviceAssert(f"CUDA error: device-side assert triggered ({self.poisoned})")
        name = func._schema.name.split("::")[-1]
        if name == "_grouped_mm":
            self._check_grouped(args, kwargs)
        if name in GEMM_OPS:
            if self.capturing is not None:
                self.capturing.kernels += 1
            else:
                self.kernels += 1
        return func(*args, **kwargs)

    def _check_grouped(self, args: tuple, kwargs: dict) -> None:
        """prepare_grouped_gemm_data's device asserts (torch GroupMMCommon.cuh), on the CUTLASS path only."""
        a, b = args[0], args[1]
        offs = kwargs.get("offs", args[2] if len(args) > 2 else None)
        if offs is None or a.dtype != torch.bfloat16 or self.capability[0] not in (9, 10):
            return
        ends = [int(x) for x in offs.tolist()]
        sizes = [e - s for s, e in zip([0, *ends[:-1]], ends, strict=True)]
        a_row_major, b_row_major = a.stride(-1) == 1, b.stride(-1) == 1
        along_k = a.dim() == 2 and b.dim() == 2
        align = 16 // a.element_size()
        for g, delta in enumerate(sizes):
            if along_k and not (not a_row_major and b_row_major) and delta <= 0:
                self.poisoned = "expected offsets to be greater than 0"
            last = g == len(sizes) - 1
            if not last and ((along_k and (a_row_major or not b_row_major)) or (not along_k and not a_row_major)) \
                    and delta % align:
                self.poisoned = "expected input tensor dynamic dimension byte size to be non-negative multiple of 16"
        if self.poisoned:
            raise DeviceAssert(f"CUDA error: device-side assert triggered ({self.poisoned})")


@dataclass
class FakeGraph:
    gpu: FakeGpu
    kernels: int = 0
    replays: int = 0

    def replay(self) -> None:
        self.replays += 1
        self.gpu.kernels += self.kernels


class FakeEvent:
    def __init__(self, gpu: FakeGpu) -> None:
        self.gpu = gpu
        self.at: float | None = None

    def record(self, stream: Any = None) -> None:
        self.at = self.gpu.clock_s

    def synchronize(self) -> None:
        self.gpu.syncs += 1

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.at is not None and end.at is not None, "an event was not recorded"
        return (end.at - self.at) * 1e3


class FakeStream:
    def __init__(self, device: Any = None) -> None:
        self.device = device

    def wait_stream(self, other: Any) -> None:
        pass


def device_properties(gpu: FakeGpu) -> types.SimpleNamespace:
    return types.SimpleNamespace(name=gpu.name, major=gpu.capability[0], minor=gpu.capability[1],
                                 total_memory=80 * 2**30, multi_processor_count=132, L2_cache_size=50 * 2**20,
                                 uuid="GPU-12345678-1234-1234-1234-123456789abc", clock_rate=1_980_000,
                                 memory_clock_rate=2_619_000, memory_bus_width=5120)


def fake_cuda(gpu: FakeGpu) -> dict[str, Any]:
    """The ``torch.cuda`` attributes CudaBackend, its timers and selftest use, answered by ``gpu``."""

    def graph(g: FakeGraph) -> contextlib.AbstractContextManager[None]:
        @contextlib.contextmanager
        def capture() -> Iterator[None]:
            gpu.capturing = g
            try:
                yield
            finally:
                gpu.capturing = None

        return capture()

    def synchronize(device: Any = None) -> None:
        gpu.syncs += 1

    return {
        "is_available": lambda: True, "device_count": lambda: 1, "set_device": lambda device: None,
        "get_device_properties": lambda device=None: device_properties(gpu),
        "get_device_name": lambda device=None: gpu.name, "synchronize": synchronize,
        "Event": lambda enable_timing=False: FakeEvent(gpu), "Stream": FakeStream,
        "current_stream": lambda device=None: FakeStream(device), "stream": lambda s: contextlib.nullcontext(),
        "CUDAGraph": lambda: FakeGraph(gpu), "graph": graph, "is_bf16_supported": lambda: True,
    }


# ----- NVML -------------------------------------------------------------------------------------------
@dataclass
class NvmlState:
    """What the fake NVML answers: a function of the read count for the SM clock and the reason bits."""

    clock: Callable[[int], int] = lambda i: 1980
    reasons: Callable[[int], int] = lambda i: 0
    max_clock: int = 1980
    power_mw: int = 650_000
    gpu: FakeGpu | None = None
    processes: list[int] = field(default_factory=list)
    utilisation: dict[int, int] = field(default_factory=dict)
    clock_reads: int = 0
    reason_reads: int = 0


def fake_nvml(state: NvmlState) -> types.ModuleType:
    """A ``pynvml`` module of the real bindings' constants and structures, its device calls answered by ``state``."""
    mod = types.ModuleType("pynvml")
    for name in dir(pynvml):
        if name.startswith(("NVML_", "nvmlClocks", "c_nvml")) or name == "NVMLError":
            setattr(mod, name, getattr(pynvml, name))
    handle = object()

    def clock(h: Any, kind: int) -> int:
        state.clock_reads += 1
        return state.clock(state.clock_reads - 1)

    def reasons(h: Any) -> int:
        state.reason_reads += 1
        return state.reasons(state.reason_reads - 1)

    def field_values(h: Any, ids: list[int]) -> list[Any]:
        value = pynvml.c_nvmlFieldValue_t()
        value.fieldId = ids[0]
        value.nvmlReturn = pynvml.NVML_SUCCESS
        value.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
        value.value.uiVal = state.power_mw
        return [value]

    def processes(h: Any) -> list[Any]:
        out = []
        for pid in state.processes:
            info = pynvml.c_nvmlProcessInfo_t()
            info.pid = pid
            out.append(info)
        return out

    def utilisation(h: Any, since: int) -> list[Any]:
        out = []
        for ts, (pid, sm) in enumerate(state.utilisation.items(), start=since + 1):
            sample = pynvml.c_nvmlProcessUtilizationSample_t()
            sample.pid, sample.smUtil, sample.timeStamp = pid, sm, ts
            out.append(sample)
        return out

    def energy(h: Any) -> int:
        if state.gpu is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(state.gpu.energy_mj)

    calls = {
        "nvmlInit": lambda: None, "nvmlDeviceGetHandleByUUID": lambda uuid: handle,
        "nvmlDeviceGetHandleByIndex": lambda index: handle, "nvmlDeviceGetClockInfo": clock,
        "nvmlDeviceGetMaxClockInfo": lambda h, kind: state.max_clock,
        "nvmlDeviceGetCurrentClocksEventReasons": reasons, "nvmlDeviceGetFieldValues": field_values,
        "nvmlDeviceGetPowerUsage": lambda h: state.power_mw, "nvmlDeviceGetTemperature": lambda h, kind: 55,
        "nvmlDeviceGetTotalEnergyConsumption": energy, "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700_000,
        "nvmlSystemGetDriverVersion": lambda: "580.159.04", "nvmlDeviceGetApplicationsClock": lambda h, kind: 1755,
        "nvmlDeviceGetComputeRunningProcesses": processes, "nvmlDeviceGetProcessUtilization": utilisation,
    }
    for name, fn in calls.items():
        setattr(mod, name, fn)
    return mod
