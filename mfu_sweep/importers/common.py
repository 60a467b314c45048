"""What every importer shares: source rows, provenance, chip mapping, sweep building.

A reader turns one source file into :class:`SourceDevice` objects (one per device
the file holds), each a list of :class:`SourceRow` (one value per shape and dtype,
exactly as the source gives it) plus the provenance it can establish. This module
turns them into ordinary v1 :class:`~mfu_sweep.results.Sweep` objects with
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
from mfu_sweep.dtypes import get_dtype
from mfu_sweep.fingerprint import fingerprint_from_fields
from mfu_sweep.importers.peak_basis import annotate, assumed_peak
from mfu_sweep.results import IMPORTED_BACKEND, Record, Sweep, finish_record
from mfu_sweep.shapes import Shape
from mfu_sweep.specs import ChipSpec, Peak, SpecError, find_chip

PROVENANCE_FILE = "provenance.toml"

# Device keys of the OpenXLA table are compute capabilities / gfx targets, not products:
# several chips share one key. The first id is the default; the others are named in a warning.
SOURCE_CHIPS: dict[str, tuple[str, ...]] = {
    "sm_100_B200": ("b200",),
    "sm_90": ("h100-sxm", "h200-sxm", "h100-pcie"),
    "gfx950": ("mi355x", "mi350x"),
    "gfx942": ("mi300x", "mi325x"),
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
CACHES = ("flush", "none", "unknown")


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
        data = tomllib.loads(side.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
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


def slug(text: str) -> str:
    """A file-name-safe label that keeps the source's own spelling where it can."""
    s = re.sub(r"[^A-Za-z0-9_.+-]+", "-", text.strip()).strip("-.")
    return s or "device"


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
    if chip is None:
        warnings.append(f"{dev.key}: no spec entry for {dev.name!r}; MFU left empty (pass --chip {dev.key}=ID)")
    return chip


def _record(row: SourceRow, dev: SourceDevice, peak: Peak) -> Record:
    dt = get_dtype(row.dtype)
    base = dict(
        shape=row.shape, dtype=row.dtype, mode=dev.mode, flops=row.shape.flops, bytes=row.shape.bytes(dt),
        intensity=row.shape.intensity(dt), family=row.family, timer=dev.timer,
        flags=tuple(dict.fromkeys(("imported", *row.flags))),
        extra={"cache": dev.cache, "source_dtype": row.source_dtype, **row.extra},
    )
    if row.seconds is None or not row.seconds > 0:
        return Record(status="error", error=row.error or "source gives no usable time", **base)
    samples = row.samples_s or (row.seconds,)
    flags = base.pop("flags")
    if len(samples) == 1:
        flags = (*flags, "single_value")
    rec = Record(status="ok", samples_s=tuple(samples), flags=flags, **base)
    return annotate(finish_record(rec, peak), peak, dev.above_peak_reason)


def build_sweep(dev: SourceDevice, fmt: str, label: str, chip: ChipSpec | None, argv: Sequence[str]) -> Sweep:
    """One v1 sweep for one source device, with ``device.backend = "imported"`` and an ``import`` block."""
    if chip is not None:
        peak = assumed_peak(Peak.from_chip(chip), ((r.dtype, r.flags) for r in dev.rows))
    else:
        peak = Peak(chip=None, tflops={}, memory_bandwidth_tbs=None,
                    source=f"no spec entry for {dev.name!r} (imported; MFU left empty)")
    if dev.timer not in TIMERS or dev.cache not in CACHES:
        raise AssertionError(f"importer bug: timer {dev.timer!r} / cache {dev.cache!r} not in the vocabulary")
    records = tuple(_record(r, dev, peak) for r in dev.rows)
    prov = dict(dev.provenance)
    when = prov.get("date") or "unknown"
    run_id = hashlib.sha256(f"{fmt}|{prov.get('source_sha256')}|{dev.key}".encode()).hexdigest()[:32]
    return Sweep(
        tool={"name": "mfu-sweep", "version": __version__},
        run={"id": run_id, "started_at": when, "finished_at": when, "argv": list(argv), "host": "imported",
             "git_sha": None},
        environment={k: v for k, v in dev.details.items() if k in ("software",)},
        device={"backend": IMPORTED_BACKEND, "name": dev.name, "chip": chip.id if chip else None, "index": 0,
                "count": 1, "label": label, "source_key": dev.key, **source_identity(dev, fmt).device_fields()},
        peak=peak,
        records=records,
        settings={"imported": True, "timing": {"method": prov.get("timing_method"), "timer": dev.timer,
                                               "cache": dev.cache, "mode": dev.mode}},
        extra={"import": {"format": fmt, **prov}},
    )


def source_identity(dev: SourceDevice, fmt: str) -> Any:
    """The fingerprint of an imported device: the source's own identity of it (format, repository, key, name).

    The source's commit and file hash are provenance, not identity: a newer table of the same chip
    stays the same device, so it cannot share a label with another chip's table.
    """
    prov = dev.provenance
    return fingerprint_from_fields("imported", {"format": fmt, "repository": prov.get("repository"),
                                                "source_key": dev.key, "name": dev.name})


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
