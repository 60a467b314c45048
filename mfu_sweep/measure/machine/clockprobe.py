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

Beside the clock it measures the FMA-throughput ceiling per dtype the CPU
reports a unit for (:data:`KERNELS`): 12 independent accumulators (more than
FMA latency x pipes on every x86 core: 4-5 cycles x 2 pipes) of
``vfmadd231ps`` (fp32; 2 FLOP per lane) or ``vdpbf16ps`` (bf16 pairs; 4 FLOP per
fp32 lane), operands zeroed so no denormal path is taken. GFLOP/s per core over
the measured clock is FLOP/cycle; the ceiling is what no GEMM can beat.
Probes run in a child process (:func:`probe_machine`), so an instruction the
CPU refuses (SIGILL) or a denied executable mapping ends as a reason in the
record, never in the sweep.
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


# name: (cpuinfo flags needed, dtype, FLOP per loop iteration, machine code of ``void f(uint64 n)``).
# Assembled from: mov rcx, rdi; zero ymm/zmm0-13; loop: 12 x <op> {y,z}mm<i>, {y,z}mm12, {y,z}mm13;
# dec rcx; jnz loop; vzeroupper; ret.
_ZERO_Y = "c4411c57e4c4411457edc5fc57c0c5f457c9c5ec57d2c5e457dbc5dc57e4c5d457edc5cc57f6c5c457ffc4413c57c0c4413457c9" \
          "c4412c57d2c4412457db"
_ZERO_Z = "62511d48efe462511548efed62f17d48efc062f17548efc962f16d48efd262f16548efdb62f15d48efe462f15548efed" \
          "62f14d48eff662f14548efff62513d48efc062513548efc962512d48efd262512548efdb"
_FMA_Y = "c4c21db8c5c4c21db8cdc4c21db8d5c4c21db8ddc4c21db8e5c4c21db8edc4c21db8f5c4c21db8fdc4421db8c5c4421db8cd" \
         "c4421db8d5c4421db8dd"
_FMA_Z = "62d21d48b8c562d21d48b8cd62d21d48b8d562d21d48b8dd62d21d48b8e562d21d48b8ed62d21d48b8f562d21d48b8fd" \
         "62521d48b8c562521d48b8cd62521d48b8d562521d48b8dd"
_DP_Z = "62d21e4852c562d21e4852cd62d21e4852d562d21e4852dd62d21e4852e562d21e4852ed62d21e4852f562d21e4852fd" \
        "62521e4852c562521e4852cd62521e4852d562521e4852dd"
KERNELS: dict[str, tuple[tuple[str, ...], str, int, str]] = {
    "vfmadd231ps-ymm": (("avx2", "fma"), "fp32", 12 * 8 * 2, f"4889f9{_ZERO_Y}{_FMA_Y}48ffc975bfc5f877c3"),
    "vfmadd231ps-zmm": (("avx512f",), "fp32", 12 * 16 * 2, f"4889f9{_ZERO_Z}{_FMA_Z}48ffc975b3c5f877c3"),
    "vdpbf16ps-zmm": (("avx512f", "avx512_bf16"), "bf16", 12 * 16 * 4, f"4889f9{_ZERO_Z}{_DP_Z}48ffc975b3c5f877c3"),
}


class _Code:
    """Machine code in executable memory, callable as ``uint64 f(uint64 n)`` (kept alive with the object)."""

    def __init__(self, code: bytes) -> None:
        self.buf = mmap.mmap(-1, mmap.PAGESIZE * (len(code) // mmap.PAGESIZE + 1),
                             prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        self.buf.write(code)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self.buf))
        self.fn = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(address)

    def __call__(self, n: int) -> int:
        return int(self.fn(n))


class _Chain(_Code):
    """The add chain (:func:`chain_code`)."""

    def __init__(self) -> None:
        super().__init__(chain_code())


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


def _rate(fn: Callable[[int], int], work_per_iter: float, threads: int, rounds: int, round_s: float) -> list[float]:
    """Work per CPU-second per thread (median over threads), for each round, all threads at once."""
    fn(1000)
    t = max(_time_threads(fn, 20_000, 1)[0], 1e-6)
    iters = max(10_000, int(20_000 * round_s / t))
    return [statistics.median(iters * work_per_iter / max(s, 1e-9) for s in _time_threads(fn, iters, threads))
            for _ in range(rounds)]


def measure_fma(threads: int, flags: frozenset[str], clock_ghz: float | None, rounds: int = 3,
                round_s: float = 0.15) -> dict[str, Any]:
    """Per kernel the CPU has flags for: GFLOP/s per core (best round), FLOP/cycle at ``clock_ghz``, dtype."""
    out: dict[str, Any] = {}
    for name, (needs, dtype, flop, code) in KERNELS.items():
        if not all(f in flags for f in needs):
            continue
        per_core = max(_rate(_Code(bytes.fromhex(code)), flop, max(1, threads), rounds, round_s)) / 1e9
        out[name] = {"dtype": dtype, "gflops_per_core": round(per_core, 3), "threads": threads,
                     "flop_per_cycle": round(per_core / clock_ghz, 2) if clock_ghz else None}
    return out


def fma_ceilings(fma: dict[str, Any], cores: int) -> dict[str, float]:
    """Per dtype, the best measured FMA-throughput ceiling in TFLOP/s over ``cores`` physical cores."""
    best: dict[str, float] = {}
    for row in fma.values():
        tf = row["gflops_per_core"] * cores / 1e3
        best[row["dtype"]] = max(best.get(row["dtype"], 0.0), tf)
    return best


def probe_machine(threads: int, timeout_s: float = 60.0) -> dict[str, Any]:
    """Clock and FMA ceilings measured in a child process: ``{"clock": ..., "fma": ...}`` or ``{"error": ...}``."""
    import json
    import subprocess
    import sys

    try:
        out = subprocess.run([sys.executable, "-m", "mfu_sweep.measure.machine.clockprobe", str(threads)],
                             capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"probe process: {type(exc).__name__}: {exc}"[:200]}
    if out.returncode != 0:
        how = f"signal {-out.returncode}" if out.returncode < 0 else f"exit code {out.returncode}"
        return {"error": f"probe process died ({how}): {out.stderr.strip()[-200:]}"}
    try:
        return json.loads(out.stdout)
    except ValueError:
        return {"error": f"probe process sent garbage: {out.stdout[:100]!r}"}


def _main(argv: list[str]) -> None:
    import json

    from mfu_sweep.specs.cpu import load_cpuinfo

    threads = int(argv[0]) if argv else 1
    clock = measure_clock(threads, rounds=3, round_s=0.06)
    try:
        fma = measure_fma(threads, load_cpuinfo().flags, clock.ghz, rounds=3, round_s=0.06) \
            if clock.error is None else {}
    except (OSError, ValueError, TypeError, AttributeError, RuntimeError) as exc:
        fma = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    print(json.dumps({"clock": clock.to_json(), "fma": fma}))


if __name__ == "__main__":
    import sys

    _main(sys.argv[1:])
