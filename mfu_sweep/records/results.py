"""The result file format: records, sweeps, save (atomic, :mod:`mfu_sweep.util.atomic`), versioned load.

Version history (``SCHEMA_VERSION``; one constant, one place):

* 1 — first format. A sweep file is one object with ``schema_version``,
  ``tool``, ``run``, ``environment``, ``device``, ``peak`` and ``records``;
  a merged file is ``{"schema_version": 1, "kind": "merged", "sweeps": [...]}``.
* 1 (added, backwards compatible) — imported sweeps: ``device.backend =
  "imported"`` requires a top-level ``import`` block (format, source file and
  its sha256, repository/path/commit/date where known, the source's tool and
  timing method, its dtype keys, notes and unknowns). Their records keep the one
  value the source gives (``samples_s`` of length 1, flags ``imported`` and
  ``single_value``; ``rounded_source`` where the source rounded). Files without
  the block load and validate as before.

  Added within version 1 (optional; files without them load as before):
  ``device.fingerprint`` (``<kind>-<12 hex>``, see ``mfu_sweep.records.fingerprint``)
  and ``device.fingerprint_fields`` (what it was made of).
* 1, added — ``sweep --repeats R``: records carry ``pass`` (0-based index of the
  pass over the shapes that measured them) and ``settings`` carries ``repeats``
  (R) and ``order_seeds`` (the seed of each pass's shuffled order). Files
  without them are one pass: a record without ``pass`` is pass 0.

* 1, added — ``run.planned``: the measurements (passes x shapes x dtypes x
  modes) a sweep set out to make. A sweep is complete when ``run.finished_at``
  is set and it holds ``run.planned`` records (:func:`incomplete_reason`);
  files without ``planned`` are judged by ``finished_at`` alone.

* 1, added — identity of imported devices: ``device.arch`` (the architecture
  the source prints: ``sm_90``, ``gfx1151``), ``import.device_properties`` (the
  properties as printed) and ``import.sources`` (each file's own block when
  several files of one GPU, one uuid, were merged into one device). For kind
  ``imported`` the fingerprint hashes the uuid and PCI bus id where the source
  gives them (one GPU, not a kind); files written before carry neither field, so
  their fingerprints are unchanged.

* 1, added — records of a sweep carry ``worker_s`` (the worker's time on the
  shape) and ``overhead_s`` (the sweep's own time beside it). While a sweep
  runs, records since its start are lines of a journal beside the file
  (``mfu_sweep.records.journal``), which :func:`read_json` folds in; the folded
  document is a version-1 file like any other.
* 1, added (issue 45) — step files, ``kind: "steps"``: a real model's steps on one device
  (``mfu-sweep steps``; :mod:`mfu_sweep.records.step_files`). Readers of sweeps refuse them in one line.
* 1, added (issue 41) — ``shape.layout`` (``nt``, ``tn``, ``tt``; absent means ``nn``, so files written
  before are unchanged) and ``shape.groups``/``shape.group_dim`` (a grouped GEMM); records of the scaled
  dtypes carry ``scales``, records measured with an energy counter ``energy``, and records of a sweep
  with ``--on-throttle discard|wait`` ``throttle``.
* 1, added (issue 48) — records with fp8 elements (fp8, fp8-rowwise, mxfp8) carry ``fp8_format`` (``e4m3fn``,
  ``e4m3fnuz``, ``e5m2``, ``e5m2fnuz``) where the sweep or the source says which; absent means unknown.

Fields may be added within a version; the meaning of existing fields never
changes. ``load_sweeps`` maps the version to its parser and refuses unknown
versions with a message naming the file and the version.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, replace
from pathlib import Path
from typing import Any

from mfu_sweep.gemm.shapes import Shape, ShapeError
from mfu_sweep.records import checks, journal
from mfu_sweep.records.foreign import hint as foreign_hint
from mfu_sweep.specs import Peak
from mfu_sweep.util.atomic import write_json_atomic as write_json_atomic
from mfu_sweep.util.atomic import write_text_atomic as write_text_atomic
from mfu_sweep.util.inputs import InputError, decode, encoding_name, parse_json, read_limited
from mfu_sweep.util.text import counted

SCHEMA_VERSION = 1
STATUSES = ("ok", "mismatch", "timeout", "oom", "error", "unsupported")
NOISY_IQR_RATIO = 0.10


class ResultError(ValueError):
    """A result file is unreadable or invalid; the message names file and field."""


@dataclass(frozen=True)
class Record:
    """One measured (shape, dtype, mode) on one device. Seconds are per call."""

    shape: Shape
    dtype: str
    mode: str
    flops: float
    bytes: float
    intensity: float
    status: str
    family: str = "custom"
    error: str | None = None
    first_call_s: float | None = None
    compile_s: float | None = None
    samples_s: tuple[float, ...] = ()
    block_size: int = 0
    median_s: float | None = None
    iqr_s: float | None = None
    ci_low_s: float | None = None
    ci_high_s: float | None = None
    tflops: float | None = None
    mfu: float | None = None
    rel_error: float | None = None
    timer: str = "host"
    flags: tuple[str, ...] = ()
    first_call_ratio: float | None = None
    pass_index: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[Shape, str, str]:
        """What was measured: shape, dtype and mode (several passes of a sweep share it)."""
        return (self.shape, self.dtype, self.mode)

    @property
    def series_mode(self) -> str:
        """The mode of the series this record belongs to: ``mode``, followed by the operand layout when it is
        not nn (``eager-nt``), so two layouts are never one series."""
        layout = self.shape.layout
        return self.mode if layout == "nn" else f"{self.mode}-{layout}"

    @property
    def run_pass(self) -> int:
        """The pass that measured this record; 0 for files written before ``--repeats`` (one pass)."""
        return 0 if self.pass_index is None else self.pass_index

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "mismatch") and self.median_s is not None

    def to_json(self) -> dict[str, Any]:
        data = {
            "shape": self.shape.to_json(),
            "family": self.family,
            "dtype": self.dtype,
            "mode": self.mode,
            "flops": self.flops,
            "bytes": self.bytes,
            "intensity": self.intensity,
            "status": self.status,
            "error": self.error,
            "first_call_s": self.first_call_s,
            "compile_s": self.compile_s,
            "first_call_ratio": self.first_call_ratio,
            "samples_s": list(self.samples_s),
            "block_size": self.block_size,
            "median_s": self.median_s,
            "iqr_s": self.iqr_s,
            "ci_low_s": self.ci_low_s,
            "ci_high_s": self.ci_high_s,
            "tflops": self.tflops,
            "mfu": self.mfu,
            "rel_error": self.rel_error,
            "timer": self.timer,
            "flags": list(self.flags),
        }
        if self.pass_index is not None:
            data[PASS_FIELD] = self.pass_index
        data.update(self.extra)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Record:
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for k, v in data.items():  # one pass: a fleet's files hold hundreds of thousands of records
            if k in _RECORD_KEYS:
                kwargs[k] = v
            elif k != "shape" and k != PASS_FIELD:
                extra[k] = v
        kwargs["samples_s"] = tuple(map(float, data.get("samples_s") or ()))
        kwargs["flags"] = tuple(data.get("flags") or ())
        kwargs["pass_index"] = _pass_of(data.get(PASS_FIELD))
        shape = Shape.from_json(data.get("shape"))
        if cls is not Record or not _REQUIRED <= kwargs.keys():
            return cls(shape=shape, extra=extra, **kwargs)  # its TypeError names what is missing
        # Record(...) without the frozen dataclass's __init__ (an object.__setattr__ per field, for each of the
        # 200,000 records of a big import); the same fields, in the same order, as it would set
        rec = object.__new__(cls)
        rec.__dict__.update(_DEFAULTS, shape=shape, extra=extra, **kwargs)
        return rec


PASS_FIELD = "pass"  # JSON name of Record.pass_index (``pass`` is a Python keyword)
_RECORD_KEYS = frozenset(Record.__dataclass_fields__) - {"extra", "shape", "pass_index"}  # once, not per record
_REQUIRED = frozenset(name for name, f in Record.__dataclass_fields__.items()
                      if f.default is MISSING and f.default_factory is MISSING) - {"shape", "extra"}
# every field in declaration order, at its default (None for the required ones, which from_json always sets)
_DEFAULTS = {name: None if f.default is MISSING else f.default for name, f in Record.__dataclass_fields__.items()}


def _pass_of(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"pass={value!r} must be a non-negative integer")
    return value


def sweep_repeats(settings: Mapping[str, Any]) -> int:
    """How many passes a sweep made over its shapes (``settings.repeats``; 1 for older files)."""
    return int(settings.get("repeats") or 1)


def summarize_samples(samples: Sequence[float]) -> tuple[float, float]:
    """Median and interquartile range of per-call times."""
    med = statistics.median(samples)
    if len(samples) < 2:
        return med, 0.0
    q = statistics.quantiles(samples, n=4, method="inclusive")
    return med, q[2] - q[0]


def finish_record(rec: Record, peak: Peak, ci: tuple[float, float] | None = None) -> Record:
    """Derive median, IQR, TFLOP/s, MFU, ratios and flags from the raw samples."""
    if not rec.samples_s:
        return rec
    med, iqr = summarize_samples(rec.samples_s)
    tflops = rec.flops / med / 1e12 if med > 0 else None
    peak_tflops = peak.for_dtype(rec.dtype)
    mfu = tflops / peak_tflops if (tflops is not None and peak_tflops) else None
    flags = list(rec.flags)
    if mfu is not None and mfu > 1.0:
        flags.append("above_peak")
    if med > 0 and iqr / med > NOISY_IQR_RATIO:
        flags.append("noisy")
    if peak.estimated:
        flags.append("estimated_peak")
    if peak.override:
        flags.append("override_peak")
    ratio = rec.first_call_s / med if (rec.first_call_s is not None and med > 0) else None
    lo, hi = ci if ci else (rec.ci_low_s, rec.ci_high_s)
    return replace(
        rec, median_s=med, iqr_s=iqr, tflops=tflops, mfu=mfu, ci_low_s=lo, ci_high_s=hi,
        first_call_ratio=ratio, flags=tuple(dict.fromkeys(flags)),
    )


@dataclass(frozen=True)
class Sweep:
    """One run on one device: provenance plus records."""

    tool: Mapping[str, Any]
    run: Mapping[str, Any]
    environment: Mapping[str, Any]
    device: Mapping[str, Any]
    peak: Peak
    records: tuple[Record, ...] = ()
    settings: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""

    @property
    def label(self) -> str:
        return str(self.device.get("label") or self.device.get("name") or "unknown")

    def with_records(self, records: Iterable[Record]) -> Sweep:
        return replace(self, records=tuple(records))

    def to_json(self) -> dict[str, Any]:
        data = {
            "schema_version": SCHEMA_VERSION,
            "kind": "sweep",
            "tool": dict(self.tool),
            "run": dict(self.run),
            "environment": dict(self.environment),
            "device": dict(self.device),
            "peak": self.peak.to_json(),
            "settings": dict(self.settings),
            "records": [r.to_json() for r in self.records],
        }
        data.update(self.extra)
        return data


TOP_LEVEL = ("schema_version", "kind", "tool", "run", "environment", "device", "peak", "settings", "records")
IMPORTED_BACKEND = "imported"


def is_published(device: Mapping[str, Any]) -> bool:
    """Whether a series was imported from a published source (``device.backend == "imported"``)."""
    return device.get("backend") == IMPORTED_BACKEND


def _parse_sweep_v1(data: Mapping[str, Any], source: str) -> Sweep:
    records = []
    settings = data.get("settings") or {}
    repeats = sweep_repeats(settings)
    declared = "repeats" in settings  # files assembled elsewhere may carry passes without saying how many
    seeds = settings.get("order_seeds")
    if seeds is not None and len(seeds) != repeats:
        raise ResultError(f"{source}: settings.order_seeds has {len(seeds)} seeds for settings.repeats={repeats}")
    for i, raw in enumerate(data.get("records") or []):
        try:
            records.append(Record.from_json(raw))
        except (ShapeError, TypeError, ValueError) as exc:
            raise ResultError(f"{source}: records[{i}]: {exc}") from None
        if declared and records[-1].run_pass >= repeats:
            raise ResultError(f"{source}: records[{i}]: pass={records[-1].run_pass} is not below "
                              f"settings.repeats={repeats}")
    return Sweep(
        tool=data["tool"], run=data["run"], environment=data.get("environment") or {},
        device=data["device"], peak=Peak.from_json(data["peak"]), records=tuple(records),
        settings=data.get("settings") or {},
        extra={k: v for k, v in data.items() if k not in TOP_LEVEL}, source=source,
    )


PARSERS: dict[int, Callable[[Mapping[str, Any], str], Sweep]] = {1: _parse_sweep_v1}


def _check_version(data: Any, source: str) -> int:
    if not isinstance(data, dict):
        raise ResultError(f"{source}: top level must be a JSON object, got {type(data).__name__}")
    if "schema_version" not in data:
        raise ResultError(f"{source}: no schema_version field; not an mfu-sweep result{foreign_hint(data, source)}")
    version = data["schema_version"]
    if isinstance(version, bool) or version not in PARSERS:
        known = ", ".join(str(v) for v in PARSERS)
        raise ResultError(f"{source}: schema_version={version!r} is not supported (this tool reads {known})")
    return version


def parse_document(data: Any, source: str = "<data>", validate: bool = True,
                   on_invalid: Callable[[str], None] | None = None) -> list[Sweep]:
    """Parse a sweep or merged document into its sweeps.

    With ``validate`` the document must pass the schema and the checks of :mod:`mfu_sweep.records.checks`:
    a :class:`ResultError` names the first problem, or, with ``on_invalid``, the records (and sweeps of
    a merged file) that fail are dropped and ``on_invalid`` gets one note saying how many and why.
    """
    version = _check_version(data, source)
    if data.get("kind") == "steps":  # a real model's steps: mfu_sweep.records.step_files reads them
        raise ResultError(f"{source}: a step file (kind 'steps', a real model's steps from `mfu-sweep steps`), not a "
                          "GEMM sweep; this command reads sweeps")
    if validate:
        data = screen(data, source, on_invalid)
    if data.get("kind") == "merged":
        return [_parse_sweep_v1(s, f"{source}: sweeps[{i}]") for i, s in enumerate(data["sweeps"])]
    return [PARSERS[version](data, source)]


# First bytes of files that get passed as sweeps by mistake (a figure, a report, a spreadsheet).
BINARY_KINDS = ((b"\x89PNG", "a PNG image"), (b"%PDF", "a PDF"), (b"PK\x03\x04", "a zip archive (.xlsx?)"),
                (b"\x1f\x8b", "gzip-compressed"), (b"\xff\xd8\xff", "a JPEG image"))


def _not_a_sweep(path: Path, data: bytes) -> ResultError:
    kind = next((name for magic, name in BINARY_KINDS if data.startswith(magic)), "binary, not UTF-8 text")
    return ResultError(f"{str(path)!r} is not a sweep JSON file ({kind}); pass the sweep or merged .json files "
                       "that `mfu-sweep sweep` or `merge` wrote (e.g. sweeps/*.json)")


def read_json(path: str | Path, on_invalid: Callable[[str], None] | None = None, fold: bool = True,
              raw: bytes | None = None) -> Any:
    """The parsed JSON of ``path`` (``-``: standard input); a sweep with a journal (a running or killed sweep)
    with its records folded in, unless not ``fold``. With ``on_invalid`` damaged journal lines are skipped
    with a note to it (``journal.fold``). ``raw``: the file's bytes when the caller has read them already
    (:func:`read_bytes`)."""
    try:
        data = _read_json_file(path, raw)
        return journal.fold(path, data, on_invalid) if fold else data
    except journal.JournalError as exc:
        raise ResultError(str(exc)) from None


def read_bytes(path: str | Path) -> bytes:
    """The bytes of a result file, read within :mod:`mfu_sweep.util.inputs`' size limit; a failure is one line
    (:class:`ResultError`) naming the file."""
    try:
        return read_limited(path)
    except InputError as exc:
        raise ResultError(str(exc)) from None


def _read_json_file(path: str | Path, raw: bytes | None = None) -> Any:
    """The parsed JSON of a result file, read within :mod:`mfu_sweep.util.inputs`' limits (size, nesting, one
    value per key; UTF-8 with or without a byte-order mark, UTF-16 with one); a failure is one line
    (:class:`ResultError`) naming the file."""
    path = Path(path)
    try:
        data = read_limited(path) if raw is None else raw
        if encoding_name(data):  # Notepad's "Unicode", PowerShell's redirect: the same text, wider
            data = decode(data).encode("utf-8")
        text = data.decode("utf-8")
    except InputError as exc:
        raise ResultError(str(exc)) from None
    except UnicodeDecodeError:
        raise _not_a_sweep(path, data) from None
    if not text.lstrip("\ufeff").strip():
        raise ResultError(f"{str(path)!r}: file is empty")
    try:
        return parse_json(data, str(path))
    except InputError as exc:
        raise ResultError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise ResultError(f"{str(path)!r}: not valid JSON (line {exc.lineno}: {exc.msg})") from None


def load_sweeps(paths: Iterable[str | Path], validate: bool = True,
                on_invalid: Callable[[str], None] | None = None) -> list[Sweep]:
    """Load sweep and merged files in any mix; every sweep keeps its provenance.

    A file that fails validation is refused (``ResultError`` naming the first problem), or with
    ``on_invalid`` its failing records are dropped with a note (:func:`parse_document`).
    """
    sweeps: list[Sweep] = []
    for path in paths:
        sweeps.extend(parse_document(read_json(path, on_invalid), source=str(path), validate=validate,
                                     on_invalid=on_invalid))
    if not sweeps:
        raise ResultError("no result files given")
    return sweeps


def validate_file(path: str | Path) -> list[str]:
    """Every problem of one file: unreadable, the schema, the checks of meaning (empty list when valid).

    The problems do not name the file itself (the caller does, once: ``FILE: INVALID: problem``); another
    file they are about, such as the file's journal, they name."""
    return check_file(path)[0]


