"""Time to N steps in the report and on the terminal: tables, sentences and the report's section.

:func:`result_blocks` turns one :class:`~mfu_sweep.analysis.steps.time_to_n.StepsResult` into blocks
(``predict --steps`` prints the same tables as text). The report gets a section when the sweeps hold a
model family's shapes (records whose ``family`` is ``llm:...``, as ``sweep --shapes llm:...`` writes
them): first step, steady step, time to N, break-evens and crossovers; and when they hold both modes of
other shapes, how many calls until compile pays per shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mfu_sweep.analysis.steps.costs import StepKey
from mfu_sweep.analysis.steps.counts import one_two_five
from mfu_sweep.analysis.steps.crossings import DevicePayoffs
from mfu_sweep.analysis.steps.draws import Interval
from mfu_sweep.analysis.steps.time_to_n import STEPS_LEFT_OUT, StepsResult, predict_steps
from mfu_sweep.present.blocks import Block, Bullets, Heading, Para, Table
from mfu_sweep.results import Sweep
from mfu_sweep.shapes import ShapeError
from mfu_sweep.workloads import NO_PASS, WorkloadGemm, resolve_family

STEPS_FIGURE = "time-to-steps"
MAX_PAYOFF_ROWS = 30
MAX_COLUMNS = 8  # series up to which the report tabulates time to N (one column each)
MAX_PAYOFF_DEVICES = 4  # devices whose per-shape payoff the report shows when the sweeps hold no model family
UNITS = ((86400.0 * 2, 86400.0, "d"), (7200.0, 3600.0, "h"), (120.0, 60.0, "min"), (1.0, 1.0, "s"),
         (1e-3, 1e-3, "ms"), (0.0, 1e-6, "µs"))


def duration(seconds: float | None) -> str:
    """``"24.1 s"``, ``"3.2 h"``, ``"850 µs"``: three significant digits in the unit the value calls for."""
    if seconds is None:
        return "-"
    scale, name = _unit(seconds)
    return f"{seconds / scale:.3g} {name}"


def _unit(seconds: float) -> tuple[float, str]:
    return next((scale, name) for above, scale, name in UNITS if abs(seconds) >= above)


def time_cell(iv: Interval | None) -> str:
    """``"24.1 s [21, 103]"``: the value and its interval in the value's unit."""
    if iv is None:
        return "-"
    scale, name = _unit(iv.value)
    if iv.low is None or iv.high is None:
        return f"{iv.value / scale:.3g} {name}"
    return f"{iv.value / scale:.3g} {name} [{iv.low / scale:.3g}, {iv.high / scale:.3g}]"


def ratio_cell(iv: Interval | None) -> str:
    """``"55x [48, 61]"``."""
    if iv is None:
        return "-"
    if iv.low is None or iv.high is None:
        return f"{iv.value:#.3g}x"
    return f"{iv.value:#.3g}x [{iv.low:#.3g}, {iv.high:#.3g}]"


def series_name(key: StepKey) -> str:
    """``"h100 compile (cold)"``: the label, mode and cache, without the dtype the section names."""
    return f"{key.label} {key.mode}" + (f" ({key.cache})" if key.cache else "")


def series_table(result: StepsResult) -> Table:
    """One row per step series: passes, first step, steady step, first/steady; or why it has none."""
    rows = []
    for t in result.series:
        if t.finished:
            rows.append((series_name(t.key), str(t.passes), time_cell(t.first), time_cell(t.steady),
                         ratio_cell(t.ratio)))
        else:
            rows.append((series_name(t.key), str(t.passes or "-"), t.why, "", ""))
    level = f"{1 - result.alpha:.0%}"
    return Table(("series", "passes", f"first step [{level}]", f"steady step [{level}]", "first / steady"),
                 tuple(rows))


def times_table(result: StepsResult) -> Table:
    """Time to N steps: one row per N, one column per step series (a series that did not finish says so)."""
    cols = list(result.series)
    rows = []
    for i, n in enumerate(result.steps):
        cells = [time_cell(t.times[i][1]) if t.finished else t.state for t in cols]
        rows.append((f"{n:,}", *cells))
    return Table(("N steps", *(series_name(t.key) for t in cols)), tuple(rows))


def payoff_table(payoffs: DevicePayoffs, limit: int = MAX_PAYOFF_ROWS) -> Table:
    """Per shape: steady time per call in each mode, compile's extra first call, calls until compile pays."""
    rows = [(str(s.shape), duration(s.eager_s), duration(s.compile_s), duration(s.extra_first_s),
             s.text()) for s in payoffs.shapes[:limit]]
    if len(payoffs.shapes) > limit:
        rows.append(("…", "", "", "", f"and {len(payoffs.shapes) - limit} more shapes (predict --steps --json)"))
    return Table(("shape", "eager / call", "compile / call", "compile's extra first call",
                  "calls until compile pays [95%]"), tuple(rows))


