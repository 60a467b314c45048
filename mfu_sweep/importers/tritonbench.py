"""tritonbench GEMM tables (meta-pytorch/tritonbench ``python run.py --op gemm``): CSV and JSON output.

Both come from ``BenchmarkOperatorResult`` in ``tritonbench/utils/triton_op.py``:

- **CSV** (``--csv`` on stdout, ``--output FILE``): ``;``-separated, a header ``(M, N, K);<backend>-<metric>;...``
  and one row per shape with its x-value printed as a tuple, ``(4096, 4096, 4096)``; a last row
  ``average``. ``--csv`` prints the table after the run's log lines, so the table starts at its header.
- **JSON** (``--output-json FILE``): one key per cell, ``tritonbench_<op>_<mode>[x_(M, N, K)-<backend>]_<metric>``,
  plus ``...[<backend>]-<metric>-avg`` means; the nightly ``result.json`` holds the same keys under
  ``metrics`` beside ``env`` (the GPU's name, CUDA version, commits).

Per backend (``aten_matmul``, ``triton_tutorial_matmul``, ``pt2_cutlass_matmul``, ``hipblaslt`` ...) the
columns are its metrics: ``latency`` (milliseconds, the p50), ``tflops``, ``speedup`` (not for the
baseline), ``accuracy`` ... A backend that failed on a shape has its error message in its first metric
cell and the others empty. Each backend with a ``latency`` or ``tflops`` column becomes one source
device: the latency where there is one (it needs no FLOP count: ``addmm`` adds its bias to the FLOPs of
``tflops``), else 2*M*N*K FLOPs over the TFLOP/s. Neither file names the dtype (``--precision``), so
``--dtype`` is required; the flat JSON and the CSV name no GPU either (``--chip tritonbench=ID``).

How it was measured (``latency``): ``triton.testing.do_bench``, a CUDA/HIP event pair around each call
with the L2 cleared before each (a 256 MB buffer zeroed), calls for ``--iter`` 100 ms after ``--warmup``
25 ms; samples beyond 1.5 IQR dropped, the p50 (``statistics.median_low``) kept. ``--cudagraph``
(graph replay of many calls, no flush) and ``--device cpu`` (host clock) are not visible in the file:
``import.unknown`` says so.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mfu_sweep.gemm.shapes import Shape, ShapeError
from mfu_sweep.importers import tritonbench_text
from mfu_sweep.importers.common import SourceDevice, SourceError, SourceRow, read_provenance, sha256_of
from mfu_sweep.importers.values import read_text
from mfu_sweep.util.inputs import InputError, parse_json
from mfu_sweep.util.text import counted

FORMAT = "tritonbench"
X_LABEL = "(M, N, K)"
NO_NAME = "tritonbench"  # the device name where the file names no GPU: --chip tritonbench=ID maps every backend
TIME_METRICS = ("latency", "tflops")
_X = re.compile(r"^\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)$")
_KEY = re.compile(r"^tritonbench_(?P<bench>.+?)\[x_(?P<x>.*)-(?P<backend>[^\]-]+)\]_(?P<metric>.+)$")
METHOD = ("triton.testing.do_bench (tritonbench's latency): a CUDA/HIP event pair around each call, the L2 "
          "cleared before each (a 256 MB buffer zeroed), calls for --iter ms (100) after --warmup ms (25); samples "
          "beyond 1.5 IQR dropped; the p50 (statistics.median_low) in ms")
UNKNOWN = ("whether the run used --cudagraph (CUDA-graph replay of many calls, no flush) or --device cpu (host "
           "clock): the file does not say; read as the default, triton.testing.do_bench",
           "the dtype (tritonbench's --precision): given by --dtype", "clocks, power and driver versions")

Table = dict[str, dict[str, dict[str, Any]]]  # backend -> x-value -> metric -> cell (as the file has it)


def _csv_table(text: str, name: str) -> Table:
    """The cells of a CSV table, from its ``(M, N, K);`` header on (log lines before it are skipped)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("(") and ";" in ln), None)
    if start is None:
        raise SourceError(f"{name!r}: no tritonbench table: neither a CSV header ('{X_LABEL};<backend>-<metric>;...') "
                          f"nor a console table (a header with dashes under it); {tritonbench_text.FILE_HINT}")
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:])), delimiter=";"))
    header = rows[0]
    if header[0] != X_LABEL:
        raise SourceError(f"{name!r}: the x-value column is {header[0]!r}, not {X_LABEL!r}: not a GEMM operator's "
                          "table (gemm, addmm, fp8_gemm ...)")
    table: Table = {}
    for row in rows[1:]:
        if not row or not row[0].startswith("("):
            continue  # the closing 'average' row, blank lines, log lines after the table
        for col, cell in zip(header[1:], row[1:]):
            backend, sep, metric = col.rpartition("-")
            if sep:
                table.setdefault(backend, {}).setdefault(row[0], {})[metric] = cell
    return table


