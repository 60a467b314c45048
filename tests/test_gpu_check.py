"""The prepared GPU check (benchmarks/gpu_check.sh): its --plan, its judge of a step, and a CPU dry run.

A lent GPU gives the check one call of at most 10 minutes and hands back at most 8 files, on a machine that
starts bare: every step must work before it gets there. ``--plan`` is checked against those limits (a budget
of at most 450 s, so a second try fits; at most 8 files). The dry run runs every step on the CPU at a tiny size
and budget (what each step measures does not matter here, that it measures, writes, validates and is judged
does). On a shared 2-core VM two timers of a tiny CPU GEMM can differ 5x and more, past selftest's largest
``--rel-tol``: a ``vs torch Timer`` FAIL is therefore accepted, and then only as the selftest step's failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from mfu_sweep.records.results import load_sweeps, validate_file

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from gpu_check_eval import judge, summary  # noqa: E402

NEEDS_BASH = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="needs bash and timeout")
# A decoder small enough for the CPU dry run (eager + compile cold and warm in seconds, not minutes).
TINY_STEP_MODEL = "llm:llama-3-8b:hidden=64:ffn=128:layers=1:heads=2:kv_heads=1:vocab=256:seq=16:tokens=16"
STEPS = ["environment", "detect", "selftest", "sweep-short", "layouts", "fp8", "scaled-mx", "moe-grouped",
         "throttle", "profiler-timer", "step", "sweep-bf16", "ceilings", "sweep-more-dtypes", "cache-policy",
         "validate"]


@NEEDS_BASH
def test_plan_fits_one_call_of_a_lent_gpu() -> None:
    done = subprocess.run(["bash", "benchmarks/gpu_check.sh", "--plan"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:1 + len(STEPS)]] == STEPS  # cheap checks first, long sweeps last
    budgets = [int(line.split()[1].rstrip("s")) for line in lines[1:1 + len(STEPS)]]
    total = int(re.search(r"^total budget: (\d+) s$", done.stdout, re.M).group(1))
    files = int(re.search(r"^files: (\d+)$", done.stdout, re.M).group(1))
    assert total == sum(budgets) <= 450 and files <= 8


def test_a_sweep_step_is_judged_by_its_records(tmp_path: Path) -> None:
    assert judge(tmp_path / "missing.json") == (1, "missing.json: no file")
    (tmp_path / "broken.json").write_text("{")
    assert judge(tmp_path / "broken.json")[0] == 1
    ok = next(p for p in sorted((ROOT / "sweeps").glob("*.json")) if judge(p)[0] == 0)
    assert "ok=" in judge(ok)[1]
    steps = tmp_path / "steps.tsv"
    steps.write_text("detect\tpassed\t0\t3\t20\t\nfp8\tskipped\t\t0\t25\tnot run here: fp8 needs sm_89\n"
                     "layouts\tfailed\t1\t30\t30\terror=4\n")
    doc, failed = summary(steps, tmp_path)
    assert failed == ["layouts"] and doc["skipped"] == {"fp8": "not run here: fp8 needs sm_89"}
    assert [s["status"] for s in doc["steps"]] == ["passed", "skipped", "failed"]


@pytest.mark.slow
@NEEDS_BASH
def test_gpu_check_dry_run_on_cpu(tmp_path: Path) -> None:
    env = {**os.environ, "DEVICE": "cpu", "SCALE": "4", "BUDGET_S": "0.05", "SOAK": "0.1", "SHORT_MAX_FLOP": "1e6",
           "MAX_FLOP": "5e6", "SHAPES": "--shape 64x64x64", "THROTTLE_SHAPES": "--shape 64x64x64",
           "MOE_ARGS": "--shape 96x32x64:nt:m=32,48,16 --shape 32x64x96:tn:k=32,48,16", "DTYPES_MORE": "--dtype fp16",
           "CEILING_SIZES": "256", "CACHE_SIZES": "64", "PROFILER_SIZE": "128", "PROFILER_PAIRS": "1",
           "SELFTEST_TOL": "10", "STEP_MODEL": TINY_STEP_MODEL, "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(["bash", "benchmarks/gpu_check.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=1900)
    log = done.stdout + done.stderr
    why = "\n".join(line for line in log.splitlines() if line.startswith("===")) + "\n" + log[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.txt", "results.tar.gz", "summary.json"], why
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert [s["step"] for s in doc["steps"]] == STEPS, why
    work = tmp_path / "work"
    with tarfile.open(tmp_path / "results.tar.gz") as tar:
        tar.extractall(work, filter="data")
    table = (work / "selftest.txt").read_text()
    timer_fails = [line for line in table.splitlines() if " FAIL " in line]
    assert all(line.startswith("vs torch Timer") for line in timer_fails), why  # load slows a timer, nothing else
    assert doc["failed"] == (["selftest"] if timer_fails else []), why
    assert done.returncode == int(bool(timer_fails)), why
    assert set(doc["skipped"]) <= {"scaled-mx", "throttle", "step"}, why
    assert "not run here" in doc["skipped"]["scaled-mx"] and "NVML" in doc["skipped"]["throttle"], why
    assert "numerics fp8 256x256x256:nt" in table and "PASS" in table.split("numerics fp8 ")[1].splitlines()[0]
    for name in ("short", "layouts", "fp8", "moe", "sweep", "dtypes"):
        assert validate_file(work / f"{name}.json") == [], name
        assert set(doc["record_statuses"][f"{name}.json"]) == {"ok"}, (name, doc["record_statuses"])
    [fp8] = load_sweeps([work / "fp8.json"])
    assert {r.dtype for r in fp8.records} == {"fp8", "fp8-rowwise"} and all(r.extra["fast_accum"] for r in fp8.records)
    [short] = load_sweeps([work / "short.json"])
    assert "soak" in short.environment  # the one soak of the check
    [long] = load_sweeps([work / "sweep.json"])
    assert "soak" not in long.environment and json.loads((work / "sweep.json").read_text())["ceilings"]
    assert {r.shape.layout for r in load_sweeps([work / "layouts.json"])[0].records} == {"nn", "nt", "tn", "tt"}
    assert "median profiler/default" in (work / "profiler_timer.txt").read_text()
    assert "flush/rotate" in (work / "cache_policy.txt").read_text()
    assert re.search(r"^fp8\.json ok=\d+$", log, re.M), why  # validate's per-file record statuses
