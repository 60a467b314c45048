"""OpenXLA's measured matmul table (``default_matmul_perf_table.txtpb``, ``xla.GemmPerfTable``).

Layout (text protobuf)::

    entries { key: "sm_90" value { entries { b: 1 m: 256 n: 256 k: 256
        flops { key: "bf16xbf16->bf16" value: 6765006451612 } ... } ... } }

How it was measured (``xla/tools/matmul_perf_table_gen.cc``): an HLO
``dot`` of ``[b,m,k] x [b,k,n]`` is compiled by XLA (which picks the GEMM
backend), run once to warm up, then 5 times with two argument sets while the
CUPTI (NVIDIA) or roctracer (AMD) kernel tracer records kernel times; the
median kernel time in whole nanoseconds gives ``flops = 2*b*m*n*k * 1e9 / ns``
stored truncated to an integer. This reader recovers the nanoseconds
(``round(2*b*m*n*k * 1e9 / value)``) and keeps the stored integer as
``source_value``.
"""

from __future__ import annotations

import re
from pathlib import Path

from mfu_sweep.gemm.shapes import Shape, ShapeError
from mfu_sweep.importers.common import SourceDevice, SourceError, SourceRow, read_provenance, sha256_of
from mfu_sweep.importers.txtpb import Message, TextProtoError, parse
from mfu_sweep.importers.values import absurd_tflops, beyond_any_peak, read_text

FORMAT = "xla-perf-table"

XLA_TYPES = {
    "pred", "s4", "s8", "s16", "s32", "s64", "u4", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64",
    "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e4m3", "f8e3m4", "f8e8m0fnu",
    "f4e2m1fn", "c64", "c128",
}
# Source key -> this tool's dtype. Only keys whose inputs and output match one of our dtypes
# (mfu_sweep/gemm/dtypes.py: fp8 = e4m3 inputs, bf16 output); the other keys are counted and skipped.
DTYPE_KEYS = {
    "bf16xbf16->bf16": "bf16",
    "f16xf16->f16": "fp16",
    "f32xf32->f32": "fp32",
    "f8e4m3fnxf8e4m3fn->bf16": "fp8",
    "f8e4m3fnuzxf8e4m3fnuz->bf16": "fp8",
}
KEY_NOTES = {
    "f32xf32->f32": "XLA's default precision lets an f32 dot run on TF32 (NVIDIA) or XF32/bf16x3 (AMD) "
                    "tensor cores; records are flagged maybe_tf32, and their MFU is against the chip's tf32 peak "
                    "where the spec has one (flag tf32_peak_assumed, peak.dtype_basis), else against the fp32 "
                    "peak (then it can exceed 1: flag above_peak with above_peak_reason)",
    "f8e4m3fnuzxf8e4m3fnuz->bf16": "fp8 here is AMD's e4m3fnuz variant (gfx942)",
}
_KEY = re.compile(r"^([a-z0-9]+)x([a-z0-9]+)->([a-z0-9]+)$")

TIMING = ("median of every kernel event the CUPTI (NVIDIA) or roctracer (AMD) tracer saw during 10 executions "
          "(5 profiled runs x 2 argument sets, after 1 warm-up), whole ns; stored as integer FLOP/s "
          "= floor(2*b*m*n*k*1e9/ns); host launch time excluded. Where XLA runs a dot as several kernels, "
          "that median is not the dot's time")
ABOVE_PEAK = ("the table keeps one kernel's median time (kernel tracer, launch excluded) at unrecorded clocks; "
              "where XLA runs a dot as several kernels that median is not the dot's time, and the device key "
              "names an architecture, not a product (see --chip)")
UNKNOWN = ("GPU clocks and power limit", "driver, CUDA/ROCm and XLA versions used to measure",
           "which GEMM library or kernel XLA chose", "input value distribution beyond XLA's fake arguments")


def _check_key(key: object, where: str) -> str:
    """``key`` as the table spells it, checked in lower case (other tools' tables write ``BF16xBF16->BF16``)."""
    if not isinstance(key, str):
        raise TextProtoError(f"{where}: dtype key {key!r} is not a string")
    m = _KEY.match(key.lower())
    if not m or not all(t in XLA_TYPES for t in m.groups()):
        raise TextProtoError(f"{where}: unknown dtype key {key!r} (expected like 'bf16xbf16->bf16')")
    return key


