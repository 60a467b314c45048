"""nvbench ``--csv`` and ``--md`` output as :class:`State` objects (NVIDIA/nvbench
``nvbench/csv_printer.cu``, ``nvbench/markdown_printer.cu``).

CSV: one header line ``Benchmark,Device,Device Name,<axes>,Skipped,<summaries>``
and one line per state; a power-of-two axis has two columns (``M (pow2)`` =
``2^10`` and ``M`` = ``1024``); durations are plain seconds with the header
suffix `` (sec)``; a skipped state has ``Skipped = Yes`` and empty summaries.
Several benchmarks share one header (the union of their columns), so an axis of a
later benchmark can sit after ``Skipped``.

Markdown: ``# Devices`` (``## [0] `NAME` `` and ``* SM Version: ...`` lines),
then ``# Benchmark Results``, ``## <benchmark>``, ``### [id] <device>`` and a
table per device: axes first (a power-of-two axis as ``2^10 = 1024``), then the
summaries with units (``262.392 us``, ``27393x``). Skipped states are left out.

Both print only the visible summaries: ``GPU Time`` is the mean of the cold
measurement (the median is hidden by default) and ``Batch GPU`` the batch mean.
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mfu_sweep.importers.common import SourceError
from mfu_sweep.importers.values import count, number

FIXED = ("Benchmark", "Device", "Device Name")
SUMMARY_NAMES = {"samples", "cpu time", "noise", "gpu time", "batch gpu", "batch", "elem/s", "globalmem bw",
                 "bwutil", "bwpeak", "walltime"}
_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_DURATION = re.compile(r"^(\S+?)\s*(s|ms|us|ns)$")  # the number parsed whole: "-5 us" is refused, not read as 5
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class State:
    """One nvbench state in any output format: where it is, its device, axes and times."""

    where: str
    device: str
    axes: Mapping[str, str]
    cold_s: float | None = None
    cold_stat: str = "median"
    batch_s: float | None = None
    skipped: str | None = None
    samples_s: tuple[float, ...] = ()
    sample_size: int = 0
    rounded: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)
    timing: Mapping[str, str] = field(default_factory=dict)
    """How an mfu-sweep export measured the samples (its ``mfu-sweep/timing`` summary: timer, cache); empty else."""
    math: Mapping[str, str] = field(default_factory=dict)
    """An mfu-sweep export's record's math mode (its ``mfu-sweep/math`` summary: flags, mat_mul_precision ...)."""


def is_csv(head: str) -> bool:
    return head.startswith("Benchmark,Device,Device Name")


def is_markdown(head: str) -> bool:
    return "# Benchmark Results" in head or head.startswith("# Devices")


def _number(cell: str, where: str, what: str) -> float | None:
    cell = cell.strip()
    return number(cell, where, what) if cell else None


def csv_states(text: str, name: str) -> tuple[list[State], Counter]:
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    if tuple(header[:3]) != FIXED:
        raise SourceError(f"{name!r}: line 1: CSV header must start with {','.join(FIXED)}")
    skip_at = header.index("Skipped") if "Skipped" in header else len(header)
    first = {h: i for i, h in reversed(list(enumerate(header)))}  # first column of each header
    axis_cols = [i for i, h in enumerate(header)
                 if (3 <= i < skip_at and not h.endswith("(pow2)"))
                 or (i > skip_at and not h.endswith(")") and header.count(h) == 1 and h.lower() not in SUMMARY_NAMES)]
    skipped: Counter = Counter()
    states = []
    unterminated = not text.endswith("\n")  # nvbench ends every row with a newline: a last row without one was cut
    for n, row in enumerate(rows[1:], start=2):
        if not any(c.strip() for c in row):
            continue
        last = n == len(rows)
        if last and unterminated:
            skipped["cut mid-row at the end of the file"] += 1
            continue
        if len(row) != len(header):
            skipped["cut mid-row at the end of the file" if last else
                    f"{len(row)} cells where the header has {len(header)}"] += 1
            continue
        where = f"{name!r}: line {n} (benchmark {row[0]!r})"

        def cell(h: str, r: list[str] = row) -> str:
            return r[first[h]] if h in first else ""

        is_skipped = cell("Skipped").strip().lower() == "yes"
        states.append(State(
            where=where, device=cell("Device Name") or f"device {cell('Device')}",
            axes={header[i]: row[i] for i in axis_cols if row[i].strip()},
            cold_s=_number(cell("GPU Time (sec)"), where, "GPU Time"), cold_stat="mean",
            batch_s=_number(cell("Batch GPU (sec)"), where, "Batch GPU"),
            skipped="skipped by nvbench (the CSV gives no reason)" if is_skipped else None,
            sample_size=count(cell("Samples") or "0", where, "Samples"),
            details={"id": cell("Device") or None},
        ))
    return states, skipped


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _duration(cell: str, where: str, what: str) -> float | None:
    if not cell:
        return None
    m = _DURATION.match(cell)
    if not m:
        raise SourceError(f"{where}: {what} {cell!r} is not a duration (like '262.392 us')")
    return number(m.group(1), where, what) * _UNITS[m.group(2)]


def _axis_value(cell: str) -> str:
    """``2^10 = 1024`` -> ``1024``; anything else as printed."""
    return cell.split("=", 1)[1].strip() if re.match(r"^2\^\d+\s*=", cell) else cell


def _md_devices(lines: list[str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    current = None
    for ln in lines:
        if ln.startswith("# ") and ln.strip() != "# Devices" and out:
            break
        if m := re.match(r"^## \[(\d+)\] `(.*)`", ln):
            current = out.setdefault(m.group(1), {"id": m.group(1), "name": m.group(2)})
        elif current is not None and (m := re.match(r"^\* ([^:]+): (.*)$", ln)):
            current[m.group(1).strip()] = m.group(2).strip()
    return out


def md_states(text: str, name: str) -> tuple[list[State], Counter, dict[str, Any]]:
    lines = _ANSI.sub("", text).splitlines()
    devices = _md_devices(lines)
    try:
        start = next(i for i, ln in enumerate(lines) if ln.strip() == "# Benchmark Results")
    except StopIteration:
        raise SourceError(f"{name!r}: no '# Benchmark Results' section (markdown cut before the results?)") from None
    states: list[State] = []
    skipped: Counter = Counter()
    bench = device = dev_id = ""
    header: list[str] | None = None
    for n in range(start + 1, len(lines)):
        ln = lines[n]
        if ln.startswith("## "):
            bench, device, dev_id, header = ln[3:].strip(), "", "", None
        elif m := re.match(r"^### \[(\d+)\] (.*)$", ln):
            device, dev_id, header = m.group(2).strip(), m.group(1), None
        elif ln.startswith("|"):
            cells = _cells(ln)
            if header is None:
                header = cells
            elif set("".join(cells)) <= set("-: "):
                continue
            elif len(cells) != len(header) or not ln.rstrip().endswith("|"):
                skipped["cut mid-row at the end of the file" if n == len(lines) - 1 else
                        f"{len(cells)} cells where the table header has {len(header)}"] += 1
            else:
                states.append(_md_state(header, cells, f"{name!r}: line {n + 1} (benchmark {bench!r})",
                                        device, devices.get(dev_id, {"id": dev_id or None})))
    return states, skipped, {}


def _md_state(header: list[str], cells: list[str], where: str, device: str, info: Mapping[str, str]) -> State:
    cut = next((i for i, h in enumerate(header) if h.lower() in SUMMARY_NAMES), len(header))
    first = {h: i for i, h in reversed(list(enumerate(header)))}
    samples = cells[first["Samples"]].rstrip("x").strip() if "Samples" in first else ""
    return State(
        where=where, device=device or "unknown", axes={header[i]: _axis_value(cells[i]) for i in range(cut)},
        cold_s=_duration(cells[first["GPU Time"]], where, "GPU Time") if "GPU Time" in first else None,
        cold_stat="mean", rounded=True,
        batch_s=_duration(cells[first["Batch GPU"]], where, "Batch GPU") if "Batch GPU" in first else None,
        sample_size=count(samples, where, "Samples") if samples else 0,
        details={"sm_version": info.get("SM Version"), "sm_default_clock_rate": info.get("SM Default Clock Rate"),
                 "number_of_sms": info.get("Number of SMs"), "id": info.get("id")},
    )
