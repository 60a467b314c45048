"""Peak specs: cited vendor data, lookup from device names, user overrides.

The data lives in ``chips.toml`` beside this module. ``load_chips`` reads it
(or a user's ``--spec-file``) into frozen :class:`ChipSpec` objects;
``find_chip`` maps what a framework reports (a CUDA device name, an XLA device
kind) to an entry; :class:`Peak` is the ``peak`` block of a result file.

May import: ``util/`` and ``gemm/`` (dtypes); never ``records/``, a stage, torch, matplotlib or Click.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from mfu_sweep.gemm.dtypes import DTYPES

CHIPS_FILE = Path(__file__).with_name("chips.toml")
# Dtypes a chip entry may give a peak for: every dtype measured against its own figure (fp8-rowwise is
# measured against the fp8 figure, see DERIVED_PEAKS).
PEAK_DTYPES = tuple(name for name, d in DTYPES.items() if not d.peak_key)
# Block-scaled dtypes: their peak must say which figure of the source it is (ChipSpec.peak_sources).
BLOCK_SCALED = tuple(name for name, d in DTYPES.items() if d.scaling == "block")
# dtype -> (the dtype whose figure it uses, why): added to every peak that has the figure (Peak.from_chip).
DERIVED_PEAKS = {name: (d.peak_key, f"the {d.peak_key} figure: {name}'s scales are applied once per output "
                        "element (the GEMM's epilogue), so the tensor cores run at their fp8 rate")
                 for name, d in DTYPES.items() if d.peak_key}
SCOPES = ("chip", "core")
REQUIRED = ("id", "name", "scope", "peak_tflops", "memory_gb", "memory_bandwidth_tbs", "source_title", "source_url")


class SpecError(ValueError):
    """A spec file or spec value is invalid; the message names the field."""


@dataclass(frozen=True)
class ChipSpec:
    """Vendor peak figures for one chip (or one core, see ``scope``)."""

    id: str
    name: str
    scope: str
    peak_tflops: Mapping[str, float]
    memory_gb: float | None
    memory_bandwidth_tbs: float | None
    source_title: str
    source_url: str
    vendor: str = ""
    vendor_url: str = ""
    source_kind: str = "vendor"
    match: tuple[str, ...] = ()
    notes: str = ""
    peak_sources: Mapping[str, str] = field(default_factory=dict)
    """Per block-scaled dtype: which figure of the source its peak is, and why it applies to the format."""

    def to_json(self) -> dict:
        data = {k: getattr(self, k) for k in self.__dataclass_fields__}
        data["peak_tflops"] = dict(self.peak_tflops)
        data["peak_sources"] = dict(self.peak_sources)
        data["match"] = list(self.match)
        return data


@dataclass(frozen=True)
class Peak:
    """The ``peak`` block of a result: what MFU is measured against."""

    chip: str | None
    tflops: Mapping[str, float]
    memory_bandwidth_tbs: float | None
    source: str
    estimated: bool = False
    override: bool = False
    scope: str = "chip"
    notes: str = ""
    overrides: Mapping[str, object] = field(default_factory=dict)
    basis: str = ""
    """Why the peak differs from the plain estimate, in words (e.g. a measured clock); empty otherwise."""
    dtype_basis: Mapping[str, str] = field(default_factory=dict)
    """Per dtype whose ``tflops`` entry is not that dtype's own vendor peak: why, in words (e.g. imported
    fp32 dots that ran as TF32 are measured against the tf32 peak); empty otherwise."""

    def for_dtype(self, dtype: str) -> float | None:
        value = self.tflops.get(dtype)
        return float(value) if value else None

    def to_json(self) -> dict:
        return {
            "chip": self.chip,
            "tflops": dict(self.tflops),
            "memory_bandwidth_tbs": self.memory_bandwidth_tbs,
            "source": self.source,
            "estimated": self.estimated,
            "override": self.override,
            "scope": self.scope,
            "notes": self.notes,
            "overrides": dict(self.overrides),
            **({"basis": self.basis} if self.basis else {}),
            **({"dtype_basis": dict(self.dtype_basis)} if self.dtype_basis else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping) -> Peak:
        return cls(
            chip=data.get("chip"),
            tflops={str(k): float(v) for k, v in (data.get("tflops") or {}).items()},
            memory_bandwidth_tbs=data.get("memory_bandwidth_tbs"),
            source=str(data.get("source", "")),
            estimated=bool(data.get("estimated", False)),
            override=bool(data.get("override", False)),
            scope=str(data.get("scope", "chip")),
            notes=str(data.get("notes", "")),
            overrides=dict(data.get("overrides") or {}),
            basis=str(data.get("basis") or ""),
            dtype_basis={str(k): str(v) for k, v in (data.get("dtype_basis") or {}).items()},
        )

    @classmethod
    def from_chip(cls, chip: ChipSpec) -> Peak:
        """The peak block of ``chip``: its figures, the derived ones (:data:`DERIVED_PEAKS`) and every
        figure's basis where it is not the dtype's own vendor figure."""
        tflops, basis = dict(chip.peak_tflops), dict(chip.peak_sources)
        for name, (base, why) in DERIVED_PEAKS.items():
            if base in tflops and name not in tflops:
                tflops[name], basis[name] = tflops[base], why
        return cls(
            chip=chip.id,
            tflops=tflops,
            memory_bandwidth_tbs=chip.memory_bandwidth_tbs,
            source=f"{chip.source_title} <{chip.source_url}>",
            scope=chip.scope,
            notes=chip.notes,
            dtype_basis=basis,
        )


def _positive(value: object, where: str, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise SpecError(f"{where}={value!r} must be a positive number")
    return float(value)


def _text(entry: Mapping, key: str, where: str) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str):
        raise SpecError(f"{where}.{key}={value!r} must be a string")
    return value


def parse_chip(entry: object, where: str = "chip") -> ChipSpec:
    """Validate one ``[[chip]]`` table and return it as a :class:`ChipSpec`."""
    if not isinstance(entry, Mapping):
        raise SpecError(f"{where} must be a table, got {entry!r}")
    for key in REQUIRED:
        if key not in entry:
            raise SpecError(f"{where} lacks field {key!r}")
    cid = _text(entry, "id", where)
    if not cid:
        raise SpecError(f"{where}.id must not be empty")
    where = f"chip {cid!r}"
    scope = _text(entry, "scope", where)
    if scope not in SCOPES:
        raise SpecError(f"{where}.scope={scope!r} must be one of {', '.join(SCOPES)}")
    peaks = entry["peak_tflops"]
    if not isinstance(peaks, Mapping) or not peaks:
        raise SpecError(f"{where}.peak_tflops={peaks!r} must be a non-empty table")
    for name in peaks:
        if name not in PEAK_DTYPES:
            raise SpecError(f"{where}.peak_tflops has unknown dtype {name!r} (known: {', '.join(PEAK_DTYPES)})")
    sources = entry.get("peak_sources", {})
    if not isinstance(sources, Mapping) or not all(isinstance(v, str) and v for v in sources.values()):
        raise SpecError(f"{where}.peak_sources={sources!r} must be a table of non-empty strings")
    for name in sources:
        if name not in peaks:
            raise SpecError(f"{where}.peak_sources names {name!r}, which peak_tflops lacks")
    for name in BLOCK_SCALED:
        if name in peaks and name not in sources:
            raise SpecError(f"{where}.peak_tflops.{name} needs a peak_sources line: which figure of the source "
                            f"it is and why it applies to {name}")
    match = entry.get("match", [])
    if not isinstance(match, list) or not all(isinstance(m, str) and m for m in match):
        raise SpecError(f"{where}.match={match!r} must be a list of non-empty strings")
    return ChipSpec(
        id=cid,
        name=_text(entry, "name", where),
        scope=scope,
        peak_tflops={k: _positive(v, f"{where}.peak_tflops.{k}") for k, v in peaks.items()},
        memory_gb=_positive(entry["memory_gb"], f"{where}.memory_gb"),
        memory_bandwidth_tbs=_positive(entry["memory_bandwidth_tbs"], f"{where}.memory_bandwidth_tbs"),
        source_title=_text(entry, "source_title", where),
        source_url=_text(entry, "source_url", where),
        vendor=_text(entry, "vendor", where),
        vendor_url=_text(entry, "vendor_url", where),
        source_kind=_text(entry, "source_kind", where) or "vendor",
        match=tuple(m.lower() for m in match),
        notes=_text(entry, "notes", where),
        peak_sources=dict(sources),
    )


def parse_chips(text: str, origin: str = "spec file") -> dict[str, ChipSpec]:
    """Parse TOML text holding ``[[chip]]`` tables."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{origin}: not valid TOML ({exc})") from None
    entries = data.get("chip")
    if not isinstance(entries, list) or not entries:
        raise SpecError(f"{origin}: no [[chip]] tables found")
    chips: dict[str, ChipSpec] = {}
    for i, entry in enumerate(entries):
        chip = parse_chip(entry, where=f"{origin}: chip #{i + 1}")
        if chip.id in chips:
            raise SpecError(f"{origin}: duplicate chip id {chip.id!r}")
        chips[chip.id] = chip
    return chips


