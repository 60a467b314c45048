"""Refinement rounds as looks: how many were planned, which one the data makes, and the level it tests at.

Every refinement round is a *look*; at most ``looks`` looks are planned before any data and each gets
``alpha / looks`` (Bonferroni over looks). The round a shape was added in travels with its records (family
``refine-<round>-of-<looks>``), so the accounting is the same on machines that never see each other.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.records.results import Sweep

DEFAULT_LOOKS = 8  # looks planned before the first data: the initial sweep + up to 7 refinement rounds

DEFAULT_ALPHA = 0.05

FAMILY_PREFIX = "refine-"

_FAMILY = re.compile(r"^refine-(\d+)(?:-of-(\d+))?$")



class RefineError(ValueError):
    """Nothing can be proposed from the given sweeps; the message says why."""



@dataclass(frozen=True)
class Look:
    """Look ``index`` (1-based) of at most ``looks``; its claims are made at ``alpha / looks``."""

    index: int
    looks: int = DEFAULT_LOOKS
    alpha: float = DEFAULT_ALPHA

    def __post_init__(self) -> None:
        if self.looks < 1 or self.index < 1:
            raise RefineError(f"looks={self.looks} and look index={self.index} must be at least 1")
        if not 0 < self.alpha < 1:
            raise RefineError(f"alpha={self.alpha} must be in (0, 1)")

    @property
    def alpha_look(self) -> float:
        """The level this look's verdicts are tested at (Bonferroni over the planned looks)."""
        return self.alpha / self.looks

    @property
    def spent(self) -> float:
        """Family-wise error spent by the looks so far, this one included."""
        return min(self.index, self.looks) * self.alpha_look

    @property
    def last(self) -> bool:
        """Whether no look is left after this one (no further round may be proposed)."""
        return self.index >= self.looks



def refine_round(family: str) -> int | None:
    """The refinement round a record's family names (``refine-2-of-8`` or ``refine-2`` -> 2), or None."""
    m = _FAMILY.match(family)
    return int(m.group(1)) if m else None



def rounds_done(sweeps: Iterable[Sweep]) -> int:
    """The last refinement round whose shapes are in ``sweeps`` (0: none yet)."""
    found = [refine_round(r.family) for s in sweeps for r in s.records]
    return max((r for r in found if r is not None), default=0)



def planned_looks(sweeps: Iterable[Sweep]) -> set[int]:
    """The looks planned by the rounds already in ``sweeps`` (``refine-<round>-of-<looks>`` families)."""
    return {int(m.group(2)) for s in sweeps for r in s.records if (m := _FAMILY.match(r.family)) and m.group(2)}



def current_look(sweeps: Sequence[Sweep], looks: int | None = None, alpha: float = DEFAULT_ALPHA) -> Look:
    """The look the data of ``sweeps`` makes: one more than the refinement rounds they hold.

    The planned number of looks travels in the records' families; a different
    ``looks`` than the one the earlier rounds planned is refused, since choosing
    it after seeing data would break the error bound.
    """
    recorded = planned_looks(sweeps)
    if len(recorded) > 1:
        raise RefineError(f"the files mix refinement rounds planned with {sorted(recorded)} looks; "
                          f"refine each plan's files apart")
    if recorded and looks is not None and looks not in recorded:
        raise RefineError(f"looks={looks} differs from the {next(iter(recorded))} looks the earlier rounds "
                          f"planned; the plan is fixed before the data, keep it")
    return Look(rounds_done(sweeps) + 1, looks or next(iter(recorded), DEFAULT_LOOKS), alpha)



def file_repeats(sweeps: Iterable[Sweep]) -> int:
    """The passes of the sweeps (``settings.repeats``; 1 for files without it); the largest when they differ."""
    return max((int(s.settings.get("repeats") or 1) for s in sweeps), default=1)



def shape_passes(sweeps: Iterable[Sweep]) -> dict[Shape, int]:
    """Passes each shape has, the fewest over the series that measured it (usable records only)."""
    per: dict[tuple[str, str, str, Shape], set[int]] = {}
    for s in sweeps:
        for r in s.records:
            if r.ok:
                per.setdefault((s.label, r.dtype, r.mode, r.shape), set()).add(r.run_pass)
    out: dict[Shape, int] = {}
    for (*_, shape), seen in per.items():
        out[shape] = min(out.get(shape, len(seen)), len(seen))
    return out

