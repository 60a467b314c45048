"""What every importer shares: source rows, provenance, chip mapping, sweep building.

A reader turns one source file into :class:`SourceDevice` objects (one per device
the file holds), each a list of :class:`SourceRow` (one value per shape and dtype,
exactly as the source gives it) plus the provenance it can establish. This module
turns them into ordinary v1 :class:`~mfu_sweep.records.results.Sweep` objects with
``device.backend = "imported"`` and an ``import`` block, so every command that
reads sweeps reads them too.

Honesty rules kept here, not in each reader: one source value becomes
``samples_s`` of length 1 (never an invented spread), a rounded source value is
flagged ``rounded_source``, and every record is flagged ``imported``.

Timing vocabulary: each record's ``timer`` names how the source timed it, its
``cache`` says whether caches were flushed before each timed call, and its
``mode`` how the GEMM was issued (see :data:`TIMERS`); the sweep's
``settings.timing`` repeats them with the long ``method`` text.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mfu_sweep import __version__
from mfu_sweep.gemm.dtypes import DType, fp8_format, get_dtype
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.importers.identity import ARCH_CHIPS, Identity, generic_name
from mfu_sweep.importers.peak_basis import annotate, assumed_peak
from mfu_sweep.records.fingerprint import Fingerprint, fingerprint_from_fields
from mfu_sweep.records.results import IMPORTED_BACKEND, Record, Sweep, finish_record
from mfu_sweep.specs import ChipSpec, Peak, SpecError, find_chip
from mfu_sweep.util.inputs import InputError, decode, read_limited
from mfu_sweep.util.names import without_control
from mfu_sweep.util.text import quoted

PROVENANCE_FILE = "provenance.toml"

# Device keys of the OpenXLA table are compute capabilities / gfx targets, not products:
# several chips share one key. The first id is the default; the others are named in a warning.
SOURCE_CHIPS: dict[str, tuple[str, ...]] = {
    "sm_100_B200": ("b200",),
    "sm_100": ARCH_CHIPS["sm_100"],  # the older tables' key for B200
    "sm_90": ARCH_CHIPS["sm_90"],
    "gfx950": ARCH_CHIPS["gfx950"],
    "gfx942": ARCH_CHIPS["gfx942"],
}


# Every ``timer`` an importer writes -> what it means (docs/importing.md has the table).
TIMERS: dict[str, str] = {
    "cuda-events+flush": "one device-event pair (CUDA/HIP) around each call, caches flushed before each call",
    "cuda-events": "one device-event pair (CUDA/HIP) around each call, no cache flush",
    "device-events+flush": "an event pair of another torch device (XPU, HPU, MPS) around each call, flushed",
    "device-events": "an event pair of another torch device (XPU, HPU, MPS) around each call, no flush",
    "nvbench-cold": "nvbench cold measurement: CUDA events around each isolated launch, L2 flushed before each",
    "nvbench-batch": "nvbench batch measurement: back-to-back launches timed together, no flush",
    "cupti-kernel": "CUPTI kernel tracer (kernel time only, no launch overhead)",
    "roctracer-kernel": "roctracer kernel tracer (kernel time only, no launch overhead)",
    "host-mean": "host clock around many back-to-back calls, mean per call (launch overhead included)",
    "imported-best": "only the best value of a whole search (a summary), not a per-shape measurement",
}
CACHES = ("flush", "none", "unknown", "rotate")  # rotate: an mfu-sweep sweep's own operand sets, read back
# The timers mfu-sweep itself records (an ``export --format nvbench`` file read back keeps its own):
# host, host-sync, xla, cuda-events, accelerator-events, cuda-graph[N], <device>-profiler-<kind>, each +flush.
MEASURED_TIMER = re.compile(r"^(host|host-sync|xla|cuda-events|accelerator-events|cuda-graph\[\d+\]|"
                            r"[a-z]+-profiler-[a-z]+)(\+flush)?$")


def known_timer(timer: str) -> bool:
    """Whether ``timer`` is one an importer may write: a source's (:data:`TIMERS`) or mfu-sweep's own."""
    return timer in TIMERS or MEASURED_TIMER.match(timer) is not None


class SourceError(ValueError):
    """A source file cannot be imported; the message names the file and the problem."""


@dataclass(frozen=True)
class SourceRow:
    """One value the source gives for one shape and dtype, already converted to seconds per call.

    ``seconds`` is None when the source has no usable time (the record then gets
    ``status: error`` with ``error`` saying why). ``extra`` keeps what the source
    said (its own value, units, layout ...).
    """

    shape: Shape
    dtype: str
    seconds: float | None
    source_dtype: str
    flags: tuple[str, ...] = ()
    error: str | None = None
    samples_s: tuple[float, ...] = ()
    family: str = "imported"
    extra: Mapping[str, Any] = field(default_factory=dict)
    where: str = ""
    """Where the row stands in its source, file included (``'log.txt': line 12``), for errors about its value."""
    mode: str | None = None
    """How this row's GEMM was issued when the source says it per row (an nvbench ``mode`` axis); None: the
    device's ``mode``."""


