"""The host CPU through torch: host clock, estimated peak."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from mfu_sweep.gemm.dtypes import DType
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.backends.base import DeviceInfo, TorchBackend
from mfu_sweep.measure.machine.memory import Free, host_free
from mfu_sweep.measure.task import THREADS_ENV, TIMER_ENV, check_threads
from mfu_sweep.measure.timing import BlockTimer, CpuTimeBlockTimer
from mfu_sweep.records.fingerprint import cpu_fingerprint, read_meminfo_gib
from mfu_sweep.specs import ChipSpec, Peak
from mfu_sweep.specs.cpu import estimate_cpu_peak, load_cpuinfo, machine_tag
from mfu_sweep.util.errors import BackendError

CPU_TIMERS = ("auto", "profiler", "cputime")  # auto: the host clock; cputime: the calling thread's CPU time
CPUTIME_TIMER = "thread-cputime"  # the record's timer under --timer cputime
MATMUL_FLAGS = frozenset({"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "amx_fp16", "avx512_fp16"})


def last_level_cache_bytes() -> int | None:
    """Largest cache size sysfs reports for cpu0, or None."""
    best = None
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = f.read_text().strip().upper()
        try:
            mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1], 1)
            value = int(text.rstrip("KMG")) * mult
        except ValueError:
            continue
        best = max(best or 0, value)
    return best


def threads_from_env(raw: str | None) -> int | None:
    """The ``--threads`` value a sweep handed its worker, validated; None when unset."""
    if not raw:
        return None
    if not raw.isdigit():
        raise BackendError(f"{THREADS_ENV}={raw!r} must be a whole number of threads")
    try:
        return check_threads(int(raw))
    except ValueError as exc:
        raise BackendError(f"{THREADS_ENV}={raw!r}: {exc}") from None


class CpuBackend(TorchBackend):
    name = "cpu"
    timer_name = "host"

    def __init__(self, index: int = 0, threads: int | None = None) -> None:
        super().__init__(index)
        self.device = torch.device("cpu")
        threads = threads or threads_from_env(os.environ.get(THREADS_ENV))
        if threads:
            torch.set_num_threads(threads)
        self.timer = os.environ.get(TIMER_ENV) or "auto"
        if self.timer not in CPU_TIMERS:
            raise BackendError(f"{TIMER_ENV}={self.timer!r}: the CPU times with {' or '.join(CPU_TIMERS)}")

    def block_timer(self, call: Callable[[], object], shape: Shape | None = None, dtype: DType | None = None,
                    mode: str = "eager") -> tuple[BlockTimer, str]:
        """``--timer cputime``: the calling thread's CPU time (:class:`~mfu_sweep.measure.timing.CpuTimeBlockTimer`)
        for GEMMs; else the shared choice (host clock, or the profiler)."""
        if shape is not None and self.timer == "cputime":
            return CpuTimeBlockTimer(call), CPUTIME_TIMER
        return super().block_timer(call, shape, dtype, mode)

    def environment(self) -> dict[str, Any]:
        """The shared block, with ``omp_wait_policy`` where the worker's environment sets it (``--timer cputime``
        sets PASSIVE: how GEMM threads wait for each other changes what the CPU time holds)."""
        policy = os.environ.get("OMP_WAIT_POLICY")
        return {**super().environment(), **({"omp_wait_policy": policy} if policy else {})}

    def describe(self) -> DeviceInfo:
        info = load_cpuinfo()
        threads = torch.get_num_threads()
        fp = cpu_fingerprint(info, threads=threads, memory_gib=read_meminfo_gib())
        return DeviceInfo(
            backend="cpu", name=info.model, index=0, count=1, chip="cpu",
            details={"threads": threads, "cores_usable": len(os.sched_getaffinity(0)),
                     "physical_cores_usable": fp.fields["physical_cores"], "uarch": machine_tag(info),
                     "reported_clock_ghz": info.clock_ghz, "isa": sorted(info.flags & MATMUL_FLAGS),
                     "llc_bytes": last_level_cache_bytes(), **fp.device_fields()},
        )

    def peak(self, chips: Mapping[str, ChipSpec], forced: str | None = None) -> Peak:
        if forced:
            return super().peak(chips, forced)
        return estimate_cpu_peak(threads=torch.get_num_threads())

    def rotation_bytes(self) -> int:
        return 2 * (last_level_cache_bytes() or 32 * 2**20)

    def free_memory(self) -> Free | None:
        return host_free()  # MemAvailable and the cgroup's room, the smaller
