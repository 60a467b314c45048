"""Operands of one shape as the GEMM sees them, the call that is timed, and its numerical check.

Three kinds of operand sets, all seeded. Where the backend draws on its device (``on_device``: CUDA), the
normals come from a generator on the device, so a GPU fills gigabytes of operands in milliseconds instead of one
host thread drawing every number; elsewhere from a host generator, copied over. The same seed gives the same
operands on one kind of device, not across kinds (the generators differ):

* plain dtypes: standard normals drawn in float32 and converted, each operand stored in its
  ``layout`` (``t``: the transpose is stored, rows contiguous, and the GEMM gets a transposed view);
* grouped shapes (``Shape.groups``): one ``torch._grouped_mm`` call over all groups, with
  ``offs`` the cumulative group ends;
* row- and block-scaled formats (``mfu_sweep.measure.backends.scaled``): float32 normals, their
  magnitude varied from block to block, quantized with the format's recipe; the unquantized operands of
  the first set are kept on the host for the check.

The check recomputes ``CHECK_ROWS`` sampled output rows in float64 and returns their relative
Frobenius error against the product of the operands the format stands for (for the quantized
formats: the unquantized float32 operands, so the error includes the quantization).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from mfu_sweep.gemm.dtypes import DType
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.backends.scaled import layout_scales, quantize, scaled_op, spread_blocks
from mfu_sweep.measure.layouts import shape_problem

CHECK_ROWS = 32


class Unsupported(Exception):
    """This (dtype, mode) cannot run on this device; becomes status ``unsupported``."""


@dataclass
class Inputs:
    """Rotating operand sets of one shape, plus output buffers.

    ``scales`` holds each set's (scale_a, scale_b) for the scaled formats; ``offs`` the group ends of a
    grouped shape; ``reference`` the first set's unquantized A (m x k) and B (k x n), float32 on the host.
    """

    a: list[torch.Tensor]
    b: list[torch.Tensor]
    out: list[torch.Tensor]
    scales: list[tuple[torch.Tensor, torch.Tensor]] | None = None
    offs: torch.Tensor | None = None
    reference: tuple[torch.Tensor, torch.Tensor] | None = None


def run_problem(shape: Shape, dtype: DType) -> str | None:
    """Why ``dtype`` cannot run ``shape`` as given (its layout included) on any device, or None."""
    problem = shape_problem(shape, dtype)
    if problem is None and not dtype.runs_layout(shape.layout):
        problem = (f"{dtype.name} takes layout {'/'.join(dtype.layouts)} only (A row-major, B column-major), "
                   f"not {shape.layout}")
    return problem


def generator(seed: int, device: torch.device, on_device: bool) -> torch.Generator:
    """The seeded generator operands are drawn from: on ``device`` when ``on_device``, else on the host."""
    return torch.Generator(device=device if on_device else "cpu").manual_seed(seed)


def operand(gen: torch.Generator, dims: tuple[int, int, int], transposed: bool, device: torch.device,
            target: torch.dtype) -> torch.Tensor:
    """A ``dims`` (batch x rows x cols) operand of standard normals; stored as its transpose when ``transposed``.

    Drawn where ``gen`` lives (the device or the host), then moved to ``device`` and converted."""
    batch, rows, cols = dims
    stored = (batch, cols, rows) if transposed else dims
    x = torch.randn(stored, generator=gen, dtype=torch.float32, device=gen.device).to(device=device, dtype=target)
    return x.transpose(-1, -2) if transposed else x


def plain_inputs(shape: Shape, dtype: DType, target: torch.dtype, sets: int, seed: int,
                 device: torch.device, on_device: bool = False) -> Inputs:
    """Seeded operands in ``shape.layout`` (fp8: unit tensor-wise scales) and zeroed outputs."""
    gen = generator(seed, device, on_device)
    ta, tb = (c == "t" for c in shape.layout)
    out_dtype = torch.bfloat16 if dtype.scaling == "tensor" else target
    a, b, out = [], [], []
    for _ in range(sets):
        a.append(operand(gen, (shape.batch, shape.m, shape.k), ta, device, target))
        b.append(operand(gen, (shape.batch, shape.k, shape.n), tb, device, target))
        out.append(torch.zeros((shape.batch, shape.m, shape.n), dtype=out_dtype, device=device))
    scales = None
    if dtype.scaling == "tensor":
        one = torch.ones((), dtype=torch.float32, device=device)
        scales = [(one, one)] * sets
    return Inputs(a, b, out, scales)


def grouped_inputs(shape: Shape, target: torch.dtype, sets: int, seed: int, device: torch.device,
                   on_device: bool = False) -> Inputs:
    """A grouped shape's operands: A ``m x k``; B one ``k x n`` per group (groups along m) or ``k x n``
    (groups along k); ``offs`` the cumulative group ends (int32)."""
    gen = generator(seed, device, on_device)
    ta, tb = (c == "t" for c in shape.layout)
    experts = len(shape.groups)
    along_m = shape.group_dim == "m"
    a, b, out = [], [], []
    for _ in range(sets):
        a.append(operand(gen, (1, shape.m, shape.k), ta, device, target)[0])
        b_dims = (experts, shape.k, shape.n) if along_m else (1, shape.k, shape.n)
        bb = operand(gen, b_dims, tb, device, target)
        b.append(bb if along_m else bb[0])
        out.append(torch.zeros((shape.m, shape.n) if along_m else (experts, shape.m, shape.n), dtype=target,
                               device=device))
    ends = torch.tensor(shape.groups, dtype=torch.int64).cumsum(0).to(torch.int32)
    return Inputs(a, b, out, offs=ends.to(device))


def scaled_inputs(shape: Shape, dtype: DType, target: torch.dtype, sets: int, seed: int, device: torch.device,
                  layout: str = "none", on_device: bool = False) -> Inputs:
    """Row- or block-scaled operands: A ``1 x m x k`` row-major, B ``1 x k x n`` column-major, quantized from
    float32 normals (where ``gen`` lives: :func:`generator`); block scales in ``layout`` (``32x4x4``: cuBLAS's
    tiled layout; :data:`~mfu_sweep.measure.backends.scaled.SCALE_LAYOUTS`). The first set's unquantized
    operands are kept on the host for the check."""
    gen = generator(seed, device, on_device)
    a, b, out, scales = [], [], [], []
    reference = None
    for i in range(sets):
        ref_a = spread_blocks(torch.randn((shape.m, shape.k), generator=gen, device=gen.device), gen)
        ref_b = spread_blocks(torch.randn((shape.n, shape.k), generator=gen, device=gen.device), gen)  # B: n x k
        qa, qb = quantize(ref_a, dtype, target), quantize(ref_b, dtype, target)
        a.append(qa.data.to(device).unsqueeze(0))
        b.append(qb.data.to(device).t().unsqueeze(0))
        if dtype.scaling == "row":
            sa, sb = qa.scale, qb.scale.reshape(1, shape.n)
        else:
            sa, sb = (layout_scales(q.scale, layout) for q in (qa, qb))
        scales.append((sa.to(device), sb.to(device)))
        out.append(torch.zeros((1, shape.m, shape.n), dtype=torch.bfloat16, device=device))
        if i == 0:
            reference = (ref_a.cpu(), ref_b.t().cpu())
    return Inputs(a, b, out, scales, reference=reference)


GemmOp = Callable[..., torch.Tensor]


def gemm_call(shape: Shape, dtype: DType, inputs: Inputs, layout: str = "none",
              in_place: bool = True, fast_accum: bool = True) -> tuple[GemmOp, list[tuple]]:
    """The op that is timed and each operand set's arguments: ``op(*args[i])`` runs one GEMM on set ``i``.

    ``layout`` is the block scales' layout and ``fast_accum`` the fp8 formats' ``use_fast_accum``
    (:func:`~mfu_sweep.measure.backends.scaled.scaled_op`).

    ``in_place``: the op writes into the set's preallocated output (``out=``), as eager mode times it. For
    ``torch.compile`` pass False: inductor compiles ``torch.mm(a, b, out=c)`` and ``torch.bmm`` to a GEMM
    into a buffer of its own and a copy kernel into ``c``, a whole extra pass over C that a compiled model
    does not make; the allocating op compiles to the one GEMM kernel (its result's memory is reused while it
    is timed: :func:`mfu_sweep.util.allocator.reused_allocations`).
    """
    problem = run_problem(shape, dtype)
    if problem:
        raise Unsupported(problem)
    sets = range(len(inputs.a))
    if dtype.scaling != "none":
        assert inputs.scales is not None
        args = [(inputs.a[i], inputs.b[i], inputs.out[i], inputs.scales[i]) for i in sets]
        return scaled_op(dtype, layout, in_place, fast_accum), args
    if shape.grouped:
        def grouped_mm(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
            return torch._grouped_mm(a, b, offs=offs)

        return grouped_mm, [(inputs.a[i], inputs.b[i], inputs.offs) for i in sets]
    args = [(inputs.a[i], inputs.b[i], inputs.out[i]) for i in sets]
    if not in_place:
        if shape.batch == 1:
            return (lambda a, b, out: torch.mm(a[0], b[0])), args
        return (lambda a, b, out: torch.bmm(a, b)), args
    if shape.batch == 1:
        return (lambda a, b, out: torch.mm(a[0], b[0], out=out[0])), args
    return (lambda a, b, out: torch.bmm(a, b, out=out)), args


# ----- the check ----------------------------------------------------------------------------------
def _rows(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``x.index_select(0, rows)``, also for 1-byte float8 tensors (gathered as bytes, which every
    device implements, then viewed back)."""
    if x.element_size() == 1 and x.is_floating_point():
        return x.view(torch.uint8).index_select(0, rows).view(x.dtype)
    return x.index_select(0, rows)


