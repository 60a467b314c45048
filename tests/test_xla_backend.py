"""The XLA backend for real on XLA's CPU device (PJRT_DEVICE=CPU).

Needs torch-xla, which pins its own torch (2.9.0): ``make test-xla`` builds
``.venv-xla`` and runs this file there. In the main environment torch_xla is
absent and every test here is skipped with that reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("PJRT_DEVICE", "CPU")
pytest.importorskip("torch_xla", reason="torch_xla is not installed here; `make test-xla` runs these in .venv-xla")

from click.testing import CliRunner  # noqa: E402

from mfu_sweep.cli import main  # noqa: E402
from mfu_sweep.gemm.shapes import Shape  # noqa: E402
from mfu_sweep.measure.backends import BackendError, resolve_device  # noqa: E402
from mfu_sweep.measure.backends.xla import MAX_GRAPH_CALLS, XlaBackend  # noqa: E402
from mfu_sweep.measure.bench import Task, run_task  # noqa: E402
from mfu_sweep.measure.timing import TimingConfig  # noqa: E402
from mfu_sweep.records.results import load_sweeps, validate_file  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("PJRT_DEVICE", "").upper() != "CPU",
                                reason="these tests expect XLA's CPU device (PJRT_DEVICE=CPU)")
FAST = TimingConfig(target_rel_ci=0.05, budget_s=0.2, min_samples=3, max_samples=20, warmup_s=0.0)


@pytest.fixture(scope="module")
def backend() -> XlaBackend:
    b = resolve_device("xla")
    assert isinstance(b, XlaBackend)
    return b


def test_describes_the_cpu_device(backend: XlaBackend) -> None:
    info = backend.describe()
    assert info.backend == "xla" and info.chip == "cpu" and info.details["device_kind"].lower() == "cpu"
    assert info.details["torch_xla"]
    peak = backend.peak({})
    assert peak.estimated and peak.tflops["fp32"] > 0


def test_absent_index_is_a_one_line_error() -> None:
    with pytest.raises(BackendError, match="only 1 XLA device") as info:
        resolve_device("xla:3")
    assert "\n" not in str(info.value)


def test_one_compile_per_shape_then_cache_hits(backend: XlaBackend) -> None:
    task = Task(shape=Shape(1, 96, 80, 64), dtype="fp32", timing=FAST, seed=3)
    first = run_task(backend, task)
    assert first.status == "ok", first.error
    xla = first.extra["xla"]
    assert xla["uncached_compiles"] == 1 and xla["compiles"] == 1 and xla["compile_s"] > 0
    assert first.compile_s == pytest.approx(xla["compile_s"])
    assert xla["cached_compiles"] >= 3 and xla["executions"] == xla["cached_compiles"] + 1
    assert xla["graph_calls"] == min(first.extra["input_sets"], MAX_GRAPH_CALLS)
    again = run_task(backend, task)
    assert again.status == "ok" and again.extra["xla"]["uncached_compiles"] == 0
    assert again.extra["xla"]["cached_compiles"] >= 3
    assert first.extra["mat_mul_precision"] == "highest"


def test_unsupported_combinations_are_statuses(backend: XlaBackend) -> None:
    shape = Shape(1, 64, 64, 64)
    for dtype, mode in (("fp8", "eager"), ("tf32", "eager"), ("fp32", "compile")):
        rec = run_task(backend, Task(shape=shape, dtype=dtype, mode=mode, timing=FAST))
        assert rec.status == "unsupported", (dtype, mode, rec)
    rec = run_task(backend, Task(shape=shape, dtype="fp32", timing=FAST, cache="flush"))
    assert rec.status == "unsupported" and "--cache flush" in rec.error


def test_real_sweep_writes_a_valid_file(tmp_path: Path) -> None:
    """The full CLI path: worker process, XLA device, two dtypes, batched and plain shapes."""
    out = tmp_path / "xla.json"
    args = ["sweep", "--device", "xla", "--dtype", "fp32", "--dtype", "bf16", "--shape", "128x128x128",
            "--shape", "2x64x96x32", "--budget-s", "0.2", "--max-samples", "20", "-o", str(out), "--quiet",
            "--repeats", "1"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert validate_file(out) == []
    (sweep,) = load_sweeps([out])
    assert sweep.device["backend"] == "xla" and sweep.device["chip"] == "cpu"
    assert len(sweep.records) == 4
    peak = sweep.peak.tflops["fp32"]
    for rec in sweep.records:
        assert rec.status == "ok", rec.error
        assert rec.timer == "xla" and rec.extra["xla"]["uncached_compiles"] == 1
        assert rec.first_call_s > rec.median_s  # the first graph carries the compile
        # per GEMM: more than a microsecond of work done per second, less than 3x the estimated CPU peak
        assert 1e-6 < rec.tflops < 3 * peak
        assert rec.rel_error is not None and rec.rel_error < 0.02
    data = json.loads(out.read_text())
    assert data["records"][0]["xla"]["device_kind"].lower() == "cpu"


def test_every_gemm_survives_optimisation(tmp_path: Path) -> None:
    """XLA's optimised HLO of a timed graph still holds one dot per call: nothing was dropped or merged."""
    script = textwrap.dedent("""
        from mfu_sweep.measure.backends.xla import XlaBackend
        from mfu_sweep.gemm.dtypes import get_dtype
        from mfu_sweep.gemm.shapes import Shape
        b = XlaBackend(0)
        dt, s = get_dtype("fp32"), Shape(1, 64, 48, 32)
        inputs = b.make_inputs(s, dt, 8, 0)
        fn = b.gemm_fn(s, dt, "eager", inputs)
        for i in range(b.calls_per_graph):
            fn(i)
        b.sync()
        print(b.calls_per_graph)
    """)
    env = {**os.environ, "PJRT_DEVICE": "CPU", "XLA_FLAGS": f"--xla_dump_to={tmp_path} --xla_dump_hlo_as_text"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    calls = int(done.stdout.split()[-1])
    dots = [f.read_text().count(" dot(") for f in tmp_path.glob("*after_optimizations.txt")]
    assert calls == 8 and max(dots) == calls


def test_ceilings_on_xla(backend: XlaBackend) -> None:
    from mfu_sweep.measure.checks.ceilings import measure_ceilings

    block = measure_ceilings(backend, ["fp32"], [128], FAST)
    assert block["memory_bandwidth"]["gbs"] > 0.1 and block["memory_bandwidth"]["timer"] == "xla"
    assert block["gemm"]["fp32"]["best_tflops"] > 0


def test_soak_executes_every_call(backend: XlaBackend) -> None:
    """A lazy backend must not drop soak GEMMs: one graph execution per call (one operand set)."""
    import torch_xla.debug.metrics as met

    before = (met.metric_data("ExecuteTime") or (0,))[0]
    out = backend.soak(0.3)
    executed = (met.metric_data("ExecuteTime") or (0,))[0] - before
    assert out["seconds"] >= 0.3 and out["timer"] == "xla" and out["shape"] == "512x512x512"
    assert executed >= out["calls"] >= 1


def test_steps_on_xla_record_a_first_step_that_holds_the_graph_compile(tmp_path: Path) -> None:
    from mfu_sweep.records.step_files import load_step_file

    tiny = "llm:llama-3-8b:hidden=64:ffn=128:layers=2:heads=4:kv_heads=2:vocab=256:seq=32:tokens=64"
    out = tmp_path / "xla-steps.json"
    res = CliRunner().invoke(main, ["steps", "--device", "xla", "--model", tiny, "--cache", "cold", "--cache", "warm",
                                    "--repeats", "1", "--steps", "4", "--warmup", "1", "--quiet", "-o", str(out)])
    assert res.exit_code == 0, res.output
    steps = load_step_file(out)
    assert steps.device["backend"] == "xla" and steps.settings["modes"] == ["lazy"]
    cold, warm = steps.runs
    assert (cold.mode, cold.cache, warm.cache) == ("lazy", "cold", "warm") and cold.ok and warm.ok
    assert warm.extra["primed_by"] == "cold run, repeat 0"
    for run in (cold, warm):
        xla = run.compile
        # step 1 compiles its graph; AdamW creates its state in step 1, so step 2 is a second graph: the
        # compiles happened inside the timed steps (two readings of one run, not a speed goal)
        assert xla["xla_compile_count"] >= 1 and xla["xla_compile_s"] > 0
        assert run.steps_s[0] + run.steps_s[1] >= xla["xla_compile_s"]
        assert run.gemm_share is None and run.extra["gemm_share_note"]
    # the cold run's persistent cache was asked and missed (an empty private folder)
    assert cold.compile["cache_misses"] >= 1
