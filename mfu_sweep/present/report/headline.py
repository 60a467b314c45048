"""The few lines a command ends (``sweep``) or opens (``compare``) with: the result in one glance.

``sweep`` ends with the best throughput and MFU of each series with the shape that reached it (the
numbers of :mod:`mfu_sweep.analysis.ground.summary`, the same as the report's), the fitted compute ceiling
when the shapes constrain it, and the command to look further::

    from mfu_sweep.present.report.headline import sweep_headline
    from mfu_sweep.records.results import load_sweeps

    print(sweep_headline(load_sweeps(["sweeps/amd-epyc-zen5-cpu.json"]), "sweeps/amd-epyc-zen5-cpu.json"))

``compare`` opens with one sentence per compared pair (:func:`pair_sentences`). Free of matplotlib.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from mfu_sweep.analysis.fits.fit import RooflineFit, fit_groups
from mfu_sweep.analysis.fits.physical import measured_copy_bandwidth
from mfu_sweep.analysis.ground.series import group_series
from mfu_sweep.analysis.ground.summary import SeriesSummary, summarise
from mfu_sweep.present.export.tables import significant
from mfu_sweep.records.results import Sweep
from mfu_sweep.util.text import format_flops

PEAK_WORDS = {"vendor spec": "of the vendor peak", "estimated": "of the estimated peak",
              "override": "of the given peak"}


def best_sentence(summary: SeriesSummary) -> str:
    """E.g. ``"best fp32 eager: 0.188 TFLOP/s, MFU 56.5% of the estimated peak, at 832x832x832 (1.2 GFLOP)"``."""
    best = summary.best
    mfu = f", MFU {best.mfu:.1%} {PEAK_WORDS.get(summary.peak_kind, '')}".rstrip() if best.mfu is not None else \
        f" (no {summary.key.dtype} peak: MFU unknown)"
    passes = f", median of {best.n_passes} passes" if best.n_passes > 1 else ""
    above = (" - above 100%: the peak is too low for this run (records flagged above_peak, kept)"
             if best.mfu is not None and best.mfu > 1 else "")
    return (f"best {summary.key.dtype} {summary.key.mode}: {significant(best.tflops)} TFLOP/s{mfu}, "
            f"at {best.shape} ({format_flops(best.flops)}{passes}){above}")


def ceiling_phrase(fit: RooflineFit | None, unfitted: str | None = None) -> str:
    """The fitted compute ceiling with its interval when the shapes constrain it, else why there is none."""
    if fit is None:
        return f"no roofline fit ({unfitted.split(': ', 1)[-1]})" if unfitted else "no roofline fit"
    if not fit.is_constrained:
        return "no fitted ceiling: " + (fit.unconstrained_reason or "").removeprefix("not constrained: ")
    if not fit.constrained.get("p_tflops", True):
        return "no fitted ceiling: no shape was limited by compute (sweep larger shapes)"
    lo, hi = fit.p_tflops_ci
    value = f"P {significant(fit.p_tflops)} TFLOP/s [{significant(lo)}, {significant(hi)}]"
    share = f", {fit.compute_fraction:.0%} of peak" if fit.compute_fraction else ""
    best_above = fit.best_tflops is not None and fit.peak_tflops is not None and fit.best_tflops > fit.peak_tflops
    above = ("" if not (fit.compute_fraction or 0) > 1 else " (above 100% too)" if best_above
             else " (above 100%: the peak is lower than the fit's P)")
    if fit.is_ceiling:
        return f"fitted ceiling {value}{share}{above}"
    why = []
    if fit.below_measured and fit.best_tflops is not None:
        why.append(f"below the best measured {significant(fit.best_tflops)} TFLOP/s")
    if fit.poor:
        why.append(f"a poor fit (RMS log error {fit.rms_log_residual:.2f}, R² {fit.r2_log:.2f})")
    return f"fitted {value}{share}{above}: not a ceiling, {' and '.join(why)}"


def sweep_headline(sweeps: Sequence[Sweep], output: str | Path, *, n_boot: int = 200, seed: int = 0) -> str:
    """The lines ``sweep`` ends with: per series the best shape and fitted ceiling, then where to look next.

    ``sweeps`` are the sweeps just written to ``output`` (one, or the pieces of a merged file).
    """
    sweeps = list(sweeps)
    series = group_series(sweeps)
    if not series:
        return f"no shape finished: nothing to summarise (see the errors in {output})"
    fits, unfitted = fit_groups(series, n_boot=n_boot, seed=seed, copy_bandwidth=measured_copy_bandwidth(sweeps))
    several = len({k.label for k in series}) > 1
    lines = [(f"{key.label}: " if several else "") + best_sentence(summarise(s)) + "; "
             + ceiling_phrase(fits.get(key), unfitted.get(key)) for key, s in series.items()]
    lines += peak_lines(sweeps)
    path = shlex.quote(str(output))
    lines.append(f"next: mfu-sweep report {path} -o report/  (figures, fits and every shape; "
                 f"mfu-sweep plot {path} for the figures alone)")
    return "\n".join(lines)


def peak_lines(sweeps: Sequence[Sweep]) -> list[str]:
    """Why a peak is not the plain spec or table value (a measured clock or ceiling), once per distinct reason."""
    reasons = dict.fromkeys(s.peak.basis for s in sweeps if s.peak.basis)
    return [f"peak: {reason}" for reason in reasons]


METRIC_WORDS = {"mfu": "by MFU, each against its own peak (not speed)", "tflops": "by TFLOP/s (speed)"}


def pair_key(c: Any) -> tuple[str, str, str, str]:
    """What identifies a compared pair across metrics: labels, dtype and mode."""
    return (c.a, c.b, c.dtype, c.mode)


def pair_sentences(comparisons: Iterable[Any], speed: Iterable[Any] = ()) -> list[str]:
    """One line per compared pair, from each comparison's own summary, naming its metric.

    ``speed`` holds the same pairs compared in TFLOP/s: an MFU line then says both, so "leads"
    by MFU (closer to its own peak) is never read as faster.
    """
    by_pair = {pair_key(s): s for s in speed}
    lines = []
    for c in comparisons:
        line = f"{c.a} vs {c.b} ({c.dtype}, {c.mode}): {METRIC_WORDS.get(c.metric, c.metric)}: {c.summary()}"
        fast = by_pair.get(pair_key(c)) if c.metric == "mfu" else None
        if fast is not None:
            line += f" {METRIC_WORDS['tflops'][0].upper()}{METRIC_WORDS['tflops'][1:]}: {fast.summary()}"
        lines.append(line)
    return lines
