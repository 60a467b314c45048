"""Measure one (shape, dtype, mode) on one backend and return a raw record.

This is what a worker process runs per task. It never computes MFU: the
parent owns the peak and derives statistics with
:func:`mfu_sweep.records.results.finish_record`, so a crashed worker loses nothing
but its task.
"""

from __future__ import annotations

import math
import os
import signal
import statistics
import time
from dataclasses import replace
from typing import Any

import torch

try:  # imported with the module, not by a worker's first shape (which then imports nothing it could have)
    import resource
except ImportError:  # not a Unix
    resource = None  # type: ignore[assignment]

from mfu_sweep.gemm.dtypes import DType, fp8_format, get_dtype
from mfu_sweep.gemm.shapes import Shape, check_memory
from mfu_sweep.measure.backends.base import TorchBackend, Unsupported
from mfu_sweep.measure.backends.operands import relative_error
from mfu_sweep.measure.machine.energy import metered_block_timer
from mfu_sweep.measure.machine.memory import gib, record_test_oom_kill, working_set
from mfu_sweep.measure.machine.throttle import guard_block_timer, policy_from_env
from mfu_sweep.measure.task import Task, blank_record
from mfu_sweep.measure.timing import BlockTimer, CpuTimeBlockTimer, Measurement, measure
from mfu_sweep.records.results import Record
from mfu_sweep.util.allocator import reused_allocations

MAX_INPUT_SETS = 64
# With --cache flush every call is timed alone (event pair or host clock
# around one call), so a block need not be long to hide timer overhead; a
# short block keeps the untimed flushes from eating the whole budget.
FLUSH_MIN_BLOCK_S = 2e-4
# Test-only fault injection, read by workers: "crash:SHAPE,hang:SHAPE,oom:SHAPE,oom-kill:SHAPE".
FAULT_ENV = "MFU_SWEEP_TEST_FAULT"


def input_sets(shape: Shape, dtype: DType, rotation_bytes: int) -> int:
    """How many operand sets to cycle so that the working set exceeds ``rotation_bytes``."""
    per_set = shape.bytes(dtype)
    return max(1, min(MAX_INPUT_SETS, math.ceil(rotation_bytes / per_set)))


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
        elif kind == "oom-kill":  # as the kernel's OOM killer does it: its count rises, then SIGKILL
            record_test_oom_kill()
            os.kill(os.getpid(), signal.SIGKILL)


def _compile_seconds(before: int) -> float | None:
    try:
        from torch._dynamo.utils import get_compilation_metrics
    except ImportError:
        return None
    new = list(get_compilation_metrics())[before:]
    times = [m.entire_frame_compile_time_s for m in new if getattr(m, "entire_frame_compile_time_s", None)]
    return sum(times) if times else None


def _cache_counts(before: int) -> dict[str, int]:
    """Inductor's FX-graph cache hits and misses (local and remote) of the compiles since ``before``: a cold
    compile has no hit, a warm one reuses the cache (``compile_cache_hits`` / ``_misses`` of the record)."""
    try:
        from torch._dynamo.utils import get_compilation_metrics
    except ImportError:
        return {}
    new = list(get_compilation_metrics())[before:]

    def total(kind: str) -> int:
        return sum(int(getattr(m, f"inductor_fx_{where}_cache_{kind}_count", None) or 0)
                   for m in new for where in ("local", "remote"))

    return {"compile_cache_hits": total("hit"), "compile_cache_misses": total("miss")} if new else {}


def _compilation_count() -> int:
    try:
        from torch._dynamo.utils import get_compilation_metrics
    except ImportError:
        return 0
    return len(list(get_compilation_metrics()))


def run_task(backend: TorchBackend, task: Task) -> Record:
    """Measure ``task`` on ``backend``; failures other than bugs become statuses.

    Before anything is allocated, the shape's working set is checked against the memory free to it
    (:mod:`mfu_sweep.measure.machine.memory`): a shape that cannot fit is an ``oom`` record naming both, never run.
    """
    dt = get_dtype(task.dtype)
    check_memory(task.shape, dt)
    try:
        backend.check_supported(dt, task.mode)
        return _short_of_memory(backend, task, dt) or _measure_task(backend, task, dt)
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


def _guarded(backend: TorchBackend, block_timer: BlockTimer) -> tuple[BlockTimer, dict[str, Any]]:
    """``block_timer`` metered for energy where the device counts it, and under the ``--on-throttle`` policy
    (:mod:`mfu_sweep.measure.machine.throttle`) where it is not ``keep``; the logs to read afterwards."""
    logs: dict[str, Any] = {}
    read_mj = backend.energy_reader()
    if read_mj is not None:
        block_timer, logs["energy"] = metered_block_timer(block_timer, read_mj)
    policy = policy_from_env()
    probe = backend.throttle_probe() if policy != "keep" else None
    if probe is not None:
        block_timer, logs["throttle"] = guard_block_timer(block_timer, probe, policy)
    return block_timer, logs


def _guard_fields(logs: dict[str, Any], flops: float) -> dict[str, Any]:
    """The record's ``energy`` and ``throttle`` blocks from :func:`_guarded`'s logs."""
    out: dict[str, Any] = {}
    if "energy" in logs and (energy := logs["energy"].to_json(flops)) is not None:
        out["energy"] = energy
    if "throttle" in logs:
        out["throttle"] = logs["throttle"].to_json()
    return out


