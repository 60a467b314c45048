"""Issue 47, item 3: memory before allocation.

A shape whose working set exceeds the memory free to the process is recorded ``oom`` with the need and
the free amount and never run; a worker the kernel's OOM killer takes is ``oom``, not ``error``. The
sweeps are real CPU sweeps; the cgroup is a directory of this test's (``MFU_SWEEP_CGROUP_DIR``), so the
limit and the kill counter are the test's, and nothing of the machine's is touched. No test allocates
the shapes it refuses: a 100000^3 fp32 GEMM needs 224 GiB.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from mfu_sweep.cli import main
from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shapes import parse_shape
from mfu_sweep.measure.machine import memory
from mfu_sweep.measure.machine.memory import CGROUP_ENV, host_free, oom_kills, working_set

HUGE = "100000x100000x100000"  # 2.4e11 bytes of working set in fp32: beyond any machine this suite runs on


def run(*args: str | Path) -> Result:
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in res.output, res.output
    return res


def cgroup(tmp_path: Path, limit: int | str, usage: int, cache: int = 0, kills: int = 0, v1: bool = False) -> Path:
    """A directory standing in for this process's cgroup: v2 file names, or v1's."""
    d = tmp_path / "cgroup"
    d.mkdir(exist_ok=True)
    if v1:
        (d / "memory.limit_in_bytes").write_text(f"{limit}\n")
        (d / "memory.usage_in_bytes").write_text(f"{usage}\n")
        (d / "memory.stat").write_text(f"cache 1\ntotal_inactive_file {cache}\n")
        (d / "memory.oom_control").write_text(f"oom_kill_disable 0\nunder_oom 0\noom_kill {kills}\n")
    else:
        (d / "memory.max").write_text(f"{limit}\n")
        (d / "memory.current").write_text(f"{usage}\n")
        (d / "memory.stat").write_text(f"anon 5\ninactive_file {cache}\nactive_file 7\n")
        (d / "memory.events").write_text(f"low 0\nhigh 0\nmax 0\noom 0\noom_kill {kills}\n")
    return d


def sweep(out: Path, *shapes: str, more: tuple[str, ...] = ()) -> tuple[Result, list[dict]]:
    args = ["sweep", "--device", "cpu", "--repeats", "1", "--budget-s", "0.05", "--max-samples", "5", "--quiet",
            *(a for s in shapes for a in ("--shape", s)), *more, "-o", out]
    res = run(*args)
    assert res.exit_code == 0, res.output
    return res, json.loads(out.read_text())["records"]


def by_shape(records: list[dict]) -> dict[str, dict]:
    return {str(parse_shape(f"{r['shape']['m']}x{r['shape']['n']}x{r['shape']['k']}")): r for r in records}


# -- the numbers --------------------------------------------------------------------------------------------

def test_the_working_set_counts_every_allocation() -> None:
    shape, fp32 = parse_shape("1024x2048x512"), get_dtype("fp32")
    one = working_set(shape, fp32, 1)
    a, b, c = 1024 * 512, 512 * 2048, 1024 * 2048
    assert one == 4 * (a + b + c) + 4 * max(a, b, c) + 8 * 512 * 2048  # operands, staging, float64 check
    assert working_set(shape, fp32, 3) - one == 2 * 4 * (a + b + c)  # each further operand set
    assert working_set(shape, fp32, 1, "compile") - one == 4 * c  # an output per call
    assert working_set(shape, fp32, 1, flush_bytes=10**6) - one == 10**6
    assert working_set(shape, get_dtype("mxfp8"), 1) > working_set(shape, get_dtype("fp8"), 1)  # float32 refs


@pytest.mark.parametrize("v1", [False, True])
def test_the_cgroup_room_is_its_limit_less_its_usage_less_droppable_cache(tmp_path: Path, v1: bool,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CGROUP_ENV, str(cgroup(tmp_path, 10 * 2**20, 9 * 2**20, cache=2**20, v1=v1)))
    free = host_free()
    assert free is not None and free.bytes == 2 * 2**20 and "cgroup" in free.source


def test_no_cgroup_limit_leaves_memavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CGROUP_ENV, str(cgroup(tmp_path, "max", 10**9)))
    free = host_free()
    assert free is not None and free.source == "MemAvailable in /proc/meminfo"
    monkeypatch.setenv(CGROUP_ENV, str(cgroup(tmp_path, 2**63 - 4096, 10**9, v1=True)))  # v1's "no limit"
    assert host_free().source == "MemAvailable in /proc/meminfo"  # type: ignore[union-attr]


def test_the_smaller_of_memavailable_and_the_cgroup_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CGROUP_ENV, str(cgroup(tmp_path, 2**62, 0)))  # more room than any machine's RAM
    assert host_free().source == "MemAvailable in /proc/meminfo"  # type: ignore[union-attr]


@pytest.mark.parametrize("v1", [False, True])
def test_oom_kills_reads_the_cgroup_counter(tmp_path: Path, v1: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CGROUP_ENV, str(cgroup(tmp_path, "max", 0, kills=0, v1=v1)))
    before = oom_kills()
    cgroup(tmp_path, "max", 0, kills=3, v1=v1)
    assert oom_kills() - before == 3


def test_the_walk_reaches_every_ancestor_up_to_the_mount(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mount = tmp_path / "fs"
    (mount / "job" / "step").mkdir(parents=True)
    (mount / "cgroup.controllers").write_text("memory\n")
    monkeypatch.setattr(memory, "CGROUP_ROOT", mount)
    monkeypatch.setattr(memory, "_read", lambda p: "0::/job/step\n" if str(p) == "/proc/self/cgroup" else
                        (p.read_text() if p.exists() else None))
    monkeypatch.delenv(CGROUP_ENV, raising=False)
    assert list(memory.cgroup_dirs()) == [mount / "job" / "step", mount / "job", mount]


# -- real sweeps ------------------------------------------------------------------------------------------

def test_a_shape_beyond_free_memory_is_oom_and_never_run(tmp_path: Path) -> None:
    res, records = sweep(tmp_path / "s.json", HUGE, "64x64x64")
    rec = by_shape(records)[HUGE]
    assert rec["status"] == "oom" and rec["samples_s"] == [] and rec["first_call_s"] is None
    assert rec["memory"]["need_bytes"] == working_set(parse_shape(HUGE), get_dtype("fp32"), 1)
    assert rec["memory"]["free_bytes"] < rec["memory"]["need_bytes"]
    assert "224 GiB" in rec["error"] or "223.5 GiB" in rec["error"]
    assert " is free (" in rec["error"] and "not run" in rec["error"]
    assert rec["worker_s"] < 5  # the worker answered without allocating: 224 GiB would take minutes or die
    assert by_shape(records)["64x64x64"]["status"] == "ok"
    assert "1 oom" in res.output and "0 error" in res.output
    assert run("validate", tmp_path / "s.json").exit_code == 0


def test_a_cgroup_limit_below_the_working_set_is_oom_with_both_numbers(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CGROUP_ENV, str(cgroup(tmp_path, 1000 * 2**20, 990 * 2**20)))  # 10 MiB of room
    _, records = sweep(tmp_path / "s.json", "1024x1024x1024", "64x64x64", more=("--isolate", "none"))
    rec = by_shape(records)["1024x1024x1024"]
    assert rec["status"] == "oom" and rec["memory"]["free_bytes"] == 10 * 2**20
    assert "10 MiB is free (cgroup" in rec["error"] and "memory.max less memory.current" in rec["error"]
    assert by_shape(records)["64x64x64"]["status"] == "ok"  # 3 MiB of operand sets: it fits, it runs


def test_a_worker_the_oom_killer_takes_is_oom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CGROUP_ENV, str(cgroup(tmp_path, "max", 0)))
    monkeypatch.setenv("MFU_SWEEP_TEST_FAULT", "oom-kill:128x128x128")
    res, records = sweep(tmp_path / "s.json", "128x128x128", "64x64x64")
    rec = by_shape(records)["128x128x128"]
    assert rec["status"] == "oom" and "SIGKILL by the kernel's OOM killer" in rec["error"]
    assert "1 oom" in res.output and "0 error" in res.output
    assert by_shape(records)["64x64x64"]["status"] == "ok"


def test_a_crash_without_an_oom_kill_stays_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that dies while the counter stands is no out-of-memory."""
    monkeypatch.setenv(CGROUP_ENV, str(cgroup(tmp_path, "max", 0)))
    monkeypatch.setenv("MFU_SWEEP_TEST_FAULT", "crash:128x128x128")  # SIGSEGV
    _, records = sweep(tmp_path / "s.json", "128x128x128")
    assert by_shape(records)["128x128x128"]["status"] == "error"
