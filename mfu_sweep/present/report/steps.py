"""Time to N steps in the report and on the terminal: tables, sentences and the report's section.

:func:`result_blocks` turns one :class:`~mfu_sweep.analysis.steps.time_to_n.StepsResult` into blocks
(``predict --steps`` prints the same tables as text). The report gets a section when it is given step
files (``mfu-sweep steps``: the measured step, per model, step kind and dtype, with the GEMM sum of the
sweeps beside it "of which GEMMs") or when the sweeps hold a model family's shapes (records whose ``family``
is ``llm:...``, as ``sweep --shapes llm:...`` writes them; a family a step file measured is its breakdown,
never a step time of its own): first step, steady step, time to N, break-evens and crossovers; and when
the sweeps hold both modes of other shapes, how many calls until compile pays per shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mfu_sweep import __version__
from mfu_sweep.analysis.steps.crossings import DevicePayoffs
from mfu_sweep.analysis.steps.draws import Interval
from mfu_sweep.analysis.steps.runs import RunFacts
from mfu_sweep.analysis.steps.time_to_n import STEPS_LEFT_OUT, StepsResult, predict_steps
from mfu_sweep.gemm.workloads import NO_PASS, WorkloadGemm
from mfu_sweep.present.export.steps import (
    duration,
    ratio_cell,
    series_name,
    state_text,
    steps_results,
    time_cell,
)
from mfu_sweep.present.report.blocks import Block, Bullets, FigureRef, Heading, Para, Table
from mfu_sweep.records.results import Sweep
from mfu_sweep.records.step_files import StepFile
from mfu_sweep.util.text import counted

MAX_PAYOFF_ROWS = 30
MAX_COLUMNS = 8  # series up to which the report tabulates time to N (one column each)
MAX_PAYOFF_DEVICES = 4  # devices whose per-shape payoff the report shows when the sweeps hold no model family


def percent_cell(iv: Interval | None) -> str:
    """``"62% [55, 70]"``."""
    if iv is None:
        return "-"
    digits = 0 if iv.value >= 0.1 else 1
    if iv.low is None or iv.high is None:
        return f"{iv.value:.{digits}%}"
    return f"{iv.value:.{digits}%} [{100 * iv.low:.{digits}f}, {100 * iv.high:.{digits}f}]"


def breakdown_cell(facts: RunFacts | None) -> str:
    """The first step as compile + the rest (means over the finished runs), where the runs record compile times."""
    if facts is None or facts.compile_s is None:
        return "-"
    if facts.rest_s is None:  # the stack's parts overlap: show them, never a negative rest
        return "compile parts overlap: " + ", ".join(f"{k.removesuffix('_s')} {duration(v)}"
                                                     for k, v in facts.compile_parts)
    return f"{duration(facts.compile_s)} compile + {duration(facts.rest_s)}"


def series_table(result: StepsResult) -> Table:
    """One row per step series: passes (runs of a measured step), first step, steady step, first/steady, and a
    measured first step's compile share; or why it has none."""
    level = f"{1 - result.alpha:.0%}"
    header = ("series", "runs" if result.measured else "passes", f"first step [{level}]", f"steady step [{level}]",
              "first / steady")
    rows = []
    for t in result.series:
        count = f"{t.facts.finished} of {t.facts.runs}" if t.facts is not None else str(t.passes or "-")
        extra = (breakdown_cell(t.facts),) if result.measured else ()
        if t.finished:
            rows.append((series_name(t.key), count, time_cell(t.first), time_cell(t.steady), ratio_cell(t.ratio),
                         *extra))
        else:
            rows.append((series_name(t.key), count, t.why, "", "", *("",) * len(extra)))
    return Table(header + (("first step: compile + rest",) if result.measured else ()), tuple(rows))


def of_which_table(result: StepsResult) -> Table:
    """A measured step beside the GEMM sum of its device: the GEMMs' share of the steady step, and the profiler's."""
    level = f"{1 - result.alpha:.0%}"
    rows = []
    for o in result.of_which:
        rows.append((series_name(o.key), time_cell(o.measured_steady), time_cell(o.gemm_steady),
                     percent_cell(o.share), "-" if o.profiler_share is None else f"{o.profiler_share:.0%}",
                     time_cell(o.gemm_first), o.note))
    return Table(("series", f"measured steady step [{level}]", f"GEMM sum [{level}]", f"of which GEMMs [{level}]",
                  "GEMM share (profiler)", "GEMMs' first calls", "note"), tuple(rows))


def times_table(result: StepsResult) -> Table:
    """Time to N steps: one row per N, one column per step series (a series that did not finish says so)."""
    cols = list(result.series)
    rows = []
    for i, n in enumerate(result.steps):
        cells = [time_cell(t.times[i][1]) if t.finished else state_text(t) for t in cols]
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