@dataclass(frozen=True)
class SourceDevice:
    """One device found in a source: how the source names it, its rows, and provenance."""

    key: str
    name: str
    rows: tuple[SourceRow, ...]
    provenance: Mapping[str, Any]
    mode: str = "eager"
    timer: str = "host-mean"
    cache: str = "unknown"
    details: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    above_peak_reason: str = ""
    """What in this source can put a value above the chip's peak (for ``above_peak_reason``); empty: unknown."""
    identity: Identity = Identity()
    """Which GPU the source measured, as far as it says (uuid, architecture, PCI bus id ...)."""
    chip: str | None = None
    """The spec entry the source itself names (an mfu-sweep export read back); ``--chip`` overrides it."""
    peak: Peak | None = None
    """The peak block the source carries (an mfu-sweep export read back: a CPU's estimate, an fp32-as-tf32
    basis), the sweep's peak unless ``--chip`` names a chip."""
    warnings: tuple[str, ...] = ()
    """What the reader left out of this source and the user must hear (a line skipped, named), printed by import."""


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_provenance(path: Path) -> dict[str, Any]:
    """Repository, path, commit, date and license of ``path`` from ``provenance.toml`` beside it.

    The file maps a file name to a table; an entry whose ``sha256`` differs from
    the file's is ignored (the copy is not the one described). Without an entry,
    the fields are None and the ``import`` block says the origin is unknown.
    """
    out: dict[str, Any] = {"repository": None, "path": None, "commit": None, "date": None, "license": None}
    side = path.parent / PROVENANCE_FILE
    if not side.is_file():
        return out
    try:
        data = tomllib.loads(decode(read_limited(side)))
    except (OSError, InputError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SourceError(f"{str(side)!r}: cannot read provenance ({exc})") from None
    entry = data.get(path.name)
    if not isinstance(entry, Mapping):
        return out
    want = entry.get("sha256")
    if want and want != sha256_of(path):
        return out
    for k in out:
        if isinstance(entry.get(k), str):
            out[k] = entry[k]
    return out


def parse_pairs(values: Iterable[str], option: str) -> dict[str, str]:
    """``SRC=VALUE`` options into a dict; a malformed one is a one-line error naming it."""
    out: dict[str, str] = {}
    for v in values:
        src, sep, val = v.partition("=")
        if not sep or not src or not val:
            raise SourceError(f"{option} {v!r} must be SRC=VALUE")
        out[src] = val
    return out


def _device_names(dev: SourceDevice) -> tuple[str, ...]:
    return tuple(dict.fromkeys((dev.key, dev.name)))


def map_chip(dev: SourceDevice, chips: Mapping[str, ChipSpec], overrides: Mapping[str, str],
             warnings: list[str]) -> ChipSpec | None:
    """The spec entry for a source device: ``--chip`` override, known key, or name lookup."""
    for name in _device_names(dev):
        if name in overrides:
            chip_id = overrides[name]
            if chip_id not in chips:
                raise SpecError(f"--chip {name}={chip_id}: unknown chip {chip_id!r} (see `mfu-sweep specs` for ids)")
            return chips[chip_id]
    candidates = [c for c in SOURCE_CHIPS.get(dev.key, ()) if c in chips]
    if candidates:
        if len(candidates) > 1:
            warnings.append(
                f"{dev.key}: ambiguous chip ({' or '.join(candidates)}); using {candidates[0]} "
                f"(pass --chip {dev.key}=ID to choose)")
        return chips[candidates[0]]
    chip = find_chip(dev.name, chips)
    arch = dev.identity.arch
    if chip is not None:
        owners = [a for a, ids in ARCH_CHIPS.items() if chip.id in ids]
        if arch is not None and owners and arch not in owners:
            warnings.append(f"{dev.key}: the name maps to {chip.id} ({'/'.join(owners)}) but the source prints "
                            f"architecture {arch}; check the chip (--chip {dev.key}=ID)")
        return chip
    by_arch = [c for c in ARCH_CHIPS.get(arch or "", ()) if c in chips] if generic_name(dev.name) else []
    if by_arch:
        also = f" (also {' or '.join(by_arch[1:])})" if len(by_arch) > 1 else ""
        warnings.append(f"{dev.key}: the name {quoted(dev.name)} does not say which GPU; chip chosen by its "
                        f"architecture {arch}: {by_arch[0]}{also} (pass --chip {dev.key}=ID to choose)")
        return chips[by_arch[0]]
    kept = f" (architecture {arch} kept; no peak is cited for it)" if arch else ""
    warnings.append(f"{dev.key}: no spec entry for {quoted(dev.name)}{kept}; MFU left empty (pass --chip {dev.key}=ID)")
    return None


def _fp8_format(row: SourceRow, dt: DType) -> dict[str, str]:
    """``{"fp8_format": "e4m3fnuz"}`` when the dtype's elements are fp8 and the source's own type name says which
    format (an XLA key, a torch or CUDA type); nothing when it says only "fp8" (the format stays unknown)."""
    found = fp8_format(row.source_dtype) if fp8_format(dt.torch_name) else None
    return {"fp8_format": found} if found else {}


def _record(row: SourceRow, dev: SourceDevice, peak: Peak) -> Record:
    dt = get_dtype(row.dtype)
    base = dict(
        shape=row.shape, dtype=row.dtype, mode=row.mode or dev.mode, flops=row.shape.flops, bytes=row.shape.bytes(dt),
        intensity=row.shape.intensity(dt), family=row.family, timer=dev.timer,
        flags=tuple(dict.fromkeys(("imported", *row.flags))),
        extra={"cache": dev.cache, "source_dtype": row.source_dtype, **_fp8_format(row, dt), **row.extra},
    )
    if row.seconds is None or not row.seconds > 0:
        return Record(status="error", error=row.error or "source gives no usable time", **base)
    samples = row.samples_s or (row.seconds,)
    flags = base.pop("flags")
    if len(samples) == 1:
        flags = (*flags, "single_value")
    rec = Record(status="ok", samples_s=tuple(samples), flags=flags, **base)
    return annotate(finish_record(rec, peak), peak, dev.above_peak_reason)


def build_sweep(dev: SourceDevice | Sequence[SourceDevice], fmt: str, label: str, chip: ChipSpec | None,
                argv: Sequence[str]) -> Sweep:
    """One v1 sweep for one device, with ``device.backend = "imported"`` and an ``import`` block.

    ``dev`` is one source device, or several sources of one GPU (one uuid, different dtypes): their records
    are joined, each keeping its own timer and cache, and ``import.sources`` keeps each file's provenance.
    """
    parts = (dev,) if isinstance(dev, SourceDevice) else tuple(dev)
    first = parts[0]
    rows = [r for p in parts for r in p.rows]
    if chip is not None:
        peak = assumed_peak(Peak.from_chip(chip), ((r.dtype, r.flags) for r in rows))
    elif first.peak is not None:
        peak = first.peak
    else:
        peak = Peak(chip=None, tflops={}, memory_bandwidth_tbs=None,
                    source=f"no spec entry for {first.name!r} (imported; MFU left empty)")
    for p in parts:
        if not known_timer(p.timer) or p.cache not in CACHES:
            raise AssertionError(f"importer bug: timer {p.timer!r} / cache {p.cache!r} not in the vocabulary")
    records = tuple(_record(r, p, peak) for p in parts for r in p.rows)
    prov = merged_provenance(parts)
    when = measured_at(prov)
    shas = "|".join(str(p.provenance.get("source_sha256")) for p in parts)
    run_id = hashlib.sha256(f"{fmt}|{shas}|{first.key}".encode()).hexdigest()[:32]
    arch = {"arch": first.identity.arch} if first.identity.arch else {}
    return Sweep(
        tool={"name": "mfu-sweep", "version": __version__},
        run={"id": run_id, "started_at": when, "finished_at": when, "argv": list(argv), "host": "imported",
             "git_sha": None},
        environment={k: v for k, v in first.details.items() if k in ("software",)},
        device={"backend": IMPORTED_BACKEND, "name": without_control(first.name),
                "chip": chip.id if chip else first.chip if first.peak else None,
                "index": 0, "count": 1, "label": label, "source_key": first.key, **arch,
                **source_identity(first, fmt).device_fields()},
        peak=peak,
        records=records,
        settings={"imported": True, "timing": _timing(parts, prov)},
        extra={"import": {"format": fmt, **prov}},
    )


_LOG_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})")


