"""A result file's digest: what the fleet gate needs of its sweeps, without their samples.

``compare --fail-on`` over a pod (8,192 GPUs, four series each: 32,768 files, 1.3 million records) needs
of each sweep its metadata (label, device, host, run, settings, peak: what groups sweeps into series and
refuses mixing two devices, two peaks or two ways of measuring), a few counts (records, contended ones
and in which passes, for the notes) and, per series and shape, the median of the samples and its
standard error (:mod:`mfu_sweep.analysis.sources.medians`). :func:`digest_sweep` takes them from a
loaded, validated sweep; :func:`encode` and :func:`decode` turn a file's digests into compact JSON for
the cache (:mod:`mfu_sweep.analysis.sources.cache`) and back. A digest never holds where a file lies: the
caller names its sweeps (``Sweep.source``) as :func:`mfu_sweep.records.results.load_sweeps` would.

Every table comes twice where it differs: from every usable record, and from the records that are not
flagged contended (what ``--exclude-contended`` keeps).

Ground of ``analysis/``: imports the top-level modules, ``series`` and ``sources/`` only.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mfu_sweep.analysis.ground.series import usable
from mfu_sweep.analysis.sources.medians import ShapeTable, pooled_table
from mfu_sweep.records.contention import flagged_summary, is_flagged
from mfu_sweep.records.results import Record, Sweep
from mfu_sweep.specs import Peak
from mfu_sweep.util import jsonio

DIGEST_FORMAT = 1  # the encoding below; a change bumps it (the cache keys on it)

SeriesPart = tuple[str, str]  # (dtype, Record.series_mode): one series of a sweep


class DigestError(ValueError):
    """Bytes that are not a digest of this format (a cache entry cut short or overwritten)."""


@dataclass(frozen=True)
class SweepDigest:
    """One sweep as the fleet gate reads it.

    ``sweep`` holds the metadata and no records; ``records`` is how many it has, ``flagged`` how many are
    contended, in ``flagged_passes``, others taking up to ``max_share`` of the device; ``modes`` and
    ``clean_modes`` the distinct (dtype, mode) of all records and of those not contended, in record order;
    ``tables`` maps each (dtype, series mode) with usable records to its shape table over all of them and
    over those not contended (None when every one is contended).
    """

    sweep: Sweep
    records: int
    flagged: int = 0
    flagged_passes: tuple[int, ...] = ()
    max_share: float = 0.0
    modes: tuple[tuple[str, str], ...] = ()
    clean_modes: tuple[tuple[str, str], ...] = ()
    tables: Mapping[SeriesPart, tuple[ShapeTable | None, ShapeTable | None]] = field(default_factory=dict)

    def held(self, exclude: bool) -> int:
        """Records the sweep holds, without the contended ones when ``exclude``."""
        return self.records - self.flagged if exclude else self.records

    def table(self, part: SeriesPart, exclude: bool) -> ShapeTable | None:
        both = self.tables.get(part)
        return None if both is None else both[1 if exclude else 0]


def _tables(records: Iterable[Record]) -> dict[SeriesPart, ShapeTable]:
    pooled: dict[SeriesPart, dict[str, tuple[float, list[float]]]] = {}
    for rec in records:
        if usable(rec):
            shapes = pooled.setdefault((rec.dtype, rec.series_mode), {})
            shapes.setdefault(str(rec.shape), (rec.flops, []))[1].extend(rec.samples_s)
    return {part: pooled_table(shapes) for part, shapes in pooled.items()}


def digest_sweep(sweep: Sweep) -> SweepDigest:
    """The digest of a loaded sweep (its records are read once and dropped)."""
    flagged, passes, share = flagged_summary(sweep.records)
    every = _tables(sweep.records)
    clean = _tables(r for r in sweep.records if not is_flagged(r)) if flagged else every
    tables = {part: (table, clean.get(part)) for part, table in every.items()}
    modes = tuple(dict.fromkeys((r.dtype, r.mode) for r in sweep.records))
    clean_modes = tuple(dict.fromkeys((r.dtype, r.mode) for r in sweep.records if not is_flagged(r))) if flagged \
        else modes
    return SweepDigest(sweep.with_records(()), len(sweep.records), flagged, passes, share, modes, clean_modes, tables)


# -- the cache's encoding -------------------------------------------------------------------------------
#
# An entry is MAGIC, the SHA-256 of the body (its first 16 hex digits) and the body, the JSON of the file's
# digests, each table as columns. A worker checks the hash and the parent decodes the body, so an entry cut
# short or overwritten is a miss, found without decoding it twice.

MAGIC = b"mfu-sweep digest %d\n" % DIGEST_FORMAT
SAME = "same"  # a table without contended records: its clean table is the same table


def _columns(table: ShapeTable | None) -> dict[str, list[Any]] | None:
    if table is None:
        return None
    return {"names": list(table.names), "flops": table.flops.tolist(), "log_s": table.log_s.tolist(),
            "se": table.se.tolist()}


def _finite(table: ShapeTable | None) -> bool:
    return table is None or all(math.isfinite(v) for col in (table.log_s, table.se, table.flops) for v in col.tolist())


def encode(digests: Sequence[SweepDigest], merged: bool) -> bytes | None:
    """A file's digests as an entry (None when a value would not survive JSON, a non-finite one: such a
    file is digested anew each time)."""
    if not all(_finite(t) for d in digests for pair in d.tables.values() for t in pair):
        return None
    body = [{"tool": dict(d.sweep.tool), "run": dict(d.sweep.run), "device": dict(d.sweep.device),
             "peak": d.sweep.peak.to_json(), "settings": dict(d.sweep.settings), "extra": dict(d.sweep.extra),
             "records": d.records, "flagged": d.flagged, "flagged_passes": list(d.flagged_passes),
             "max_share": d.max_share, "modes": [list(m) for m in d.modes],
             "clean_modes": None if d.clean_modes == d.modes else [list(m) for m in d.clean_modes],
             "tables": [[dtype, mode, _columns(a), SAME if b is a else _columns(b)]
                        for (dtype, mode), (a, b) in d.tables.items()]}
            for d in digests]
    data = jsonio.dumps({"format": DIGEST_FORMAT, "merged": merged, "sweeps": body})
    return MAGIC + hashlib.sha256(data).hexdigest()[:16].encode() + b"\n" + data


def intact(entry: bytes) -> bool:
    """Whether ``entry`` is whole: this format's header, and a body of the hash it names."""
    head = len(MAGIC) + 17
    return (entry.startswith(MAGIC) and len(entry) > head and entry[head - 1:head] == b"\n"
            and hashlib.sha256(entry[head:]).hexdigest()[:16].encode() == entry[len(MAGIC):head - 1])


