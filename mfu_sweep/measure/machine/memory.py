"""Memory before allocation: what a shape's measurement needs, what the process may still use, OOM kills.

A worker checks each shape before it allocates anything (:func:`mfu_sweep.measure.bench.run_task`): its
working set (:func:`working_set`: every operand set, the float32 staging copy, the float64 check, the
scaled formats' float32 references, an output per call where the op allocates one, the ``--cache flush``
buffer) against the memory free to it. On the host that is the smaller of ``MemAvailable``
(``/proc/meminfo``) and what the process's cgroup still allows, at every level up to the root: cgroup v2
``memory.max`` less ``memory.current``, v1 ``memory.limit_in_bytes`` less ``memory.usage_in_bytes``, each
less the page cache the kernel can drop (``inactive_file``); a Slurm job or a container runs in one. A GPU
backend reads its own free memory (``torch.cuda.mem_get_info``). A shape that cannot fit is recorded
``oom`` with both numbers and never run: a shape allocated past a cgroup's limit is killed by the kernel
(or, without a cgroup, calls the machine's OOM killer on whatever it picks).

The parent reads :func:`oom_kills` (the cgroup's ``oom_kill`` count and the kernel's in ``/proc/vmstat``)
before each shape: a worker killed by SIGKILL while it rose was killed for memory, and its shape is
recorded ``oom``, not ``error``. Torch-free: the sweep's parent imports it.

:data:`CGROUP_ENV` names a directory to read as the process's cgroup instead of the one
``/proc/self/cgroup`` names (tests use a directory of their own; a user whose ``/sys/fs/cgroup`` is
mounted elsewhere may point it there).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mfu_sweep.gemm.dtypes import DType
from mfu_sweep.gemm.shapes import Shape

CGROUP_ENV = "MFU_SWEEP_CGROUP_DIR"
CGROUP_ROOT = Path("/sys/fs/cgroup")
MEMINFO = Path("/proc/meminfo")
VMSTAT = Path("/proc/vmstat")
UNLIMITED = 2**60  # cgroup v1 writes "no limit" as the largest page-aligned 64-bit value


@dataclass(frozen=True)
class Free:
    """Bytes free to the process, and where the number comes from."""

    bytes: int
    source: str


def gib(n: float) -> str:
    """``12.3 GiB`` (``512 MiB`` below one GiB)."""
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


def working_set(shape: Shape, dtype: DType, sets: int, mode: str = "eager", flush_bytes: int = 0) -> int:
    """Bytes one measurement of ``shape`` allocates at once: ``sets`` operand sets (A, B and the output), the
    float32 staging copy of the largest operand (inputs are drawn in float32 and converted), the float64
    check of one batch entry of B, the float32 references of a row- or block-scaled format, one more output
    where the op allocates its result per call (compile mode, block-scaled formats), and the flush buffer."""
    a, b, c = shape.operand_elements()
    need = sets * shape.bytes(dtype) + 4.0 * max(a, b, c) + 8.0 * shape.k * shape.n
    if dtype.quantized:
        need += 4.0 * (a + b)
    if mode == "compile" or dtype.block:
        need += c * dtype.output_bytes
    return int(need + flush_bytes)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError):
        return None


def _int(path: Path) -> int | None:
    text = _read(path)
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:  # "max" (v2: no limit)
        return None


def _field(path: Path, name: str) -> int | None:
    """The value of ``name`` in a ``key value`` file (memory.stat, memory.events, /proc/vmstat)."""
    for line in (_read(path) or "").splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == name and parts[1].isdigit():
            return int(parts[1])
    return None


def _own_cgroup() -> list[tuple[Path, Path]]:
    """(mount, path inside it) of this process's memory cgroup: v2's unified line, else v1's memory line."""
    found = []
    for line in (_read(Path("/proc/self/cgroup")) or "").splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if number == "0" and controllers == "" and (CGROUP_ROOT / "cgroup.controllers").exists():
            found.append((CGROUP_ROOT, Path(path.lstrip("/"))))
        elif "memory" in controllers.split(","):
            found.append((CGROUP_ROOT / "memory", Path(path.lstrip("/"))))
    return found


def cgroup_dirs() -> Iterator[Path]:
    """This process's memory cgroup and its ancestors up to the mount (a limit may sit at any level)."""
    override = os.environ.get(CGROUP_ENV)
    if override:
        yield Path(override)
        return
    for mount, inner in _own_cgroup():
        here = mount / inner
        if not here.is_dir():  # a namespaced container sees its own cgroup as the mount's root
            here = mount
        while True:
            yield here
            if here == mount or mount not in here.parents:
                break
            here = here.parent
        return


def _cgroup_free(d: Path) -> Free | None:
    """What the cgroup ``d`` still allows (its limit less its usage less droppable page cache)."""
    if (d / "memory.max").exists():
        limit, usage, names = _int(d / "memory.max"), _int(d / "memory.current"), "memory.max less memory.current"
        cache = _field(d / "memory.stat", "inactive_file") or 0
    else:
        limit, usage = _int(d / "memory.limit_in_bytes"), _int(d / "memory.usage_in_bytes")
        names = "memory.limit_in_bytes less memory.usage_in_bytes"
        cache = _field(d / "memory.stat", "total_inactive_file") or 0
    if limit is None or usage is None or limit >= UNLIMITED:
        return None
    return Free(max(0, limit - max(0, usage - cache)), f"cgroup {d}: {names}")


def host_free() -> Free | None:
    """Host memory free to this process: the smallest of ``MemAvailable`` and every cgroup level's room."""
    options = [f for f in map(_cgroup_free, cgroup_dirs()) if f is not None]
    available = _field(MEMINFO, "MemAvailable:")
    if available is not None:
        options.append(Free(available * 1024, "MemAvailable in /proc/meminfo"))
    return min(options, key=lambda f: f.bytes, default=None)


def oom_kills() -> int:
    """OOM kills so far: this cgroup's ``oom_kill`` count (v2 ``memory.events``, v1 ``memory.oom_control``) plus
    the kernel's (``/proc/vmstat``); a rise while a worker died by SIGKILL says the kernel killed it for memory."""
    total = _field(VMSTAT, "oom_kill") or 0
    for d in cgroup_dirs():
        total += _field(d / "memory.events", "oom_kill") or _field(d / "memory.oom_control", "oom_kill") or 0
        break  # the process's own level counts its kills (v2 counts its subtree's)
    return total


def record_test_oom_kill() -> None:
    """Test fault only (``oom-kill:SHAPE``): raise the ``oom_kill`` count of the :data:`CGROUP_ENV` directory, as
    the kernel does before it kills a process for memory."""
    d = Path(os.environ[CGROUP_ENV])
    count = _field(d / "memory.events", "oom_kill") or 0
    (d / "memory.events").write_text(f"oom {count + 1}\noom_kill {count + 1}\n")
