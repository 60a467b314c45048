"""GPU telemetry while a shape runs: NVML (clocks, power, temperature, throttle reasons) or torch.cuda's amdsmi
helpers on ROCm, sampled on a thread, and their summary per shape. Nothing runs at import.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch

from mfu_sweep.errors import BackendError
from mfu_sweep.measure.backends.base import Telemetry

SAMPLE_INTERVAL_S = 0.02


# nvbench's rule: an SM clock below this fraction of its maximum means throttled.
CLOCK_THROTTLE_FRACTION = 0.75


# NVML clocks-event (throttle) reason bits, from nvml.h (nvmlClocksEventReason*).
THROTTLE_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


# Reasons that lower the clock below what the chip would otherwise run at under load.
THROTTLING = frozenset({"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
                        "hw_power_brake_slowdown"})


def decode_throttle_reasons(mask: int) -> list[str]:
    """Names of the NVML clocks-event reason bits set in ``mask``."""
    names = [name for bit, name in THROTTLE_BITS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_BITS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


def _spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summarize_telemetry(samples: list[Mapping[str, Any]], max_sm_clock_mhz: float | None) -> Telemetry:
    """Min/median/max of each reading, the union of throttle reasons, and the ``throttled`` flag.

    A shape is flagged ``throttled`` when NVML reported a throttling reason
    (power cap, thermal, hardware slowdown) or the SM clock fell below
    :data:`CLOCK_THROTTLE_FRACTION` of its maximum. Nothing is discarded.
    """
    if not samples:
        return Telemetry()
    out: dict[str, Any] = {"samples": len(samples)}
    for key in ("sm_clock_mhz", "power_w", "temp_c"):
        values = [float(s[key]) for s in samples if s.get(key) is not None]
        if values:
            out[key] = _spread(values)
    reasons: set[str] = set()
    for s in samples:
        reasons.update(s.get("throttle_reasons", ()))
    if any("throttle_reasons" in s for s in samples):
        out["throttle_reasons"] = sorted(reasons)
    why = sorted(reasons & THROTTLING)
    clock = out.get("sm_clock_mhz")
    if clock and max_sm_clock_mhz and clock["min"] < CLOCK_THROTTLE_FRACTION * max_sm_clock_mhz:
        why.append(f"sm_clock {clock['min']:.0f} < {CLOCK_THROTTLE_FRACTION:.0%} of max {max_sm_clock_mhz:.0f} MHz")
    out["max_sm_clock_mhz"] = max_sm_clock_mhz
    if why:
        out["throttled_because"] = why
    return Telemetry(extra={"telemetry": out}, flags=("throttled",) if why else ())


Reader = Callable[[], dict[str, Any]]


class Sampler:
    """Calls ``read`` every ``interval_s`` on a thread, plus once at start and at stop."""

    def __init__(self, read: Reader, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.read = read
        self.interval_s = interval_s
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _read(self) -> dict[str, Any]:
        """One reading; a failing reader (a driver hiccup) gives a sample with the error, never an exception."""
        try:
            return self.read()
        except Exception as exc:  # noqa: BLE001 - telemetry must never take the measurement down
            return {"t": time.perf_counter(), "error": f"{type(exc).__name__}: {exc}"[:200]}

    def start(self) -> None:
        self.samples = [self._read()]
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="mfu-sweep-telemetry", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.append(self._read())

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.samples.append(self._read())
        return self.samples


def load_nvml() -> Any | None:
    """The initialised ``pynvml`` module (package nvidia-ml-py), or None when absent."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    return pynvml


class NvmlDevice:
    """NVML readings for one GPU, found by UUID so CUDA_VISIBLE_DEVICES cannot mislead."""

    def __init__(self, nvml: Any, index: int, uuid: str | None) -> None:
        self.nvml = nvml
        self.handle = None
        if uuid:
            try:
                self.handle = nvml.nvmlDeviceGetHandleByUUID(uuid if uuid.startswith("GPU-") else f"GPU-{uuid}")
            except nvml.NVMLError:
                self.handle = None
        if self.handle is None and "CUDA_VISIBLE_DEVICES" not in os.environ:
            self.handle = nvml.nvmlDeviceGetHandleByIndex(index)
        if self.handle is None:
            raise BackendError(f"NVML cannot find CUDA device {index} (uuid {uuid})")
        self._reasons = (getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                         or getattr(nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))

    def _try(self, fn: str, *args: Any) -> Any:
        try:
            return getattr(self.nvml, fn)(self.handle, *args)
        except (self.nvml.NVMLError, AttributeError):
            return None

    def read(self) -> dict[str, Any]:
        power = self._try("nvmlDeviceGetPowerUsage")
        sample = {"t": time.perf_counter(),
                  "sm_clock_mhz": self._try("nvmlDeviceGetClockInfo", self.nvml.NVML_CLOCK_SM),
                  "power_w": power / 1000 if power is not None else None,
                  "temp_c": self._try("nvmlDeviceGetTemperature", self.nvml.NVML_TEMPERATURE_GPU)}
        if self._reasons is not None:
            try:
                sample["throttle_reasons"] = decode_throttle_reasons(self._reasons(self.handle))
            except self.nvml.NVMLError:
                pass
        return sample

    def static(self) -> dict[str, Any]:
        limit = self._try("nvmlDeviceGetEnforcedPowerLimit")
        driver = None
        try:
            driver = self.nvml.nvmlSystemGetDriverVersion()
        except self.nvml.NVMLError:
            pass
        return {
            "driver_version": driver.decode() if isinstance(driver, bytes) else driver,
            "max_sm_clock_mhz": self._try("nvmlDeviceGetMaxClockInfo", self.nvml.NVML_CLOCK_SM),
            "max_mem_clock_mhz": self._try("nvmlDeviceGetMaxClockInfo", self.nvml.NVML_CLOCK_MEM),
            "applications_sm_clock_mhz": self._try("nvmlDeviceGetApplicationsClock", self.nvml.NVML_CLOCK_SM),
            "power_limit_w": limit / 1000 if limit is not None else None,
        }


def torch_reader(device: torch.device) -> Reader | None:
    """Clock/power/temperature through torch.cuda's amdsmi helpers (ROCm), if they work.

    On ROCm ``torch.cuda.power_draw`` is amdsmi's socket power, already in
    watts (on NVIDIA it would be NVML's milliwatts; NVIDIA uses :class:`NvmlDevice`).
    """

    def read() -> dict[str, Any]:
        return {"t": time.perf_counter(), "sm_clock_mhz": torch.cuda.clock_rate(device),
                "power_w": float(torch.cuda.power_draw(device)), "temp_c": torch.cuda.temperature(device)}

    try:
        read()
    except Exception:  # noqa: BLE001 - ImportError, RuntimeError, amdsmi's own AmdSmiException ...: no telemetry
        return None
    return read
