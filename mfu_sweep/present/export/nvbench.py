"""Sweeps as nvbench JSON (``export --format nvbench``), so nvbench's readers take an mfu-sweep result.

The layout is nvbench's JSON file version 1.0.0 (``nvbench/json_printer.cu``; its Python reader
``scripts/nvbench_json``): ``meta`` (argv, versions), ``devices``, ``benchmarks``. The mapping:

- every device label of the sweeps is one nvbench **device** (``id`` 0, 1 ... in label order; ``name``
  the sweep's device name; ``sm_version``, ``number_of_sms`` and ``global_memory_size`` where the sweep
  knows them);
- every dtype and mode is one **benchmark**, ``gemm_<dtype>_<mode>``, so a file of one device has one
  benchmark per series and two files of two machines share their benchmark names;
- every measured shape is one **state**, with axes ``B``, ``M``, ``N``, ``K`` (int64), ``T`` (the
  dtype, a type axis), ``mode`` and ``layout`` (strings: ``eager``, ``nt``); its name is nvbench's,
  ``Device=0 B=1 M=... mode=eager layout=nn``; a benchmark with a grouped GEMM (a MoE layer's experts in one
  call) has a string axis ``groups`` as well (``m=512*8``: the group sizes along M or K, ``none`` for a dense
  shape of the same benchmark), also in the state's name, so two splits of one M are two states and none
  comes back as a dense GEMM; ``import nvbench`` reads mode, layout and groups back;
- the summaries are nvbench's cold GPU-time ones, computed from every sample of every pass: sample
  count, min, max, mean, standard deviation (absolute and relative: the "noise" of nvbench_compare),
  quartiles, median, IQR; the samples themselves go to the sidecar nvbench writes
  (``<file>-bin/<i>.bin``, little-endian float32 seconds, tag ``nv/json/bin:nv/cold/sample_times``).
  With fewer than 5 samples the relative noise is null, as nvbench's readers expect for "not enough
  samples". Hidden ``mfu-sweep/...`` summaries add the shape's time as mfu-sweep reports it (median of
  the passes' medians), its TFLOP/s and MFU, the passes, how it was really timed and, where the record
  says it, its math mode (``mfu-sweep/math``: ``maybe_tf32``, ``mat_mul_precision``, ``neuron_cc_flags``);
- a shape with no usable record is a skipped state (``is_skipped``, ``skip_reason``: status and error).

The times sit under nvbench's ``nv/cold/time/gpu/*`` tags whatever the device and timer (those are the
tags nvbench's scripts compare); ``meta.mfu_sweep`` and each state's ``mfu-sweep/timing`` say how they
were measured. ``meta.mfu_sweep.devices[].peak`` is each device's peak block as its sweep holds it (a CPU's
estimate and its basis, an XLA table's fp32-as-tf32 basis ...), which ``import nvbench`` keeps.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mfu_sweep import __version__
from mfu_sweep.analysis.ground.series import shape_seconds, sweep_order, usable
from mfu_sweep.gemm.shapes import Shape, format_groups
from mfu_sweep.records.results import Record, Sweep, load_sweeps, write_json_atomic
from mfu_sweep.records.summaries import math_of
from mfu_sweep.util.outputs import OutputError, check_output_file, check_suffix

JSON_VERSION = (1, 0, 0)  # the nvbench JSON file version written (nvbench's json_printer and reader agree on it)
SIDECAR_SUFFIX = "-bin"
SAMPLES_TAG = "nv/json/bin:nv/cold/sample_times"
MIN_SAMPLES_FOR_NOISE = 5  # nvbench's min_samples_for_noise_estimate: fewer, and the noise is unknown
_SIDECAR_FILE = re.compile(r"^\d+\.bin$")


@dataclass(frozen=True)
class NvbenchFile:
    """An nvbench JSON document and the sample times of its sidecar files (``i.bin`` -> samples)."""

    document: dict[str, Any]
    samples: tuple[tuple[float, ...], ...]


def _named(name: str, kind: str, value: Any) -> dict[str, Any]:
    """One nvbench named value; numbers as strings, as nvbench writes them (an int64 does not fit a double)."""
    if value is None or kind == "string":
        return {"name": name, "type": kind, "value": None if value is None else str(value)}
    text = str(int(value)) if kind == "int64" else repr(float(value))
    return {"name": name, "type": kind, "value": text}


def _summary(tag: str, name: str, hint: str, description: str, data: Sequence[dict[str, Any]],
             hide: bool = True) -> dict[str, Any]:
    out = {"tag": tag, "name": name, "hint": hint, "description": description}
    if hide:
        out["hide"] = "Hidden by default."
    return {**out, "data": list(data)}


def _time(tag: str, name: str, description: str, value: float | None, hide: bool = True,
          hint: str = "duration") -> dict[str, Any]:
    return _summary(f"nv/cold/time/gpu/{tag}", name, hint, description, [_named("value", "float64", value)], hide)


def time_summaries(samples: Sequence[float]) -> list[dict[str, Any]]:
    """nvbench's cold GPU-time summaries of ``samples`` (seconds per call): count, min, max, mean, noise,
    quartiles, median, IQR. The relative noise is null under :data:`MIN_SAMPLES_FOR_NOISE` samples."""
    x = np.asarray(samples, dtype=float)
    n = len(x)
    mean = float(x.mean())
    enough = n >= MIN_SAMPLES_FOR_NOISE
    stdev = float(x.std(ddof=1)) if n > 1 else None
    q1, median, q3 = (float(v) for v in np.percentile(x, [25, 50, 75]))
    out = [
        _summary("nv/cold/sample_size", "Samples", "sample_size", "Number of timed samples (all passes)",
                 [_named("value", "int64", n)], hide=False),
        _time("min", "Min GPU Time", "Fastest sample", float(x.min())),
        _time("max", "Max GPU Time", "Slowest sample", float(x.max())),
        _time("mean", "GPU Time", "Mean time per call over every sample", mean, hide=False),
        _time("stdev/absolute", "Noise", "Standard deviation of the samples", stdev if enough else None),
        _time("stdev/relative", "Noise", "Relative standard deviation of the samples (null: fewer than 5)",
              stdev / mean if enough and stdev is not None else None, hide=False, hint="percentage"),
        _time("q1", "Q1 GPU Time", "First quartile of the samples", q1),
        _time("median", "Median GPU Time", "Median of the samples", median),
        _time("q3", "Q3 GPU Time", "Third quartile of the samples", q3),
        _time("iqr/absolute", "IQR", "Interquartile range of the samples", q3 - q1),
    ]
    if enough:
        out.append(_time("iqr/relative", "Rel IQR", "Interquartile range over the median", (q3 - q1) / median,
                         hint="percentage"))
    return out


def _mfu_sweep_summaries(records: Sequence[Record], peak: float | None) -> list[dict[str, Any]]:
    seconds = shape_seconds(records)
    tflops = records[0].flops / seconds / 1e12
    head = records[0]
    data = [_named("value", "float64", seconds)]
    out = [_summary("mfu-sweep/time", "mfu-sweep Time", "duration",
                    "The shape's time as mfu-sweep reports it: the median of its passes' medians", data),
           _summary("mfu-sweep/tflops", "TFLOP/s", "item_rate", "2*B*M*N*K FLOPs over the mfu-sweep time",
                    [_named("value", "float64", tflops)])]
    if peak:
        out.append(_summary("mfu-sweep/mfu", "MFU", "percentage", f"TFLOP/s over the peak ({peak:g} TFLOP/s)",
                            [_named("value", "float64", tflops / peak)]))
    cache = str(head.extra.get("cache") or "unknown")
    timing = [_named("timer", "string", head.timer), _named("cache", "string", cache),
              _named("passes", "int64", len(records))]
    out.append(_summary("mfu-sweep/timing", "Timing", "timing", "How mfu-sweep measured the samples", timing))
    if math := math_of(head):
        out.append(_summary("mfu-sweep/math", "Math", "math", "The record's math mode beyond its dtype",
                            [_named(k, "string", v) for k, v in math.items()]))
    return out


DENSE = "none"  # the groups axis value of a dense shape in a benchmark that also has grouped ones


def groups_text(shape: Shape) -> str:
    """The ``groups`` axis value: ``m=512*8`` for a grouped GEMM, :data:`DENSE` for a dense one."""
    return format_groups(shape) if shape.grouped else DENSE


def _axis_values(shape: Shape, dtype: str, mode: str, grouped: bool) -> list[dict[str, Any]]:
    out = [_named("B", "int64", shape.batch), _named("M", "int64", shape.m), _named("N", "int64", shape.n),
           _named("K", "int64", shape.k), _named("T", "string", dtype), _named("mode", "string", mode),
           _named("layout", "string", shape.layout)]
    return [*out, _named("groups", "string", groups_text(shape))] if grouped else out


def _state_name(device_id: int, shape: Shape, dtype: str, mode: str, grouped: bool) -> str:
    name = (f"Device={device_id} B={shape.batch} M={shape.m} N={shape.n} K={shape.k} T={dtype} mode={mode} "
            f"layout={shape.layout}")
    return f"{name} groups={groups_text(shape)}" if grouped else name


def _axes(shapes: Iterable[Shape], dtype: str, mode: str) -> list[dict[str, Any]]:
    shapes = list(shapes)

    def ints(name: str, values: Iterable[int]) -> dict[str, Any]:
        return {"name": name, "type": "int64", "flags": "",
                "values": [{"input_string": str(v), "description": "", "value": v} for v in sorted(set(values))]}

    return [ints("B", (s.batch for s in shapes)), ints("M", (s.m for s in shapes)), ints("N", (s.n for s in shapes)),
            ints("K", (s.k for s in shapes)),
            {"name": "T", "type": "type", "flags": "",
             "values": [{"input_string": dtype, "description": "mfu-sweep dtype", "is_active": True}]},
            {"name": "mode", "type": "string", "flags": "",
             "values": [{"input_string": mode, "description": "", "value": mode}]},
            {"name": "layout", "type": "string", "flags": "",
             "values": [{"input_string": v, "description": "", "value": v}
                        for v in sorted({s.layout for s in shapes})]}] + (
        [{"name": "groups", "type": "string", "flags": "",
          "values": [{"input_string": v, "description": "", "value": v}
                     for v in sorted({groups_text(s) for s in shapes})]}] if any(s.grouped for s in shapes) else [])


def _device(device_id: int, sweep: Sweep) -> dict[str, Any]:
    """An nvbench device entry: id and name, and the few hardware facts the sweep holds in nvbench's terms."""
    dev = sweep.device
    out: dict[str, Any] = {"id": device_id, "name": str(dev.get("name") or sweep.label)}
    cc = str(dev.get("compute_capability") or "")
    if re.fullmatch(r"\d+\.\d+", cc):
        major, minor = cc.split(".")
        out["sm_version"] = int(major) * 100 + int(minor) * 10
    if dev.get("sm_count"):
        out["number_of_sms"] = int(dev["sm_count"])
    if dev.get("memory_bytes"):
        out["global_memory_size"] = int(dev["memory_bytes"])
    return out


