"""Device fingerprints: which kind of machine a sweep ran on, as a short stable string.

A fingerprint is ``<kind>-<12 hex digits>``, e.g. ``cpu-3f09a1c2b4d5``: a hash of
the fields that decide what a GEMM can reach on the device (CPU vendor,
family/model/stepping, model name, matmul ISA flags, physical cores and threads
used, memory; GPU name, SM/CU count, memory, maximum clocks; Neuron instance
type, chip and logical-core configuration; XLA device kind). It is recorded in
every sweep as ``device.fingerprint`` with the fields in
``device.fingerprint_fields``.

Fields in :data:`UNHASHED` (a GPU's UUID or serial, driver and runtime
versions) are recorded but left out of the hash: two GPUs of one kind, or one
GPU before and after a driver update, are the same *kind* of device, so they
may share a label. Everything else that differs gives another fingerprint, and
analysis refuses to put two fingerprints under one label (``series.check_labels``).
An imported device is one GPU, not a kind: for kind ``imported`` the uuid and the
PCI bus id are hashed (:data:`HASHED_BY_KIND`), so two H100s of one node imported
from their logs get two fingerprints, and every log of one GPU the same.

Builders (:func:`cpu_fields`, :func:`gpu_fields`, :func:`neuron_fields`,
:func:`xla_fields`) take plain values, so backends call them with what their
stack reports and tests call them with text; :func:`fingerprint_from_fields`
is the one entry point for everything else, e.g. an importer recording the
source's identity::

    fp = fingerprint_from_fields("imported", {"name": "NVIDIA H100 SXM5 80GB",
                                              "source": "https://example.org/paper"})
    device.update(fp.device_fields())   # {"fingerprint": "imported-...", "fingerprint_fields": {...}}

No torch, no backend imports: this is ground code.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mfu_sweep.specs.cpu import CpuInfo, cores_used, find_uarch, load_cpuinfo
from mfu_sweep.util.text import counted

KINDS = ("cpu", "cuda", "rocm", "neuron", "xla", "generic", "imported")
UNHASHED = frozenset({"uuid", "serial", "driver", "runtime", "pci_bus_id", "host"})
HASHED_BY_KIND: dict[str, frozenset[str]] = {"imported": frozenset({"uuid", "pci_bus_id"})}
# ISA flags that change a CPU's matmul rate (fingerprinted); others are noise for GEMMs.
CPU_MATMUL_FLAGS = frozenset({
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_fp16",
    "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16", "sve", "sve2", "asimd", "bf16",
    "i8mm", "sme",
})


class FingerprintError(ValueError):
    """Fingerprint fields are unusable; the message names the field."""


@dataclass(frozen=True)
class Fingerprint:
    """A device's identity: ``id`` (the short string) and the fields it was made of."""

    id: str
    kind: str
    fields: Mapping[str, Any]

    def device_fields(self) -> dict[str, Any]:
        """What goes into a result's ``device`` block."""
        return {"fingerprint": self.id, "fingerprint_fields": {"kind": self.kind, **self.fields}}


def _plain(value: Any, where: str) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise FingerprintError(f"fingerprint field {where}={value!r} must be finite")
        return value
    if isinstance(value, (list, tuple, frozenset, set)):
        items = [_plain(v, where) for v in value]
        return sorted(items, key=str) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, Mapping):
        return {str(k): _plain(v, f"{where}.{k}") for k, v in value.items()}
    raise FingerprintError(f"fingerprint field {where}={value!r} must be a JSON value")


def fingerprint_from_fields(kind: str, fields: Mapping[str, Any]) -> Fingerprint:
    """Fingerprint of a device described by ``fields`` (JSON values); the id hashes all but :data:`UNHASHED`
    (less the fields :data:`HASHED_BY_KIND` names for ``kind``).

    ``kind`` is a short lower-case word (see :data:`KINDS`; others are allowed) that starts the id.
    """
    if not re.fullmatch(r"[a-z0-9]+", kind or ""):
        raise FingerprintError(f"fingerprint kind={kind!r} must be a short lower-case word")
    clean = {str(k): _plain(v, str(k)) for k, v in fields.items() if k != "kind"}
    unhashed = UNHASHED - HASHED_BY_KIND.get(kind, frozenset())
    hashed = {k: v for k, v in clean.items() if k not in unhashed and v is not None}
    canon = json.dumps({"kind": kind, **hashed}, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canon.encode()).hexdigest()[:12]
    return Fingerprint(id=f"{kind}-{digest}", kind=kind, fields=clean)


