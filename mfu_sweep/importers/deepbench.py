"""Baidu DeepBench result workbooks (``results/train/*.xlsx``, ``results/inference/**/*.xlsx``).

Each results sheet starts with ``Precision | <text>`` and holds sections whose
first cell names them; the ``Dense Matrix Multiplication`` section has a header
row (``M, N, K, A Transpose, B Transpose, Time (msec), TERAFLOPS`` at varying
columns) and one row per problem until the next section. A ``Specs`` sheet lists
the machine (``GPU Model``, CUDA/ROCm versions, driver ...).

How it was measured (``code/nvidia/gemm_bench.cu``): cuBLAS ``GemmEx``, one
warm-up call, then 400 back-to-back calls timed on the host with
``steady_clock`` around the loop, mean per call truncated to whole
microseconds (launch overhead included, no cache flush). So most times are
multiples of 1 us and are flagged ``rounded_source``: the true mean lies in
``[t, t + 1 us)``. Known quirk: the sheets write K=1530 where
``code/kernels/gemm_problems.h`` runs K=1536; those rows are imported as
K=1536 with flag ``source_k_1530`` (the sheet's TERAFLOPS column used 1530).
Times come from the ``Time (msec)`` column, not from TERAFLOPS.

Every row is imported with its layout: the ``A Transpose`` and ``B Transpose``
letters (cuBLAS op flags, ``N`` or ``T``) become the shape's ``layout`` as
published, M, N and K kept, as the ``deepbench:`` workload family sweeps them
(:mod:`mfu_sweep.gemm.workloads`), so a shape measured in ``NN`` and ``TN`` is two
records, each layout a series of its own (mode ``eager-tn`` ...). A row whose
transpose is neither ``N`` nor ``T`` has no layout here: it is left out with a
note naming its row and value, never replaced by another layout's row.
"""

from __future__ import annotations

import re
import warnings
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any
from xml.etree.ElementTree import ParseError

from mfu_sweep.gemm.shapes import Shape, ShapeError
from mfu_sweep.importers.common import SourceDevice, SourceError, SourceRow, dedupe, read_provenance, sha256_of
from mfu_sweep.importers.values import number
from mfu_sweep.util.inputs import MAX_MB_ENV, InputError, check_size, max_input_bytes

FORMAT = "deepbench"
SECTION = "Dense Matrix Multiplication"
# Precision text of a sheet -> this tool's dtype (None: known, but no matching dtype here).
PRECISIONS: dict[str, str | None] = {
    "float": "fp32",
    "16 bit inputs, 32 bit multiplication, 32 bit addition": "fp16",
    "16 bit inputs, 16 bit multiplication, 32 bit addition": "fp16",
    "int8 inputs 32 bit math": None,
    "gemm, conv: int8 multiplication, 32 bit accumulation": None,
}
PRECISION_NOTES = {
    "fp32": "fp32: no TF32 on these pre-Ampere chips",
    "fp16": "fp16: half inputs; the sheet's Precision line says how it multiplied and accumulated",
}
TRANSPOSES = ("N", "T")
TIMING = ("host-timed mean of 400 back-to-back cuBLAS/rocBLAS calls after 1 warm-up, launch overhead included, "
          "no cache flush, truncated to whole microseconds (code/nvidia/gemm_bench.cu)")
TIMING_INTEL = ("host-timed (MKL dsecnd) mean of 10 back-to-back MKL sgemm calls after 1 warm-up, no cache flush "
                "(code/intel/gemm/bench.cpp at 29a5181c3a10b46f30fc133ac411db49cda23e52; the version that produced "
                "the sheet is not recorded)")
UNKNOWN = ("GPU clocks, boost and power state during the run", "cuBLAS/rocBLAS algorithm chosen",
           "whether the machine was otherwise idle")
K_QUIRK = (1530, 1536)


def _norm(text: Any) -> str:
    return re.sub(r"\s+", " ", str(text)).strip().lower()


