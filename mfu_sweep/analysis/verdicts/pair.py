"""Compare two series along FLOPs (:func:`compare_series`): data verdicts, fit crossovers and their agreement."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from mfu_sweep.analysis.fits.fit import RooflineFit, fit_series, why_unfittable
from mfu_sweep.analysis.series import Series
from mfu_sweep.analysis.verdicts import segments as band_segments
from mfu_sweep.analysis.verdicts.bands import band_verdicts, method_edges, run_variance
from mfu_sweep.analysis.verdicts.comparison import (
    FIT_GRID,
    METRICS,
    CompareError,
    Comparison,
    Crossover,
    format_flops,
)
from mfu_sweep.analysis.verdicts.curves import (
    PassCurve,
    _Raw,
    bytes_along,
    crossing_point,
    lead_runs,
    pass_curve,
)
from mfu_sweep.analysis.verdicts.evidence import ONE_PASS_LIMIT, choose_method
from mfu_sweep.analysis.verdicts.margin import DEFAULT_MARGIN, check_margin
from mfu_sweep.analysis.verdicts.pairing import PAIR_DECADES, measured_in, measured_points
from mfu_sweep.analysis.verdicts.timing import band_calibration, pick_reference, timing_json, timing_note

Refs = tuple[Mapping[Any, Series], Mapping[Any, Series]]


def _fit_crossovers(fa: RooflineFit, fb: RooflineFit, sa: Series, sb: Series, metric: str, lo: float, hi: float,
                    alpha: float) -> list[Crossover]:
    log_f = np.linspace(math.log(lo), math.log(hi), FIT_GRID)
    f, nbytes = np.exp(log_f), bytes_along([sa, sb], log_f)
    # log(MFU_a / MFU_b) = log(t_b / t_a) + log(peak_b / peak_a)
    shift = math.log(sb.peak_tflops) - math.log(sa.peak_tflops) if metric == "mfu" else 0.0
    central = np.log(fb.predict_time(f, nbytes)) - np.log(fa.predict_time(f, nbytes)) + shift
    n = min(len(fa.boot), len(fb.boot))
    if n < 2:
        return []
    draws = (np.log(fb.predict_time_draws(f, nbytes)[:n]) - np.log(fa.predict_time_draws(f, nbytes)[:n]) + shift)
    se = np.maximum(np.std(draws, axis=0, ddof=1), 1e-12)
    crit = float(np.quantile(np.max(np.abs(draws - central) / se, axis=1), 1 - alpha))
    verdict = np.where(central - crit * se > 0, 1, np.where(central + crit * se < 0, -1, 0))
    names = {1: sa.label, -1: sb.label}
    out = []
    leads = lead_runs(verdict)
    for (_, i, s0), (j, _, s1) in zip(leads, leads[1:], strict=False):
        if s0 != s1:
            x = crossing_point(log_f[i:j + 1], central[i:j + 1])
            out.append(Crossover(math.exp(x), float(f[i]), float(f[j]), names[s0], names[s1], "fit"))
    return out


def _agreement(data: Sequence[Crossover], fitted: Sequence[Crossover]) -> list[str]:
    def show(cs: Sequence[Crossover]) -> str:
        return ", ".join(f"{c.from_label}->{c.to_label} at {format_flops(c.flops)}" for c in cs) or "none"

    if [(c.from_label, c.to_label) for c in data] != [(c.from_label, c.to_label) for c in fitted]:
        return [f"data and fit disagree on the crossovers: data finds {show(data)}; fit finds {show(fitted)}"]
    notes = []
    for d, f in zip(data, fitted, strict=True):
        if d.high_flops < f.low_flops or f.high_flops < d.low_flops:
            notes.append(
                f"data and fit disagree on the {d.from_label}->{d.to_label} crossover beyond their intervals: "
                f"data {format_flops(d.flops)} [{format_flops(d.low_flops)}, {format_flops(d.high_flops)}], "
                f"fit {format_flops(f.flops)} [{format_flops(f.low_flops)}, {format_flops(f.high_flops)}]"
            )
    return notes


# -- public API ----------------------------------------------------------------


def check_pair(a: Series, b: Series, metric: str) -> None:
    if metric not in METRICS:
        raise CompareError(f"metric={metric!r} must be one of {', '.join(METRICS)}")
    if (a.dtype, a.mode) != (b.dtype, b.mode):
        raise CompareError(f"cannot compare {a.key} with {b.key}: dtype and mode must match")
    if a.label == b.label:
        raise CompareError(f"cannot compare series {a.key} with itself")
    for s in (a, b):
        if metric == "mfu" and s.peak_tflops is None:
            raise CompareError(f"series {s.key} has no peak for {s.dtype}, so its MFU is undefined; "
                               f"use --metric tflops")


def one_pass_note(a: Series, b: Series) -> str:
    """What a one-pass comparison cannot tell, with advice that fits where the series came from:
    ``--repeats`` for sweeps, none for a published table, which cannot be swept again."""
    published = [s.label for s in (a, b) if s.published]
    if not published:
        return ONE_PASS_LIMIT
    head = ONE_PASS_LIMIT.split("; sweep both")[0]
    names = " and ".join(published)
    source = "come from published tables, which" if len(published) > 1 else "comes from a published table, which"
    return (f"{head}; {names} {source} cannot be swept again, so run-to-run variation stays unmeasured: read a "
            "lead of a few percent as unproven")


def _peak_notes(a: Series, b: Series, metric: str) -> list[str]:
    if metric != "mfu":
        return []
    return ([f"MFU of {s.label} is against an estimated peak" for s in (a, b) if s.peak.estimated]
            + [n for s in (a, b) for n in s.notes])


def _fits(a: Series, b: Series, fit_a: RooflineFit | None, fit_b: RooflineFit | None, use_fit: bool,
          seed: int, fit_n_boot: int) -> tuple[RooflineFit | None, RooflineFit | None, list[str]]:
    if not use_fit:
        return None, None, []
    fit_a = fit_a or fit_series(a, seed=seed, n_boot=fit_n_boot)
    fit_b = fit_b or fit_series(b, seed=seed, n_boot=fit_n_boot)
    notes = [f"no fit crossovers: {why_unfittable(s) or f'no fit for {s.key}'}"
             for s, f in ((a, fit_a), (b, fit_b)) if f is None]
    return fit_a, fit_b, notes


def compare_series(a: Series, b: Series, metric: str = "mfu", *, seed: int = 0,
                   alpha: float = 0.05, min_run: int = 2, fit_a: RooflineFit | None = None,
                   fit_b: RooflineFit | None = None, use_fit: bool = True, fit_n_boot: int = 200,
                   calibration: Refs | None = None, margin: float = DEFAULT_MARGIN) -> Comparison:
    """Compare series ``a`` and ``b`` (same dtype and mode) along FLOPs: one verdict per FLOP band.

    Parameters
    ----------
    a, b:
        Series from :func:`mfu_sweep.analysis.series.group_series`; ratios are a/b.
    metric:
        ``"mfu"`` (needs a peak for both) or ``"tflops"``.
    seed:
        Seed of the fits' bootstrap.
    min_run:
        Kept on the comparison for ``refine``'s leanings (a leaning holds over this many FLOP counts);
        the band verdicts (:mod:`mfu_sweep.analysis.verdicts.bands`) do not use it. At least 1.
    alpha:
        Family-wise error rate of the band verdicts (Holm over bands), and interval level ``1 - alpha``.
    fit_a, fit_b, use_fit, fit_n_boot:
        Fits for the ``"fit"`` crossovers: given, or fitted here (with ``fit_n_boot``
        resamples) unless ``use_fit`` is False.
    calibration:
        Grouped series of two files of one reference chip, the first timed like
        ``a`` and the second like ``b`` (:func:`mfu_sweep.analysis.verdicts.timing.band_calibration`);
        their ratio is divided out of a/b per band, its uncertainty kept.
    margin:
        Practical-equivalence margin (fraction, default 2%): a band is a lead only beyond ``1 +- margin``, "the
        same" within it (:mod:`mfu_sweep.analysis.verdicts.margin`); 0 is the pure difference test.

    Returns
    -------
    Comparison
        Bands, segments, crossovers (data, then fit), the per-shape points and notes.
    """
    check_pair(a, b, metric)
    margin = check_margin(margin)
    if min_run < 1 or not 0 < alpha < 1:
        raise CompareError(f"need min_run >= 1 and 0 < alpha < 1 (got {min_run}, {alpha})")
    ca, cb = pass_curve(a, metric), pass_curve(b, metric)
    raw = measured_points(ca, cb)
    note = timing_note(a, b, calibration is not None)
    notes = _peak_notes(a, b, metric) + _pass_notes(ca, cb) + ([note] if note else [])
    fa, fb, fit_notes = _fits(a, b, fit_a, fit_b, use_fit, seed, fit_n_boot)
    timing = timing_json(a, b)
    common = dict(a=a.label, b=b.label, dtype=a.dtype, mode=a.mode, metric=metric, alpha=alpha,
                  seed=seed, min_run=min_run, passes=(len(ca.passes), len(cb.passes)), margin=margin)
    if not raw:
        raise CompareError(_nothing_to_test(a, b, ca, cb))
    flops = [r.flops for r in raw]
    method = choose_method(np.column_stack([r.values_a for r in raw]), np.column_stack([r.values_b for r in raw]))
    edges = method_edges(flops, method == "runs")
    per_band = None
    if calibration is not None:
        cal = band_calibration(pick_reference(calibration[0], a.dtype, "REF_A"),
                               pick_reference(calibration[1], b.dtype, "REF_B"), edges)
        raw = _calibrated(raw, edges, cal.log_factor)
        per_band, notes = cal.per_band(), [*notes, cal.note()]
        timing = {**timing, "calibration": cal.to_json(edges)}
    va, vb = np.column_stack([r.values_a for r in raw]), np.column_stack([r.values_b for r in raw])
    run_var = run_variance(flops, va, vb, np.array([r.extra_var for r in raw])) if method == "runs" else None
    bands = [replace(band, shapes_a=band.n, shapes_b=band.n,
                     matched=int(sum(r.method == "matched" for r in raw[band.start:band.stop])),
                     measured_a=measured_in(ca, band.low_flops, band.high_flops),
                     measured_b=measured_in(cb, band.low_flops, band.high_flops))
             for band in band_verdicts(flops, va, vb, alpha=alpha, calibration=per_band, run_var=run_var,
                                       margin=margin)]
    data = band_segments.crossovers(raw, bands, a.label, b.label, method, alpha)
    fitted = (_fit_crossovers(fa, fb, a, b, metric, raw[0].flops, raw[-1].flops, alpha)
              if fa is not None and fb is not None else [])
    if fa is not None and fb is not None:
        notes += _agreement(data, fitted)
    if method == "shapes":
        notes.append(one_pass_note(a, b))
    if bands and bands[0].drift > 1:
        notes.append(f"neighbouring shapes' ratios are correlated (drift): band tests' variance x{bands[0].drift:.2f}")
    return Comparison(
        points=tuple(band_segments.points(raw, bands, a.label, b.label, method, alpha, run_var)),
        segments=tuple(band_segments.segments(raw, bands, a.label, b.label, method)),
        crossovers=tuple(data + fitted), notes=tuple(notes + fit_notes), method=method, bands=tuple(bands),
        timing=timing, **common,
    )


def _calibrated(raw: Sequence[_Raw], edges: Sequence[tuple[int, int, float, float]],
                log_factor: Sequence[float]) -> list[_Raw]:
    """``raw`` with a's log values divided by the calibration factor of their band."""
    out = list(raw)
    for (s, e, _, _), f in zip(edges, log_factor, strict=True):
        out[s:e] = [replace(r, values_a=r.values_a - f) for r in raw[s:e]]
    return out


