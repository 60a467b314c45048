"""nvbench output: ``--json`` (``nvbench/json_printer.cu``), ``--csv`` and ``--md`` (see
:mod:`mfu_sweep.importers.nvbench_text`); the format is recognised from the content.

JSON layout: ``meta.version.json`` (file format, 1.0.0), ``devices[]`` (``id``,
``name``, ``sm_version``, ``sm_default_clock_rate`` ...) and ``benchmarks[]``
with ``states[]``; a state has ``device``, ``axis_values`` (``[{name, type,
value}]``), ``summaries`` (``[{tag, data: [{name, type, value}]}]``, values
as strings) and ``is_skipped``. nvbench has no GEMM of its own, so a GEMM
benchmark must have axes for ``M``, ``N``, ``K`` (optionally ``B``/``Batch``)
and the dtype as an axis named ``T``/``dtype``/``type`` or via ``--dtype``;
``--axis M=NAME`` maps differently named axes. A ``layout`` axis (``nn``, ``nt``, ``tn``, ``tt``), a
``mode`` axis (``eager``, ``compile``) and a ``groups`` axis (``m=512*8``: a grouped GEMM's group sizes;
``none``: dense), as ``export --format nvbench`` writes them, are read when present; without them every
state is a dense ``nn`` shape issued eagerly (nvbench benchmarks call a kernel). Of such an export, the
sweep's peak block (``meta.mfu_sweep.devices[].peak``) is the imported sweep's peak unless ``--chip`` names
a chip, and each state's ``mfu-sweep/math`` (``maybe_tf32``, ``mat_mul_precision`` ...) returns to its record.

How it was measured: ``nv/cold/time/gpu/*`` are isolated launches timed by CUDA
events with the L2 flushed before each (cold), the launch hidden behind a
blocking kernel, stopping when the relative noise falls under the limit. This
reader uses the median (``nv/cold/time/gpu/median``, JSON only) or the mean
(flag ``source_mean``; CSV and markdown print only the mean, "GPU Time");
where the state has a sample-times sidecar (``nv/json/bin:nv/cold/sample_times``,
float32 per sample) beside the JSON, all samples are imported. A state with
only the batch (hot) time ("Batch GPU", back-to-back launches, no flush) is
imported with timer ``nvbench-batch``.
"""

from __future__ import annotations

import json
import math
from array import array
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from mfu_sweep.gemm.dtypes import ALIASES, DTYPES
from mfu_sweep.gemm.shapes import DEFAULT_LAYOUT, LAYOUTS, Shape, ShapeError, parse_groups
from mfu_sweep.importers import nvbench_text
from mfu_sweep.importers.common import (
    CACHES,
    SourceDevice,
    SourceError,
    SourceRow,
    known_timer,
    read_provenance,
    sha256_of,
)
from mfu_sweep.importers.identity import Identity
from mfu_sweep.importers.nvbench_text import State
from mfu_sweep.importers.values import count, number, read_text
from mfu_sweep.records.summaries import MATH_FLAGS, MATH_KEYS
from mfu_sweep.specs import Peak
from mfu_sweep.util.inputs import InputError, parse_json, read_limited
from mfu_sweep.util.text import counted

FORMAT = "nvbench"
TYPE_NAMES = {
    "f32": "fp32", "float": "fp32", "float32": "fp32", "fp32": "fp32",
    "tf32": "tf32",
    "bf16": "bf16", "bfloat16": "bf16", "__nv_bfloat16": "bf16", "nv_bfloat16": "bf16",
    "f16": "fp16", "half": "fp16", "__half": "fp16", "float16": "fp16", "fp16": "fp16",
    "fp8": "fp8", "e4m3": "fp8", "__nv_fp8_e4m3": "fp8", "float8_e4m3fn": "fp8", "f8e4m3fn": "fp8",
    # every dtype of the tool under its own name (export --format nvbench writes them: fp8-rowwise, mxfp8 ...)
    # and torch's names of them
    **{name: name for name in DTYPES}, **ALIASES,
}
MODES = ("eager", "compile")
TARGETS = {"m": ("m",), "n": ("n",), "k": ("k",), "b": ("b", "batch"), "t": ("t", "dtype", "type")}
SAMPLES_TAG = "nv/json/bin:nv/cold/sample_times"
SOFTWARE_KEYS = ("sm_version", "sm_default_clock_rate")  # device details kept in environment.software
UNKNOWN = ("SM clock during the run beyond the default clock rate", "driver and CUDA versions",
           "which GEMM library the benchmark called")