def _check_size(path: Path) -> None:
    """Refuse a workbook past the input limit, packed or unpacked (a zip bomb expands a few kB to gigabytes)."""
    limit = max_input_bytes()
    try:
        check_size(path)
        with zipfile.ZipFile(path) as zf:
            unpacked = sum(info.file_size for info in zf.infolist())
    except InputError as exc:
        raise SourceError(str(exc)) from None
    except (zipfile.BadZipFile, OSError, EOFError):
        return  # not a zip: openpyxl says what it is
    if unpacked > limit:
        raise SourceError(f"{str(path)!r} unpacks to {unpacked / 2**20:.4g} MiB, beyond the input limit of "
                          f"{limit / 2**20:.4g} MiB (raise it with {MAX_MB_ENV}=<MiB> if the workbook is genuine)")


def _load(path: Path) -> Any:
    try:
        import openpyxl
        from openpyxl.utils.exceptions import InvalidFileException
    except ImportError:
        raise SourceError("reading DeepBench workbooks needs openpyxl: pip install 'mfu-sweep[import]'") from None
    _check_size(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return openpyxl.load_workbook(path, read_only=True, data_only=True)
    except (zipfile.BadZipFile, InvalidFileException, KeyError, OSError, ValueError, EOFError, ParseError) as exc:
        raise SourceError(f"{str(path)!r}: not a readable xlsx workbook ({type(exc).__name__}: {exc})") from None


def _specs(wb: Any) -> dict[str, str]:
    if "Specs" not in wb.sheetnames:
        return {}
    out = {}
    for row in wb["Specs"].iter_rows(values_only=True):
        if row and isinstance(row[0], str) and len(row) > 1 and row[1] is not None:
            out[row[0].strip()] = str(row[1]).strip()
    return out


def _header(row: tuple) -> dict[str, int] | None:
    names = {_norm(c): i for i, c in enumerate(row) if c is not None}
    want = {"m": "m", "n": "n", "k": "k", "a transpose": "ta", "b transpose": "tb", "time (msec)": "ms"}
    if not all(w in names for w in want):
        return None
    cols = {v: names[k] for k, v in want.items()}
    if row[1] is None and row[0] is not None:
        cols["app"] = 1
    return cols


def _time_row(ms: Any, shape: Shape, where: str) -> tuple[float | None, tuple[str, ...], str | None, Any]:
    if isinstance(ms, bool) or not isinstance(ms, (int, float)):
        return None, (), f"{where}: no numeric time in the source ({ms!r})", ms
    number(ms, where, "Time (msec)")  # negative or non-finite: refused, not read as any other time
    us = ms * 1000.0
    if round(us) <= 0:  # 0, or a time the source rounds to 0: below what it can resolve
        return None, ("rounded_source",), f"{where}: source time {ms!r} ms is below its 1 us resolution", ms
    flags = ("rounded_source",) if abs(us - round(us)) < 1e-6 else ()
    return (round(us) / 1e6 if flags else ms / 1e3), flags, None, ms


def _layout(r: tuple, cols: dict[str, int], where: str) -> tuple[str | None, str | None]:
    """The row's layout from its two transpose letters (``("tn", None)``), or ``(None, why)`` for a letter that is
    neither N nor T."""
    letters = []
    for col, name in (("ta", "A Transpose"), ("tb", "B Transpose")):
        cell = r[cols[col]] if cols[col] < len(r) else None
        letter = str(cell).strip().upper() if cell is not None else ""
        if letter not in TRANSPOSES:
            return None, f"{where}: {name} {cell!r} is neither N nor T, so the row has no layout; left out"
        letters.append(letter)
    return "".join(letters).lower(), None


def _section_rows(rows: list[tuple], start: int, dtype: str, precision: str, sheet: str,
                  name: str) -> tuple[list[SourceRow], list[str]]:
    """The section's rows, and a note for each row left out (a transpose that is neither N nor T)."""
    cols = _header(rows[start])
    if cols is None:
        raise SourceError(f"sheet {sheet!r}: {SECTION!r} header lacks M, N, K, transposes or 'Time (msec)'")
    out: list[SourceRow] = []
    left_out: list[str] = []
    for i in range(start + 1, len(rows)):
        r = rows[i]
        if r and isinstance(r[0], str):
            break  # next section
        if not r or all(c is None for c in r):
            continue
        where = f"sheet {sheet!r} row {i + 1}"
        m, n, k = (r[cols[c]] if cols[c] < len(r) else None for c in ("m", "n", "k"))
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (m, n, k)):
            raise SourceError(f"{where}: M, N, K must be integers, got {(m, n, k)!r}")
        flags: tuple[str, ...] = ()
        extra: dict[str, Any] = {}
        if k == K_QUIRK[0]:
            k = K_QUIRK[1]
            flags = ("source_k_1530",)
            extra["source_k"] = K_QUIRK[0]
        layout, why = _layout(r, cols, f"{where} ({m}x{n}x{K_QUIRK[0] if 'source_k' in extra else k})")
        if layout is None:
            left_out.append(str(why))
            continue
        try:
            shape = Shape(1, m, n, k, layout)
        except ShapeError as exc:
            raise SourceError(f"{where}: {exc}") from None
        seconds, tflags, err, ms = _time_row(r[cols["ms"]], shape, where)
        extra.update({"source_layout": layout.upper(), "source_value": ms, "source_unit": "ms"})
        app = r[cols["app"]] if "app" in cols and cols["app"] < len(r) else None
        if isinstance(app, str) and app.strip():
            extra["application"] = app.strip()
        out.append(SourceRow(shape=shape, dtype=dtype, seconds=seconds, source_dtype=precision,
                             flags=(*flags, *tflags), error=err, family="deepbench", extra=extra,
                             where=f"{name!r}: {where}"))
    if not out:
        reasons = f" ({'; '.join(left_out)})" if left_out else ""
        raise SourceError(f"sheet {sheet!r}: {SECTION!r} section has no rows{reasons}")
    return out, left_out


