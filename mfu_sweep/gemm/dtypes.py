"""Data types the tool sweeps: names, element sizes and numerical tolerances.

This module owns the mapping from the user-facing dtype names (``fp32``,
``bf16`` ...) to element sizes and check tolerances. It does not import torch,
so analysis code can use it on a machine without torch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    """One sweepable data type.

    Attributes
    ----------
    name:
        User-facing name, e.g. ``"bf16"``.
    element_bytes:
        Bytes per input element (used for the minimum-traffic byte count); 0.5 for 4-bit formats.
    output_bytes:
        Bytes per output element.
    rel_tolerance:
        Largest accepted relative Frobenius error of the sampled output against
        a float64 reference, for inputs of unit variance.
    torch_name:
        Attribute of ``torch`` holding the input dtype.
    scaling:
        How the operands carry scales: ``none``; ``tensor`` (one scale per operand, fp8);
        ``row`` (one fp32 scale per row of A and per column of B); ``block`` (one scale per
        ``block`` consecutive elements along K, in ``scale_format``).
    block:
        Elements per block scale along K (``block`` scaling only).
    scale_format:
        The block scales' element type: ``e8m0`` (a power of two, MX) or ``e4m3`` (NVFP4).
    significand_bits:
        Significand bits of the element format, the implicit one included (e4m3: 4, e2m1: 2); the
        check's tolerance of a scaled format is derived from it (:func:`quantized_tolerance`).
    peak_key:
        The spec table's key for this dtype's peak, when it is another dtype's (empty: its own name).
    layouts:
        The only operand layouts the GEMM takes (the scaled GEMMs want A row-major and B column-major,
        ``nt``); empty: every layout.
    """

    name: str
    element_bytes: float
    output_bytes: int
    rel_tolerance: float
    torch_name: str
    scaling: str = "none"
    block: int = 0
    scale_format: str = ""
    significand_bits: int = 0
    peak_key: str = ""
    layouts: tuple[str, ...] = ()

    @property
    def scale_bytes(self) -> int:
        """Bytes of one block scale (e8m0 and e4m3 are one byte)."""
        return 1 if self.block else 0

    @property
    def input_bytes_per_element(self) -> float:
        """Bytes read per input element, its share of the block scales included (MX: 1/32 byte)."""
        return self.element_bytes + (self.scale_bytes / self.block if self.block else 0.0)

    @property
    def quantized(self) -> bool:
        """Whether the inputs are quantized from float32 with per-row or per-block scales (row, block)."""
        return self.scaling in ("row", "block")

    def scaling_json(self) -> dict[str, object]:
        """How the operands carry scales, for the record (the scale layout on the device is the backend's)."""
        out: dict[str, object] = {"scaling": self.scaling}
        if self.block:
            out.update(block=self.block, scale_format=self.scale_format)
        return out

    def runs_layout(self, layout: str) -> bool:
        """Whether the GEMM of this dtype takes operands in ``layout``."""
        return not self.layouts or layout in self.layouts


# bf16 output: rounding to 8 significand bits leaves at most 2**-9 relative error per element.
BF16_OUTPUT_ROUNDING = 2.0**-9


def quantized_tolerance(significand_bits: int) -> float:
    """The check's tolerance for operands quantized to a format of ``significand_bits`` (implicit bit included).

    Rounding to nearest leaves each element within ``u = 2**-significand_bits`` of its value
    (relative; block scaling keeps the block's largest elements in the normal range), so each
    operand's relative Frobenius error is at most ``u``; the product's is at most about
    ``sqrt(2) u`` (the errors of A and B add in quadrature: they are independent), plus the
    bf16 output's rounding. Elements that fall into the subnormal range of a block lose more,
    but they are the block's smallest and weigh little in the norm (``tests/test_scaled.py``
    measures the emulated error of each format well inside this bound).
    """
    return math.sqrt(2.0) * 2.0**-significand_bits + BF16_OUTPUT_ROUNDING


NT = ("nt",)

# Tolerances are relative Frobenius errors of sampled output rows. Inputs are
# generated directly in the target dtype, so only accumulation and output
# rounding contribute: bf16 output rounding alone is ~2**-9, tf32 inputs are
# rounded to 10 mantissa bits, fp8 output is bf16. The row- and block-scaled
# formats are quantized from float32 normals and checked against the float64
# product of the unquantized operands: their tolerance is the format's own
# precision (quantized_tolerance).
DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("fp32", 4, 4, 1e-4, "float32"),
        DType("tf32", 4, 4, 5e-3, "float32"),
        DType("bf16", 2, 2, 2e-2, "bfloat16"),
        DType("fp16", 2, 2, 5e-3, "float16"),
        DType("fp8", 1, 2, 3e-2, "float8_e4m3fn", scaling="tensor", layouts=NT),
        DType("fp8-rowwise", 1, 2, quantized_tolerance(4), "float8_e4m3fn", scaling="row", significand_bits=4,
              peak_key="fp8", layouts=NT),
        DType("mxfp8", 1, 2, quantized_tolerance(4), "float8_e4m3fn", scaling="block", block=32,
              scale_format="e8m0", significand_bits=4, layouts=NT),
        DType("mxfp4", 0.5, 2, quantized_tolerance(2), "float4_e2m1fn_x2", scaling="block", block=32,
              scale_format="e8m0", significand_bits=2, layouts=NT),
        DType("nvfp4", 0.5, 2, quantized_tolerance(2), "float4_e2m1fn_x2", scaling="block", block=16,
              scale_format="e4m3", significand_bits=2, layouts=NT),
    )
}


