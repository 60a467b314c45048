"""Measure one (shape, dtype, mode) on one backend and return a raw record.

This is what a worker process runs per task. It never computes MFU: the
parent owns the peak and derives statistics with
:func:`mfu_sweep.results.finish_record`, so a crashed worker loses nothing
but its task.
"""

from __future__ import annotations

import math
import os
import signal
import time
from dataclasses import replace

import torch

from mfu_sweep.dtypes import DType, get_dtype
from mfu_sweep.measure.backends.base import Inputs, TorchBackend, Unsupported
from mfu_sweep.measure.task import Task, blank_record
from mfu_sweep.measure.timing import Measurement, measure
from mfu_sweep.results import Record
from mfu_sweep.shapes import Shape, check_memory

MAX_INPUT_SETS = 64
# With --cache flush every call is timed alone (event pair or host clock
# around one call), so a block need not be long to hide timer overhead; a
# short block keeps the untimed flushes from eating the whole budget.
FLUSH_MIN_BLOCK_S = 2e-4
CHECK_ROWS = 32
# Test-only fault injection, read by workers: "crash:SHAPE,hang:SHAPE,oom:SHAPE".
FAULT_ENV = "MFU_SWEEP_TEST_FAULT"


def input_sets(shape: Shape, dtype: DType, rotation_bytes: int) -> int:
    """How many operand sets to cycle so that the working set exceeds ``rotation_bytes``."""
    per_set = shape.bytes(dtype)
    return max(1, min(MAX_INPUT_SETS, math.ceil(rotation_bytes / per_set)))


