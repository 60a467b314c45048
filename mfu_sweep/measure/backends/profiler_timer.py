"""``--timer profiler``: the GEMM's own time, summed from ``torch.profiler`` (Kineto) events of the timed calls.

Launch and host overheads between calls are not in it. Each block of ``n`` calls runs inside one
profiler session (started and stopped outside the returned time) and returns the sum of:

* on CUDA (written, not run on a GPU): every CUDA kernel event (CUPTI) recorded while the block ran,
  so the time of the kernels the calls launched;
* on the CPU: every top-level matmul op event (``aten::mm``, ``aten::bmm``, ``aten::_scaled_mm``,
  ``aten::_grouped_mm`` ...; :data:`GEMM_OPS`), the CPU having no kernels apart from its ops: the op's
  time from dispatch to return, without the Python loop around it.

A block that records no such event raises (a timer that measured nothing must not return zero). The
session's start and stop cost milliseconds, so a profiled sweep spends more of its budget outside
the samples than the default timer does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from mfu_sweep.measure.timing import BlockTimer

# The aten ops a GEMM call of the backends runs as (torch.compile's extern kernels call the same ops).
GEMM_OPS = frozenset({"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::matmul", "aten::_scaled_mm",
                      "aten::_scaled_mm_v2", "aten::_grouped_mm", "aten::_scaled_grouped_mm_v2"})


def op_seconds(events: Iterable[Any], names: frozenset[str] = GEMM_OPS) -> tuple[float, int]:
    """Seconds and count of the CPU events named in ``names`` that no other such event encloses."""
    total_us, count = 0.0, 0
    for e in events:
        if e.name not in names or getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA:
            continue
        parent = e.cpu_parent
        while parent is not None and parent.name not in names:
            parent = parent.cpu_parent
        if parent is None:
            total_us += e.time_range.elapsed_us()
            count += 1
    return total_us / 1e6, count


def kernel_seconds(events: Iterable[Any]) -> tuple[float, int]:
    """Seconds and count of the CUDA kernel events."""
    kernels = [e for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA]
    return sum(e.time_range.elapsed_us() for e in kernels) / 1e6, len(kernels)


def profiler_block_timer(call: Callable[[], object], device_type: str, sync: Callable[[], object]) -> BlockTimer:
    """A block timer returning the profiled GEMM time of ``n`` calls (see the module docstring)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device_type == "cuda"
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]

    def time_block(n: int) -> float:
        sync()
        with profile(activities=activities) as prof:
            for _ in range(n):
                call()
            sync()
        events = prof.events()
        seconds, count = kernel_seconds(events) if cuda else op_seconds(events)
        if count == 0:
            what = "CUDA kernel" if cuda else f"GEMM op ({', '.join(sorted(GEMM_OPS))})"
            raise RuntimeError(f"the profiler recorded no {what} event in {n} calls")
        return seconds

    return time_block
