"""What else used the machine while a shape ran: /proc readings taken by the sweep's parent process.

Per shape the parent reads ``/proc/stat`` (CPU time of the worker's cores by
kind) and the CPU time of its own processes (itself, its workers and their
children, found by session in ``/proc/<pid>/stat``) before and after the shape.
Others' CPU time is the busy time of those cores minus the sweep's own; steal is
what the hypervisor gave other guests. The decision rule lives in
:mod:`mfu_sweep.records.contention`. Every reader returns None (and the reading says what
could not be observed) where ``/proc`` is missing or unreadable: the sweep goes on.

Text parsers are separate from the readers, so recorded /proc contents test them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mfu_sweep.records.contention import CONTENDED_SHARE

PROC = Path("/proc")
# Fields of a /proc/stat cpu line after the name: user nice system idle iowait irq softirq steal guest guest_nice.
# guest time is already inside user, so it is not added again.
BUSY_FIELDS = (0, 1, 2, 5, 6)
IDLE_FIELDS = (3, 4)
STEAL_FIELD = 7
CHECK_WINDOW_S = 0.25


@dataclass(frozen=True)
class CpuTicks:
    """Summed /proc/stat ticks of a set of CPUs: busy (without steal), idle, steal."""

    busy: int
    idle: int
    steal: int

    @property
    def total(self) -> int:
        return self.busy + self.idle + self.steal


def parse_proc_stat(text: str, cpus: Collection[int]) -> CpuTicks:
    """Ticks of the ``cpuN`` lines of /proc/stat for N in ``cpus``; ValueError when none is there."""
    busy = idle = steal = 0
    seen = 0
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or int(name[3:]) not in cpus:
            continue
        values = [int(v) for v in rest.split()]
        values += [0] * (10 - len(values))
        busy += sum(values[i] for i in BUSY_FIELDS)
        idle += sum(values[i] for i in IDLE_FIELDS)
        steal += values[STEAL_FIELD]
        seen += 1
    if not seen:
        raise ValueError(f"/proc/stat has no line for cpus {sorted(cpus)}")
    return CpuTicks(busy, idle, steal)


@dataclass(frozen=True)
class ProcStat:
    """The fields of one /proc/<pid>/stat line this module uses (times in clock ticks)."""

    pid: int
    ppid: int
    session: int
    ticks: int


def parse_pid_stat(text: str) -> ProcStat:
    """Parse a /proc/<pid>/stat line; the command name may hold spaces and parentheses."""
    pid = int(text.split(" ", 1)[0])
    rest = text[text.rindex(")") + 2:].split()
    # rest[0] is the state; ppid, pgrp, session follow; utime, stime, cutime, cstime are fields 14-17 of the
    # line. The reaped children's times count: a compiler a worker ran, a worker the parent killed.
    return ProcStat(pid=pid, ppid=int(rest[1]), session=int(rest[3]), ticks=sum(int(x) for x in rest[11:15]))


def parse_loadavg(text: str) -> float:
    return float(text.split()[0])


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def read_processes(root: Path = PROC) -> dict[int, ProcStat] | None:
    """Every process's :class:`ProcStat`; None where /proc cannot be listed."""
    try:
        names = os.listdir(root)
    except OSError:
        return None
    out = {}
    for name in names:
        if not name.isdigit():
            continue
        text = _read(root / name / "stat")
        if text is None:
            continue  # exited meanwhile
        try:
            st = parse_pid_stat(text)
        except (ValueError, IndexError):
            continue
        out[st.pid] = st
    return out


def own_ticks(procs: Mapping[int, ProcStat], parent: int) -> dict[int, int]:
    """Ticks of the sweep's own processes: ``parent``, its children's sessions (workers) and their members."""
    # Workers lead sessions of their own (start_new_session); other children share the parent's session,
    # which may hold a whole terminal's jobs, so only sessions a child leads count.
    sessions = {p.pid for p in procs.values() if p.ppid == parent and p.session == p.pid}
    return {p.pid: p.ticks for p in procs.values()
            if p.pid == parent or p.ppid == parent or p.session in sessions}


