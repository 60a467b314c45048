"""The report's numbers per series (summary table cells, series facts, JSON), all from one summary.

Both the summary table and the series section format :func:`mfu_sweep.analysis.ground.summary.summarise`
with the same formatters, and ``analysis.json`` stores the same summary unformatted, so the three
cannot disagree (``tests/test_report_numbers.py`` reads them back and checks).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mfu_sweep.analysis.fits.fit import RooflineFit
from mfu_sweep.analysis.ground.series import Series, SeriesKey
from mfu_sweep.analysis.ground.summary import SeriesSummary, summarise
from mfu_sweep.present.export.tables import significant
from mfu_sweep.present.figures.select import shape_groups, shape_interval_kind
from mfu_sweep.present.figures.theme import INTERVAL_TEXT
from mfu_sweep.util.text import format_flops

PEAK_NOTE = {"estimated": " (estimated peak)", "override": " (override peak)"}


def percent(fraction: float) -> str:
    """MFU as the report writes it: ``0.5649 -> "56.5%"``."""
    return f"{fraction:.1%}"


def summaries(series: Mapping[SeriesKey, Series]) -> dict[SeriesKey, SeriesSummary]:
    """:func:`~mfu_sweep.analysis.ground.summary.summarise` of every series."""
    return {key: summarise(s) for key, s in series.items()}


def mfu_range_cell(summary: SeriesSummary | None) -> str:
    """The summary table's MFU range, e.g. ``"19.9% – 56.5%"`` (``"–"`` without a peak)."""
    if summary is None or summary.mfu_low is None or summary.mfu_high is None:
        return "–"
    return f"{percent(summary.mfu_low)} – {percent(summary.mfu_high)}"


def best_cell(summary: SeriesSummary | None) -> str:
    """The summary table's best TFLOP/s (three significant digits)."""
    return significant(summary.best.tflops) if summary is not None else "–"


def performance_facts(summary: SeriesSummary | None, metric: str) -> list[tuple[str, str]]:
    """MFU range over the shapes, the best shape and the TFLOP/s range, as (name, text) rows.

    One value per shape (:mod:`mfu_sweep.analysis.ground.summary`), the same numbers as the summary table.
    """
    if summary is None:
        return [("performance", "no usable record (every shape failed)")]
    rows = []
    best, worst = summary.best, summary.worst
    if best.mfu is not None and worst.mfu is not None:
        rows.append(("MFU range", f"{percent(worst.mfu)} ({worst.shape}) to {percent(best.mfu)} ({best.shape})"
                                  f"{PEAK_NOTE.get(summary.peak_kind, '')}"))
    elif metric == "mfu":
        rows.append(("MFU range", f"unknown: no {summary.key.dtype} peak"))
    mfu_best = f", MFU {percent(best.mfu)}" if best.mfu is not None else ""
    passes = f", median of {best.n_passes} passes" if best.n_passes > 1 else ""
    rows.append(("best shape", f"{best.shape} ({format_flops(best.flops)}): {significant(best.tflops)} TFLOP/s"
                               f"{mfu_best}{passes}"))
    rows.append(("TFLOP/s range", f"{significant(worst.tflops)} to {significant(best.tflops)}"))
    return rows


def summaries_json(summaries: Mapping[SeriesKey, SeriesSummary]) -> list[dict[str, Any]]:
    """The summaries behind the tables (:func:`summaries`), for ``analysis.json``."""
    return [s.to_json() for _, s in sorted(summaries.items())]


def interval_kinds(series: Iterable[Series]) -> set[str]:
    """What the figures' error bars are over these series (keys of ``INTERVAL_TEXT``)."""
    return {k for s in series for recs in shape_groups(s) if (k := shape_interval_kind(recs))}


def bars_text(kinds: Iterable[str]) -> str:
    """The bars' meaning as the figure legends write it, e.g. ``"95% CI of median / range over passes"``."""
    kinds = sorted(set(kinds))
    return " / ".join(INTERVAL_TEXT[k] for k in kinds) if kinds else INTERVAL_TEXT[None]


def _interval_text(value: float, ci: Sequence[float], unit: str, constrained: bool = True) -> str:
    text = f"{significant(value)} {unit} [{significant(ci[0])}, {significant(ci[1])}]"
    return text if constrained else text + " (not constrained by these shapes: a bound, not a measurement)"


def fit_facts(fit: RooflineFit) -> list[tuple[str, str]]:
    """Fitted roofline parameters with their bootstrap intervals, as (name, text) rows."""
    c = fit.constrained
    level = f"{1 - fit.alpha:.0%}"
    rows = [
        ("model", f"{fit.model}" + (f" (p = {significant(fit.blend_p, 2)})" if fit.blend_p else "")
         + f"; {fit.n_shapes} shapes, {fit.n_samples} samples; intervals: {level} bootstrap ({fit.n_boot} resamples, "
         f"seed {fit.seed})"),
        ("compute ceiling P" if fit.is_ceiling or not fit.is_constrained else "compute term P (not a ceiling)",
         _interval_text(fit.p_tflops, fit.p_tflops_ci, "TFLOP/s", c.get("p_tflops", True))
         + (f"; {fit.compute_fraction:.0%} of peak" if fit.compute_fraction else "")),
        ("bandwidth W", _interval_text(fit.w_tbs, fit.w_tbs_ci, "TB/s", c.get("w_tbs", True))
         + (f"; {fit.bandwidth_fraction:.0%} of spec" if fit.bandwidth_fraction else "")),
        ("overhead t0", _interval_text(fit.t0_s * 1e6, [x * 1e6 for x in fit.t0_s_ci], "µs", c.get("t0_s", True))),
        ("ridge point P/W", f"{significant(fit.p_tflops / fit.w_tbs)} FLOP/byte"),
        ("fit quality", f"RMS log residual {fit.rms_log_residual:.3f}, R² (log time) {fit.r2_log:.4f}"
         + (" - a poor fit (see the note)" if fit.poor else "")),
    ]
    rows += [("note", n) for n in fit.notes]
    return rows


def fitted_p_cell(fit: RooflineFit | None) -> str:
    """Fitted P with its interval; ``*`` and why where ``mfu-sweep fit`` marks it (a poor fit, P below the best
    measured shape, P above the peak): such a P is no ceiling."""
    if fit is None:
        return "not fitted"
    if not fit.is_constrained:
        return "fit not constrained (see notes)"
    if not fit.constrained.get("p_tflops", True):
        return f"{significant(fit.p_tflops)} (not constrained)"
    text = f"{significant(fit.p_tflops)} [{significant(fit.p_tflops_ci[0])}, {significant(fit.p_tflops_ci[1])}]"
    why = fit_marks(fit)
    return f"{text} * {why}" if why else text


def fit_marks(fit: RooflineFit) -> str:
    """Why a fitted P is marked ``*`` (the marks of ``mfu-sweep fit``), in a few words; "" when it is not."""
    why = ["poor fit"] if fit.poor else []
    if fit.below_measured:
        why.append(f"below the best measured {significant(fit.best_tflops)}")
    if (fit.compute_fraction or 0) > 1:
        why.append(f"{fit.compute_fraction:.0%} of the peak")
    return ", ".join(why)
