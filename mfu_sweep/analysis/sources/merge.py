"""Merge sweep and merged files into one merged file, provenance intact.

A merged file is ``{"schema_version": 1, "kind": "merged", "sweeps": [...]}``
holding every input sweep unchanged (tool, run, environment, device, peak,
settings, records). Rules:

* every input is validated against the schema; all inputs must share one
  ``schema_version``;
* a run (``run.id``) given twice with identical contents is kept once and a
  note says so; the same ``run.id`` with different contents is an error;
* ``device.label`` names a series: one label on two different devices
  (device name, backend or host differ) is an error unless a :class:`Relabel`
  (``--relabel [FILE:]OLD=NEW``) renames one of them; a renamed sweep keeps its
  old label in ``device.relabeled_from``. The pieces of one sharded sweep run
  on several hosts are one device (``series.check_labels``); every sweep keeps
  its ``run.host``, :attr:`MergeResult.hosts` lists them per label and a note
  names them;
* sweeps are sorted by (label, start time, run id), so the output does not
  depend on the order of the inputs, and merging a merged file again gives
  the same file;
* pieces of a ``--shard I/N`` run must all be there, each once.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from mfu_sweep.analysis.ground.series import check_labels, host_of, sweep_order
from mfu_sweep.records.results import SCHEMA_VERSION, ResultError, Sweep, parse_document, read_json, screen
from mfu_sweep.records.shards import check_shards
from mfu_sweep.util.names import has_control
from mfu_sweep.util.text import counted


@dataclass(frozen=True)
class Relabel:
    """Rename ``device.label`` ``old`` to ``new``, in sweeps read from ``file`` only when given."""

    old: str
    new: str
    file: str | None = None

    @classmethod
    def parse(cls, text: str) -> Relabel:
        """Parse ``OLD=NEW`` or ``FILE:OLD=NEW``."""
        left, sep, new = text.rpartition("=")
        file, colon, old = left.rpartition(":")
        if not sep or not old or not new:
            raise ResultError(f"--relabel {text!r} must be OLD=NEW or FILE:OLD=NEW")
        if has_control(new):
            raise ResultError(f"--relabel {ascii(text)}: the new label must be printable text (no control "
                              "characters or bidirectional overrides)")
        return cls(old=old, new=new, file=file if colon else None)

    def __str__(self) -> str:
        return f"{self.file}:{self.old}={self.new}" if self.file else f"{self.old}={self.new}"

    def matches(self, sweep: Sweep) -> bool:
        if sweep.label != self.old:
            return False
        return self.file is None or _same_file(self.file, source_file(sweep))


@dataclass(frozen=True)
class MergeResult:
    """The merged sweeps, in output order, and notes about what was dropped or renamed."""

    sweeps: tuple[Sweep, ...]
    notes: tuple[str, ...] = ()

    @property
    def labels(self) -> list[str]:
        return sorted({s.label for s in self.sweeps})

    @property
    def hosts(self) -> dict[str, tuple[str, ...]]:
        """The hosts (``run.host``) that contributed to each label, sorted; several for a multi-host sharded sweep."""
        return hosts_by_label(self.sweeps)

    @cached_property
    def document(self) -> dict[str, Any]:
        """The merged file's JSON, built once (the merge checks it, then ``merge`` writes the same object)."""
        return merged_document(self.sweeps)

    def to_json(self) -> dict[str, Any]:
        return self.document


def source_file(sweep: Sweep) -> str:
    """The file a sweep was read from (``a.json`` for ``a.json: sweeps[2]``)."""
    return sweep.source.split(": sweeps[")[0]


def _same_file(a: str, b: str) -> bool:
    return os.path.normpath(os.path.abspath(a)) == os.path.normpath(os.path.abspath(b))


def hosts_by_label(sweeps: Iterable[Sweep]) -> dict[str, tuple[str, ...]]:
    """``label -> sorted hosts`` of the sweeps, in label order."""
    hosts: dict[str, set[str]] = {}
    for sw in sweeps:
        hosts.setdefault(sw.label, set()).add(host_of(sw))
    return {label: tuple(sorted(hosts[label])) for label in sorted(hosts)}


