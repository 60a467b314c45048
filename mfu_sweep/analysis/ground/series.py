"""Series: the measured curve of one device label, dtype and mode.

A series is identified by ``SeriesKey(label, dtype, mode)``, where ``label`` is
``device.label`` of the sweeps it comes from. Records of an operand layout other
than ``nn`` (``Shape.layout``) form series of their own, whose mode names the
layout (``eager-nt``, ``Record.series_mode``): layouts are never pooled into one
curve, and compare, fits and figures treat each as its own series. ``group_series`` collects the
usable records (status ``ok`` or ``mismatch``, with samples) of every sweep into
series sorted by FLOPs; fitting, comparison, plots and reports start from here::

    from mfu_sweep.records.results import load_sweeps
    from mfu_sweep.analysis.ground.series import group_series

    for key, series in group_series(load_sweeps(["a.json", "b.json"])).items():
        print(key, len(series.records), series.peak_tflops)

Several sweeps may feed one series (e.g. two runs on the same device); they
must then agree on the device and on the peak, otherwise the label is
ambiguous and ``SeriesError`` says which files disagree. The device is its
name, backend and host, except that the pieces of one sharded sweep
(``--shard I/N`` or ``torchrun --distribute shard``) may come from several
hosts; ``Series.hosts`` lists the hosts that contributed.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from mfu_sweep.analysis.sources.medians import ShapeTable
from mfu_sweep.records.fingerprint import describe as describe_fingerprint
from mfu_sweep.records.fingerprint import fingerprint_of
from mfu_sweep.records.results import Record, ResultError, Sweep
from mfu_sweep.records.shards import parse_shard, shard_plan
from mfu_sweep.specs import Peak


class SeriesError(ResultError):
    """Sweeps cannot be grouped into series; the message names label and files."""



def shape_seconds(records: Sequence[Record]) -> float:
    """One shape's seconds per call from its records: the median of their medians.

    The passes of a ``--repeats`` sweep are one record each; a single record gives its own median.
    Every view that needs one time per shape (figures, replicate spread, step prediction) uses this,
    so none of them takes an arbitrary pass.
    """
    if len(records) == 1:  # one pass: the common case, 160,000 times in a fleet
        return float(records[0].median_s)  # type: ignore[arg-type]
    return statistics.median(float(r.median_s) for r in records)  # type: ignore[arg-type]

@dataclass(frozen=True, order=True)
class SeriesKey:
    """What identifies a series: device label, dtype and mode (with the operand layout, ``Record.series_mode``)."""

    label: str
    dtype: str
    mode: str

    def __str__(self) -> str:
        return f"{self.label} {self.dtype} {self.mode}"


@dataclass(frozen=True)
class Series:
    """Usable records of one series, sorted by FLOPs, with the peak they are measured against.

    Attributes
    ----------
    key:
        Label, dtype and mode.
    records:
        Records with status ok or mismatch and at least one sample, sorted by
        (flops, shape). One shape may appear more than once if several runs
        measured it.
    peak:
        The ``peak`` block of the sweeps (they agree on it).
    device:
        The ``device`` block of the first sweep (in sorted run order).
    sources:
        Where the sweeps were read from, for messages.
    hosts:
        The hosts (``run.host``) that measured the records, sorted; several
        when the pieces of a sharded sweep ran on several hosts.
    timing:
        How it was timed (:func:`timing_of`).
    published:
        Read from a published table by ``mfu-sweep import``: it cannot be swept again, so
        advice such as ``--repeats`` does not apply to it.
    notes:
        What a reader of its MFU should know about its peak (two measured-clock peaks of its sweeps that
        differ by more than ``MEASURED_PEAK_RTOL``: the first is used); empty otherwise.
    table:
        Per-shape medians (:class:`~mfu_sweep.analysis.sources.medians.ShapeTable`) when the series was
        read from file digests for the fleet gate (``compare`` on many files): then ``records`` is empty,
        and only the leaderboards and the fleet view, which need nothing else, read it.
    """

    key: SeriesKey
    records: tuple[Record, ...]
    peak: Peak
    device: Mapping[str, Any] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    timing: Mapping[str, Any] = field(default_factory=dict)
    published: bool = False
    notes: tuple[str, ...] = ()
    table: ShapeTable | None = None

    @property
    def label(self) -> str:
        return self.key.label

    @property
    def dtype(self) -> str:
        return self.key.dtype

    @property
    def mode(self) -> str:
        return self.key.mode

    @property
    def peak_tflops(self) -> float | None:
        """Vendor peak TFLOP/s for this series' dtype, or None when the spec lacks it."""
        return self.peak.for_dtype(self.dtype)

    @property
    def n_shapes(self) -> int:
        """Number of distinct shapes measured."""
        if self.table is not None and not self.records:
            return len(self.table)
        return len({r.shape for r in self.records})


