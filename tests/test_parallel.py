"""run_tasks: unlike jobs (closures over this process's data) in forked workers, results in order."""

from __future__ import annotations

import os
from functools import partial

import pytest

from mfu_sweep.analysis.fits.parallel import can_fork, run_tasks

DATA = {"big": list(range(1000))}  # what a forked worker reads without receiving a copy


def _task(i: int) -> tuple[int, int]:
    return i, sum(DATA["big"]) + i


@pytest.mark.parametrize("workers", [1, 2])
def test_results_in_order_with_progress(workers: int) -> None:
    seen: list[tuple[int, int]] = []
    tasks = [partial(_task, i) for i in range(5)]
    assert run_tasks(tasks, workers=workers, progress=lambda d, t: seen.append((d, t))) == \
        [(i, 499500 + i) for i in range(5)]
    assert seen == [(i, 5) for i in range(1, 6)]


@pytest.mark.skipif(not can_fork(), reason="closures run in this process where workers cannot be forked")
def test_closures_run_in_forked_workers() -> None:
    here = os.getpid()
    pids = run_tasks([lambda: os.getpid(), lambda: os.getpid()], workers=2)  # closures: not picklable
    assert here not in pids


def test_worker_error_reaches_the_caller() -> None:
    def fail() -> None:
        raise OSError(28, "No space left on device", "/x/analysis.json")

    with pytest.raises(OSError, match="No space left") as info:
        run_tasks([lambda: 1, fail], workers=2)
    assert info.value.filename == "/x/analysis.json"


def _slow_chunk(items):
    import time

    time.sleep(0.5)  # long beside a fork and one call: the parent's work comes before any chunk ends
    return [(i, os.getpid(), time.monotonic()) for i in items]


@pytest.mark.parametrize("workers", [1, 2])
def test_meanwhile_runs_once_here_while_the_workers_work(workers: int) -> None:
    import time

    from mfu_sweep.analysis.fits.parallel import map_chunks

    calls: list[tuple[int, float]] = []
    out = map_chunks(_slow_chunk, list(range(4)), 2, workers=workers,
                     meanwhile=lambda: calls.append((os.getpid(), time.monotonic())))
    assert [i for i, _, _ in out] == [0, 1, 2, 3]
    assert len(calls) == 1 and calls[0][0] == os.getpid()
    if workers == 2 and can_fork():
        # the chunks ran in workers, and the parent's work did not wait for them to end
        assert os.getpid() not in {pid for _, pid, _ in out}
        assert calls[0][1] < max(t for _, _, t in out)


def test_an_error_meanwhile_stops_the_fits_and_reaches_the_caller() -> None:
    from mfu_sweep.analysis.fits.parallel import map_chunks

    def fail() -> None:
        raise ValueError("no series labelled 'nope'")

    with pytest.raises(ValueError, match="nope"):
        map_chunks(_slow_chunk, list(range(8)), 1, workers=2, meanwhile=fail)