def _grouped(sweeps: Sequence[Sweep]) -> dict[tuple[str, str], dict[str, dict[Shape, list[Record]]]]:
    """(dtype, mode) -> label -> shape -> records (usable ones first: a shape is skipped only when none is)."""
    out: dict[tuple[str, str], dict[str, dict[Shape, list[Record]]]] = {}
    for sw in sorted(sweeps, key=sweep_order):
        for rec in sw.records:
            out.setdefault((rec.dtype, rec.mode), {}).setdefault(sw.label, {}).setdefault(rec.shape, []).append(rec)
    return {k: out[k] for k in sorted(out)}


def nvbench_document(sweeps: Sequence[Sweep], sidecar: str, argv: Sequence[str] = ()) -> NvbenchFile:
    """The nvbench JSON of ``sweeps``; ``sidecar`` is the sample-times folder as the JSON names it (relative
    to the JSON's own folder, as nvbench writes it: ``<file name>-bin``)."""
    first = {}
    for sw in sorted(sweeps, key=sweep_order):
        first.setdefault(sw.label, sw)
    ids = {label: i for i, label in enumerate(first)}
    samples: list[tuple[float, ...]] = []
    benches = []
    for (dtype, mode), by_label in _grouped(sweeps).items():
        states = []
        shapes = {s for by_shape in by_label.values() for s in by_shape}
        grouped = any(s.grouped for s in shapes)
        for label, by_shape in by_label.items():
            peak = first[label].peak.for_dtype(dtype)
            for shape in sorted(by_shape, key=lambda s: (s.flops, str(s))):
                states.append(_state(ids[label], shape, dtype, mode, by_shape[shape], peak, sidecar, samples,
                                     grouped))
        benches.append({"name": f"gemm_{dtype}_{mode}", "index": len(benches), "min_samples": 0,
                        "devices": [ids[label] for label in by_label], "axes": _axes(shapes, dtype, mode),
                        "states": states})
    version = ".".join(map(str, JSON_VERSION))
    meta = {"argv": list(argv),
            "version": {"json": dict(zip(("major", "minor", "patch"), JSON_VERSION)) | {"string": version}},
            "mfu_sweep": {"version": __version__, "devices": [_provenance(ids[label], sw)
                                                               for label, sw in first.items()]}}
    return NvbenchFile(document={"meta": meta, "devices": [_device(ids[label], sw) for label, sw in first.items()],
                                 "benchmarks": benches}, samples=tuple(samples))


