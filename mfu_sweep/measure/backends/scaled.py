"""Row- and block-scaled low precision: quantizing operands, the scale layouts, and the scaled GEMM call.

Every format here quantizes float32 operands (standard normals whose magnitude varies by up to 2^4 either
way from one block of 32 elements to the next, :func:`spread_blocks`) with its own recipe, and the GEMM
computes ``(A_q * scale_a) @ (B_q * scale_b)`` with the scales applied inside the kernel. FLOPs are
``2*m*n*k`` as for any GEMM: the scales cost no multiply-adds of their own (they are applied once
per block product, or in the epilogue). Operands are laid out as the kernels want them, A row-major
and B column-major (layout ``nt``, both K-contiguous), with scales along K:

``fp8-rowwise``
    e4m3 elements; one float32 scale per row of A (``m x 1``) and per column of B (``1 x n``),
    ``amax / 448``. ``torch._scaled_mm`` (CUDA sm89+, ROCm MI300+, and the CPU).
``mxfp8`` / ``mxfp4``
    OCP Microscaling: e4m3 or e2m1 elements (e2m1 packed two per byte,
    ``torch.float4_e2m1fn_x2``), one e8m0 scale (a power of two) per 32 elements along K,
    rounded up so the block's largest element fits (``2**ceil(log2(amax / max))``).
``nvfp4``
    e2m1 elements, one e4m3 scale per 16 elements along K (``amax / 6``, rounded to e4m3). NVIDIA's
    recipe adds a per-tensor float32 scale to keep the block scales in e4m3's range; for these
    operands (block amax from about 2^-4 to 2^6) every block scale already is, so that scale is 1 and
    is not passed.

On NVIDIA (sm100+, cuBLASLt) the block scales of each operand are a ``rows x K/block`` matrix
stored in 128 x 4 tiles, each tile as 32 x 16 bytes (cuBLAS's "block scaling factors layout",
``SwizzleType.SWIZZLE_32_4_4``: :func:`swizzle_scales`, layout ``32x4x4``). On ROCm (gfx950) hipBLASLt
reads them in row-major order (``SwizzleType.NO_SWIZZLE``, layout ``none``) or, from ROCm 7.13 (MXFP4) and
7.14 (MXFP8) in a torch build that exposes ``SwizzleType.SWIZZLE_32_8``, pre-swizzled in 32 x 8 tiles (layout
``32x8``), built by torch's own helper (:func:`rocm_32x8_swizzler`), never by a copy of its layout here. The
block formats go through ``torch.nn.functional.scaled_mm`` with explicit ``ScalingType`` recipes (PyTorch
2.10+); that call has no ``out=``, so each call allocates its result.

fp8 accumulation (``fp8`` and ``fp8-rowwise``): ``use_fast_accum`` (:func:`scaled_op`'s ``fast_accum``) lets
Hopper's tensor cores keep partial sums at reduced precision, the setting NVIDIA's published fp8 throughput
uses; the sweep's default, ``--fp8-fast-accum on``, and each record says which (``fast_accum``).

Nothing here builds float64 tensors on the timed path: :attr:`Quantized.values`, what a format decodes to, is
computed only when read (the tests read it; a sweep checks against the unquantized operands).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch

from mfu_sweep.gemm.dtypes import DType

E4M3_MAX = 448.0
E2M1_MAX = 6.0
# The non-negative values of e2m1 in code order: code i (0..7) is E2M1_VALUES[i]; bit 3 is the sign.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E8M0_BIAS = 127
SCALE_TILE = (128, 4)  # rows x scale columns of one tile of the swizzled block-scale layout


@dataclass(frozen=True)
class Quantized:
    """One operand in a scaled format: the elements as stored and the scales.

    ``data`` is ``rows x K`` (``rows x K/2`` bytes for e2m1), ``scale`` is ``rows x 1`` (row scaling) or
    ``rows x K/block`` (block scaling, unswizzled); :attr:`values` is what the pair decodes to (float64,
    computed on first read only).
    """

    data: torch.Tensor
    scale: torch.Tensor

    @cached_property
    def values(self) -> torch.Tensor:
        """The float64 values ``data`` and ``scale`` stand for."""
        if self.data.dtype == torch.float4_e2m1fn_x2:
            elements = e2m1_values(unpack_e2m1(self.data))
        else:
            elements = self.data.to(torch.float64)
        rows, k = elements.shape
        if self.scale.dtype == torch.float8_e8m0fnu:
            scale = torch.exp2(self.scale.view(torch.uint8).to(torch.float64) - E8M0_BIAS)
        else:
            scale = self.scale.to(torch.float64)
        blocks = scale.shape[1]
        return (elements.reshape(rows, blocks, k // blocks) * scale.reshape(rows, blocks, 1)).reshape(rows, k)


# ----- e2m1 -------------------------------------------------------------------------------------
def e2m1_codes(x: torch.Tensor) -> torch.Tensor:
    """4-bit e2m1 codes (uint8, 0..15) of ``x`` rounded to the nearest e2m1 value (ties to even), saturating.

    In float32: every e2m1 value and every midpoint between two is exact there, so rounding is the same as
    in float64 at half the memory."""
    grid = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=x.device)
    mag = x.abs().to(torch.float32).clamp(max=E2M1_MAX)
    mids = (grid[1:] + grid[:-1]) / 2
    code = torch.bucketize(mag, mids)  # the nearest value's code; a tie (mag == mids[i]) gives the lower one, i
    tie = torch.isin(mag, mids)
    code = torch.where(tie & (code % 2 == 1), code + 1, code)  # ties go to the even code (even mantissa)
    return (code + 8 * (x < 0).to(code.dtype)).to(torch.uint8)


def e2m1_values(codes: torch.Tensor) -> torch.Tensor:
    """The float64 values of e2m1 ``codes`` (uint8 0..15)."""
    grid = torch.tensor(E2M1_VALUES, dtype=torch.float64, device=codes.device)
    mag = grid[(codes & 7).long()]
    return torch.where(codes >= 8, -mag, mag)


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """The codes (uint8 0..15) of ``float4_e2m1fn_x2`` bytes, the low nibble first (:func:`pack_e2m1` undone)."""
    raw = packed.view(torch.uint8)
    return torch.stack((raw & 0xF, raw >> 4), dim=-1).reshape(*raw.shape[:-1], raw.shape[-1] * 2)


def pack_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """Two codes per byte along the last dimension (the first element in the low nibble), as ``float4_e2m1fn_x2``."""
    pairs = codes.reshape(*codes.shape[:-1], codes.shape[-1] // 2, 2)
    packed = pairs[..., 0] | (pairs[..., 1] << 4)
    return packed.view(torch.float4_e2m1fn_x2)


# ----- operands ---------------------------------------------------------------------------------
def spread_blocks(x: torch.Tensor, gen: torch.Generator, block: int = 32, octaves: float = 4.0) -> torch.Tensor:
    """``x`` with every run of ``block`` elements along K scaled by ``2**u``, ``u`` uniform in +-``octaves``.

    Activations and gradients vary in magnitude from block to block; unit normals would not, and a
    kernel applying a scale to the wrong block would then pass the check unnoticed.
    """
    rows, k = x.shape
    blocks = math.ceil(k / block)
    factor = torch.exp2((torch.rand((rows, blocks), generator=gen, device=gen.device) * 2 - 1) * octaves)
    return x * factor.repeat_interleave(block, dim=1)[:, :k]


# ----- recipes ----------------------------------------------------------------------------------
def quantize_rowwise(x: torch.Tensor, element: torch.dtype = torch.float8_e4m3fn) -> Quantized:
    """e4m3 with one float32 scale per row (``amax / 448``; ``amax / 240`` for MI300's ``float8_e4m3fnuz``)."""
    top = torch.finfo(element).max
    amax = x.abs().amax(dim=-1, keepdim=True).clamp(min=1e-12)
    scale = (amax / top).to(torch.float32)
    data = (x / scale).clamp(-top, top).to(element)
    return Quantized(data, scale)


def _blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    rows, k = x.shape
    if k % block:
        raise ValueError(f"K={k} is not a multiple of the block size {block}")
    return x.reshape(rows, k // block, block)


def quantize_mx(x: torch.Tensor, elements: str) -> Quantized:
    """MX: e4m3 (``elements="e4m3"``) or e2m1 elements, one e8m0 scale per 32 along K, rounded up to a power of two."""
    top = E4M3_MAX if elements == "e4m3" else E2M1_MAX
    blocks = _blocks(x.to(torch.float32), 32)
    amax = blocks.abs().amax(dim=-1, keepdim=True).clamp(min=2.0**-126)
    exponent = torch.ceil(torch.log2(amax / top)).clamp(-E8M0_BIAS, E8M0_BIAS)
    scale = torch.exp2(exponent)
    scaled = (blocks / scale).clamp(-top, top)
    if elements == "e4m3":
        data = scaled.to(torch.float8_e4m3fn).reshape(x.shape)
    else:
        data = pack_e2m1(e2m1_codes(scaled).reshape(x.shape))
    e8m0 = (exponent + E8M0_BIAS).to(torch.uint8).squeeze(-1).view(torch.float8_e8m0fnu)
    return Quantized(data, e8m0)


def quantize_nvfp4(x: torch.Tensor) -> Quantized:
    """NVFP4: e2m1 elements, one e4m3 scale per 16 along K (``amax / 6`` rounded to e4m3); no per-tensor scale."""
    blocks = _blocks(x.to(torch.float32), 16)
    amax = blocks.abs().amax(dim=-1, keepdim=True)
    scale = (amax / E2M1_MAX).clamp(min=2.0**-9, max=E4M3_MAX).to(torch.float8_e4m3fn)
    codes = e2m1_codes(blocks / scale.to(torch.float32))
    return Quantized(pack_e2m1(codes.reshape(x.shape)), scale.squeeze(-1))


def quantize(x: torch.Tensor, dtype: DType, element: torch.dtype = torch.float8_e4m3fn) -> Quantized:
    """``x`` (rows x K, float32) in ``dtype``'s recipe, scales along K (row scaling: to ``element``)."""
    if dtype.scaling == "row":
        return quantize_rowwise(x, element)
    if dtype.name == "nvfp4":
        return quantize_nvfp4(x)
    if dtype.scaling == "block":
        return quantize_mx(x, "e4m3" if dtype.significand_bits == 4 else "e2m1")
    raise ValueError(f"{dtype.name} is not a row- or block-scaled format")


# ----- the block-scale layout -------------------------------------------------------------------
def swizzled_offset(row: Any, col: Any, scale_cols: int) -> Any:
    """Where scale (``row``, ``col``) of a matrix with ``scale_cols`` scale columns lies in cuBLAS's block layout
    (ints, or tensors elementwise).

    The matrix is padded to whole 128 x 4 tiles, tiles are stored row by row (512 bytes each), and inside a
    tile scale (r, c) is at ``(r % 32) * 16 + (r // 32) * 4 + c``: the four 32-row quarters interleave.
    """
    tiles_per_row = math.ceil(scale_cols / SCALE_TILE[1])
    tile = (row // SCALE_TILE[0]) * tiles_per_row + col // SCALE_TILE[1]
    r, c = row % SCALE_TILE[0], col % SCALE_TILE[1]
    return tile * SCALE_TILE[0] * SCALE_TILE[1] + (r % 32) * 16 + (r // 32) * 4 + c


def swizzle_scales(scale: torch.Tensor) -> torch.Tensor:
    """A ``rows x cols`` block-scale matrix in cuBLAS's tiled layout (:func:`swizzled_offset`), flat, zero-padded."""
    rows, cols = scale.shape
    pad_r = math.ceil(rows / SCALE_TILE[0]) * SCALE_TILE[0]
    pad_c = math.ceil(cols / SCALE_TILE[1]) * SCALE_TILE[1]
    raw = torch.zeros((pad_r, pad_c), dtype=torch.uint8, device=scale.device)
    raw[:rows, :cols] = scale.view(torch.uint8)
    r = torch.arange(pad_r, device=scale.device).unsqueeze(1)
    c = torch.arange(pad_c, device=scale.device).unsqueeze(0)
    out = torch.empty(pad_r * pad_c, dtype=torch.uint8, device=scale.device)
    out[swizzled_offset(r, c, pad_c).flatten()] = raw.flatten()
    return out.view(scale.dtype)


# ----- the GEMM ---------------------------------------------------------------------------------
# The block-scale layouts a backend may ask for, and torch's SwizzleType member of each.
SCALE_LAYOUTS = {"none": "NO_SWIZZLE", "32x4x4": "SWIZZLE_32_4_4", "32x8": "SWIZZLE_32_8"}


def rocm_32x8_swizzler() -> Callable[[torch.Tensor], torch.Tensor] | None:
    """torch's own builder of hipBLASLt's 32 x 8 pre-swizzled block-scale layout, where this torch has it.

    The layout is torch's ``SwizzleType.SWIZZLE_32_8`` (gfx950; pytorch/pytorch#190290), built by
    ``to_blocked(scale, swizzle_32_8=True)``. None where the enum or the builder is missing (torch 2.13 and
    older have neither): the caller then passes the scales unswizzled, which hipBLASLt also takes.
    """
    import torch.nn.functional as F

    if not hasattr(getattr(F, "SwizzleType", None), SCALE_LAYOUTS["32x8"]):
        return None
    try:
        from torch.testing._internal.common_quantized import to_blocked
    except ImportError:
        return None
    if "swizzle_32_8" not in inspect.signature(to_blocked).parameters:
        return None
    return lambda scale: to_blocked(scale, swizzle_32_8=True).flatten()


def layout_scales(scale: torch.Tensor, layout: str) -> torch.Tensor:
    """A ``rows x K/block`` block-scale matrix in ``layout`` (a key of :data:`SCALE_LAYOUTS`)."""
    if layout == "32x4x4":
        return swizzle_scales(scale)
    if layout == "32x8":
        swizzle = rocm_32x8_swizzler()
        if swizzle is None:
            raise ValueError("block-scale layout 32x8 needs torch's SwizzleType.SWIZZLE_32_8 and its builder")
        return swizzle(scale)
    if layout != "none":
        raise ValueError(f"block-scale layout {layout!r} is not one of {', '.join(SCALE_LAYOUTS)}")
    return scale


ScaledOp = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]], torch.Tensor]


def scaled_op(dtype: DType, layout: str = "32x4x4", in_place: bool = True, fast_accum: bool = True) -> ScaledOp:
    """The call that is timed: ``op(a, b, out, (scale_a, scale_b))`` for one operand set (batch 1).

    ``a`` is ``1 x m x k`` row-major, ``b`` is ``1 x k x n`` column-major (packed two per byte along
    K for e2m1); ``out`` is the ``1 x m x n`` bf16 result (written in place by ``torch._scaled_mm``;
    the block formats return a new tensor; so does every format when not ``in_place``, the op
    ``torch.compile`` is given: see :func:`mfu_sweep.measure.backends.operands.gemm_call`). ``layout`` is the
    block scales' layout (:data:`SCALE_LAYOUTS`); ``fast_accum`` is torch's ``use_fast_accum`` of the fp8 formats
    (the block formats accumulate in float32 whatever it says, and are called without it).
    """
    if dtype.scaling in ("tensor", "row"):
        def fp8_mm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, scales: tuple) -> torch.Tensor:
            into = {"out": out[0]} if in_place else {}
            return torch._scaled_mm(a[0], b[0], scale_a=scales[0], scale_b=scales[1], out_dtype=torch.bfloat16,
                                    use_fast_accum=fast_accum, **into)

        return fp8_mm
    import torch.nn.functional as F

    recipe = F.ScalingType.BlockWise1x16 if dtype.block == 16 else F.ScalingType.BlockWise1x32
    swizzle = getattr(F.SwizzleType, SCALE_LAYOUTS[layout])

    def block_mm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, scales: tuple) -> torch.Tensor:
        return F.scaled_mm(a[0], b[0], scales[0], recipe, scales[1], recipe, swizzle_a=swizzle, swizzle_b=swizzle,
                           output_dtype=torch.bfloat16)

    return block_mm