def child_pids(pid: int, root: Path = PROC) -> list[int] | None:
    """Children of ``pid`` from ``/proc/<pid>/task/*/children``; None where the kernel has no such file."""
    try:
        tasks = os.listdir(root / str(pid) / "task")
    except OSError:
        return None
    out: list[int] = []
    for tid in tasks:
        text = _read(root / str(pid) / "task" / tid / "children")
        if text is None:
            return None if not out and tid == tasks[0] else out
        out += [int(c) for c in text.split()]
    return out


def own_processes(parent: int, root: Path = PROC) -> dict[int, int] | None:
    """Ticks of ``parent`` and all its descendants: a walk of the children files (a few reads), or a scan of
    every process (:func:`own_ticks`) where the kernel lacks them."""
    todo, seen = [parent], {}
    while todo:
        pid = todo.pop()
        text = _read(root / str(pid) / "stat")
        if text is None:
            continue  # exited meanwhile: its time arrives with the parent's reaped children
        try:
            seen[pid] = parse_pid_stat(text).ticks
        except (ValueError, IndexError):
            continue
        kids = child_pids(pid, root)
        if kids is None:
            procs = read_processes(root)
            return own_ticks(procs, parent) if procs else None
        todo += [k for k in kids if k not in seen]
    return seen or None


@dataclass(frozen=True)
class Snapshot:
    """One look at the machine: when, the cores' ticks, the sweep's own processes (with reaped children)."""

    t: float
    cpu: CpuTicks | None
    own: Mapping[int, int] | None
    missing: tuple[str, ...] = ()


@dataclass
class HostMonitor:
    """Reads the machine before and after each shape; see :func:`reading` for what a reading holds."""

    cpus: frozenset[int] = field(default_factory=lambda: frozenset(os.sched_getaffinity(0)))
    root: Path = PROC
    hz: int = field(default_factory=lambda: _clock_ticks())
    used: int | None = None
    """Cores the worker keeps busy (CPU: its threads; accelerators: its one host thread); None: all."""
    gpu: Any = None
    """An object with ``read(own_pids) -> dict`` (``measure.gpu_neighbours``), or None."""
    _start: Snapshot | None = None

    def snapshot(self) -> Snapshot:
        missing = []
        cpu = None
        text = _read(self.root / "stat")
        try:
            cpu = parse_proc_stat(text, self.cpus) if text is not None else None
        except ValueError:
            cpu = None
        if cpu is None:
            missing.append("/proc/stat")
        own = own_processes(os.getpid(), self.root)
        if own is None:
            missing.append("/proc/<pid>/stat")
        return Snapshot(time.monotonic(), cpu, own, tuple(missing))

    def begin(self) -> None:
        self._start = self.snapshot()

    def end(self) -> dict[str, Any]:
        """The reading since :meth:`begin` (an empty window's reading when begin was not called)."""
        start = self._start or self.snapshot()
        stop = self.snapshot()
        out = reading(start, stop, self.hz, len(self.cpus), _read(self.root / "loadavg"), self.used)
        if self.gpu is not None:
            out["gpu"] = self.gpu.read(set(stop.own or ()))
        self._start = None
        return out


def _clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (ValueError, OSError, AttributeError):
        return 100


def _own_delta_s(a: Snapshot, b: Snapshot, hz: int) -> float | None:
    if a.own is None or b.own is None:
        return None
    # A process reaped meanwhile (a worker killed on timeout, a compiler) left b.own; its whole lifetime arrived
    # in its parent's cutime/cstime, so the sweep's own time may be overstated, never blamed on others.
    ticks = sum(t - a.own.get(pid, 0) for pid, t in b.own.items())
    return max(0.0, ticks / hz)