def measured_at(prov: Mapping[str, Any]) -> str | None:
    """``run.started_at`` of an imported sweep: when the source was measured, ISO 8601, or None when it does not say.

    The log's own start time (mamf-finder's "Benchmark started on", the machine's local time, so no offset),
    else the source's date (``provenance.toml``); never a made-up time or a word in the place of one.
    """
    logged = _LOG_TIME.match(str(prov.get("measured_on") or ""))
    if logged:
        return f"{logged[1]}T{logged[2]}"
    return prov.get("date") or None


def _timing(parts: Sequence[SourceDevice], prov: Mapping[str, Any]) -> dict[str, Any]:
    """``settings.timing``: the sources' timer, cache and mode, per dtype where the merged files differ."""
    kinds = {(p.timer, p.cache, p.mode) for p in parts}
    first = parts[0]
    out: dict[str, Any] = {"method": prov.get("timing_method"), "timer": first.timer, "cache": first.cache,
                           "mode": first.mode}
    if len(kinds) > 1:
        out["by_dtype"] = {r.dtype: {"timer": p.timer, "cache": p.cache, "mode": p.mode}
                           for p in parts for r in p.rows}
    return out


def merged_provenance(parts: Sequence[SourceDevice]) -> dict[str, Any]:
    """One device's ``import`` block: the source's own, or for several files of one GPU the first file's
    fields, every dtype key, each file's notes under its name, and ``sources`` with each file's block."""
    if len(parts) == 1:
        return dict(parts[0].provenance)
    provs = [dict(p.provenance) for p in parts]
    out = dict(provs[0])
    methods = {}
    for p, prov in zip(parts, provs, strict=True):
        dtypes = "/".join(dict.fromkeys(r.dtype for r in p.rows))
        methods.setdefault(prov.get("timing_method"), []).append(dtypes)
    out["timing_method"] = (next(iter(methods)) if len(methods) == 1 else
                            "; ".join(f"{'/'.join(d)}: {m}" for m, d in methods.items()))
    out["dtype_keys"] = {k: v for prov in provs for k, v in (prov.get("dtype_keys") or {}).items()}
    files = ", ".join(f"{'/'.join(dict.fromkeys(r.dtype for r in p.rows))} from {prov.get('source_file')}"
                      for p, prov in zip(parts, provs, strict=True))
    out["notes"] = [f"{len(parts)} files of one GPU (uuid {parts[0].identity.uuid}) merged into one device: "
                    f"{files}; the top-level source fields are the first file's, import.sources has each"]
    out["notes"] += [f"{prov.get('source_file')}: {n}" for prov in provs for n in prov.get("notes") or []]
    out["unknown"] = list(dict.fromkeys(u for prov in provs for u in prov.get("unknown") or []))
    if any(prov.get("truncated") for prov in provs):
        out["truncated"] = True
    out.pop("skipped_lines", None)
    out["sources"] = provs
    return out


