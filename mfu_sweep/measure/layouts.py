"""Operand layouts as a sweep axis, and the shapes a dtype can run at all (torch-free: decided in the parent).

``sweep --layout nn,nt,tn,tt`` sweeps every shape in each layout (:func:`in_layouts`); without it a
shape keeps its own (a shape file's ``layout`` column, a family's natural layout, else ``nn``). The
scaled formats take one layout (A row-major, B column-major: ``nt``): their tasks in another layout are
swept in ``nt`` and a note says so (:func:`runnable_tasks`), never silently. A scaled format cannot run
batched or grouped shapes, nor K that is not a multiple of its block: such tasks are left out, with a
note, before any work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from mfu_sweep.gemm.dtypes import DType, get_dtype
from mfu_sweep.gemm.shapes import Shape, with_layout
from mfu_sweep.measure.task import Task
from mfu_sweep.util.text import counted


def in_layouts(shapes: Sequence[tuple[Shape, str]], layouts: Sequence[str] | None) -> list[tuple[Shape, str]]:
    """Every (shape, family) in each of ``layouts``, layout by layout; ``None`` keeps each shape's own."""
    if not layouts:
        return list(shapes)
    out: dict[Shape, str] = {}
    for layout in layouts:
        for shape, family in shapes:
            out.setdefault(with_layout(shape, layout), family)
    return list(out.items())


def shape_problem(shape: Shape, dtype: DType) -> str | None:
    """Why ``dtype`` cannot run ``shape`` on any device, whatever its layout, or None."""
    if dtype.scaling == "none":
        return None
    if shape.batch != 1 or shape.grouped:
        what = "grouped shapes" if shape.grouped else f"batch {shape.batch}"
        return f"{dtype.name} (a scaled matmul) runs batch 1 only, not {what}"
    if dtype.block and shape.k % dtype.block:
        return f"{dtype.name} needs K divisible by its block of {dtype.block}, not {shape.k}"
    return None


def _one_per_dtype(tasks: Sequence[Task]) -> list[Task]:
    return list({t.dtype: t for t in tasks}.values())


def _unique(tasks: Sequence[Task]) -> bool:
    """Whether no two tasks share shape, dtype and mode (checked per dtype and mode: sets of shapes, no tuples)."""
    seen: dict[tuple[str, str], set[Shape]] = {}
    for t in tasks:
        shapes = seen.setdefault((t.dtype, t.mode), set())
        if t.shape in shapes:
            return False
        shapes.add(t.shape)
    return True


# torch._grouped_mm's CUTLASS kernel (bf16 on NVIDIA sm90/sm100) moves each group's operands by TMA, which
# needs 16-byte aligned addresses: a group boundary along a dimension an operand is contiguous in must fall on a
# multiple of 16 bytes.
TMA_ALIGN_BYTES = 16


def grouped_problem(shape: Shape, element_bytes: float) -> str | None:
    """Why torch._grouped_mm's CUTLASS kernel would stop ``shape`` with a device-side assert, or None.

    The kernel checks each group on the device (``prepare_grouped_gemm_data`` in torch's
    ``GroupMMCommon.cuh``), and a failed check poisons the CUDA context: every later shape in that
    process fails too. So the same rules are checked here, before launch:

    * groups along k: every group is non-empty, unless A is column-major and B row-major (layout ``tn``);
    * a group boundary (every group but the last) along a dimension an operand is contiguous in falls on a
      multiple of 16 bytes: along k when A is row-major or B column-major; along m when A is column-major.
    """
    if not shape.grouped:
        return None
    a_row_major, b_row_major = shape.layout[0] == "n", shape.layout[1] == "n"
    sizes = list(shape.groups)
    if shape.group_dim == "k":
        if not (not a_row_major and b_row_major) and 0 in sizes:
            return (f"torch._grouped_mm (CUTLASS) needs every group along k non-empty unless A is column-major and B "
                    f"row-major (layout tn); group {sizes.index(0)} of {shape} is empty in layout {shape.layout}")
        aligned = a_row_major or not b_row_major
    else:
        aligned = not a_row_major
    align = TMA_ALIGN_BYTES / element_bytes
    if aligned:
        for g, size in enumerate(sizes[:-1]):
            if size % align:
                return (f"torch._grouped_mm (CUTLASS) needs each group along {shape.group_dim} but the last to be a "
                        f"multiple of {TMA_ALIGN_BYTES} bytes ({align:g} elements) in layout {shape.layout}; group {g} "
                        f"of {shape} has {size}")
    return None


def runnable_tasks(tasks: Sequence[Task]) -> tuple[list[Task], list[str]]:
    """The tasks a dtype can run, moved to its layout where it takes only one, and a note per dtype for the rest.

    A task in a layout its dtype does not take runs in the dtype's layout (one task per resulting
    shape); a task no layout helps (:func:`shape_problem`) is left out. The notes say which and why.
    """
    kept: dict[tuple[Shape, str, str], Task] = {}
    moved: dict[str, set[str]] = {}
    dropped: dict[str, list[str]] = {}
    if all(get_dtype(t.dtype).scaling == "none" for t in _one_per_dtype(tasks)) and _unique(tasks) \
            and all(get_dtype(t.dtype).runs_layout(t.shape.layout) for t in tasks):
        return list(tasks), []  # nothing to move, drop or merge (a plain sweep: a million tasks, no dict)
    for task in tasks:
        dt = get_dtype(task.dtype)
        problem = shape_problem(task.shape, dt)
        if problem:
            dropped.setdefault(task.dtype, []).append(problem)
            continue
        if not dt.runs_layout(task.shape.layout):
            moved.setdefault(task.dtype, set()).add(task.shape.layout)
            task = replace(task, shape=with_layout(task.shape, dt.layouts[0]))
        kept.setdefault((task.shape, task.dtype, task.mode), task)
    notes = [f"{name} takes layout {'/'.join(get_dtype(name).layouts)} only (A row-major, B column-major): shapes "
             f"asked in {', '.join(sorted(was))} are swept in {get_dtype(name).layouts[0]}"
             for name, was in moved.items()]
    notes += [f"left out {counted(len(why), 'shape')} in {name}: {why[0]}" + (" (and others)" if len(why) > 1 else "")
              for name, why in dropped.items()]
    return list(kept.values()), notes