FAULTS_FIELD = "page_faults_per_call"
WALL_FIELD = "wall_median_s"  # --timer cputime: the host clock's median over the same sample blocks


def minor_faults() -> int:
    """The worker's minor page faults so far (every thread's), or 0 where the platform does not count them.

    A timed call that faults pages in (fresh memory for a buffer it allocates) pays the kernel on every call:
    the 256^3 bf16 gap of docs/fidelity.md was 34 faults per call."""
    if resource is None:
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def allocates_output(mode: str, dt: DType) -> bool:
    """Whether the timed op allocates its result on every call: compile mode (inductor allocates its outputs;
    see :func:`~mfu_sweep.measure.backends.operands.gemm_call`) and the block-scaled formats (no ``out=``)."""
    return mode == "compile" or bool(dt.block)


def _sets(backend: TorchBackend, task: Task, dt: DType) -> int:
    """Operand sets the task cycles through (one with ``--cache flush`` or ``none``)."""
    return 1 if task.cache in ("flush", "none") else input_sets(task.shape, dt, backend.rotation_bytes())


def _short_of_memory(backend: TorchBackend, task: Task, dt: DType) -> Record | None:
    """The ``oom`` record of a task whose working set exceeds the memory free to it; None when it fits (or the
    backend cannot say what is free)."""
    free = backend.free_memory()
    if free is None:
        return None
    sets = _sets(backend, task, dt)
    need = working_set(task.shape, dt, sets, task.mode, backend.flush_bytes() if task.cache == "flush" else 0)
    if need <= free.bytes:
        return None
    return blank_record(task, "oom", f"not run: its working set needs {gib(need)} ({sets} operand "
                        f"{'set' if sets == 1 else 'sets'} with staging and check), and {gib(free.bytes)} is free "
                        f"({free.source})", memory={"need_bytes": need, "free_bytes": free.bytes,
                                                    "free_source": free.source})


def _measure_task(backend: TorchBackend, task: Task, dt: DType) -> Record:
    torch.manual_seed(task.seed)
    backend.set_math_mode(dt)
    if task.mode == "compile":
        torch._dynamo.reset()
    _maybe_inject_fault(task)
    flushing = task.cache == "flush"
    sets = _sets(backend, task, dt)
    inputs = backend.make_inputs(task.shape, dt, sets, task.seed)
    fn = backend.gemm_fn(task.shape, dt, task.mode, inputs, task.compile_mode)
    counter = [0]

    def call() -> None:
        i = counter[0]
        counter[0] = i + 1 if i + 1 < sets else 0
        fn(i)

    compiles_before = _compilation_count() if task.mode == "compile" else 0
    config = backend.timing_config(task.timing)
    fields: dict[str, object] = {"cache": task.cache}
    if flushing:
        block_timer, timer_name = backend.flush_timer(call)
        config = replace(config, min_block_s=min(config.min_block_s, FLUSH_MIN_BLOCK_S))
        fields["flush_bytes"] = backend.flush_bytes()
    else:
        block_timer, timer_name = backend.block_timer(call, task.shape, dt, task.mode)
    if dt.scaling != "none":
        fields["scales"] = backend.scales_json(dt)
    if dt.scaling in ("tensor", "row"):
        fields["fast_accum"] = backend.fp8_fast_accum
    if fp8_format(dt.torch_name) and (element := fp8_format(str(backend.torch_dtype(dt)))):
        fields["fp8_format"] = element  # the element type this device ran: e4m3fnuz on MI300 (gfx942)
    clocked = block_timer  # before the guards wrap it: a CPU-time timer keeps the wall time of its blocks
    block_timer, guards = _guarded(backend, block_timer)
    allocates = allocates_output(task.mode, dt)
    if allocates:
        fields["allocates_output"] = True
    backend.telemetry_start()
    try:
        with reused_allocations():  # the operands are placed; what the op allocates per call is reused
            m: Measurement = measure(block_timer, config, counter=minor_faults)
    finally:
        seen = backend.telemetry_stop()
    fields.update(_guard_fields(guards, task.shape.flops))
    if m.counted is not None:
        fields[FAULTS_FIELD] = round(m.counted / (len(m.samples_s) * m.block_size), 3)
    if isinstance(clocked, CpuTimeBlockTimer):
        fields[WALL_FIELD] = statistics.median(clocked.wall_per_call(len(m.samples_s)))
    compile_s = _compile_seconds(compiles_before) if task.mode == "compile" else None
    if task.mode == "compile":
        fields.update(_cache_counts(compiles_before))
    if compile_s is None:
        compile_s = seen.compile_s
    rel = None
    status = "ok"
    if task.check:
        got = fn(0)
        backend.sync()
        rel = relative_error(inputs, task.shape, task.seed, got)
        if not (rel <= dt.rel_tolerance):
            status = "mismatch"
    error = None if status == "ok" else f"rel_error {rel:.3g} > tolerance {dt.rel_tolerance:g}"
    rec = blank_record(task, status, error,
                       input_sets=sets, stop_reason=m.stop_reason, measure_wall_s=m.elapsed_s,
                       timed_s=m.timed_s, warmup_blocks=m.warmup_blocks, **fields, **seen.extra)
    return replace(rec, samples_s=m.samples_s, block_size=m.block_size, first_call_s=m.first_call_s,
                   compile_s=compile_s, rel_error=rel, timer=timer_name, ci_low_s=m.ci_s[0], ci_high_s=m.ci_s[1],
                   flags=tuple(dict.fromkeys((*rec.flags, *seen.flags))))