def usable(record: Record) -> bool:
    """Whether a record carries a timing: status ok or mismatch, with samples."""
    return record.ok and bool(record.samples_s)


def host_of(sweep: Sweep) -> str:
    """The host that ran ``sweep`` (``run.host``)."""
    return str(sweep.run.get("host", ""))


def linked_hosts(sweeps: Iterable[Sweep]) -> dict[str, str]:
    """Map each host to one representative of its group of hosts.

    Hosts are grouped when they ran pieces of one sharded sweep (equal
    ``shards.shard_plan``); a host without shard pieces is its own group.
    Call it on the sweeps of one label.
    """
    parent: dict[str, str] = {}

    def root(host: str) -> str:
        while parent[host] != host:
            host = parent[host]
        return host

    first_host: dict[tuple[int, str], str] = {}
    for sw in sweeps:
        host, plan = host_of(sw), shard_plan(sw)
        parent.setdefault(host, host)
        if plan is not None:
            parent[root(host)] = root(first_host.setdefault(plan, host))
    return {host: root(host) for host in parent}


def device_identity(sweep: Sweep, linked: Mapping[str, str] | None = None) -> tuple[str, str, str]:
    """What makes two sweeps the same device: name, backend and host.

    With ``linked`` (from :func:`linked_hosts`) the host is replaced by its
    group, so the pieces of one sharded sweep run on several hosts are one device.
    """
    host = host_of(sweep)
    return (str(sweep.device.get("name", "")), str(sweep.device.get("backend", "")),
            linked.get(host, host) if linked is not None else host)


def describe_device(sweep: Sweep) -> str:
    name, backend, host = device_identity(sweep)
    shard = sweep.settings.get("shard")
    where = f"host {host}, shard {shard}" if shard else f"host {host}"
    return f"{name!r} (backend {backend}, {where}) in {sweep.source or '<data>'}"


def check_labels(sweeps: Iterable[Sweep]) -> None:
    """Refuse a label that names two different devices; the message says how to fix it.

    Sweeps under one label must agree on device name, backend and host; hosts
    count as one when they ran pieces of one sharded sweep (see :func:`linked_hosts`);
    and sweeps that carry a fingerprint must agree on it (:func:`check_fingerprints`).
    """
    by_label: dict[str, list[Sweep]] = {}
    for sw in sweeps:
        by_label.setdefault(sw.label, []).append(sw)
    for label, group in by_label.items():
        linked, head = linked_hosts(group), group[0]
        for sw in group:
            if device_identity(head, linked) != device_identity(sw, linked):
                raise SeriesError(
                    f"device.label {label!r} names two devices: {describe_device(head)} and {describe_device(sw)}; "
                    f"relabel one (mfu-sweep merge --relabel FILE:{label}=NEW ...)"
                )
        check_fingerprints(label, group)


