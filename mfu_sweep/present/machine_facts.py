"""Report rows about the machine a series ran on: the basis of its peak and contention while measuring."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mfu_sweep.records.contention import CONTENDED_SHARE, MACHINE_FIELD, contention_share, flagged_passes, is_flagged
from mfu_sweep.records.results import Record, Sweep
from mfu_sweep.specs import Peak
from mfu_sweep.util.text import counted


def peak_facts(peak: Peak, records: Sequence[Record]) -> list[tuple[str, str]]:
    """("peak basis", why) for a dtype measured against another dtype's peak; ("above peak", how many, why)."""
    rows = [("peak basis", peak.dtype_basis[d]) for d in sorted({r.dtype for r in records}) if d in peak.dtype_basis]
    above = [r for r in records if "above_peak" in r.flags]
    if above:
        reasons = dict.fromkeys(str(r.extra.get("above_peak_reason") or "no reason recorded") for r in above)
        have = "has" if len(above) == 1 else "have"
        rows.append(("above peak", f"{len(above)} of {counted(len(records), 'record')} {have} MFU above 1 "
                     f"(flag above_peak, kept): {'; '.join(reasons)}"))
    return rows


def machine_facts(peak: Peak, records: Sequence[Record]) -> list[tuple[str, str]]:
    """Peak rows (:func:`peak_facts`), ("peak basis", why) when the peak was re-estimated, and
    ("contention", how many records, how busy)."""
    rows = []
    if peak.basis:
        rows.append(("peak basis", peak.basis))
    rows += peak_facts(peak, records)
    observed = [r for r in records if isinstance(r.extra.get(MACHINE_FIELD), Mapping)]
    if not observed:
        return rows
    flagged = [r for r in observed if is_flagged(r)]
    if flagged:
        worst = max(contention_share(r.extra[MACHINE_FIELD]) or 0.0 for r in flagged)
        passes = sorted({r.run_pass for r in flagged})
        rows.append(("contention", f"{len(flagged)} of {counted(len(records), 'record')} flagged contended in "
                     f"{counted(len(passes), 'pass', 'passes')} (others took up to {worst:.0%} of the device; "
                     f"threshold {CONTENDED_SHARE:.0%}); kept, unless --exclude-contended"))
    else:
        rows.append(("contention", f"none of {counted(len(observed), 'observed record')} "
                     f"(threshold {CONTENDED_SHARE:.0%})"))
    return rows


def legend_notes(label: str, peak: Peak, records: Sequence[Record]) -> list[str]:
    """Short legend lines of a series: why its peak was re-estimated, how many points were contended."""
    out = []
    if peak.basis:
        out.append(f"{label}: {peak.basis}")
    flagged = sum(is_flagged(r) for r in records)
    if flagged:
        out.append(f"{label}: {flagged} of {counted(len(records), 'point')} measured under contention")
    return out


def machine_json(sweeps: Sequence[Sweep]) -> list[dict[str, Any]]:
    """Per sweep for analysis.json: the peak's basis and how many records were measured under contention."""
    return [{"label": s.label, "run_id": s.run.get("id"), "peak_basis": s.peak.basis or None,
             "contended_records": sum(is_flagged(r) for r in s.records), "records": len(s.records),
             "contended_passes": flagged_passes(s), "contended_share": CONTENDED_SHARE}
            for s in sweeps]
