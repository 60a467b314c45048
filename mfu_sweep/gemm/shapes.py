"""GEMM shapes: parsing, FLOP and byte arithmetic, and shape families.

A shape is ``(batch, m, n, k)``: ``batch`` independent products of an
``m x k`` by ``k x n`` matrix. FLOPs are ``2*batch*m*n*k``; the minimum memory
traffic is every operand read once and the result written once.

Two more fields make a shape the GEMM problem a kernel sees:

``layout``
    How the operands lie in memory, one letter for A and one for B, as BLAS's
    op flags for row-major (PyTorch) tensors: ``n``, the operand is stored as the
    product uses it (A ``m x k``, B ``k x n``, rows contiguous); ``t``, it is stored
    transposed (A as ``k x m``, B as ``n x k``, rows contiguous) and the GEMM is
    handed a transposed view. ``nt`` is ``x @ W.t()``, ``nn.Linear``'s forward.
``groups``
    A grouped GEMM (one call over many experts, ``torch._grouped_mm``): the sizes
    of the groups along ``group_dim``. ``m``: ``len(groups)`` products of
    ``groups[i] x k`` by its own ``k x n`` matrix (m is their sum); ``k``: products
    ``m x groups[i]`` by ``groups[i] x n``, each into its own ``m x n`` result
    (k is their sum; an MoE layer's weight gradients). FLOPs stay ``2*m*n*k``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from mfu_sweep.gemm.dtypes import DType

# Refuse shapes whose operands alone would need more than this many bytes:
# far beyond any single accelerator's memory, so almost surely a typo.
MAX_OPERAND_BYTES = 4 * 2**40
MAX_DIM = 2**24
MAX_GROUPS = 2**16  # groups of one grouped GEMM (MoE layers have up to a few hundred experts)
# The square family on a device that reports its memory keeps a shape only when one measurement's
# working set (see ``working_bytes``) fits in this fraction of it (the rest: runtime, allocator slack).
DEVICE_MEMORY_FRACTION = 0.5
MAX_PASSES = 1000  # passes of one shape at most: --repeats and a shape file's passes column
# Sizes below 4*align round to align/2, below 2*align to align/4, ..., never below this multiple.
MIN_SMALL_ALIGN = 16


# Operand layouts (see the module docstring); nn is the default and the layout of files without one.
LAYOUTS = ("nn", "nt", "tn", "tt")
DEFAULT_LAYOUT = "nn"
GROUP_DIMS = ("m", "k")

# The columns of a shape file: the shape, and where it comes from and how many passes measure it.
SHAPE_FILE_COLUMNS = ("batch", "m", "n", "k", "layout", "groups", "family", "passes")
# Columns `mfu-sweep shapes --csv` adds to describe each row; a shape file may carry them, the sweep ignores them.
DESCRIPTIVE_COLUMNS = ("role", "pass", "count", "flops", "bytes", "intensity")
KNOWN_COLUMNS = SHAPE_FILE_COLUMNS + DESCRIPTIVE_COLUMNS


class ShapeError(ValueError):
    """A shape or shape list is invalid; the message names the bad value."""


@dataclass(frozen=True, order=True, slots=True)  # slots: a million-shape plan holds a million of them
class Shape:
    """One GEMM problem: ``batch`` products of (m x k) @ (k x n), its operand ``layout`` and, for a grouped
    GEMM, the ``groups`` along ``group_dim`` (see the module docstring)."""

    batch: int
    m: int
    n: int
    k: int
    layout: str = DEFAULT_LAYOUT
    groups: tuple[int, ...] = ()
    group_dim: str = "m"

    def __post_init__(self) -> None:
        for field in ("batch", "m", "n", "k"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ShapeError(f"shape field {field}={value!r} is not an integer")
            if value <= 0:
                raise ShapeError(f"shape field {field}={value} must be positive")
            if value > MAX_DIM:
                raise ShapeError(f"shape field {field}={value} exceeds the limit {MAX_DIM}")
        if self.layout not in LAYOUTS:
            raise ShapeError(f"shape layout={self.layout!r} is not one of {', '.join(LAYOUTS)}")
        if self.groups or self.group_dim != "m":
            _check_groups(self)

    @property
    def grouped(self) -> bool:
        """Whether this is a grouped GEMM (one call over ``len(groups)`` products)."""
        return bool(self.groups)

    @property
    def flops(self) -> float:
        """Floating-point operations of the product (one multiply-add = 2)."""
        return 2.0 * self.batch * self.m * self.n * self.k

    def operand_elements(self) -> tuple[int, int, int]:
        """Elements of A, B and C (a grouped GEMM has one B, or one C, per group)."""
        per = len(self.groups) or 1
        a, b, c = self.m * self.k, self.k * self.n, self.m * self.n
        if self.groups and self.group_dim == "m":
            b *= per
        elif self.groups:
            c *= per
        return self.batch * a, self.batch * b, self.batch * c

    def elements(self) -> int:
        """Elements of A, B and C together."""
        return sum(self.operand_elements())

    def bytes(self, dtype: DType) -> float:
        """Minimum bytes moved: read A and B (and their block scales) once, write C once."""
        a, b, c = self.operand_elements()
        return float((a + b) * dtype.input_bytes_per_element + c * dtype.output_bytes)

    def intensity(self, dtype: DType) -> float:
        """Arithmetic intensity in FLOP per byte."""
        return self.flops / self.bytes(dtype)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"batch": self.batch, "m": self.m, "n": self.n, "k": self.k}
        if self.layout != DEFAULT_LAYOUT:
            data["layout"] = self.layout
        if self.groups:
            data.update(groups=list(self.groups), group_dim=self.group_dim)
        return data

    @classmethod
    def from_json(cls, data: object) -> Shape:
        if isinstance(data, dict) and len(data) <= 4:  # the usual case: one shared Shape per distinct shape
            dims = (data.get("batch", 1), data.get("m"), data.get("n"), data.get("k"))
            if all(type(d) is int for d in dims) and len(data) == 3 + ("batch" in data):
                return _shape(*dims)
        if not isinstance(data, dict):
            raise ShapeError(f"shape must be an object, got {data!r}")
        missing = [f for f in ("m", "n", "k") if f not in data]
        if missing:
            raise ShapeError(f"shape {data!r} lacks field {missing[0]}")
        groups = data.get("groups") or ()
        if not isinstance(groups, (list, tuple)) or not all(type(g) is int for g in groups):
            raise ShapeError(f"shape field groups={groups!r} must be a list of integers")
        return _shape(int_field(data, "batch", 1), int_field(data, "m"), int_field(data, "n"), int_field(data, "k"),
                      str(data.get("layout", DEFAULT_LAYOUT)), tuple(groups), str(data.get("group_dim", "m")))

    def __str__(self) -> str:
        core = f"{self.m}x{self.n}x{self.k}"
        text = core if self.batch == 1 else f"{self.batch}x{core}"
        if self.layout != DEFAULT_LAYOUT:
            text += f":{self.layout}"
        return text + (f":{format_groups(self)}" if self.groups else "")


def _check_groups(shape: Shape) -> None:
    if shape.group_dim not in GROUP_DIMS:
        raise ShapeError(f"shape group_dim={shape.group_dim!r} is not one of {', '.join(GROUP_DIMS)}")
    if not shape.groups:
        raise ShapeError(f"shape group_dim={shape.group_dim!r} without groups")
    if shape.batch != 1:
        raise ShapeError(f"a grouped shape has batch 1, not {shape.batch}")
    if len(shape.groups) > MAX_GROUPS:
        raise ShapeError(f"shape has {len(shape.groups)} groups, more than {MAX_GROUPS}")
    if any(isinstance(g, bool) or not isinstance(g, int) or g < 0 for g in shape.groups):
        raise ShapeError(f"shape groups={list(shape.groups)!r} must be non-negative integers")
    total, dim = sum(shape.groups), getattr(shape, shape.group_dim)
    if total != dim:
        raise ShapeError(f"shape groups sum to {total}, not {shape.group_dim}={dim}")


def format_groups(shape: Shape) -> str:
    """``m=512*8`` or ``k=700,300*3``: the group sizes along ``group_dim``, runs of equal sizes as ``size*count``."""
    runs: list[list[int]] = []
    for g in shape.groups:
        if runs and runs[-1][0] == g:
            runs[-1][1] += 1
        else:
            runs.append([g, 1])
    return f"{shape.group_dim}=" + ",".join(f"{g}*{c}" if c > 1 else str(g) for g, c in runs)


def parse_groups(text: str) -> tuple[str, tuple[int, ...]]:
    """``m=512*8`` -> ("m", (512,)*8): the inverse of :func:`format_groups`."""
    dim, sep, body = text.strip().lower().partition("=")
    if not sep or dim not in GROUP_DIMS or not body:
        raise ShapeError(f"groups {text!r} must be m=SIZES or k=SIZES, e.g. m=512*8 or k=700,300*3")
    sizes: list[int] = []
    for token in body.split(","):
        size, star, count = token.strip().partition("*")
        if not (size.isascii() and size.isdigit()) or (star and not (count.isascii() and count.isdigit())):
            raise ShapeError(f"groups {text!r}: {token.strip()!r} is not SIZE or SIZE*COUNT")
        repeat = int(count) if star else 1
        if len(sizes) + repeat > MAX_GROUPS:  # before the list is built: m=1*10000000000 is one short line
            raise ShapeError(f"groups {text[:60]!r}: more than {MAX_GROUPS} groups")
        sizes += [int(size)] * repeat
    return dim, tuple(sizes)


def with_layout(shape: Shape, layout: str) -> Shape:
    """``shape`` in another operand layout."""
    return shape if shape.layout == layout else replace(shape, layout=layout)


def parse_layouts(text: str) -> tuple[str, ...]:
    """``nn,nt`` -> ("nn", "nt"); every layout once, in the order given; ShapeError naming a bad one."""
    out: list[str] = []
    for token in filter(None, (t.strip().lower() for t in text.split(","))):
        if token not in LAYOUTS:
            raise ShapeError(f"layout {token!r} is not one of {', '.join(LAYOUTS)}")
        if token not in out:
            out.append(token)
    if not out:
        raise ShapeError(f"layout list {text!r} is empty (use {','.join(LAYOUTS)})")
    return tuple(out)


@lru_cache(maxsize=1 << 16)
def _shape(batch: int, m: int, n: int, k: int, layout: str = DEFAULT_LAYOUT, groups: tuple[int, ...] = (),
           group_dim: str = "m") -> Shape:
    """One frozen ``Shape`` per distinct shape read (a fleet's files repeat 40 shapes 160,000 times);
    only ever called with plain ints, so ``True`` and ``1`` never share an entry."""
    return Shape(batch, m, n, k, layout, groups, group_dim)


def int_field(data: dict, name: str, default: int | None = None) -> int:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ShapeError(f"shape field {name}={value!r} is not an integer")
    return value


def working_bytes(shape: Shape, dtype: DType) -> float:
    """Device memory one measurement of ``shape`` needs at least.

    One operand set (A, B, C), the float32 staging copy of the largest operand
    (inputs are drawn in float32 and converted on the device) and the float64
    copy of one batch entry of B for the numerical check.
    """
    largest = max(shape.operand_elements()) // shape.batch
    return shape.bytes(dtype) + 4.0 * largest + 8.0 * shape.k * shape.n


def fits_device(shape: Shape, dtype: DType, memory_bytes: float | None,
                fraction: float = DEVICE_MEMORY_FRACTION) -> bool:
    """Whether ``working_bytes`` stays within ``fraction`` of the device's memory (True when unknown)."""
    return memory_bytes is None or working_bytes(shape, dtype) <= fraction * memory_bytes


def check_memory(shape: Shape, dtype: DType) -> None:
    """Reject shapes whose operands need an absurd amount of memory."""
    need = shape.bytes(dtype)
    if need > MAX_OPERAND_BYTES:
        limit = MAX_OPERAND_BYTES / 2**30
        raise ShapeError(f"shape {shape} needs {need / 2**30:.0f} GiB for its operands (limit {limit:.0f} GiB)")


def _parse_dim(text: str, spec: str) -> int:
    token = text.strip()
    if not (token.isascii() and token.isdigit()):  # '¹' and other Unicode digits pass isdigit()
        raise ShapeError(f"shape {spec!r}: dimension {token!r} is not a positive integer")
    return int(token)


def parse_shape(spec: str) -> Shape:
    """Parse ``MxNxK`` or ``BxMxNxK`` (``x`` or ``,`` separated), optionally followed by ``:LAYOUT`` and, for a
    grouped GEMM, ``:m=SIZES`` or ``:k=SIZES`` (what ``str(shape)`` writes).

    >>> parse_shape("2x512x1024x256")
    Shape(batch=2, m=512, n=1024, k=256, layout='nn', groups=(), group_dim='m')
    >>> str(parse_shape("512x1024x256:nt"))
    '512x1024x256:nt'
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ShapeError(f"shape {spec!r} is empty")
    head, *tails = spec.strip().lower().split(":")
    parts = head.replace(",", "x").split("x")
    if len(parts) not in (3, 4):
        raise ShapeError(f"shape {spec!r} must be MxNxK or BxMxNxK")
    dims = [_parse_dim(p, spec) for p in parts]
    if len(dims) == 3:
        dims.insert(0, 1)
    extra: dict[str, Any] = {}
    try:
        for tail in tails:
            if "=" in tail and "groups" not in extra:
                extra["group_dim"], extra["groups"] = parse_groups(tail)
            elif tail.strip() in LAYOUTS and "layout" not in extra:
                extra["layout"] = tail.strip()
            else:
                raise ShapeError(f"{tail!r} is not a layout ({', '.join(LAYOUTS)}) or m=/k= group sizes")
        return Shape(*dims, **extra)
    except ShapeError as exc:
        raise ShapeError(f"shape {spec!r}: {exc}") from None


def _round_to(value: float, align: int) -> int:
    return max(align, int(round(value / align)) * align)


def size_align(value: float, align: int) -> int:
    """The multiple a square size near ``value`` is rounded to.

    ``align`` itself from ``4*align`` up; below, the multiple halves (while even)
    down to ``MIN_SMALL_ALIGN``: a multiple of 64 under s = 256 moves the FLOP
    count by up to +-75% and leaves one shape between 1 and 10 MFLOP (64^3 and
    128^3 are a factor 8 apart), so the small end could not resolve a decade.
    """
    a = align
    while a // 2 >= MIN_SMALL_ALIGN and a % 2 == 0 and value < 4 * a:
        a //= 2
    return a


def square_family(min_flop: float, max_flop: float, points: int, align: int = 64) -> list[Shape]:
    """Square shapes ``s x s x s`` log-spaced in FLOPs over ``[min_flop, max_flop]``.

    Sizes are rounded to a multiple of ``align`` (of a smaller power of two
    below ``4*align``, see :func:`size_align`); duplicates after rounding are
    dropped, so fewer than ``points`` shapes may come back at small sizes.
    """
    if not (math.isfinite(min_flop) and min_flop > 0):
        raise ShapeError(f"min-flop={min_flop!r} must be a positive number")
    if not (math.isfinite(max_flop) and max_flop >= min_flop):
        raise ShapeError(f"max-flop={max_flop!r} must be a number >= min-flop={min_flop!r}")
    if points < 1:
        raise ShapeError(f"points={points!r} must be at least 1")
    if align < 1:
        raise ShapeError(f"align={align!r} must be at least 1")
    if points == 1:
        targets = [max_flop]
    else:
        step = (math.log(max_flop) - math.log(min_flop)) / (points - 1)
        targets = [math.exp(math.log(min_flop) + i * step) for i in range(points)]
    sides = [(t / 2.0) ** (1 / 3) for t in targets]
    sizes = sorted({_round_to(v, size_align(v, align)) for v in sides})
    return [Shape(1, s, s, s) for s in sizes]


def points_for_range(min_flop: float, max_flop: float, per_decade: float = 4.0) -> int:
    """Points for ``square_family`` so that the range holds ``per_decade`` sizes per decade of FLOPs.

    Four per decade put three or more distinct FLOP counts in every one-decade
    window of the range, so a lead one decade wide meets ``compare``'s run rule
    (two consecutive FLOP counts) wherever it lies.
    """
    decades = math.log10(max_flop / min_flop)
    return max(2, math.ceil(per_decade * decades - 1e-9) + 1)


def grid_family(ms: Sequence[int], ns: Sequence[int], ks: Sequence[int]) -> list[Shape]:
    """Every combination of the given m, n and k values (batch 1)."""
    return [Shape(1, m, n, k) for k in ks for m in ms for n in ns]


def unique_in_order(shapes: Iterable[Shape]) -> list[Shape]:
    """Drop duplicates, keep order of first appearance."""
    seen: dict[Shape, None] = {}
    for s in shapes:
        seen.setdefault(s, None)
    return list(seen)