def _table(cols: Any) -> ShapeTable | None:
    if cols is None:
        return None
    return ShapeTable(tuple(cols["names"]), np.array(cols["flops"], dtype=float), np.array(cols["log_s"], dtype=float),
                      np.array(cols["se"], dtype=float))


_PEAKS: dict[bytes, Peak] = {}  # a fleet's files share a handful of peak blocks: each is made once


def _peak(block: Mapping[str, Any]) -> Peak:
    key = jsonio.dumps(block)
    peak = _PEAKS.get(key)
    if peak is None:
        peak = _PEAKS[key] = Peak.from_json(block)
    return peak


def source_of(path: str, merged: bool, index: int) -> str:
    """``Sweep.source`` of a file's ``index``-th sweep, as :func:`mfu_sweep.records.results.parse_document` names it."""
    return f"{path}: sweeps[{index}]" if merged else path


def _sweep_digest(d: Mapping[str, Any], source: str) -> SweepDigest:
    sweep = Sweep(tool=d["tool"], run=d["run"], environment={}, device=d["device"], peak=_peak(d["peak"]),
                  settings=d["settings"], extra=d["extra"], source=source)
    tables = {}
    for dtype, mode, a, b in d["tables"]:
        every = _table(a)
        tables[(dtype, mode)] = (every, every if b == SAME else _table(b))
    modes = tuple(tuple(m) for m in d["modes"])
    clean = modes if d["clean_modes"] is None else tuple(tuple(m) for m in d["clean_modes"])
    return SweepDigest(sweep, int(d["records"]), int(d["flagged"]), tuple(d["flagged_passes"]),
                       float(d["max_share"]), modes, clean, tables)  # type: ignore[arg-type]


def decode(entry: bytes, path: str) -> list[SweepDigest]:
    """The digests :func:`encode` wrote, their sweeps named after ``path``; :class:`DigestError` for bytes that
    are not such an entry."""
    head = len(MAGIC) + 17
    if not entry.startswith(MAGIC) or len(entry) <= head:
        raise DigestError("not a digest of this format")
    try:
        doc = jsonio.loads(entry[head:])
        return [_sweep_digest(d, source_of(path, doc["merged"], i)) for i, d in enumerate(doc["sweeps"])]
    except (ValueError, KeyError, TypeError, IndexError) as exc:  # cut short, overwritten, another format
        raise DigestError(f"not a digest: {type(exc).__name__}: {exc}") from None
