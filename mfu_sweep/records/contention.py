"""Contention: the decision rule on machine readings, and how records measured under it are counted.

A sweep records, for every shape, what else used the device while the shape ran
(``Record.extra["machine"]``, written by ``mfu_sweep.measure.machine.cores``). This
module holds the rule that turns such a reading into the ``contended`` flag, the
per-pass summary a sweep file carries in its ``machine`` block, and the counting
and exclusion that ``compare``, ``fit``, ``report`` and the figures use. It reads
plain dicts, so recorded /proc and NVML readings test it without a machine.

The threshold, :data:`CONTENDED_SHARE`, is a share of the CPU time of the cores
the worker may use: the CPU time other processes (and the hypervisor, as steal)
took during the shape, divided by wall time x cores. docs/machine-state.md gives
its calibration against real busy-loop processes.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from mfu_sweep.records.results import Record, Sweep
from mfu_sweep.util.text import counted

FLAG = "contended"
MACHINE_FIELD = "machine"
# Others' share of the worker's cores at or above which a shape counts as contended (docs/machine-state.md
# has the calibration): a quiet 2-core VM's background reads ~0.05 over seconds; one busy-loop neighbour
# beside a 2-thread sweep takes about a third of the cores (fair share: 1 of 3 runnable threads), so 0.33;
# 0.10 sits between them, and a neighbour using a tenth of the cores already moves a CPU GEMM's time.
CONTENDED_SHARE = 0.10
# A GPU shape is contended when other compute processes used at least this share of the SM time.
GPU_CONTENDED_UTIL = 0.10
# Shorter windows hold too few clock ticks (10 ms each) for a share: read, never flagged.
MIN_WINDOW_S = 0.2


def contention_share(reading: Mapping[str, Any]) -> float | None:
    """The measured share of the device others took during one reading, or None when not observable.

    CPU: others' CPU time plus steal over the worker's cores; GPU: the larger of
    that and the other compute processes' SM utilisation (0-1).
    """
    parts = []
    if reading.get("other_share") is not None:
        parts.append(float(reading["other_share"]) + float(reading.get("steal_share") or 0.0))
    gpu = reading.get("gpu") or {}
    if gpu.get("other_sm_util") is not None:
        parts.append(float(gpu["other_sm_util"]))
    return max(parts) if parts else None


def is_contended(reading: Mapping[str, Any], threshold: float = CONTENDED_SHARE) -> bool:
    """Whether a reading shows contention: a share at or above ``threshold`` over a long enough window.

    A GPU with other compute processes whose utilisation NVML cannot report
    counts as contended: the neighbour is there and its load unknown.
    """
    gpu = reading.get("gpu") or {}
    if gpu.get("other_processes") and gpu.get("other_sm_util") is None:
        return True
    if gpu.get("other_sm_util") is not None and float(gpu["other_sm_util"]) >= GPU_CONTENDED_UTIL:
        return True
    if float(reading.get("window_s") or 0.0) < MIN_WINDOW_S:
        return False
    share = reading.get("other_share")
    return share is not None and float(share) + float(reading.get("steal_share") or 0.0) >= threshold


def flag_record(record: Record, reading: Mapping[str, Any], threshold: float = CONTENDED_SHARE) -> Record:
    """``record`` with its machine reading stored and the ``contended`` flag set when the rule says so."""
    extra = {**record.extra, MACHINE_FIELD: dict(reading)}
    flags = record.flags + ((FLAG,) if is_contended(reading, threshold) and FLAG not in record.flags else ())
    return replace(record, extra=extra, flags=flags)


def is_flagged(record: Record) -> bool:
    return FLAG in record.flags


def _weighted_share(readings: Sequence[Mapping[str, Any]]) -> float | None:
    """Others' share over several readings, weighted by their windows."""
    num = den = 0.0
    for r in readings:
        if r.get("other_share") is None or not r.get("window_s"):
            continue
        num += (float(r["other_share"]) + float(r.get("steal_share") or 0.0)) * float(r["window_s"])
        den += float(r["window_s"])
    return num / den if den > 0 else None


def _clock_of(record: Record) -> float | None:
    clock = (record.extra.get("telemetry") or {}).get("sm_clock_mhz") or {}
    return clock.get("median")


