"""Which peak an imported record's MFU is measured against, and why an MFU above 1 remains.

An ``f32 x f32 -> f32`` dot of the OpenXLA table was compiled at XLA's default
precision, which on NVIDIA Ampere and later GPUs runs float32 dots on TF32
tensor cores: "By default, JAX leans toward speed: float32 dot products may be
computed with reduced-precision arithmetic internally (bfloat16 on TPU, TF32 on
recent GPUs)" (JAX documentation, *Matmul precision*, :data:`CITATION`). The
table does not record which precision ran, so its fp32 records (flagged
``maybe_tf32`` by the reader) are measured against the chip's tf32 peak where
the spec has one: the sweep's ``peak.tflops.fp32`` holds that value and
``peak.dtype_basis.fp32`` says so in words; each such record is flagged
``tf32_peak_assumed`` and keeps its dtype (fp32) and its TFLOP/s. A chip with no
tf32 peak keeps the fp32 one. Any record still above its peak keeps the
``above_peak`` flag and gets ``above_peak_reason``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from mfu_sweep.records.results import Record
from mfu_sweep.specs import Peak

MAYBE_TF32 = "maybe_tf32"
ASSUMED = "tf32_peak_assumed"
RECORD_BASIS = ("tf32 peak, assumed: XLA's default precision lets an f32 dot run as TF32; "
                "the source does not say which ran (peak.dtype_basis.fp32 has the citation)")
CITATION = "JAX documentation, Matmul precision <https://docs.jax.dev/en/latest/201/precision.html>"


def assumed_peak(peak: Peak, flags: Iterable[tuple[str, tuple[str, ...]]]) -> Peak:
    """``peak`` with fp32 measured against tf32 when fp32 rows are flagged ``maybe_tf32`` and tf32 is known.

    ``flags`` are (dtype, flags) of the source rows. Unchanged otherwise.
    """
    fp32, tf32 = peak.for_dtype("fp32"), peak.for_dtype("tf32")
    if tf32 is None or not any(d == "fp32" and MAYBE_TF32 in f for d, f in flags):
        return peak
    was = f"{fp32:g}" if fp32 else "none"
    why = (f"fp32 MFU is against the tf32 peak ({tf32:g} TFLOP/s; the fp32 peak is {was}): assumed, because "
           f"XLA's default precision lets f32 dots run on TF32-class tensor cores (TF32 on NVIDIA Ampere and "
           f"later: {CITATION}) and the source does not record which precision ran")
    return replace(peak, tflops={**peak.tflops, "fp32": tf32}, dtype_basis={**peak.dtype_basis, "fp32": why})


def annotate(rec: Record, peak: Peak, source_reason: str) -> Record:
    """Add ``tf32_peak_assumed``/``peak_basis`` and, above the peak, ``above_peak_reason`` to one record."""
    flags, extra = list(rec.flags), dict(rec.extra)
    if MAYBE_TF32 in flags and peak.dtype_basis.get(rec.dtype):  # another basis (fp8-rowwise's) is no tf32
        flags.append(ASSUMED)
        extra["peak_basis"] = RECORD_BASIS
    if "above_peak" in flags:
        extra["above_peak_reason"] = above_peak_reason(rec, peak, source_reason)
    if flags == list(rec.flags) and extra == rec.extra:
        return rec
    return replace(rec, flags=tuple(dict.fromkeys(flags)), extra=extra)


def above_peak_reason(rec: Record, peak: Peak, source_reason: str) -> str:
    """Why an imported record's MFU exceeds 1, in words: the precision that ran, or what the source leaves out."""
    chip = peak.chip or "the chip"
    value = peak.for_dtype(rec.dtype)
    if rec.dtype == "fp32" and MAYBE_TF32 in rec.flags and not peak.dtype_basis.get("fp32"):
        return (f"an f32 dot at XLA's default precision may run on reduced-precision matrix units, and {chip} "
                f"has no cited tf32 peak, so this MFU is against the fp32 peak ({value:g} TFLOP/s) and overstates "
                f"the fraction of the peak that ran")
    assumed = MAYBE_TF32 in rec.flags and peak.dtype_basis.get(rec.dtype)
    basis = "the assumed tf32 peak" if assumed else f"the cited {rec.dtype} peak"
    why = source_reason or "the source does not record clocks or kernels"
    return f"above {basis} of {chip} ({value:g} TFLOP/s): {why}"
