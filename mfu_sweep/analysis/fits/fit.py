"""Roofline-with-overhead fits of time per call against GEMM shape.

Two models of the time of one call with ``F`` FLOPs and ``B`` bytes:

* ``max``:   ``t = t0 + max(F / P, B / W)`` — the textbook roofline plus a
  fixed per-call overhead ``t0``;
* ``pnorm``: ``t = t0 + ((F / P)**p + (B / W)**p)**(1/p)`` — the same ceilings
  with a smooth knee: ``p = 1`` adds compute and memory time (no overlap),
  ``p -> inf`` is the hard ``max`` (perfect overlap).

Both are fitted by robust least squares on the log of the per-shape median
time (``loss="soft_l1"``), so every shape weighs the same whatever its size
and a few outlying shapes do not drag the ceilings. ``model="auto"``
(default) fits both and keeps ``pnorm`` only when its extra parameter pays for
itself by the Bayesian information criterion. Uncertainty comes from a seeded
bootstrap that resamples shapes (each with all its passes and samples) and,
within each shape, its raw samples; with R >= 2 passes (``sweep --repeats``)
every draw also shifts all shapes by a pass-level offset, t-distributed with
the spread of the passes' offsets (:func:`mfu_sweep.analysis.fits.roofline.resamples`).

Solvers: ``solver="batch"`` (default) solves the starting points and all
bootstrap refits at once with the vectorised Levenberg-Marquardt of
:mod:`mfu_sweep.analysis.fits.lsq`, warm-started at the estimate (about 20-50x
cheaper per series); ``solver="scipy"`` refits each with
``scipy.optimize.least_squares``, one by one, on the same resamples (the
reference the tests check the batch solver against). Fits are cached per
series content and options within a process.

The memory term is kept physical (:mod:`mfu_sweep.analysis.fits.physical`): a
measured copy bandwidth or the spec bandwidth bound W, and when the shapes tie
bytes to FLOPs (square families) an uncorroborated W is reported as
confounded with the overhead, not as a roof. This module never imports matplotlib.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from mfu_sweep.analysis.fits import lsq
from mfu_sweep.analysis.fits.batch import Steps, drive, run
from mfu_sweep.analysis.fits.parallel import Progress, map_chunks
from mfu_sweep.analysis.fits.physical import (
    BandwidthRange,
    bytes_tied_to_flops,
    measured_copy_bandwidth,
    plausible_bandwidth,
)
from mfu_sweep.analysis.fits.result import NAMES, RooflineFit
from mfu_sweep.analysis.fits.roofline import (
    LN_TERA,
    LOWER,
    MIN_LEVERAGE,
    PARAMS,
    UPPER,
    Options,
    ShapeData,
    best_fit_steps,
    bic,
    boot_params_steps,
    interval_leverage,
    leverage,
    log_time,
    log_time_jac,
    shape_data,
)
from mfu_sweep.analysis.ground.series import Series, SeriesKey, group_series
from mfu_sweep.analysis.ground.summary import summarise
from mfu_sweep.records.results import Sweep
from mfu_sweep.util.text import counted

__all__ = ["LN_TERA", "LOWER", "MIN_LEVERAGE", "MODELS", "PARAMS", "UPPER", "RooflineFit", "ShapeData", "fit_all",
           "fit_groups", "fit_series", "log_time", "log_time_jac", "shape_data", "why_unfittable"]

MODELS = ("auto", "max", "pnorm")
MIN_SHAPES = 4
SOLVERS = ("batch", "scipy")
# A bounded W within this log distance of a bound "sits at" it.
AT_BOUND = 0.02
CACHE_SIZE = 4096
# shapes fitted in lockstep at a time by fit_groups (64 series of 40 shapes; one series of thousands)
CHUNK_SHAPES = 2560
_CACHE: OrderedDict[str, RooflineFit] = OrderedDict()


def _interval(values: np.ndarray, alpha: float) -> tuple[float, float]:
    lo, hi = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def _natural(x: np.ndarray) -> np.ndarray:
    """(ln t0, ln P, ln W[, ln p]) -> (t0 s, P TFLOP/s, W TB/s[, p])."""
    return np.exp(x)


def why_unfittable(series: Series, min_shapes: int = MIN_SHAPES) -> str | None:
    """Why ``series`` cannot be fitted, or None when it can."""
    n = series.n_shapes
    if n < min_shapes:
        return (f"series {series.key}: only {counted(n, 'distinct shape')} with timings; "
                f"a roofline fit needs at least {min_shapes}")
    return None


def _choose_model(model: str, y: np.ndarray, data: ShapeData, opts: Options) -> Steps[np.ndarray]:
    if model == "max" or (model == "auto" and len(y) < 6):
        return (yield from best_fit_steps(y, data, 3, opts))[0]
    smooth = (yield from best_fit_steps(y, data, 4, opts))[0]
    if model == "pnorm":
        return smooth
    hard = (yield from best_fit_steps(y, data, 3, opts))[0]
    return smooth if bic(smooth, y, data) < bic(hard, y, data) else hard


# docs/statistics-calibration.md: a 2% drift in FLOP order leaves P's 95% interval covering 47% of fits
ONE_PASS_FIT = ("intervals from one pass: an offset of the whole pass or a slow drift during the sweep is not "
                "in them; sweep with --repeats 2 or more to include it")
ONE_PASS_PUBLISHED = ("intervals from one pass of a published table: an offset of the whole pass or a drift during "
                      "the source's run is not in them, and a published table cannot be swept again")


def _one_pass(series: Series, n_passes: int) -> list[str]:
    if n_passes >= 2:
        return []
    return [ONE_PASS_PUBLISHED if series.published else ONE_PASS_FIT]




def _notes(series: Series, constrained: Mapping[str, bool], skip: Iterable[str] = ()) -> list[str]:
    notes = [_unconstrained(name) for name, ok in constrained.items() if not ok and name not in skip]
    if series.peak_tflops is None:
        notes.append(f"no vendor peak for {series.dtype}; fraction of peak unknown")
    elif series.peak.estimated:
        notes.append("vendor peak is an estimate")
    return notes


def _bounded(opts: Options, plausible: BandwidthRange) -> Options:
    lower, upper = opts.lower.copy(), opts.upper.copy()
    if plausible.low_tbs:
        lower[2] = max(lower[2], math.log(plausible.low_tbs))
    if plausible.high_tbs:
        upper[2] = min(upper[2], math.log(plausible.high_tbs))
    return Options(opts.loss, opts.f_scale, opts.solver, lower, upper, opts.kwargs)


def _fit_params(model: str, y: np.ndarray, data: ShapeData, opts: Options, plausible: BandwidthRange
                ) -> Steps[tuple[np.ndarray, Options, float | None]]:
    """The estimate, the options it was found with (bounds), and the free W when it left the plausible range.

    An unconstrained free W outside the range is moved to the measured (else spec) bandwidth
    without a refit when that keeps the fit as good; otherwise the fit is redone within the range.
    """
    free = yield from _choose_model(model, y, data, opts)
    if not plausible.known:
        return free, opts, None
    w_free = math.exp(free[2])
    outside = (plausible.low_tbs is not None and w_free < plausible.low_tbs) or (
        plausible.high_tbs is not None and w_free > plausible.high_tbs)
    active = leverage(free, np.log(data.flops), np.log(data.bytes))["w_tbs"] >= MIN_LEVERAGE
    bounded = _bounded(opts, plausible)
    best = free
    if outside:
        moved = _at_prior(free, y, data, bounded, plausible) if not active else free
        best = moved if moved is not free else (yield from _choose_model(model, y, data, bounded))
    return _at_prior(best, y, data, bounded, plausible), bounded, w_free if outside and active else None


def _robust_cost(x: np.ndarray, y: np.ndarray, data: ShapeData, opts: Options) -> float:
    r = (log_time(x, np.log(data.flops), np.log(data.bytes)) - y) / opts.f_scale
    return float(0.5 * opts.f_scale**2 * np.sum(lsq.rho(r**2, opts.loss)[0]))


def _at_prior(best: np.ndarray, y: np.ndarray, data: ShapeData, opts: Options, plausible: BandwidthRange
              ) -> np.ndarray:
    """Move a W no shape depends on to the measured copy (else spec) bandwidth, when the fit stays as good.

    An unconstrained W is wherever the solver left it; at the plausible value,
    predictions outside the measured shapes use a bandwidth the device has.
    Returns ``best`` itself when nothing moved.
    """
    prior = plausible.copy_tbs or plausible.spec_tbs
    log_f, log_b = np.log(data.flops), np.log(data.bytes)
    if prior is None or leverage(best, log_f, log_b)["w_tbs"] >= MIN_LEVERAGE:
        return best
    moved = best.copy()
    moved[2] = np.clip(math.log(prior), opts.lower[2], opts.upper[2])
    return moved if _robust_cost(moved, y, data, opts) <= _robust_cost(best, y, data, opts) * (1 + 1e-4) else best


def _bandwidth_status(best: np.ndarray, opts: Options, data: ShapeData, lev: Mapping[str, float],
                      plausible: BandwidthRange, w_free: float | None) -> tuple[str, list[str]]:
    """What W is (see :class:`RooflineFit`), and the notes that say why."""
    notes = []
    if w_free:
        notes.append(f"an unbounded fit puts W at {w_free * 1e3:.3g} GB/s, outside the plausible range "
                     f"{plausible.describe()}; W was bounded to that range")
    if lev["w_tbs"] < MIN_LEVERAGE:
        return "not constrained", [*notes, _unconstrained("w_tbs")]
    gbs = math.exp(best[2]) * 1e3
    for side, bound in (("lower", opts.lower[2]), ("upper", opts.upper[2])):
        if plausible.known and abs(best[2] - bound) < AT_BOUND:
            want = "less" if side == "lower" else "more"
            return "at bound", [*notes, f"bandwidth W sits at the {side} end of the plausible range "
                                        f"{plausible.describe()}: the shapes ask for {want}, so W is a bound, "
                                        "not a memory roof"]
    tie = bytes_tied_to_flops(data.flops, data.bytes)
    if tie.tied and not plausible.known:
        return "confounded", [
            f"bandwidth W ({gbs:.3g} GB/s) and overhead t0 are confounded by these shapes: {tie.describe()}, "
            "so a memory term cannot be told from an overhead that fades with size; neither is drawn as a "
            "measurement (store a measured copy bandwidth with `mfu-sweep ceilings --into FILE`, or sweep "
            "shapes of other aspect ratios)"]
    if tie.tied:
        notes.append(f"{tie.describe()}; W ({gbs:.3g} GB/s) lies in the plausible range {plausible.describe()}, "
                     "so it is kept as a roof")
    return "roof", notes


def _unconstrained(name: str) -> str:
    return f"{NAMES[name]} is not constrained by these shapes (no shape where it sets the time)"


def _content_key(series: Series, data: ShapeData, options: Mapping[str, Any]) -> str:
    h = hashlib.blake2b(digest_size=20)
    h.update(json.dumps([str(series.key), series.peak.to_json(), options], sort_keys=True, default=repr).encode())
    h.update(data.flops.tobytes())
    h.update(data.bytes.tobytes())
    for s in data.samples:
        h.update(len(s).to_bytes(8, "little"))
        h.update(s.tobytes())
    for p in data.passes:
        h.update(p.tobytes())
    return h.hexdigest()


def fit_series(series: Series, *, model: str = "auto", n_boot: int = 200, seed: int = 0, alpha: float = 0.05,
               loss: str = "soft_l1", f_scale: float = 0.05, min_shapes: int = MIN_SHAPES,
               copy_bandwidth_tbs: float | None = None, solver: str = "batch", cache: bool = True,
               **kwargs: Any) -> RooflineFit | None:
    """Fit the roofline-with-overhead model to one series.

    Parameters
    ----------
    series:
        From :func:`mfu_sweep.analysis.ground.series.group_series`.
    model:
        ``"auto"`` (default: ``pnorm`` if it wins on BIC, else ``max``), ``"max"`` or ``"pnorm"``.
    n_boot, seed, alpha:
        Bootstrap resamples, their seed, and the interval level ``1 - alpha``.
    loss, f_scale:
        Robust loss and its scale (in log time: 0.05 is about 5%), as scipy defines them.
    min_shapes:
        Fewer distinct shapes than this gives None (see :func:`why_unfittable`).
    copy_bandwidth_tbs:
        Measured copy bandwidth of the device (TB/s; ``mfu-sweep ceilings --into`` stores it,
        :func:`mfu_sweep.analysis.fits.physical.measured_copy_bandwidth` reads it). With it, or with a
        spec bandwidth, W is bounded to the plausible range (:mod:`mfu_sweep.analysis.fits.physical`).
    solver:
        ``"batch"`` (default, vectorised) or ``"scipy"`` (one ``least_squares`` call per start
        and resample; the slow reference).
    cache:
        Reuse a fit of the same series content and options made earlier in this process.
    **kwargs:
        Passed to ``scipy.optimize.least_squares`` (e.g. ``max_nfev``, ``xtol``); giving any
        selects ``solver="scipy"``.

    Returns
    -------
    RooflineFit or None
        None when the series has too few shapes.
    """
    return run(fit_steps(series, model=model, n_boot=n_boot, seed=seed, alpha=alpha, loss=loss, f_scale=f_scale,
                         min_shapes=min_shapes, copy_bandwidth_tbs=copy_bandwidth_tbs, solver=solver, cache=cache,
                         **kwargs))


def fit_steps(series: Series, **kw: Any) -> Steps[RooflineFit | None]:
    """:func:`fit_series` as a fit step (:mod:`mfu_sweep.analysis.fits.batch`): many run in lockstep."""
    return (yield from _keyed_steps(series, **kw))[1]


def _keyed_steps(series: Series, *, model: str = "auto", n_boot: int = 200, seed: int = 0, alpha: float = 0.05,
                 loss: str = "soft_l1", f_scale: float = 0.05, min_shapes: int = MIN_SHAPES,
                 copy_bandwidth_tbs: float | None = None, solver: str = "batch", cache: bool = True,
                 **kwargs: Any) -> Steps[tuple[str, RooflineFit | None]]:
    """The fit and its cache key ("" when not cached)."""
    if model not in MODELS:
        raise ValueError(f"model={model!r} must be one of {', '.join(MODELS)}")
    if n_boot < 1:
        raise ValueError(f"n_boot={n_boot!r} must be at least 1")
    if solver not in SOLVERS:
        raise ValueError(f"solver={solver!r} must be one of {', '.join(SOLVERS)}")
    if loss not in lsq.LOSSES:
        raise ValueError(f"loss={loss!r} must be one of {', '.join(lsq.LOSSES)}")
    if why_unfittable(series, min_shapes):
        return "", None
    solver = "scipy" if kwargs else solver
    data = shape_data(series)
    options = {"model": model, "n_boot": n_boot, "seed": seed, "alpha": alpha, "loss": loss, "f_scale": f_scale,
               "copy": copy_bandwidth_tbs, "solver": solver, "kwargs": kwargs}
    key = _content_key(series, data, options) if cache else ""
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return key, _CACHE[key]
    fit = yield from _fit(series, data, model, n_boot, seed, alpha, copy_bandwidth_tbs,
                          Options(loss, f_scale, solver, LOWER, UPPER, kwargs))
    _remember(key, fit)
    return key, fit


def _remember(key: str, fit: RooflineFit) -> None:
    if key:
        _CACHE[key] = fit
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)


def _fit(series: Series, data: ShapeData, model: str, n_boot: int, seed: int, alpha: float,
         copy_tbs: float | None, opts: Options) -> Steps[RooflineFit]:
    """One fit, in order: prepare -> choose the model -> bootstrap -> judge what the data constrain -> notes."""
    plausible = plausible_bandwidth(series.peak.memory_bandwidth_tbs, copy_tbs)
    best, opts, w_free = yield from _fit_params(model, data.log_median, data, opts, plausible)
    boot = yield from boot_params_steps(best, data, n_boot, seed, alpha, opts)
    boot.flags.writeable = False
    verdict = _judge(best, boot, alpha, data, opts, plausible, w_free)
    fit = _result(series, data, best, boot, verdict, n_boot=n_boot, seed=seed, alpha=alpha, opts=opts,
                  plausible=plausible, w_free=w_free)
    return _with_quality_notes(fit)


@dataclass(frozen=True)
class _Verdict:
    """What the bootstrap says of the parameters: which the data constrain, and W's status with its notes."""

    constrained: Mapping[str, bool]
    w_status: str
    w_notes: list[str]


