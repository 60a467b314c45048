"""Step files: a real model's steps on one device (``mfu-sweep steps``), ``kind: "steps"`` in the one schema.

A step file holds one model (``model``: its ``--model`` spec, source, parameter count and, for ``llm:``, the
GEMM family its step runs), one step kind (``train`` or ``infer``) and dtype, and one entry in ``runs`` per
fresh-process run: mode (eager, compile, lazy), compile mode, cache (cold, warm, or null for eager), repeat,
status and error line, every step's time, the first and the steady step, the compile breakdown the stack
exposes, graphs, graph breaks, recompiles, peak memory, the GEMM share and the contention flag
(``mfu_sweep/schema/v1.json`` has every field; ``docs/results.md`` the prose). A series is one (mode, compile
mode, cache); its runs are the repeats. Runs that did not finish are kept, never dropped: a series counts
them ("did not compile within 600 s: 1 of 3").

Readers of sweeps refuse a step file in one line (``results.parse_document``); this module reads them, the one
model of a step file that ``validate``, ``steps --resume``, ``predict``, ``report`` and ``plot`` share: every reader
parses through :func:`parse_step_document`, so a file ``validate`` refuses is refused everywhere with the same line.
:func:`read_inputs` sorts the files a command was given into sweeps and step files, reading each once.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from mfu_sweep.records.results import (
    SCHEMA_VERSION,
    ResultError,
    Sweep,
    parse_document,
    read_json,
    screen,
    write_json_atomic,
)
from mfu_sweep.util.text import counted

STEPS_KIND = "steps"
RUN_STATUSES = ("ok", "timeout", "oom", "error")
CACHES = ("cold", "warm")
CONTENDED = "contended"  # the flag of a run measured under contention (records.contention.FLAG)


def steady_of(steps_s: Sequence[float], warmup: int) -> float | None:
    """The steady step: the median of the steps after step 1 and ``warmup`` more; None when there are none."""
    after = list(steps_s[1 + warmup:])
    return statistics.median(after) if after else None


@dataclass(frozen=True)
class StepRun:
    """One fresh-process run (an element of ``runs``); unknown fields are kept in ``extra``."""

    mode: str
    compile_mode: str | None
    cache: str | None
    repeat: int
    status: str
    error: str | None = None
    timeout_s: float | None = None
    steps_s: tuple[float, ...] = ()
    warmup_steps: int = 0
    first_step_s: float | None = None
    steady_step_s: float | None = None
    compile: Mapping[str, Any] = field(default_factory=dict)
    graphs: int | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None
    peak_memory_bytes: int | None = None
    gemm_share: float | None = None
    contended: bool = False
    flags: tuple[str, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def series(self) -> tuple[str, str | None, str | None]:
        """(mode, compile mode, cache): the runs of one series are its repeats."""
        return (self.mode, self.compile_mode, self.cache)

    @property
    def key(self) -> tuple[str, str | None, str | None, int]:
        return (*self.series, self.repeat)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def finished(self) -> bool:
        """Status ok with a first and a steady step: a run that time to N can use."""
        return self.ok and self.first_step_s is not None and self.steady_step_s is not None

    @property
    def is_contended(self) -> bool:
        return self.contended or CONTENDED in self.flags

    @property
    def error_line(self) -> str | None:
        """The error's first line (None when there is none)."""
        return str(self.error).splitlines()[0] if self.error else None

    def compile_times(self) -> dict[str, float]:
        """The compile breakdown's recorded seconds (the ``*_s`` entries that are not null)."""
        return {k: float(v) for k, v in self.compile.items() if k.endswith("_s") and v is not None}

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        data.update(steps_s=list(self.steps_s), flags=list(self.flags), compile=dict(self.compile))
        data.update(self.extra)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StepRun:
        known = {f.name for f in fields(cls)} - {"extra"}
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["steps_s"] = tuple(float(x) for x in data.get("steps_s") or ())
        kwargs["flags"] = tuple(data.get("flags") or ())
        return cls(**kwargs, extra={k: v for k, v in data.items() if k not in known})


def series_name(series: tuple[str, str | None, str | None]) -> str:
    """``eager``, ``compile cold``, ``compile max-autotune warm``, ``lazy warm``."""
    mode, compile_mode, cache = series
    parts = [mode] + ([compile_mode] if compile_mode not in (None, "default") else []) + ([cache] if cache else [])
    return " ".join(parts)


@dataclass(frozen=True)
class StepModel:
    """The model a step file measured: its ``--model`` spec, what built it (llm, hf, py), its parameter count
    and the ``llm:`` family whose GEMMs its step runs (None for hf: and py:); unknown fields kept in ``extra``."""

    spec: str
    source: str
    params: int | None = None
    gemm_family: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "source": self.source, "params": self.params, "gemm_family": self.gemm_family,
                **self.extra}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StepModel:
        known = ("spec", "source", "params", "gemm_family")
        return cls(data["spec"], data["source"], data.get("params"), data.get("gemm_family"),
                   {k: v for k, v in data.items() if k not in known})


