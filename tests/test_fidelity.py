"""Timing fidelity mechanisms (docs/fidelity.md): nothing the worker's allocator does is paid per timed call.

The sweep's worker holds glibc's mmap threshold fixed so that operands are placed alike whatever ran before;
under that rule a buffer that a timed op allocates on every call (oneDNN's bf16 scratchpad, which torch
allocates per call; a compiled GEMM's result) would be faulted in afresh on every call: 34 page faults per
call at 256^3 bf16 made the worker 1.6-1.8x torch's Timer. Page faults are counted, not timed, so these
tests hold on a loaded machine.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.records.results import load_sweeps

MECHANISM = """
import json, resource, torch
from mfu_sweep.util import allocator
allocator.fixed_allocation()  # what the sweep's worker does first
torch.set_num_threads(2)
a, b = torch.randn(256, 256).bfloat16(), torch.randn(256, 256).bfloat16()
c = torch.zeros(256, 256, dtype=torch.bfloat16)
def faults(calls=100):
    for _ in range(5):
        torch.mm(a, b, out=c)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        torch.mm(a, b, out=c)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls
fixed = faults()
with allocator.reused_allocations() as ok:
    reused = faults()
print(json.dumps({"fixed": fixed, "reused": reused, "ok": ok}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt, getrusage's fault count")
def test_timed_calls_reuse_what_they_allocate_under_the_workers_fixed_threshold():
    got = json.loads(subprocess.run([sys.executable, "-c", MECHANISM], capture_output=True, text=True,
                                    check=True).stdout)
    assert got["ok"] and got["reused"] < 1, got
    # the cause, where this torch build allocates per call (oneDNN's scratchpad); a build that does not is not
    # at risk, and the sweep test below holds either way
    assert got["fixed"] == 0 or got["fixed"] > got["reused"], got


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="getrusage's fault count")
def test_a_sweeps_worker_faults_no_page_per_timed_call(tmp_path: Path) -> None:
    """A real sweep in its worker process (the default isolation), timing one hot operand set as torch's Timer
    does (--cache none): no page fault per call at 256^3 in bf16 (34 before the fix) or fp32."""
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--budget-s", "0.05", "--max-samples", "10",
                                    "--quiet", "--repeats", "1", "--cache", "none", "--shape", "256x256x256",
                                    "--dtype", "bf16", "--dtype", "fp32", "-o", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    (sweep,) = load_sweeps([out])
    assert sweep.environment.get("malloc_mmap_threshold")  # the worker's fixed rule was in force
    for r in sweep.records:
        assert r.status == "ok" and r.extra["page_faults_per_call"] < 1, r
