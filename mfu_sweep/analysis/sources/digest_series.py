"""Series and notes from file digests: what ``compare``'s fleet gate does with loaded sweeps, without records.

Each function here answers as its counterpart over loaded sweeps does (the tests compare them on SYNTHETIC
fleets): :func:`contention_note_of` as :func:`mfu_sweep.records.contention.contention_note`,
:func:`incomplete_notes` as :func:`mfu_sweep.records.summaries.incomplete_reason` per sweep,
:func:`collisions` as :func:`mfu_sweep.analysis.sources.runs.label_collisions`, and
:func:`group_digests` as :func:`mfu_sweep.analysis.ground.series.group_series`, with the same checks (one label,
one device; one series, one peak) on the same metadata. Its series carry per-shape medians
(``Series.table``) instead of records: what the leaderboards, the fleet view and the gate read. ``exclude``
answers for ``--exclude-contended``.

A shape measured by two sweeps of one series (two runs of a label, pooled) needs both runs' samples, which
a digest does not keep: :func:`group_digests` then returns None, and the caller loads the files whole.

Ground of ``analysis/``: imports the top-level modules, ``series`` and ``sources/`` only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mfu_sweep.analysis.ground.series import Series, SeriesKey, _check_peak, check_labels, host_of, sweep_order
from mfu_sweep.analysis.sources.digest import SweepDigest
from mfu_sweep.analysis.sources.medians import ShapeTable
from mfu_sweep.analysis.sources.runs import label_collisions
from mfu_sweep.records.contention import contention_line, contention_part
from mfu_sweep.records.results import Sweep
from mfu_sweep.records.summaries import incomplete_reason


def contention_note_of(digests: Sequence[SweepDigest], exclude: bool = False) -> str | None:
    """The contention note of the digested sweeps (their records before any exclusion)."""
    parts = [contention_part(d.sweep.label, d.flagged, d.records, len(d.flagged_passes), d.max_share)
             for d in digests if d.flagged]
    return contention_line(parts, exclude)


def anything_left(digests: Sequence[SweepDigest], exclude: bool) -> bool:
    """Whether a record is left (``--exclude-contended`` may leave none)."""
    return not digests or any(d.held(exclude) for d in digests)


def incomplete_notes(digests: Sequence[SweepDigest], exclude: bool = False) -> list[str]:
    """Why each incomplete sweep is incomplete (counting the records ``exclude`` keeps)."""
    return [r for r in (incomplete_reason(d.sweep, d.held(exclude)) for d in digests) if r]


def collisions(digests: Sequence[SweepDigest], exclude: bool = False) -> list[str]:
    """The hints of :func:`~mfu_sweep.analysis.sources.runs.label_collisions`."""
    modes = {id(d.sweep): d.clean_modes if exclude else d.modes for d in digests}
    return label_collisions([d.sweep for d in digests], lambda s: modes[id(s)])


def _merge(tables: Sequence[ShapeTable]) -> ShapeTable | None:
    """One table of disjoint tables; None when a shape is in two (pooling it needs the samples)."""
    if len(tables) == 1:
        return tables[0]
    rows = [row for t in tables for row in t.rows()]
    if len({r[0] for r in rows}) != len(rows):
        return None
    return ShapeTable.of(rows)


def group_digests(digests: Sequence[SweepDigest], exclude: bool = False) -> dict[SeriesKey, Series] | None:
    """``group_series`` of the digested sweeps: series with per-shape medians; None where a shape of a series
    comes from two sweeps (see the module docstring).

    Raises :class:`~mfu_sweep.analysis.ground.series.SeriesError` as ``group_series`` does.
    """
    ordered = sorted(digests, key=lambda d: sweep_order(d.sweep))
    check_labels([d.sweep for d in ordered])
    parts: dict[SeriesKey, list[tuple[Sweep, ShapeTable]]] = {}
    for d in ordered:
        for (dtype, mode) in d.tables:
            table = d.table((dtype, mode), exclude)
            if table is not None and len(table):
                parts.setdefault(SeriesKey(d.sweep.label, dtype, mode), []).append((d.sweep, table))
    out: dict[SeriesKey, Series] = {}
    for key in sorted(parts):
        pairs = parts[key]
        head = pairs[0][0]
        notes = dict.fromkeys(n for n in (_check_peak(key, head, sw) for sw, _ in pairs) if n)
        table = _merge([t for _, t in pairs])
        if table is None:
            return None
        out[key] = Series(key=key, records=(), peak=head.peak, device=head.device,
                          sources=tuple(dict.fromkeys(sw.source for sw, _ in pairs)),
                          hosts=tuple(sorted({host_of(sw) for sw, _ in pairs})),
                          published=isinstance(head.extra.get("import"), Mapping), notes=tuple(notes), table=table)
    return out
