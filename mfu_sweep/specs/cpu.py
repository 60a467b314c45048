"""Estimated peak of the host CPU: physical cores x clock x FLOP/cycle of its microarchitecture.

No vendor publishes a per-SKU GEMM peak for a VM's virtual CPUs, so the CPU
peak is always *estimated* and labelled so. FLOP/cycle per physical core comes
from ``cpu_uarch.toml`` beside this module: one cited row per microarchitecture
(vendor, family, model range, SKU pattern), because the FMA width and pipe count
differ where the ISA flags look alike (Zen 4 runs AVX-512 on two 256-bit pipes:
32 fp32 FLOP/cycle; Zen 5 server parts: 64; a Xeon Silver has one 512-bit FMA
unit, a Xeon Platinum two). A CPU no row matches falls back to the flag rule
(AVX-512 64, AVX2+FMA 32, AVX 16, SSE 8; AMX 1024 / AVX512_BF16 128 for bf16)
and the source string says so. Where the model number's row and the flags
contradict each other (a KVM guest with one generation's model number and
another's flags, e.g. Ice Lake-SP's with AMX-BF16), the flags decide: a flag
the row does not list whose rule rate is higher wins, and the peak's source and
notes (and ``specs --detect``) name the contradiction.

Cores are *physical* cores: two SMT threads on one core share its FMA pipes,
so the estimate counts ``min(threads used, physical cores usable)``, with cores
taken from /proc/cpuinfo's ``physical id``/``core id`` (sysfs topology where
/proc/cpuinfo has none). The clock is the highest of the cpufreq maximum and
the ``cpu MHz`` lines: in VMs this is often the base clock while cores boost
higher, so measured throughput can exceed the estimate; such records get the
``above_peak`` flag. All parsing works on text, so tests need no such CPU.
"""

from __future__ import annotations

import os
import platform
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from mfu_sweep.specs import Peak, SpecError
from mfu_sweep.util.text import counted

UARCH_FILE = Path(__file__).with_name("cpu_uarch.toml")
RATE_DTYPES = ("fp32", "bf16", "fp16")
# Flags that decide a rate; "avx2" also needs "fma".
FLAG_RULE_FP32 = (("avx512f", 64, "AVX-512 FMA"), ("avx2", 32, "AVX2 FMA"), ("avx", 16, "AVX"))


@dataclass(frozen=True)
class CpuInfo:
    """What /proc/cpuinfo says about the CPU (first processor entry) and its topology."""

    model: str
    vendor: str = ""
    family: int | None = None
    model_id: int | None = None
    stepping: int | None = None
    clock_ghz: float | None = None
    flags: frozenset[str] = frozenset()
    cores: Mapping[int, tuple[str, str]] = field(default_factory=dict)
    """Logical CPU number -> (physical id, core id); empty where cpuinfo has no topology."""


@dataclass(frozen=True)
class Uarch:
    """One row of ``cpu_uarch.toml``: FLOP/cycle per physical core by flag, with its citation."""

    id: str
    name: str
    vendors: tuple[str, ...]
    families: tuple[int, ...]
    models: tuple[tuple[int, int], ...]
    rates: Mapping[str, Mapping[str, int]]
    source: str
    verified: bool
    name_match: str = ""
    name_exclude: str = ""
    notes: str = ""

    def matches(self, info: CpuInfo) -> bool:
        if info.vendor not in self.vendors or info.family not in self.families or info.model_id is None:
            return False
        if not any(lo <= info.model_id <= hi for lo, hi in self.models):
            return False
        if self.name_match and not re.search(self.name_match, info.model):
            return False
        return not (self.name_exclude and re.search(self.name_exclude, info.model))

    def rate(self, dtype: str, flags: frozenset[str]) -> tuple[int, str] | None:
        """Highest FLOP/cycle of ``dtype`` among the row's flags the CPU reports."""
        have = [(r, f) for f, r in self.rates.get(dtype, {}).items() if _has_flag(flags, f)]
        return max(have) if have else None


def _has_flag(flags: frozenset[str], flag: str) -> bool:
    return flag in flags and (flag != "avx2" or "fma" in flags)


def _int(value: str) -> int | None:
    try:
        return int(value, 0) if value.startswith("0x") else int(value)
    except ValueError:
        return None


