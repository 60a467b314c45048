"""Readers for published and third-party GEMM results, turning them into v1 sweeps.

One module per source format (``xla_perf_table``, ``deepbench``,
``mamf_finder``, ``nvbench``) reads a file into source devices;
:mod:`mfu_sweep.importers.common` builds the sweeps (``device.backend =
"imported"`` plus an ``import`` provenance block). :func:`import_sources` is
what ``mfu-sweep import`` calls. Only ground modules are imported here (results,
shapes, dtypes, specs); no click, no torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mfu_sweep.importers import deepbench, mamf_finder, nvbench, xla_perf_table
from mfu_sweep.importers.common import SourceDevice, SourceError, build_sweep, map_chip, slug
from mfu_sweep.results import Sweep
from mfu_sweep.specs import ChipSpec, load_chips

READERS: dict[str, Callable[..., list[SourceDevice]]] = {
    xla_perf_table.FORMAT: xla_perf_table.read,
    deepbench.FORMAT: deepbench.read,
    mamf_finder.FORMAT: mamf_finder.read,
    nvbench.FORMAT: nvbench.read,
}
FORMATS = tuple(READERS)

__all__ = ["FORMATS", "ImportResult", "SourceError", "import_sources"]


@dataclass(frozen=True)
class ImportResult:
    """The sweeps an import produced, keyed by label, and the warnings to show."""

    sweeps: Mapping[str, Sweep]
    warnings: tuple[str, ...]


def import_sources(fmt: str, paths: Sequence[str | Path], chip_overrides: Mapping[str, str] | None = None,
                   labels: Mapping[str, str] | None = None, dtype: str | None = None,
                   chips: Mapping[str, ChipSpec] | None = None, argv: Sequence[str] = (),
                   only: Sequence[str] = ()) -> ImportResult:
    """Read every source, map each device to a chip, return one sweep per device.

    Raises :class:`SourceError` (a ``ValueError``) on the first bad file, naming
    it; nothing is returned for a partly bad input. ``chip_overrides`` and
    ``labels`` map a source device key (e.g. ``sm_90``, ``NV_P100``) to a chip id
    or an output label; ``only`` keeps just those source devices.
    """
    if fmt not in READERS:
        raise SourceError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    chips = load_chips() if chips is None else chips
    overrides = dict(chip_overrides or {})
    labels = dict(labels or {})
    if dtype is not None and fmt != nvbench.FORMAT:
        raise SourceError(f"--dtype applies to nvbench only; {fmt} sources name their dtypes")
    kwargs = {"dtype": dtype} if fmt == nvbench.FORMAT else {}
    devices: list[SourceDevice] = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise SourceError(f"{str(path)!r}: no such file")
        devices.extend(READERS[fmt](path, **kwargs))
    keys = {d.key for d in devices} | {d.name for d in devices}
    for opt, given in (("--only", dict.fromkeys(only)), ("--chip", overrides), ("--label", labels)):
        unknown = sorted(set(given) - keys)
        if unknown:
            raise SourceError(f"{opt} names {', '.join(map(repr, unknown))}, not a device of these sources "
                              f"(devices: {', '.join(sorted({d.key for d in devices}))})")
    if only:
        devices = [d for d in devices if d.key in only or d.name in only]
    warnings: list[str] = []
    out: dict[str, Sweep] = {}
    for dev in devices:
        label = slug(labels.get(dev.key) or labels.get(dev.name) or dev.key)
        if label in out:
            raise SourceError(f"two devices of these sources get label {label!r}; pass --label {dev.key}=NAME")
        chip = map_chip(dev, chips, overrides, warnings)
        out[label] = build_sweep(dev, fmt, label, chip, argv)
    return ImportResult(sweeps=out, warnings=tuple(warnings))
