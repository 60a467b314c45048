"""``--label``, ``--chip`` and ``--only`` of ``mfu-sweep import``: which source device each one names.

A value applies to a device by the source's own name for it (``OLD=NEW``: in
every file) or to one file's device (``FILE:OLD=NEW``), where ``FILE`` is the
source as given on the command line or its file name. The per-file form is what
resolves two files that name the same device (eight mamf-finder logs of one
node, two XLA tables that both hold ``gfx942``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from mfu_sweep.importers.common import SourceDevice, SourceError


def _names(dev: SourceDevice) -> set[str]:
    return {dev.key, dev.name}


def _file_matches(spec: str, source: str) -> bool:
    if spec in (source, Path(source).name):
        return True
    try:
        return Path(spec).resolve() == Path(source).resolve()
    except OSError:
        return False


def file_spec(dev: SourceDevice, devices: Sequence[SourceDevice]) -> str:
    """How to name ``dev``'s file in ``FILE:OLD=NEW``: its file name where that is unique, else the path."""
    name = Path(dev.source).name
    same = {d.source for d in devices if Path(d.source).name == name}
    return name if len(same) == 1 else dev.source


def _per_file(key: str, devices: Sequence[SourceDevice], option: str) -> list[SourceDevice]:
    """The devices ``FILE:OLD`` names; [] when no split of ``key`` at a colon names a file's device."""
    for i in (j for j, c in enumerate(key) if c == ":"):
        spec, old = key[:i], key[i + 1:]
        files = {d.source for d in devices if _file_matches(spec, d.source)}
        if not files:
            continue
        if len(files) > 1:
            raise SourceError(f"{option} {key!r}: {spec!r} matches several sources ({', '.join(sorted(files))}); "
                              "give the path")
        hits = [d for d in devices if d.source in files and old in _names(d)]
        if not hits:
            known = sorted({d.key for d in devices if d.source in files})
            raise SourceError(f"{option} {key!r}: {spec} has no device {old!r} (its devices: {', '.join(known)})")
        return hits
    return []


def resolve(given: Mapping[str, str], devices: Sequence[SourceDevice], option: str) -> dict[int, str]:
    """Index of each device in ``devices`` -> the value ``option`` gives it (per-file beats all-files).

    Raises :class:`SourceError` for a key that names no device of these sources.
    """
    everywhere: dict[int, str] = {}
    per_file: dict[int, str] = {}
    for key, value in given.items():
        hits = [i for i, d in enumerate(devices) if key in _names(d)]
        if hits:
            everywhere.update(dict.fromkeys(hits, value))
            continue
        found = _per_file(key, devices, option)
        if not found:
            known = ", ".join(sorted({d.key for d in devices}))
            raise SourceError(f"{option} names {key!r}, not a device of these sources (devices: {known}; "
                              f"per file: {option} FILE:DEVICE=...)")
        per_file.update({i: value for i, d in enumerate(devices) if any(d is f for f in found)})
    return {**everywhere, **per_file}
