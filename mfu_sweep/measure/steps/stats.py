"""What a run of a model's steps reads from its stack after the timed steps (inside the run process).

- **Compile** (``torch.compile``): ``torch._dynamo.utils.calculate_time_spent()`` gives the whole-frame
  compile and the backend's part; ``dynamo_s`` is the frame compile less the backend (tracing, guards,
  bytecode), ``backend_s`` the backend's compile of the forward plus that of the backward (compiled at the
  first backward), ``inductor_s`` inductor's ``compile_fx_inner`` and ``aot_autograd_s`` AOTAutograd's
  cumulative time from dynamo's compilation metrics. ``cache_hits``/``cache_misses`` are inductor's FX graph
  cache (``counters["inductor"]["fxgraph_cache_hit|miss"]``), ``autograd_cache_hits|misses`` AOTAutograd's.
  ``graphs`` is ``counters["stats"]["unique_graphs"]``, ``graph_breaks`` the sum of
  ``counters["graph_break"]``, ``recompiles`` the compilations dynamo made with a recompile reason.
- **XLA** (lazy graphs): ``torch_xla.debug.metrics`` ``CompileTime`` (count and total: ``xla_compile_count``,
  ``xla_compile_s``), ``ExecuteTime``, and the persistent cache's hit and miss counters where torch_xla
  counts them.
- **Peak memory**: CUDA's ``max_memory_allocated`` since the model was built (weights included); on the CPU
  (and XLA's CPU client) the run process's peak resident set (``ru_maxrss``: Python, torch and the compiler's
  in-process work included, its compile workers not), said in ``peak_memory_source``.
- **GEMM share**: ``profile_steps`` more steady steps under ``torch.profiler``; the self time of the GEMM
  ops (:data:`GEMM_OPS`: CPU time on the CPU, device time on CUDA) over the wall time of those steps. A
  fused attention kernel (SDPA) is not a GEMM op, as the family ``attn=sdpa`` counts none.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from typing import Any

GEMM_OPS = frozenset({"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
                      "aten::_grouped_mm", "aten::_scaled_mm", "aten::_scaled_grouped_mm"})


def reset_peak_memory(backend: Any) -> None:
    if backend.device.type == "cuda":
        import torch

        torch.cuda.reset_peak_memory_stats(backend.device)


def peak_memory(backend: Any) -> dict[str, Any]:
    """``peak_memory_bytes`` and where it comes from (see the module docstring)."""
    if backend.device.type == "cuda":
        import torch

        return {"peak_memory_bytes": int(torch.cuda.max_memory_allocated(backend.device)),
                "peak_memory_source": "torch.cuda.max_memory_allocated"}
    if backend.device.type == "cpu" or getattr(backend, "on_cpu", False):
        return {"peak_memory_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "peak_memory_source": "ru_maxrss of the run process"}
    return {"peak_memory_bytes": None, "peak_memory_source": f"not read on {backend.device.type}"}


def _dynamo() -> dict[str, Any]:
    from torch._dynamo.utils import calculate_time_spent, counters, get_compilation_metrics

    times = calculate_time_spent()
    metrics = [m for m in get_compilation_metrics() if not getattr(m, "is_runtime", False)]
    out: dict[str, Any] = {}
    if "entire_frame_compile" in times:
        out["dynamo_s"] = max(0.0, times["entire_frame_compile"] - times.get("backend_compile", 0.0))
    backend = times.get("backend_compile", 0.0) + times.get("entire_backward_compile", 0.0)
    if backend:
        out["backend_s"] = backend
    if "inductor_compile" in times:
        out["inductor_s"] = times["inductor_compile"]
    aot = [m.aot_autograd_cumulative_compile_time_us for m in metrics
           if getattr(m, "aot_autograd_cumulative_compile_time_us", None)]
    if aot:
        out["aot_autograd_s"] = sum(aot) / 1e6
    inductor, autograd = counters.get("inductor", {}), counters.get("aot_autograd", {})
    out.update(cache_hits=int(inductor.get("fxgraph_cache_hit", 0)),
               cache_misses=int(inductor.get("fxgraph_cache_miss", 0)),
               autograd_cache_hits=int(autograd.get("autograd_cache_hit", 0)),
               autograd_cache_misses=int(autograd.get("autograd_cache_miss", 0)))
    return {"compile": out, "graphs": int(counters.get("stats", {}).get("unique_graphs", 0)),
            "graph_breaks": int(sum(counters.get("graph_break", {}).values())),
            "recompiles": sum(1 for m in metrics if getattr(m, "recompile_reason", None))}


def _xla() -> dict[str, Any]:
    import torch_xla.debug.metrics as met

    def metric(name: str) -> tuple[int, float]:
        data = met.metric_data(name)
        return (int(data[0]), float(data[1]) / 1e9) if data else (0, 0.0)

    compiles, compile_s = metric("CompileTime")
    executes, execute_s = metric("ExecuteTime")
    out: dict[str, Any] = {"xla_compile_count": compiles, "xla_compile_s": compile_s,
                           "xla_execute_count": executes, "xla_execute_s": execute_s}
    names = set(met.counter_names())
    for key, name in (("cache_hits", "PersistentCacheHit"), ("cache_misses", "PersistentCacheMiss")):
        if name in names:
            out[key] = int(met.counter_value(name) or 0)
    return {"compile": out, "graphs": None, "graph_breaks": None, "recompiles": None}


def finish_stats(mode: str, backend: Any, memory: dict[str, Any]) -> dict[str, Any]:
    """The run's compile breakdown, graphs and peak memory (keys the stack does not expose are left out)."""
    if mode == "compile":
        stats = _dynamo()
    elif backend.name == "xla":
        stats = _xla()
    else:
        stats = {"compile": {}, "graphs": None, "graph_breaks": None, "recompiles": None}
    return {**stats, **memory}


def gemm_share(step: Callable[[], Any], backend: Any, steps: int) -> dict[str, Any]:
    """``gemm_share`` of ``steps`` profiled steady steps (None with the reason where it cannot be read)."""
    if steps <= 0:
        return {"gemm_share": None, "gemm_share_note": "not profiled (--profile-steps 0)"}
    device = backend.device.type
    if device not in ("cpu", "cuda"):
        return {"gemm_share": None, "gemm_share_note": f"torch.profiler sees no {device} ops"}
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    wall = 0.0
    with profile(activities=activities) as prof:
        for _ in range(steps):
            backend.sync()
            start = time.perf_counter()
            out = step()
            backend.sync()
            wall += time.perf_counter() - start
            del out
    attr = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    gemm_us = sum(getattr(e, attr, 0.0) for e in prof.key_averages() if e.key in GEMM_OPS)
    return {"gemm_share": gemm_us / 1e6 / wall if wall > 0 else None, "gemm_s": gemm_us / 1e6,
            "profiled_s": wall, "profiled_steps": steps}