def result_blocks(result: StepsResult, level: int = 3) -> list[Block]:
    """The tables and sentences of one result, under a heading of the given level."""
    blocks: list[Block] = [Heading(level, f"{result.family} · {result.dtype}"), series_table(result)]
    if len(result.series) <= MAX_COLUMNS:
        blocks += [Para("Time to N steps (first step + (N − 1) steady steps):"), times_table(result)]
    else:
        blocks.append(Para(f"Time to N steps of the {len(result.series)} series: analysis.json (steps) or "
                           "mfu-sweep export --what steps."))
    if result.notes:
        blocks.append(Bullets(result.notes))
    if result.break_evens:
        blocks += [Para("When compile pays for the whole step (break-even N, compile against eager):"),
                   Bullets(tuple(b.sentence(max(result.steps)) for b in result.break_evens))]
    if result.crossings:
        blocks += [Para("Where the leader changes in N (every pair of series that finished):"),
                   Bullets(tuple(c.sentence() for c in result.crossings))]
    for p in result.payoffs:
        blocks += [Para(f"Per shape, {p.compile.label} {p.compile.dtype}"
                        f"{f' ({p.compile.cache} cache)' if p.compile.cache else ''}: calls until compile pays"),
                   payoff_table(p)]
    return blocks


METHOD_NOTE = (
    "First step = the first call of every distinct GEMM + the other calls at their steady time; steady step = "
    "Σ calls × time per call (means over passes); time to N = first step + (N − 1) steady steps. Intervals: a "
    "bootstrap over the passes (t-scaled normal weights per pass, shared by every shape of a pass). GEMMs only.")


# --------------------------------------------------------------------------- the report's section


def family_workloads(sweeps: Sequence[Sweep]) -> list[tuple[str, str, list[WorkloadGemm]]]:
    """(family, dtype, GEMMs) of every ``llm:`` family and dtype the records hold, in order of appearance."""
    seen: dict[tuple[str, str], None] = {}
    for sw in sweeps:
        for r in sw.records:
            if r.family.startswith("llm:"):
                seen.setdefault((r.family, r.dtype), None)
    out = []
    for family, dtype in seen:
        try:
            out.append((family, dtype, resolve_family(family)))
        except ShapeError:  # a model this version does not know: nothing to sum the shapes into
            continue
    return out


def swept_workloads(sweeps: Sequence[Sweep]) -> list[tuple[str, list[str], list[WorkloadGemm]]]:
    """Per dtype, the labels with both modes and the swept shapes as a workload of one call each."""
    modes: dict[tuple[str, str], set[str]] = {}
    shapes: dict[str, dict[Any, None]] = {}
    for sw in sweeps:
        for r in sw.records:
            modes.setdefault((sw.label, r.dtype), set()).add(r.mode)
            shapes.setdefault(r.dtype, {}).setdefault(r.shape, None)
    both: dict[str, list[str]] = {}
    for (label, dtype), ms in sorted(modes.items()):
        if {"eager", "compile"} <= ms:
            both.setdefault(dtype, []).append(label)
    return [(d, labels, [WorkloadGemm(s, "swept shapes", "swept", NO_PASS, 1) for s in shapes[d]])
            for d, labels in both.items()]


def steps_results(sweeps: Sequence[Sweep], seed: int = 0) -> list[StepsResult]:
    """The time-to-N result of every model family and dtype in the sweeps."""
    return [predict_steps(sweeps, gemms, dtype=dtype, seed=seed) for _, dtype, gemms in family_workloads(sweeps)]


def steps_json(sweeps: Sequence[Sweep], seed: int = 0) -> list[dict[str, Any]]:
    """What analysis.json carries under ``steps``: one versioned object per model family and dtype."""
    return [r.to_json() for r in steps_results(sweeps, seed)]


def steps_blocks(sweeps: Sequence[Sweep], seed: int = 0) -> list[Block]:
    """The report's "Time to N steps" section (none when the sweeps hold no family and no mode pair).

    With a model family's shapes: :func:`result_blocks` per family and dtype (the figure is
    ``time-to-steps`` among the report's figures); else, per device with both modes, the calls until
    compile pays per swept shape.
    """
    results = steps_results(sweeps, seed)
    if results:
        blocks: list[Block] = [Heading(2, "Time to N steps"),
                               Para("The question: for an ablation of N steps, which device and mode finishes first? "
                                    + METHOD_NOTE + " Figure: time-to-steps, below.")]
        for r in results:
            blocks += result_blocks(r)
        return [*blocks, Para("Not included:"), Bullets(STEPS_LEFT_OUT)]
    blocks = []
    for dtype, labels, gemms in swept_workloads(sweeps):
        shown = set(labels[:MAX_PAYOFF_DEVICES])
        for p in predict_steps([sw for sw in sweeps if sw.label in shown], gemms, dtype=dtype, seed=seed).payoffs:
            cache = f" · {p.compile.cache} cache" if p.compile.cache else ""
            blocks += [Heading(3, f"{p.compile.label} · {dtype}{cache}"), payoff_table(p)]
        if len(labels) > len(shown):
            blocks.append(Para(f"{len(labels) - len(shown)} more devices with both modes in {dtype}: a report of "
                               "their files alone shows theirs."))
    if not blocks:
        return []
    return [Heading(2, "Where compile pays, first call included"),
            Para("Per shape, the calls until its compiled form, first call included, has cost less than eager "
                 "(for time to N steps of a model, sweep its shapes: sweep --shapes llm:...)."), *blocks]


def dense_steps(steps: Sequence[int], points: int = 60) -> tuple[int, ...]:
    """Whole N from 1 to the largest of ``steps``, about ``points`` of them evenly spaced on a log axis."""
    top = max(steps)
    grid = {max(1, round(top ** (i / (points - 1)))) for i in range(points)}
    return tuple(sorted(grid | set(one_two_five(1, top))))
