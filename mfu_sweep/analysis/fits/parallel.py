"""Independent chunks of analysis work spread over the machine's cores, with progress.

Fitting a fleet is thousands of independent fits; :func:`map_chunks` cuts the items into chunks
and runs them in worker processes (``concurrent.futures``, forked where the platform can, so the
workers share the parent's loaded data instead of receiving a pickled copy), one chunk in the
calling process when there is only one. The results come back in order and equal those of one
process: every chunk is computed the same way wherever it runs. :func:`run_tasks` does the same
for a few unlike jobs (the report's figures and files).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from mfu_sweep.util.allocator import keep_freed_memory

K = TypeVar("K")
T = TypeVar("T")
Progress = Callable[[int, int], None]

# the job of the forked workers: set in the parent before the pool forks, read in the children
_JOB: tuple[Callable[[Sequence[Any]], list[Any]], Sequence[Any]] | None = None


def cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    """Whether workers can be forked (they then share this process's data; elsewhere they are spawned)."""
    return "fork" in multiprocessing.get_all_start_methods()


def _start_worker() -> None:
    """A worker's start: Ctrl-C is the parent's to handle (it ends the workers, :func:`_end_workers`); a worker
    that took it too would die or block mid-task, and the parent could wait on it forever."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    keep_freed_memory()


def _end_workers(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` now: its queued chunks cancelled, its running workers terminated (after an error or Ctrl-C
    in the parent, whose ``with`` would otherwise wait for every running chunk to finish)."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in processes:
        if proc.is_alive():
            proc.terminate()
    for proc in processes:
        proc.join(timeout=5)


def _run_chunk(start: int, stop: int) -> list[Any]:
    assert _JOB is not None, "worker started without a job"
    fn, items = _JOB
    return fn(items[start:stop])


def map_chunks(fn: Callable[[Sequence[K]], list[T]], items: Sequence[K], chunk: int, *,
               workers: int | None = None, progress: Progress | None = None,
               meanwhile: Callable[[], object] | None = None) -> list[T]:
    """``fn`` over ``items`` in chunks of ``chunk``, concatenated in order.

    Parameters
    ----------
    fn:
        Takes a chunk of items, returns one result per item. Must be a module-level function when
        the platform cannot fork (it is then pickled to the workers).
    items, chunk:
        The work and how many items one call of ``fn`` gets.
    workers:
        Processes to use (default: the cores of this process); 1, or a single chunk, runs here.
    progress:
        ``progress(done, total)`` after every finished chunk, in the calling process.
    meanwhile:
        Independent work for this process while the workers run (called once, after they have started;
        its result is discarded, so it keeps what it computes itself). With one worker it runs first.
    """
    bounds = [(a, min(a + chunk, len(items))) for a in range(0, len(items), max(chunk, 1))]
    workers = min(workers or cores(), len(bounds))
    out: list[T] = []
    if workers <= 1:
        if meanwhile is not None:
            meanwhile()
        for a, b in bounds:
            out += fn(items[a:b])
            if progress is not None:
                progress(b, len(items))
        return out
    global _JOB
    fork = can_fork()
    _JOB = (fn, items)
    if fork:
        gc.freeze()  # a worker's collections then skip the parent's objects instead of copying every page
    try:
        context = multiprocessing.get_context("fork" if fork else None)
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker) as pool:
            try:
                futures = [pool.submit(_run_chunk, a, b) if fork else pool.submit(fn, items[a:b]) for a, b in bounds]
                if meanwhile is not None:
                    meanwhile()
                for (_, b), future in zip(bounds, futures, strict=True):
                    out += future.result()
                    if progress is not None:
                        progress(b, len(items))
            except BaseException:  # Ctrl-C or an error: the workers end now, not after the rest of the chunks
                _end_workers(pool)
                raise
    finally:
        _JOB = None
        if fork:
            gc.unfreeze()
    return out


def run_tasks(tasks: Sequence[Callable[[], T]], *, workers: int | None = None,
              progress: Progress | None = None) -> list[T]:
    """Call every task (a function of no arguments) in worker processes; the results in order.

    The workers take the tasks in list order, so put the longest first. Tasks are usually closures over
    this process's data, which only forked workers share: where the platform cannot fork, they run here
    one after another. ``progress(done, total)`` as in :func:`map_chunks`, one task per chunk.
    """
    return map_chunks(_call_each, tasks, 1, workers=workers if can_fork() else 1, progress=progress)


def _call_each(tasks: Sequence[Callable[[], T]]) -> list[T]:
    return [task() for task in tasks]