def _judge(best: np.ndarray, boot: np.ndarray, alpha: float, data: ShapeData, opts: Options,
           plausible: BandwidthRange, w_free: float | None) -> _Verdict:
    log_f, log_b = np.log(data.flops), np.log(data.bytes)
    lev = interval_leverage(best, boot, alpha, log_f, log_b)
    constrained = {k: v >= MIN_LEVERAGE for k, v in lev.items()}
    status, w_notes = _bandwidth_status(best, opts, data, lev, plausible, w_free)
    if status in ("confounded", "at bound"):
        constrained["w_tbs"] = False
    if status == "confounded":
        constrained["t0_s"] = False
    return _Verdict(constrained, status, w_notes)


def _result(series: Series, data: ShapeData, best: np.ndarray, boot: np.ndarray, verdict: _Verdict, *,
            n_boot: int, seed: int, alpha: float, opts: Options, plausible: BandwidthRange,
            w_free: float | None) -> RooflineFit:
    y = data.log_median
    resid = y - log_time(best, np.log(data.flops), np.log(data.bytes))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    nat, nat_boot = _natural(best), _natural(boot)
    cis = [_interval(nat_boot[:, j], alpha) for j in range(len(best))]
    constrained, status = verdict.constrained, verdict.w_status
    return RooflineFit(
        key=series.key, model="pnorm" if len(best) == 4 else "max",
        t0_s=float(nat[0]), p_tflops=float(nat[1]), w_tbs=float(nat[2]),
        blend_p=float(nat[3]) if len(best) == 4 else None,
        t0_s_ci=cis[0], p_tflops_ci=cis[1], w_tbs_ci=cis[2], blend_p_ci=cis[3] if len(best) == 4 else None,
        peak_tflops=series.peak_tflops, peak_estimated=series.peak.estimated,
        peak_bandwidth_tbs=series.peak.memory_bandwidth_tbs, constrained=constrained,
        rms_log_residual=float(np.sqrt(np.mean(resid**2))),
        r2_log=1.0 - float(np.sum(resid**2)) / ss_tot if ss_tot > 0 else math.nan,
        n_shapes=len(y), n_samples=sum(len(s) for s in data.samples), n_boot=n_boot, seed=seed, alpha=alpha,
        notes=tuple(verdict.w_notes + _notes(series, constrained, skip=("t0_s", "w_tbs") if status == "confounded"
                                             else ("w_tbs",)) + _one_pass(series, data.n_passes)),
        w_status=status, bandwidth_range=plausible if plausible.known else None, w_free_tbs=w_free,
        solver=opts.solver, flop_range=(float(data.flops.min()), float(data.flops.max())), boot=boot,
        best_tflops=summarise(series).best.tflops,
    )


