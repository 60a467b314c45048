"""Ceilings measured for real on the CPU, and stored into a real sweep result file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.measure.backends import resolve_device
from mfu_sweep.measure.checks.ceilings import CEILINGS_VERSION, add_to_result, measure_ceilings, summary_lines
from mfu_sweep.measure.timing import TimingConfig
from mfu_sweep.records.results import ResultError, load_sweeps, validate_file, write_json_atomic

FAST = TimingConfig(target_rel_ci=0.05, budget_s=0.1, min_samples=3, max_samples=10, warmup_s=0.0)


@pytest.fixture(scope="module")
def block() -> dict:
    return measure_ceilings(resolve_device("cpu"), ["fp32"], [64, 128], FAST)


@pytest.fixture()
def sweep_file(tmp_path: Path) -> Path:
    out = tmp_path / "cpu.json"
    res = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--shape", "64x64x64", "--isolate", "none",
                                    "--budget-s", "0.1", "--repeats", "1", "-o", str(out), "--quiet"])
    assert res.exit_code == 0, res.output
    return out


def test_block_is_complete_and_plausible(block: dict) -> None:
    assert block["ceilings_version"] == CEILINGS_VERSION
    bw = block["memory_bandwidth"]
    assert bw["bytes_per_call"] == 2 * bw["buffer_bytes"] and bw["buffer_bytes"] >= 64 * 2**20
    # a host memcpy on any machine this runs on: between 0.1 GB/s and 2 TB/s
    assert 0.1 < bw["gbs"] < 2000 and bw["samples_s"] and bw["timer"] == "host"
    g = block["gemm"]["fp32"]
    assert [t["shape"] for t in g["tried"]] == ["64x64x64", "128x128x128"]
    assert g["best_tflops"] > 0 and g["best_shape"] in {"64x64x64", "128x128x128"}
    assert g["best_tflops"] == max(t["tflops"] for t in g["tried"] if t["status"] == "ok")
    assert 0 < g["fraction_of_peak"] < 3  # estimated CPU peak; VMs may boost past it
    assert block["peak"]["estimated"] is True and block["device"]["backend"] == "cpu"
    json.dumps(block, allow_nan=False)
    assert any("copy bandwidth" in line for line in summary_lines(block))


def test_stored_into_result_file(block: dict, sweep_file: Path) -> None:
    add_to_result(sweep_file, block)
    assert validate_file(sweep_file) == []
    (sweep,) = load_sweeps([sweep_file])
    assert sweep.extra["ceilings"]["gemm"]["fp32"]["best_tflops"] == block["gemm"]["fp32"]["best_tflops"]
    assert len(sweep.records) == 1  # the records are untouched


def test_refuses_other_device_and_merged_files(block: dict, sweep_file: Path, tmp_path: Path) -> None:
    other = {**block, "device": {**block["device"], "name": "NVIDIA H100 80GB HBM3"}}
    with pytest.raises(ResultError, match="device.name"):
        add_to_result(sweep_file, other)
    add_to_result(sweep_file, other, force=True)
    data = json.loads(sweep_file.read_text())
    merged = tmp_path / "merged.json"
    write_json_atomic(merged, {"schema_version": 1, "kind": "merged", "sweeps": [data]})
    with pytest.raises(ResultError, match="merged"):
        add_to_result(merged, block)


def test_cli_ceilings_into_and_output(sweep_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "ceil.json"
    res = CliRunner().invoke(main, ["ceilings", "--device", "cpu", "--size", "64", "--budget-s", "0.05",
                                    "-o", str(out), "--into", str(sweep_file)])
    assert res.exit_code == 0, res.output
    assert "copy bandwidth:" in res.output and "gemm fp32:" in res.output
    assert json.loads(out.read_text())["ceilings_version"] == CEILINGS_VERSION
    assert "ceilings" in json.loads(sweep_file.read_text())


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_cli_ceilings_absent_device_is_one_line() -> None:
    res = CliRunner().invoke(main, ["ceilings", "--device", "cuda"])
    assert res.exit_code == 1 and res.output.count("\n") == 1 and res.output.startswith("Error:")
