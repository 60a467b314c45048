"""Shape files: the CSV of shapes a sweep measures (``--shape-file``), read once per file and checked line by line.

The columns are ``m,n,k`` and optional ``batch``, ``layout``, ``groups``, ``family`` and ``passes``
(:data:`mfu_sweep.gemm.shapes.SHAPE_FILE_COLUMNS`); the shapes themselves are :class:`mfu_sweep.gemm.shapes.Shape`.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from mfu_sweep.gemm.shapes import DEFAULT_LAYOUT, KNOWN_COLUMNS, LAYOUTS, MAX_PASSES, Shape, ShapeError, parse_groups


@dataclass(frozen=True, slots=True)
class ShapeRow:
    """One row of a shape file: the shape, and the optional ``family`` and ``passes`` columns."""

    shape: Shape
    family: str | None = None
    passes: int | None = None


def read_shape_rows(path: str | Path) -> list[ShapeRow]:
    """Read a shape file: columns ``m,n,k`` and optional ``batch``, ``layout``, ``groups``, ``family`` and ``passes``.

    ``layout`` is the operand layout (``nn``, ``nt``, ``tn``, ``tt``; empty is ``nn``) and ``groups``
    a grouped GEMM's group sizes (``m=512*8``, see :func:`parse_groups`). ``family`` names where a
    shape comes from (``mfu-sweep refine`` writes ``refine-<round>``) and is kept in its records;
    ``passes`` is how many passes of a ``--repeats`` sweep measure that shape (passes 0 .. passes-1).
    The columns ``mfu-sweep shapes --csv`` adds to describe a row (``DESCRIPTIVE_COLUMNS``)
    are read and ignored; any other column is refused by name, and so is a row
    with more or fewer values than the header has columns. Lines starting with
    ``#`` are comments. The file is UTF-8, with or without the byte-order mark Excel writes before a CSV.
    Errors name the file and the line as the file numbers it.
    """
    from mfu_sweep.util.inputs import is_stdin

    name = str(path)
    if is_stdin(path):  # - is standard input, read once per stream (inputs.read_stdin)
        return list(_rows_of_bytes(name, _limited(path)))
    try:
        info = Path(path).stat()
    except OSError as exc:
        raise ShapeError(f"shape file {name!r}: {exc.strerror or exc}") from None
    return list(_read_rows(name, info.st_mtime_ns, info.st_size))


def _limited(path: str | Path) -> bytes:
    """The bytes of a shape file within the input limit; a FIFO or a device is refused, never read."""
    from mfu_sweep.util.inputs import InputError, read_limited

    try:
        return read_limited(path)
    except InputError as exc:
        raise ShapeError(f"shape file {exc}") from None


@lru_cache(maxsize=1)
def _read_rows(name: str, mtime_ns: int, size: int) -> tuple[ShapeRow, ...]:
    """The rows of the shape file ``name`` as it is at that modification time and size: a sweep asks for them
    twice (its shapes, then their ``passes``): a million-row file is read once."""
    del mtime_ns, size  # the cache's key only: a file changed since is read again
    return _rows_of_bytes(name, _limited(name))


def _rows_of_bytes(name: str, data: bytes) -> tuple[ShapeRow, ...]:
    """The rows of a shape file's bytes (UTF-8, with or without a byte-order mark)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ShapeError(f"shape file {name!r} is not text") from None
    lines = ((no, ln) for no, ln in enumerate(text.splitlines(), start=1)
             if ln.strip() and not ln.lstrip().startswith("#"))
    rows: list[ShapeRow] = []
    header: list[str] = []
    for lineno, line in lines:
        try:
            plain = _plain_row(line) if header == PLAIN_HEADER else None
            if plain is not None:
                rows.append(plain)
                continue
            values = _csv_values(line)
            if not header:
                header = _checked_header(values)
            else:
                rows.append(_shape_row(header, values, line))
        except ShapeError as exc:
            raise ShapeError(f"shape file {name!r} line {lineno}: {exc}") from None
    if not header:  # no line but blanks and comments
        raise ShapeError(f"shape file {name!r} has no shapes")
    if not rows:  # a header alone would otherwise leave the sweep to its default shapes
        raise ShapeError(f"shape file {name!r} has a header ({','.join(header)}) and no shapes; add a row "
                         "per shape (e.g. 4096,4096,4096 under m,n,k)")
    return tuple(rows)


def forget_shape_files() -> None:
    """Drop the rows :func:`read_shape_rows` keeps for a second reader (once both have read them)."""
    _read_rows.cache_clear()


PLAIN_HEADER = ["m", "n", "k"]


_PLAIN_LINE = re.compile(r"\s*([0-9]+)\s*,\s*([0-9]+)\s*,\s*([0-9]+)\s*", re.ASCII)


def _plain_row(line: str) -> ShapeRow | None:
    """The row of a line of three plain integers under the header ``m,n,k`` (most files), read without the csv
    module; None for any other line, which the general reader then takes (and words any error of)."""
    found = _PLAIN_LINE.fullmatch(line)
    if found is None:
        return None
    m, n, k = found.groups()
    return ShapeRow(Shape(1, int(m), int(n), int(k)))


def _csv_values(line: str) -> list[str]:
    try:
        return [v.strip() for v in next(csv.reader([line]))]
    except csv.Error as exc:
        raise ShapeError(f"{line.strip()!r} is not a CSV row ({exc})") from None


def _column_int(row: dict[str, str], col: str) -> int:
    token = row[col]
    if not (token.isascii() and token.isdigit()):
        raise ShapeError(f"column {col!r} = {token!r} is not a positive integer")
    return int(token)


def _checked_header(columns: list[str]) -> list[str]:
    header = [c.lower() for c in columns]
    for col in ("m", "n", "k"):
        if col not in header:
            raise ShapeError(f"header lacks column {col!r} (got {','.join(header)}); a shape file needs m,n,k")
    for col in header:
        if col not in KNOWN_COLUMNS:
            what = "an empty column name" if not col else f"unknown column {col!r}"
            raise ShapeError(f"header has {what}; known columns: {', '.join(KNOWN_COLUMNS)}")
        if header.count(col) > 1:
            raise ShapeError(f"header names column {col!r} twice")
    return header


def _shape_row(header: list[str], values: list[str], line: str) -> ShapeRow:
    if len(values) != len(header):
        raise ShapeError(f"{line.strip()!r} has {len(values)} values for the {len(header)} columns "
                         f"{','.join(header)}")
    row = dict(zip(header, values, strict=True))
    for col in ("m", "n", "k"):
        if not row[col]:
            raise ShapeError(f"column {col!r} is empty in {line.strip()!r}")
    dims = [_column_int(row, c) if row.get(c) else 1 for c in ("batch", "m", "n", "k")]
    passes = _column_int(row, "passes") if row.get("passes") else None
    if passes == 0 or (passes or 0) > MAX_PASSES:
        raise ShapeError(f"passes={passes} must be from 1 to {MAX_PASSES} (as --repeats)")
    layout = (row.get("layout") or DEFAULT_LAYOUT).lower()
    if layout not in LAYOUTS:
        raise ShapeError(f"column 'layout' = {row['layout']!r} is not one of {', '.join(LAYOUTS)}")
    grouped: dict[str, Any] = {}
    if row.get("groups"):
        grouped["group_dim"], grouped["groups"] = parse_groups(row["groups"])
    return ShapeRow(Shape(*dims, layout=layout, **grouped), row.get("family") or None, passes)