@dataclass(frozen=True)
class StepFile:
    """A step file: one model, step kind and dtype on one device, and its runs."""

    label: str
    provenance: Mapping[str, Any]
    device: Mapping[str, Any]
    model: StepModel
    step_kind: str
    dtype: str
    runs: tuple[StepRun, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""

    @property
    def synthetic(self) -> bool:
        return bool(self.device.get("synthetic") or self.provenance.get("synthetic"))

    def with_runs(self, runs: Iterable[StepRun]) -> StepFile:
        return replace(self, runs=tuple(runs))

    def to_json(self) -> dict[str, Any]:
        data = {"schema_version": SCHEMA_VERSION, "kind": STEPS_KIND, "label": self.label,
                "provenance": dict(self.provenance), "device": dict(self.device), "model": self.model.to_json(),
                "step_kind": self.step_kind, "dtype": self.dtype, "settings": dict(self.settings),
                "runs": [r.to_json() for r in self.runs]}
        data.update(self.extra)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "") -> StepFile:
        top = {"schema_version", "kind", "label", "provenance", "device", "model", "step_kind", "dtype", "settings",
               "runs"}
        return cls(label=data["label"], provenance=data["provenance"], device=data["device"],
                   model=StepModel.from_json(data["model"]),
                   step_kind=data["step_kind"], dtype=data["dtype"],
                   runs=tuple(StepRun.from_json(r) for r in data["runs"]), settings=data.get("settings") or {},
                   extra={k: v for k, v in data.items() if k not in top}, source=source)

    def series(self) -> dict[tuple[str, str | None, str | None], list[StepRun]]:
        """The runs by series, in the order first run."""
        out: dict[tuple[str, str | None, str | None], list[StepRun]] = {}
        for run in self.runs:
            out.setdefault(run.series, []).append(run)
        return out


def is_step_document(data: Any) -> bool:
    return isinstance(data, Mapping) and data.get("kind") == STEPS_KIND


def parse_step_document(data: Any, source: str = "<data>") -> StepFile:
    """A step file from its parsed JSON, after the schema and the checks (a :class:`ResultError` names the first
    problem); a sweep or merged document is refused in one line."""
    if not isinstance(data, Mapping) or "schema_version" not in data:
        raise ResultError(f"{source}: not an mfu-sweep step file (no schema_version)")
    if not is_step_document(data):
        raise ResultError(f"{source}: a GEMM sweep (kind {data.get('kind', 'sweep')!r}), not a step file; "
                          "`mfu-sweep steps` writes step files")
    if data["schema_version"] != SCHEMA_VERSION:
        raise ResultError(f"{source}: schema_version={data['schema_version']!r} is not supported (this tool reads "
                          f"{SCHEMA_VERSION})")
    return StepFile.from_json(screen(data, source), source)


def load_step_file(path: str | Path) -> StepFile:
    """Read and check one step file (within the input limits of :mod:`mfu_sweep.util.inputs`)."""
    return parse_step_document(read_json(path), str(path))


def save_step_file(path: str | Path, steps: StepFile) -> None:
    """Write ``steps`` whole, atomically (readers see the old file or the new one)."""
    write_json_atomic(path, steps.to_json())


def _count(runs: Sequence[StepRun], status: str) -> int:
    return sum(r.status == status for r in runs)


def series_line(series: tuple[str, str | None, str | None], runs: Sequence[StepRun]) -> str:
    """One series: first and steady step (medians over its finished runs) and what did not finish."""
    ok = [r for r in runs if r.ok]
    text = f"{series_name(series)}: "
    if ok:
        first = statistics.median(r.first_step_s for r in ok if r.first_step_s is not None)
        steadies = [r.steady_step_s for r in ok if r.steady_step_s is not None]
        text += f"first step {first:.3g} s"
        if steadies:
            steady = statistics.median(steadies)
            text += f", steady {steady:.3g} s ({first / steady:.3g}x)"
        text += f", median of {counted(len(ok), 'run')}"
    else:
        text += "no finished run"
    failed = [r for r in runs if not r.ok]
    for status in ("timeout", "oom", "error"):
        these = [r for r in failed if r.status == status]
        if these:
            what = these[0].error if status == "timeout" and these[0].error else status
            text += f"; {what}: {len(these)} of {len(runs)}"
    contended = sum(r.contended for r in runs)
    if contended:
        text += f"; {contended} of {len(runs)} contended"
    return text


def summary_line(steps: StepFile) -> str:
    """``label: MODEL KIND DTYPE: N runs: a ok, b timeout, c oom, d error`` (every run counted)."""
    runs = steps.runs
    counts = ", ".join(f"{_count(runs, s)} {s}" for s in RUN_STATUSES)
    unfinished = "" if steps.provenance.get("finished_at") else " (unfinished: continue with --resume)"
    return (f"{steps.label}: {steps.model.spec} {steps.step_kind} {steps.dtype}: {counted(len(runs), 'run')}: "
            f"{counts}{unfinished}")


def select_runs(files: Iterable[StepFile], dtypes: Sequence[str] = (), modes: Sequence[str] = ()) -> list[StepFile]:
    """The files of ``dtypes`` with only the runs of ``modes`` (empty: all), as ``--dtype``/``--mode`` select."""
    return [f.with_runs(r for r in f.runs if not modes or r.mode in modes) for f in files
            if not dtypes or f.dtype in dtypes]


def read_inputs(paths: Iterable[str | Path], on_invalid: Callable[[str], None] | None = None,
                each: Callable[[int], None] | None = None) -> tuple[list[Sweep], list[StepFile]]:
    """The sweeps and the step files among ``paths`` (any mix), each file read once.

    Sweep and merged files go through :func:`mfu_sweep.records.results.parse_document` (validated; ``on_invalid``
    as there); step files through :func:`parse_step_document` (validated; a step file's problems are all fatal).
    ``each(i)`` is called after the i-th file.
    """
    sweeps: list[Sweep] = []
    steps: list[StepFile] = []
    for i, path in enumerate(paths):
        data = read_json(path)
        if is_step_document(data):
            steps.append(parse_step_document(data, str(path)))
        else:
            sweeps += parse_document(data, source=str(path), on_invalid=on_invalid)
        if each is not None:
            each(i + 1)
    if not sweeps and not steps:
        raise ResultError("no result files given")
    return sweeps, steps
