"""Samples without limit: the median's interval for any count, and the commands that use it at 1,024 and 100,000.

``math.comb(n, k) / 2.0**n`` overflowed from n = 1,024 (``--max-samples`` accepts 100,000): the timing loop
crashed on a long shape and ``export`` on any record with that many samples and no stored interval.
"""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner
from synthetic import make_sweep_doc, write_sweep

from mfu_sweep.cli import main
from mfu_sweep.measure.timing import TimingConfig, host_block_timer, measure
from mfu_sweep.util.stats import SUMMED_MAX_N, median_ci, median_ci_indices


def exact_indices(n: int, confidence: float = 0.95) -> tuple[int, int]:
    """The definition in exact integer arithmetic: the largest k with P(X <= k) <= (1 - confidence) / 2."""
    bound = Fraction((1.0 - confidence) / 2) * 2**n
    cum, lower = 0, 0
    for k in range(n):
        cum += math.comb(n, k)
        if cum > bound:
            break
        lower = k
    lower = min(lower, (n - 1) // 2)
    return lower, n - 1 - lower


@pytest.mark.parametrize("n", [*range(1, 40), 100, 512, SUMMED_MAX_N, SUMMED_MAX_N + 1, 1025, 2048, 4096])
def test_indices_are_the_exact_binomial_quantile_on_both_sides_of_1024(n: int) -> None:
    assert median_ci_indices(n) == exact_indices(n)


def test_indices_at_100000_samples_bound_the_binomial_tail() -> None:
    from scipy.stats import binom

    n = 100_000
    lo, hi = median_ci_indices(n)
    assert hi == n - 1 - lo
    assert binom.cdf(lo, n, 0.5) <= 0.025 < binom.cdf(lo + 1, n, 0.5)
    assert abs(lo - (n / 2 - 1.959964 * math.sqrt(n) / 2)) < 2  # the normal approximation, within a rank
    assert median_ci_indices(n, 0.99)[0] < lo  # a wider interval at a higher confidence


def test_the_timing_loop_takes_more_than_1024_samples() -> None:
    """A fake clock (seeded noise, never within the CI target): the loop runs to --max-samples and keeps every
    sample; its interval is the order statistics of the exact quantile."""
    rng = random.Random(3)
    now = [0.0]

    def call() -> None:
        now[0] += 1e-3 * rng.lognormvariate(0.0, 0.2)

    cfg = TimingConfig(target_rel_ci=1e-9, budget_s=1e9, max_samples=1100, min_block_s=1e-3, warmup_s=0.0)
    m = measure(host_block_timer(call, clock_ns=lambda: int(now[0] * 1e9)), cfg, wall=lambda: now[0])
    assert len(m.samples_s) == 1100 and m.stop_reason == "max_samples"
    xs = sorted(m.samples_s)
    lo, hi = exact_indices(1100)
    assert m.ci_s == (xs[lo], xs[hi]) == median_ci(m.samples_s)


def _long_doc(tmp_path: Path) -> Path:
    """A SYNTHETIC sweep of two shapes, one record of 1,024 samples and one of 100,000, neither with a stored
    interval (as an nvbench sample sidecar import has)."""
    doc = make_sweep_doc("long", P_tflops=100, W_tbs=1.0, t0_s=5e-6, flops=[1e9, 1e10], n_samples=100_000, seed=1)
    doc["records"][0]["samples_s"] = doc["records"][0]["samples_s"][:1024]
    for rec in doc["records"]:
        rec["ci_low_s"] = rec["ci_high_s"] = None
    return write_sweep(tmp_path, doc)


def test_export_and_report_take_1024_and_100000_samples_per_shape(tmp_path: Path) -> None:
    """Both tables round each median to its interval, computed from the samples (none is stored)."""
    path = _long_doc(tmp_path)
    rows = {}
    for fmt in ("markdown", "latex"):
        res = CliRunner().invoke(main, ["export", str(path), "--format", fmt])
        assert res.exit_code == 0, res.output
        rows[fmt] = [line for line in res.output.splitlines() if "794x794x794" in line or "1710x1710x1710" in line]
    assert len(rows["markdown"]) == len(rows["latex"]) == 2
    assert all(line.count("±") == 3 for line in rows["markdown"]), rows  # time, TFLOP/s and MFU with intervals
    assert all(line.count(r"\pm") == 3 for line in rows["latex"]), rows
    res = CliRunner().invoke(main, ["report", str(path), "-o", str(tmp_path / "report")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "report" / "index.html").exists()


def test_a_real_sweep_takes_1024_samples_of_a_shape(tmp_path: Path) -> None:
    """A real CPU shape timed 1,024 times (blocks of ~2 ms: a few seconds), its interval the exact quantile's.

    One thread: two threads of one small GEMM wait for each other at every call, which on a machine busy
    with other work stretches each ~2 ms block to tens of ms (a 64 s test where 4 s do). In this process
    (``--isolate none``), so torch's thread count is put back afterwards for the tests that follow.
    """
    import torch

    out = tmp_path / "long.json"
    threads = torch.get_num_threads()
    try:
        res = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--isolate", "none", "--quiet", "--repeats",
                                        "1", "--threads", "1", "--shape", "64x64x64", "--min-samples", "1024",
                                        "--max-samples", "1024", "--target-ci", "1e-9", "--budget-s", "600",
                                        "--no-check", "-o", str(out)])
    finally:
        torch.set_num_threads(threads)
    assert res.exit_code == 0, res.output
    (rec,) = json.loads(out.read_text())["records"]
    assert len(rec["samples_s"]) == 1024 and rec["stop_reason"] == "max_samples"
    xs = sorted(rec["samples_s"])
    lo, hi = exact_indices(1024)
    assert (rec["ci_low_s"], rec["ci_high_s"]) == (xs[lo], xs[hi])
    res = CliRunner().invoke(main, ["export", str(out), "--format", "latex"])
    assert res.exit_code == 0 and "64" in res.output, res.output