def _nothing_to_test(a: Series, b: Series, ca: PassCurve, cb: PassCurve) -> str:
    """Why a pair has no measured point, and what to sweep."""
    lo_a, hi_a = (math.exp(float(ca.log_f.min())), math.exp(float(ca.log_f.max()))) if len(ca.log_f) else (0, 0)
    lo_b, hi_b = (math.exp(float(cb.log_f.min())), math.exp(float(cb.log_f.max()))) if len(cb.log_f) else (0, 0)
    if hi_a < lo_b or hi_b < lo_a:
        why = (f"their FLOP ranges do not meet ({a.label}: {format_flops(lo_a)}-{format_flops(hi_a)}, "
               f"{b.label}: {format_flops(lo_b)}-{format_flops(hi_b)})")
    else:
        why = (f"no shape was measured by both and no two of their shapes lie within "
               f"{10 ** PAIR_DECADES - 1:.0%} in FLOPs in one half-decade (values read off the other's curve are "
               f"not measurements)")
    return (f"cannot compare {a.label} with {b.label} ({a.dtype} {a.mode}): {why}; sweep the same shapes on "
            f"both, e.g. write one side's shapes to a CSV (m,n,k) and run mfu-sweep sweep --shape-file on the other")


def _pass_notes(ca: PassCurve, cb: PassCurve) -> list[str]:
    """Say which series had no pass index (old files: one run) or a single pass."""
    out = []
    for c in (ca, cb):
        if not c.pass_indexed:
            out.append(f"{c.label}: no pass index in its records (old files, imported data), "
                       f"analysed as one run (R = 1)")
        elif len(c.passes) == 1:
            out.append(f"{c.label}: measured in one pass (R = 1)")
    return out
