"""Achievable ceilings of one device: copy bandwidth and best GEMM throughput.

Vendor peaks are what MFU is measured against; the *achievable* ceilings
say how much of that a plain device-to-device copy and the library's best
large GEMM reach (torchao calls the ratio the achievable fraction; an H100
reaches ~0.6-0.8). Both are timed with the same adaptive
:func:`mfu_sweep.measure.timing.measure` and the backend's block timer as a sweep.

The result is a ``ceilings`` block (``CEILINGS_VERSION`` inside) that is
printed, written alone, or stored under the top-level key ``ceilings`` of a
sweep result file (schema version 1 allows added top-level keys).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from mfu_sweep import __version__
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.measure.backends.base import TorchBackend
from mfu_sweep.measure.bench import Task, run_task
from mfu_sweep.measure.timing import TimingConfig, measure
from mfu_sweep.records.results import ResultError, finish_record, parse_document, read_json, write_json_atomic
from mfu_sweep.specs import Peak, load_chips
from mfu_sweep.util.filelock import output_lock

# Version history of the ceilings block:
# * 1 - first version: memory_bandwidth, gemm (per dtype), device, peak, timing.
CEILINGS_VERSION = 1

CPU_SIZES = (256, 512, 1024)
ACCEL_SIZES = (4096, 8192, 16384)
CPU_DTYPES = ("fp32",)
ACCEL_DTYPES = ("bf16", "fp32")
MIN_COPY_BYTES = 64 * 2**20
CEILING_TIMING = TimingConfig(target_rel_ci=0.02, budget_s=0.5, min_samples=5, max_samples=50)


def copy_bytes(backend: TorchBackend) -> int:
    """Buffer size for the copy: twice the rotation size (beyond every cache), at least 64 MiB.

    Capped at an eighth of device memory where the backend knows it.
    """
    size = max(2 * backend.rotation_bytes(), MIN_COPY_BYTES)
    memory = backend.memory_bytes()
    if memory:
        size = min(size, memory // 8)
    return size


def bandwidth_ceiling(backend: TorchBackend, nbytes: int | None = None,
                      timing: TimingConfig = CEILING_TIMING) -> dict[str, Any]:
    """Median device-to-device copy bandwidth; bytes counted once read plus once written."""
    nbytes = nbytes or copy_bytes(backend)
    elements = nbytes // 4
    src = torch.ones(elements, dtype=torch.float32, device=backend.device)
    dst = torch.empty_like(src)
    backend.sync()
    time_block, timer = backend.block_timer(lambda: dst.copy_(src))
    m = measure(time_block, timing)
    moved = 2 * elements * 4
    return {"buffer_bytes": elements * 4, "bytes_per_call": moved, "median_s": m.median_s,
            "gbs": moved / m.median_s / 1e9, "ci_gbs": [moved / m.ci_s[1] / 1e9, moved / m.ci_s[0] / 1e9],
            "samples_s": list(m.samples_s), "block_size": m.block_size, "stop_reason": m.stop_reason, "timer": timer}


def gemm_ceiling(backend: TorchBackend, peak: Peak, dtype: str, sizes: Sequence[int],
                 timing: TimingConfig = CEILING_TIMING) -> dict[str, Any]:
    """Best TFLOP/s over square GEMMs of ``sizes`` in ``dtype``, with every attempt listed."""
    tried = []
    best = None
    for size in sizes:
        rec = finish_record(run_task(backend, Task(shape=Shape(1, size, size, size), dtype=dtype, timing=timing)), peak)
        tried.append({"shape": str(rec.shape), "status": rec.status, "tflops": rec.tflops, "mfu": rec.mfu,
                      "median_s": rec.median_s, "timer": rec.timer, "error": rec.error})
        if rec.status == "ok" and rec.tflops and (best is None or rec.tflops > best.tflops):
            best = rec
    out: dict[str, Any] = {"tried": tried, "best_tflops": None, "best_shape": None, "fraction_of_peak": None}
    if best is not None:
        out.update({"best_tflops": best.tflops, "best_shape": str(best.shape), "fraction_of_peak": best.mfu})
    return out


def default_plan(backend: TorchBackend) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """(dtypes, sizes): a few seconds' worth on a CPU, the largest useful GEMMs elsewhere."""
    if backend.device.type == "cpu":
        return CPU_DTYPES, CPU_SIZES
    return ACCEL_DTYPES, ACCEL_SIZES