def check_fingerprints(label: str, group: Iterable[Sweep]) -> None:
    """Refuse one label over two ``device.fingerprint`` values (two kinds of machine).

    Sweeps without a fingerprint (written before fingerprints) are left out; the
    pieces of one sharded run count once, by their first piece, so a run sharded
    over several hosts stays one device.
    """
    seen_plans: set[tuple[int, str]] = set()
    first: Sweep | None = None
    for sw in group:
        fp, plan = fingerprint_of(sw.device), shard_plan(sw)
        if fp is None or (plan is not None and plan in seen_plans):
            continue
        if plan is not None:
            seen_plans.add(plan)
        if first is None:
            first = sw
        elif fingerprint_of(first.device) != fp:
            raise SeriesError(
                f"device.label {label!r} covers two devices: {describe_fingerprint(first.device)} in "
                f"{first.source or '<data>'} and {describe_fingerprint(sw.device)} in {sw.source or '<data>'}; "
                f"relabel one (mfu-sweep merge --relabel FILE:{label}=NEW ...)"
            )


def sweep_order(sweep: Sweep) -> tuple[str, str, int, str]:
    """Deterministic order of sweeps: label, start time, shard index (pieces of one sweep started within the
    same second, as ``started_at`` has it, keep their own order, not their run ids'), run id."""
    return (sweep.label, str(sweep.run.get("started_at", "")), _shard_index(sweep), str(sweep.run.get("id", "")))


NOT_A_PIECE = 2**31  # sorts a sweep that is no shard piece after the pieces started in its second


def _shard_index(sweep: Sweep) -> int:
    """The piece's ``I`` of ``settings.shard`` ``I/N``; :data:`NOT_A_PIECE` for a sweep that is not a
    (well-formed) piece."""
    try:
        return parse_shard(str(sweep.settings["shard"]))[0]
    except (KeyError, ValueError):
        return NOT_A_PIECE


MEASURED_PEAK_RTOL = 0.05  # two runs' measured clocks of one idle machine differ by ~1-2% (docs: machine-state)


def _check_peak(key: SeriesKey, kept: Sweep, other: Sweep) -> str | None:
    """Refuse two peaks for one series, except two runs' measurements of one machine's clock (``peak.basis``
    set on both, one chip): the series keeps the first. The probe reads low on a busy machine (5.8% apart
    between two shard pieces on the 2-core VM under load), so beyond MEASURED_PEAK_RTOL the pieces are not
    refused; the note returned names both values and which one MFU uses."""
    a, b = kept.peak.for_dtype(key.dtype), other.peak.for_dtype(key.dtype)
    if a == b:
        return None
    measured = bool(kept.peak.basis and other.peak.basis) and kept.peak.chip == other.peak.chip
    if measured and a and b:
        if abs(a - b) <= MEASURED_PEAK_RTOL * max(a, b):
            return None
        return (f"{key}: the measured-clock peaks of its sweeps differ by {abs(a - b) / max(a, b):.1%} "
                f"({a:.4g} TFLOP/s in {kept.source or '<data>'}, {b:.4g} in {other.source or '<data>'}; "
                f"a clock probe on a busy machine reads low): MFU uses {a:.4g}, the first")
    raise SeriesError(
        f"series {key}: sweeps disagree on peak.tflops[{key.dtype}] ({a} in {kept.source or '<data>'}, "
        f"{b} in {other.source or '<data>'}); MFU would mix two peaks, relabel one of them"
    )


def _most_common(values: Iterable[Any]) -> Any:
    counts = Counter(v for v in values if v is not None)
    return counts.most_common(1)[0][0] if counts else None


def timing_of(sweep: Sweep, records: Sequence[Record]) -> dict[str, Any]:
    """How a series was timed: ``timer`` (e.g. host, events, cuda-events, cupti-kernel), ``cache`` policy
    (rotate, flush; None when the file does not say), ``mode`` and, for imports, the source's ``method`` text."""
    settings = sweep.settings if isinstance(sweep.settings, Mapping) else {}
    imported = sweep.extra.get("import") if isinstance(sweep.extra.get("import"), Mapping) else {}
    timing = settings.get("timing") if isinstance(settings.get("timing"), Mapping) else {}
    cache = _most_common(r.extra.get("cache") for r in records) or settings.get("cache") or imported.get("cache")
    return {"timer": _most_common(r.timer for r in records), "cache": cache,
            "mode": _most_common(r.mode for r in records),
            "method": imported.get("timing_method") or timing.get("method")}


