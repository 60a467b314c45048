"""tritonbench's console table, as people paste it into issues: ``python run.py --op gemm`` without ``--csv``.

``BenchmarkOperatorResult.__str__`` (``tritonbench/utils/triton_op.py``) prints its table with
``tabulate.tabulate(table, headers=headers, stralign="right")``: tabulate's default ``simple`` form, a header
line, a line of dashes per column (two spaces apart) and one line per shape, the x-value ``(M, N, K)`` first and
a closing ``average`` row. A ``latency`` cell is ``Latency.to_str("with_variance")``: the p50 in milliseconds to
six decimals and the largest deviation from it, ``0.192416 (±1.53%)`` (tritonbench before January 2025 printed
the p50 alone); a failed backend has its error message in its first cell and the others blank. Log lines before
and after the table (the command, "Removed 2 outliers ...") are skipped.

The columns are read by the dash runs' positions, so blank cells (a ``speedup`` without a baseline, a failed
backend's other metrics) stay blank. A table whose lines were wrapped by the terminal, or cut when pasted, has no
dash line under its header or rows that do not start with a shape: it is refused with the way to a file
(``--csv`` or ``--output FILE``), which nothing wraps.
"""

from __future__ import annotations

import re

from mfu_sweep.importers.common import SourceError

X_LABEL = "(M, N, K)"
_DASHES = re.compile(r"^\s*-+(?: {2}-+)*\s*$")
_RUN = re.compile(r"-+")
# the p50 of Latency.to_str("with_variance"), and the spread after it (kept as text, not used)
_LATENCY = re.compile(r"^(?P<p50>[0-9.eE+-]+)\s*\(±\s*(?P<spread>[0-9.]+)%\)$")
FILE_HINT = ("rerun tritonbench with --csv or --output FILE (a ';'-separated table that no terminal wraps or cuts) "
             "and import that")

Table = dict[str, dict[str, dict[str, object]]]  # backend -> x-value -> metric -> cell


def find_header(lines: list[str]) -> int | None:
    """The index of the console table's header line (``(M, N, K)`` or another x-value, dashes under it)."""
    return next((i for i in range(len(lines) - 1) if _DASHES.match(lines[i + 1]) and lines[i].strip()
                 and not _DASHES.match(lines[i])), None)


def looks_like_console(text: str) -> bool:
    """Whether ``text`` holds a tabulate table (a header with a line of dash runs under it)."""
    return find_header(text.splitlines()) is not None


def _cells(line: str, spans: list[tuple[int, int]]) -> list[str]:
    """The line's cells: from the end of the previous column's dashes to the end of this one's (the last to the
    end of the line), so right-aligned text wider than its dashes stays whole."""
    cuts = [0] + [end for _, end in spans[:-1]] + [max(len(line), spans[-1][1])]
    return [line[a:b].strip() for a, b in zip(cuts, cuts[1:], strict=False)]


def latency_cell(cell: str) -> tuple[str, str | None]:
    """``"0.192416 (±1.53%)"`` -> (``"0.192416"``, ``"1.53"``); a cell without the spread as it is."""
    m = _LATENCY.match(cell.strip())
    return (m["p50"], m["spread"]) if m else (cell, None)


def console_table(text: str, name: str) -> Table:
    """The cells of a pasted console table, keyed as the CSV's are (backend, x-value, metric)."""
    lines = text.splitlines()
    start = find_header(lines)
    if start is None:
        raise SourceError(f"{name!r}: no tritonbench table: no header line with a line of dashes under it; "
                          + FILE_HINT)
    spans = [m.span() for m in _RUN.finditer(lines[start + 1])]
    header = _cells(lines[start], spans)
    if header[0] != X_LABEL and any(X_LABEL in ln for ln in lines[:start]):
        raise SourceError(f"{name!r}: the table's header is split over lines ({X_LABEL} above its dashes): the table "
                          "looks wrapped or cut; " + FILE_HINT)
    if header[0] != X_LABEL:
        raise SourceError(f"{name!r}: the x-value column is {header[0]!r}, not {X_LABEL!r}: not a GEMM operator's "
                          "table (gemm, addmm, fp8_gemm ...)")
    table: Table = {}
    for line in lines[start + 2:]:
        cells = _cells(line, spans)
        if not line.strip() or cells[0] == "average":
            break
        if not cells[0].startswith("("):
            raise SourceError(f"{name!r}: table line {line.strip()[:60]!r} does not start with an {X_LABEL} shape: "
                              "the table looks wrapped or cut; " + FILE_HINT)
        for col, cell in zip(header[1:], cells[1:], strict=False):
            backend, sep, metric = col.rpartition("-")
            if sep:
                value = latency_cell(cell)[0] if metric == "latency" else cell
                table.setdefault(backend, {}).setdefault(cells[0], {})[metric] = value
    if not table:
        raise SourceError(f"{name!r}: the tritonbench table has no rows of shapes; " + FILE_HINT)
    return table
