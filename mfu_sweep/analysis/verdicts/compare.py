"""Compare two series along FLOPs: who leads where, and where the lead changes.

For a pair of series with the same dtype and mode, every shape either series
measured becomes a *point*: the ratio a/b of the metric (MFU, or TFLOP/s with
``metric="tflops"``) at that shape. Shapes both measured are matched exactly;
a shape only one measured is compared against the other series interpolated
in (log FLOPs, log time) between its neighbouring measurements, pass by pass
(``method="interp"``), never extrapolated.

Statistics, per pair (:mod:`mfu_sweep.analysis.verdicts.evidence`):

* the unit of evidence is the run or the shape, never the sample: with both
  series swept in R >= 2 passes (``sweep --repeats``) a point's log ratio is
  tested against the run-to-run variance of its shape, pooled along FLOPs
  (method ``runs``); otherwise (R = 1, files without a pass index, one value
  per shape) against the scatter of shapes around a local trend along FLOPs
  (method ``shapes``), and the output says "run-to-run variation not
  measured". The interval of a point's ratio is the matching t interval; the
  lead test uses a local-linear smooth of the log ratio whose width is chosen
  per point by intersecting confidence intervals;
* a point has a *leader* only if its p-value survives Holm's step-down
  correction over all points of the pair (family-wise error ``alpha``) **and**
  it sits in a run of at least ``min_run`` (default 2) consecutive FLOP
  counts with the same leader (shapes of equal FLOPs are one place on the
  axis, so their order never matters); everything else is *ambiguous*
  (leader None);
* segments are the maximal runs of points with one verdict, tiled along FLOPs;
  a crossover is a change of leader (possibly across an ambiguous gap), placed
  where the measured log ratio crosses zero and bracketed by the last and first
  points of the two leads; segments and crossovers name their method;
* the *summary* (:class:`LeadSummary`) condenses the same per-point verdicts
  into the share of the shared FLOP range, on a log10 scale, where each series
  leads and where neither does, plus the longest lead: readable however many
  short segments a non-square grid produces;
* with fits of both series (:mod:`mfu_sweep.analysis.fits.fit`) the fitted curves give
  crossovers too (``method="fit"``), from a simultaneous bootstrap band; when
  data and fit crossovers disagree beyond their intervals a note says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from itertools import combinations
from typing import Any

from mfu_sweep.analysis.fits.fit import RooflineFit, fit_series
from mfu_sweep.analysis.ground.series import Series, SeriesKey, group_series
from mfu_sweep.analysis.verdicts.comparison import (
    METRICS,
    CompareError,
    ComparePoint,
    Comparison,
    Crossover,
    LeadSummary,
    NoSharedShapesError,
    Segment,
    metric_name,
    point_weights,
)
from mfu_sweep.analysis.verdicts.evidence import holm
from mfu_sweep.analysis.verdicts.margin import VerdictSettings
from mfu_sweep.analysis.verdicts.pair import Refs, check_pair, compare_pair, compare_series
from mfu_sweep.records.results import Sweep
from mfu_sweep.util.text import SI, counted, format_flops

# The public names of comparing, in one place for notebooks and the other stages.
__all__ = [
    "METRICS", "SI", "CompareError", "ComparePoint", "Comparison", "Crossover", "LeadSummary", "NoPeakError",
    "NoSharedShapesError", "Segment", "VerdictSettings",
    "compare_across", "compare_all", "compare_groups", "compare_pairs", "compare_series", "compile_pairs",
    "format_flops", "holm", "layouts_left_out", "metric_name", "parse_selector", "point_weights",
]


def _pairs(series: Mapping[SeriesKey, Series], a: str | None, b: str | None) -> list[tuple[SeriesKey, SeriesKey]]:
    labels = sorted({k.label for k in series})
    for name in (a, b):
        if name is not None and name not in labels:
            raise CompareError(f"no series labelled {name!r} (have: {', '.join(labels)})")
    if a is None and b is not None:
        a, b = b, None
    groups: dict[tuple[str, str], list[SeriesKey]] = {}
    for k in series:
        groups.setdefault((k.dtype, k.mode), []).append(k)
    pairs = []
    for keys in groups.values():
        for x, y in combinations(sorted(keys), 2):
            if a is not None and a not in (x.label, y.label):
                continue
            if b is not None and b not in (x.label, y.label):
                continue
            pairs.append((y, x) if y.label == a else (x, y))
    return sorted(pairs)


def _no_pairs_message(series: Mapping[SeriesKey, Series], a: str | None, b: str | None) -> str:
    have = "; ".join(str(k) for k in series) or "none"
    if a and b:
        da = sorted(f"{k.dtype} {k.mode}" for k in series if k.label == a)
        db = sorted(f"{k.dtype} {k.mode}" for k in series if k.label == b)
        return (f"series {a!r} ({', '.join(da)}) and {b!r} ({', '.join(db)}) share no dtype and mode; "
                f"nothing to compare")
    return f"need two series with the same dtype and mode to compare; have: {have}"


def parse_selector(text: str) -> tuple[str, str | None, str | None]:
    """``LABEL``, ``LABEL/DTYPE`` or ``LABEL/DTYPE/MODE`` -> (label, dtype or None, mode or None)."""
    parts = text.split("/")
    if len(parts) > 3 or not all(parts):
        raise CompareError(f"series selector {text!r} must be LABEL, LABEL/DTYPE or LABEL/DTYPE/MODE")
    label, dtype, mode = (*parts, None, None)[:3]
    return label, dtype, mode


def _select(series: Mapping[SeriesKey, Series], text: str, other: tuple[str | None, str | None]) -> Series:
    label, dtype, mode = parse_selector(text)
    dtype, mode = dtype or other[0], mode or other[1]
    found = [s for k, s in series.items()
             if k.label == label and dtype in (None, k.dtype) and mode in (None, k.mode)]
    if len(found) != 1:
        have = ", ".join(f"{k.label}/{k.dtype}/{k.mode}" for k in series)
        what = "no series" if not found else f"{len(found)} series"
        raise CompareError(f"{what} match {text!r}; be explicit as LABEL/DTYPE/MODE (have: {have})")
    return found[0]


def _as_view(s: Series, differ_dtype: bool, differ_mode: bool, view: tuple[str, str]) -> Series:
    """Relabel one side of a cross comparison: the label names what differs, dtype/mode name the pair."""
    suffix = " ".join(x for x, d in ((s.dtype, differ_dtype), (s.mode, differ_mode)) if d)
    peak = s.peak
    if differ_dtype:
        own = s.peak.for_dtype(s.dtype)
        peak = replace(s.peak, tflops={view[0]: own} if own else {})
    return replace(s, key=SeriesKey(f"{s.label} {suffix}", view[0], view[1]), peak=peak)


def compare_across(sweeps: Iterable[Sweep], a: str, b: str, metric: str = "mfu",
                   settings: VerdictSettings | None = None, *,
                   fits: Mapping[SeriesKey, RooflineFit | None] | None = None, calibration: Refs | None = None,
                   **kw: Any) -> Comparison:
    """Compare two series that differ in dtype and/or mode, e.g. ``cpu/fp32/eager`` vs ``cpu/fp32/compile``.

    The same machinery as :func:`compare_series` answers "where does compiling pay?" or
    "where does bf16 beat fp32?"; MFU compares each side against its own dtype's peak.
    ``fits`` (keyed by the series' own keys) are reused instead of fitting again; ``settings`` (or the keywords
    of :func:`compare_series`: :func:`verdict_settings`) compare them.
    """
    settings = verdict_settings(settings, **kw)
    series = group_series(sweeps)
    sa = _select(series, a, (None, None))
    sb = _select(series, b, (sa.dtype if "/" not in b else None, sa.mode if b.count("/") < 2 else None))
    fit_a, fit_b = (fits.get(sa.key), fits.get(sb.key)) if fits else (None, None)
    differ_dtype, differ_mode = sa.dtype != sb.dtype, sa.mode != sb.mode
    if not (differ_dtype or differ_mode):
        return compare_pair(sa, sb, metric, settings, fit_a, fit_b, calibration)
    view = (f"{sa.dtype}|{sb.dtype}" if differ_dtype else sa.dtype, f"{sa.mode}|{sb.mode}" if differ_mode else sa.mode)
    va, vb = _as_view(sa, differ_dtype, differ_mode, view), _as_view(sb, differ_dtype, differ_mode, view)
    return compare_pair(va, vb, metric, settings, fit_a, fit_b, calibration)


OnError = Callable[[CompareError], None]


def verdict_settings(settings: VerdictSettings | None, **kw: Any) -> VerdictSettings:
    """``settings`` (the defaults when None) with the keywords of a call (``seed``, ``alpha``, ``min_run``,
    ``use_fit``, ``fit_n_boot``, ``margin``) put in: how every pair of a call is compared."""
    return replace(settings or VerdictSettings(), **kw)


def layouts_left_out(series: Mapping[SeriesKey, Series], a: str | None = None, b: str | None = None) -> list[str]:
    """One note per series that no comparison reaches because the other device of a pair measured its dtype and
    mode in other operand layouts only: layouts are compared layout by layout (``eager-tn`` against ``eager-tn``),
    never one against another, so a compare over sources that differ in layouts says what it left out. ``a`` and
    ``b`` keep the pairs with those labels, as :func:`compare_all` does."""
    by: dict[tuple[str, str, str], dict[str, Series]] = {}  # (label, dtype, mode without layout) -> layout -> series
    for key, s in sorted(series.items()):
        if s.records:
            by.setdefault((key.label, key.dtype, s.records[0].mode), {})[s.records[0].shape.layout] = s
    labels = sorted({k.label for k in series})
    out = []
    for la, lb in combinations(labels, 2):
        if any(name is not None and name not in (la, lb) for name in (a, b)):
            continue
        for (label, dtype, mode), mine in by.items():
            theirs = by.get((lb, dtype, mode)) if label == la else None
            if not theirs:
                continue
            for x, y, own, other in ((la, lb, mine, theirs), (lb, la, theirs, mine)):
                out += [f"left out: {x} {dtype} {own[lay].mode} ({counted(own[lay].n_shapes, 'shape')} in layout "
                        f"{lay}): {y} measured {dtype} {mode} in {', '.join(sorted(other))} only; layouts are "
                        f"compared layout by layout, never one against another"
                        for lay in sorted(set(own) - set(other))]
    return out


class NoPeakError(CompareError):
    """MFU was asked of a pair where a series has no peak for its dtype; ``--metric tflops`` compares it."""


def _comparable(a: Series, b: Series, metric: str, on_error: OnError | None, on_skip: OnError | None) -> bool:
    try:
        check_pair(a, b, metric)
    except CompareError as exc:
        if on_skip is not None and metric == "mfu" and None in (a.peak_tflops, b.peak_tflops):
            on_skip(NoPeakError(f"skipped {a.label} vs {b.label} ({a.dtype} {a.mode}): {exc}"))
            return False
        if on_error is None:
            raise
        on_error(exc)
        return False
    return True


def _fits_for(series: Mapping[SeriesKey, Series], keys: Iterable[SeriesKey],
              given: Mapping[SeriesKey, RooflineFit | None], settings: VerdictSettings
              ) -> dict[SeriesKey, RooflineFit | None]:
    """``given``, plus a fit of every series in ``keys`` it lacks (none when ``use_fit=False``)."""
    fits = dict(given)
    if settings.use_fit:
        for key in sorted(set(keys) - set(fits)):
            fits[key] = fit_series(series[key], seed=settings.seed, n_boot=settings.fit_n_boot)
    return fits


def compare_groups(series: Mapping[SeriesKey, Series], metric: str = "mfu", a: str | None = None,
                   b: str | None = None, settings: VerdictSettings | None = None, *,
                   fits: Mapping[SeriesKey, RooflineFit | None] | None = None, on_error: OnError | None = None,
                   on_skip: OnError | None = None, on_no_peak: OnError | None = None,
                   calibration: Refs | None = None, **kw: Any) -> list[Comparison]:
    """:func:`compare_all` for series already grouped (``mfu_sweep.analysis.ground.series.group_series``).

    Pairs come sorted by (first key, second key); ``a`` and ``b`` pick pairs by label
    (``a`` becomes the first series of its pairs). See :func:`compare_all` for
    ``settings``, ``fits``, ``on_error``, ``on_skip`` and the other keyword arguments.
    """
    settings = verdict_settings(settings, **kw)
    on_skip = on_skip or on_no_peak
    pairs = _pairs(series, a, b)
    if not pairs and on_error is None:
        raise CompareError(_no_pairs_message(series, a, b))
    pairs = [(x, y) for x, y in pairs if _comparable(series[x], series[y], metric, on_error, on_skip)]
    fits = _fits_for(series, {k for pair in pairs for k in pair}, fits or {}, settings)
    out: list[Comparison] = []
    apart: list[NoSharedShapesError] = []
    for x, y in pairs:
        try:
            out.append(compare_pair(series[x], series[y], metric, settings, fits.get(x), fits.get(y), calibration))
        except NoSharedShapesError as exc:
            if on_error is not None:
                on_error(exc)
            elif on_skip is not None:
                apart.append(exc)
            else:
                raise
        except CompareError as exc:
            if on_error is None:
                raise
            on_error(exc)
    if apart and not out:  # nothing could be compared: the first pair's reason is the error
        raise apart[0]
    if on_skip is not None:
        for exc in apart:
            on_skip(exc)
    return out


def compare_all(sweeps: Iterable[Sweep], metric: str = "mfu", a: str | None = None, b: str | None = None,
                settings: VerdictSettings | None = None, *, fits: Mapping[SeriesKey, RooflineFit | None] | None = None,
                on_error: OnError | None = None, on_skip: OnError | None = None, on_no_peak: OnError | None = None,
                calibration: Refs | None = None, **kw: Any) -> list[Comparison]:
    """Compare every pair of series with the same dtype and mode (or only the pairs with ``a`` and/or ``b``).

    Parameters
    ----------
    sweeps:
        From ``mfu_sweep.records.results.load_sweeps``.
    metric, a, b:
        ``"mfu"`` or ``"tflops"``; labels that select pairs, or ``LABEL/DTYPE[/MODE]``
        selectors (both needed) to compare across dtypes or modes (:func:`compare_across`).
    fits:
        ``SeriesKey -> fit`` to reuse (e.g. from ``mfu_sweep.analysis.fits.fit.fit_groups``); each
        series not in it is fitted once here (unless ``use_fit=False``).
    on_error:
        Called with the :class:`CompareError` of each pair that cannot be compared
        (e.g. MFU without a peak), which is then skipped, like ``os.walk``'s
        ``onerror``; having no pair at all then gives ``[]``. By default the first
        such error is raised, before anything is fitted. Errors of selectors, and
        of pairs named by ``LABEL/DTYPE[/MODE]``, are always raised.
    on_skip:
        For many files at once: called once for each pair that its own data cannot
        compare, which is then left out while the others are compared: a
        :class:`NoPeakError` (MFU is asked and a series has no peak for its dtype; the
        note names ``--metric tflops``) or a :class:`NoSharedShapesError` (no shape
        either side can be compared at, e.g. a model's layer shapes against square
        ones; the note says what to sweep). When no pair at all could be compared
        for want of shared shapes, the first such error is raised instead (so one
        pair, ``compare --a X --b Y``, stays a one-line error); pairs without a peak
        then give ``[]`` and the caller decides. Other errors still go to
        ``on_error`` or are raised; with ``on_error`` every error goes there.
    on_no_peak:
        The same as ``on_skip`` (the name the ``compare`` command passes).
    settings, **kw:
        How every pair is compared: a :class:`VerdictSettings`, and any of its fields as keywords over it
        (``seed``, ``alpha``, ``min_run``, ``use_fit``, ``fit_n_boot``, ``margin``; see :func:`compare_series`).
    calibration:
        :func:`compare_series`'s, for every pair.

    Raises
    ------
    CompareError
        When a label is unknown, no pair exists, MFU is asked for a series without a peak
        (the last two only without ``on_error``), or a pair shares no shape either side
        can be compared at (without ``on_error``; with ``on_skip`` only when no pair
        could be compared).
    """
    if any(x is not None and "/" in x for x in (a, b)):
        if a is None or b is None:
            raise CompareError("a series selector with /DTYPE or /MODE needs both --a and --b")
        return [compare_across(sweeps, a, b, metric, verdict_settings(settings, **kw), fits=fits,
                               calibration=calibration)]
    return compare_groups(group_series(sweeps), metric, a, b, verdict_settings(settings, **kw), fits=fits,
                          on_error=on_error, on_skip=on_skip, on_no_peak=on_no_peak, calibration=calibration)


def compare_pairs(series: Mapping[SeriesKey, Series], fits: Mapping[SeriesKey, RooflineFit], metric: str = "mfu",
                  **kw: object) -> tuple[list[Comparison], list[str]]:
    """Compare every pair of series with the same dtype and mode, reusing ``fits``.

    ``compare_groups`` (:func:`~mfu_sweep.analysis.verdicts.compare.compare_all` on series
    already grouped) does the work, one dtype and mode at a time: groups in the order of
    their first sorted series key, pairs within a group as ``compare_all`` orders them
    (``compare_all`` itself sorts pairs across groups). Returns the comparisons and, for
    pairs that cannot be compared (e.g. MFU without a peak), a note each.
    """
    groups: dict[tuple[str, str], dict[SeriesKey, Series]] = {}
    for key in sorted(series):
        groups.setdefault((key.dtype, key.mode), {})[key] = series[key]
    comparisons: list[Comparison] = []
    notes: list[str] = []
    for group in groups.values():
        comparisons += compare_groups(group, metric, fits=fits, on_error=lambda exc: notes.append(str(exc)), **kw)
    return comparisons, notes + layouts_left_out(series)


def compile_pairs(sweeps: Sequence[Sweep], series: Mapping[SeriesKey, Series], **kw: object
                  ) -> tuple[dict[SeriesKey, Comparison], list[str]]:
    """Eager vs compile (TFLOP/s, data only) for every device and dtype measured in both modes,
    keyed by the compile series."""
    out, notes = {}, []
    for key in sorted(series):
        compiled = SeriesKey(key.label, key.dtype, "compile")
        if key.mode != "eager" or compiled not in series:
            continue
        base = f"{key.label}/{key.dtype}"
        try:
            out[compiled] = compare_across(sweeps, f"{base}/eager", f"{base}/compile", "tflops", use_fit=False, **kw)
        except CompareError as exc:
            notes.append(str(exc))
    return out, notes
