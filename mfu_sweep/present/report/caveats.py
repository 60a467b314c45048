"""What changes the reading of the report's first screen, said on it, before the band strips.

Three things make a strip read wrong when nobody says them (issue 47): records measured under contention
(a lead may be the other machine's load), an MFU above 100% of a peak (the peak is not the device's, so a
lead by MFU is no lead), and devices a leaderboard left out (the strip ranks fewer devices than the
report holds). Each becomes one short clause of one warning line; the notes under the strips say more (a
dtype and mode ranked by TFLOP/s for want of a peak is said on its strip: "by TFLOP/s").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mfu_sweep.analysis.fleet.leaderboard import Leaderboard
from mfu_sweep.analysis.ground.series import SeriesKey
from mfu_sweep.analysis.ground.summary import SeriesSummary
from mfu_sweep.present.group_metric import GroupMetrics
from mfu_sweep.records.contention import flagged_summary
from mfu_sweep.records.results import Sweep
from mfu_sweep.util.text import counted

MOST_NAMED = 3


def _names(items: Sequence[str]) -> str:
    more = f" +{len(items) - MOST_NAMED} more" if len(items) > MOST_NAMED else ""
    return ", ".join(items[:MOST_NAMED]) + more


def contention_clause(sweeps: Sequence[Sweep], excluded: bool = False) -> str | None:
    """E.g. "measured under contention: dev-b 169 of 170 records (a lead here may be the machines' load,
    not the devices; --exclude-contended leaves them out)"; None when no record is contended."""
    parts = []
    for sw in sweeps:
        n = flagged_summary(sw.records)[0]
        if n:
            parts.append(f"{sw.label} {n} of {counted(len(sw.records), 'record')}")
    if not parts:
        return None
    how = "left out (--exclude-contended)" if excluded else "kept; --exclude-contended leaves them out"
    return (f"measured under contention: {_names(parts)} (a lead here may be the machines' load, not the devices; "
            f"{how})")


def above_peak_clause(summaries: Mapping[SeriesKey, SeriesSummary], metrics: GroupMetrics) -> str | None:
    """E.g. "gfx950 fp32 · compile reaches 650% of its peak: that peak is not the device's, so a lead by MFU there
    is no lead (read its TFLOP/s)"; None when no series compared by MFU passes 100%."""
    over = sorted(((s.mfu_high, key) for key, s in summaries.items() if s.points and s.mfu_high is not None
                   and s.mfu_high > 1.0 and metrics.of(key.dtype, key.mode) == "mfu"), key=lambda t: (-t[0], t[1]))
    if not over:
        return None
    named = [f"{k.label} {k.dtype} · {k.mode} {high:.0%}" for high, k in over]
    return (f"MFU above 100% of the peak: {_names(named)}: that peak is not what the device had, so a lead by MFU "
            "there is no lead (read its TFLOP/s)")


def left_out_clause(boards: Sequence[Leaderboard]) -> str | None:
    """The devices some strip's leaderboard could not rank, counted (its notes, listed under the strips, say why)."""
    left = {lbl for board in boards for lbl in board.left_out}
    if not left:
        return None
    return f"{counted(len(left), 'device')} left out of a strip's ranking (notes below say why)"


def caveats(sweeps: Sequence[Sweep], summaries: Mapping[SeriesKey, SeriesSummary], metrics: GroupMetrics,
            boards: Sequence[Leaderboard], excluded: bool = False) -> str | None:
    """The first screen's warning line (None when nothing changes the reading)."""
    clauses = [c for c in (above_peak_clause(summaries, metrics), contention_clause(sweeps, excluded),
                           left_out_clause(boards)) if c]
    return ("Read with care: " + "; ".join(clauses) + ".") if clauses else None
