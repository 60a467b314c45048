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