def reading(a: Snapshot, b: Snapshot, hz: int, cpus: int, loadavg_text: str | None,
            used: int | None = None) -> dict[str, Any]:
    """Others' and the hypervisor's share of the worker's cores between snapshots ``a`` and ``b``.

    Others' CPU time is the busy time of the ``cpus`` cores minus the sweep's
    own. A worker that uses only ``used`` of them leaves ``cpus - used`` cores
    idle for others, so only others' time beyond those competes:
    ``other_share`` = max(0, others' time - idle cores' time) / (the ``used``
    cores' time), which is others' time over all the cores' time when the
    worker uses them all. ``steal_share`` = steal ticks / all ticks. Both None,
    with the reason in ``unobserved``, where /proc could not be read.
    """
    used = min(used or cpus, cpus)
    out: dict[str, Any] = {"window_s": round(b.t - a.t, 4), "cpus": cpus}
    if used < cpus:
        out["cores_used"] = used
    missing = sorted(set(a.missing) | set(b.missing))
    own = _own_delta_s(a, b, hz)
    if a.cpu is not None and b.cpu is not None and own is not None:
        total = b.cpu.total - a.cpu.total
        busy_s = (b.cpu.busy - a.cpu.busy) / hz
        if total > 0:
            out["own_cpu_s"] = round(own, 3)
            out["other_cpu_s"] = round(max(0.0, busy_s - own), 3)
            cores_s = total / hz  # core-seconds of the window over all ``cpus`` cores
            spare_s = cores_s * (cpus - used) / cpus
            out["other_share"] = round(max(0.0, busy_s - own - spare_s) / (cores_s * used / cpus), 4)
            out["steal_share"] = round((b.cpu.steal - a.cpu.steal) / total, 4)
    if "other_share" not in out:
        out["other_share"] = None
        if not missing:
            missing.append("window too short for a tick")
    if loadavg_text is not None:
        try:
            out["load1"] = parse_loadavg(loadavg_text)
        except (ValueError, IndexError):
            missing.append("/proc/loadavg")
    else:
        missing.append("/proc/loadavg")
    if missing:
        out["unobserved"] = missing
    return out


def busy_before(monitor: HostMonitor | None = None, window_s: float = CHECK_WINDOW_S,
                sleep: Callable[[float], None] = time.sleep) -> tuple[dict[str, Any], str | None]:
    """Look at the machine for ``window_s`` before a sweep: (the reading, a one-line warning or None).

    Warns when others used at least :data:`CONTENDED_SHARE` of the cores, or
    the load average is above the core count.
    """
    monitor = monitor or HostMonitor()
    monitor.begin()
    sleep(window_s)
    got = monitor.end()
    share = got.get("other_share")
    load = got.get("load1")
    cores = got["cpus"]
    busy = share is not None and share + (got.get("steal_share") or 0.0) >= CONTENDED_SHARE
    if not busy and not (load is not None and load > cores):
        return got, None
    used = f"other processes used {share:.0%} of the {cores} cores over {got['window_s']:.2g} s" if share is not None \
        else "CPU use not observable"
    load_text = f", load average {load:.2f} on {cores} cores" if load is not None else ""
    return got, (f"machine busy before the sweep: {used}{load_text}; shapes measured under contention are "
                 f"flagged 'contended'")


def machine_block(before: Mapping[str, Any] | None, clock: Mapping[str, Any] | None, gpu_note: str | None,
                  backend: str, passes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The sweep file's ``machine`` block: threshold, what was observed, the check before, the clock, passes."""
    observed = {"cpu": "/proc/stat minus the sweep's own processes, per shape; load average"}
    unavailable = []
    if backend == "cuda":
        observed["gpu"] = gpu_note or "not observed"
    elif backend in ("neuron", "xla"):
        unavailable.append(f"{backend}: other processes on the device and their utilisation are not exposed to "
                           "this tool (neuron-monitor / the XLA runtime are not read); host CPU only")
    block: dict[str, Any] = {"contended_share": CONTENDED_SHARE, "observed": observed,
                             "unavailable": unavailable, "passes": list(passes)}
    if before is not None:
        block["before"] = dict(before)
    if clock is not None:
        block["clock"] = dict(clock)
    return block
