"""Step files (``"kind": "steps"``, written by ``mfu-sweep steps``): the measured step of a real model, read.

A step file holds one device label, one model (its spec, parameter count and the ``llm:`` family whose
GEMMs the step runs, if any), one step kind (``train`` or ``infer``) and dtype, and one entry per
fresh-process run: its mode (``eager``, ``compile``, ``lazy``), compile mode and cache, status, the wall
seconds of every step done, the first step and the steady step (the median after warm-up), the compile
breakdown where the stack exposes it, the GEMM share from the profiler and the contended flag.

This module reads only the fields of that contract, each checked for its type and range with a one-line
:class:`~mfu_sweep.records.results.ResultError` naming the file, the field and the value (a file with an unknown
mode is refused, never half read); it does not judge whether the numbers agree with each other, which is
the validator's part. :func:`read_inputs` sorts the files a command was given into sweeps and step files,
reading each once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.records.results import ResultError, Sweep, parse_document, read_json
from mfu_sweep.util.names import has_control

KIND = "steps"
MODES = ("eager", "compile", "lazy")  # lazy: the XLA / torch-neuronx graph
CACHES = ("cold", "warm")
STATUSES = ("ok", "timeout", "oom", "error")
STEP_KINDS = ("train", "infer")
SOURCES = ("llm", "hf", "py")
CONTENDED = "contended"


@dataclass(frozen=True)
class StepRun:
    """One fresh-process run of one (mode, compile mode, cache): its status and its step times.

    ``first_step_s`` is None when step 1 never finished (a timeout: "did not compile within T");
    ``steady_step_s`` is the median of the steps after step 1 and the warm-up steps (the file's ``steps_s``
    and ``warmup_steps``, checked for their types, are not kept: time to N uses the two summaries).
    """

    mode: str
    status: str
    repeat: int = 0
    compile_mode: str | None = None
    cache: str | None = None
    error: str | None = None
    timeout_s: float | None = None
    first_step_s: float | None = None
    steady_step_s: float | None = None
    compile: Mapping[str, float] = field(default_factory=dict)
    graphs: int | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None
    peak_memory_bytes: int | None = None
    gemm_share: float | None = None
    contended: bool = False
    flags: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        """Status ok with a first and a steady step: a run that time to N can use."""
        return self.status == "ok" and self.first_step_s is not None and self.steady_step_s is not None

    @property
    def is_contended(self) -> bool:
        return self.contended or CONTENDED in self.flags


@dataclass(frozen=True)
class StepModel:
    """The model a step file measured: its spec, where it came from, its size and its GEMM family (or None)."""

    spec: str
    source: str
    params: int | None = None
    gemm_family: str | None = None


@dataclass(frozen=True)
class StepFile:
    """One step file: device label, model, step kind, dtype and its runs in the order run."""

    label: str
    model: StepModel
    step_kind: str
    dtype: str
    runs: tuple[StepRun, ...]
    source: str = ""
    device: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)

    @property
    def synthetic(self) -> bool:
        return bool(self.device.get("synthetic") or self.provenance.get("synthetic"))


def is_step_document(data: Any) -> bool:
    """Whether parsed JSON is a step file (``"kind": "steps"``)."""
    return isinstance(data, Mapping) and data.get("kind") == KIND


class _Reader:
    """Checks of one document's fields, each failure one line naming the file, the field and the value."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, message: str) -> ResultError:
        return ResultError(f"{self.source}: {where}: {message}")

    def get(self, data: Mapping[str, Any], key: str, where: str, required: bool = True) -> Any:
        if key not in data or data[key] is None:
            if required:
                raise self.fail(f"{where}{key}", "missing (a step file written by `mfu-sweep steps` has it)")
            return None
        return data[key]

    def text(self, data: Mapping[str, Any], key: str, where: str, choices: Sequence[str] | None = None,
             required: bool = True) -> str | None:
        value = self.get(data, key, where, required)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip() or has_control(value):
            raise self.fail(f"{where}{key}", f"{value!r} is not a non-empty text without control characters")
        if choices is not None and value not in choices:
            raise self.fail(f"{where}{key}", f"{value!r} is not one of {', '.join(choices)}")
        return value

    def seconds(self, data: Mapping[str, Any], key: str, where: str, required: bool = False) -> float | None:
        value = self.get(data, key, where, required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value)
                                                                                 and value >= 0):
            raise self.fail(f"{where}{key}", f"{value!r} is not a finite number of seconds, 0 or more")
        return float(value)

    def count(self, data: Mapping[str, Any], key: str, where: str) -> int | None:
        value = self.get(data, key, where, required=False)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(f"{where}{key}", f"{value!r} is not a whole number, 0 or more")
        return value

    def share(self, data: Mapping[str, Any], key: str, where: str) -> float | None:
        value = self.get(data, key, where, required=False)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise self.fail(f"{where}{key}", f"{value!r} is not a fraction from 0 to 1")
        return float(value)

    def mapping(self, data: Mapping[str, Any], key: str, where: str, required: bool = False) -> Mapping[str, Any]:
        value = self.get(data, key, where, required)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(f"{where}{key}", f"{type(value).__name__} is not an object")
        return value


