"""What a result file must mean, beyond its schema: the checks of ``validate`` and of every reader.

The schema says a field is a number; these checks say it is the right one. Per record:

- every number is finite (NaN and infinity are written as null by this tool, never as numbers);
- ``flops`` is 2·batch·m·n·k of its shape, ``bytes`` what the shape moves at its dtype's sizes (A and
  B read once, C written once; a grouped GEMM's B or C once per group, a block-scaled dtype's scales
  with its inputs: :meth:`mfu_sweep.gemm.shapes.Shape.bytes`) and ``intensity`` flops/bytes;
- every sample is a positive finite time and ``median_s`` lies among the samples;
- ``tflops`` is flops/median_s/1e12 and ``mfu`` tflops over the sweep's own peak for the dtype;
- one record per (pass, shape, dtype, mode) in a sweep (the second is the repeat), one sweep per
  ``run.id`` in a merged file (``merge`` keeps one of a run given twice).

The importers compute flops and bytes from the shape they import (a DeepBench sheet's K=1530 is
imported as the K=1536 that ran, flag ``source_k_1530``; a table's FLOP/s value is kept as
``source_value``), so their files pass as they are. The checks work on the parsed JSON, vectorised
with numpy (about 0.1 s of CPU for 10,000 records), so they run on every read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

from mfu_sweep.gemm.dtypes import DTYPES, get_dtype
from mfu_sweep.gemm.shapes import MAX_DIM
from mfu_sweep.util.names import escape_control, has_control

REL_TOL = 1e-6  # derived numbers agree with what they derive from to this fraction (JSON keeps 17 digits)
NUMBER_FIELDS = ("flops", "bytes", "intensity", "first_call_s", "compile_s", "first_call_ratio", "median_s",
                 "iqr_s", "ci_low_s", "ci_high_s", "tflops", "mfu", "rel_error")


def _float(value: Any) -> float:
    try:
        return float(value)
    except OverflowError:  # an integer past 1e308
        return math.inf
    except (TypeError, ValueError):
        return math.nan


def _floats(values: Sequence[Any], width: int = 0) -> np.ndarray:
    """``values`` (rows of ``width`` where given) as float64, null as NaN and an integer past 1e308 as infinity."""
    shape = (len(values), width) if width else (len(values),)
    try:
        return np.array(values, dtype=float).reshape(shape)
    except (OverflowError, TypeError, ValueError):
        flat = [v for row in values for v in row] if width else values
        return np.array([math.nan if v is None else _float(v) for v in flat], dtype=float).reshape(shape)


def _off(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Where ``got`` differs from ``want`` by more than :data:`REL_TOL` (NaN on either side: no verdict)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.abs(got - want) > REL_TOL * np.maximum(np.abs(got), np.abs(want))


def _num(value: float) -> str:
    return f"{value:.6g}"


def _raw(value: Any) -> str:
    """A value as the file holds it, shortened: an integer of 401 digits is named by its length."""
    if isinstance(value, str):  # escaped: a control character in it never reaches a terminal
        text = ascii(value)
        return text if len(text) <= 60 else f"{text[:56]}...' ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= 24 else f"{text[:20]}... ({len(text)} digits)"


class _Columns:
    """The numbers of a sweep's records as arrays, computed once for every check."""

    def __init__(self, records: Sequence[Mapping[str, Any]], peak: Mapping[str, Any]) -> None:
        self.records = records
        raw = [[r.get(name) for name in NUMBER_FIELDS] for r in records]
        table = _floats(raw, len(NUMBER_FIELDS))
        null = np.isnan(table)
        for i, j in zip(*np.nonzero(null)):  # null, or a NaN the standard parser read
            null[i, j] = raw[i][j] is None
        self.values = {name: (table[:, j], null[:, j]) for j, name in enumerate(NUMBER_FIELDS)}
        shapes = [r["shape"] for r in records]
        self.dims = _floats([(s.get("batch", 1), s["m"], s["n"], s["k"]) for s in shapes], 4)
        # a grouped GEMM has one B (groups along m) or one C (along k) per group: Shape.operand_elements
        per = [len(s.get("groups") or ()) or 1 for s in shapes]
        along_k = [s.get("group_dim", "m") == "k" for s in shapes]
        self.b_copies = np.array([1 if k else p for p, k in zip(per, along_k)], dtype=float)
        self.c_copies = np.array([p if k else 1 for p, k in zip(per, along_k)], dtype=float)
        sizes = [DTYPES.get(r["dtype"]) for r in records]
        self.known = np.array([d is not None for d in sizes], dtype=bool)
        self.element = np.array([d.input_bytes_per_element if d else math.nan for d in sizes], dtype=float)
        self.output = np.array([d.output_bytes if d else math.nan for d in sizes], dtype=float)
        tflops = peak.get("tflops") if isinstance(peak.get("tflops"), Mapping) else {}
        per_dtype = {dtype: _float(value) for dtype, value in tflops.items()}
        self.peak = np.array([per_dtype.get(r["dtype"], math.nan) for r in records], dtype=float)

    def get(self, name: str) -> np.ndarray:
        return self.values[name][0]

    def null(self, name: str) -> np.ndarray:
        return self.values[name][1]

    def shape(self, i: int) -> str:
        b, m, n, k = (int(x) for x in self.dims[i])
        text = f"{m}x{n}x{k}" if b == 1 else f"{b}x{m}x{n}x{k}"
        shape = self.records[i]["shape"]
        if shape.get("layout", "nn") != "nn":
            text += f":{shape['layout']}"
        if shape.get("groups"):
            text += f" ({len(shape['groups'])} groups along {shape.get('group_dim', 'm')})"
        return text


