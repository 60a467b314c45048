"""GPU telemetry while a shape runs: NVML (clocks, power, temperature, throttle reasons) or torch.cuda's amdsmi
helpers on ROCm, sampled on a thread, and their summary per shape. Nothing runs at import.
"""

from __future__ import annotations

import os
import re
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

from mfu_sweep.measure.backends.base import Telemetry
from mfu_sweep.measure.machine.throttle import ThrottleState
from mfu_sweep.util.errors import BackendError

SAMPLE_INTERVAL_S = 0.02


# nvbench's rule: an SM clock below this fraction of its maximum means throttled.
CLOCK_THROTTLE_FRACTION = 0.75


# The prefixes of pynvml's clocks-event (throttle) reason constants: the current one, then the name older
# bindings use (it also names two bits the current one lacks, board_limit and reliability).
REASON_PREFIXES = ("nvmlClocksEventReason", "nvmlClocksThrottleReason")


# Reasons that count as throttling: thermal and hardware slowdowns. The software power cap does not: a
# power-limited GPU runs a long GEMM on random data at its power limit all the time (that is its sustained
# speed, what a model sees), and nvbench, whose rule this is, discards a block only when the SM clock falls below
# CLOCK_THROTTLE_FRACTION of its maximum. The cap is recorded (``telemetry.power_capped``), never a flag.
THROTTLING = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})
POWER_CAP = "sw_power_cap"
# NVML's reason for a clock that is low because nothing runs: such a reading says nothing of throttling.
IDLE = "gpu_idle"