def _json_table(doc: Mapping[str, Any], name: str) -> tuple[Table, dict[str, Any], int]:
    """The cells of ``--output-json`` (or the nightly ``result.json``), its ``env`` and the keys of other
    operators (no ``(M, N, K)`` x-value) left out."""
    env = doc.get("env") if isinstance(doc.get("env"), Mapping) else {}
    metrics = doc.get("metrics") if isinstance(doc.get("metrics"), Mapping) else doc
    table: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    benches: set[str] = set()
    other = 0
    for key, value in metrics.items():
        m = _KEY.match(str(key))
        if m is None or m["x"] == "average":
            continue
        if not _X.match(m["x"]):
            other += 1
            continue
        benches.add(m["bench"])
        table.setdefault((m["bench"], m["backend"]), {}).setdefault(m["x"], {})[m["metric"]] = value
    if not table:
        raise SourceError(f"{name!r}: no tritonbench_<op>[x_{X_LABEL}-<backend>]_<metric> keys of a GEMM operator "
                          f"({counted(other, 'key')} of other operators)")
    one = len(benches) == 1
    return {(b if one else f"{op}.{b}"): cells for (op, b), cells in table.items()}, dict(env), other


def _number(cell: Any) -> float | None:
    """A cell's number (tritonbench writes the latency as text); None for text, empty or not finite."""
    if isinstance(cell, bool) or cell is None:
        return None
    try:
        value = float(cell)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _error(cells: Mapping[str, Any]) -> str | None:
    """The error message tritonbench put in a failed backend's first metric cell, if any."""
    return next((str(c) for c in cells.values() if isinstance(c, str) and c.strip() and _number(c) is None), None)


def _row(x: str, cells: Mapping[str, Any], metric: str, dtype: str) -> SourceRow:
    a, b, c = (int(v) for v in _X.match(x).groups())  # type: ignore[union-attr]
    shape = Shape(1, a, b, c)
    value = _number(cells.get(metric))
    unit = "ms (tritonbench latency, p50)" if metric == "latency" else "TFLOP/s (tritonbench tflops)"
    extra = {"source_value": cells.get(metric), "source_unit": unit, "source_shape": x}
    if value is None or value <= 0:
        err = _error(cells)
        why = f"tritonbench: {err}" if err else f"no {metric} value ({cells.get(metric)!r})"
        return SourceRow(shape=shape, dtype=dtype, seconds=None, source_dtype=f"--dtype {dtype}", error=why,
                         family=FORMAT, extra=extra)
    seconds = value / 1e3 if metric == "latency" else shape.flops / (value * 1e12)
    return SourceRow(shape=shape, dtype=dtype, seconds=seconds, source_dtype=f"--dtype {dtype}", family=FORMAT,
                     extra=extra)


