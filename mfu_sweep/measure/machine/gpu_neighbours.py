"""Other compute processes on the sweep's GPU, read through NVML by the (torch-free) parent process.

The worker's own NVML telemetry (``backends/cuda.py``: SM clock, power,
throttle reasons per shape) says how fast the GPU ran; this module says who
else ran on it: ``nvmlDeviceGetComputeRunningProcesses`` for the processes and
``nvmlDeviceGetProcessUtilization`` for their SM share since the last reading.
Written to the NVML API (nvidia-ml-py); a missing package, a failing call or a
driver that does not report per-process utilisation ends up in the reading as
``unobserved`` text, never as an exception.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any


def _open(uuid: str | None, index: int) -> tuple[Any, Any, str | None]:
    """(pynvml, handle, None) or (None, None, why not)."""
    try:
        import pynvml
    except ImportError:
        return None, None, "NVML not available (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
        if uuid:
            handle = pynvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
        else:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception as exc:  # noqa: BLE001 - NVMLError and its driver-specific subclasses
        return None, None, f"NVML failed to open the device: {type(exc).__name__}: {exc}"[:200]
    return pynvml, handle, None


def other_processes(processes: Collection[Any], own: Collection[int]) -> list[int]:
    """PIDs of NVML compute processes that are not the sweep's own."""
    return sorted({int(p.pid) for p in processes} - set(own))


def other_utilisation(samples: Collection[Any], others: Collection[int]) -> float | None:
    """Summed SM utilisation (0-1) of ``others`` in NVML process samples; None when none of them is sampled."""
    util = {}
    for s in samples:
        if int(s.pid) in others:
            util[int(s.pid)] = max(util.get(int(s.pid), 0), int(s.smUtil))
    return min(1.0, sum(util.values()) / 100.0) if util else None


class GpuNeighbours:
    """``read(own_pids)``: other compute processes on one GPU and their SM utilisation since the last read."""

    def __init__(self, uuid: str | None, index: int = 0, own: Collection[int] = ()) -> None:
        self.nvml, self.handle, self.why = _open(uuid, index)
        self.own = set(own)
        self.last_ts = 0

    @classmethod
    def for_device(cls, device: Mapping[str, Any]) -> GpuNeighbours | None:
        """A probe for an NVIDIA device description (None for other backends and ROCm)."""
        if device.get("backend") != "cuda" or device.get("hip_version"):
            return None
        return cls(device.get("uuid"), int(device.get("index") or 0))

    @property
    def note(self) -> str:
        return self.why or "NVML compute processes and per-process SM utilisation, per shape"

    def read(self, own: Collection[int] = ()) -> dict[str, Any]:
        if self.nvml is None:
            return {"unobserved": [self.why]}
        own_pids = self.own | set(own)
        out: dict[str, Any] = {}
        try:
            procs = self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
        except Exception as exc:  # noqa: BLE001 - NVML failing mid-sweep: say so, go on
            return {"unobserved": [f"compute processes: {type(exc).__name__}: {exc}"[:200]]}
        others = other_processes(procs, own_pids)
        out["other_processes"] = len(others)
        out["other_pids"] = others[:16]
        try:
            samples = self.nvml.nvmlDeviceGetProcessUtilization(self.handle, self.last_ts)
            self.last_ts = max((int(s.timeStamp) for s in samples), default=self.last_ts)
            out["other_sm_util"] = other_utilisation(samples, set(others)) if others else 0.0
        except Exception as exc:  # noqa: BLE001 - not supported on many drivers/MIG
            out["other_sm_util"] = None if others else 0.0
            out["unobserved"] = [f"per-process utilisation: {type(exc).__name__}: {exc}"[:200]]
        return out
