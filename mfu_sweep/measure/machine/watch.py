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

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mfu_sweep.measure.machine.clockprobe import fma_ceilings, probe_machine
from mfu_sweep.measure.machine.cores import HostMonitor, busy_before, machine_block
from mfu_sweep.measure.machine.gpu_neighbours import GpuNeighbours
from mfu_sweep.records.contention import CONTENDED_SHARE, MACHINE_FIELD, flag_record, pass_summaries
from mfu_sweep.records.results import Record, Sweep
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


def cores_counted(device: Mapping[str, Any]) -> int:
    """Cores the CPU peak counts: threads used, at most the physical cores usable."""
    threads = int(device.get("threads") or 1)
    phys = device.get("physical_cores_usable")
    return min(threads, int(phys)) if phys else threads


def _raise_to_ceilings(peak: Peak, ceilings: Mapping[str, float]) -> tuple[dict[str, float], list[str]]:
    """Per-dtype peaks lifted to a measured FMA ceiling above them; dtypes at the fp32 rate follow fp32."""
    tflops, raised = dict(peak.tflops), []
    fp32 = peak.tflops.get("fp32")
    for dtype, value in peak.tflops.items():
        ceiling = ceilings.get(dtype) or (ceilings.get("fp32") if value == fp32 else None)
        if ceiling and ceiling > value * (1 + CLOCK_MARGIN):
            tflops[dtype] = ceiling
            raised.append(dtype)
    return tflops, raised


def peak_from_probe(peak: Peak, device: Mapping[str, Any], probe: Mapping[str, Any],
                    estimate: Callable[..., Peak] = estimate_cpu_peak) -> tuple[Peak, dict[str, Any]]:
    """(peak, clock block) after the clock and FMA probes (:func:`~mfu_sweep.measure.machine.clockprobe.probe_machine`).

    Only an estimated CPU peak (no ``--chip``, no ``--peak-tflops``) changes: to
    the estimate at the measured clock when that clock beats the spec clock by
    more than :data:`CLOCK_MARGIN`, then, per dtype, to a measured FMA-throughput
    ceiling above it. The block and ``peak.basis`` say what was done, in words.
    """
    clock = dict(probe.get("clock") or {})
    ghz = clock.get("measured_ghz")
    spec = spec_clock_ghz(device)
    fma = probe.get("fma") or {}
    block = {**clock, "fma": fma, "spec_clock_ghz": spec, "used_for_peak": False}
    if probe.get("error"):
        block["error"] = probe["error"]
    if peak.chip != "cpu" or not peak.estimated or peak.override or peak.overrides:
        block["reason"] = "peak not estimated from a clock (spec entry or override): kept"
        return peak, block
    new, reasons = peak, []
    if ghz and spec and ghz > spec * (1 + CLOCK_MARGIN):
        threads = device.get("threads")
        new = estimate(threads=int(threads) if threads else None, clock_ghz=ghz)
        reasons.append(clock_basis(ghz, spec))
    ceilings = fma_ceilings(fma, cores_counted(device)) if fma and "error" not in fma else {}
    block["ceilings_tflops"] = ceilings
    tflops, raised = _raise_to_ceilings(new, ceilings)
    if raised:
        reasons.append(f"the measured FMA-throughput ceiling is above the estimate for {', '.join(raised)}: "
                       "peak set to the ceiling")
    if not reasons:
        why = "clock not measured" if not ghz else f"measured {ghz:.2f} GHz is within {CLOCK_MARGIN:.0%} of or " \
              f"below the spec clock {spec or 0:.2f} GHz"
        block["reason"] = f"{why}; no FMA ceiling above the estimate: the spec-clock peak stays"
        return peak, block
    basis = "; ".join(reasons)
    block.update(used_for_peak=True, reason=basis)
    return replace(new, tflops=tflops, source=f"{new.source}; measured ({clock.get('method', 'clock probe')})",
                   notes=f"{basis}. {peak.notes}", basis=basis), block


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
        on_cpu = sweep.device.get("backend") == "cpu"
        # The cores the worker keeps busy: its threads on a CPU (SMT siblings included), one host thread else.
        self.monitor.used = int(sweep.device.get("threads") or len(self.monitor.cpus)) if on_cpu else 1
        probing = on_cpu and self.probe_clock and not resumed
        probe: dict[str, Any] = {}

        def look(window_s: float) -> None:  # the probe loads every core: the window that shows a neighbour best
            if probing:
                probe.update(probe_machine(cores_counted(sweep.device)))
            else:
                time.sleep(window_s)

        self.before, warning = busy_before(self.monitor, sleep=look)
        if probing:
            self.before["during"] = "clock and FMA probes"
        if warning and notify:
            notify(warning)
        self.monitor.gpu = GpuNeighbours.for_device(sweep.device)
        self.gpu_note = self.monitor.gpu.note if self.monitor.gpu is not None else None
        old = sweep.extra.get(MACHINE_FIELD) or {}
        if resumed:  # the file's peak and clock stay: its records are against them
            self.clock = old.get("clock")
            return sweep
        if probing:
            peak, self.clock = peak_from_probe(sweep.peak, sweep.device, probe)
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