def check_file(path: str | Path) -> tuple[list[str], list[Sweep]]:
    """:func:`validate_file`'s problems and, when there are none, the file's sweeps (the file read once)."""
    try:
        data = read_json(path)
        _check_version(data, str(path))
        problems = _findings(data).messages()
        if problems or data.get("kind") == "steps":  # a valid step file has no sweeps: step_files reads it
            return problems, []
        return problems, parse_document(data, source=str(path), validate=False)
    except ResultError as exc:
        return [_without_own_name(str(exc), str(path))], []


def _without_own_name(problem: str, path: str) -> str:
    """``problem`` less the file's name at its start: ``f: ...`` (ResultError), ``'f': ...`` or
    ``'f' is ...`` (InputError; the last becomes ``it is ...``). Any other start stays whole, such as
    ``'-' (standard input) runs past ...``, where the name says what the input was."""
    for name in (path, repr(path)):
        if problem.startswith(name + ": "):
            return problem[len(name) + 2:]
    return "it" + problem[len(repr(path)):] if problem.startswith(repr(path) + " is ") else problem


def _findings(data: Mapping[str, Any]) -> checks.Findings:
    try:
        return checks.find_problems(data)
    except ImportError as exc:  # no jsonschema-rs: say so in one line
        raise ResultError(str(exc)) from None