def _host_notes(sweeps: Iterable[Sweep]) -> list[str]:
    return [f"label {label!r}: sharded sweep measured on {len(hosts)} hosts ({', '.join(hosts)}), merged as one device"
            for label, hosts in hosts_by_label(sweeps).items() if len(hosts) > 1]


def merged_document(sweeps: Iterable[Sweep]) -> dict[str, Any]:
    """The JSON document of a merged file holding ``sweeps`` in the given order."""
    return {"schema_version": SCHEMA_VERSION, "kind": "merged", "sweeps": [s.to_json() for s in sweeps]}


def _relabel(sweeps: Sequence[Sweep], rules: Sequence[Relabel]) -> tuple[list[Sweep], list[str]]:
    out, notes = list(sweeps), []
    for rule in rules:
        hits = [i for i, s in enumerate(out) if rule.matches(s)]
        if not hits:
            have = ", ".join(sorted({s.label for s in out}))
            raise ResultError(f"--relabel {rule} matched no sweep (labels: {have})")
        for i in hits:
            sw = out[i]
            device = {**sw.device, "label": rule.new, "relabeled_from": sw.device.get("relabeled_from", sw.label)}
            out[i] = replace(sw, device=device)
        notes.append(f"relabelled {counted(len(hits), 'sweep')} {rule.old!r} -> {rule.new!r}")
    return out, notes


def _dedupe(sweeps: Sequence[Sweep]) -> tuple[list[Sweep], list[str]]:
    kept: dict[str, Sweep] = {}
    notes = []
    for sw in sweeps:
        rid = str(sw.run.get("id"))
        if rid not in kept:
            kept[rid] = sw
        elif kept[rid].to_json() == sw.to_json():
            notes.append(f"run {rid} appears twice ({kept[rid].source}, {sw.source}); kept once")
        else:
            raise ResultError(f"run.id {rid!r} appears in {kept[rid].source} and {sw.source} with different "
                              f"contents; keep one of them")
    return list(kept.values()), notes


def merge_sweeps(sweeps: Iterable[Sweep], relabel: Sequence[Relabel] = ()) -> MergeResult:
    """Merge already-loaded sweeps: relabel, drop exact duplicate runs, check labels, sort.

    Raises
    ------
    ResultError
        On a run id with two different contents, a relabel rule that matches
        nothing, a label naming two devices (the pieces of one sharded sweep
        from several hosts are one device), or shard pieces missing or given twice.
    """
    out, notes = _relabel(list(sweeps), relabel)
    out, dup_notes = _dedupe(out)
    out.sort(key=sweep_order)
    check_labels(out)
    check_shards(out)
    return MergeResult(sweeps=tuple(out), notes=tuple(notes + dup_notes + _host_notes(out)))


def read_versioned(paths: Sequence[str | Path],
                   on_invalid: Callable[[str], None] | None = None) -> list[tuple[str, Any]]:
    """Read every file and refuse a mix of schema versions (before parsing any of them); ``on_invalid``: damaged
    journal lines are skipped with a note (:func:`mfu_sweep.records.results.read_json`)."""
    docs = [(str(p), read_json(p, on_invalid)) for p in paths]
    versions: dict[Any, str] = {}
    for path, data in docs:
        version = data.get("schema_version") if isinstance(data, dict) else None
        versions.setdefault(version, path)
    if len(versions) > 1:
        listed = ", ".join(f"{path} has schema_version={v!r}" for v, path in versions.items())
        raise ResultError(f"cannot merge files of different schema versions ({listed}); "
                          f"this tool writes version {SCHEMA_VERSION}")
    return docs


def merge_files(paths: Sequence[str | Path], relabel: Sequence[Relabel] = (),
                on_invalid: Callable[[str], None] | None = None) -> MergeResult:
    """Load, validate and merge sweep and merged files in any mix (``on_invalid``: see
    :func:`mfu_sweep.records.results.parse_document`; with it, what fails validation is left out of the merge)."""
    if not paths:
        raise ResultError("no result files given")
    sweeps: list[Sweep] = []
    for path, data in read_versioned(paths, on_invalid):
        sweeps.extend(parse_document(data, source=path, validate=True, on_invalid=on_invalid))
    result = merge_sweeps(sweeps, relabel)
    screen(result.document, "merged output")  # the schema and the checks of meaning, before it is written
    return result