def _int(msg: Message, name: str, where: str) -> int:
    v = msg.one(name, where)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise TextProtoError(f"{where}: {name}={v!r} must be a positive integer")
    return v


def _rows(entry: Message, where: str, skipped: dict[str, int], name: str) -> list[SourceRow]:
    try:
        shape = Shape(_int(entry, "b", where), _int(entry, "m", where), _int(entry, "n", where),
                      _int(entry, "k", where))
    except ShapeError as exc:
        raise TextProtoError(f"{where}: {exc}") from None
    rows = []
    for fl in entry.all("flops"):
        if not isinstance(fl, Message):
            raise TextProtoError(f"{where}: flops must be a message")
        key = _check_key(fl.one("key", where), where)
        value = fl.one("value", f"{where} {key}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise TextProtoError(f"{where} {key}: value={value!r} must be a positive number")
        if key.lower() not in DTYPE_KEYS:
            skipped[key] = skipped.get(key, 0) + 1
            continue
        if value / 1e12 > absurd_tflops():  # its kernel time would round to 0 ns
            raise TextProtoError(f"{where} {key}: value={value!r} FLOP/s is {beyond_any_peak()}; not a measurement")
        ns = round(shape.flops * 1e9 / value)
        flags = ("maybe_tf32",) if key.lower() == "f32xf32->f32" else ()
        rows.append(SourceRow(
            shape=shape, dtype=DTYPE_KEYS[key.lower()], seconds=ns / 1e9, source_dtype=key, flags=flags,
            family="xla-perf-table", extra={"source_value": value, "source_unit": "FLOP/s (int64)",
                                            "kernel_time_ns": ns}, where=f"{name!r}: {where} {key}",
        ))
    return rows


def read(path: Path) -> list[SourceDevice]:
    """Every device of one table file; raises :class:`SourceError` naming the file."""
    name = str(path)
    text = read_text(path, "an xla.GemmPerfTable text proto")
    try:
        root = parse(text, top=("entries",))
        entries = root.all("entries")
        if not entries or root.names() - {"entries"}:
            extra = sorted(root.names() - {"entries"})
            raise TextProtoError(f"not an xla.GemmPerfTable (top-level fields: {extra or 'none'})")
        prov = read_provenance(path)
        sha = sha256_of(path)
        devices = []
        for i, dev in enumerate(entries):
            if not isinstance(dev, Message):
                raise TextProtoError(f"entries[{i}] must be a message")
            key = dev.one("key", f"entries[{i}]")
            value = dev.one("value", f"entries[{i}] ({key})")
            if not isinstance(key, str) or not isinstance(value, Message):
                raise TextProtoError(f"entries[{i}]: needs key (string) and value (message)")
            skipped: dict[str, int] = {}
            rows = []
            for j, entry in enumerate(value.all("entries")):
                rows.extend(_rows(entry, f"{key} entries[{j}]", skipped, name))
            if not rows:
                raise TextProtoError(f"device {key!r} has no importable entries")
            keys = sorted({r.source_dtype.lower() for r in rows})
            notes = [KEY_NOTES[k] for k in keys if k in KEY_NOTES]
            if skipped:
                notes.append("skipped dtype keys without a matching dtype here: "
                             + ", ".join(f"{k} ({n})" for k, n in sorted(skipped.items())))
            devices.append(SourceDevice(
                key=key, name=key, rows=tuple(rows), mode="compile",
                timer="roctracer-kernel" if key.startswith("gfx") else "cupti-kernel", cache="none",
                above_peak_reason=ABOVE_PEAK,
                provenance={
                    "source_file": path.name, "source_sha256": sha, **prov,
                    "tool": "OpenXLA xla/tools/matmul_perf_table_gen.cc (XLA picks the GEMM backend after "
                            "autotuning)",
                    "timing_method": TIMING, "timer_resolution_s": 1e-9,
                    "device_key": key, "dtype_keys": {r.dtype: r.source_dtype for r in rows},
                    "notes": notes, "unknown": list(UNKNOWN),
                },
            ))
        return devices
    except TextProtoError as exc:
        raise SourceError(f"{name!r}: {exc}") from None
