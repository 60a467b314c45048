"""The fleet's four verdicts and the gate (compare --fail-on) on a REAL healthy 8xH100 node.

Fixtures: excerpts of the eight bf16 mamf-finder logs of one node, run at the same time (every 25th shape,
rows unchanged; tests/data/import/provenance.toml). The "5% slower" GPU is a SYNTHETIC copy of one imported
file made here (every time divided by 0.95), in a temporary directory, never under sweeps/.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.analysis.fleet.gate import GateError, gate
from mfu_sweep.analysis.fleet.view import replicate_fleets
from mfu_sweep.analysis.ground.series import group_series
from mfu_sweep.cli import main
from mfu_sweep.records.results import load_sweeps

DATA = Path(__file__).parent / "data" / "import"
LOGS = [DATA / f"mamf_finder_shisa_node_gpu{i}_bf16_every25.txt" for i in range(8)]
SLOW_RANK = 3


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("node")
    labels = [a for i, log in enumerate(LOGS) for a in ("--label", f"{log.name}:NVIDIA H100 80GB HBM3=h100.r{i}")]
    res = CliRunner().invoke(main, ["import", "mamf-finder", *map(str, LOGS), *labels, "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


def slower_copy(src: Path, dst: Path, factor: float = 0.95) -> None:
    """SYNTHETIC: ``src`` with every time divided by ``factor`` (0.95: 5% fewer TFLOP/s), written to ``dst``."""
    doc = json.loads(src.read_text())
    for rec in doc["records"]:
        rec["samples_s"] = [t / factor for t in rec["samples_s"]]
        rec["median_s"] = rec["median_s"] / factor
        rec["tflops"] *= factor  # what follows from the time, so the copy passes validation
        rec["mfu"] = rec["mfu"] * factor if rec["mfu"] is not None else None
    doc["import"]["notes"] = [*doc["import"]["notes"], f"SYNTHETIC: times divided by {factor} in a test"]
    dst.write_text(json.dumps(doc))


@pytest.fixture(scope="module")
def slow_node(node: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("slow_node")
    for f in node.glob("*.json"):
        shutil.copy(f, out / f.name)
    slower_copy(node / f"h100.r{SLOW_RANK}.json", out / f"h100.r{SLOW_RANK}.json")
    return out


def _compare(folder: Path, *args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["compare", *map(str, sorted(folder.glob("*.json"))), "--metric", "tflops",
                                    "--no-fit", *args])
    assert "Traceback" not in res.output
    return res.exit_code, res.output


def test_the_healthy_node_flags_nobody_and_the_gate_passes(node: Path) -> None:
    code, out = _compare(node, "--fail-on", "slower")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("fleet: h100 (bf16, eager, by TFLOP/s) over 8 devices: no device is slower than the "
                               "rest by more than 2% in any FLOP band")
    assert len(lines[0]) < 400
    assert lines[-1] == "gate (--fail-on slower, margin 2%): pass: 0 of 8 devices slower than their reference by " \
                        "more than 2%"
    assert "faster/slower = beyond +-2%, same = within +-2%" in out


def test_the_margin_is_what_keeps_the_healthy_node_clean(node: Path) -> None:
    # the pure difference test (--margin 0) calls the node's real +-1.6% offsets leads, and so fails the gate
    code, out = _compare(node, "--fail-on", "slower", "--margin", "0")
    assert code == 1 and out.splitlines()[-1].startswith("gate (--fail-on slower, margin 0%): FAIL")


def test_one_gpu_5pct_slower_is_flagged_named_once_and_fails_the_gate(slow_node: Path) -> None:
    code, out = _compare(slow_node, "--fail-on", "slower")
    assert code == 1, out
    fleet, gate_line = out.splitlines()[0], out.splitlines()[-1]
    assert fleet.startswith(f"fleet: h100 (bf16, eager, by TFLOP/s) over 8 devices: flagged h100.r{SLOW_RANK} "
                            "(slower by more than 2% in ")
    assert fleet.count("h100.r3") == 2  # flagged, and named the slowest: one clause, not an item per shape
    assert "flagged h100.r3 (" in fleet and "; slowest h100.r3 (" in fleet
    assert len(fleet) < 500
    assert gate_line.startswith("gate (--fail-on slower, margin 2%): FAIL: 1 of 8 devices slower than their "
                                "reference by more than 2%: h100.r3 (bf16 eager, x0.94")


def test_the_gate_against_a_baseline(node: Path, slow_node: Path) -> None:
    assert _compare(node, "--baseline", "h100.r0", "--fail-on", "slower")[0] == 0
    code, out = _compare(slow_node, "--baseline", "h100.r0", "--fail-on", "slower")
    assert code == 1 and "h100.r3" in out.splitlines()[-1]
    [row] = [line for line in out.splitlines() if line.startswith("h100.r3 ")]
    assert row.endswith("/ 1 GFLOP - 10 GFLOP, 10 GFLOP - 100 GFLOP, 100 GFLOP - 1 TFLOP, 1 TFLOP - 10 TFLOP")


def test_json_carries_the_gate_and_its_line_goes_to_stderr(slow_node: Path) -> None:
    res = CliRunner().invoke(main, ["compare", *map(str, sorted(slow_node.glob("*.json"))), "--metric", "tflops",
                                    "--json", "--fail-on", "slower"])
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["gate"]["passed"] is False and [f["label"] for f in data["gate"]["failures"]] == ["h100.r3"]
    assert data["fleets"][0]["flagged"] == ["h100.r3"] and data["fleets"][0]["margin"] == 0.02
    assert res.stderr.strip().splitlines()[-1] == data["gate"]["line"]


def test_fail_on_ambiguous_also_fails_what_cannot_be_shown_within_the_margin(node: Path) -> None:
    # the 1 - 10 GFLOP band holds 1 shape of the excerpt: too few to show any GPU within 2%
    code, out = _compare(node, "--fail-on", "ambiguous")
    assert code == 1 and "(bf16 eager, x" in out and ", ambiguous)" in out.splitlines()[-1]


def test_the_library_gate_and_its_errors(node: Path) -> None:
    series = group_series(load_sweeps(sorted(node.glob("*.json"))))
    fleets = replicate_fleets(series, margin=0.02)
    result = gate(fleets, [], "slower")
    assert result.passed and result.checked == 8 and result.boards == 1
    cells = fleets[0].board.cells
    assert all(c.verdict == 0 for c in cells)  # no lead at all within the margin
    # bands of 25 or more shapes show most GPUs the same within 2% (r0, +1.6% to +1.8%, stays ambiguous)
    for band in {c.band for c in cells if c.n_shapes >= 25}:
        assert sum(c.call == "same" for c in cells if c.band == band) >= 6
    with pytest.raises(GateError, match="fail_on='never'"):
        gate(fleets, [], "never")
    with pytest.raises(GateError, match="--fail-on needs devices to rank"):
        gate([], [], "slower")


def _two_dtypes(folder: Path) -> dict:
    """The node's series, and a copy of each as fp16 (the same SYNTHETIC values under a second dtype)."""
    from dataclasses import replace

    from mfu_sweep.analysis.ground.series import SeriesKey

    series = group_series(load_sweeps(sorted(folder.glob("*.json"))))
    copies = {SeriesKey(k.label, "fp16", k.mode): replace(s, key=SeriesKey(k.label, "fp16", k.mode),
                                                          records=tuple(replace(r, dtype="fp16") for r in s.records))
              for k, s in series.items()}
    return {**series, **copies}


