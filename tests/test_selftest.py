"""The self-test, run for real on the CPU (seconds), and its verdict logic."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.measure.backends import resolve_device
from mfu_sweep.measure.checks.selftest import Check, format_table, ratio_check, run_selftest


@pytest.fixture(scope="module")
def checks() -> list[Check]:
    return run_selftest(resolve_device("cpu"), rel_tol=0.2, dtypes=["fp32", "bf16"])


def test_cpu_selftest_checks(checks: list[Check]) -> None:
    by_name = {c.name: c for c in checks}
    assert by_name["spec lookup"].status == "pass" and "estimated" in by_name["spec lookup"].value
    assert by_name["numerics fp32 256x256x256"].status == "pass"
    assert by_name["numerics bf16 256x256x256"].status == "pass"
    timing = [c for c in checks if c.name.startswith("vs torch Timer")]
    assert len(timing) == 2
    for c in timing:
        # the verdict depends on the load of a shared 2-core machine; the comparison itself must have run
        assert c.status in ("pass", "fail") and float(c.value.split()[0]) > 0 and "thread" in c.detail
    skipped = [c for c in checks if c.status == "skip"]
    assert {c.name.split()[0] for c in skipped} == {"vs", "graph"}  # do_bench and graphs need CUDA
    assert all(c.detail for c in skipped)


def test_ratio_check_bounds() -> None:
    assert ratio_check("x", 1.1e-3, 1e-3, 0.2).status == "pass"
    assert ratio_check("x", 1.3e-3, 1e-3, 0.2).status == "fail"
    assert ratio_check("x", 0.7e-3, 1e-3, 0.2).status == "fail"
    with pytest.raises(ValueError, match="status"):
        Check("x", "maybe")


def test_format_table(checks: list[Check]) -> None:
    table = format_table(checks)
    lines = table.splitlines()
    assert lines[0].split()[:2] == ["check", "result"] and len(lines) == len(checks) + 1
    assert any("PASS" in ln for ln in lines) and any("SKIP" in ln for ln in lines)


def test_cli_selftest_fails_on_impossible_tolerance() -> None:
    res = CliRunner().invoke(main, ["selftest", "--device", "cpu", "--dtype", "fp32", "--rel-tol", "1e-9"])
    assert res.exit_code == 1, res.output
    assert "checks failed" in res.output and "vs torch Timer" in res.output.splitlines()[-1]


def test_cli_selftest_json() -> None:
    res = CliRunner().invoke(main, ["selftest", "--device", "cpu", "--dtype", "fp32", "--rel-tol", "10", "--json"])
    data = json.loads(res.output[: res.output.rindex("}") + 1])
    assert data["device"]["backend"] == "cpu"
    assert {c["status"] for c in data["checks"]} <= {"pass", "fail", "skip"}
    assert res.exit_code == (1 if any(c["status"] == "fail" for c in data["checks"]) else 0)