def fingerprint_of(device: Mapping[str, Any]) -> str | None:
    """The fingerprint a result's ``device`` block carries, or None for files written before fingerprints."""
    value = device.get("fingerprint")
    return str(value) if value else None


def meminfo_gib(text: str) -> int | None:
    """MemTotal of /proc/meminfo text in GiB, rounded (stable across boots of one machine kind)."""
    m = re.search(r"^MemTotal:\s+(\d+)\s*kB", text, re.MULTILINE)
    return round(int(m.group(1)) / 2**20) if m else None


def read_meminfo_gib(path: str = "/proc/meminfo") -> int | None:
    try:
        return meminfo_gib(Path(path).read_text())
    except OSError:
        return None


def cpu_fields(info: CpuInfo, threads: int | None = None, cpus: Iterable[int] | None = None,
               memory_gib: int | None = None) -> dict[str, Any]:
    """Fingerprint fields of a host CPU from parsed /proc/cpuinfo, the threads used and the memory."""
    cores, threads, phys = cores_used(info, threads, cpus)
    uarch = find_uarch(info)
    return {
        "vendor": info.vendor or None, "family": info.family, "model": info.model_id, "stepping": info.stepping,
        "model_name": info.model, "uarch": uarch.id if uarch else None,
        "isa": sorted(info.flags & CPU_MATMUL_FLAGS), "physical_cores": phys, "threads": threads,
        "cores_used": cores, "memory_gib": memory_gib,
    }


def cpu_fingerprint(info: CpuInfo, threads: int | None = None, cpus: Iterable[int] | None = None,
                    memory_gib: int | None = None) -> Fingerprint:
    return fingerprint_from_fields("cpu", cpu_fields(info, threads, cpus, memory_gib))


def host_cpu_fingerprint(threads: int | None = None) -> Fingerprint:
    """Fingerprint of this machine's CPU for ``threads`` threads (default: every usable CPU)."""
    return cpu_fingerprint(load_cpuinfo(), threads=threads, memory_gib=read_meminfo_gib())


def gpu_fields(name: str, *, uuid: str | None = None, sm_count: int | None = None, memory_bytes: int | None = None,
               max_sm_clock_mhz: int | None = None, max_mem_clock_mhz: int | None = None,
               compute_capability: str | None = None, driver: str | None = None,
               runtime: str | None = None) -> dict[str, Any]:
    """Fingerprint fields of one GPU (CUDA or ROCm); memory rounded to GiB, clocks are the maxima."""
    return {
        "name": name, "uuid": uuid, "sm_count": sm_count,
        "memory_gib": round(memory_bytes / 2**30) if memory_bytes else None,
        "max_sm_clock_mhz": max_sm_clock_mhz, "max_mem_clock_mhz": max_mem_clock_mhz,
        "compute_capability": compute_capability, "driver": driver, "runtime": runtime,
    }


def neuron_fields(instance_type: str | None, chip: str | None, logical_cores: int | None = None,
                  logical_core_config: int | None = None, runtime: str | None = None) -> dict[str, Any]:
    """Fingerprint fields of a Neuron device: instance type, chip, logical NeuronCores and their size (LNC)."""
    return {"instance_type": instance_type, "chip": chip, "logical_cores": logical_cores,
            "logical_core_config": logical_core_config, "runtime": runtime}


def xla_fields(device_kind: str, platform: str | None = None, device_count: int | None = None,
               runtime: str | None = None) -> dict[str, Any]:
    """Fingerprint fields of an XLA (PJRT) device: its device kind, platform and count."""
    return {"device_kind": device_kind, "platform": platform, "device_count": device_count, "runtime": runtime}


def describe(device: Mapping[str, Any]) -> str:
    """One short phrase for messages: ``cpu-3f09a1c2b4d5 (AMD EPYC, zen5, 2 cores)``."""
    fp = fingerprint_of(device) or "no fingerprint"
    fields = device.get("fingerprint_fields") or {}
    bits = [str(fields.get(k)) for k in ("model_name", "name", "device_kind", "instance_type", "uarch")
            if fields.get(k)]
    if fields.get("cores_used"):
        bits.append(counted(fields["cores_used"], "core"))
    return f"{fp} ({', '.join(bits)})" if bits else fp
