"""Data types the tool sweeps: names, element sizes and numerical tolerances.

This module owns the mapping from the user-facing dtype names (``fp32``,
``bf16`` ...) to element sizes and check tolerances. It does not import torch,
so analysis code can use it on a machine without torch.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    """One sweepable data type.

    Attributes
    ----------
    name:
        User-facing name, e.g. ``"bf16"``.
    element_bytes:
        Bytes per input element (used for the minimum-traffic byte count).
    output_bytes:
        Bytes per output element.
    rel_tolerance:
        Largest accepted relative Frobenius error of the sampled output against
        a float64 reference, for inputs of unit variance.
    torch_name:
        Attribute of ``torch`` holding the input dtype.
    """

    name: str
    element_bytes: int
    output_bytes: int
    rel_tolerance: float
    torch_name: str


# Tolerances are relative Frobenius errors of sampled output rows. Inputs are
# generated directly in the target dtype, so only accumulation and output
# rounding contribute: bf16 output rounding alone is ~2**-9, tf32 inputs are
# rounded to 10 mantissa bits, fp8 output is bf16.
DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("fp32", 4, 4, 1e-4, "float32"),
        DType("tf32", 4, 4, 5e-3, "float32"),
        DType("bf16", 2, 2, 2e-2, "bfloat16"),
        DType("fp16", 2, 2, 5e-3, "float16"),
        DType("fp8", 1, 2, 3e-2, "float8_e4m3fn"),
    )
}


def get_dtype(name: str) -> DType:
    """Return the :class:`DType` called ``name``; raise ``ValueError`` naming it if unknown."""
    try:
        return DTYPES[name]
    except KeyError:
        known = ", ".join(DTYPES)
        raise ValueError(f"unknown dtype {name!r} (known: {known})") from None
