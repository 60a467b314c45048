"""Notes stamped on figures: which of the drawn sweeps are incomplete (interrupted or still running)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from matplotlib.figure import Figure

from mfu_sweep.records.results import Sweep
from mfu_sweep.records.summaries import incomplete_reason
from mfu_sweep.util.text import counted

INCOMPLETE_COLOR = "#b2182b"


def incomplete_note(sweeps: Iterable[Sweep]) -> str | None:
    """``incomplete sweep: LABEL (n of m measurements), ...`` or None when every sweep finished."""
    parts = []
    for s in sweeps:
        if incomplete_reason(s) is None:
            continue
        planned = s.run.get("planned")
        held = (f"{len(s.records)} of {counted(planned, 'measurement')}" if planned is not None
                else counted(len(s.records), "measurement"))
        parts.append(f"{s.label} ({held})")
    return "incomplete sweep: " + ", ".join(dict.fromkeys(parts)) if parts else None


def mark_incomplete(figures: Mapping[str, Figure], sweeps: Iterable[Sweep]) -> None:
    """Write :func:`incomplete_note` in the bottom-left corner of every figure (nothing when all finished)."""
    note = incomplete_note(sweeps)
    if note is None:
        return
    for fig in figures.values():
        fig.text(0.005, 0.005, note, fontsize=6, color=INCOMPLETE_COLOR, ha="left", va="bottom")
