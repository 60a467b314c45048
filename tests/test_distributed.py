"""Scale-out: --shard pieces and real torchrun runs on the CPU with gloo."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.distributed import parse_shard, placement
from mfu_sweep.merge import merge_files
from mfu_sweep.results import ResultError

SHAPES = ["--shape", "64x64x64", "--shape", "96x96x96", "--shape", "128x128x128"]
FAST = ["--device", "cpu", "--budget-s", "0.05", "--max-samples", "8", "--quiet", "--isolate", "none"]


def test_parse_shard() -> None:
    assert parse_shard("1/4") == (1, 4)
    for bad in ("4/4", "1", "a/b", "-1/2", "1/0"):
        with pytest.raises(ValueError, match="--shard"):
            parse_shard(bad)


def test_placement_from_environment() -> None:
    env = {"WORLD_SIZE": "4", "RANK": "2", "LOCAL_RANK": "1"}
    rep = placement(None, None, env)
    assert rep.launcher and rep.distribute == "replicate" and rep.label_suffix == ".r2"
    assert rep.select(list(range(6))) == list(range(6))
    assert rep.device("cuda") == "cuda:1" and rep.device("cuda:3") == "cuda:3" and rep.device("cpu") == "cpu"
    sh = placement("shard", None, env)
    assert sh.select(list(range(10))) == [2, 6] and sh.label_suffix == ""
    with pytest.raises(ValueError, match="torchrun"):
        placement("shard", None, {})
    with pytest.raises(ValueError, match="--shard"):
        placement(None, "0/2", env)


def test_shards_merge_back_to_the_full_set(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    for i in range(3):
        res = CliRunner().invoke(main, ["sweep", *FAST, *SHAPES, "--shard", f"{i}/3", "-o", str(out)])
        assert res.exit_code == 0, res.output
    pieces = sorted(tmp_path.glob("s.shard*-of-3.json"))
    assert len(pieces) == 3
    merged = merge_files(pieces)
    shapes = sorted(r.shape.m for sw in merged.sweeps for r in sw.records)
    assert shapes == [64, 96, 128]
    with pytest.raises(ResultError, match="missing"):
        merge_files(pieces[:2])
    dup = tmp_path / "dup.json"
    doc = json.loads(pieces[0].read_text())
    doc["run"]["id"] = "another-run"
    dup.write_text(json.dumps(doc))
    with pytest.raises(ResultError, match="twice"):
        merge_files([*pieces, dup])


@pytest.mark.parametrize("mode", ["replicate", "shard"])
def test_torchrun_two_ranks_gloo(tmp_path: Path, mode: str) -> None:
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    assert torchrun, "torchrun ships with torch"
    out = tmp_path / "t.json"
    proc = subprocess.run([torchrun, "--nproc-per-node", "2", "--master-port", str(29500 + (mode == "shard")),
                           "-m", "mfu_sweep", "sweep", *FAST, *SHAPES, "--distribute", mode, "-o", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["kind"] == "merged" and len(doc["sweeps"]) == 2
    records = [r for sw in doc["sweeps"] for r in sw["records"]]
    assert {r["rank"] for r in records} == {0, 1}
    assert all("host" in r and "device_index" in r for r in records)
    got = sorted(r["shape"]["m"] for r in records)
    if mode == "replicate":
        assert got == [64, 64, 96, 96, 128, 128]
        assert sorted(sw["device"]["label"][-3:] for sw in doc["sweeps"]) == [".r0", ".r1"]
        res = CliRunner().invoke(main, ["compare", str(out), "--metric", "tflops", "--no-fit"])
        assert res.exit_code == 0, res.output
        assert "spread: " in res.output and "over 2 devices" in res.output
    else:
        assert got == [64, 96, 128]
    assert CliRunner().invoke(main, ["validate", str(out)]).exit_code == 0


def test_replicate_spread_names_the_slow_device(tmp_path: Path) -> None:
    """SYNTHETIC: rank 1 is 10% slower everywhere; the spread says so."""
    from synthetic import make_sweep_doc

    from mfu_sweep.results import parse_document
    from mfu_sweep.spread import replicate_spreads

    flops = [1e8, 1e9, 1e10, 1e11]
    fast = make_sweep_doc("gpu.r0", P_tflops=100, W_tbs=2, t0_s=1e-5, flops=flops, noise=0.0, run_id="a")
    slow = make_sweep_doc("gpu.r1", P_tflops=100, W_tbs=2, t0_s=1e-5, flops=flops, noise=0.0, run_id="b",
                          time_fn=lambda f, b: 1.1 * (1e-5 + max(f / 1e14, b / 2e12)))
    other = make_sweep_doc("cpu", P_tflops=1, W_tbs=0.1, t0_s=1e-5, flops=flops, run_id="c")
    sweeps = [s for d in (fast, slow, other) for s in parse_document(d)]
    (spread,) = replicate_spreads(sweeps)
    assert spread.label == "gpu" and spread.devices == ("gpu.r0", "gpu.r1")
    assert len(spread.shapes) == 4 and all(s.slowest == "gpu.r1" for s in spread.shapes)
    assert abs(spread.median_ratio - 1.1) < 1e-6
    assert "over 2 devices" in spread.sentence()