def pass_summaries(records: Iterable[Record]) -> list[dict[str, Any]]:
    """Per pass: records, how many were contended, others' share (time-weighted and worst), GPU clock.

    A pass is ``contended`` when any of its records is.
    """
    by_pass: dict[int, list[Record]] = {}
    for r in records:
        by_pass.setdefault(r.run_pass, []).append(r)
    out = []
    for index in sorted(by_pass):
        rs = by_pass[index]
        readings = [r.extra[MACHINE_FIELD] for r in rs if isinstance(r.extra.get(MACHINE_FIELD), Mapping)]
        shares = [s for s in (contention_share(x) for x in readings) if s is not None]
        flagged = sum(is_flagged(r) for r in rs)
        row: dict[str, Any] = {"pass": index, "records": len(rs), "observed": len(readings),
                               "contended_records": flagged, "contended": flagged > 0,
                               "other_share": _weighted_share(readings), "max_share": max(shares, default=None)}
        loads = [x["load1"] for x in readings if x.get("load1") is not None]
        if loads:
            row["max_load1"] = max(loads)
        clocks = [c for c in (_clock_of(r) for r in rs) if c is not None]
        if clocks:
            row["sm_clock_mhz_median"] = statistics.median(clocks)
        throttled = sum("throttled" in r.flags for r in rs)
        if throttled:
            row["throttled_records"] = throttled
        out.append(row)
    return out


def flagged_passes(sweep: Sweep) -> list[int]:
    """The passes of ``sweep`` with at least one contended record."""
    return sorted({r.run_pass for r in sweep.records if is_flagged(r)})


def flagged_summary(records: Sequence[Record]) -> tuple[int, tuple[int, ...], float]:
    """Of ``records``: how many are contended, in which passes (sorted), and the largest share others took."""
    flagged = [r for r in records if is_flagged(r)]
    share = max((contention_share(r.extra[MACHINE_FIELD]) or 0.0 for r in flagged
                 if isinstance(r.extra.get(MACHINE_FIELD), Mapping)), default=0.0)
    return len(flagged), tuple(sorted({r.run_pass for r in flagged})), share


def contention_part(label: str, flagged: int, records: int, passes: int, share: float) -> str:
    """One sweep's clause of :func:`contention_note`."""
    return (f"{label}: {flagged} of {counted(records, 'record')} in {counted(passes, 'pass', 'passes')} "
            f"(others took up to {share:.0%} of the device)")


def contention_line(parts: Sequence[str], excluded: bool = False) -> str | None:
    """The note of :func:`contention_note` from its sweeps' clauses (None without any)."""
    if not parts:
        return None
    how = "left out (--exclude-contended)" if excluded else "kept; --exclude-contended leaves them out"
    return f"measured under contention: {'; '.join(parts)}; {how}"


def contention_note(sweeps: Sequence[Sweep], excluded: bool = False) -> str | None:
    """One line for compare/fit/report/figures: how many records were measured under contention."""
    parts = []
    for s in sweeps:
        n, passes, share = flagged_summary(s.records)
        if n:
            parts.append(contention_part(s.label, n, len(s.records), len(passes), share))
    return contention_line(parts, excluded)


def exclude_contended(sweeps: Sequence[Sweep]) -> tuple[list[Sweep], int]:
    """The sweeps without their contended records, and how many records were left out."""
    out, dropped = [], 0
    for s in sweeps:
        keep = [r for r in s.records if not is_flagged(r)]
        dropped += len(s.records) - len(keep)
        out.append(s.with_records(keep) if len(keep) != len(s.records) else s)
    return out, dropped


def _side(sweeps: Sequence[Sweep], label: str) -> tuple[int, int, float]:
    """(flagged, records, worst share) of the sweeps labelled ``label`` (a ``label/dtype/mode`` key works too)."""
    name = label.split("/")[0]
    rs = [r for s in sweeps if s.label == name for r in s.records]
    flagged = [r for r in rs if is_flagged(r)]
    worst = max((contention_share(r.extra[MACHINE_FIELD]) or 0.0 for r in flagged
                 if isinstance(r.extra.get(MACHINE_FIELD), Mapping)), default=0.0)
    return len(flagged), len(rs), worst


def contention_reason(sweeps: Sequence[Sweep], a: str, b: str) -> str | None:
    """A sentence naming contention as a reason for what a comparison of ``a`` and ``b`` sees, or None.

    None when neither side has contended records (or the labels are not found).
    """
    fa, na, wa = _side(sweeps, a)
    fb, nb, wb = _side(sweeps, b)
    if not (fa or fb):
        return None
    if fa and fb:
        return (f"both were measured partly under contention ({a}: {fa} of {counted(na, 'record')}, "
                f"others up to {wa:.0%}; "
                f"{b}: {fb} of {nb}, up to {wb:.0%}): differences and ambiguity here may come from the machines' "
                "load, not the devices; compare again with --exclude-contended or on quiet machines")
    busy, n, total, worst, quiet = (a, fa, na, wa, b) if fa else (b, fb, nb, wb, a)
    return (f"{busy} was measured under contention in {n} of {counted(total, 'record')} (other processes took up to "
            f"{worst:.0%} of the device) and {quiet} in none: contention is a likely reason for what this "
            f"comparison sees; compare again with --exclude-contended or rerun {busy} on a quiet machine")
