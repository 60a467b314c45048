"""Estimated peak of the host CPU: cores x clock x FLOP/cycle of its widest unit.

No vendor publishes a per-SKU GEMM peak for a VM's virtual CPUs, so the CPU
peak is always *estimated* and labelled so. FLOP/cycle per core assumes two
FMA pipes: AVX-512 FMA = 2 x 16 fp32 x 2 = 64, AVX2 FMA = 32, AVX = 16,
SSE = 8; bf16 uses AMX (1024 FLOP/cycle) or AVX512_BF16 (128) where present,
otherwise the CPU converts bf16/fp16/fp8 to fp32 and the fp32 rate applies.
The clock is the highest of the cpufreq maximum and the ``cpu MHz`` lines:
in VMs this is often the base clock while cores boost higher, so measured
throughput can exceed the estimate; such records get the ``above_peak`` flag.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path

from mfu_sweep.specs import Peak


@dataclass(frozen=True)
class CpuInfo:
    """What the estimate is built from."""

    model: str
    threads: int
    clock_ghz: float | None
    flags: frozenset[str]


def read_cpuinfo(path: str = "/proc/cpuinfo") -> tuple[str, float | None, frozenset[str]]:
    """Model name, highest reported MHz (as GHz) and feature flags of this CPU."""
    model, mhz, flags = platform.processor() or platform.machine(), None, frozenset()
    try:
        text = Path(path).read_text()
    except OSError:
        return model, None, flags
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name":
            model = value
        elif key == "cpu MHz":
            try:
                mhz = max(mhz or 0.0, float(value))
            except ValueError:
                pass
        elif key == "flags" and not flags:
            flags = frozenset(value.split())
    return model, (mhz / 1000.0 if mhz else None), flags


def max_freq_ghz() -> float | None:
    """Highest cpufreq maximum in GHz, or None where the kernel does not expose it."""
    best = None
    for f in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/cpuinfo_max_freq"):
        try:
            best = max(best or 0.0, int(f.read_text()) / 1e6)
        except (OSError, ValueError):
            continue
    return best


def fp32_flop_per_cycle(flags: frozenset[str]) -> tuple[int, str]:
    if "avx512f" in flags:
        return 64, "AVX-512 FMA"
    if "avx2" in flags and "fma" in flags:
        return 32, "AVX2 FMA"
    if "avx" in flags:
        return 16, "AVX"
    return 8, "SSE"


def half_flop_per_cycle(flags: frozenset[str], amx_flag: str, avx_flag: str) -> tuple[int, str] | None:
    if amx_flag in flags:
        return 1024, "AMX"
    if avx_flag in flags:
        return 128, avx_flag.upper()
    return None


def estimate_cpu_peak(threads: int | None = None, cpuinfo: str = "/proc/cpuinfo") -> Peak:
    """Estimate per-dtype peak TFLOP/s for ``threads`` cores (default: all usable)."""
    model, mhz_clock, flags = read_cpuinfo(cpuinfo)
    threads = threads or len(os.sched_getaffinity(0))
    clocks = [c for c in (max_freq_ghz(), mhz_clock) if c]
    clock = max(clocks) if clocks else 2.0
    fp32_rate, fp32_unit = fp32_flop_per_cycle(flags)
    per_ghz = threads * clock * 1e9 / 1e12
    tflops = {"fp32": fp32_rate * per_ghz}
    parts = [f"fp32: {threads} cores x {clock:.2f} GHz x {fp32_rate} FLOP/cycle ({fp32_unit})"]
    for dtype, amx, avx in (("bf16", "amx_bf16", "avx512_bf16"), ("fp16", "amx_fp16", "avx512_fp16")):
        unit = half_flop_per_cycle(flags, amx, avx)
        rate, name = unit if unit else (fp32_rate, f"no native {dtype} unit, fp32 rate")
        tflops[dtype] = rate * per_ghz
        parts.append(f"{dtype}: {rate} FLOP/cycle ({name})")
    tflops["fp8"] = tflops["fp32"]
    parts.append("fp8: no native unit, fp32 rate")
    if not clocks:
        parts.append("clock unknown, 2.0 GHz assumed")
    return Peak(
        chip="cpu",
        tflops=tflops,
        memory_bandwidth_tbs=None,
        source=f"estimated for {model}: " + "; ".join(parts),
        estimated=True,
        scope="chip",
        notes="Clock from cpufreq/cpuinfo; VMs often report the base clock, so cores may run faster than estimated.",
    )