def parse_cpuinfo(text: str) -> CpuInfo:
    """Parse /proc/cpuinfo text: identity from the first processor, topology from all of them."""
    first: dict[str, str] = {}
    cores: dict[int, tuple[str, str]] = {}
    mhz: float | None = None
    for block in re.split(r"\n\s*\n", text):
        entry = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in block.splitlines()) if k}
        if not entry:
            continue
        first = first or entry
        try:
            mhz = max(mhz or 0.0, float(entry.get("cpu MHz", "")))
        except ValueError:
            pass
        cpu = _int(entry.get("processor", ""))
        if cpu is not None and "core id" in entry:
            cores[cpu] = (entry.get("physical id", "0"), entry["core id"])
    return CpuInfo(
        model=first.get("model name") or platform.processor() or platform.machine(),
        vendor=first.get("vendor_id", ""),
        family=_int(first.get("cpu family", "")),
        model_id=_int(first.get("model", "")),
        stepping=_int(first.get("stepping", "")),
        clock_ghz=mhz / 1000.0 if mhz else None,
        flags=frozenset(first.get("flags", "").split()),
        cores=cores,
    )


def load_cpuinfo(path: str = "/proc/cpuinfo") -> CpuInfo:
    """This machine's :class:`CpuInfo` (an empty one where the file is unreadable)."""
    try:
        text = Path(path).read_text()
    except OSError:
        text = ""
    info = parse_cpuinfo(text)
    if not info.cores and path == "/proc/cpuinfo":
        info = CpuInfo(**{**info.__dict__, "cores": sysfs_cores()})
    return info


def read_cpuinfo(path: str = "/proc/cpuinfo") -> tuple[str, float | None, frozenset[str]]:
    """Model name, highest reported MHz (as GHz) and feature flags of this CPU."""
    info = load_cpuinfo(path)
    return info.model, info.clock_ghz, info.flags


def sysfs_cores(root: str = "/sys/devices/system/cpu") -> dict[int, tuple[str, str]]:
    """Logical CPU -> (package id, core id) from sysfs topology, for kernels whose cpuinfo lacks it."""
    out: dict[int, tuple[str, str]] = {}
    for topo in Path(root).glob("cpu[0-9]*/topology"):
        try:
            pkg = (topo / "physical_package_id").read_text().strip()
            core = (topo / "core_id").read_text().strip()
        except OSError:
            continue
        out[int(topo.parent.name[3:])] = (pkg, core)
    return out


def physical_cores(info: CpuInfo, cpus: Iterable[int]) -> tuple[int, int]:
    """(physical cores, logical CPUs) among ``cpus``; SMT siblings count as one core.

    A CPU without topology information counts as a core of its own.
    """
    cpus = list(cpus)
    keys = {info.cores.get(c, ("cpu", str(c))) for c in cpus}
    return len(keys), len(cpus)