def load_chips(extra: str | Path | None = None) -> dict[str, ChipSpec]:
    """The shipped table, with entries from ``extra`` (a TOML file) added or replacing by id."""
    chips = parse_chips(CHIPS_FILE.read_text(), origin=CHIPS_FILE.name)
    if extra is not None:
        from mfu_sweep.util.inputs import InputError, read_limited

        path = Path(extra)
        try:  # within the input limit; a FIFO or a device is refused, never read
            text = read_limited(path).decode("utf-8")
        except (InputError, UnicodeDecodeError) as exc:
            raise SpecError(f"spec file {str(path)!r}: cannot read ({exc})") from None
        chips.update(parse_chips(text, origin=f"spec file {str(path)!r}"))
    return chips


def _token_pattern(match: str) -> re.Pattern[str]:
    """``match`` as whole tokens: no letter or digit may touch either end ("h200" is not in "gh200")."""
    return re.compile(rf"(?<![a-z0-9]){re.escape(match.strip())}(?![a-z0-9])")


def find_chip(reported: str, chips: Mapping[str, ChipSpec] | None = None) -> ChipSpec | None:
    """Map a framework-reported name (CUDA name, XLA device kind ...) to a chip.

    A ``match`` string counts only as whole tokens of the name: no letter or digit
    may touch either end, so "h200" does not match "NVIDIA GH200 480GB" and "b200"
    does not match "GB200". Among the matches the longest wins, so "H100 PCIe"
    beats "H100". A name no entry matches gives None (no peak: MFU stays empty,
    TFLOP/s works).
    """
    chips = load_chips() if chips is None else chips
    text = reported.lower()
    best: tuple[int, ChipSpec] | None = None
    for chip in chips.values():
        for pattern in chip.match:
            size = len(pattern.strip())
            if (best is None or size > best[0]) and _token_pattern(pattern).search(text):
                best = (size, chip)
    return best[1] if best else None


def get_chip(chip_id: str, chips: Mapping[str, ChipSpec] | None = None) -> ChipSpec:
    chips = load_chips() if chips is None else chips
    try:
        return chips[chip_id]
    except KeyError:
        raise SpecError(f"unknown chip {chip_id!r} (see `mfu-sweep specs` for ids)") from None


def apply_peak_override(peak: Peak, tflops: float | None, dtypes: Iterable[str]) -> Peak:
    """Replace the peak of every swept dtype by a user-given TFLOP/s figure."""
    if tflops is None:
        return peak
    value = _positive(tflops, "--peak-tflops")
    new = dict(peak.tflops)
    for d in dtypes:
        new[d] = value
    overrides = {**peak.overrides, "peak_tflops": value}
    source = f"user override (--peak-tflops {value:g}); was: {peak.source}"
    return replace(peak, tflops=new, override=True, overrides=overrides, source=source)
