"""The closing summary of a mamf-finder log, and the summary-only paste people put in posts and PRs.

Every summary form the script has printed (stas00/ml-engineering
``compute/accelerator/benchmarks/mamf-finder.py``):

- 2024-08 .. 2024-12-03 (version 1, one number per shape, no cache flush)::

    The best outcome was 785.5TFLOPS @ 4096x3072x13312 (MxNxK) (tried 3375 shapes)

- 2024-12-23 (cache flush added, max and median)::

    The best outcome was 785.5(max)/765.5(median) TFLOPS @ 4096x3072x13312 (MxNxK) (tried 3375 shapes)

- 2025-01-03 on (benchmark version 2; order max/median/mean until 2025-01-04, then mean/median/max)::

    Tried  3375 shapes => the best outcomes were:
    mean:   761.0 TFLOPS @ 2048x2048x15360 (MxNxK)
    median: 765.5 TFLOPS @ 4096x3072x13312 (MxNxK)
    max:    785.5 TFLOPS @ 4096x3072x13312 (MxNxK)

  followed from 2025-01-18 by ``geomean: ...`` and from 2025-10-21 by
  ``arithmetic mean: ...`` / ``geometric mean: ...`` (kept as notes).

- ``fast-mamf`` branch (benchmark version 4, ``--search auto``)::

    MAMF (max achievable,  boost burst): 1018.3 TFLOPS @ 4096x8192x8192 (MxNxK)  688W 1980MHz
    MSMF (max sustainable, saturated):   901.2 TFLOPS @ 8192x8192x8192 (MxNxK)  700W 1755MHz

Before 2025-01-04 the script multiplied an ``m x n`` by an ``n x k`` matrix, so
the middle number of a printed ``AxBxC`` is the contraction dimension; see
:func:`mamf_finder.shape_of`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mfu_sweep.importers.values import tflops

# a number as printed, sign, exponent, nan and inf included: parsed whole (importers/values.py), never in part
_NUM = r"([-+]?(?:\d[\d.]*(?:e[-+]?\d+)?|\.\d+|nan|inf(?:inity)?))"
_AT_SHAPE = r"@\s*(\d+)\s*x\s*(\d+)\s*x\s*(\d+)"
_TRIED = re.compile(r"(?:Tried|tried)\s+(\d+)\s+shapes")
# "The best outcome was 785.5TFLOPS @ ..." and "... 785.5(max)/765.5(median) TFLOPS @ ..."
_V1 = re.compile(r"best outcome was\s*" + _NUM + r"\s*(?:\(max\)\s*/\s*" + _NUM + r"\s*\(median\))?\s*TFLOPS?"
                 r"\s*(?:" + _AT_SHAPE + r")?", re.I)
_V2 = re.compile(r"^\s*(mean|median|max)\s*:\s*" + _NUM + r"\s*TFLOPS?\s*(?:" + _AT_SHAPE + r")?", re.I)
_V4 = re.compile(r"^\s*(MAMF|MSMF)\b[^:]*:\s*(?:n/a|" + _NUM + r"\s*TFLOPS?\s*(?:" + _AT_SHAPE + r")?"
                 r"(?:[^\d]*?(\d+)W)?(?:[^\d]*?(\d+)MHz)?)", re.I)
_MEANS = re.compile(r"^\s*(geomean|arithmetic mean|geometric mean)\s*:\s*" + _NUM + r"\s*TFLOPS", re.I)


@dataclass(frozen=True)
class Outcome:
    """One "best" line of a summary: which statistic, its TFLOP/s, the printed shape (or None)."""

    stat: str
    tflops: float
    shape: tuple[int, int, int] | None
    line: int
    power_w: float | None = None
    clock_mhz: float | None = None


@dataclass(frozen=True)
class Summary:
    """What a log's summary says; ``form`` is ``v1``, ``v1-median``, ``v2`` or ``v4``."""

    form: str
    outcomes: tuple[Outcome, ...]
    tried: int | None = None
    means: dict[str, float] = field(default_factory=dict)

    @property
    def cache_flushed(self) -> bool:
        return self.form != "v1"

    def headline(self) -> Outcome | None:
        """The one value a summary-only import keeps: median, else MSMF, else max/MAMF."""
        order = ("median", "msmf", "max", "mamf", "mean")
        for stat in order:
            for o in self.outcomes:
                if o.stat == stat:
                    return o
        return None


def _shape(m: re.Match, first: int) -> tuple[int, int, int] | None:
    if m.group(first) is None:
        return None
    return int(m.group(first)), int(m.group(first + 1)), int(m.group(first + 2))


def _value(text: str, line: int) -> float:
    return tflops(text, f"line {line}", "summary TFLOPS")


def parse_summary(lines: list[str]) -> Summary | None:
    """The summary of a log or paste, or None when it has none; a value that is not a finite, non-negative
    number is a :class:`~mfu_sweep.importers.common.SourceError` naming its line (without the file)."""
    outcomes: list[Outcome] = []
    form = None
    tried = None
    means: dict[str, float] = {}
    for i, ln in enumerate(lines, 1):
        if (t := _TRIED.search(ln)) and tried is None:
            tried = int(t.group(1))
        if m := _V1.search(ln):
            form = "v1-median" if m.group(2) else "v1"
            outcomes.append(Outcome("max", _value(m.group(1), i), _shape(m, 3), i))
            if m.group(2):
                outcomes.append(Outcome("median", _value(m.group(2), i), _shape(m, 3), i))
        elif m := _V2.match(ln):
            form = form or "v2"
            outcomes.append(Outcome(m.group(1).lower(), _value(m.group(2), i), _shape(m, 3), i))
        elif m := _V4.match(ln):
            form = "v4"
            if m.group(2) is not None:
                outcomes.append(Outcome(m.group(1).lower(), _value(m.group(2), i), _shape(m, 3), i,
                                        power_w=float(m.group(6)) if m.group(6) else None,
                                        clock_mhz=float(m.group(7)) if m.group(7) else None))
        elif m := _MEANS.match(ln):
            means[m.group(1).lower()] = _value(m.group(2), i)
    if form is None:
        return None
    return Summary(form=form, outcomes=tuple(outcomes), tried=tried, means=means)
