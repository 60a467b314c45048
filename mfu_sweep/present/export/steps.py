"""``export --what steps``: time to N steps as tidy CSV rows, or one row per series for Markdown and LaTeX.

Every model family and dtype the records hold (``sweep --shapes llm:...``) is exported. CSV has one row per
step series and N (the N of :func:`~mfu_sweep.analysis.steps.counts.auto_steps`), the first step, steady
step and the series' break-even repeated on each; a series that did not finish has one row, without N.
Display tables have one row per series. Kept apart from :mod:`mfu_sweep.present.export.tables`, which calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mfu_sweep.analysis.steps.costs import StepKey
from mfu_sweep.analysis.steps.crossings import BreakEven, first_n, interval_text, n_text
from mfu_sweep.analysis.steps.draws import Interval
from mfu_sweep.analysis.steps.time_to_n import StepsResult, StepTimes
from mfu_sweep.present.report.steps import ratio_cell, steps_results, time_cell
from mfu_sweep.records.results import Sweep

NO_FAMILY = ("export --what steps needs records of a model family's shapes (mfu-sweep sweep --shapes llm:...); "
             "these files hold none")
STEPS_NOTE = ("95% intervals in brackets: a bootstrap over the passes; GEMMs only (`mfu-sweep docs "
              "time-to-steps` lists what is left out)")


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