def _snake(camel: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


def reason_names(nvml: Any) -> dict[int, str]:
    """Bit -> name (``sw_power_cap`` ...) of every single-bit clocks-event reason constant ``nvml`` (pynvml) has.

    ``...All`` and ``...None`` are masks, not reasons. Where two constants share a bit (NVML renamed
    ``ApplicationsClocksSetting`` to ``UserDefinedClocks``), the first name in alphabetical order wins,
    so the names recorded stay the same across binding versions.
    """
    names: dict[int, str] = {}
    for prefix in REASON_PREFIXES:
        for attr in sorted(a for a in dir(nvml) if a.startswith(prefix)):
            bit = getattr(nvml, attr)
            if isinstance(bit, int) and bit > 0 and bit & (bit - 1) == 0:
                names.setdefault(bit, _snake(attr.removeprefix(prefix)))
    return names


def decode_throttle_reasons(mask: int, names: Mapping[int, str]) -> list[str]:
    """Names of the reason bits set in ``mask`` (``names`` from :func:`reason_names`), unknown bits in hex."""
    found = [name for bit, name in sorted(names.items()) if mask & bit]
    unknown = mask & ~sum(names)
    if unknown:
        found.append(f"unknown_0x{unknown:x}")
    return found


def throttle_state(reasons: Iterable[str], sm_clock_mhz: float | None, max_sm_clock_mhz: float | None
                   ) -> ThrottleState:
    """Throttling now: a reason in :data:`THROTTLING`, or the SM clock below ``CLOCK_THROTTLE_FRACTION`` of its max.

    A clock read while NVML says the GPU is idle (:data:`IDLE`) is not judged: an idle GPU clocks down (an H200
    idles at 345 MHz), which is no throttling, and a ``wait`` policy would otherwise wait for a clock that only
    work raises. The power cap alone (:data:`POWER_CAP`) is not throttling either (see :data:`THROTTLING`).
    """
    reasons = set(reasons)
    why = sorted(reasons & THROTTLING)
    if IDLE not in reasons and sm_clock_mhz and max_sm_clock_mhz \
            and sm_clock_mhz < CLOCK_THROTTLE_FRACTION * max_sm_clock_mhz:
        why.append(f"sm_clock {sm_clock_mhz:.0f} < {CLOCK_THROTTLE_FRACTION:.0%} of max {max_sm_clock_mhz:.0f} MHz")
    return ThrottleState(bool(why), tuple(why))


def busy_clocks(samples: list[Mapping[str, Any]]) -> list[float]:
    """The SM clocks read while the shape ran: every sample but the first (read before the first GEMM, the GPU
    idle) and those NVML marks idle (:data:`IDLE`)."""
    return [float(s["sm_clock_mhz"]) for s in samples[1:]
            if s.get("sm_clock_mhz") is not None and IDLE not in s.get("throttle_reasons", ())]


def _spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def summarize_telemetry(samples: list[Mapping[str, Any]], max_sm_clock_mhz: float | None) -> Telemetry:
    """Min/median/max of each reading, the union of throttle reasons, and the ``throttled`` flag.

    A shape is flagged ``throttled`` when NVML reported a throttling reason (thermal or hardware slowdown:
    :data:`THROTTLING`) or the median SM clock of the samples read while it ran (:func:`busy_clocks`) is below
    :data:`CLOCK_THROTTLE_FRACTION` of its maximum, nvbench's rule on the clock over the measurement. The
    minimum over all samples would take the first one, read before the first GEMM on an idle GPU, and flag
    nearly every shape. The power cap is recorded as ``power_capped``. Nothing is discarded.
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
    busy = busy_clocks(samples)
    if busy:
        out["busy_sm_clock_mhz"] = statistics.median(busy)
    why = list(throttle_state(reasons - {IDLE}, out.get("busy_sm_clock_mhz"), max_sm_clock_mhz).why)
    if POWER_CAP in reasons:
        out["power_capped"] = True
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
        self.reason_names = reason_names(nvml)
        self.power_source = "instant" if self._instant_power() is not None else "average"
        self.max_sm_clock_mhz = self._try("nvmlDeviceGetMaxClockInfo", nvml.NVML_CLOCK_SM)

    def _try(self, fn: str, *args: Any) -> Any:
        try:
            return getattr(self.nvml, fn)(self.handle, *args)
        except (self.nvml.NVMLError, AttributeError):
            return None

    def _instant_power(self) -> float | None:
        """Milliwatts from the instant power field (``NVML_FI_DEV_POWER_INSTANT``), None where unsupported."""
        field_id = getattr(self.nvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field_id is None:
            return None
        values = self._try("nvmlDeviceGetFieldValues", [field_id])
        if not values or values[0].nvmlReturn != getattr(self.nvml, "NVML_SUCCESS", 0):
            return None
        return field_value(self.nvml, values[0])

    def power_w(self) -> float | None:
        """Power now: the instant field where the driver has it, else ``nvmlDeviceGetPowerUsage`` (a 1 s average
        on Ampere and newer, which smears shapes shorter than a second)."""
        mw = self._instant_power() if self.power_source == "instant" else self._try("nvmlDeviceGetPowerUsage")
        return mw / 1000 if mw is not None else None

    def energy_mj(self) -> float:
        """The cumulative energy counter in millijoules (``nvmlDeviceGetTotalEnergyConsumption``, Volta+)."""
        return float(self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle))

    def throttle_reasons(self) -> list[str] | None:
        if self._reasons is None:
            return None
        try:
            return decode_throttle_reasons(self._reasons(self.handle), self.reason_names)
        except self.nvml.NVMLError:
            return None

    def read(self) -> dict[str, Any]:
        sample = {"t": time.perf_counter(),
                  "sm_clock_mhz": self._try("nvmlDeviceGetClockInfo", self.nvml.NVML_CLOCK_SM),
                  "power_w": self.power_w(),
                  "temp_c": self._try("nvmlDeviceGetTemperature", self.nvml.NVML_TEMPERATURE_GPU)}
        reasons = self.throttle_reasons()
        if reasons is not None:
            sample["throttle_reasons"] = reasons
        return sample

    def probe(self) -> ThrottleState:
        """Throttling now (``sweep --on-throttle``): reasons and SM clock read at once (:func:`throttle_state`)."""
        clock = self._try("nvmlDeviceGetClockInfo", self.nvml.NVML_CLOCK_SM)
        return throttle_state(self.throttle_reasons() or (), clock, self.max_sm_clock_mhz)

    def static(self) -> dict[str, Any]:
        limit = self._try("nvmlDeviceGetEnforcedPowerLimit")
        driver = None
        try:
            driver = self.nvml.nvmlSystemGetDriverVersion()
        except self.nvml.NVMLError:
            pass
        return {
            "driver_version": driver.decode() if isinstance(driver, bytes) else driver,
            "power_reading": POWER_READINGS[self.power_source],
            "energy_counter": self._try("nvmlDeviceGetTotalEnergyConsumption") is not None,
            "max_sm_clock_mhz": self._try("nvmlDeviceGetMaxClockInfo", self.nvml.NVML_CLOCK_SM),
            "max_mem_clock_mhz": self._try("nvmlDeviceGetMaxClockInfo", self.nvml.NVML_CLOCK_MEM),
            "applications_sm_clock_mhz": self._try("nvmlDeviceGetApplicationsClock", self.nvml.NVML_CLOCK_SM),
            "power_limit_w": limit / 1000 if limit is not None else None,
        }


POWER_READINGS = {"instant": "NVML_FI_DEV_POWER_INSTANT (instant)",
                  "average": "nvmlDeviceGetPowerUsage (1 s average on Ampere and newer)"}


def field_value(nvml: Any, value: Any) -> float:
    """The number in one ``nvmlFieldValue_t``, read from the union member its ``valueType`` names."""
    members = {"NVML_VALUE_TYPE_DOUBLE": "dVal", "NVML_VALUE_TYPE_UNSIGNED_INT": "uiVal",
               "NVML_VALUE_TYPE_UNSIGNED_LONG": "ulVal", "NVML_VALUE_TYPE_UNSIGNED_LONG_LONG": "ullVal",
               "NVML_VALUE_TYPE_SIGNED_LONG_LONG": "sllVal", "NVML_VALUE_TYPE_SIGNED_INT": "siVal",
               "NVML_VALUE_TYPE_UNSIGNED_SHORT": "usVal"}
    for const, member in members.items():
        if getattr(nvml, const, None) == value.valueType:
            return float(getattr(value.value, member))
    return float(value.value.uiVal)


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
