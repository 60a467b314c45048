"""Time to N steps from step files (the measured step), with the GEMM sum beside it "of which GEMMs".

:func:`predict_measured` reads the runs of step files of one model (:mod:`mfu_sweep.analysis.steps.runs`)
into the same :class:`~mfu_sweep.analysis.steps.time_to_n.StepsResult` the GEMM sum gives: first step,
steady step, time to N, break-even N of each graph mode against eager and crossovers in N, with t
intervals over the runs. Where sweeps of the model's GEMM family are given too, their GEMM sum is the
step's breakdown (:class:`OfWhich`): the share of each measured steady step that the GEMMs add up to, beside
the share the profiler measured in the step itself. The GEMM sum is never the step time where the step was
measured::

    from mfu_sweep.analysis.steps.measured import predict_measured
    from mfu_sweep.records.step_files import read_inputs

    sweeps, files = read_inputs(["steps.json", "sweep.json"])
    result = predict_measured(files, sweeps, steps=(1, 100, 10_000))
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mfu_sweep.analysis.steps.costs import StepKey
from mfu_sweep.analysis.steps.counts import StepsError
from mfu_sweep.analysis.steps.draws import DEFAULT_N_BOOT, Interval, StepLine, interval
from mfu_sweep.analysis.steps.gemm_sum import step_gemms
from mfu_sweep.analysis.steps.runs import RunSeries, collect_runs, contention_line
from mfu_sweep.analysis.steps.time_to_n import (
    MEASURED,
    GemmLines,
    Lines,
    StepsResult,
    StepTimes,
    check_settings,
    gemm_lines,
    mark_lines,
)
from mfu_sweep.gemm.shapes import ShapeError
from mfu_sweep.gemm.workloads import resolve_family
from mfu_sweep.records.contention import contention_note, exclude_contended
from mfu_sweep.records.results import Sweep
from mfu_sweep.records.step_files import StepFile


def model_key(f: StepFile) -> tuple[str, str, str]:
    """What must agree for step files to be one result: model spec, step kind and dtype."""
    return f.model.spec, f.step_kind, f.dtype


def one_model(files: Sequence[StepFile]) -> StepFile:
    """The first file, after checking every file measured the same model, step kind and dtype (one line if not)."""
    if not files:
        raise StepsError("no step files given")
    first = files[0]
    for f in files[1:]:
        for what, a, b in zip(("models", "step kinds", "dtypes"), model_key(first), model_key(f), strict=True):
            if a != b:
                raise StepsError(f"{first.source} and {f.source} measured different {what} ({a} and {b}): predict "
                                 "takes one model, step kind and dtype at a time (report takes several)")
    return first


def model_groups(files: Iterable[StepFile]) -> list[list[StepFile]]:
    """The files grouped by model, step kind and dtype, in order of appearance."""
    groups: dict[tuple[str, str, str], list[StepFile]] = {}
    for f in files:
        groups.setdefault(model_key(f), []).append(f)
    return list(groups.values())


@dataclass(frozen=True)
class OfWhich:
    """A measured series beside the GEMM sum of its device: how much of its steady step the GEMMs add up to.

    ``share`` is the GEMM sum's steady step over the measured one (its interval from both sets of draws);
    ``profiler_share`` the mean GEMM share the profiler measured in the steady step (None where not recorded);
    ``gemm_key`` None when no GEMM-sum series of the device matches, and ``note`` says why.
    """

    key: StepKey
    gemm_key: StepKey | None
    measured_steady: Interval | None = None
    gemm_steady: Interval | None = None
    share: Interval | None = None
    profiler_share: float | None = None
    measured_first: Interval | None = None
    gemm_first: Interval | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        def iv(x: Interval | None) -> dict[str, Any] | None:
            return None if x is None else x.to_json()

        return {"series": self.key.to_json(), "gemm_series": None if self.gemm_key is None else self.gemm_key.to_json(),
                "measured_steady_step_s": iv(self.measured_steady), "gemm_sum_steady_step_s": iv(self.gemm_steady),
                "gemm_sum_share": iv(self.share), "profiler_gemm_share": self.profiler_share,
                "measured_first_step_s": iv(self.measured_first), "gemm_sum_first_step_s": iv(self.gemm_first),
                "note": self.note or None}


def _match(key: StepKey, gemm: Mapping[StepKey, StepTimes]) -> StepKey | None:
    """The GEMM-sum series of the same device, dtype and mode: the same cache, else the only one."""
    same = [k for k in gemm if (k.label, k.dtype, k.mode) == (key.label, key.dtype, key.mode)]
    exact = [k for k in same if k.cache == key.cache]
    return (exact or same)[0] if len(exact) == 1 or len(same) == 1 else None


def _of_which(t: StepTimes, line: StepLine | None, gemm: GemmLines, alpha: float) -> OfWhich:
    profiler = t.facts.gemm_share if t.facts is not None else None
    bases = {b.key: b for b in gemm.bases}
    k = _match(t.key, bases)
    if k is None:
        return OfWhich(t.key, None, t.steady, profiler_share=profiler, measured_first=t.first,
                       note=f"no GEMM-sum series of {t.key.label} {t.key.dtype} {t.key.mode} in the sweeps")
    g = gemm.lines.get(k)
    if line is None or g is None:
        why = t.why if line is None else f"the GEMM sum {bases[k].why}"
        return OfWhich(t.key, k, t.steady, profiler_share=profiler, measured_first=t.first, note=why)
    with np.errstate(divide="ignore", invalid="ignore"):  # a steady draw clipped to 0: an infinite share
        draws = np.where(line.steady_draws > 0, g.steady_draws / line.steady_draws, np.inf)
    share = interval(g.steady / line.steady, draws, alpha, line.spread or g.spread)
    differs = t.key.cache and k.cache != t.key.cache
    cache = f"the GEMM sum's sweep ran with a {k.cache or 'unrecorded'} cache" if differs else ""
    return OfWhich(t.key, k, t.steady, interval(g.steady, g.steady_draws, alpha, g.spread), share, profiler,
                   t.first, interval(g.at(1), g.draws_at(1), alpha, g.spread), cache)


def _base(s: RunSeries) -> StepTimes:
    facts = s.facts()
    return StepTimes(s.key, s.state, s.why(), 0, facts.finished, limit_s=s.limit_s, facts=facts)


def _failure_notes(series: Sequence[StepTimes]) -> list[str]:
    """A note per finished series some of whose runs did not finish: its times are over those that did."""
    out = []
    for t in series:
        if t.finished and t.facts is not None and t.facts.not_finished:
            out.append(f"{t.key}: {t.facts.failures_text()}; its times are over the {t.facts.finished} runs that "
                       "finished")
    return out


def _gemm_side(first: StepFile, sweeps: Sequence[Sweep], modes: Collection[str] | None, n_boot: int, seed: int,
               alpha: float) -> tuple[GemmLines | None, str | None]:
    """The GEMM sum of the model's GEMM family on the sweeps, or why there is none (a note)."""
    family = first.model.gemm_family
    if not sweeps:
        return None, None
    if not family:
        return None, (f"the model {first.model.spec} names no GEMM family (an hf: or py: model): the sweeps given are "
                      "not summed beside it")
    try:
        gemms = step_gemms(resolve_family(family), first.step_kind)
        return gemm_lines(sweeps, gemms, first.dtype, modes, n_boot, seed, alpha), None
    except (ShapeError, StepsError) as exc:
        return None, f"no GEMM sum beside the measured step: {exc}"