def screen(data: Mapping[str, Any], source: str, on_invalid: Callable[[str], None] | None = None) -> Any:
    """``data`` when it passes the schema and the checks; else a :class:`ResultError` naming the first
    problem, or (with ``on_invalid``, where dropping records mends it) a copy without the failing
    records and sweeps, after one note to ``on_invalid``."""
    found = _findings(data)
    if not found:
        return data
    problems = found.messages()
    if on_invalid is None or not found.droppable:
        fix = (f"; --allow-invalid reads the rest ({counted(len(problems), 'problem')} in all)" if found.droppable
               else "")
        raise ResultError(f"{source}: invalid v{data['schema_version']} file: {problems[0]}{fix}")
    total = sum(len(sw.get("records") or []) for sw in (data["sweeps"] if found.merged else [data]))
    parts = [counted(found.dropped_records(), "record") + f" of {total}"] if found.dropped_records() else []
    parts += [counted(len(found.sweeps), "whole sweep")] if found.sweeps else []
    on_invalid(f"{source}: dropped {' and '.join(parts)} that fail validation (first: {problems[0]})")
    return found.kept(data)


def save_sweep(path: str | Path, sweep: Sweep) -> None:
    """Write ``sweep`` whole to ``path`` (atomically), then remove the journal it supersedes
    (``mfu_sweep.records.journal``)."""
    write_json_atomic(path, sweep.to_json())
    journal.discard(path)


# --------------------------------------------------------------------------- picking records