def measure_ceilings(backend: TorchBackend, dtypes: Sequence[str] | None = None, sizes: Sequence[int] | None = None,
                     timing: TimingConfig = CEILING_TIMING, spec_file: str | None = None,
                     chip: str | None = None) -> dict[str, Any]:
    """The ``ceilings`` block for ``backend``."""
    default_dtypes, default_sizes = default_plan(backend)
    dtypes, sizes = tuple(dtypes or default_dtypes), tuple(sizes or default_sizes)
    peak = backend.peak(load_chips(spec_file), chip)
    bw = bandwidth_ceiling(backend, timing=timing)
    if peak.memory_bandwidth_tbs:
        bw["fraction_of_peak"] = bw["gbs"] / (peak.memory_bandwidth_tbs * 1000)
    from mfu_sweep.measure.sweep import utc_now

    return {
        "ceilings_version": CEILINGS_VERSION,
        "tool": {"name": "mfu-sweep", "version": __version__},
        "measured_at": utc_now(),
        "device": backend.describe().to_json(label=""),
        "peak": peak.to_json(),
        "timing": vars(timing),
        "memory_bandwidth": bw,
        "gemm": {d: gemm_ceiling(backend, peak, d, sizes, timing) for d in dtypes},
    }


def add_to_result(path: str | Path, block: dict[str, Any], force: bool = False) -> None:
    """Store ``block`` under ``ceilings`` in the sweep file ``path``, atomically.

    Refuses merged files, and a device other than the sweep's unless ``force``.
    Holds the file's one-writer lock (``mfu_sweep.util.filelock``) from read to write, so a
    sweep still writing the file is not overwritten: that raises ``LockError``.
    """
    with output_lock(path):
        _add_to_result(path, block, force)


def _add_to_result(path: str | Path, block: dict[str, Any], force: bool) -> None:
    data = read_json(path)
    parse_document(data, str(path))
    if data.get("kind") == "merged":
        raise ResultError(f"{str(path)!r} is a merged file; add ceilings to one sweep file")
    for key in ("backend", "name"):
        theirs, ours = data["device"].get(key), block["device"].get(key)
        if theirs != ours and not force:
            raise ResultError(f"{str(path)!r}: its device.{key}={theirs!r} differs from the measured {ours!r} "
                              "(pass --force to store it anyway)")
    data["ceilings"] = block
    write_json_atomic(path, data)


def summary_lines(block: dict[str, Any]) -> list[str]:
    """Human-readable lines for the CLI."""
    bw = block["memory_bandwidth"]
    frac = f" ({bw['fraction_of_peak']:.0%} of spec)" if bw.get("fraction_of_peak") else ""
    lines = [f"copy bandwidth: {bw['gbs']:.1f} GB/s{frac}  [{bw['buffer_bytes'] / 2**20:.0f} MiB, timer {bw['timer']}]"]
    for dtype, g in block["gemm"].items():
        if g["best_tflops"] is None:
            statuses = ", ".join(f"{t['shape']} {t['status']}" for t in g["tried"])
            lines.append(f"gemm {dtype}: no successful shape ({statuses})")
            continue
        frac = f" ({g['fraction_of_peak']:.0%} of peak)" if g.get("fraction_of_peak") else ""
        lines.append(f"gemm {dtype}: {g['best_tflops']:.4g} TFLOP/s at {g['best_shape']}{frac}")
    return lines