def source_identity(dev: SourceDevice, fmt: str) -> Fingerprint:
    """The fingerprint of an imported device: the source's own identity of it.

    With a usable uuid the GPU itself is the identity (name, uuid, architecture, compute capability, SM
    count), so every file of that GPU gets one fingerprint and another GPU of the model another. Without
    one it is the source's name for it (format, repository, key, name) and what the source says of its
    kind (architecture, SM count, PCI bus id). The source's commit and file hash are provenance, not
    identity: a newer table of the same chip stays the same device, so it cannot share a label with
    another chip's table.
    """
    ident = dev.identity
    if ident.uuid is not None:
        keep = ("uuid", "arch", "compute_capability", "sm_count")
        return fingerprint_from_fields("imported", {"name": dev.name,
                                                    **{k: v for k, v in ident.fields().items() if k in keep}})
    prov = dev.provenance
    return fingerprint_from_fields("imported", {"format": fmt, "repository": prov.get("repository"),
                                                "source_key": dev.key, "name": dev.name, **ident.fields()})


def dedupe(rows: Iterable[SourceRow], order_key: Any = None) -> tuple[list[SourceRow], int]:
    """Keep one row per (shape, dtype): the first by ``order_key`` (default: source order)."""
    rows = list(rows)
    if order_key is not None:
        rows = sorted(rows, key=order_key)
    seen: set[tuple[Shape, str]] = set()
    out, dropped = [], 0
    for r in rows:
        key = (r.shape, r.dtype)
        if key in seen:
            dropped += 1
            continue
        seen.add(key)
        out.append(r)
    return out, dropped
