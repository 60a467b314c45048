"""Readers for published and third-party GEMM results, turning them into v1 sweeps.

One module per source format (``xla_perf_table``, ``deepbench``,
``mamf_finder``, ``nvbench``, ``tritonbench``) reads a file into source devices;
:mod:`mfu_sweep.importers.common` builds the sweeps (``device.backend =
"imported"`` plus an ``import`` provenance block). :func:`import_sources` is
what ``mfu-sweep import`` calls. Only ground modules are imported here (results,
shapes, dtypes, specs); no click, no torch.

May import: the ground (``records/``, ``gemm/``, ``specs/``, ``util/``) and itself; never ``measure/``,
``analysis/``, ``present/``, ``workflow/``, ``cli/``, torch, matplotlib or Click.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from mfu_sweep.gemm.dtypes import DTYPES, canonical_dtype
from mfu_sweep.importers import deepbench, grouping, mamf_finder, nvbench, options, tritonbench, values, xla_perf_table
from mfu_sweep.importers.common import SourceDevice, SourceError, build_sweep, map_chip
from mfu_sweep.importers.sniff import sniff
from mfu_sweep.records.foreign import NOT_IMPORTED, describe
from mfu_sweep.records.results import Sweep
from mfu_sweep.specs import ChipSpec, load_chips
from mfu_sweep.util.names import safe_name

READERS: dict[str, Callable[..., list[SourceDevice]]] = {
    xla_perf_table.FORMAT: xla_perf_table.read,
    deepbench.FORMAT: deepbench.read,
    mamf_finder.FORMAT: mamf_finder.read,
    nvbench.FORMAT: nvbench.read,
    tritonbench.FORMAT: tritonbench.read,
}
FORMATS = tuple(READERS)
DTYPE_FORMATS = (nvbench.FORMAT, mamf_finder.FORMAT, tritonbench.FORMAT)  # sources that may not name their dtype

__all__ = ["FORMATS", "ImportResult", "SourceError", "import_sources"]


@dataclass(frozen=True)
class ImportResult:
    """The sweeps an import produced, keyed by label, and the warnings to show."""

    sweeps: Mapping[str, Sweep]
    warnings: tuple[str, ...]


def _read(fmt: str, path: Path, kwargs: Mapping[str, object]) -> list[SourceDevice]:
    """One source's devices, each knowing its file; a wrong-format file names the format it looks like."""
    if not path.exists():
        raise SourceError(f"{str(path)!r}: no such file")
    if not path.is_file():
        what = "a directory" if path.is_dir() else "a device, a pipe or a socket"
        raise SourceError(f"{str(path)!r} is {what}, not a file")
    if path.stat().st_size == 0:
        raise SourceError(f"{str(path)!r}: empty file")
    kind = sniff(path)
    if kind in NOT_IMPORTED:  # pyperf, Google Benchmark, a sweep ...: no reader may take them for its format
        raise SourceError(f"{str(path)!r} is not {fmt} output; {describe(kind, str(path))}")
    # every value a reader keeps is the source's own (importers/values.py), and no time is absurd
    try:
        got = READERS[fmt](path, **kwargs)
        values.check_devices(got, str(path))
    except SourceError as exc:
        if kind is not None and kind != fmt:
            raise SourceError(f"{exc} (it looks like {kind} output: mfu-sweep import {kind} ...)") from None
        raise
    return [replace(d, source=str(path)) for d in got]


def _fix(dev: SourceDevice, devices: Sequence[SourceDevice]) -> str:
    return f"--label {shlex.quote(f'{options.file_spec(dev, devices)}:{dev.key}=NAME')}"


def _group(labelled: Sequence[tuple[SourceDevice, str]], devices: Sequence[SourceDevice]) -> dict[str, list]:
    """Devices by output label: sources of one GPU (one uuid) merge; any other shared label is one error
    listing every clash with the per-file ``--label`` that fixes each."""
    groups: dict[str, list[SourceDevice]] = {}
    for dev, label in labelled:
        groups.setdefault(label, []).append(dev)
    clashes: list[tuple[str, SourceDevice, SourceDevice]] = []
    for label, parts in groups.items():
        if grouping.one_gpu(parts):
            grouping.check_merge(parts, " ".join(_fix(d, devices) for d in parts[1:]))
        elif len(parts) > 1:
            clashes.extend((label, parts[0], d) for d in parts[1:])
    if clashes:
        label, first, dev = clashes[0]
        more = f"; also {', '.join(dict.fromkeys(repr(c[0]) for c in clashes[1:]))}" if len(clashes) > 1 else ""
        fixes = " ".join(_fix(d, devices) for _, _, d in clashes)
        raise SourceError(f"two devices of these sources get label {label!r} ({first.key!r} of {first.source} and "
                          f"{dev.key!r} of {dev.source}){more}; name them per file: {fixes}")
    return groups