def result_title(result: StepsResult) -> str:
    """``llm:... · fp32 · train step, measured`` (a GEMM sum says ``GEMMs only``)."""
    return (f"{result.family} · {result.dtype} · {result.step_kind} step, "
            f"{'measured' if result.measured else 'GEMMs only'}")


def result_blocks(result: StepsResult, level: int = 3) -> list[Block]:
    """The tables and sentences of one result, under a heading of the given level."""
    blocks: list[Block] = [Heading(level, result_title(result)), series_table(result)]
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
    if result.of_which and result.gemm_sum is not None:
        blocks += [Para(f"Of which GEMMs: the GEMM sum of {result.gemm_sum.family} from the sweeps, beside the "
                        "measured step (its breakdown, not the step time):"), of_which_table(result)]
    for p in result.payoffs:
        blocks += [Para(f"Per shape, {p.compile.label} {p.compile.dtype}"
                        f"{f' ({p.compile.cache} cache)' if p.compile.cache else ''}: calls until compile pays"),
                   payoff_table(p)]
    return blocks


METHOD_NOTE = (
    "First step = the first call of every distinct GEMM + the other calls at their steady time; steady step = "
    "Σ calls × time per call (means over passes); time to N = first step + (N − 1) steady steps. Intervals: a "
    "bootstrap over the passes (t-scaled normal weights per pass, shared by every shape of a pass). GEMMs only.")
MEASURED_NOTE = (
    "Measured: each run a fresh process timing the model's whole step; first step = step 1 (compile included), "
    "steady step = the run's median after warm-up; the values are means over the runs that finished, time to N "
    "= first step + (N − 1) steady steps. Intervals: Student's t over the runs (mean ± t·s/√R).")


def method_note(result: StepsResult) -> str:
    """How the numbers of ``result`` were made, with the interval level, draws and seed."""
    how = MEASURED_NOTE if result.measured else METHOD_NOTE
    return f"{how} {1 - result.alpha:.0%} intervals, {result.n_boot} draws, seed {result.seed}."


# --------------------------------------------------------------------------- the report's section


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


def steps_json(sweeps: Sequence[Sweep], seed: int = 0, step_files: Sequence[StepFile] = (),
               exclude: bool = False) -> list[dict[str, Any]]:
    """What analysis.json carries under ``steps``: one versioned object per model (or family) and dtype."""
    return [r.to_json() for r in steps_results(sweeps, seed, step_files, exclude)]


def steps_section(results: Sequence[StepsResult]) -> list[Block]:
    """The "Time to N steps" section of results: :func:`result_blocks` each, how they were made, what is left out."""
    how = [MEASURED_NOTE if r.measured else METHOD_NOTE for r in results]
    blocks: list[Block] = [Heading(2, "Time to N steps"),
                           Para("The question: for an ablation of N steps, which device and mode finishes first? "
                                + " ".join(dict.fromkeys(how)) + " Figure: time-to-steps, below.")]
    for r in results:
        blocks += result_blocks(r)
    if any(not r.measured for r in results):
        blocks += [Para("Not included in a GEMM sum:"), Bullets(STEPS_LEFT_OUT)]
    return blocks


def steps_blocks(sweeps: Sequence[Sweep], seed: int = 0, step_files: Sequence[StepFile] = (),
                 exclude: bool = False) -> list[Block]:
    """The report's "Time to N steps" section (none when there is no step file, no family and no mode pair).

    With step files or a model family's shapes: :func:`steps_section` (the figure is ``time-to-steps`` among
    the report's figures); else, per device with both modes, the calls until compile pays per swept shape.
    """
    results = steps_results(sweeps, seed, step_files, exclude)
    if results:
        return steps_section(results)
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


def steps_only_blocks(step_files: Sequence[StepFile], figures: Sequence[str], exclude: bool = False) -> list[Block]:
    """The report of step files alone: the time-to-N section, its figure and the files it read."""
    from mfu_sweep.present.report.text import (
        caption,  # here: its theme imports matplotlib, which `predict --steps` avoids
    )

    labels = sorted({f.label for f in step_files})
    blocks: list[Block] = [Heading(1, "mfu-sweep report"),
                           Para(f"{counted(len(step_files), 'step file')} of {counted(len(labels), 'device')} "
                                f"(under Sources, below). Written by mfu-sweep {__version__}.")]
    if any(f.synthetic for f in step_files):
        blocks.append(Para("SYNTHETIC DATA: some step files were generated, not measured.", css="warn"))
    blocks += steps_section(steps_results((), step_files=step_files, exclude=exclude))
    blocks += [Heading(2, "Figures"), *(FigureRef(stem, caption(stem, "mfu")) for stem in figures)]
    return [*blocks, Heading(2, "Sources"),
            Bullets(tuple(f"{f.source or 'data given in code'}: {f.label}" for f in step_files))]