# Other names of the dtypes: torch's (``torch.bfloat16`` -> ``bfloat16``), numpy's and the short forms other tools
# print. Every option and reader that takes a dtype accepts them and writes the tool's own name.
ALIASES: dict[str, str] = {
    "float32": "fp32", "float": "fp32", "f32": "fp32",
    "tfloat32": "tf32",
    "bfloat16": "bf16",
    "float16": "fp16", "half": "fp16", "f16": "fp16",
    "float8_e4m3fn": "fp8", "e4m3": "fp8", "fp8-e4m3": "fp8",
}


def canonical_dtype(name: str) -> str:
    """The tool's name of dtype ``name``: itself, or the one an alias (:data:`ALIASES`, any case, an optional
    ``torch.`` prefix) stands for; ``ValueError`` naming it and the known names if neither.

    >>> canonical_dtype("torch.bfloat16")
    'bf16'
    """
    text = name.strip()
    if text in DTYPES:
        return text
    key = text.lower().removeprefix("torch.")
    if key in DTYPES:
        return key
    if key in ALIASES:
        return ALIASES[key]
    raise ValueError(f"unknown dtype {name!r} (known: {', '.join(DTYPES)}; or torch's names: "
                     f"{', '.join(sorted(ALIASES))})")


def get_dtype(name: str) -> DType:
    """Return the :class:`DType` called ``name`` (or an alias of it, :func:`canonical_dtype`); raise ``ValueError``
    naming it if unknown."""
    return DTYPES[canonical_dtype(name)]


# -- fp8 element formats -----------------------------------------------------------------------------------------

# The fp8 element formats a record can name (``fp8_format``): OCP e4m3 (``fn``: finite, no infinities) and e5m2,
# and the ``fnuz`` variants of AMD's MI300 (gfx942: one NaN, no negative zero, exponent bias one higher). Two
# chips' "fp8" in different formats are two number formats: their ranges and roundings differ.
FP8_FORMATS = ("e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz")
_FP8_TAIL = re.compile(r"(e4m3fnuz|e4m3fn|e5m2fnuz|e5m2|e4m3)$")


def _one_fp8_format(name: str) -> str | None:
    hit = _FP8_TAIL.search(name)
    if hit is None:
        return None
    found = "e4m3fn" if hit.group(1) == "e4m3" else hit.group(1)  # a bare e4m3 (__nv_fp8_e4m3) is OCP's fn
    return found if found in FP8_FORMATS else None


def fp8_format(name: str) -> str | None:
    """The fp8 element format a torch, XLA or CUDA type name says, one of :data:`FP8_FORMATS`; None when it says
    none (``fp8``, ``bf16``) or its two inputs differ.

    ``torch.float8_e4m3fnuz`` -> ``e4m3fnuz``; ``f8e4m3fnxf8e4m3fn->bf16`` (an XLA dtype key) -> ``e4m3fn``;
    ``__nv_fp8_e4m3`` -> ``e4m3fn``; ``float8_e5m2`` -> ``e5m2``; ``f8e4m3fnxf8e5m2->bf16`` -> None.
    """
    text = name.strip().lower().removeprefix("torch.")
    inputs = text.split("->")[0]
    parts = re.split(r"x(?=f8)", inputs) if "->" in text else [inputs]
    found = {_one_fp8_format(part) for part in parts}
    return found.pop() if len(found) == 1 else None