def _relative(got: torch.Tensor, ref: torch.Tensor) -> float:
    denom = torch.linalg.vector_norm(ref).item()
    err = torch.linalg.vector_norm(got.to(torch.float64) - ref).item()
    return err / denom if denom > 0 else err


def _sample(gen: torch.Generator, count: int, device: torch.device) -> torch.Tensor:
    return torch.randperm(count, generator=gen)[: min(CHECK_ROWS, count)].to(device)


def relative_error(inputs: Inputs, shape: Shape, seed: int, got: torch.Tensor | None = None) -> float:
    """Relative Frobenius error of sampled output rows of operand set 0 against a float64 reference.

    ``got`` is what the GEMM returned (the output buffer when the op writes in place). Only
    ``CHECK_ROWS`` rows are recomputed, so the check costs a small fraction of the GEMM.
    """
    out = inputs.out[0] if got is None else got
    gen = torch.Generator().manual_seed(seed + 1)
    if inputs.reference is not None:
        ref_a, ref_b = inputs.reference
        rows = _sample(gen, shape.m, torch.device("cpu"))
        ref = ref_a.index_select(0, rows).to(torch.float64) @ ref_b.to(torch.float64)
        return _relative(_rows(out.reshape(shape.m, shape.n), rows.to(out.device)).cpu(), ref)
    if shape.grouped:
        return _grouped_error(inputs, shape, gen, out)
    out = out.reshape(shape.batch, shape.m, shape.n)  # torch.mm returns the batch entry it wrote
    bi = int(torch.randint(shape.batch, (1,), generator=gen))
    rows = _sample(gen, shape.m, inputs.a[0].device)
    ref = _rows(inputs.a[0][bi], rows).to(torch.float64) @ inputs.b[0][bi].to(torch.float64)
    return _relative(_rows(out[bi], rows), ref)


