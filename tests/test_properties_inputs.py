"""What the tool reads and plans, checked as properties (issue 52): repeats keyed by the whole shape, groups included;
tritonbench's mode per backend, whatever the operators of the file; the block-scaled formats' rule on K.

Every sweep and table here is SYNTHETIC (made-up numbers in the tools' formats, nothing measured). Each test names
the slip it catches; each slip survived the tests of its own package (the repeat check only a round trip in
another package noticed, the other two nothing).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from synthetic import make_sweep_doc

from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.importers import import_sources
from mfu_sweep.measure.layouts import runnable_tasks, shape_problem
from mfu_sweep.measure.task import Task
from mfu_sweep.records.checks import record_problems
from mfu_sweep.records.results import parse_document

# -- repeats: one record per pass, shape (groups included), dtype and mode -------------------------------------


def _grouped_doc(splits: list[tuple[int, ...]]) -> dict:
    shapes = [Shape(1, 512, 256, 128, "nn", s) for s in splits]
    return make_sweep_doc("synthetic-moe", shapes=shapes, flops=None, n_samples=5, P_tflops=100.0, W_tbs=1.0, t0_s=5e-6)


def test_a_sweep_that_splits_one_m_several_ways_is_no_repeat() -> None:
    """One total M split into experts three ways (skewed and balanced routing), each measured once: three shapes,
    no repeat, and the file reads back whole. Keyed by the sizes without the group list, the repeat check refused
    the second and third record and every reader with them."""
    doc = _grouped_doc([(128, 384), (256, 256), (64, 64, 128, 256)])
    assert record_problems(doc["sweeps"][0] if "sweeps" in doc else doc) == {}
    [sweep] = parse_document(doc)
    assert sorted(r.shape.groups for r in sweep.records) == [(64, 64, 128, 256), (128, 384), (256, 256)]


def test_the_same_grouped_shape_twice_in_a_pass_is_a_repeat() -> None:
    """The same split measured twice in one pass is a repeat, named with its groups (the check is not blind to
    grouped shapes either way)."""
    doc = _grouped_doc([(128, 384), (256, 256)])
    body = doc["sweeps"][0] if "sweeps" in doc else doc
    body["records"].append(json.loads(json.dumps(body["records"][0])))
    problems = record_problems(body)
    assert list(problems) == [len(body["records"]) - 1]
    assert "repeats records/0" in problems[len(body["records"]) - 1]
    assert "2 groups along m" in problems[len(body["records"]) - 1]


# -- tritonbench: the mode of each backend ---------------------------------------------------------------------

OPS = ("gemm", "addmm")
BACKENDS = {"aten_matmul": "eager", "triton_tutorial_matmul": "eager", "pt2_triton_matmul": "compile"}


def _nightly(tmp_path: Path, ops: tuple[str, ...]) -> Path:
    """A SYNTHETIC tritonbench --output-json of ``ops``, each with the three backends at two shapes."""
    metrics = {}
    for op in ops:
        for backend in BACKENDS:
            for i, m in enumerate((1024, 2048)):
                metrics[f"tritonbench_{op}_fwd[x_({m}, {m}, {m})-{backend}]_latency"] = f"{0.1 * (i + 1):.3f}"
    path = tmp_path / f"{'_'.join(ops)}.json"
    path.write_text(json.dumps({"env": {"device": "NVIDIA H100 80GB HBM3"}, "metrics": metrics}))
    return path


@pytest.mark.parametrize("ops", [OPS[:1], OPS], ids=["one operator", "two operators"])
def test_tritonbench_modes_follow_the_backend_in_every_operator(tmp_path: Path, ops: tuple[str, ...]) -> None:
    """A pt2_ backend (torch.compile chose the kernel) is compile, every other backend eager, in a file of one
    operator (keys ``<backend>``) and of two (keys ``<op>.<backend>``): six series, two of them compile. Read by
    its key's prefix instead of the backend's, the two pt2 series of a two-operator file are eager."""
    sweeps = dict(import_sources("tritonbench", [_nightly(tmp_path, ops)], dtype="bf16").sweeps)
    assert len(sweeps) == len(ops) * len(BACKENDS)
    for label, sweep in sweeps.items():
        backend = sweep.extra["import"]["backend"].split(".")[-1]
        assert {r.mode for r in sweep.records} == {BACKENDS[backend]}, label
    assert sum(r.mode == "compile" for s in sweeps.values() for r in s.records[:1]) == len(ops)


# -- block-scaled formats: K must be a multiple of the block -----------------------------------------------------

BLOCKED = [name for name in ("mxfp8", "mxfp4", "nvfp4") if get_dtype(name).block]


@pytest.mark.parametrize("name", BLOCKED)
def test_block_scaled_formats_need_k_a_multiple_of_their_block_and_nothing_of_m_or_n(name: str) -> None:
    """Per block-scaled format: a shape whose K is a multiple of the block runs whatever M and N are (odd ones
    included), one whose K is not is left out with a note naming K, whatever M and N are. Checked on N instead of
    K, a shape that cannot run is planned (and fails on the GPU) and one that can is left out."""
    block = get_dtype(name).block
    runs = [Shape(1, m, n, block * j, "nt") for m in (7, block, 3 * block + 1) for n in (5, block, 2 * block + 3)
            for j in (1, 3, 8)]
    refused = [replace(s, k=s.k + d) for s in runs for d in (1, block // 2) if (s.k + d) % block]
    for shape in runs:
        assert shape_problem(shape, get_dtype(name)) is None, shape
    for shape in refused:
        assert f"K divisible by its block of {block}" in (shape_problem(shape, get_dtype(name)) or ""), shape
    tasks = [Task(shape=s, dtype=name, mode="eager", family="synthetic") for s in runs + refused]
    kept, notes = runnable_tasks(tasks)
    assert sorted(str(t.shape) for t in kept) == sorted(str(s) for s in runs)
    assert any(f"left out {len(refused)} shapes in {name}" in n for n in notes), notes
