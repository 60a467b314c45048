"""What a fitted memory roof may be: the plausible bandwidth range and whether the shapes can tell.

A roofline fit explains the time of small GEMMs with two terms, the per-call
overhead ``t0`` and the memory time ``B / W``. Two things make the memory term
untrustworthy, and this module detects both:

* **Confounding by the shapes.** When the swept shapes tie bytes to FLOPs
  (square GEMMs: ``B ~ F**(2/3)``), the memory term is just another smooth
  function of FLOPs; it cannot be told apart from an overhead whose share
  fades gradually with size. :func:`bytes_tied_to_flops` says when that is so.
* **An implausible bandwidth.** A memory roof far below what a plain copy
  achieves on the same device (``mfu-sweep ceilings --into FILE`` stores it
  in the sweep), or above the vendor's spec, is not a memory roof.
  :func:`plausible_bandwidth` gives the range, from the measured copy
  bandwidth and/or the spec, that the fit then uses as bounds.

Rules (the constants below): a memory roof must lie within
``[PLAUSIBLE_COPY_FRACTION x measured copy bandwidth, SPEC_SLACK x spec]``; with
only a spec, the lower end is ``PLAUSIBLE_SPEC_FRACTION x spec``. No module
here imports matplotlib or torch.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from mfu_sweep.records.results import Sweep

# A GEMM streams its operands no slower than this share of a plain copy unless something else limits it.
PLAUSIBLE_COPY_FRACTION = 0.5
# Without a measured copy, this share of the spec bandwidth is the lowest plausible memory roof.
PLAUSIBLE_SPEC_FRACTION = 0.25
# Above the spec by more than this, the operands come from cache, not memory.
SPEC_SLACK = 1.1
# Bytes are "tied" to FLOPs when one power law of FLOPs gives every shape's bytes within this factor.
TIE_FACTOR = 1.15


@dataclass(frozen=True)
class BandwidthRange:
    """Plausible memory-roof bandwidth (TB/s) for one series, and where it comes from.

    ``low_tbs``/``high_tbs`` are None where nothing bounds that side.
    """

    low_tbs: float | None
    high_tbs: float | None
    copy_tbs: float | None
    spec_tbs: float | None

    @property
    def known(self) -> bool:
        return self.low_tbs is not None or self.high_tbs is not None

    def source(self) -> str:
        parts = []
        if self.copy_tbs:
            parts.append(f"measured copy bandwidth {self.copy_tbs * 1e3:.3g} GB/s")
        if self.spec_tbs:
            parts.append(f"spec bandwidth {self.spec_tbs * 1e3:.3g} GB/s")
        return " and ".join(parts) or "nothing"

    def describe(self) -> str:
        lo = f"{self.low_tbs * 1e3:.3g}" if self.low_tbs else "0"
        hi = f"{self.high_tbs * 1e3:.3g}" if self.high_tbs else "inf"
        return f"[{lo}, {hi}] GB/s (from {self.source()})"

    def to_json(self) -> dict[str, float | None]:
        return {"low_tbs": self.low_tbs, "high_tbs": self.high_tbs, "copy_tbs": self.copy_tbs,
                "spec_tbs": self.spec_tbs}


def plausible_bandwidth(spec_tbs: float | None, copy_tbs: float | None) -> BandwidthRange:
    """The plausible range of a memory roof from a spec and/or a measured copy bandwidth (TB/s)."""
    low = PLAUSIBLE_COPY_FRACTION * copy_tbs if copy_tbs else PLAUSIBLE_SPEC_FRACTION * spec_tbs if spec_tbs else None
    top = max(x for x in (spec_tbs, copy_tbs) if x) if (spec_tbs or copy_tbs) else None
    high = SPEC_SLACK * top if top else None
    return BandwidthRange(low_tbs=low, high_tbs=high, copy_tbs=copy_tbs or None, spec_tbs=spec_tbs or None)


def copy_bandwidth_tbs(sweep: Sweep) -> float | None:
    """The copy bandwidth ``mfu-sweep ceilings --into`` stored in ``sweep`` (TB/s), or None."""
    block = sweep.extra.get("ceilings")
    if not isinstance(block, Mapping):
        return None
    gbs = (block.get("memory_bandwidth") or {}).get("gbs")
    return float(gbs) / 1e3 if isinstance(gbs, int | float) and gbs > 0 else None


def measured_copy_bandwidth(sweeps: Iterable[Sweep]) -> dict[str, float]:
    """Label -> measured copy bandwidth (TB/s; the median when several sweeps of a label carry one)."""
    found: dict[str, list[float]] = {}
    for sw in sweeps:
        value = copy_bandwidth_tbs(sw)
        if value is not None:
            found.setdefault(sw.label, []).append(value)
    return {label: statistics.median(v) for label, v in found.items()}


@dataclass(frozen=True)
class Tie:
    """How the shapes relate bytes to FLOPs: ``bytes ~ flops**exponent`` within ``spread`` (a factor)."""

    tied: bool
    exponent: float
    spread: float

    def describe(self) -> str:
        return (f"bytes grow as FLOPs^{self.exponent:.2f} across these shapes (every shape within "
                f"x{self.spread:.2f} of that power law)")


def bytes_tied_to_flops(flops: np.ndarray, nbytes: np.ndarray, factor: float = TIE_FACTOR) -> Tie:
    """Whether one power law of FLOPs gives the bytes of every shape within ``factor``.

    Then the memory time ``B / W`` is a fixed function of FLOPs, and a fit
    cannot tell it from any other smooth change of efficiency with size.
    """
    x, y = np.log(np.asarray(flops, float)), np.log(np.asarray(nbytes, float))
    if len(np.unique(x)) < 2:
        return Tie(tied=False, exponent=math.nan, spread=math.inf)
    slope, icpt = np.polyfit(x, y, 1)
    spread = float(np.exp(np.max(np.abs(y - (slope * x + icpt)))))
    return Tie(tied=spread <= factor, exponent=float(slope), spread=spread)
