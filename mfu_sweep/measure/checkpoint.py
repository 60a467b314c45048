"""A sweep's checkpoints and its own cost per shape.

:class:`Checkpoint` writes the result file whole when a run starts and when it
ends, and in between appends each record to the file's journal
(:mod:`mfu_sweep.records.journal`): one synced line per shape, whatever the file holds,
so appending to a 10,000-record sweep costs what appending to an empty one does.

:class:`ShapeClock` stamps every record with what the sweep itself cost beside
the worker: ``overhead_s`` is the parent's wall time between the checkpoints of
two consecutive records (the request and answer through the pipe, the machine
reading, finishing the record, one journal line, the progress line) less the
worker's own time on the shape (``worker_s``: its inputs, first call, timing
loop and check) and the start of a worker for it (``worker_start_s``). A record
without ``worker_s`` (no answer: a timeout, a crashed worker) has no
``overhead_s``; a pass change (one worker closed, the next started) is not
counted.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from mfu_sweep.records.journal import Journal
from mfu_sweep.records.results import Record, Sweep, save_sweep
from mfu_sweep.util.progress import format_duration
from mfu_sweep.util.text import counted

OVERHEAD_FIELD = "overhead_s"
WORKER_FIELD = "worker_s"


class Checkpoint:
    """The writer of one sweep file: :meth:`start`, :meth:`add` per record, :meth:`finish`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.journal: Journal | None = None

    def start(self, sweep: Sweep) -> None:
        """Write ``sweep`` whole (a killed run's journal is in it: the read folded it) and open a fresh journal."""
        save_sweep(self.path, sweep)
        self.journal = Journal(self.path).open(str(sweep.run["id"]), len(sweep.records))

    def add(self, record: Record) -> int:
        """Append ``record`` to the journal, synced to disk; the bytes written."""
        if self.journal is None:
            raise RuntimeError("checkpoint not started")
        return self.journal.append(record.to_json())

    def finish(self, sweep: Sweep) -> None:
        """Fold: write ``sweep`` (every record) whole and remove the journal."""
        save_sweep(self.path, sweep)
        self.close(check=False)  # the file holds every record, synced: the journal's last sync no longer matters

    def close(self, check: bool = True) -> None:
        """Close the journal (``mfu_sweep.records.journal.Journal.close``); it stays beside the file unless folded."""
        if self.journal is not None:
            journal, self.journal = self.journal, None
            journal.close(check)


@dataclass
class ShapeClock:
    """Stamps ``overhead_s`` on each record (see the module docstring); ``clock`` is seconds, monotonic."""

    clock: Callable[[], float] = time.perf_counter
    last: float = field(init=False)

    def __post_init__(self) -> None:
        self.last = self.clock()

    def restart(self) -> None:
        """Start counting from now (after a pass change, which is not the sweep's per-shape cost)."""
        self.last = self.clock()

    def stamp(self, record: Record) -> Record:
        now = self.clock()
        spent, self.last = now - self.last, now
        worker = record.extra.get(WORKER_FIELD)
        if worker is None:
            return record
        overhead = max(0.0, spent - float(worker) - float(record.extra.get("worker_start_s") or 0.0))
        return replace(record, extra={**record.extra, OVERHEAD_FIELD: round(overhead, 6)})


@dataclass(frozen=True)
class SweepCost:
    """What the shapes of one run cost: device time, the worker's time and the sweep's own overhead."""

    shapes: int
    device_s: float
    worker_s: float
    overhead_median_s: float | None
    overhead_max_s: float | None
    overhead_total_s: float

    def line(self) -> str:
        """One line for the end of a sweep: device time, the worker's time, the sweep's own overhead per shape."""
        text = (f"device time: {format_duration(self.device_s)} in the timing loops of "
                f"{counted(self.shapes, 'shape')} ({format_duration(self.worker_s)} in the worker with inputs, "
                "first calls and checks)")
        if self.overhead_median_s is None:
            return text
        return (f"{text}; the sweep's own overhead: median {self.overhead_median_s * 1e3:.1f} ms per shape "
                f"(max {self.overhead_max_s * 1e3:.0f} ms, {format_duration(self.overhead_total_s)} in all)")


def sweep_cost(records: Iterable[Record]) -> SweepCost:
    """Sum and median over ``records`` of ``measure_wall_s`` (the timing loops), ``worker_s`` and ``overhead_s``."""
    records = list(records)
    overheads = [float(r.extra[OVERHEAD_FIELD]) for r in records if r.extra.get(OVERHEAD_FIELD) is not None]
    return SweepCost(
        shapes=len(records),
        device_s=sum(float(r.extra.get("measure_wall_s") or 0.0) for r in records),
        worker_s=sum(float(r.extra.get(WORKER_FIELD) or 0.0) for r in records),
        overhead_median_s=statistics.median(overheads) if overheads else None,
        overhead_max_s=max(overheads) if overheads else None,
        overhead_total_s=sum(overheads),
    )