@cache
def _table(path: str | None = None) -> dict:
    src = Path(path) if path else UARCH_FILE
    try:
        return tomllib.loads(src.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(f"{src.name}: cannot read the CPU table ({exc})") from None


def citations(row: Uarch, path: str | None = None) -> list[str]:
    """Full titles and URLs of the sources a row's ``source`` names (by their short names)."""
    sources = _table(path).get("sources", {})
    return [text for key, text in sources.items() if re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", row.source)]


@cache
def load_uarchs(path: str | None = None) -> tuple[Uarch, ...]:
    """The rows of ``cpu_uarch.toml`` (or of ``path``), in file order."""
    src = Path(path) if path else UARCH_FILE
    data = _table(path)
    rows = []
    for i, row in enumerate(data.get("uarch", [])):
        try:
            rows.append(Uarch(
                id=row["id"], name=row["name"], vendors=tuple(row["vendor"]), families=tuple(row["family"]),
                models=tuple((int(lo), int(hi)) for lo, hi in row["models"]),
                rates={d: {str(f): int(r) for f, r in row.get(d, {}).items()} for d in RATE_DTYPES},
                source=row["source"], verified=bool(row["verified"]), name_match=row.get("name_match", ""),
                name_exclude=row.get("name_exclude", ""), notes=row.get("notes", ""),
            ))
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(f"{src.name}: uarch #{i + 1} is malformed ({exc!r})") from None
    return tuple(rows)


def find_uarch(info: CpuInfo, rows: Iterable[Uarch] | None = None) -> Uarch | None:
    """The first row matching vendor, family, model and SKU pattern; None for an unknown part."""
    return next((u for u in (load_uarchs() if rows is None else rows) if u.matches(info)), None)


def fp32_flop_per_cycle(flags: frozenset[str]) -> tuple[int, str]:
    """The fallback rule for CPUs the table does not know: widest unit, two FMA pipes."""
    for flag, rate, unit in FLAG_RULE_FP32:
        if _has_flag(flags, flag):
            return rate, unit
    return 8, "SSE"


def half_flop_per_cycle(flags: frozenset[str], amx_flag: str, avx_flag: str) -> tuple[int, str] | None:
    """The fallback rule for bf16/fp16: AMX 1024, AVX-512 BF16/FP16 128, else None (fp32 rate)."""
    if amx_flag in flags:
        return 1024, "AMX"
    if avx_flag in flags:
        return 128, avx_flag.upper()
    return None


HALF_FLAGS = {"bf16": ("amx_bf16", "avx512_bf16"), "fp16": ("amx_fp16", "avx512_fp16")}


def _flag_rule(dtype: str, flags: frozenset[str]) -> tuple[int, str, str] | None:
    """The fallback rule's (FLOP/cycle, unit, deciding flag) for ``dtype``; None where no flag of it is reported."""
    if dtype == "fp32":
        return next(((rate, unit, flag) for flag, rate, unit in FLAG_RULE_FP32 if _has_flag(flags, flag)), None)
    amx, avx = HALF_FLAGS[dtype]
    found = half_flop_per_cycle(flags, amx, avx)
    return (*found, amx if found[0] == 1024 else avx) if found else None


def _flags_decide(row: Uarch, info: CpuInfo, dtype: str, rate: int) -> tuple[int, str, str] | None:
    """Where the CPU reports an ISA flag its model number's row does not list for ``dtype`` and that flag's
    rate is above the row's: (rate, unit, the sentence that names the contradiction). A KVM guest can carry
    one generation's model number and another's flags; what the CPU can execute decides the peak."""
    rule = _flag_rule(dtype, info.flags)
    if rule is None or rule[2] in row.rates.get(dtype, {}) or rule[0] <= rate:
        return None
    flop, unit, flag = rule
    model = f"{info.model_id:#x}" if info.model_id is not None else "?"
    return flop, f"{unit}, from the flags", (
        f"{dtype}: the CPU reports {flag}, which its model number (family {info.family} model {model}: row "
        f"{row.id!r}, {row.name}) does not have; the flags decide: {flop} FLOP/cycle ({unit}) instead of {rate}")


@dataclass(frozen=True)
class CpuRates:
    """FLOP/cycle per physical core for each dtype, and which rule or row gave them."""

    per_cycle: Mapping[str, int]
    units: Mapping[str, str]
    uarch: Uarch | None
    rule: str
    flags_decide: tuple[str, ...] = ()
    """One sentence per dtype whose rate the ISA flags decided against the model number's row."""


def flop_per_cycle(info: CpuInfo, rows: Iterable[Uarch] | None = None) -> CpuRates:
    """Per-dtype FLOP/cycle: from the matching table row, else from the flag rule."""
    row = find_uarch(info, rows)
    if row is None:
        return _flag_rates(info)
    fp32 = row.rate("fp32", info.flags) or fp32_flop_per_cycle(info.flags)
    per, units = {"fp32": fp32[0]}, {"fp32": f"{fp32[1]}"}
    decided: list[str] = []
    for dtype in RATE_DTYPES:  # fp32 first: a dtype without a unit of its own runs at the (decided) fp32 rate
        if dtype != "fp32":
            unit = row.rate(dtype, info.flags)
            per[dtype], units[dtype] = unit if unit else (per["fp32"], f"no native {dtype} unit, fp32 rate")
        if found := _flags_decide(row, info, dtype, per[dtype]):
            per[dtype], units[dtype] = found[0], found[1]
            decided.append(found[2])
    check = "" if row.verified else ", unverified"
    rule = f"row {row.id!r} of cpu_uarch.toml ({row.name}; {row.source}{check})"
    if decided:
        rule += "; " + "; ".join(decided)
    return CpuRates(per_cycle=per, units=units, uarch=row, rule=rule, flags_decide=tuple(decided))


def _flag_rates(info: CpuInfo) -> CpuRates:
    fp32, unit = fp32_flop_per_cycle(info.flags)
    per, units = {"fp32": fp32}, {"fp32": unit}
    for dtype, amx, avx in (("bf16", "amx_bf16", "avx512_bf16"), ("fp16", "amx_fp16", "avx512_fp16")):
        found = half_flop_per_cycle(info.flags, amx, avx)
        per[dtype], units[dtype] = found if found else (fp32, f"no native {dtype} unit, fp32 rate")
    ident = f"{info.vendor or '?'} family {info.family} model {info.model_id}"
    rule = f"no row of cpu_uarch.toml matches {ident}: fallback flag rule (two FMA pipes of the widest unit)"
    return CpuRates(per_cycle=per, units=units, uarch=None, rule=rule)


def max_freq_ghz() -> float | None:
    """Highest cpufreq maximum in GHz, or None where the kernel does not expose it."""
    best = None
    for f in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/cpuinfo_max_freq"):
        try:
            best = max(best or 0.0, int(f.read_text()) / 1e6)
        except (OSError, ValueError):
            continue
    return best


def cores_used(info: CpuInfo, threads: int | None, cpus: Iterable[int] | None = None) -> tuple[int, int, int]:
    """(cores counted, threads used, physical cores usable) for ``threads`` on ``cpus`` (default: affinity)."""
    cpus = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
    phys, logical = physical_cores(info, cpus)
    threads = threads or logical
    return min(threads, phys), threads, phys


def estimate_cpu_peak(threads: int | None = None, cpuinfo: str = "/proc/cpuinfo",
                      info: CpuInfo | None = None, cpus: Iterable[int] | None = None,
                      clock_ghz: float | None = None) -> Peak:
    """Estimate per-dtype peak TFLOP/s for ``threads`` threads (default: all usable CPUs).

    ``info``, ``cpus`` and ``clock_ghz`` replace what this machine reports (for tests and imports).
    """
    info = info or load_cpuinfo(cpuinfo)
    cores, threads, phys = cores_used(info, threads, cpus)
    clocks = [c for c in ((clock_ghz,) if clock_ghz else (max_freq_ghz(), info.clock_ghz)) if c]
    clock = max(clocks) if clocks else 2.0
    rates = flop_per_cycle(info)
    per_ghz = cores * clock * 1e9 / 1e12
    tflops = {d: rates.per_cycle[d] * per_ghz for d in RATE_DTYPES}
    tflops["fp8"] = tflops["fp32"]
    smt = f" ({threads} threads on {phys} physical cores usable)" if threads != cores else ""
    parts = [f"fp32: {counted(cores, 'core')}{smt} x {clock:.2f} GHz x {rates.per_cycle['fp32']} FLOP/cycle "
             f"({rates.units['fp32']})"]
    parts += [f"{d}: {rates.per_cycle[d]} FLOP/cycle ({rates.units[d]})" for d in ("bf16", "fp16")]
    parts.append("fp8: no native unit, fp32 rate")
    if not clocks:
        parts.append("clock unknown, 2.0 GHz assumed")
    notes = "Clock from cpufreq/cpuinfo; VMs often report the base clock, so cores may run faster than estimated."
    if rates.uarch is not None and rates.uarch.notes:
        notes += " " + rates.uarch.notes
    if rates.flags_decide:  # a model number contradicted by the flags (a KVM guest): say which won
        notes += " The ISA flags decide over the model number: " + "; ".join(rates.flags_decide) + "."
    return Peak(
        chip="cpu", tflops=tflops, memory_bandwidth_tbs=None,
        source=f"estimated for {info.model}: " + "; ".join(parts) + f"; per-core rate from {rates.rule}",
        estimated=True, scope="chip", notes=notes,
    )


def machine_tag(info: CpuInfo) -> str:
    """Short name of the CPU's kind for labels: its table row (``zen5``) or ``f<family>m<model>``."""
    row = find_uarch(info)
    if row is not None:
        return row.id
    return f"f{info.family}m{info.model_id}" if info.family is not None and info.model_id is not None else ""


def label_slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def default_cpu_label(info: CpuInfo | None = None) -> str:
    """The default ``device.label`` of a CPU sweep: model name, microarchitecture, ``-cpu`` (``amd-epyc-zen5-cpu``)."""
    info = info or load_cpuinfo()
    return f"{label_slug(f'{info.model} {machine_tag(info)}') or 'cpu'}-cpu"
