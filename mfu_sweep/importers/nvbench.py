"""nvbench JSON (``--json FILE``; NVIDIA/nvbench ``nvbench/json_printer.cu``, read by
``python/scripts/nvbench_compare.py``).

Layout: ``meta.version.json`` (file format, 1.0.0), ``devices[]`` (``id``,
``name``, ``sm_version``, ``sm_default_clock_rate`` ...) and ``benchmarks[]``
with ``states[]``; a state has ``device``, ``axis_values`` (``[{name, type,
value}]``), ``summaries`` (``[{tag, data: [{name, type, value}]}]``, values
as strings) and ``is_skipped``. nvbench has no GEMM of its own, so a GEMM
benchmark must name its axes ``M``, ``N``, ``K`` (optionally ``B``/``Batch``)
and give the dtype as an axis named ``T``/``dtype``/``type`` or via ``--dtype``.

How it was measured: ``nv/cold/time/gpu/*`` are isolated launches timed by CUDA
events with the L2 flushed before each (cold), the launch hidden behind a
blocking kernel, stopping when the relative noise falls under the limit. This
reader uses the median (``nv/cold/time/gpu/median``) or, in older files, the
mean (flag ``source_mean``); where the state has a sample-times sidecar
(``nv/json/bin:nv/cold/sample_times``, float32 per sample) beside the JSON, all
samples are imported.
"""

from __future__ import annotations

import json
from array import array
from pathlib import Path
from typing import Any

from mfu_sweep.dtypes import DTYPES
from mfu_sweep.importers.common import SourceDevice, SourceError, SourceRow, read_provenance, sha256_of
from mfu_sweep.shapes import Shape, ShapeError

FORMAT = "nvbench"
TYPE_NAMES = {
    "f32": "fp32", "float": "fp32", "float32": "fp32", "fp32": "fp32",
    "tf32": "tf32",
    "bf16": "bf16", "bfloat16": "bf16", "__nv_bfloat16": "bf16", "nv_bfloat16": "bf16",
    "f16": "fp16", "half": "fp16", "__half": "fp16", "float16": "fp16", "fp16": "fp16",
    "fp8": "fp8", "e4m3": "fp8", "__nv_fp8_e4m3": "fp8", "float8_e4m3fn": "fp8", "f8e4m3fn": "fp8",
}
DTYPE_AXES = ("t", "dtype", "type")
BATCH_AXES = ("b", "batch")
SAMPLES_TAG = "nv/json/bin:nv/cold/sample_times"
UNKNOWN = ("SM clock during the run beyond the default clock rate", "driver and CUDA versions",
           "which GEMM library the benchmark called")


def _summary(state: dict, tag: str, field: str = "value") -> Any:
    for s in state.get("summaries") or []:
        if s.get("tag") == tag:
            for d in s.get("data") or []:
                if d.get("name") == field:
                    return d.get("value")
    return None


def _axes(state: dict) -> dict[str, Any]:
    return {str(a.get("name", "")).lower(): a.get("value") for a in state.get("axis_values") or []}


