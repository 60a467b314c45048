"""Views of result records: status counts and the one-line summary, why a sweep is incomplete, its compile
summary, how a record was timed and what it says of its math mode, and picking records by dtype and mode.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence

from mfu_sweep.records.results import Record, Sweep
from mfu_sweep.util.text import counted


def status_counts(records: Sequence[Record]) -> Counter:
    """How many records have each status."""
    return Counter(r.status for r in records)


def summary_line(records: Sequence[Record]) -> str:
    """``N/M ok; x timeout, y oom, z mismatch, w error`` (plus unsupported when any)."""
    counts = status_counts(records)
    parts = [f"{counts.get(s, 0)} {s}" for s in ("timeout", "oom", "mismatch", "error")]
    if counts.get("unsupported"):
        parts.append(f"{counts['unsupported']} unsupported")
    return f"{counts.get('ok', 0)}/{len(records)} ok; " + ", ".join(parts)


def incomplete_reason(sweep: Sweep, held: int | None = None) -> str | None:
    """Why ``sweep`` is incomplete (interrupted or still running), or None when it finished.

    A sweep finished when ``run.finished_at`` is set and, where ``run.planned``
    says how many measurements it set out to make, it holds that many records.
    Older files without ``planned`` are judged by ``finished_at``; imported ones are finished.
    ``held``: its record count, where ``sweep`` carries its metadata only (a file's digest).
    """
    run = sweep.run
    planned, have = run.get("planned"), len(sweep.records) if held is None else held
    # an imported table is whole as read, even when its source does not say when it was measured
    if (run.get("finished_at") or sweep.settings.get("imported")) and (planned is None or have >= planned):
        return None
    held = (f"{have} of {counted(planned, 'planned measurement')}" if planned is not None
            else counted(have, "measurement"))
    where = sweep.source or sweep.label
    return (f"{where}: incomplete sweep ({held}, no finish time): interrupted or still running; "
            f"continue it with `mfu-sweep sweep --resume -o {where}`")


def compile_summary(records: Sequence[Record]) -> str | None:
    """Time-to-first-result line: total compile time, median first-call/steady ratio per mode."""
    parts = []
    for mode in sorted({r.mode for r in records}):
        rs = [r for r in records if r.mode == mode and r.first_call_ratio is not None]
        if not rs:
            continue
        median = statistics.median(r.first_call_ratio for r in rs)  # type: ignore[misc]
        compile_total = sum(r.compile_s or 0.0 for r in rs)
        first_total = sum(r.first_call_s or 0.0 for r in rs)
        text = f"{mode}: first calls {first_total:.1f} s in all, median first-call/steady {median:.3g}x"
        if any(r.compile_s is not None for r in rs):
            text += f", compile {compile_total:.1f} s"
        parts.append(text)
    return "; ".join(parts) or None


def timing_of(sweep: Sweep, rec: Record) -> tuple[str, str, str]:
    """How one record was timed: ``(timer, cache, mode)``, for comparing two sides' methods.

    ``timer`` is the record's (a measured sweep: ``host``, ``events``, ``graph``;
    an import: ``cuda-events+flush``, ``cupti-kernel``, ``host-mean`` ...).
    ``cache`` is the record's own (imports) or the measured sweep's ``--cache``
    policy (``rotate``, ``flush``), ``unknown`` for files written before either.
    ``mode`` is ``eager``/``compile`` (or another torch.compile mode).
    """
    cache = rec.extra.get("cache") or sweep.settings.get("cache") or "unknown"
    return rec.timer, str(cache), rec.mode


# What a record says of its math beyond its dtype: the flag that no peak re-derives (an XLA table's f32 dot
# that may have run as TF32) and the math-mode extras of the XLA and Neuron backends.
MATH_FLAGS = ("maybe_tf32",)
MATH_KEYS = ("mat_mul_precision", "neuron_cc_flags", "neuronx_cc")


def math_of(rec: Record) -> dict[str, str]:
    """What ``rec`` says of its math mode, as text: ``flags`` (its :data:`MATH_FLAGS`, comma-joined) and each
    :data:`MATH_KEYS` extra it holds; empty when it says nothing. The flags that follow from the peak
    (``estimated_peak``, ``tf32_peak_assumed`` ...) are not in it: whoever holds the peak derives them."""
    flags = ",".join(f for f in rec.flags if f in MATH_FLAGS)
    out = {"flags": flags} if flags else {}
    return out | {k: str(rec.extra[k]) for k in MATH_KEYS if rec.extra.get(k) is not None}


def all_records(sweeps: Iterable[Sweep]) -> list[tuple[Sweep, Record]]:
    """Every record of every sweep (any status), with its sweep."""
    return [(sw, r) for sw in sweeps for r in sw.records]


def available(sweeps: Iterable[Sweep], field: str) -> list[str]:
    """Distinct ``dtype`` or ``mode`` values among the records, sorted (eager before compile); a mode is the
    series' (``Record.series_mode``: ``eager-nt`` for records in layout nt)."""
    attr = "series_mode" if field == "mode" else field
    values = {getattr(r, attr) for _, r in all_records(sweeps)}
    return sorted(values, key=lambda v: (v != "eager", v))


def _any_mode(sweeps: Sequence[Sweep], mode: str) -> bool:
    return any(r.mode == mode for _, r in all_records(sweeps))


def filter_sweeps(sweeps: Sequence[Sweep], dtypes: Sequence[str] = (), modes: Sequence[str] = ()) -> list[Sweep]:
    """Keep only records of the given dtypes and modes (all when empty); a mode is an execution mode
    (``eager``: every layout) or a series' mode (``eager-nt``: layout nt only).

    Raises ``ValueError`` naming the filter and the values present when nothing is left.
    """
    for name, wanted in (("dtype", dtypes), ("mode", modes)):
        have = available(sweeps, name)
        missing = [w for w in wanted if w not in have and not (name == "mode" and _any_mode(sweeps, w))]
        if missing:
            raise ValueError(f"--{name} {missing[0]} matches no records (present: {', '.join(have) or 'none'})")
    out = [sw.with_records(r for r in sw.records if (not dtypes or r.dtype in dtypes)
                           and (not modes or r.mode in modes or r.series_mode in modes)) for sw in sweeps]
    if not any(sw.records for sw in out):
        raise ValueError(f"no records with dtype in {list(dtypes)} and mode in {list(modes)}")
    return out