def _with_quality_notes(fit: RooflineFit) -> RooflineFit:
    if fit.is_constrained:
        return replace(fit, notes=(*fit.notes, *fit.quality_notes()))
    # one phrase instead of one note per parameter
    per_param = {_unconstrained(name) for name in NAMES}
    return replace(fit, notes=(fit.unconstrained_reason, *(n for n in fit.notes if n not in per_param)))


def _fit_chunk(items: Sequence[tuple[Series, float | None]], **kw: Any) -> list[tuple[str, RooflineFit | None]]:
    return drive(_keyed_steps(s, copy_bandwidth_tbs=copy, **kw) for s, copy in items)


def fit_groups(series: Mapping[SeriesKey, Series], *, copy_bandwidth: Mapping[str, float] | None = None,
               progress: Progress | None = None, workers: int | None = None, chunk: int | None = None,
               meanwhile: Callable[[], object] | None = None,
               **kw: Any) -> tuple[dict[SeriesKey, RooflineFit], dict[SeriesKey, str]]:
    """Fit every series; return the fits and, for the others, why they were skipped.

    ``copy_bandwidth`` maps labels to measured copy bandwidths (TB/s), e.g. from
    :func:`mfu_sweep.analysis.fits.physical.measured_copy_bandwidth`; other keyword arguments go to
    :func:`fit_series`. The series are fitted in lockstep, ``chunk`` at a time (default: as many as
    make ``CHUNK_SHAPES`` shapes)
    (:func:`mfu_sweep.analysis.fits.batch.drive`), the chunks spread over ``workers`` processes
    (default: the cores; :func:`mfu_sweep.analysis.fits.parallel.map_chunks`), which calls
    ``progress(done, total)`` after every chunk: the same fits as one by one, up to rounding.
    ``meanwhile`` is other work for this process while the workers fit (``map_chunks``).
    """
    keys = list(series)
    items = [(series[k], (copy_bandwidth or {}).get(k.label)) for k in keys]
    if chunk is None:
        chunk = max(1, CHUNK_SHAPES // max((s.n_shapes for s in series.values()), default=1))
    results = map_chunks(partial(_fit_chunk, **kw), items, chunk, workers=workers, progress=progress,
                         meanwhile=meanwhile)
    fits: dict[SeriesKey, RooflineFit] = {}
    skipped: dict[SeriesKey, str] = {}
    for key, (cache_key, result) in zip(keys, results, strict=True):
        if result is None:
            skipped[key] = why_unfittable(series[key], kw.get("min_shapes", MIN_SHAPES)) or "not fittable"
        else:
            _remember(cache_key, result)  # fitted in a worker: this process reuses it too
            fits[key] = result
    return fits, skipped


def fit_all(sweeps: Iterable[Sweep], **kw: Any) -> dict[SeriesKey, RooflineFit]:
    """Fit every series of ``sweeps`` that has enough shapes (keyword arguments go to :func:`fit_series`).

    A copy bandwidth measured by ``mfu-sweep ceilings --into`` and stored in the sweeps bounds W.
    """
    sweeps = list(sweeps)
    return fit_groups(group_series(sweeps), copy_bandwidth=measured_copy_bandwidth(sweeps), **kw)[0]