COLD_METHOD = ("cold isolated launches timed by CUDA events, L2 flushed before each, launch hidden behind a "
               "blocking kernel; {stat}")
BATCH_METHOD = "batch (hot) measurement: many back-to-back launches timed together, no flush; mean per launch"


def _summary(state: dict, tag: str, field_name: str = "value") -> Any:
    for s in state.get("summaries") or []:
        if s.get("tag") == tag:
            for d in s.get("data") or []:
                if d.get("name") == field_name:
                    return d.get("value")
    return None


def _float(value: Any, where: str, what: str) -> float | None:
    """A summary value (nvbench writes them as strings) parsed whole, or None where the state has none."""
    if value is None or value == "":
        return None
    return number(value, where, what)


def _samples(base: Path, state: dict, where: str) -> tuple[float, ...]:
    fname = _summary(state, SAMPLES_TAG, "filename")
    if not fname:
        return ()
    f = Path(fname) if Path(fname).is_absolute() else base / fname
    if not f.is_file():
        return ()
    try:
        raw = read_limited(f)
    except InputError as exc:
        raise SourceError(str(exc)) from None
    data = array("f")
    data.frombytes(raw[: (len(raw) // 4) * 4])
    bad = next((i for i, x in enumerate(data) if not 0 < x < math.inf), None)
    if bad is not None:  # never dropped quietly: the median of the rest would be another number
        raise SourceError(f"{where}: sample {bad} of {str(f)!r} is {data[bad]!r} s, not a positive finite time")
    return tuple(float(x) for x in data)


def _json_states(root: dict, name: str, base: Path) -> list[State]:
    devices = {d.get("id"): d for d in root.get("devices") or [] if isinstance(d, dict)}
    out = []
    for bench in root.get("benchmarks") or []:
        for j, st in enumerate(bench.get("states") or []):
            where = f"{name!r}: benchmark {bench.get('name')!r} state {st.get('name', j)!r}"
            dev = devices.get(st.get("device"), {})
            median = _float(_summary(st, "nv/cold/time/gpu/median"), where, "GPU time")
            mean = _float(_summary(st, "nv/cold/time/gpu/mean"), where, "GPU time")
            out.append(State(
                where=where, device=str(dev.get("name") or f"device {st.get('device')}"),
                axes={str(a.get("name", "")): str(a.get("value")) for a in st.get("axis_values") or []},
                cold_s=median if median is not None else mean, cold_stat="median" if median is not None else "mean",
                batch_s=_float(_summary(st, "nv/batch/time/gpu/mean"), where, "batch GPU time"),
                skipped=(f"skipped by nvbench: {st.get('skip_reason', '')}".strip() if st.get("is_skipped") else None),
                samples_s=_samples(base, st, where),
                sample_size=count(str(_summary(st, "nv/cold/sample_size") or 0), where, "sample size"),
                details={k: dev.get(k) for k in ("sm_version", "sm_default_clock_rate", "number_of_sms")}
                | {"id": st.get("device")},
                timing={k: str(v) for k in ("timer", "cache")
                        if (v := _summary(st, "mfu-sweep/timing", k)) not in (None, "", "unknown")},
                math={k: str(v) for k in ("flags", *MATH_KEYS) if (v := _summary(st, "mfu-sweep/math", k))},
            ))
    return out


def _axis(state: State, target: str, mapping: Mapping[str, str]) -> str | None:
    lower = {k.lower(): v for k, v in state.axes.items()}
    if target in mapping:
        src = mapping[target]
        if src.lower() not in lower:
            raise SourceError(f"{state.where}: --axis {target.upper()}={src}: no such axis "
                              f"(has: {', '.join(state.axes) or 'none'})")
        return lower[src.lower()]
    return next((lower[a] for a in TARGETS[target] if a in lower), None)


def _shape(state: State, mapping: Mapping[str, str]) -> Shape:
    vals = {t: _axis(state, t, mapping) for t in ("m", "n", "k", "b")}
    missing = [t.upper() for t in ("m", "n", "k") if vals[t] is None]
    if missing:
        raise SourceError(f"{state.where}: no {', '.join(missing)} axis (has: {', '.join(state.axes) or 'none'}); "
                          "name them M, N, K or map them with --axis M=NAME")
    layout = _plain_axis(state, "layout") or DEFAULT_LAYOUT
    if layout not in LAYOUTS:
        raise SourceError(f"{state.where}: layout axis {layout!r} is not one of {', '.join(LAYOUTS)}")
    groups = (_plain_axis(state, "groups") or "none").strip()
    try:  # a grouped GEMM's groups as export --format nvbench writes them; "none": dense
        dim, sizes = parse_groups(groups) if groups.lower() != "none" else ("m", ())
        return Shape(int(vals["b"] or 1), *(int(vals[t]) for t in ("m", "n", "k")), layout=layout, groups=sizes,
                     group_dim=dim)
    except ShapeError as exc:  # a ValueError too: first
        raise SourceError(f"{state.where}: {exc}") from None
    except ValueError:
        raise SourceError(f"{state.where}: M, N, K, B axes must be integers, got "
                          f"{[vals[t] for t in ('m', 'n', 'k', 'b')]!r}") from None


def _plain_axis(state: State, name: str) -> str | None:
    """The value of the state's axis ``name`` (any case), one ``--axis`` cannot map; None without one."""
    return next((v for k, v in state.axes.items() if k.lower() == name), None)


def _mode(state: State) -> str:
    """The state's ``mode`` axis (``eager``, ``compile``); ``eager`` without one."""
    mode = _plain_axis(state, "mode") or "eager"
    if mode not in MODES:
        raise SourceError(f"{state.where}: mode axis {mode!r} is not one of {', '.join(MODES)}")
    return mode


def _row(state: State, dtype_opt: str | None, mapping: Mapping[str, str], batch: bool) -> SourceRow:
    shape, mode = _shape(state, mapping), _mode(state)
    key = _axis(state, "t", mapping)
    if key is not None and key.lower() not in TYPE_NAMES:
        raise SourceError(f"{state.where}: unknown dtype key {key!r} (known: {', '.join(sorted(TYPE_NAMES))})")
    dtype = TYPE_NAMES[key.lower()] if key is not None else dtype_opt
    if dtype is None:
        raise SourceError(f"{state.where}: no dtype axis (T, dtype or type); pass --dtype")
    source_dtype = key or f"--dtype {dtype}"
    if state.skipped:
        return SourceRow(shape=shape, dtype=dtype, seconds=None, source_dtype=source_dtype, family="nvbench",
                         error=state.skipped, mode=mode)
    seconds = state.batch_s if batch else state.cold_s
    stat = "mean" if batch else state.cold_stat
    flags = (("source_mean",) if stat == "mean" else ()) + (("rounded_source",) if state.rounded else ())
    flags += tuple(f for f in state.math.get("flags", "").split(",") if f in MATH_FLAGS)
    unit = "nv/batch/time/gpu/mean" if batch else f"nv/cold/time/gpu/{stat}"
    return SourceRow(shape=shape, dtype=dtype, seconds=seconds, source_dtype=source_dtype, flags=flags,
                     samples_s=() if batch else state.samples_s, family="nvbench", where=state.where, mode=mode,
                     error=None if seconds is not None else f"no {unit} value",
                     extra={"source_value": seconds, "source_unit": f"s ({unit})",
                            "source_samples": state.sample_size, **state.timing,
                            **{k: v for k, v in state.math.items() if k in MATH_KEYS}})


def _load(path: Path) -> tuple[list[State], dict[str, Any], Counter, str]:
    """States, file-level details, lines skipped by reason, and the output kind (json, csv, md)."""
    name = str(path)
    text = read_text(path, "nvbench --json, --csv or --md output")
    head = text.lstrip()[:4096]
    if head.startswith("{"):
        try:
            root = parse_json(text.encode(), name)
        except InputError as exc:
            raise SourceError(str(exc)) from None
        except json.JSONDecodeError as exc:
            raise SourceError(f"{name!r}: not readable JSON ({exc})") from None
        if not isinstance(root, dict) or "benchmarks" not in root or "devices" not in root:
            raise SourceError(f"{name!r}: not an nvbench JSON file (needs 'devices' and 'benchmarks')")
        version = (root.get("meta") or {}).get("version") or {}
        info = {"nvbench": (version.get("nvbench") or {}).get("string"),
                "json": (version.get("json") or {}).get("string", "unversioned"), "exported": _exported(root)}
        return _json_states(root, name, path.parent), info, Counter(), "json"
    if nvbench_text.is_csv(head):
        states, skipped = nvbench_text.csv_states(text, name)
        return states, {}, skipped, "csv"
    if nvbench_text.is_markdown(head):
        states, skipped, info = nvbench_text.md_states(text, name)
        return states, info, skipped, "md"
    raise SourceError(f"{name!r}: not nvbench --json, --csv or --md output (no JSON object, 'Benchmark,Device,' "
                      "header or '# Benchmark Results' section)")


def _exported(root: Mapping[str, Any]) -> dict[Any, dict[str, Any]]:
    """Device id -> what ``export --format nvbench`` wrote of it (``meta.mfu_sweep.devices``: label, chip ...);
    empty for nvbench's own files."""
    meta = root.get("meta") if isinstance(root.get("meta"), Mapping) else {}
    block = meta.get("mfu_sweep") if isinstance(meta.get("mfu_sweep"), Mapping) else {}
    return {d.get("id"): dict(d) for d in block.get("devices") or [] if isinstance(d, Mapping)}


def read(path: Path, dtype: str | None = None, axes: Mapping[str, str] | None = None) -> list[SourceDevice]:
    name = str(path)
    mapping = {k.lower(): v for k, v in (axes or {}).items()}
    bad = sorted(set(mapping) - set(TARGETS))
    if bad:
        raise SourceError(f"--axis {bad[0].upper()}=...: only M, N, K, B (batch) and T (dtype) can be mapped")
    states, info, skipped, kind = _load(path)
    if not states:
        raise SourceError(f"{name!r}: no benchmark states")
    by_device: dict[tuple[str, Any], list[State]] = {}
    for st in states:
        by_device.setdefault((st.device, st.details.get("id")), []).append(st)
    ids = Counter(dname for dname, _ in by_device)
    exported = info.get("exported") or {}
    devices = [_device(name, path, dname if ids[dname] == 1 else f"{dname} [{dev_id}]", sts, info, skipped, kind,
                       dtype, mapping) for (dname, dev_id), sts in by_device.items()]
    return [_as_exported(d, exported.get(dev_id)) for d, (_, dev_id) in zip(devices, by_device, strict=True)]


def _as_exported(dev: SourceDevice, origin: Mapping[str, Any] | None) -> SourceDevice:
    """A device of an ``export --format nvbench`` file as the sweep it was: its label (the default output label),
    chip and the timer and cache its samples were measured with (the states' ``mfu-sweep/timing``), so that
    ``compare`` against the original sees the same timing."""
    if not origin or not origin.get("label"):
        return dev
    timings = Counter((r.extra.get("timer"), r.extra.get("cache")) for r in dev.rows if r.extra.get("timer"))
    timer, cache = timings.most_common(1)[0][0] if timings else (dev.timer, dev.cache)
    if not known_timer(timer) or cache not in CACHES:  # not a timer mfu-sweep records: nvbench's reading stays
        timer, cache = dev.timer, dev.cache
    notes = [f"{counted(sum(timings.values()) - timings[(timer, cache)], 'state')} timed otherwise "
              f"({', '.join(f'{t}/{c}' for t, c in timings if (t, c) != (timer, cache))}): read as {timer}/{cache}"
              ] if len(timings) > 1 else []
    peak = carried_peak(origin.get("peak"), f"{dev.provenance.get('source_file')!r}: device {origin['label']!r}")
    if peak is None:
        notes.append("the export carries no peak (written before mfu-sweep kept it in meta.mfu_sweep): the peak is "
                     "the spec table's for its chip, not the sweep's own (a CPU's estimate, an fp32-as-tf32 basis)")
    rows = tuple(replace(r, extra={k: v for k, v in r.extra.items() if k not in ("timer", "cache")}) for r in dev.rows)
    prov = {**dev.provenance, "timing_method": f"mfu-sweep's own samples ({timer} timer, cache {cache}), exported with "
            "export --format nvbench and read back", "notes": [*dev.provenance.get("notes", []), *notes],
            "exported_by_mfu_sweep": {"label": origin["label"], "chip": origin.get("chip"), "timer": timer,
                                      "cache": cache, "run_id": origin.get("run_id")},
            "unknown": [u for u in dev.provenance.get("unknown", []) if "GEMM library" not in u]}
    return replace(dev, key=str(origin["label"]), rows=rows, timer=timer, cache=cache or "unknown",
                   chip=origin.get("chip") or None, provenance=prov, peak=peak)


def carried_peak(block: Any, where: str) -> Peak | None:
    """The peak block an export carries (``Peak.to_json``'s form), checked; None where it carries none.

    Raises :class:`SourceError` naming ``where`` and the field for a block that is no peak: each TFLOP/s
    above 0 and finite, the bandwidth finite, the texts text, ``estimated`` and ``override`` true or false.
    """
    if block is None:
        return None
    maps = ("tflops", "dtype_basis", "overrides")
    if not isinstance(block, Mapping) or not all(isinstance(block.get(k) or {}, Mapping) for k in maps):
        raise SourceError(f"{where}: peak {str(block)[:60]!r} is not a peak block (an object with tflops)")
    for dtype, value in (block.get("tflops") or {}).items():
        if not number(value, where, f"peak tflops.{dtype}") > 0:
            raise SourceError(f"{where}: peak tflops.{dtype} {value!r} is not above 0")
    if block.get("memory_bandwidth_tbs") is not None:
        number(block["memory_bandwidth_tbs"], where, "peak memory_bandwidth_tbs")
    texts = {**{k: block.get(k) for k in ("chip", "source", "notes", "basis", "scope")},
             **{f"dtype_basis.{k}": v for k, v in (block.get("dtype_basis") or {}).items()}}
    bad = next(((k, v) for k, v in texts.items() if v is not None and not isinstance(v, str)), None)
    if bad:
        raise SourceError(f"{where}: peak {bad[0]} {bad[1]!r} is not text")
    flag = next((k for k in ("estimated", "override") if not isinstance(block.get(k, False), bool)), None)
    if flag:
        raise SourceError(f"{where}: peak {flag} {block[flag]!r} is not true or false")
    return Peak.from_json(block)


def identity_of(details: Mapping[str, Any]) -> Identity:
    """Architecture (``sm_version`` 860 -> ``sm_86``) and SM count of an nvbench device; nvbench prints no uuid."""
    sm = str(details.get("sm_version") or "").split()[0] if details.get("sm_version") else ""
    sms = str(details.get("number_of_sms") or "")
    if not sm.isdigit():
        return Identity(sm_count=int(sms) if sms.isdigit() else None)
    major, minor = int(sm) // 100, int(sm) % 100 // 10
    return Identity(arch=f"sm_{major}{minor}", compute_capability=f"{major}.{minor}",
                    sm_count=int(sms) if sms.isdigit() else None)


def _device(name: str, path: Path, dname: str, states: list[State], info: Mapping[str, Any], skipped: Counter,
            kind: str, dtype: str | None, mapping: Mapping[str, str]) -> SourceDevice:
    batch = all(s.cold_s is None for s in states if not s.skipped) and any(s.batch_s for s in states)
    got: dict[tuple, SourceRow] = {}
    repeats = 0
    for st in states:
        row = _row(st, dtype, mapping, batch)
        if (row.shape, row.dtype, row.mode) in got:
            repeats += 1
            continue
        got[(row.shape, row.dtype, row.mode)] = row
    notes = ([f"{repeats} states repeat a shape, dtype and mode (other axes differ); the first kept"] if repeats
             else [])
    notes += [f"{counted(n, 'line')} skipped: {why}" for why, n in sorted(skipped.items())]
    truncated = any(why.startswith("cut") for why in skipped)
    rows = [replace(r, flags=(*r.flags, "truncated")) if truncated else r for r in got.values()]
    if kind == "md":
        notes.append("markdown output lists no skipped states and prints times to 3 decimals of their unit "
                     "(flag rounded_source)")
    stat = "mean" if kind != "json" or any("source_mean" in r.flags for r in rows) else "median"
    method = BATCH_METHOD if batch else COLD_METHOD.format(
        stat="median" if stat == "median" else "mean (flag source_mean; the median is hidden in CSV/markdown)")
    first = states[0].details
    return SourceDevice(
        key=dname, name=states[0].device, rows=tuple(rows), identity=identity_of(first), mode="eager",
        timer="nvbench-batch" if batch else "nvbench-cold",
        cache="none" if batch else "flush",
        details={"software": {"nvbench": info.get("nvbench"), **{k: v for k, v in first.items()
                                                                  if v is not None and k in SOFTWARE_KEYS}}},
        provenance={
            "source_file": path.name, "source_sha256": sha256_of(path), **read_provenance(path),
            "tool": f"nvbench {info.get('nvbench') or '?'} ({kind} output"
                    + (f", JSON {info.get('json')})" if kind == "json" else ")"),
            "timing_method": method, "device_key": dname,
            "dtype_keys": {r.dtype: r.source_dtype for r in rows}, "notes": notes, "unknown": list(UNKNOWN),
            **({"truncated": True} if truncated else {}),
            **({"skipped_lines": dict(skipped)} if skipped else {}),
        },
    )