def _sheet(ws: Any, name: str) -> tuple[str | None, list[SourceRow], list[str]]:
    """(dtype, rows, notes) of one results sheet: no dtype with the reason it is skipped, or its rows with a note
    per row left out."""
    rows = [tuple(r) for r in ws.iter_rows(values_only=True)]
    precision = next((r[1] for r in rows if r and _norm(r[0] or "") == "precision" and len(r) > 1), None)
    starts = [i for i, r in enumerate(rows) if r and isinstance(r[0], str) and _norm(r[0]) == _norm(SECTION)]
    if not starts:
        return None, [], [f"sheet {ws.title!r} has no {SECTION!r} section"]
    if precision is None:
        raise SourceError(f"sheet {ws.title!r}: no 'Precision' line, so the dtype is unknown")
    if _norm(precision) not in PRECISIONS:
        raise SourceError(f"sheet {ws.title!r}: unknown precision {precision!r}")
    dtype = PRECISIONS[_norm(precision)]
    if dtype is None:
        return None, [], [f"sheet {ws.title!r}: precision {precision!r} has no matching dtype here (skipped)"]
    got, left_out = _section_rows(rows, starts[0], dtype, str(precision), ws.title, name)
    return dtype, got, left_out


def _layout_note(rows: list[SourceRow]) -> str:
    """How many rows of each dtype and layout, and what the letters mean."""
    counts: dict[str, dict[str, int]] = {}
    for r in rows:
        per = counts.setdefault(r.dtype, {})
        per[r.shape.layout] = per.get(r.shape.layout, 0) + 1
    each = "; ".join(f"{dtype} " + ", ".join(f"{n} {lay}" for lay, n in sorted(per.items(), key=lambda kv: (-kv[1],
                                                                                                      kv[0])))
                     for dtype, per in counts.items())
    return (f"rows per layout: {each}; the sheet's A and B Transpose letters (cuBLAS op flags) as published, M, N "
            "and K kept (as the deepbench: workload family sweeps them); each layout is a series of its own")