Found = dict[int, tuple[str, str]]  # record index -> (field, what is wrong with it)


def _flag(out: Found, where: np.ndarray, field: str, say: Any) -> None:
    """Record ``(field, say(i))`` for every index in ``where`` that has no problem yet (the first one counts)."""
    if not where.any():  # the usual case, cheaper than listing no index
        return
    for i in np.flatnonzero(where):
        if int(i) not in out:
            out[int(i)] = (field, say(int(i)))


def _non_finite(cols: _Columns, out: Found) -> None:
    for name in NUMBER_FIELDS:
        col, null = cols.values[name]
        _flag(out, ~np.isfinite(col) & ~null, name,
              lambda i, name=name: f"{_raw(cols.records[i].get(name))} is not a finite number")


def _arithmetic(cols: _Columns, out: Found) -> None:
    for j, name in enumerate(("batch", "m", "n", "k")):  # the limit a Shape keeps (a typo of a size, not a GEMM)
        _flag(out, cols.dims[:, j] > MAX_DIM, f"shape/{name}",
              lambda i, j=j: f"{int(cols.dims[i, j])} exceeds the limit {MAX_DIM}")
    b, m, n, k = cols.dims.T
    got_flops, got_bytes, got_intensity = cols.get("flops"), cols.get("bytes"), cols.get("intensity")
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        flops = 2.0 * b * m * n * k
        nbytes = b * (m * k + k * n * cols.b_copies) * cols.element + b * m * n * cols.c_copies * cols.output
        intensity = got_flops / got_bytes
    _flag(out, _off(got_flops, flops), "flops",
          lambda i: f"{_num(got_flops[i])} is not 2*batch*m*n*k = {_num(flops[i])} of shape {cols.shape(i)}")
    _flag(out, ~cols.known, "dtype", lambda i: f"{cols.records[i]['dtype']!r} is not one this version knows "
                                               f"({', '.join(DTYPES)}), so its bytes cannot be checked")
    _flag(out, _off(got_bytes, nbytes), "bytes",
          lambda i: f"{_num(got_bytes[i])} is not the {_num(nbytes[i])} shape {cols.shape(i)} moves in "
                    f"{cols.records[i]['dtype']} (A and B read once, C written once)")
    _flag(out, _off(got_intensity, intensity), "intensity",
          lambda i: f"{_num(got_intensity[i])} is not flops/bytes = {_num(intensity[i])}")


def _samples(cols: _Columns, out: Found) -> None:
    samples = [r.get("samples_s") or () for r in cols.records]
    counts = np.array([len(s) for s in samples], dtype=int)
    if not counts.any():
        return
    flat = _floats([v for s in samples for v in s])
    bad = np.zeros(len(samples), bool)
    bad[np.repeat(np.arange(len(samples)), counts)[~(np.isfinite(flat) & (flat > 0))]] = True
    _flag(out, bad, "samples_s", lambda i: f"{next(v for v in samples[i] if not 0 < _float(v) < math.inf)!r} "
                                           "is not a positive finite time")
    has = counts > 0
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))[has]
    low, high = np.full(len(samples), np.nan), np.full(len(samples), np.nan)
    low[has], high[has] = np.minimum.reduceat(flat, starts), np.maximum.reduceat(flat, starts)
    median = cols.get("median_s")
    with np.errstate(invalid="ignore"):
        outside = (median < low * (1 - REL_TOL)) | (median > high * (1 + REL_TOL))
    _flag(out, outside, "median_s", lambda i: f"{_num(median[i])} lies outside its samples "
                                              f"[{_num(low[i])}, {_num(high[i])}]")


