"""glibc's malloc settings for the two kinds of process this tool runs (``mallopt``; a no-op without glibc).

glibc adapts two thresholds as a program runs: blocks at or above ``M_MMAP_THRESHOLD`` get mappings of
their own (fresh, zeroed pages: a page fault per 4 KiB on first touch), and free memory at the top of the
heap beyond ``M_TRIM_THRESHOLD`` goes back to the kernel (to be faulted in again when the heap regrows).
Both move whenever a large block is freed, so what an allocation costs depends on what came before it.

* A sweep's timing worker wants every operand placed the same way whatever shapes ran before:
  :func:`fixed_allocation` holds the mmap threshold at its initial value (docs/fidelity.md).
* An op that allocates memory on every timed call would, under that fixed threshold, fault in fresh pages
  for every block of 128 KiB or more: a cost a running program does not pay once glibc has adapted. Such
  ops are common: ``torch.compile``'s GEMM and the block-scaled formats allocate their result (compiled
  ``768x4096x32:tn`` in fp32 took twice eager's time on the 2-core Zen 4 VM), and torch hands oneDNN's bf16
  GEMM on a CPU a scratchpad it allocates on every call, ``out=`` or not (``attr-scratchpad:user`` under
  ``ONEDNN_VERBOSE=1``): 34 page faults per call at 256^3 and 258 at 1024^3 on a 2-core Intel AMX VM, the
  1.6-1.8x of 256^3 bf16 against torch's Timer in docs/fidelity.md. Every timed op therefore
  runs under :func:`reused_allocations`, which lets it reuse what it frees while it is timed, then fixes the
  threshold again (the operands were placed before, under the fixed rule).
* Analysis workers (fits, figures) allocate and free numpy temporaries of 0.1-10 MiB thousands of times a
  second: :func:`keep_freed_memory` keeps freed memory in the heap for reuse. Fitting 4,096 series of 40
  shapes on 2 cores spent 11.7 of 61 CPU seconds in the kernel faulting pages in and out; with it, 0.6.

Python's own collector has the same habit at scale: every so many new objects it walks all that live, so
making a million (a 200,000-record file's records, a million-row shape file's shapes, a pod's digests)
costs time quadratic in their number; :func:`paused_gc` holds it off while they are made.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from collections.abc import Iterator
from contextlib import contextmanager

M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
INITIAL_MMAP_THRESHOLD = 128 * 1024  # glibc's default
INITIAL_TRIM_THRESHOLD = 128 * 1024  # glibc's default
ANALYSIS_MMAP_THRESHOLD = 32 * 1024 * 1024  # the most glibc's own adaptation would reach
ANALYSIS_TRIM_THRESHOLD = 256 * 1024 * 1024  # freed memory a worker keeps before it returns any
_FIXED = False  # whether fixed_allocation() took effect in this process


def _mallopt(*settings: tuple[int, int]) -> bool:
    """Apply ``(parameter, value)`` settings; False where there is no glibc or one is refused."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return bool(libc) and all(libc.mallopt(param, value) for param, value in settings)  # type: ignore[union-attr]
    except (OSError, AttributeError):
        return False


def fixed_allocation() -> dict[str, int]:
    """Hold glibc's mmap threshold fixed, so every operand of 128 KiB or more gets fresh pages of its own.

    glibc raises the threshold each time a large block is freed (up to 32 MiB). Then a shape's operands come
    from the reused heap or from new mappings depending on which larger shapes ran before it in the same
    worker: on the 2-core Zen 4 VM a 1024^3 fp32 GEMM ran ~9% slower after 2048^3 operands had been freed
    (docs/fidelity.md). Fixed, the placement no longer depends on the order of the shapes. Returns
    ``{"malloc_mmap_threshold": bytes}`` for the environment block, or ``{}`` where there is no glibc.
    """
    global _FIXED
    ok = _mallopt((M_MMAP_THRESHOLD, INITIAL_MMAP_THRESHOLD))
    _FIXED = _FIXED or ok
    return {"malloc_mmap_threshold": INITIAL_MMAP_THRESHOLD} if ok else {}


def keep_freed_memory() -> bool:
    """Let this process reuse the memory it frees instead of returning it to the kernel (analysis work).

    Blocks under 32 MiB come from the heap, and up to 256 MiB of freed heap is kept. Peak memory does not
    grow (freed blocks are reused, not added to); the page faults of re-mapping them are gone. Returns
    whether glibc took the settings.
    """
    return _mallopt((M_MMAP_THRESHOLD, ANALYSIS_MMAP_THRESHOLD), (M_TRIM_THRESHOLD, ANALYSIS_TRIM_THRESHOLD))


@contextmanager
def reused_allocations(active: bool = True) -> Iterator[bool]:
    """While an op is timed: what it allocates per call (a result, a library's scratch) reuses freed blocks (as
    after glibc's own adaptation) instead of fresh mappings each call; on exit, the fixed rule of
    :func:`fixed_allocation`.

    Yields whether the settings were taken: False without glibc, when not ``active``, or in a process whose
    threshold was never fixed (glibc adapts there on its own; an in-process sweep).
    """
    ok = active and _FIXED and keep_freed_memory()
    try:
        yield ok
    finally:
        if ok:
            _mallopt((M_MMAP_THRESHOLD, INITIAL_MMAP_THRESHOLD), (M_TRIM_THRESHOLD, INITIAL_TRIM_THRESHOLD))


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off while many long-lived objects are made (none of them in a cycle: each
    collection walked them all, a cost that grows faster than their number), and on again after, as it was."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