def device_key(path: Path) -> str:
    """``DeepBench_NV_P100.xlsx`` -> ``NV_P100`` (the source's own device name)."""
    stem = path.stem
    return stem[len("DeepBench_"):] if stem.startswith("DeepBench_") else stem


def read(path: Path) -> list[SourceDevice]:
    # openpyxl reads a read-only workbook's sheets lazily and warns about features it drops (extensions,
    # styles) with a site-packages path; none carries a value, so each becomes one line in the import notes
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        devices = _read(path)
    dropped = [f"openpyxl while reading: {msg} (not a value the import uses)"
               for msg in dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, UserWarning))]
    return [replace(d, provenance={**d.provenance, "notes": [*d.provenance["notes"], *dropped]}) for d in devices]


def _read(path: Path) -> list[SourceDevice]:
    name = str(path)
    wb = _load(path)
    try:
        specs = _specs(wb)
        rows: list[SourceRow] = []
        skipped: list[str] = []
        left_out: list[str] = []
        sheets: dict[str, str] = {}
        for ws in wb.worksheets:
            if ws.title == "Specs":
                continue
            dtype, got, why = _sheet(ws, name)
            skipped.extend(why)
            if dtype is None:
                continue
            if dtype in sheets.values():
                skipped.append(f"sheet {ws.title!r}: a second {dtype} sheet (skipped)")
                continue
            sheets[ws.title] = str(dtype)
            rows.extend(got)
            left_out.extend(why)
    except SourceError as exc:
        raise SourceError(f"{name!r}: {exc}") from None
    except (zipfile.BadZipFile, KeyError, OSError, EOFError, ParseError) as exc:
        raise SourceError(f"{name!r}: damaged xlsx workbook ({type(exc).__name__}: {exc})") from None
    finally:
        wb.close()
    if not rows:
        why = "; ".join(skipped) or "no sheets"
        raise SourceError(f"{name!r}: no importable {SECTION!r} section ({why})")
    kept, dropped = dedupe(rows)
    notes = [PRECISION_NOTES[d] for d in dict.fromkeys(r.dtype for r in kept)]
    notes.append(_layout_note(kept))
    if dropped:
        notes.append(f"{dropped} rows repeat a shape, layout and dtype of an earlier row; kept the first")
    if any("source_k_1530" in r.flags for r in kept):
        notes.append("the sheet writes K=1530 where DeepBench's gemm_problems.h runs K=1536; imported as K=1536 "
                     "(flag source_k_1530)")
    notes.extend(skipped)
    key = device_key(path)
    gpu = specs.get("GPU Model") or specs.get("CPU Model") or specs.get("CPU") or key
    software = {k: v for k, v in specs.items() if k not in ("GPU Model",)}
    vendor = "AMD" if key.startswith("AMD") else "Intel" if key.startswith("IA") else "NVIDIA"
    return [SourceDevice(
        key=key, name=gpu, rows=tuple(kept), mode="eager", timer="host-mean", cache="none",
        details={"software": software},
        provenance={
            "source_file": path.name, "source_sha256": sha256_of(path), **read_provenance(path),
            "tool": f"Baidu DeepBench gemm_bench ({vendor} build)",
            "timing_method": TIMING if vendor != "Intel" else TIMING_INTEL,
            "timer_resolution_s": 1e-6,
            "device_key": key, "sheets": sheets,
            "dtype_keys": {d: next(r.source_dtype for r in kept if r.dtype == d) for d in sheets.values()},
            "notes": notes, "unknown": list(UNKNOWN),
        },
        warnings=tuple(f"{name!r}: {w}" for w in left_out),
    )]

