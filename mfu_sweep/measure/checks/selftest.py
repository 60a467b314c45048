"""A short, fixed self-check of the measurement on one device.

Checks, each PASS, FAIL or SKIP (with the reason):

* **spec**: the device maps to a peak-spec entry (on a CPU: an estimate).
* **numerics**: one small GEMM per dtype passes the float64 check through
  the full sweep path (:func:`mfu_sweep.measure.bench.run_task`), in a layout
  the dtype runs (``nt`` for the fp8 formats).
* **vs torch Timer**: the tool's median time per call agrees with
  ``torch.utils.benchmark.Timer.blocked_autorange`` on the same callable
  (same thread count on CPU) within ``rel_tol``. Only CPU and CUDA: torch's
  Timer synchronises no other device.
* **vs triton do_bench** (CUDA with triton): agreement with
  ``triton.testing.do_bench`` on compute-bound shapes, within ``rel_tol``.
* **graph vs events** (CUDA): on a large GEMM both timers agree within
  ``rel_tol``; on a small one the graph is not slower than events.

Both sides of each comparison alternate over a few rounds, each round a
median, and the fastest round of each side is compared: load from other
processes (on a small shared CPU it can slow a two-thread GEMM 30-fold)
only ever slows a round down, so it cannot decide the verdict unless it
lasts through every round.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shapes import Shape, with_layout
from mfu_sweep.measure.backends.base import TorchBackend
from mfu_sweep.measure.bench import Task, run_task
from mfu_sweep.measure.timing import BlockTimer, TimingConfig, measure
from mfu_sweep.specs import load_chips
from mfu_sweep.util.text import counted

DEFAULT_REL_TOL = 0.20
ROUNDS = 3
QUICK = TimingConfig(target_rel_ci=0.02, budget_s=0.2, min_samples=3, max_samples=30, warmup_s=0.02)
NUMERIC_SHAPE = Shape(1, 256, 256, 256)
STATUSES = ("pass", "fail", "skip")


@dataclass(frozen=True)
class Check:
    """One line of the self-test table."""

    name: str
    status: str
    value: str = ""
    bound: str = ""
    detail: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"check status {self.status!r} is not one of {', '.join(STATUSES)}")

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "status": self.status, "value": self.value, "bound": self.bound,
                "detail": self.detail}


def ratio_check(name: str, ours_s: float, theirs_s: float, rel_tol: float, detail: str = "") -> Check:
    """PASS when ``ours / theirs`` lies within ``1 +- rel_tol``."""
    ratio = ours_s / theirs_s
    ok = abs(ratio - 1) <= rel_tol
    return Check(name, "pass" if ok else "fail", f"{ratio:.3f} ({ours_s * 1e6:.1f} vs {theirs_s * 1e6:.1f} us)",
                 f"|ratio-1| <= {rel_tol:g}", detail)


# ----- checks ----------------------------------------------------------------
def check_spec(backend: TorchBackend, spec_file: str | None = None) -> Check:
    peak = backend.peak(load_chips(spec_file))
    if peak.estimated and peak.tflops:
        return Check("spec lookup", "pass", f"{peak.chip} (estimated)", "chip found or estimated", peak.source[:80])
    if peak.chip and peak.tflops:
        return Check("spec lookup", "pass", f"{peak.chip} ({peak.scope})", "chip found or estimated", peak.source[:80])
    return Check("spec lookup", "fail", "no entry", "chip found or estimated", peak.source[:80])


def default_dtypes(backend: TorchBackend) -> tuple[str, ...]:
    """One GEMM of each of these goes through the numerical check: on CUDA every dtype a GPU sweep's defaults
    reach; on the CPU its native ones and the fp8 formats torch runs there (``torch._scaled_mm``)."""
    if backend.name == "cuda":
        return ("fp32", "tf32", "bf16", "fp16", "fp8", "fp8-rowwise")
    if backend.device.type == "cpu":
        return ("fp32", "bf16", "fp8", "fp8-rowwise")
    return ("fp32", "bf16")


def numeric_shape(dtype: str, shape: Shape = NUMERIC_SHAPE) -> Shape:
    """``shape`` in a layout ``dtype`` takes: the fp8 formats run A row-major, B column-major (``nt``) only, and
    checked in ``nn`` they would only ever say SKIP."""
    dt = get_dtype(dtype)
    return shape if dt.runs_layout(shape.layout) else with_layout(shape, dt.layouts[0])


def check_numerics(backend: TorchBackend, dtype: str, shape: Shape = NUMERIC_SHAPE) -> Check:
    shape = numeric_shape(dtype, shape)
    rec = run_task(backend, Task(shape=shape, dtype=dtype, timing=QUICK))
    bound = f"rel_error <= {get_dtype(dtype).rel_tolerance:g}"
    if rec.status == "unsupported":
        return Check(f"numerics {dtype} {shape}", "skip", "unsupported", bound, rec.error or "")
    value = f"{rec.rel_error:.2e}" if rec.rel_error is not None else rec.status
    return Check(f"numerics {dtype} {shape}", "pass" if rec.status == "ok" else "fail", value, bound,
                 (rec.error or f"timer {rec.timer}")[:80])


def single_call(backend: TorchBackend, shape: Shape, dtype: str) -> Callable[[], Any]:
    """The timed GEMM on one operand set, the same callable for every timer compared."""
    dt = get_dtype(dtype)
    backend.check_supported(dt, "eager")
    backend.set_math_mode(dt)
    inputs = backend.make_inputs(shape, dt, 1, seed=0)
    fn = backend.gemm_fn(shape, dt, "eager", inputs)
    return lambda: fn(0)


def _alternate(a: Callable[[], float], b: Callable[[], float], rounds: int = ROUNDS) -> tuple[float, float]:
    """Fastest of ``rounds`` results of each, run alternately."""
    xs, ys = [], []
    for _ in range(rounds):
        xs.append(a())
        ys.append(b())
    return min(xs), min(ys)


def _ours(timer: BlockTimer) -> Callable[[], float]:
    return lambda: measure(timer, QUICK).median_s


def check_vs_torch_timer(backend: TorchBackend, shape: Shape, dtype: str, rel_tol: float) -> Check:
    name = f"vs torch Timer {dtype} {shape}"
    if backend.device.type not in ("cpu", "cuda"):
        return Check(name, "skip", "", "", f"torch Timer does not synchronise {backend.device.type} devices")
    from torch.utils.benchmark import Timer

    call = single_call(backend, shape, dtype)
    timer, timer_name = backend.block_timer(call)
    threads = torch.get_num_threads()
    reference = Timer(stmt="call()", globals={"call": call}, num_threads=threads)
    ours, theirs = _alternate(_ours(timer), lambda: reference.blocked_autorange(min_run_time=QUICK.budget_s).median)
    return ratio_check(name, ours, theirs, rel_tol, f"{timer_name}, {counted(threads, 'thread')}")


def check_vs_do_bench(backend: TorchBackend, shape: Shape, dtype: str, rel_tol: float) -> Check:
    name = f"vs triton do_bench {dtype} {shape}"
    if backend.device.type != "cuda":
        return Check(name, "skip", "", "", "needs a CUDA device")
    try:
        from triton.testing import do_bench
    except ImportError:
        return Check(name, "skip", "", "", "triton is not installed")
    call = single_call(backend, shape, dtype)
    timer, timer_name = backend.block_timer(call)
    ours, theirs = _alternate(_ours(timer), lambda: do_bench(call, warmup=25, rep=100, return_mode="median") / 1e3)
    return ratio_check(name, ours, theirs, rel_tol, f"{timer_name}; do_bench flushes L2 per call")


def check_graph_vs_events(backend: TorchBackend, shape: Shape, dtype: str, rel_tol: float, small: bool) -> Check:
    """Large shapes: graph and events agree; small shapes: the graph is not slower."""
    name = f"graph vs events {dtype} {shape}"
    if backend.name != "cuda":
        return Check(name, "skip", "", "", "CUDA graphs need a CUDA device")
    from mfu_sweep.measure.backends.cuda import event_block_timer, graph_block_timer

    call = single_call(backend, shape, dtype)
    graph = graph_block_timer(call, backend.device, 16)
    events = event_block_timer(call, backend.device)
    g, e = _alternate(_ours(graph), _ours(events))
    if small:
        ok = g <= e * (1 + rel_tol)
        return Check(name, "pass" if ok else "fail", f"{g / e:.3f} ({g * 1e6:.1f} vs {e * 1e6:.1f} us)",
                     f"ratio <= {1 + rel_tol:g}", "launch-bound: graph removes launch gaps")
    return ratio_check(name, g, e, rel_tol, "compute-bound: timers agree")


def timing_shapes(backend: TorchBackend) -> tuple[str, tuple[Shape, ...]]:
    if backend.device.type == "cpu":
        return "fp32", (Shape(1, 256, 256, 256), Shape(1, 512, 512, 512))
    return "bf16", (Shape(1, 1024, 1024, 1024), Shape(1, 4096, 4096, 4096))


def run_selftest(backend: TorchBackend, rel_tol: float = DEFAULT_REL_TOL, spec_file: str | None = None,
                 dtypes: Sequence[str] | None = None) -> list[Check]:
    """All checks for ``backend``, in table order."""
    checks = [check_spec(backend, spec_file)]
    checks += [check_numerics(backend, d) for d in (dtypes or default_dtypes(backend))]
    if backend.name == "xla":
        checks.append(Check("timer comparisons", "skip", "", "", "lazy tensors: other timers would time tracing only"))
        return checks
    dtype, shapes = timing_shapes(backend)
    checks += [check_vs_torch_timer(backend, s, dtype, rel_tol) for s in shapes]
    checks.append(check_vs_do_bench(backend, shapes[-1], dtype, rel_tol))
    checks.append(check_graph_vs_events(backend, Shape(1, 256, 256, 256), dtype, rel_tol, small=True))
    checks.append(check_graph_vs_events(backend, shapes[-1], dtype, rel_tol, small=False))
    return checks


def format_table(checks: Sequence[Check]) -> str:
    """A compact fixed-width table."""
    rows = [("check", "result", "value", "bound", "detail")]
    rows += [(c.name, c.status.upper(), c.value, c.bound, c.detail) for c in checks]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(f"{cell:<{w}}" for cell, w in zip(r[:4], widths, strict=True)) + "  " + r[4] for r in rows]
    return "\n".join(line.rstrip() for line in lines)