def _load(path: Path) -> tuple[Table, dict[str, Any], str, int]:
    """The cells, the run's ``env``, the form read and the keys of other operators left out. The file is read within
    the input limit, as UTF-8 with or without a byte-order mark or UTF-16/32 with one (:func:`read_text`)."""
    name = str(path)
    text = read_text(path, "tritonbench output (its --csv/--output table, --output-json, or the console table)")
    if text.lstrip().startswith("{"):
        try:
            doc = parse_json(text.encode(), name)
        except InputError as exc:
            raise SourceError(str(exc)) from None
        except json.JSONDecodeError as exc:
            raise SourceError(f"{name!r}: not readable JSON ({exc})") from None
        if not isinstance(doc, Mapping):
            raise SourceError(f"{name!r}: not a tritonbench --output-json file (top level is not an object)")
        table, env, other = _json_table(doc, name)
        return table, env, "--output-json", other
    if tritonbench_text.looks_like_console(text):
        return tritonbench_text.console_table(text, name), {}, "console table", 0
    return _csv_table(text, name), {}, "CSV", 0


def read(path: Path, dtype: str | None = None) -> list[SourceDevice]:
    """One source device per backend with a ``latency`` or ``tflops`` column."""
    name = str(path)
    if dtype is None:
        raise SourceError(f"{name!r}: tritonbench files do not name the dtype (its --precision); pass --dtype "
                          "(the gemm operator runs fp16 unless --precision says otherwise)")
    table, env, kind, other = _load(path)
    usable = {b: next(m for m in TIME_METRICS if any(m in c for c in cells.values()))
              for b, cells in table.items() if any(m in c for c in cells.values() for m in TIME_METRICS)}
    if not usable:
        raise SourceError(f"{name!r}: no backend has a latency or tflops column (backends: "
                          f"{', '.join(table) or 'none'}); run tritonbench with --metrics latency,tflops and --csv or "
                          "--output FILE (the console table shows only the metrics asked for)")
    notes = [f"backends without a latency or tflops column, not imported: {', '.join(sorted(set(table) - set(usable)))}"
             ] if set(table) - set(usable) else []
    if other:
        notes.append(f"{counted(other, 'cell')} of other operators (no {X_LABEL} x-value) left out")
    device = str(env.get("device") or NO_NAME)
    software = {k: v for k, v in env.items() if k.endswith(("_commit", "_version", "_branch"))}
    return [_device(path, backend, metric, table[backend], dtype, device, kind, software, notes)
            for backend, metric in usable.items()]


def _device(path: Path, backend: str, metric: str, cells: Mapping[str, Mapping[str, Any]], dtype: str, device: str,
            kind: str, software: Mapping[str, Any], notes: list[str]) -> SourceDevice:
    rows: dict[Shape, SourceRow] = {}
    repeats = 0
    for x, cell in cells.items():
        if not _X.match(x):
            raise SourceError(f"{str(path)!r}: {backend}: x-value {x!r} is not {X_LABEL} in integers")
        try:
            row = _row(x, cell, metric, dtype)
        except ShapeError as exc:
            raise SourceError(f"{str(path)!r}: {backend} at {x}: {exc}") from None
        if row.shape in rows:
            repeats += 1
            continue
        rows[row.shape] = row
    own = [f"{metric} column used" + ("" if metric == "latency" else
                                      "; seconds = 2*M*N*K FLOPs / TFLOP/s (no latency column)")]
    own += [f"{counted(repeats, 'shape')} measured again (first kept)"] if repeats else []
    return SourceDevice(
        key=backend, name=device, rows=tuple(rows.values()), timer="cuda-events+flush", cache="flush",
        mode="compile" if backend.split(".")[-1].startswith("pt2_") else "eager",
        details={"software": {"tritonbench": dict(software)}} if software else {},
        provenance={
            "source_file": path.name, "source_sha256": sha256_of(path), **read_provenance(path),
            "tool": f"tritonbench ({kind})", "timing_method": METHOD, "device_key": backend, "backend": backend,
            "dtype_keys": {dtype: f"--dtype {dtype}"}, "notes": own + notes,
            "unknown": list(UNKNOWN) + ([] if device != NO_NAME else ["which GPU (the file names none; --chip)"]),
        },
    )
