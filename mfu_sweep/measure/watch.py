"""A sweep's eye on the machine: the check before it starts, the clock, and a reading per shape.

``run_sweep`` drives a :class:`SweepWatch`: :meth:`~SweepWatch.on_header` looks at
the machine before the first shape (a one-line warning when it is already busy),
measures the CPU clock under load and, where the cores run faster than the spec
clock, re-estimates the CPU peak from the measured clock (saying so in the peak's
``basis``); :meth:`~SweepWatch.begin`/:meth:`~SweepWatch.end` bracket every shape
and flag contended records; :meth:`~SweepWatch.with_block` keeps the file's
``machine`` block (threshold, what was and was not observed, per-pass summary).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mfu_sweep.contention import CONTENDED_SHARE, MACHINE_FIELD, flag_record, pass_summaries
from mfu_sweep.measure.clockprobe import ClockReading, measure_clock
from mfu_sweep.measure.gpu_neighbours import GpuNeighbours
from mfu_sweep.measure.machine import HostMonitor, busy_before, machine_block
from mfu_sweep.results import Record, Sweep
from mfu_sweep.specs import Peak
from mfu_sweep.specs.cpu import estimate_cpu_peak, max_freq_ghz

# The measured clock replaces the spec clock only when it is this much higher (the probe's own
# round-to-round spread on this project's VMs is ~1-2%).
CLOCK_MARGIN = 0.03


def spec_clock_ghz(device: Mapping[str, Any]) -> float | None:
    """The clock the CPU peak estimate uses: the highest of cpufreq's maximum and /proc/cpuinfo's MHz."""
    clocks = [c for c in (max_freq_ghz(), device.get("reported_clock_ghz")) if c]
    return max(clocks) if clocks else None


def clock_basis(measured: float, spec: float) -> str:
    """The words a report, figure legend and JSON give for a peak from the measured clock."""
    return (f"cores ran at ~{measured:.2f} GHz under load (measured), the spec clock is {spec:.2f} GHz: "
            "peak re-estimated from the measured clock")


def peak_from_clock(peak: Peak, device: Mapping[str, Any], clock: ClockReading,
                    estimate: Callable[..., Peak] = estimate_cpu_peak) -> tuple[Peak, dict[str, Any]]:
    """(peak, clock block): the CPU peak re-estimated at the measured clock when that beats the spec clock.

    Only an estimated CPU peak (no ``--chip``, no ``--peak-tflops``) changes;
    otherwise the block says why the spec peak stays.
    """
    block = clock.to_json()
    spec = spec_clock_ghz(device)
    block["spec_clock_ghz"] = spec
    block["used_for_peak"] = False
    if clock.ghz is None:
        block["reason"] = "clock not measured; the peak uses the spec clock"
        return peak, block
    if peak.chip != "cpu" or not peak.estimated or peak.override or peak.overrides:
        block["reason"] = "peak not estimated from a clock (spec entry or override): kept"
        return peak, block
    if spec is not None and clock.ghz <= spec * (1 + CLOCK_MARGIN):
        block["reason"] = (f"measured {clock.ghz:.2f} GHz is within {CLOCK_MARGIN:.0%} of or below the spec clock "
                           f"{spec:.2f} GHz: the spec clock stays")
        return peak, block
    threads = device.get("threads")
    new = estimate(threads=int(threads) if threads else None, clock_ghz=clock.ghz)
    basis = clock_basis(clock.ghz, spec) if spec else f"clock measured at ~{clock.ghz:.2f} GHz (no spec clock)"
    block.update(used_for_peak=True, reason=basis)
    return replace(new, source=f"{new.source}; clock measured ({clock.method})", notes=f"{basis}. {peak.notes}",
                   basis=basis), block


@dataclass
class SweepWatch:
    """Everything a sweep observes about its machine besides the GEMMs."""

    threshold: float = CONTENDED_SHARE
    probe_clock: bool = True
    monitor: HostMonitor = field(default_factory=HostMonitor)
    clock: dict[str, Any] | None = None
    before: dict[str, Any] | None = None
    gpu_note: str | None = None

    def on_header(self, sweep: Sweep, resumed: bool, notify: Callable[[str], None] | None = None) -> Sweep:
        """Check the machine before the sweep; measure the clock and re-estimate a CPU peak on a fresh file."""
        self.before, warning = busy_before(self.monitor)
        if warning and notify:
            notify(warning)
        self.monitor.gpu = GpuNeighbours.for_device(sweep.device)
        self.gpu_note = self.monitor.gpu.note if self.monitor.gpu is not None else None
        old = sweep.extra.get(MACHINE_FIELD) or {}
        if resumed:  # the file's peak and clock stay: its records are against them
            self.clock = old.get("clock")
            return sweep
        if sweep.device.get("backend") == "cpu" and self.probe_clock:
            peak, self.clock = peak_from_clock(sweep.peak, sweep.device,
                                               measure_clock(int(sweep.device.get("threads") or 1)))
            sweep = replace(sweep, peak=peak)
        return self.with_block(sweep)

    def begin(self) -> None:
        self.monitor.begin()

    def end(self, record: Record) -> Record:
        """``record`` with the machine reading of its shape and, when contended, the flag."""
        return flag_record(record, self.monitor.end(), self.threshold)

    def with_block(self, sweep: Sweep) -> Sweep:
        """``sweep`` with its ``machine`` block brought up to date with its records."""
        block = machine_block(self.before, self.clock, self.gpu_note, str(sweep.device.get("backend")),
                              pass_summaries(sweep.records))
        block["contended_share"] = self.threshold
        return replace(sweep, extra={**sweep.extra, MACHINE_FIELD: block})