def _rates(cols: _Columns, out: Found) -> None:
    median, tflops, mfu = cols.get("median_s"), cols.get("tflops"), cols.get("mfu")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        want_tflops = cols.get("flops") / median / 1e12
        want_mfu = tflops / cols.peak
    given = ~cols.null("mfu")
    _flag(out, _off(tflops, want_tflops), "tflops",
          lambda i: f"{_num(tflops[i])} is not flops/median_s/1e12 = {_num(want_tflops[i])}")
    _flag(out, given & np.isnan(cols.peak), "mfu",
          lambda i: f"{_num(mfu[i])} but the sweep's peak has no {cols.records[i]['dtype']} entry")
    _flag(out, given & cols.null("tflops"), "mfu", lambda i: f"{_num(mfu[i])} without tflops")
    _flag(out, _off(mfu, want_mfu), "mfu",
          lambda i: f"{_num(mfu[i])} is not tflops/peak = {_num(want_mfu[i])} (peak {_num(cols.peak[i])} TFLOP/s for "
                    f"{cols.records[i]['dtype']})")


def _hashable(shape: Mapping[str, Any]) -> tuple:
    """A shape object as a dictionary key (a grouped GEMM's groups are a list)."""
    return tuple(sorted((key, tuple(v) if isinstance(v, list) else v) for key, v in shape.items()))


def _repeats(cols: _Columns, out: Found) -> None:
    keys = [(r.get("pass") or 0, _hashable(r["shape"]), r["dtype"], r["mode"]) for r in cols.records]
    if len(set(keys)) == len(keys):
        return
    first: dict[tuple, int] = {}
    for i, key in enumerate(keys):
        j = first.setdefault(key, i)
        if j != i and i not in out:
            out[i] = ("", f"repeats records/{j}: pass {key[0]}, shape {cols.shape(i)}, {key[2]} {key[3]} "
                          "(one record per pass, shape, dtype and mode)")


CHECKS = (_non_finite, _arithmetic, _samples, _rates, _repeats)


def record_problems(sweep: Mapping[str, Any], skip: Collection[int] = ()) -> dict[int, str]:
    """The first problem of each record of a schema-valid ``sweep`` that fails a check, by record index.

    Messages name the place as the schema's do (``records/3/flops: ...``). ``skip`` are records
    already known bad (the schema refused them); they are not looked at.
    """
    records = sweep.get("records") or []
    keep = [i for i in range(len(records)) if i not in skip]
    if not keep:
        return {}
    cols = _Columns([records[i] for i in keep] if skip else records, sweep.get("peak") or {})
    found: Found = {}
    for check in CHECKS:
        check(cols, found)
    return {keep[i]: f"records/{keep[i]}" + (f"/{field}: " if field else ": ") + text
            for i, (field, text) in sorted(found.items())}


def _peak_problems(sweep: Mapping[str, Any]) -> list[str]:
    """Problems of a schema-valid sweep's own peak (NaN passes the schema as null), which no dropped record mends."""
    bandwidth = (sweep.get("peak") or {}).get("memory_bandwidth_tbs")
    if bandwidth is not None and not math.isfinite(_float(bandwidth)):
        return [f"peak/memory_bandwidth_tbs: {bandwidth!r} is not a finite number"]
    return []


def _label_problems(sweep: Mapping[str, Any]) -> list[str]:
    """A label of spaces alone, which the schema's pattern lets through and ``sweep --label`` refuses."""
    label = (sweep.get("device") or {}).get("label")
    if isinstance(label, str) and not label.strip():
        return [f"device/label: {label!r} is blank; a label names the series in every command, as sweep --label "
                "requires: give device.label a name in the file (a label, not a measured number)"]
    return []