def test_the_gate_counts_devices_not_series(node: Path, slow_node: Path) -> None:
    # eight GPUs measured in two dtypes are 8 devices (the gate said "0 of 16 devices"), and one GPU slower in
    # both dtypes is one failing device, named once per dtype
    healthy = gate(replicate_fleets(_two_dtypes(node), margin=0.02), [], "slower")
    assert healthy.passed and healthy.checked == 8 and healthy.boards == 2
    assert "pass: 0 of 8 devices slower" in healthy.line()
    slow = gate(replicate_fleets(_two_dtypes(slow_node), margin=0.02), [], "slower")
    assert [(f.label, f.dtype) for f in slow.failures] == [("h100.r3", "bf16"), ("h100.r3", "fp16")]
    assert slow.failed_devices == 1 and "FAIL: 1 of 8 devices slower" in slow.line()
    assert slow.to_json()["checked"] == 8 and slow.to_json()["failed_devices"] == 1


def test_by_mfu_the_fleet_and_the_leaderboard_never_say_faster_or_slower(slow_node: Path) -> None:
    # MFU is a fraction of each device's own peak: the leaderboard's columns, its cells and the fleet view say
    # higher / lower MFU; the same files by TFLOP/s say faster / slower
    res = CliRunner().invoke(main, ["compare", *map(str, sorted(slow_node.glob("*.json"))), "--metric", "mfu",
                                    "--no-fit", "--baseline", "h100.r0"])
    assert res.exit_code == 0, res.output
    board = res.output[res.output.index("leaderboard"):]
    assert "by MFU" in board and "higher MFU" in board and "lower MFU" in board
    assert "faster" not in board and "slower" not in board
    from mfu_sweep.analysis.fleet.leaderboard import leaderboard

    series = list(group_series(load_sweeps(sorted(slow_node.glob("*.json")))).values())
    mfu = leaderboard(series, "mfu", reference="h100.r0")
    assert {c.call for c in mfu.cells} <= {"higher", "lower", "same", "ambiguous"} and "lower" in {c.call for c
                                                                                                 in mfu.cells}
    assert {c.call for c in leaderboard(series, "tflops", reference="h100.r0").cells} >= {"slower"}


def test_fail_on_without_devices_to_rank_and_a_bad_margin_are_one_line_errors(node: Path) -> None:
    files = [str(node / "h100.r0.json"), str(node / "h100.r1.json")]
    res = CliRunner().invoke(main, ["compare", *files, "--a", "h100.r0", "--b", "h100.r1", "--fail-on", "slower"])
    assert res.exit_code == 2 and "--fail-on needs devices to rank" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["compare", *files, "--margin", "60%"])
    assert res.exit_code == 1 and res.output.strip().splitlines()[-1].startswith("Error: --margin: margin='60%'")
