"""Where the leader changes in N: compile against eager per device, every pair of series, and per shape.

Two series finish N steps in ``O_a + N S_a`` and ``O_b + N S_b`` seconds (``O``: what the first step
costs beyond a steady one; ``S``: the steady step). When b's steady step is faster, b finishes first
for every N above the crossing ``N× = (O_b − O_a) / (S_a − S_b)``, from the first whole N above it; when
it is not faster, b never takes the lead for good. The interval of ``N×`` comes from the same draws as
the times (:mod:`mfu_sweep.analysis.steps.draws`): a draw in which b's steady step is not faster says
"never", so an interval may end in never.

The same holds per shape with calls in place of steps: how many calls of one GEMM until its compiled
form, first call included, has cost less than eager.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from mfu_sweep.analysis.steps.costs import StepKey
from mfu_sweep.analysis.steps.draws import Interval, ShapeDraws, StepLine, interval
from mfu_sweep.gemm.shapes import Shape

IV = "interval "  # how a sentence introduces an interval of N: "from N = 48 [interval 39, 62]"


def crossing(a: StepLine, b: StepLine) -> float:
    """``N×`` from which ``b`` finishes first for good: inf when b's steady step is not faster, 0 when b leads
    from the start."""
    if not b.steady < a.steady:
        return math.inf
    return max(0.0, (b.overhead - a.overhead) / (a.steady - b.steady))


def crossing_draws(a: StepLine, b: StepLine) -> np.ndarray:
    """:func:`crossing` in every bootstrap draw."""
    gain = a.steady_draws - b.steady_draws
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.maximum(0.0, (b.overhead_draws - a.overhead_draws) / gain)
    return np.where(gain > 0, n, np.inf)


def first_n(x: float) -> int | None:
    """The first whole N above the crossing ``x`` (1 when b leads from the start); None for never."""
    return None if not math.isfinite(x) else int(math.floor(x)) + 1


def crossing_interval(a: StepLine, b: StepLine, alpha: float) -> Interval:
    """``N×`` of ``b`` over ``a`` with its interval."""
    return interval(crossing(a, b), crossing_draws(a, b), alpha, a.spread or b.spread)


def n_text(x: float | None) -> str:
    """A crossing as the N it gives: ``48``, ``1.2e+06``, ``never``; ``-`` for None."""
    if x is None:
        return "-"
    n = first_n(x)
    return "never" if n is None else (f"{n}" if n < 1e6 else f"{n:.3g}")


def interval_text(iv: Interval, prefix: str = "") -> str:
    """``[39, 62]``, ``[39, never]``, or ``(one pass: no interval)``; ``prefix`` goes inside the brackets."""
    if iv.low is None or iv.high is None:
        return "(one pass: no interval)"
    if n_text(iv.low) == n_text(iv.high):
        return f"[{prefix}{n_text(iv.low)}]"
    return f"[{prefix}{n_text(iv.low)}, {n_text(iv.high)}]"


@dataclass(frozen=True)
class Crossing:
    """Two series whose leader changes: ``before`` finishes first below ``n``, ``after`` from its first whole N."""

    before: StepKey
    after: StepKey
    n: Interval

    def sentence(self) -> str:
        return (f"{self.after} finishes first from N = {n_text(self.n.value)} steps {interval_text(self.n, IV)}; "
                f"below that, {self.before}")

    def to_json(self) -> dict[str, object]:
        return {"before": self.before.to_json(), "after": self.after.to_json(), "crossing": self.n.to_json(),
                "from_n": first_n(self.n.value), "from_n_low": _n_json(self.n.low),
                "from_n_high": _n_json(self.n.high)}


def _n_json(x: float | None) -> int | None:
    return None if x is None else first_n(x)


@dataclass(frozen=True)
class BreakEven:
    """From which N compile mode finishes first on one device (label, dtype, cache).

    ``n`` is the crossing of compile over eager (value inf: never); None when a side did not finish or
    is incomplete, and ``note`` says which. ``eager_step_s`` and ``compile_step_s`` are the steady steps.
    """

    eager: StepKey
    compile: StepKey
    n: Interval | None
    eager_step_s: float | None = None
    compile_step_s: float | None = None
    note: str = ""

    @property
    def device(self) -> str:
        cache = f", {self.compile.cache} cache" if self.compile.cache else ""
        return f"{self.compile.label} {self.compile.dtype}{cache}"

    def sentence(self, most_steps: int | None = None) -> str:
        """One line: from which N compile (or lazy) finishes first, never, or why there is no answer."""
        what = self.compile.mode_name
        if self.n is None:
            return f"{self.device}: {self.note}"
        if not math.isfinite(self.n.value):
            return (f"{self.device}: {what} never finishes first: its steady step "
                    f"({_s(self.compile_step_s)}) is not faster than eager's ({_s(self.eager_step_s)}) "
                    f"{interval_text(self.n, IV)}")
        n = first_n(self.n.value)
        beyond = f", beyond the N asked (at most {most_steps})" if most_steps and n and n > most_steps else ""
        start = "from the first step" if n == 1 else f"from N = {n_text(self.n.value)} steps"
        return f"{self.device}: {what} finishes first {start} {interval_text(self.n, IV)}{beyond}"

    def to_json(self) -> dict[str, object]:
        never = self.n is not None and not math.isfinite(self.n.value)
        return {"eager": self.eager.to_json(), "compile": self.compile.to_json(),
                "crossing": None if self.n is None else self.n.to_json(), "never": never,
                "from_n": None if self.n is None else first_n(self.n.value),
                "from_n_low": None if self.n is None else _n_json(self.n.low),
                "from_n_high": None if self.n is None else _n_json(self.n.high),
                "eager_step_s": self.eager_step_s, "compile_step_s": self.compile_step_s, "note": self.note or None}


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g} s"


GRAPH_MODES = ("compile", "lazy")  # modes whose first step compiles: each has a break-even against eager


def mode_pairs(keys: Sequence[StepKey]) -> list[tuple[StepKey, StepKey]]:
    """(eager, compile) per compile (or lazy) series: the eager series of its label, dtype and cache, else the one
    eager series of its label and dtype (eager compiles nothing, so its cache hardly matters)."""
    eager = [k for k in keys if k.mode == "eager"]
    out = []
    for c in (k for k in keys if k.mode in GRAPH_MODES):
        same = [e for e in eager if (e.label, e.dtype, e.cache) == (c.label, c.dtype, c.cache)]
        other = [e for e in eager if (e.label, e.dtype) == (c.label, c.dtype)]
        if same or len(other) == 1:
            out.append(((same or other)[0], c))
    return out


def pair_crossings(lines: Mapping[StepKey, StepLine], alpha: float,
                   skip: Sequence[tuple[StepKey, StepKey]] = ()) -> tuple[list[Crossing], int]:
    """Every pair of series whose leader changes in N, and how many more cross only at the estimate.

    A pair crosses when the leader at N = 1 is not the one with the faster steady step (point estimates).
    The crossing is claimed when its interval ends short of never: the later leader's steady step is
    faster in 1 − alpha of the draws. Pairs that cross at the estimate only (two steady steps the passes
    do not tell apart put a "crossover" at some large N) are counted, not listed. With one pass there is
    no interval and every crossing at the estimate is listed. Pairs in ``skip`` (those a break-even
    answers) are left out.
    """
    out, unresolved = [], 0
    left_out = {frozenset(p) for p in skip}
    for a, b in combinations(sorted(lines), 2):
        if frozenset((a, b)) in left_out:
            continue
        la, lb = lines[a], lines[b]
        early = a if la.at(1) <= lb.at(1) else b
        late = a if la.steady < lb.steady else b
        if early == late:
            continue
        x = Crossing(early, late, crossing_interval(lines[early], lines[late], alpha))
        if x.n.high is not None and not math.isfinite(x.n.high):
            unresolved += 1
        else:
            out.append(x)
    return sorted(out, key=lambda c: (c.n.value, c.before, c.after)), unresolved


@dataclass(frozen=True)
class ShapePayoff:
    """One GEMM on one device: steady seconds per call in each mode, compile's extra first-call cost, and the
    crossing in calls (value inf: compiling never pays for this shape). ``failed`` names a mode in which the
    shape timed out or failed in some pass: then there is no crossing (``calls`` None)."""

    shape: Shape
    eager_s: float
    compile_s: float
    extra_first_s: float
    calls: Interval | None
    failed: str = ""

    def text(self) -> str:
        """``"19 [6, 125]"``, ``"never [31, never]"`` or ``"compile did not finish"``."""
        if self.calls is None:
            return f"{self.failed} did not finish"
        return f"{n_text(self.calls.value)} {interval_text(self.calls)}"

    def to_json(self) -> dict[str, object]:
        c = self.calls
        return {"shape": self.shape.to_json(), "eager_s": self.eager_s, "compile_s": self.compile_s,
                "extra_first_s": self.extra_first_s, "crossing": None if c is None else c.to_json(),
                "never": c is not None and not math.isfinite(c.value),
                "from_calls": None if c is None else first_n(c.value),
                "from_calls_low": None if c is None else _n_json(c.low),
                "from_calls_high": None if c is None else _n_json(c.high), "did_not_finish": self.failed or None}


def shape_payoffs(eager: ShapeDraws, compiled: ShapeDraws, alpha: float,
                  failed: Mapping[Shape, str] | None = None) -> tuple[ShapePayoff, ...]:
    """Per shape measured in both modes, how many calls until compile pays off, in the workload's order.

    ``failed`` maps a shape to the mode in which it did not finish in some pass: it gets no crossing.
    """
    column = {s: i for i, s in enumerate(eager.shapes)}
    out = []
    for j, shape in enumerate(compiled.shapes):
        if shape not in column:
            continue
        e, c = eager.shape_line(column[shape]), compiled.shape_line(j)
        mode = (failed or {}).get(shape, "")
        calls = None if mode else crossing_interval(e, c, alpha)
        out.append(ShapePayoff(shape, e.steady, c.steady, c.overhead - e.overhead, calls, mode))
    return tuple(out)


@dataclass(frozen=True)
class DevicePayoffs:
    """The per-shape payoff of compile on one device: its eager and compile series and every shape."""

    eager: StepKey
    compile: StepKey
    shapes: tuple[ShapePayoff, ...]

    def to_json(self) -> dict[str, object]:
        return {"eager": self.eager.to_json(), "compile": self.compile.to_json(),
                "shapes": [s.to_json() for s in self.shapes]}
