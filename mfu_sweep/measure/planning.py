"""What a sweep measures: its shapes (explicit, a shape file, families, the square family), the tasks over
dtypes and modes, and the defaults of its passes and budget. ``sweep.py`` runs the plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shape_files import read_shape_rows
from mfu_sweep.gemm.shapes import Shape, check_memory, parse_shape, points_for_range, square_family
from mfu_sweep.measure.task import Task

# Default square range: on an accelerator 1 MFLOP to 10 TFLOP per GEMM (s = 17088 at the top; the
# top decade is where the biggest chips differ), capped by device memory; on a 2-core CPU fp32 runs
# at ~0.1-0.2 TFLOP/s, so 20 GFLOP (s = 2176) keeps the default sweep within a couple of minutes.
ACCEL_RANGE = (1e6, 1e13)
CPU_RANGE = (1e6, 2e10)
# Square sizes per decade of FLOPs when --points is not given: 4 put three or more FLOP counts in
# every one-decade window, so compare's run rule (two FLOP counts) can call a lead one decade wide.
POINTS_PER_DECADE = 4.0
# Passes over the shapes when --repeats is not given (docs/sweeping.md, "Passes", has the measurements):
# on this project's 2-core CPU VMs a shape's median moves by an sd of ~27% of log-time between runs
# (median over shapes; 60% under heavy load) against a +-1% within-run interval, and heavy-tailed,
# so five passes: a median two bad passes cannot move. On accelerators a pass is costlier (29 shapes
# at 1 s plus first calls); three is the fewest whose median one bad pass cannot move (not measured).
CPU_REPEATS = 5
ACCEL_REPEATS = 3
# --budget-s when not given: per pass, so R passes cost about what one long pass did.
BUDGET_ONE_PASS_S = 2.0
BUDGET_PER_PASS_S = 1.0


def default_repeats(on_cpu: bool) -> int:
    """Passes over the shapes when ``--repeats`` is not given."""
    return CPU_REPEATS if on_cpu else ACCEL_REPEATS


def default_budget(repeats: int) -> float:
    """Measurement budget per shape and pass when ``--budget-s`` is not given."""
    return BUDGET_ONE_PASS_S if repeats == 1 else BUDGET_PER_PASS_S


def select_shapes(shape_specs: Sequence[str] = (), shape_file: str | None = None, families: Sequence[str] = (),
                  min_flop: float | None = None, max_flop: float | None = None, points: int | None = None,
                  align: int = 64, on_cpu: bool = True) -> list[tuple[Shape, str]]:
    """(shape, family) pairs from explicit shapes, a CSV, workload families, else the square family.

    The square family is added when nothing else is asked for, when ``families`` names it
    (``square``, the family name its records carry), or when a FLOP range is given; its default
    range depends on the device (see ``CPU_RANGE``) and ``points`` defaults to
    ``POINTS_PER_DECADE`` per decade of it.
    Duplicates keep their first family.
    """
    from mfu_sweep.gemm.workloads import is_square_family, sweep_shapes

    first: dict[Shape, str] = {}  # each shape once, with its first family (a million-row file: no list beside it)
    for spec in shape_specs:
        first.setdefault(parse_shape(spec), "custom")
    if shape_file:
        for row in read_shape_rows(shape_file):
            first.setdefault(row.shape, row.family or "csv")
    square = False
    for family in families:  # --shapes square: the family its records name, beside the others
        square = is_square_family(family) or square
        for s, f in [] if is_square_family(family) else sweep_shapes(family):
            first.setdefault(s, f)
    if not first or square or min_flop is not None or max_flop is not None:
        lo, hi = CPU_RANGE if on_cpu else ACCEL_RANGE
        lo, hi = min_flop or lo, max_flop or hi
        if points is None:
            points = points_for_range(lo, hi, POINTS_PER_DECADE) if hi >= lo else 2
        for s in square_family(lo, hi, points, align):
            first.setdefault(s, "square")
    return list(first.items())


def make_tasks(shapes: Sequence[tuple[Shape, str]], dtypes: Sequence[str], modes: Sequence[str],
               **task_kw: Any) -> list[Task]:
    """Every (dtype, mode, shape) as a task, after refusing shapes with absurd memory needs."""
    tasks = [Task(shape=s, dtype=d, mode=m, family=f, **task_kw) for d in dtypes for m in modes for s, f in shapes]
    for t in tasks:
        check_memory(t.shape, get_dtype(t.dtype))
    return tasks


def shape_file_passes(shape_file: str | None) -> dict[Shape, int]:
    """The ``passes`` column of a shape file, shape -> passes (rows without one are left out)."""
    if not shape_file:
        return {}
    return {row.shape: row.passes for row in read_shape_rows(shape_file) if row.passes is not None}


def limit_passes(tasks: Sequence[Task], passes: dict[Shape, int]) -> list[Task]:
    """Tasks whose shape has a ``passes`` entry run in that many passes only (``Task.passes``)."""
    return [replace(t, passes=passes[t.shape]) if t.shape in passes else t for t in tasks]


def sweep_repeats(repeats: int | None, on_cpu: bool, passes: dict[Shape, int], every_shape_has_passes: bool) -> int:
    """Passes of the sweep: ``--repeats`` (or the default), raised to the largest ``passes`` of a shape file.

    When every shape comes from a shape file with a ``passes`` column and ``--repeats``
    is not given, the column alone decides (no default passes over nothing).
    """
    most = max(passes.values(), default=1)
    if repeats is None and every_shape_has_passes and passes:
        return most
    return max(repeats or default_repeats(on_cpu), most)