def _provenance(device_id: int, sweep: Sweep) -> dict[str, Any]:
    return {"id": device_id, "label": sweep.label, "chip": sweep.device.get("chip"),
            "backend": sweep.device.get("backend"), "host": sweep.run.get("host"), "run_id": sweep.run.get("id"),
            "source": sweep.source or None, "peak": sweep.peak.to_json()}


def _state(device_id: int, shape: Shape, dtype: str, mode: str, records: Sequence[Record], peak: float | None,
           sidecar: str, samples: list[tuple[float, ...]], grouped: bool = False) -> dict[str, Any]:
    state = {"name": _state_name(device_id, shape, dtype, mode, grouped), "min_samples": 0, "device": device_id,
             "type_config_index": 0, "axis_values": _axis_values(shape, dtype, mode, grouped)}
    good = [r for r in records if usable(r)]
    if not good:
        why = "; ".join(dict.fromkeys(f"{r.status}: {r.error}" if r.error else r.status for r in records))
        return {**state, "summaries": [], "is_skipped": True, "skip_reason": why}
    pooled = tuple(float(t) for r in good for t in r.samples_s)
    sidecar_file = _summary(SAMPLES_TAG, "Sample Times File", "file/sample_times",
                            "Binary file containing sample times as little-endian float32.",
                            [_named("filename", "string", f"{sidecar}/{len(samples)}.bin"),
                             _named("size", "int64", len(pooled))])
    samples.append(pooled)
    return {**state, "summaries": [*time_summaries(pooled), sidecar_file, *_mfu_sweep_summaries(good, peak)],
            "is_skipped": False}