def _grouped_error(inputs: Inputs, shape: Shape, gen: torch.Generator, out: torch.Tensor) -> float:
    """The check of one group (a non-empty one, chosen by the seed) of a grouped GEMM."""
    nonempty = [g for g, size in enumerate(shape.groups) if size]
    g = nonempty[int(torch.randint(len(nonempty), (1,), generator=gen))]
    start = sum(shape.groups[:g])
    end = start + shape.groups[g]
    a, b = inputs.a[0], inputs.b[0]
    if shape.group_dim == "m":
        rows = start + _sample(gen, end - start, a.device)
        ref = _rows(a, rows).to(torch.float64) @ b[g].to(torch.float64)
        return _relative(_rows(out, rows), ref)
    rows = _sample(gen, shape.m, a.device)
    ref = _rows(a, rows)[:, start:end].to(torch.float64) @ b[start:end].to(torch.float64)
    return _relative(_rows(out[g], rows), ref)


def make_inputs_for(shape: Shape, dtype: DType, target: torch.dtype, sets: int, seed: int, device: torch.device,
                    layout: str = "none", on_device: bool = False) -> Inputs:
    """The operand sets of ``shape`` in ``dtype`` (refusing what no device runs: :func:`shape_problem`), drawn on
    ``device`` when ``on_device``; block scales in ``layout``."""
    problem = run_problem(shape, dtype)
    if problem:
        raise Unsupported(problem)
    if dtype.quantized:
        return scaled_inputs(shape, dtype, target, sets, seed, device, layout, on_device)
    if shape.grouped:
        return grouped_inputs(shape, target, sets, seed, device, on_device)
    return plain_inputs(shape, dtype, target, sets, seed, device, on_device)
