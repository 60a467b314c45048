"""Compare two series along FLOPs (:func:`compare_series`): data verdicts, fit crossovers and their agreement."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from mfu_sweep.analysis.fits.fit import RooflineFit, fit_series, why_unfittable
from mfu_sweep.analysis.ground.series import Series
from mfu_sweep.analysis.verdicts import segments as band_segments
from mfu_sweep.analysis.verdicts.bands import Band, bands_and_runs, method_edges, run_variance
from mfu_sweep.analysis.verdicts.comparison import (
    METRICS,
    CompareError,
    Comparison,
    NoSharedShapesError,
    format_flops,
)
from mfu_sweep.analysis.verdicts.curves import PassCurve, _Raw, pass_curve
from mfu_sweep.analysis.verdicts.evidence import ONE_PASS_LIMIT, choose_method
from mfu_sweep.analysis.verdicts.fit_crossings import fit_crossovers, merge, supported, unsupported_note
from mfu_sweep.analysis.verdicts.margin import DEFAULT_MARGIN, VerdictSettings
from mfu_sweep.analysis.verdicts.matching import Matching, left_out_in, match_shapes, measured_in, terms_of
from mfu_sweep.analysis.verdicts.timing import band_calibration, pick_reference, timing_json, timing_note
from mfu_sweep.gemm.dtypes import DTYPES, fp8_format
from mfu_sweep.util.text import counted

Refs = tuple[Mapping[Any, Series], Mapping[Any, Series]]


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


def _fits(a: Series, b: Series, fit_a: RooflineFit | None, fit_b: RooflineFit | None, settings: VerdictSettings
          ) -> tuple[RooflineFit | None, RooflineFit | None, list[str]]:
    if not settings.use_fit:
        return None, None, []
    fit_a = fit_a or fit_series(a, seed=settings.seed, n_boot=settings.fit_n_boot)
    fit_b = fit_b or fit_series(b, seed=settings.seed, n_boot=settings.fit_n_boot)
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
        Series from :func:`mfu_sweep.analysis.ground.series.group_series`; ratios are a/b.
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
    settings = VerdictSettings(alpha=alpha, margin=margin, min_run=min_run, seed=seed, use_fit=use_fit,
                               fit_n_boot=fit_n_boot)
    return compare_pair(a, b, metric, settings, fit_a, fit_b, calibration)


def compare_pair(a: Series, b: Series, metric: str, settings: VerdictSettings, fit_a: RooflineFit | None = None,
                 fit_b: RooflineFit | None = None, calibration: Refs | None = None) -> Comparison:
    """:func:`compare_series` with its settings given as one :class:`VerdictSettings` (checked when it was made)."""
    check_pair(a, b, metric)
    alpha, min_run, margin = settings.alpha, settings.min_run, settings.margin
    if min_run < 1 or not 0 < alpha < 1:
        raise CompareError(f"need min_run >= 1 and 0 < alpha < 1 (got {min_run}, {alpha})")
    ca, cb = pass_curve(a, metric), pass_curve(b, metric)
    matching = match_shapes(ca, cb)
    raw = list(matching.points)
    if not raw:  # before the fits: nothing they could add
        raise NoSharedShapesError(f"cannot compare {a.label} with {b.label} ({a.dtype} {a.mode}): "
                                  f"{_nothing_to_test(a, b, ca, cb)}")
    note = timing_note(a, b, calibration is not None)
    notes = _peak_notes(a, b, metric) + _pass_notes(ca, cb) + ([note] if note else []) + _model_notes(matching, a, b)
    fa, fb, fit_notes = _fits(a, b, fit_a, fit_b, settings)
    timing = timing_json(a, b)
    common = dict(a=a.label, b=b.label, dtype=a.dtype, mode=a.mode, metric=metric, alpha=alpha,
                  seed=settings.seed, min_run=min_run, passes=(len(ca.passes), len(cb.passes)), margin=margin)
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
    ordered = any(not s.published and not c.pass_indexed for s, c in ((a, ca), (b, cb)))
    found, runs = bands_and_runs(flops, va, vb, alpha=alpha, calibration=per_band, run_var=run_var, margin=margin,
                                 ordered=ordered and method == "shapes", model=terms_of(raw))
    bands = [_counted(band, raw, ca, cb, matching, metric) for band in found]
    data = band_segments.crossovers(raw, bands, a.label, b.label, method, alpha)
    fitted, fit_only = None, []
    if fa is not None and fb is not None:
        fitted, fit_only = supported(fit_crossovers(fa, fb, a, b, metric, raw[0].flops, raw[-1].flops, alpha),
                                     bands, a.label)
        notes += [unsupported_note(c) for c in fit_only]
    notes += _fp8_notes(a, b)
    if method == "shapes":
        notes.append(one_pass_note(a, b))
    if bands and bands[0].drift > 1:
        notes.append(f"neighbouring shapes' ratios are correlated (drift of a series measured in FLOP order): band "
                     f"tests' variance x{bands[0].drift:.2f}")
    return Comparison(
        points=tuple(band_segments.points(raw, bands, a.label, b.label, method, alpha, run_var)),
        segments=tuple(band_segments.segments(raw, bands, a.label, b.label, method, runs)),
        crossovers=tuple(merge(data, fitted)), notes=tuple(notes + fit_notes), method=method, bands=tuple(bands),
        timing=timing, runs=tuple(runs), fit_only=tuple(fit_only),
        left_out=(len(matching.left_out_a), len(matching.left_out_b)), **common,
    )


def _counted(band: Band, raw: Sequence[_Raw], ca: PassCurve, cb: PassCurve, matching: Matching, metric: str) -> Band:
    """``band`` with the shapes of each side it used, those measured in its range and those left out."""
    pts = raw[band.start:band.stop]
    matched = sum(r.method == "matched" for r in pts)
    lo, hi = band.low_flops, band.high_flops
    return replace(band, matched=matched, metric=metric,
                   shapes_a=matched + sum(r.method == "model" and r.interpolated == cb.label for r in pts),
                   shapes_b=matched + sum(r.method == "model" and r.interpolated == ca.label for r in pts),
                   measured_a=measured_in(ca, lo, hi), measured_b=measured_in(cb, lo, hi),
                   left_out_a=left_out_in(matching.left_out_a, ca.shapes, lo, hi),
                   left_out_b=left_out_in(matching.left_out_b, cb.shapes, lo, hi))


def _model_notes(matching: Matching, a: Series, b: Series) -> list[str]:
    """Say how shapes only one side measured were compared, and how many could not be."""
    model = sum(r.method == "model" for r in matching.points)
    if not model and not (matching.left_out_a or matching.left_out_b):
        return []
    out = []
    if model:
        out.append(f"{counted(model, 'shape')} only one side measured compared with the other side's value "
                   f"predicted at that very shape (a local quadratic in log M, N, K and batch through its nearest "
                   f"measured shapes), the prediction's uncertainty kept; per band, the evidence split says how "
                   f"much of the verdict they carry")
    left = [f"{len(names)} of {s.label}" for names, s in ((matching.left_out_a, a), (matching.left_out_b, b)) if names]
    if left:
        out.append(f"left out: {' and '.join(left)} unmatched shapes that lie outside the other side's measured "
                   f"shapes (batch, aspect or size not covered; a prediction there would extrapolate)")
    return out


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
        why = ("no shape was measured by both and none of either side's shapes lies among the other side's "
               "measured shapes closely enough to predict its value there (batch, aspect and size must be "
               "covered)")
    return (f"{why}; sweep the same shapes on both, e.g. write one side's shapes to a CSV (m,n,k) and run "
            f"mfu-sweep sweep --shape-file on the other")


def _fp8_notes(a: Series, b: Series) -> list[str]:
    """Say when two fp8 series ran different element formats (e4m3fnuz on gfx942 against e4m3fn), or only one side
    records its format: two number formats compared as one dtype. Nothing when neither records one."""
    dt = DTYPES.get(a.dtype)
    if dt is None or not fp8_format(dt.torch_name):
        return []
    unknown = "not recorded"
    formats = [sorted({str(r.extra.get("fp8_format", unknown)) for r in s.records}) for s in (a, b)]
    if formats[0] == formats[1] and (len(formats[0]) == 1 or unknown in formats[0]):
        return []
    said = " and ".join(f"{s.label} {'/'.join(f)}" for s, f in zip((a, b), formats, strict=True))
    return [f"fp8 formats differ: {said}; two number formats (range, rounding and the kernels that serve them "
            f"differ) compared here as one dtype"]


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