def _steps(r: _Reader, raw: Mapping[str, Any], where: str) -> tuple[float, ...]:
    value = r.get(raw, "steps_s", where, required=False) or []
    if not isinstance(value, list):
        raise r.fail(f"{where}steps_s", f"{type(value).__name__} is not a list of seconds")
    for i, x in enumerate(value):
        r.seconds({"x": x}, "x", f"{where}steps_s[{i}] ")
    return tuple(float(x) for x in value)


def _compile(r: _Reader, raw: Mapping[str, Any], where: str) -> dict[str, float]:
    out = {}
    for key, value in r.mapping(raw, "compile", where).items():
        if value is not None:
            out[str(key)] = r.seconds({key: value}, key, f"{where}compile.")  # counts are whole, also >= 0
    return out


def _run(r: _Reader, raw: Any, i: int) -> StepRun:
    where = f"runs[{i}]."
    if not isinstance(raw, Mapping):
        raise r.fail(f"runs[{i}]", f"{type(raw).__name__} is not an object")
    flags = r.get(raw, "flags", where, required=False) or []
    if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
        raise r.fail(f"{where}flags", f"{flags!r} is not a list of texts")
    contended = r.get(raw, "contended", where, required=False)
    if contended is not None and not isinstance(contended, bool):
        raise r.fail(f"{where}contended", f"{contended!r} is not true or false")
    _steps(r, raw, where)  # checked, not kept
    r.count(raw, "warmup_steps", where)
    return StepRun(
        mode=str(r.text(raw, "mode", where, MODES)), status=str(r.text(raw, "status", where, STATUSES)),
        repeat=r.count(raw, "repeat", where) or 0,
        compile_mode=r.text(raw, "compile_mode", where, required=False),
        cache=r.text(raw, "cache", where, CACHES, required=False),
        error=r.get(raw, "error", where, required=False) and str(raw["error"]).splitlines()[0],
        timeout_s=r.seconds(raw, "timeout_s", where),
        first_step_s=r.seconds(raw, "first_step_s", where), steady_step_s=r.seconds(raw, "steady_step_s", where),
        compile=_compile(r, raw, where), graphs=r.count(raw, "graphs", where),
        graph_breaks=r.count(raw, "graph_breaks", where), recompiles=r.count(raw, "recompiles", where),
        peak_memory_bytes=r.count(raw, "peak_memory_bytes", where), gemm_share=r.share(raw, "gemm_share", where),
        contended=bool(contended), flags=tuple(flags))


def parse_step_file(data: Any, source: str = "<data>") -> StepFile:
    """A step document (parsed JSON) as a :class:`StepFile`; a :class:`ResultError` names the first bad field."""
    r = _Reader(source)
    if not is_step_document(data):
        raise ResultError(f"{source}: not a step file (\"kind\": \"steps\", written by `mfu-sweep steps`)")
    if data.get("schema_version") != 1:
        raise r.fail("schema_version", f"{data.get('schema_version')!r} is not supported (this tool reads 1)")
    model = r.mapping(data, "model", "", required=True)
    family = r.text(model, "gemm_family", "model.", required=False)
    params = r.count(model, "params", "model.")
    dtype = str(r.text(data, "dtype", ""))
    try:
        get_dtype(dtype)
    except ValueError as exc:
        raise r.fail("dtype", str(exc)) from None
    runs = r.get(data, "runs", "")
    if not isinstance(runs, list):
        raise r.fail("runs", f"{type(runs).__name__} is not a list of runs")
    return StepFile(
        label=str(r.text(data, "label", "")),
        model=StepModel(str(r.text(model, "spec", "model.")), str(r.text(model, "source", "model.", SOURCES)),
                        params, family),
        step_kind=str(r.text(data, "step_kind", "", STEP_KINDS)), dtype=dtype,
        runs=tuple(_run(r, raw, i) for i, raw in enumerate(runs)), source=source,
        device=r.mapping(data, "device", ""), provenance=r.mapping(data, "provenance", ""))


def select_runs(files: Iterable[StepFile], dtypes: Sequence[str] = (), modes: Sequence[str] = ()) -> list[StepFile]:
    """The files of ``dtypes`` with only the runs of ``modes`` (empty: all), as ``--dtype``/``--mode`` select."""
    out = []
    for f in files:
        if dtypes and f.dtype not in dtypes:
            continue
        out.append(replace(f, runs=tuple(r for r in f.runs if not modes or r.mode in modes)))
    return out


def read_inputs(paths: Iterable[str | Path], on_invalid: Callable[[str], None] | None = None,
                each: Callable[[int], None] | None = None) -> tuple[list[Sweep], list[StepFile]]:
    """The sweeps and the step files among ``paths`` (any mix), each file read once.

    Sweep and merged files go through :func:`mfu_sweep.records.results.parse_document` (validated; ``on_invalid``
    as there); step files through :func:`parse_step_file`. ``each(i)`` is called after the i-th file.
    """
    sweeps: list[Sweep] = []
    steps: list[StepFile] = []
    for i, path in enumerate(paths):
        data = read_json(path)
        if is_step_document(data):
            steps.append(parse_step_file(data, str(path)))
        else:
            sweeps += parse_document(data, source=str(path), on_invalid=on_invalid)
        if each is not None:
            each(i + 1)
    if not sweeps and not steps:
        raise ResultError("no result files given")
    return sweeps, steps