def sidecar_of(path: str | Path) -> Path:
    """The sample-times folder of an nvbench JSON file: ``<file>-bin`` beside it, as nvbench names it."""
    path = Path(path)
    return path.with_name(path.name + SIDECAR_SUFFIX)


def check_sidecar(path: str | Path, force: bool) -> Path:
    """Refuse a sample-times folder that exists (without ``force``) or holds files this export did not write."""
    folder = sidecar_of(path)
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise OutputError(f"{str(folder)!r} (the sample-times folder of {str(path)!r}) exists and is not a folder; "
                          "pick another -o")
    if folder.exists() and not force:
        raise OutputError(f"{str(folder)!r} (the sample times of an earlier export) exists; use --force to "
                          "overwrite it")
    if folder.exists() and (other := [p.name for p in folder.iterdir() if not _SIDECAR_FILE.match(p.name)]):
        raise OutputError(f"{str(folder)!r} holds {other[0]!r}, not written by an export; pick another -o")
    return folder


def _swap_in(tmp: Path, folder: Path, pending: Path, path: Path) -> None:
    """Put the new sample folder and JSON in place of the old pair: two renames, the old folder kept aside
    until both are done (and put back if the first fails)."""
    old = folder.with_name(f"{tmp.name}.old") if folder.exists() else None
    if old is not None:
        folder.rename(old)
    try:
        tmp.rename(folder)
    except BaseException:
        if old is not None:
            old.rename(folder)
        raise
    os.replace(pending, path)
    if old is not None:
        shutil.rmtree(old)


def write_nvbench(sweeps: Sequence[Sweep], path: str | Path, argv: Sequence[str] = (),
                  force: bool = False) -> NvbenchFile:
    """Write ``sweeps`` as nvbench JSON to ``path`` and its samples to ``<path>-bin/``; return what was written.

    Both are written in full beside the targets first (a temporary folder, a ``.pending`` file), then
    renamed into place, so an interrupted export leaves the previous pair as it was (at worst with a
    stray temporary beside it).
    """
    path = Path(path)
    folder = check_sidecar(path, force)
    export = nvbench_document(sweeps, folder.name, argv)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=path.parent))
    pending = path.with_name(f".{path.name}.pending")
    try:
        for i, values in enumerate(export.samples):
            data = array("f", values)
            if sys.byteorder != "little":
                data.byteswap()
            (tmp / f"{i}.bin").write_bytes(data.tobytes())
        write_json_atomic(pending, export.document)
        _swap_in(tmp, folder, pending, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        pending.unlink(missing_ok=True)
    return export


def export_nvbench(files: Sequence[str], what: str, output: str | None, force: bool, argv: Sequence[str] = ()) -> str:
    """``export --format nvbench``: check the request, write the file and its samples, return the line to print.

    Raises
    ------
    OutputError
        For ``--what`` other than records, no ``-o`` (a JSON file and a folder cannot go to stdout), an ``-o``
        not ending in ``.json``, or an output (file or sample folder) that exists without ``force``.
    """
    if what != "records":
        raise OutputError(f"--format nvbench writes the records (per-shape times); --what {what} has no nvbench "
                          "form: drop --what, or export it as csv, markdown or latex")
    if output is None:
        raise OutputError("--format nvbench writes a JSON file and its sample-times folder beside it: give "
                          "-o FILE.json")
    check_suffix(output, ".json", "nvbench JSON")
    check_output_file(output, force)
    check_sidecar(output, force)  # before reading the sweeps, so a refusal costs nothing
    benches = write_nvbench(load_sweeps(files), output, argv, force).document["benchmarks"]
    states = sum(len(b["states"]) for b in benches)
    return f"wrote {output} ({len(benches)} benchmarks, {states} states) and its sample times in {sidecar_of(output)}/"