def import_sources(fmt: str, paths: Sequence[str | Path], chip_overrides: Mapping[str, str] | None = None,
                   labels: Mapping[str, str] | None = None, dtype: str | None = None,
                   chips: Mapping[str, ChipSpec] | None = None, argv: Sequence[str] = (),
                   only: Sequence[str] = (), axes: Mapping[str, str] | None = None) -> ImportResult:
    """Read every source, map each device to a chip, return one sweep per device.

    Raises :class:`SourceError` (a ``ValueError``) on the first bad file, naming
    it; nothing is returned for a partly bad input. ``chip_overrides`` and
    ``labels`` map a source device key (e.g. ``sm_90``, ``NV_P100``), in every
    file, or ``FILE:KEY`` in one file, to a chip id or an output label; ``only``
    keeps just those source devices. ``dtype`` (nvbench, mamf-finder, tritonbench) is
    the dtype where the source names none; ``axes`` (nvbench) maps ``M``, ``N``,
    ``K``, ``B``, ``T`` to the source's axis names.
    """
    if fmt not in READERS:
        raise SourceError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    chips = load_chips() if chips is None else chips
    if dtype is not None and fmt not in DTYPE_FORMATS:
        named = f"{', '.join(DTYPE_FORMATS[:-1])} and {DTYPE_FORMATS[-1]}"
        raise SourceError(f"--dtype applies to {named} only; {fmt} sources name their dtypes")
    if dtype is not None:
        try:
            dtype = canonical_dtype(dtype)
        except ValueError:
            raise SourceError(f"--dtype {dtype!r} unknown (known: {', '.join(DTYPES)}; or torch's names such as "
                              "bfloat16)") from None
    if axes and fmt != nvbench.FORMAT:
        raise SourceError(f"--axis applies to nvbench only; {fmt} sources name M, N and K themselves")
    kwargs: dict[str, object] = {"dtype": dtype} if fmt in DTYPE_FORMATS else {}
    if fmt == nvbench.FORMAT:
        kwargs["axes"] = dict(axes or {})
    devices: list[SourceDevice] = []
    for p in paths:
        devices.extend(_read(fmt, Path(p), kwargs))
    grouping.check_sources(devices)
    label_of = options.resolve(labels or {}, devices, "--label")
    chip_of = options.resolve(chip_overrides or {}, devices, "--chip")
    keep = options.resolve(dict.fromkeys(only, "keep"), devices, "--only")
    kept = [(i, dev) for i, dev in enumerate(devices) if not only or i in keep]
    warnings: list[str] = [w for _, dev in kept for w in dev.warnings]
    short = grouping.short_uuids(d.identity.uuid for _, d in kept if d.identity.uuid)
    labelled = [(dev, safe_name(label_of.get(i) or dev.key + grouping.label_suffix(dev, short))) for i, dev in kept]
    groups = _group(labelled, devices)
    chip_at = {id(dev): None if dev.peak is not None and i not in chip_of else  # the peak it carries
               map_chip(dev, chips, {dev.key: chip_of[i]} if i in chip_of else
                        {dev.key: dev.chip} if dev.chip in chips else {}, warnings) for i, dev in kept}
    for parts in groups.values():
        chosen = dict.fromkeys(c.id if (c := chip_at[id(p)]) else "none" for p in parts)
        if len(chosen) > 1:
            raise SourceError(f"files of one GPU (uuid {parts[0].identity.uuid}) map to chips {', '.join(chosen)} "
                              f"({', '.join(p.source for p in parts)}); give one --chip for all: --chip "
                              f"{shlex.quote(f'{parts[0].key}=ID')}")
    out = {label: build_sweep(parts, fmt, label, chip_at[id(parts[0])], argv) for label, parts in groups.items()}
    return ImportResult(sweeps=out, warnings=tuple(dict.fromkeys(warnings)))