# the last call of group_series: its sweeps (held, so their ids stay theirs) and its result
_LAST: tuple[tuple[Sweep, ...], dict[SeriesKey, Series]] = ((), {})


def group_series(sweeps: Iterable[Sweep]) -> dict[SeriesKey, Series]:
    """Group the usable records of ``sweeps`` into series.

    A report asks for the series of the same sweeps from every figure; a second call with the
    very same sweep objects (frozen) returns a copy of the last result instead of regrouping.

    Parameters
    ----------
    sweeps:
        Sweeps as returned by ``mfu_sweep.records.results.load_sweeps`` (sweep and
        merged files alike).

    Returns
    -------
    dict
        ``SeriesKey -> Series`` in sorted key order. Series without any usable
        record are left out.

    Raises
    ------
    SeriesError
        When one label names two devices (the pieces of one sharded sweep
        from several hosts are one device), or sweeps of one series disagree on the peak.
    """
    global _LAST
    given = tuple(sweeps)
    if len(given) == len(_LAST[0]) and all(a is b for a, b in zip(given, _LAST[0], strict=True)):
        return dict(_LAST[1])
    out = _group(given)
    _LAST = (given, out)
    return dict(out)


def _group(sweeps: Sequence[Sweep]) -> dict[SeriesKey, Series]:
    ordered = sorted(sweeps, key=sweep_order)
    check_labels(ordered)
    found: dict[tuple[str, str, str], list[tuple[Sweep, Record]]] = {}  # plain tuples: 200,000 records, few keys
    for sw in ordered:
        label = sw.label
        for rec in sw.records:
            if usable(rec):
                found.setdefault((label, rec.dtype, rec.series_mode), []).append((sw, rec))
    parts = {SeriesKey(*k): v for k, v in found.items()}
    out: dict[SeriesKey, Series] = {}
    for key in sorted(parts):
        pairs = parts[key]
        head = pairs[0][0]
        notes: dict[str, None] = {}
        for sw in {id(sw): sw for sw, _ in pairs}.values():  # each sweep once (not once per record)
            note = _check_peak(key, head, sw)
            if note:
                notes[note] = None
        records = sorted((r for _, r in pairs), key=attrgetter("flops", "shape"))
        sources = tuple(dict.fromkeys(sw.source for sw, _ in pairs))
        hosts = tuple(sorted({host_of(sw) for sw, _ in pairs}))
        out[key] = Series(key=key, records=tuple(records), peak=head.peak, device=head.device, sources=sources,
                          hosts=hosts, timing=timing_of(head, records),
                          published=isinstance(head.extra.get("import"), Mapping), notes=tuple(notes))
    return out


def with_peak(series: Mapping[SeriesKey, Series], metric: str, keep: str | None = None
              ) -> tuple[dict[SeriesKey, Series], list[str]]:
    """For ``metric="mfu"``, the series that have a peak for their dtype, and a note per series left out.

    MFU is undefined without a peak, so figures, reports and leaderboards leave such a series
    out (naming ``--metric tflops``) instead of stopping. ``keep`` (a label, e.g. a baseline)
    is kept even without a peak, so that its absence stays an error where it matters. The notes
    also carry each kept series' own peak notes (:attr:`Series.notes`).
    """
    if metric != "mfu":
        return dict(series), []
    kept = {k: s for k, s in series.items() if s.peak_tflops is not None or k.label == keep}
    notes = [f"left {k} out: no {k.dtype} peak, so its MFU is undefined; --metric tflops includes it"
             for k in sorted(set(series) - set(kept))]
    return kept, notes + [n for k in sorted(kept) for n in kept[k].notes]
