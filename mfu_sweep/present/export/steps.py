"""``export --what steps``: time to N steps as tidy CSV rows, or one row per series for Markdown and LaTeX.

Every model family and dtype the records hold (``sweep --shapes llm:...``) is exported. CSV has one row per
step series and N (the N of :func:`~mfu_sweep.analysis.steps.counts.auto_steps`), the first step, steady
step and the series' break-even repeated on each; a series that did not finish has one row, without N.
Display tables have one row per series. Kept apart from :mod:`mfu_sweep.present.export.tables`, which calls it.

Also the step series every room of ``present/`` shares, kept here at the bottom of them: which results the
sweeps and step files give (:func:`steps_results`) and their cells (:func:`time_cell`, :func:`ratio_cell`,
:func:`series_name`, ...), which the figure (``figures/steps.py``) and the report's section
(``report/steps.py``) import from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

from mfu_sweep.analysis.steps.costs import DID_NOT_FINISH, StepKey
from mfu_sweep.analysis.steps.counts import one_two_five
from mfu_sweep.analysis.steps.crossings import BreakEven, first_n, interval_text, n_text
from mfu_sweep.analysis.steps.draws import Interval
from mfu_sweep.analysis.steps.measured import model_groups, predict_measured
from mfu_sweep.analysis.steps.time_to_n import StepsResult, StepTimes, predict_steps
from mfu_sweep.gemm.shapes import ShapeError
from mfu_sweep.gemm.workloads import WorkloadGemm, resolve_family
from mfu_sweep.records.results import Sweep
from mfu_sweep.records.step_files import StepFile

NO_FAMILY = ("export --what steps needs records of a model family's shapes (mfu-sweep sweep --shapes llm:...); "
             "these files hold none")
STEPS_NOTE = ("95% intervals in brackets: a bootstrap over the passes; GEMMs only (`mfu-sweep docs "
              "time-to-steps` lists what is left out)")

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


def _g3(x: float) -> str:
    """Three significant digits, trailing zeros kept (``1.00``), no bare point (``153``, not ``153.``)."""
    return f"{x:#.3g}".rstrip(".")


def ratio_cell(iv: Interval | None) -> str:
    """``"55.0x [48.2, 61.0]"``."""
    if iv is None:
        return "-"
    if iv.low is None or iv.high is None:
        return f"{_g3(iv.value)}x"
    return f"{_g3(iv.value)}x [{_g3(iv.low)}, {_g3(iv.high)}]"


def series_name(key: StepKey) -> str:
    """``"h100 compile (cold)"``, ``"h100 compile max-autotune (warm)"``: the label, mode and cache, without the
    dtype the section names."""
    return f"{key.label} {key.mode_name}" + (f" ({key.cache})" if key.cache else "")


def state_text(t: StepTimes) -> str:
    """A series without times in a cell: a measured one whose runs all failed is ``not finished``."""
    return "not finished" if t.facts is not None and t.state == DID_NOT_FINISH else t.state


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


def _measured_families(step_files: Sequence[StepFile]) -> set[tuple[str, str]]:
    """(GEMM family, dtype) of every step file's model, as the sweeps' records name it."""
    out = set()
    for f in step_files:
        if f.model.gemm_family:
            try:
                out.add((resolve_family(f.model.gemm_family)[0].family, f.dtype))
            except ShapeError:
                out.add((f.model.gemm_family, f.dtype))
    return out


def steps_results(sweeps: Sequence[Sweep], seed: int = 0, step_files: Sequence[StepFile] = (),
                  exclude: bool = False, dense: bool = False) -> list[StepsResult]:
    """The time-to-N result of every model, step kind and dtype of the step files (measured, with the sweeps'
    GEMM sum beside), then of every model family and dtype of the sweeps that no step file measured.

    ``exclude`` leaves out contended runs (the sweeps come selected); ``dense``: many N, for a figure.
    """
    makers: list[Callable[[Iterable[int] | None], StepsResult]] = [
        partial(lambda group, steps: predict_measured(group, sweeps, steps=steps, seed=seed, exclude=exclude), g)
        for g in model_groups(step_files)]
    measured = _measured_families(step_files)
    makers += [partial(lambda gemms, dtype, steps: predict_steps(sweeps, gemms, dtype=dtype, seed=seed, steps=steps),
                       gemms, dtype)
               for _, dtype, gemms in family_workloads(sweeps) if (gemms[0].family, dtype) not in measured]
    results = [make(None) for make in makers]
    if dense:
        results = [make(dense_steps(r.steps)) for make, r in zip(makers, results, strict=True)]
    return results


def dense_steps(steps: Sequence[int], points: int = 60) -> tuple[int, ...]:
    """Whole N from 1 to the largest of ``steps``, about ``points`` of them evenly spaced on a log axis."""
    top = max(steps)
    grid = {max(1, round(top ** (i / (points - 1)))) for i in range(points)}
    return tuple(sorted(grid | set(one_two_five(1, top))))



def _results(sweeps: Sequence[Sweep], seed: int) -> list[StepsResult]:
    results = steps_results(sweeps, seed)
    if not results:
        raise ValueError(NO_FAMILY)
    return results


def _iv(prefix: str, iv: Interval | None) -> dict[str, float | None]:
    return {prefix: None if iv is None else iv.value, f"{prefix}_low": None if iv is None else iv.low,
            f"{prefix}_high": None if iv is None else iv.high}


def _break_even_of(result: StepsResult, key: StepKey) -> BreakEven | None:
    return next((b for b in result.break_evens if b.compile == key), None)


def _break_even_cols(b: BreakEven | None) -> dict[str, Any]:
    n = None if b is None else b.n
    return {"compile_from_n": None if n is None else first_n(n.value),
            "compile_from_n_low": None if n is None or n.low is None else first_n(n.low),
            "compile_from_n_high": None if n is None or n.high is None else first_n(n.high),
            "compile_never": None if n is None else first_n(n.value) is None}


def _series_cols(result: StepsResult, t: StepTimes) -> dict[str, Any]:
    return {"family": result.family, "dtype": result.dtype, "label": t.key.label, "mode": t.key.mode,
            "compile_cache": t.key.cache or None, "state": t.state, "why": t.why or None, "passes": t.passes,
            "shapes": t.shapes, **_iv("first_step_s", t.first), **_iv("steady_step_s", t.steady),
            **_iv("first_over_steady", t.ratio), **_break_even_cols(_break_even_of(result, t.key))}


def steps_rows(sweeps: Sequence[Sweep], seed: int = 0) -> list[dict[str, Any]]:
    """Tidy rows: one per step series and N (one without N for a series that has no time)."""
    return result_rows(_results(sweeps, seed))


def result_rows(results: Sequence[StepsResult]) -> list[dict[str, Any]]:
    """Tidy rows of time-to-N results (:func:`~mfu_sweep.analysis.steps.time_to_n.predict_steps`): one per step
    series and N, one without N for a series that has no time."""
    rows = []
    for result in results:
        for t in result.series:
            base = _series_cols(result, t)
            if not t.times:
                rows.append({**base, "n": None, "time_s": None, "time_s_low": None, "time_s_high": None})
            for n, iv in t.times:
                rows.append({**base, "n": n, **_iv("time_s", iv)})
    return rows


def _break_even_cell(b: BreakEven | None) -> str:
    if b is None:
        return "--"
    if b.n is None:
        return "no answer"
    return f"{n_text(b.n.value)} {interval_text(b.n)}"


def steps_display(sweeps: Sequence[Sweep], seed: int = 0
                  ) -> tuple[tuple[str, ...], tuple[tuple[tuple[str, None], ...], ...], str, tuple[str, ...]]:
    """(header, rows, alignment, notes) of the display table, one row per step series; cells are text."""
    rows = []
    for result in _results(sweeps, seed):
        for t in result.series:
            cells = [result.family, t.key.label, t.key.dtype, t.key.mode, t.key.cache or "--"]
            if t.finished:
                cells += [time_cell(t.first), time_cell(t.steady), ratio_cell(t.ratio),
                          _break_even_cell(_break_even_of(result, t.key)) if t.key.mode == "compile" else "--"]
            else:
                cells += [t.why, "", "", ""]
            rows.append(tuple((c, None) for c in cells))
    header = ("Family", "Device", "dtype", "mode", "Cache", "First step", "Steady step", "First/steady",
              "Compile finishes first from N")
    return header, tuple(rows), "lllllrrrr", (STEPS_NOTE,)