def _rows(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``x.index_select(0, rows)``, also for 1-byte float8 tensors (gathered as bytes, which every
    device implements, then viewed back)."""
    if x.element_size() == 1 and x.is_floating_point():
        return x.view(torch.uint8).index_select(0, rows).view(x.dtype)
    return x.index_select(0, rows)


def relative_error(inputs: Inputs, shape: Shape, seed: int) -> float:
    """Relative Frobenius error of sampled output rows against a float64 reference.

    Only ``CHECK_ROWS`` rows of one batch entry are recomputed, so the check
    costs a small fraction of the GEMM.
    """
    gen = torch.Generator().manual_seed(seed + 1)
    bi = int(torch.randint(shape.batch, (1,), generator=gen))
    rows = torch.randperm(shape.m, generator=gen)[: min(CHECK_ROWS, shape.m)].to(inputs.a[0].device)
    a = _rows(inputs.a[0][bi], rows).to(torch.float64)
    ref = a @ inputs.b[0][bi].to(torch.float64)
    got = _rows(inputs.out[0][bi], rows).to(torch.float64)
    denom = torch.linalg.vector_norm(ref).item()
    err = torch.linalg.vector_norm(got - ref).item()
    return err / denom if denom > 0 else err


def _maybe_inject_fault(task: Task) -> None:
    spec = os.environ.get(FAULT_ENV, "")
    for item in filter(None, spec.split(",")):
        kind, _, shape = item.partition(":")
        if shape != str(task.shape):
            continue
        if kind == "crash":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif kind == "hang":
            time.sleep(3600)
        elif kind == "oom":
            raise torch.OutOfMemoryError("injected out of memory (test fault)")


def _compile_seconds(before: int) -> float | None:
    try:
        from torch._dynamo.utils import get_compilation_metrics
    except ImportError:
        return None
    new = list(get_compilation_metrics())[before:]
    times = [m.entire_frame_compile_time_s for m in new if getattr(m, "entire_frame_compile_time_s", None)]
    return sum(times) if times else None


def _compilation_count() -> int:
    try:
        from torch._dynamo.utils import get_compilation_metrics
    except ImportError:
        return 0
    return len(list(get_compilation_metrics()))


def run_task(backend: TorchBackend, task: Task) -> Record:
    """Measure ``task`` on ``backend``; failures other than bugs become statuses."""
    dt = get_dtype(task.dtype)
    check_memory(task.shape, dt)
    try:
        backend.check_supported(dt, task.mode)
        return _measure_task(backend, task, dt)
    except Unsupported as exc:
        return blank_record(task, "unsupported", str(exc))
    except (RuntimeError, MemoryError) as exc:
        if _out_of_memory(backend, exc):
            return blank_record(task, "oom", _short(exc))
        if _looks_unsupported(exc):
            return blank_record(task, "unsupported", _short(exc))
        return blank_record(task, "error", _short(exc))


# What torch's CPU allocator raises when malloc fails: a plain RuntimeError ("[enforce fail at alloc_cpu.cpp]
# ... DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes. Error code 12 (Cannot
# allocate memory)"), not torch.OutOfMemoryError, so the device's own check does not see it.
ALLOCATION_FAILURES = ("can't allocate memory", "cannot allocate memory")


def _out_of_memory(backend: TorchBackend, exc: BaseException) -> bool:
    """Whether a failed shape ran out of memory: Python's MemoryError, the device's own OOM, or malloc failing."""
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or backend.is_oom(exc) or any(s in text for s in ALLOCATION_FAILURES)


def _looks_unsupported(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(s in text for s in ("not implemented for", "not supported", "unsupported", "no kernel"))


def _short(exc: BaseException, limit: int = 500) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text if len(text) <= limit else text[:limit] + "..."


def _measure_task(backend: TorchBackend, task: Task, dt: DType) -> Record:
    torch.manual_seed(task.seed)
    backend.set_math_mode(dt)
    if task.mode == "compile":
        torch._dynamo.reset()
    _maybe_inject_fault(task)
    flushing = task.cache == "flush"
    sets = 1 if flushing or task.cache == "none" else input_sets(task.shape, dt, backend.rotation_bytes())
    inputs = backend.make_inputs(task.shape, dt, sets, task.seed)
    fn = backend.gemm_fn(task.shape, dt, task.mode, inputs, task.compile_mode)
    counter = [0]

    def call() -> None:
        i = counter[0]
        counter[0] = i + 1 if i + 1 < sets else 0
        fn(i)

    compiles_before = _compilation_count() if task.mode == "compile" else 0
    config = backend.timing_config(task.timing)
    cache_info: dict[str, object] = {"cache": task.cache}
    if flushing:
        block_timer, timer_name = backend.flush_timer(call)
        config = replace(config, min_block_s=min(config.min_block_s, FLUSH_MIN_BLOCK_S))
        cache_info["flush_bytes"] = backend.flush_bytes()
    else:
        block_timer, timer_name = backend.block_timer(call, task.shape, dt, task.mode)
    backend.telemetry_start()
    try:
        m: Measurement = measure(block_timer, config)
    finally:
        seen = backend.telemetry_stop()
    compile_s = _compile_seconds(compiles_before) if task.mode == "compile" else None
    if compile_s is None:
        compile_s = seen.compile_s
    rel = None
    status = "ok"
    if task.check:
        fn(0)
        backend.sync()
        rel = relative_error(inputs, task.shape, task.seed)
        if not (rel <= dt.rel_tolerance):
            status = "mismatch"
    error = None if status == "ok" else f"rel_error {rel:.3g} > tolerance {dt.rel_tolerance:g}"
    rec = blank_record(task, status, error,
                       input_sets=sets, stop_reason=m.stop_reason, measure_wall_s=m.elapsed_s,
                       timed_s=m.timed_s, warmup_blocks=m.warmup_blocks, **cache_info, **seen.extra)
    return replace(rec, samples_s=m.samples_s, block_size=m.block_size, first_call_s=m.first_call_s,
                   compile_s=compile_s, rel_error=rel, timer=timer_name, ci_low_s=m.ci_s[0], ci_high_s=m.ci_s[1],
                   flags=tuple(dict.fromkeys((*rec.flags, *seen.flags))))
