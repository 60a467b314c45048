"""Any other torch accelerator (XPU, MPS, HPU, a privateuse1 device) via ``torch.accelerator``.

The device is whatever ``torch.accelerator.current_accelerator()`` names.
Timing uses ``torch.Event(enable_timing=True)`` when a probe shows the device
records timing events; otherwise the host clock read after
``torch.accelerator.synchronize()`` (timer name ``host-sync``). The record
says which one was used.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

import torch

from mfu_sweep.gemm.dtypes import DType
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.backends.base import DeviceInfo, TorchBackend
from mfu_sweep.measure.timing import BlockTimer, host_block_timer, host_flush_timer
from mfu_sweep.records.fingerprint import fingerprint_from_fields
from mfu_sweep.specs import find_chip
from mfu_sweep.util.errors import BackendError


def event_block_timer(call: Callable[[], object], make_event: Callable[[], Any],
                      sync: Callable[[], object]) -> BlockTimer:
    """Timing events around ``n`` back-to-back calls; ``sync`` runs before each clock read."""
    start, end = make_event(), make_event()

    def time_block(n: int) -> float:
        sync()
        start.record()
        for _ in range(n):
            call()
        end.record()
        end.synchronize()
        sync()
        return start.elapsed_time(end) / 1e3

    return time_block


def event_flush_timer(call: Callable[[], object], flush: Callable[[], object], make_event: Callable[[], Any],
                      sync: Callable[[], object]) -> BlockTimer:
    """An event pair around every call, each queued right after ``flush``; returns the sum.

    The flush runs on the device before the start event, so it is never
    timed; one synchronisation per block. Event pairs are created once and
    reused across blocks.
    """
    pairs: list[tuple[Any, Any]] = []

    def time_block(n: int) -> float:
        while len(pairs) < n:
            pairs.append((make_event(), make_event()))
        sync()
        for start, end in pairs[:n]:
            flush()
            start.record()
            call()
            end.record()
        pairs[n - 1][1].synchronize()
        sync()
        return sum(start.elapsed_time(end) for start, end in pairs[:n]) / 1e3

    return time_block


def events_work(device: torch.device, make_event: Callable[[], Any], sync: Callable[[], object]) -> bool:
    """Whether timing events record and report an elapsed time on ``device``."""
    try:
        start, end = make_event(), make_event()
        x = torch.ones(16, device=device)
        start.record()
        x.add_(1)
        end.record()
        end.synchronize()
        sync()
        return start.elapsed_time(end) >= 0
    except (RuntimeError, NotImplementedError, AttributeError, TypeError):
        return False


def current_accelerator_type() -> str | None:
    """Device type of torch's current accelerator (``xpu``, ``mps`` ...), or None."""
    acc = getattr(torch, "accelerator", None)
    if acc is None or not acc.is_available():
        return None
    dev = acc.current_accelerator()
    return dev.type if dev is not None else None


class AcceleratorBackend(TorchBackend):
    """Whatever ``torch.accelerator`` exposes; timing events when they work, else host clock."""

    name = "accelerator"
    timer_name = "accelerator-events"

    @staticmethod
    def available() -> bool:
        return current_accelerator_type() is not None

    def __init__(self, index: int = 0) -> None:
        kind = current_accelerator_type()
        if kind is None:
            raise BackendError("no torch accelerator is available (torch.accelerator.is_available() is False)")
        count = torch.accelerator.device_count()
        if index >= count:
            raise BackendError(f"accelerator:{index} requested but only {count} {kind} device(s) are visible")
        self.index = index
        self.device = torch.device(kind, index)
        self.compile_backend = "inductor"

    @property
    def module(self) -> Any:
        """``torch.xpu``, ``torch.mps`` ... where torch has such a module."""
        return getattr(torch, self.device.type, None)

    @cached_property
    def events_ok(self) -> bool:
        return events_work(self.device, self._event, self.sync)

    def _event(self) -> Any:
        return torch.Event(device=self.device, enable_timing=True)

    def describe(self) -> DeviceInfo:
        return self._info

    @cached_property
    def _info(self) -> DeviceInfo:
        get_name = getattr(self.module, "get_device_name", None)
        try:
            name = get_name(self.index) if get_name else self.device.type
        except (RuntimeError, TypeError):
            name = self.device.type
        chip = find_chip(str(name))
        count = torch.accelerator.device_count()
        fp = fingerprint_from_fields("generic", {"name": str(name), "device_type": self.device.type, "count": count})
        return DeviceInfo(backend="accelerator", name=str(name), index=self.index,
                          count=count, chip=chip.id if chip else None,
                          details={"device_type": self.device.type,
                                   "timer": "accelerator-events" if self.events_ok else "host-sync",
                                   **fp.device_fields()})

    def sync(self) -> None:
        torch.accelerator.synchronize(self.device)

    def block_timer(self, call: Callable[[], object], shape: Shape | None = None, dtype: DType | None = None,
                    mode: str = "eager") -> tuple[BlockTimer, str]:
        if self.events_ok:
            return event_block_timer(call, self._event, self.sync), "accelerator-events"
        return host_block_timer(call, sync=self.sync), "host-sync"

    def flush_timer(self, call: Callable[[], object]) -> tuple[BlockTimer, str]:
        if self.events_ok:
            return event_flush_timer(call, self.make_flush(), self._event, self.sync), "accelerator-events+flush"
        return host_flush_timer(call, self.make_flush(), sync=self.sync), "host-sync+flush"