def _repeated_runs(sweeps: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """Sweeps of a merged file that repeat an earlier sweep's ``run.id``, by index, with the problem."""
    first: dict[str, int] = {}
    out = {}
    for j, sweep in enumerate(sweeps):
        if not isinstance(sweep, Mapping) or not isinstance(sweep.get("run"), Mapping):
            continue  # the schema names what is wrong with it
        run_id = str(sweep["run"].get("id"))
        i = first.setdefault(run_id, j)
        if i != j:
            out[j] = f"sweeps/{j}/run/id: {run_id!r} repeats sweeps/{i}'s (merge keeps one copy of a run)"
    return out


# --------------------------------------------------------------------------- the schema


@cache
def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a version-1 file, shipped in the package."""
    return json.loads(resources.files("mfu_sweep").joinpath("schema/v1.json").read_text())


@cache
def _validator(kind: str) -> Any:
    """The compiled (Rust) validator of a sweep, merged or step document."""
    try:
        import jsonschema_rs
    except ImportError:
        raise ImportError("checking result files needs jsonschema-rs (a dependency of mfu-sweep): "
                          "pip install jsonschema-rs") from None
    schema = {k: v for k, v in json_schema().items() if k != "oneOf"}
    schema["$ref"] = f"#/$defs/{kind}"
    return jsonschema_rs.Draft202012Validator(schema)


def _at(data: Any, path: Sequence[Any]) -> Any:
    for part in path:
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return None
    return data


def _schema_problems(data: Any) -> list[tuple[tuple[Any, ...], str]]:
    """``(path, "path: message")`` of every place ``data`` breaks the schema, in document order."""
    kind = data.get("kind") if isinstance(data, dict) else None
    validator = _validator(kind if kind in ("merged", "steps") else "sweep")
    if validator.is_valid(data):
        return []
    out = []
    for err in validator.iter_errors(data):
        path = tuple(err.instance_path)
        value = _at(data, path)
        if isinstance(value, float) and not math.isfinite(value):  # the validator reads NaN as null
            message = f"{value!r} is not a finite number"
        elif isinstance(value, str) and has_control(value):  # the label and name patterns
            message = (f"{_raw(value)} holds a control character (a line break, a terminal escape or a "
                       "bidirectional override)")
        else:
            message = err.message if len(err.message) < 200 else err.message[:200] + "..."
            message = escape_control(message)  # a value quoted in it never reaches a terminal raw
        out.append((path, f"{'/'.join(map(str, path)) or '(top level)'}: {message}"))
    return sorted(out, key=lambda pm: [(0, p, "") if isinstance(p, int) else (1, 0, p) for p in pm[0]])


# --------------------------------------------------------------------------- one document


@dataclass(frozen=True)
class Findings:
    """What fails in one document: problems no dropping can mend (``fatal``), sweeps of a merged file that
    fail as a whole, and records that fail, by sweep index (0 for a sweep file); every message names its
    place as ``records/3/flops: ...``."""

    merged: bool
    fatal: tuple[str, ...] = ()
    sweeps: Mapping[int, str] = field(default_factory=dict)
    records: Mapping[int, Mapping[int, str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.fatal or self.sweeps or any(self.records.values()))

    @property
    def droppable(self) -> bool:
        """Whether dropping the failing records (and sweeps of a merged file) leaves a valid document."""
        return not self.fatal and (self.merged or not self.sweeps)

    def messages(self) -> list[str]:
        """Every problem, the document's own first, then by sweep and record."""
        out = list(self.fatal)
        for j in sorted(set(self.sweeps) | set(self.records)):
            out += [self.sweeps[j]] if j in self.sweeps else list(self.records[j].values())
        return out

    def dropped_records(self) -> int:
        return sum(len(v) for j, v in self.records.items() if j not in self.sweeps)

    def kept(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """``data`` without the failing sweeps and records (a new document; ``data`` is left as it is)."""
        if not self.merged:
            return self._kept_sweep(data, 0)
        return {**data, "sweeps": [self._kept_sweep(sw, j) for j, sw in enumerate(data["sweeps"])
                                   if j not in self.sweeps]}

    def _kept_sweep(self, sweep: Mapping[str, Any], j: int) -> dict[str, Any]:
        bad = self.records.get(j) or {}
        if not bad:
            return dict(sweep)
        return {**sweep, "records": [r for i, r in enumerate(sweep["records"]) if i not in bad]}


def find_problems(data: Mapping[str, Any]) -> Findings:
    """Everything in a version-1 document (sweep, merged or steps) that fails the schema or a check of meaning;
    a step file's problems are all fatal (its runs are few, and none is dropped)."""
    if data.get("kind") == "steps":
        fatal = [message for _, message in _schema_problems(data)]
        return Findings(False, tuple(fatal or step_problems(data)))
    merged = data.get("kind") == "merged"
    fatal: list[str] = []
    sweeps: dict[int, str] = {}
    records: dict[int, dict[int, str]] = {}
    for path, message in _schema_problems(data):
        j, rest = (path[1], path[2:]) if merged and len(path) > 1 and isinstance(path[1], int) else (0, path)
        if len(rest) > 1 and rest[0] == "records" and isinstance(rest[1], int):
            records.setdefault(j, {}).setdefault(rest[1], message)
        elif merged and rest is not path:
            sweeps.setdefault(j, message)
        else:
            fatal.append(message)
    if fatal:
        return Findings(merged, tuple(fatal), sweeps, records)
    docs = list(data["sweeps"]) if merged else [data]
    for j, message in (_repeated_runs(docs) if merged else {}).items():
        sweeps.setdefault(j, message)
    for j, sweep in enumerate(docs):
        if j in sweeps:
            continue
        prefix = f"sweeps/{j}/" if merged else ""
        for message in [*_peak_problems(sweep), *_label_problems(sweep)]:
            sweeps.setdefault(j, prefix + message)
        found = record_problems(sweep, skip=records.get(j, {}).keys())
        for i, message in found.items():
            records.setdefault(j, {})[i] = prefix + message
        if j in records:
            records[j] = dict(sorted(records[j].items()))
    return Findings(merged, (), sweeps, records)


# --------------------------------------------------------------------------- a step file's runs


def _finite_numbers(value: Any, where: str) -> str | None:
    """The first number under ``value`` that is not finite, as ``where/...: problem``."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where}: {value!r} is not a finite number"
    if isinstance(value, Mapping):
        return next(filter(None, (_finite_numbers(v, f"{where}/{k}") for k, v in value.items())), None)
    if isinstance(value, list):
        return next(filter(None, (_finite_numbers(v, f"{where}/{i}") for i, v in enumerate(value))), None)
    return None


def _run_problem(run: Mapping[str, Any]) -> str | None:
    """What a schema-valid step run gets wrong in meaning, or None."""
    steps, warmup = [float(x) for x in run["steps_s"]], int(run["warmup_steps"])
    first, steady = run["first_step_s"], run["steady_step_s"]
    if (first is None) != (not steps) or (steps and not math.isclose(first, steps[0], rel_tol=REL_TOL)):
        return f"first_step_s: {first!r} is not steps_s[0] ({steps[0] if steps else None!r})"
    after = steps[1 + warmup:]
    want = float(np.median(after)) if after else None
    if (steady is None) != (want is None) or (after and not math.isclose(steady, want, rel_tol=REL_TOL)):
        return f"steady_step_s: {steady!r} is not the median of steps_s[1 + warmup_steps:] ({want!r})"
    if run["status"] == "ok" and not steps:
        return "steps_s: a run with status ok has no step"
    if run["status"] != "ok" and not run["error"]:
        return f"error: a run with status {run['status']} says nothing"
    mode, cache, compile_mode = run["mode"], run["cache"], run["compile_mode"]
    if (mode == "eager") != (cache is None) or (mode == "compile") != (compile_mode is not None):
        return (f"cache/compile_mode: mode {mode} with cache {cache!r} and compile_mode {compile_mode!r} (eager "
                "has no cache, compile and lazy have one; only compile has a compile mode)")
    if bool(run["contended"]) != ("contended" in run["flags"]):
        return f"contended: {run['contended']!r} disagrees with flags {run['flags']!r}"
    return None


def step_problems(data: Mapping[str, Any]) -> list[str]:
    """The checks of meaning of a schema-valid step file: finite numbers, first and steady steps those of
    ``steps_s``, a status with its error line, modes with their caches, one run per (mode, compile mode,
    cache, repeat), a dtype this version knows."""
    out = []
    try:
        get_dtype(data["dtype"])
    except ValueError as exc:
        out.append(f"dtype: {exc}")
    seen: dict[tuple, int] = {}
    for i, run in enumerate(data["runs"]):
        where = f"runs/{i}"
        problem = _finite_numbers(dict(run), where)
        if problem is None and (found := _run_problem(run)) is not None:
            problem = f"{where}/{found}"
        key = (run["mode"], run["compile_mode"], run["cache"], run["repeat"])
        j = seen.setdefault(key, i)
        if problem is None and j != i:
            problem = (f"{where}: repeats runs/{j}: {run['mode']} {run['compile_mode'] or ''} {run['cache'] or ''} "
                       f"repeat {run['repeat']} (one run per mode, compile mode, cache and repeat)")
        if problem:
            out.append(problem)
    return out
