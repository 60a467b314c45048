"""The clock the CPU cores actually run at under load, measured with a dependent chain of adds.

VMs report the base clock in /proc/cpuinfo (2.6 GHz on this project's Zen 5 VMs)
while the cores boost higher, so a peak estimated from the reported clock is
too low and GEMMs land above 100% MFU. No well-kept package measures the
running clock (psutil and py-cpuinfo read the same nominal cpufreq/cpuinfo
values), so this module times a tiny x86-64 machine-code loop through
ctypes: 200 ``add rax, rdx`` that each depend on the one before, then
``dec rcx; jnz`` back.

What the method assumes (x86-64 only; anything else reports "not available"):

* A register-register ``add`` has a latency of exactly one cycle (every x86-64
  core since the P6 and K7; Agner Fog's instruction tables, "ADD r,r": latency 1),
  so one iteration costs 200 cycles; the loop counter runs on another port in
  parallel, and ``rdx`` (not an immediate) keeps renamers that fold
  ``add reg, imm`` from shortening the chain.
* The chain runs on one thread per core used, all at once, so the cores are
  loaded as during a GEMM; time is each thread's own CPU time, so a thread
  descheduled by a neighbour does not lower the reading.
* A scalar chain is not an AVX-512 FMA load: a core that lowers its clock for
  wide vector work runs GEMMs slower than this, so a peak from this clock is
  an upper bound (MFU against it is conservative).
"""

from __future__ import annotations

import ctypes
import mmap
import platform
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ADDS_PER_ITER = 200
# mov rcx, rdi; mov edx, 1; xor eax, eax
_PROLOGUE = bytes.fromhex("4889f9" "ba01000000" "31c0")
_ADD = bytes.fromhex("4801d0")  # add rax, rdx
_DEC = bytes.fromhex("48ffc9")  # dec rcx
_RET = bytes.fromhex("c3")
METHOD = (f"dependent chain of {ADDS_PER_ITER} x86-64 'add rax, rdx' (latency 1 cycle each) per loop iteration, "
          "one thread per core used, timed by thread CPU time")


def chain_code() -> bytes:
    """Machine code of ``uint64 chain(uint64 n)``: n iterations of the add chain (System V ABI)."""
    body = _ADD * ADDS_PER_ITER + _DEC
    jnz = bytes.fromhex("0f85") + (-(len(body) + 6)).to_bytes(4, "little", signed=True)
    return _PROLOGUE + body + jnz + _RET


@dataclass(frozen=True)
class ClockReading:
    """The measured clock in GHz, per round, or why there is none."""

    ghz: float | None
    rounds_ghz: tuple[float, ...] = ()
    threads: int = 0
    error: str | None = None
    method: str = METHOD
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method, "measured_ghz": self.ghz,
                               "rounds_ghz": [round(g, 4) for g in self.rounds_ghz], "threads": self.threads}
        if self.error:
            out["error"] = self.error
        return {**out, **self.extra}


class _Chain:
    """The chain loaded into executable memory (kept alive as long as the function is used)."""

    def __init__(self) -> None:
        code = chain_code()
        self.buf = mmap.mmap(-1, mmap.PAGESIZE * (len(code) // mmap.PAGESIZE + 1),
                             prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        self.buf.write(code)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self.buf))
        self.fn = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(address)

    def __call__(self, n: int) -> int:
        return int(self.fn(n))


def _time_threads(chain: Callable[[int], int], iters: int, threads: int) -> list[float]:
    """CPU seconds each of ``threads`` threads took for ``iters`` iterations, run at the same time."""
    out = [0.0] * threads
    barrier = threading.Barrier(threads)

    def work(i: int) -> None:
        barrier.wait()
        t0 = time.thread_time()
        chain(iters)  # ctypes releases the GIL for the call
        out[i] = time.thread_time() - t0

    pool = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return out


def measure_clock(threads: int, rounds: int = 3, round_s: float = 0.15,
                  chain: Callable[[int], int] | None = None) -> ClockReading:
    """The sustained clock with ``threads`` cores loaded: max over ``rounds`` of the median over threads.

    Interference (steal, a shared core) only ever lowers a round, so the best
    round is the estimate. Never raises: a failing probe gives ``ghz=None`` and
    the reason.
    """
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return ClockReading(None, threads=threads, error=f"not available on {platform.machine()} (x86-64 only)")
    try:
        chain = chain or _Chain()
        chain(1000)
        t = max(_time_threads(chain, 20_000, 1)[0], 1e-6)
        iters = max(10_000, int(20_000 * round_s / t))
        got = []
        for _ in range(rounds):
            secs = _time_threads(chain, iters, max(1, threads))
            got.append(statistics.median(iters * ADDS_PER_ITER / max(s, 1e-9) / 1e9 for s in secs))
    except (OSError, ValueError, TypeError, AttributeError, RuntimeError) as exc:
        return ClockReading(None, threads=threads, error=f"clock probe failed: {type(exc).__name__}: {exc}"[:200])
    return ClockReading(max(got), tuple(got), threads=threads)
