"""compare and report with many devices, on SYNTHETIC fleets: leaderboard, --baseline, fleet view, --json."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner
from synthetic import write_sweep
from synthetic_fleet import fleet_docs

from mfu_sweep.cli import main

FLOPS = [float(f) for f in np.geomspace(1e6, 2e12, 16)]


def _files(tmp_path: Path, n: int = 6, **kw) -> list[str]:
    docs = fleet_docs(n, flops=FLOPS, slow=kw.pop("slow", {2: (1.2, 1e8, 1e12)}), **kw)
    return [str(write_sweep(tmp_path, d, name=f"{d['device']['label']}-{i}.json")) for i, d in enumerate(docs)]


def test_many_devices_get_a_leaderboard_and_the_fleet_view_not_pairs(tmp_path: Path) -> None:
    files = _files(tmp_path)
    res = CliRunner().invoke(main, ["compare", *files, "--metric", "tflops"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith("fleet: synthetic-gpu (bf16, eager, by TFLOP/s) over 6 devices: flagged "
                                 "synthetic-gpu.r2")
    assert "leaderboard bf16 eager (by TFLOP/s), 6 devices vs the median of the other devices" in res.output
    assert " vs synthetic-gpu.r" not in res.output and "summary:" not in res.output  # no pairs
    pairs = CliRunner().invoke(main, ["compare", *files, "--metric", "tflops", "--pairwise", "--no-fit"])
    assert pairs.exit_code == 0, pairs.output
    assert pairs.output.count("summary:") == 15 and "fleet:" in pairs.output


def test_baseline_is_one_vs_rest(tmp_path: Path) -> None:
    files = _files(tmp_path)
    res = CliRunner().invoke(main, ["compare", *files, "--baseline", "synthetic-gpu.r0"])
    assert res.exit_code == 0, res.output
    assert "5 devices vs baseline synthetic-gpu.r0" in res.output
    [row] = [line for line in res.output.splitlines() if line.startswith("synthetic-gpu.r2 ")]
    assert "x0.8" in row and "/ 100 MFLOP - 1 GFLOP" in row
    detail = CliRunner().invoke(main, ["compare", *files, "--baseline", "synthetic-gpu.r0", "--pairwise", "--no-fit"])
    assert detail.output.count("summary:") == 5  # the baseline against each other device, no other pairs
    assert all(line.startswith("synthetic-gpu.r0 vs ") for line in detail.output.splitlines()
               if " vs synthetic-gpu.r" in line and line.endswith("FLOP counts"))


def test_baseline_errors_are_one_line(tmp_path: Path) -> None:
    files = _files(tmp_path, n=3)
    both = CliRunner().invoke(main, ["compare", *files, "--baseline", "synthetic-gpu.r0", "--a", "synthetic-gpu.r1"])
    assert both.exit_code == 2 and "give --baseline or --a/--b, not both" in both.output
    unknown = CliRunner().invoke(main, ["compare", *files, "--baseline", "nope"])
    assert unknown.exit_code == 1 and "Traceback" not in unknown.output
    assert unknown.output.strip().splitlines()[-1].startswith("Error: no series labelled 'nope'")


def test_json_carries_leaderboards_and_fleets(tmp_path: Path) -> None:
    files = _files(tmp_path)
    res = CliRunner().invoke(main, ["compare", *files, "--json"])
    data = json.loads(res.output)
    assert data["comparisons"] == []
    [fleet] = data["fleets"]
    assert fleet["flagged"] == ["synthetic-gpu.r2"] and fleet["slowest"] == "synthetic-gpu.r2"
    [board] = data["leaderboards"]
    assert board["reference"] == "rest" and len(board["devices"]) == 6
    assert any(b["behind"] and b["behind"][0]["label"] == "synthetic-gpu.r2" for b in board["boards"])
    # the fleet's leaderboard is that one: named by its index, not written a second time
    assert fleet["leaderboard"] == 0 and "bands" not in fleet
    assert (fleet["dtype"], fleet["mode"], fleet["metric"]) == (board["dtype"], board["mode"], board["metric"])


def test_report_with_many_devices_has_fleet_and_leaderboard_sections(tmp_path: Path) -> None:
    files = _files(tmp_path)
    out = tmp_path / "report"
    res = CliRunner().invoke(main, ["report", *files, "-o", str(out), "--metric", "tflops"])
    assert res.exit_code == 0, res.output
    md = (out / "index.md").read_text()
    assert "## Fleet (replicate runs)" in md and "## Leaderboard per FLOP band" in md
    assert "flagged synthetic-gpu.r2" in md
    assert (out / "figures" / "fleet-synthetic-gpu-bf16-eager.png").exists()
    # the leaderboard is the fleet's own: one heatmap, which its section points at, not the same picture twice
    assert not (out / "figures" / "leaderboard-bf16-eager.png").exists()
    assert "Its heatmap is the fleet's: synthetic-gpu · bf16 · eager, above." in md
    assert "### synthetic-gpu.r0 vs" not in md  # no sentence per pair
    data = json.loads((out / "analysis.json").read_text())
    assert data["comparisons"] == [] and data["fleets"][0]["flagged"] == ["synthetic-gpu.r2"]
    [fleet], boards = data["fleets"], data["leaderboards"]
    assert "bands" not in fleet
    assert set(boards[fleet["leaderboard"]]["devices"]) == {d["label"] for d in fleet["devices"]}