def predict_measured(files: Sequence[StepFile], sweeps: Sequence[Sweep] = (), *,
                     modes: Collection[str] | None = None, steps: Iterable[int] | None = None,
                     n_boot: int = DEFAULT_N_BOOT, seed: int = 0, alpha: float = 0.05,
                     exclude: bool = False) -> StepsResult:
    """Time to N steps of the model measured in ``files``, with the GEMM sum of ``sweeps`` beside it.

    Parameters
    ----------
    files:
        Step files of one model, step kind and dtype (several devices, or runs of one device in several files).
    sweeps:
        Sweeps of the model's GEMM family (``model.gemm_family``), matched by device label: the breakdown.
    modes:
        Only these modes (None: all).
    steps:
        The step counts N (None: decades up to ten times the largest crossing).
    n_boot, seed, alpha:
        Draws, their seed, and the interval level ``1 - alpha``.
    exclude:
        Leave out runs and sweep records flagged contended (``--exclude-contended``).

    Raises
    ------
    StepsError
        Files of different models, step kinds or dtypes; a bad argument; no run of the modes asked.
    """
    first = one_model(files)
    check_settings(first.dtype, n_boot, alpha)
    series = collect_runs(files, modes, exclude)
    if not series:
        have = ", ".join(sorted({r.mode for f in files for r in f.runs}))
        asked = f" of mode {', '.join(sorted(modes))}" if modes else ""
        raise StepsError(f"no runs{asked} in the step files" + (f" (they hold: {have})" if have else ""))
    lines: Lines = {s.key: line for s in series if (line := s.line(n_boot, seed)) is not None}
    m = mark_lines([_base(s) for s in series], lines, steps, alpha, replicates="runs")
    notes = [*m.notes, *_failure_notes(m.series)]
    notes += [n for n in (contention_line(files, exclude), contention_note(sweeps, exclude)) if n]
    if exclude:
        sweeps = exclude_contended(sweeps)[0]
    gemm, why = _gemm_side(first, sweeps, modes, n_boot, seed, alpha)
    notes += [why] if why else []
    gemm_result, of_which = None, ()
    if gemm is not None:
        g = mark_lines(gemm.bases, gemm.lines, m.steps, alpha)
        gemm_result = StepsResult(gemm.family, first.dtype, g.steps, g.series, g.break_evens, g.crossings,
                                  gemm.payoffs, n_boot, seed, alpha, g.notes, step_kind=first.step_kind)
        of_which = tuple(_of_which(t, lines.get(t.key), gemm, alpha) for t in m.series)
        if all(o.gemm_key is None for o in of_which):
            notes.append(f"the sweeps' devices ({', '.join(sorted({b.key.label for b in gemm.bases}))}) are not the "
                         f"step files' ({', '.join(sorted({f.label for f in files}))}): no GEMM sum is set beside a "
                         "measured step (give them one label: merge --relabel FILE:OLD=NEW)")
    if any(f.synthetic for f in files):
        notes.insert(0, "SYNTHETIC DATA: some step files were generated, not measured")
    model = {"spec": first.model.spec, "source": first.model.source, "params": first.model.params,
             "gemm_family": first.model.gemm_family}
    return StepsResult(first.model.spec, first.dtype, m.steps, m.series, m.break_evens, m.crossings, (), n_boot,
                       seed, alpha, tuple(notes), MEASURED, first.step_kind, model, gemm_result, of_which)