def _samples(base: Path, state: dict) -> tuple[float, ...]:
    fname = _summary(state, SAMPLES_TAG, "filename")
    if not fname:
        return ()
    f = Path(fname) if Path(fname).is_absolute() else base / fname
    if not f.is_file():
        return ()
    data = array("f")
    data.frombytes(f.read_bytes()[: (f.stat().st_size // 4) * 4])
    return tuple(float(x) for x in data if x > 0)


def _row(state: dict, where: str, dtype_opt: str | None, base: Path) -> SourceRow:
    axes = _axes(state)
    try:
        dims = [int(axes[d]) for d in ("m", "n", "k")]
    except KeyError:
        raise SourceError(f"{where}: no M, N, K axes (has: {', '.join(sorted(axes)) or 'none'})") from None
    except (TypeError, ValueError):
        raise SourceError(f"{where}: M, N, K axes must be integers") from None
    batch = int(next((axes[b] for b in BATCH_AXES if b in axes), 1))
    try:
        shape = Shape(batch, *dims)
    except ShapeError as exc:
        raise SourceError(f"{where}: {exc}") from None
    key = next((str(axes[a]) for a in DTYPE_AXES if a in axes), None)
    if key is not None and key.lower() not in TYPE_NAMES:
        raise SourceError(f"{where}: unknown dtype key {key!r}")
    dtype = TYPE_NAMES[key.lower()] if key is not None else dtype_opt
    if dtype is None:
        raise SourceError(f"{where}: no dtype axis (T, dtype or type); pass --dtype")
    if state.get("is_skipped"):
        return SourceRow(shape=shape, dtype=dtype, seconds=None, source_dtype=key or dtype, family="nvbench",
                         error=f"skipped by nvbench: {state.get('skip_reason', '')}".strip())
    median = _summary(state, "nv/cold/time/gpu/median")
    flags: tuple[str, ...] = ()
    if median is None:
        median = _summary(state, "nv/cold/time/gpu/mean")
        flags = ("source_mean",)
    try:
        seconds = float(median) if median is not None else None
    except ValueError:
        raise SourceError(f"{where}: GPU time {median!r} is not a number") from None
    samples = _samples(base, state)
    return SourceRow(shape=shape, dtype=dtype, seconds=seconds, source_dtype=key or f"--dtype {dtype}",
                     flags=flags, samples_s=samples, family="nvbench",
                     error=None if seconds else "no nv/cold/time/gpu summary",
                     extra={"source_value": seconds, "source_unit": "s (nv/cold/time/gpu/"
                            + ("mean)" if flags else "median)"),
                            "source_samples": int(_summary(state, "nv/cold/sample_size") or 0)})


def read(path: Path, dtype: str | None = None) -> list[SourceDevice]:
    name = str(path)
    try:
        root = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SourceError(f"{name!r}: not readable JSON ({exc})") from None
    if not isinstance(root, dict) or "benchmarks" not in root or "devices" not in root:
        raise SourceError(f"{name!r}: not an nvbench JSON file (needs 'devices' and 'benchmarks')")
    if dtype is not None and dtype not in DTYPES:
        raise SourceError(f"--dtype {dtype!r} unknown (known: {', '.join(DTYPES)})")
    devices = {d.get("id"): d for d in root.get("devices") or []}
    version = ((root.get("meta") or {}).get("version") or {})
    rows: dict[Any, dict[tuple, SourceRow]] = {}
    repeats: dict[Any, int] = {}
    for bench in root.get("benchmarks") or []:
        for j, state in enumerate(bench.get("states") or []):
            where = f"{name!r}: benchmark {bench.get('name')!r} state {state.get('name', j)!r}"
            row = _row(state, where, dtype, path.parent)
            got = rows.setdefault(state.get("device"), {})
            if (row.shape, row.dtype) in got:
                repeats[state.get("device")] = repeats.get(state.get("device"), 0) + 1
                continue
            got[(row.shape, row.dtype)] = row
    if not rows:
        raise SourceError(f"{name!r}: no benchmark states")
    out = []
    for dev_id, got in rows.items():
        dev = devices.get(dev_id, {})
        dname = str(dev.get("name") or f"device {dev_id}")
        out.append(SourceDevice(
            key=dname, name=dname, rows=tuple(got.values()), mode="eager", timer="events",
            details={"software": {"nvbench": (version.get("nvbench") or {}).get("string"),
                                  "sm_version": dev.get("sm_version"),
                                  "sm_default_clock_rate": dev.get("sm_default_clock_rate")}},
            provenance={
                "source_file": path.name, "source_sha256": sha256_of(path), **read_provenance(path),
                "tool": f"nvbench {(version.get('nvbench') or {}).get('string', '?')} (JSON "
                        f"{(version.get('json') or {}).get('string', 'unversioned')})",
                "timing_method": "cold isolated launches timed by CUDA events, L2 flushed before each, launch "
                                 "hidden behind a blocking kernel; median (or mean where flagged source_mean)",
                "device_key": dname, "dtype_keys": {r.dtype: r.source_dtype for r in got.values()},
                "notes": [f"{repeats[dev_id]} states repeat a shape and dtype (other axes differ); the first kept"]
                if repeats.get(dev_id) else [], "unknown": list(UNKNOWN),
            },
        ))
    return out
