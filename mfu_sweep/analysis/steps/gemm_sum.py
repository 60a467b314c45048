"""Predict the GEMM time of a workload step from measured sweeps.

For every series (device label) in the loaded sweeps, each GEMM of the
workload is looked up by (shape, dtype, mode); its median time per call times
its count per step, summed, is the step's GEMM time. The GEMM-only MFU is the
step's GEMM FLOPs over that time over the series' peak.

Shapes a series did not measure fall back, with a warning, to the series'
fitted roofline when ``mfu_sweep.analysis.fits.fit`` is installed alongside, but only where
the measured shapes constrain what that shape's time depends on
(:class:`FitPredictor`); otherwise they are reported missing, with the reason, and the
prediction is incomplete (a caller may still show the measured part, clearly labelled partial).

What the prediction leaves out is listed in :data:`LEFT_OUT`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mfu_sweep.analysis.ground.series import shape_seconds
from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.gemm.workloads import WorkloadGemm
from mfu_sweep.records.results import Record, Sweep

SOURCES = ("measured", "fitted", "missing")
LEFT_OUT = (
    "attention softmax, masking and dropout (attention is modelled as plain batched GEMMs, "
    "no flash-attention fusion, no causal skipping)",
    "norms, activations, RoPE, residual adds, embedding lookup, loss",
    "communication: tensor-, data- and expert-parallel collectives, MoE token dispatch",
    "optimizer step and gradient clipping",
    "kernel-launch gaps, memory copies and every other non-GEMM kernel",
)


class PredictError(ValueError):
    """Nothing can be predicted from the given files; the message says why."""


STEP_KINDS = ("train", "infer")
FORWARD = "fwd"


def step_gemms(gemms: Sequence[WorkloadGemm], kind: str = "train") -> list[WorkloadGemm]:
    """The GEMMs of one step of ``kind``: ``train`` every GEMM of the family (forward, data and weight
    gradients), ``infer`` only those of the forward pass (the family must label each GEMM's pass, as ``llm:``
    families do)."""
    if kind not in STEP_KINDS:
        raise PredictError(f"kind {kind!r} is not one of {', '.join(STEP_KINDS)}")
    if kind == "train":
        return list(gemms)
    forward = [g for g in gemms if g.pass_ == FORWARD]
    if not forward:
        family = gemms[0].family if gemms else "the workload"
        raise PredictError(f"--kind infer: {family} does not say which of its GEMMs are the forward pass (they "
                           "have no pass); llm: families do, and deepbench:inference-server is an inference list")
    return forward


@dataclass(frozen=True)
class GemmTime:
    """One workload GEMM with its time per call on one series and where that time came from."""

    gemm: WorkloadGemm
    seconds: float | None
    source: str

    @property
    def step_s(self) -> float | None:
        """Time of all ``count`` calls."""
        return None if self.seconds is None else self.seconds * self.gemm.count


@dataclass(frozen=True)
class Part:
    """Time and FLOPs of one group (a role or a pass) within a step."""

    key: str
    seconds: float
    flops: float
    calls: int


@dataclass(frozen=True)
class StepPrediction:
    """The GEMM time of one step on one series.

    ``step_s``, ``flops`` and ``mfu`` cover the GEMMs with a time (measured or
    fitted); when ``complete`` is false they are a partial sum and must be
    labelled so.
    """

    label: str
    dtype: str
    mode: str
    family: str
    items: tuple[GemmTime, ...]
    peak_tflops: float | None
    warnings: tuple[str, ...] = ()

    def shapes(self, source: str) -> int:
        """Distinct shapes whose time came from ``source``."""
        return len({t.gemm.shape for t in self.items if t.source == source})

    @property
    def complete(self) -> bool:
        return all(t.source != "missing" for t in self.items)

    @property
    def covered(self) -> tuple[GemmTime, ...]:
        return tuple(t for t in self.items if t.seconds is not None)

    @property
    def step_s(self) -> float | None:
        """Sum of count x seconds over the covered GEMMs (None when none is covered)."""
        covered = self.covered
        return sum(t.step_s for t in covered) if covered else None

    @property
    def flops(self) -> float:
        """FLOPs of the covered GEMMs."""
        return sum(t.gemm.flops for t in self.covered)

    @property
    def total_flops(self) -> float:
        """FLOPs of the whole step, covered or not."""
        return sum(t.gemm.flops for t in self.items)

    @property
    def tflops(self) -> float | None:
        step = self.step_s
        return self.flops / step / 1e12 if step else None

    @property
    def mfu(self) -> float | None:
        """GEMM-only MFU: covered FLOPs / covered GEMM time / peak."""
        tf = self.tflops
        return tf / self.peak_tflops if (tf is not None and self.peak_tflops) else None

    def by_role(self) -> tuple[Part, ...]:
        return _group(self.covered, lambda t: t.gemm.role)

    def by_pass(self) -> tuple[Part, ...]:
        return _group(self.covered, lambda t: t.gemm.pass_)

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label, "dtype": self.dtype, "mode": self.mode, "family": self.family,
            "complete": self.complete, "step_s": self.step_s, "flops": self.flops,
            "total_flops": self.total_flops, "tflops": self.tflops, "mfu": self.mfu,
            "peak_tflops": self.peak_tflops,
            "shapes": {s: self.shapes(s) for s in SOURCES},
            "by_role": [vars(p) for p in self.by_role()], "by_pass": [vars(p) for p in self.by_pass()],
            "gemms": [{**t.gemm.to_json(), "seconds": t.seconds, "source": t.source} for t in self.items],
            "warnings": list(self.warnings), "left_out": list(LEFT_OUT),
        }


def _group(items: Iterable[GemmTime], key: Callable[[GemmTime], str]) -> tuple[Part, ...]:
    acc: dict[str, list[float]] = {}
    for t in items:
        row = acc.setdefault(key(t), [0.0, 0.0, 0])
        row[0] += t.step_s or 0.0
        row[1] += t.gemm.flops
        row[2] += t.gemm.count
    return tuple(Part(k, s, f, int(c)) for k, (s, f, c) in acc.items())


def measured_medians(sweeps: Sequence[Sweep], dtype: str, mode: str) -> dict[str, dict[Shape, float]]:
    """Median seconds per call of every finished shape, by series label then shape.

    Within one sweep the passes of a ``--repeats`` run are one time (the median of their medians,
    :func:`~mfu_sweep.analysis.ground.series.shape_seconds`); a later sweep with the same label and shape
    replaces an earlier one, so the order of the files decides.
    """
    out: dict[str, dict[Shape, float]] = {}
    for sweep in sweeps:
        passes: dict[Shape, list[Record]] = {}
        for rec in sweep.records:
            if rec.ok and rec.dtype == dtype and rec.mode == mode:
                passes.setdefault(rec.shape, []).append(rec)
        out.setdefault(sweep.label, {}).update({shape: shape_seconds(recs) for shape, recs in passes.items()})
    return {label: by_shape for label, by_shape in out.items() if by_shape}


Predictor = Callable[[Shape], "float | None"]


@dataclass(frozen=True)
class FitPredictor:
    """Time per call from a roofline fit, only where the fit is backed by the measured shapes.

    Calling it gives None for a shape the fit cannot stand in for; :meth:`refusal` says why
    (:meth:`mfu_sweep.analysis.fits.fit.RooflineFit.unsupported_at`).
    """

    fit: Any
    dtype: Any

    def refusal(self, shape: Shape) -> str | None:
        return self.fit.unsupported_at(shape.flops, shape.bytes(self.dtype))

    def __call__(self, shape: Shape) -> float | None:
        if self.refusal(shape) is not None:
            return None
        return float(self.fit.predict_time(shape.flops, shape.bytes(self.dtype)))


def roofline_predictors(sweeps: Sequence[Sweep], dtype: str, mode: str,
                        labels: Collection[str] | None = None) -> dict[str, Predictor]:
    """Per-label time predictors from ``mfu_sweep.analysis.fits.fit`` when that module is installed.

    Only ``labels`` are fitted (all when None). Returns an empty mapping when the
    fitting modules are absent; a label that cannot be fitted (too few shapes)
    has no entry.
    """
    try:
        from mfu_sweep.analysis.fits.fit import fit_series
        from mfu_sweep.analysis.ground.series import group_series
    except ModuleNotFoundError as exc:
        if exc.name in ("mfu_sweep.analysis.fits.fit", "mfu_sweep.analysis.ground.series"):
            return {}
        raise
    dt = get_dtype(dtype)
    out: dict[str, Predictor] = {}
    for key, series in group_series(list(sweeps)).items():
        if key.dtype != dtype or key.mode != mode or (labels is not None and key.label not in labels):
            continue
        # the bootstrap decides which parameters the shapes constrain, which decides where the fit may stand in
        fit = fit_series(series)
        if fit is not None:
            out[key.label] = FitPredictor(fit, dt)
    return out


def _peak(sweeps: Sequence[Sweep], label: str, dtype: str) -> float | None:
    for sweep in sweeps:
        if sweep.label == label:
            value = sweep.peak.for_dtype(dtype)
            if value:
                return value
    return None


def predict_series(gemms: Sequence[WorkloadGemm], label: str, dtype: str, mode: str,
                   medians: Mapping[Shape, float], peak_tflops: float | None,
                   predictor: Predictor | None = None) -> StepPrediction:
    """Times for every GEMM on one series: measured, else fitted, else missing."""
    items = []
    refused: dict[str, set[Shape]] = {}
    for g in gemms:
        seconds = None if g.shape in medians or predictor is None else predictor(g.shape)
        if g.shape in medians:
            items.append(GemmTime(g, medians[g.shape], "measured"))
        elif seconds is not None:
            items.append(GemmTime(g, seconds, "fitted"))
        else:
            items.append(GemmTime(g, None, "missing"))
            why = predictor.refusal(g.shape) if isinstance(predictor, FitPredictor) else None
            if why:
                refused.setdefault(why, set()).add(g.shape)
    family = gemms[0].family if gemms else ""
    flops = [s.flops for s in medians]
    span = (min(flops), max(flops)) if flops else (0.0, 0.0)
    total = len({g.shape for g in gemms})
    refusals = tuple(f"{label}: the roofline fit does not stand in for {len(shapes)} of {total} unmeasured shapes: "
                     f"{why}" for why, shapes in refused.items())
    return StepPrediction(label, dtype, mode, family, tuple(items), peak_tflops,
                          refusals + _warnings(label, dtype, items, peak_tflops, span, bool(refused)))


def _warnings(label: str, dtype: str, items: Sequence[GemmTime], peak_tflops: float | None,
              span: tuple[float, float], refused: bool = False) -> tuple[str, ...]:
    notes = []
    total = len({t.gemm.shape for t in items})
    fitted = {t.gemm.shape for t in items if t.source == "fitted"}
    missing = len({t.gemm.shape for t in items if t.source == "missing"})
    if fitted:
        step = sum(t.step_s for t in items if t.step_s is not None)
        share = sum(t.step_s for t in items if t.source == "fitted") / step if step else 0.0
        outside = sum(not (span[0] <= s.flops <= span[1]) for s in fitted)
        extrapolated = f", {outside} of them outside the measured FLOP range (extrapolated)" if outside else ""
        notes.append(f"{label}: {len(fitted)} of {total} shapes not measured; their time "
                     f"({share:.0%} of the step) comes from the fitted roofline{extrapolated}")
    if missing:
        why = "the fit does not stand in for them (above)" if refused else "no roofline fit available"
        notes.append(f"{label}: {missing} of {total} shapes not measured and {why}; the step time is incomplete")
    if peak_tflops is None:
        notes.append(f"{label}: no peak for {dtype}; MFU not computed")
    return tuple(notes)


def predict_step(sweeps: Sequence[Sweep], gemms: Sequence[WorkloadGemm], dtype: str = "bf16",
                 mode: str = "eager", use_fit: bool = True) -> list[StepPrediction]:
    """Predict the step's GEMM time on every series in ``sweeps`` that measured ``dtype``/``mode``.

    Parameters
    ----------
    sweeps:
        Loaded sweeps (see :func:`mfu_sweep.records.results.load_sweeps`); series are their device labels.
    gemms:
        The workload, e.g. ``resolve_family("llm:qwen3-32b:tokens=8192")``.
    dtype, mode:
        Which records to match.
    use_fit:
        Fill unmeasured shapes from the series' roofline fit when available.

    Raises
    ------
    PredictError
        When no series has a finished record for ``dtype``/``mode``.
    """
    if not gemms:
        raise PredictError("the workload has no GEMMs")
    get_dtype(dtype)
    medians = measured_medians(sweeps, dtype, mode)
    if not medians:
        have = sorted({(r.dtype, r.mode) for s in sweeps for r in s.records if r.ok})
        listing = ", ".join(f"{d}/{m}" for d, m in have) or "none"
        raise PredictError(f"no finished records for dtype {dtype}, mode {mode} in the files (they hold: {listing})")
    incomplete = [label for label, times in medians.items() if any(g.shape not in times for g in gemms)]
    predictors = roofline_predictors(sweeps, dtype, mode, incomplete) if (use_fit and incomplete) else {}
    return [predict_series(gemms, label, dtype, mode, times, _peak(sweeps, label, dtype), predictors.get(label))
            for label, times in medians.items()]
