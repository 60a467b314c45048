"""How each side of a comparison was timed, the warning when the two sides differ, and the calibration
that divides out the difference between two timing methods measured on one chip.

The same chip timed two ways can differ more than two chips do: a mamf-finder
log of an H100 (CUDA events around each call, 256 MiB cache flushed before it,
eager PyTorch) against the OpenXLA table's ``sm_90`` (kernel time from the CUPTI
tracer) gives 135.8 vs 252.8 TFLOP/s at 1024^3 and a median ratio of 0.74 over
the shared shapes. So :func:`timing_notes` says so whenever the timer, the cache
policy or the mode differ, and :func:`band_calibration` divides out the ratio of
the two methods measured on one reference chip (``REF_A`` timed like side a,
``REF_B`` like side b), per FLOP band, with its uncertainty (the scatter of the
reference's shapes in the band) carried into the band test as a common offset.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mfu_sweep.analysis.ground.series import Series
from mfu_sweep.analysis.verdicts.comparison import CompareError
from mfu_sweep.analysis.verdicts.curves import pass_curve
from mfu_sweep.analysis.verdicts.matching import measured_points

FIELDS = ("timer", "cache", "mode")
H100_EXAMPLE = "one H100: mamf-finder log vs the OpenXLA table's sm_90, median ratio 0.74"


def timing_differences(a: Series, b: Series) -> list[str]:
    """The timing fields (timer, cache, mode) known on both sides that differ; not the mode when one
    device's modes are what is compared (``--a X/DTYPE/eager --b X/DTYPE/compile``)."""
    same_device = a.device.get("label") is not None and a.device.get("label") == b.device.get("label")
    fields = [f for f in FIELDS if f != "mode" or "|" not in a.mode or not same_device]
    return [f for f in fields if a.timing.get(f) and b.timing.get(f) and a.timing.get(f) != b.timing.get(f)]


def _how(s: Series) -> str:
    t = s.timing
    return f"{t.get('timer') or '?'} timer, cache {t.get('cache') or 'not stated'}, {t.get('mode') or '?'}"


def timing_note(a: Series, b: Series, calibrated: bool) -> str | None:
    """One line when the two sides were timed differently, None when they agree."""
    differ = timing_differences(a, b)
    if not differ:
        return None
    head = (f"timing differs ({', '.join(differ)}): {a.label} {_how(a)}; {b.label} {_how(b)}; ")
    if calibrated:
        return head + "ratios are calibrated on a chip measured both ways (see calibration)"
    return head + (f"ratios include the methods' difference ({H100_EXAMPLE}); "
                   f"calibrate with --calibrate REF_A REF_B (one chip timed each way)")


def timing_json(a: Series, b: Series) -> dict[str, Any]:
    return {"a": {f: a.timing.get(f) for f in (*FIELDS, "method")},
            "b": {f: b.timing.get(f) for f in (*FIELDS, "method")}, "differs": timing_differences(a, b)}


@dataclass(frozen=True)
class Calibration:
    """The log ratio REF_A/REF_B (same chip, two timing methods) per band: ``log_factor``, its variance and df."""

    ref_a: str
    ref_b: str
    log_factor: tuple[float, ...]
    var: tuple[float, ...]
    df: tuple[float, ...]
    n: tuple[int, ...]
    median_ratio: float

    def per_band(self) -> list[tuple[float, float, float]]:
        return list(zip(self.log_factor, self.var, self.df, strict=True))

    def note(self) -> str:
        return (f"calibrated for timing method: divided out {self.ref_a}/{self.ref_b} (one chip timed both ways; "
                f"median x{self.median_ratio:.3g}) per FLOP band, its uncertainty carried into the band tests")

    def to_json(self, edges: Sequence[tuple[int, int, float, float]]) -> dict[str, Any]:
        return {"ref_a": self.ref_a, "ref_b": self.ref_b, "median_ratio": self.median_ratio,
                "bands": [{"low_flops": lo, "high_flops": hi, "ratio": math.exp(f), "log_sd": math.sqrt(v),
                           "n_shapes": n}
                          for (_, _, lo, hi), f, v, n in zip(edges, self.log_factor, self.var, self.n, strict=True)]}


def pick_reference(series: Mapping[Any, Series], dtype: str, which: str) -> Series:
    """The one series of ``dtype`` in a calibration file."""
    found = [s for s in series.values() if s.dtype == dtype]
    if len(found) != 1:
        have = ", ".join(str(k) for k in series) or "none"
        raise CompareError(f"--calibrate {which}: need exactly one series of {dtype}, found {len(found)} "
                           f"(have: {have})")
    return found[0]


def band_calibration(ref_a: Series, ref_b: Series, edges: Sequence[tuple[int, int, float, float]]) -> Calibration:
    """Log TFLOP/s ratio ref_a/ref_b at the reference's shapes (matched, or one side's against the other's
    prediction there:
    :func:`mfu_sweep.analysis.verdicts.matching.measured_points`), averaged per band of ``edges``.

    A band without two reference shapes takes those of the nearest bands until
    it has two; the variance is the scatter of the reference's log ratios over
    those shapes divided by their number (the shapes are the unit, as in the
    band test), with ``n - 1`` df.
    """
    raw = measured_points(pass_curve(ref_a, "tflops"), pass_curve(ref_b, "tflops"))
    if len(raw) < 2:
        raise CompareError(f"--calibrate: {ref_a.label} and {ref_b.label} share fewer than two measured shapes "
                           f"(matched, or predicted from close ones); sweep the reference chip on the same shapes "
                           f"both ways")
    lf = np.log10([r.flops for r in raw])
    r = np.array([x.log_a - x.log_b for x in raw])
    factor, var, df, n = [], [], [], []
    for _, _, lo, hi in edges:
        centre = (math.log10(lo) + math.log10(hi)) / 2
        inside = (lf >= math.log10(lo)) & (lf < math.log10(hi))
        if inside.sum() < 2:
            inside = np.zeros(len(r), dtype=bool)
            inside[np.argsort(np.abs(lf - centre), kind="stable")[:2]] = True
        x = r[inside]
        factor.append(float(x.mean()))
        var.append(float(x.var(ddof=1)) / len(x))
        df.append(float(len(x) - 1))
        n.append(int(len(x)))
    return Calibration(ref_a.label, ref_b.label, tuple(factor), tuple(var), tuple(df), tuple(n),
                       float(np.exp(np.median(r))))
