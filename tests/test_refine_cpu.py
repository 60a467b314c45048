"""The refinement loop end to end on this machine's CPU: refine -> sweep --shape-file --resume -> compare,
and sweep's one-machine loop, with tiny shapes and budgets.

The other device is a SYNTHETIC result file (tests/synthetic.py) with a per-call overhead of 100 us and a huge
ceiling, so it is slower than the CPU on tiny GEMMs and faster on larger ones: a crossover the CPU must find,
wherever this machine's speed puts it. The CPU files are real measurements.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from synthetic import make_sweep_doc, write_sweep

from mfu_sweep.cli import main
from mfu_sweep.cli.refine import EXIT_NOTHING_PROPOSED
from mfu_sweep.records.results import load_sweeps

FAST = ["--device", "cpu", "--dtype", "fp32", "--budget-s", "0.02", "--max-samples", "10", "--min-samples", "3",
        "--quiet", "--isolate", "none", "--no-check", "--threads", "1"]
RANGE = ["--min-flop", "1e5", "--max-flop", "3e7", "--points", "6", "--repeats", "2"]


def cli(*args: str):
    return CliRunner().invoke(main, list(args))


def other_device(tmp_path: Path, t0_s: float = 1e-4) -> Path:
    """SYNTHETIC: ``t0_s`` per call (100 us by default), then 1 PFLOP/s, against a made-up peak of 0.1 TFLOP/s: in
    TFLOP/s and in MFU it is behind a CPU core on tiny GEMMs and ahead on larger ones (MFU above 1: flagged, and
    fine for a test)."""
    doc = make_sweep_doc("slow-start", P_tflops=1000.0, W_tbs=100.0, t0_s=t0_s, dtype="fp32",
                         flops=[float(f) for f in np.geomspace(5e4, 1e8, 16)], peak_tflops=0.1, seed=3)
    return write_sweep(tmp_path, doc)


def other_device_crossing(tmp_path: Path, cpu_file: Path) -> Path:
    """The SYNTHETIC device with its per-call time set to this CPU's measured time at the middle of the FLOP
    range: its crossover with the CPU falls inside the range on any machine (a fixed 100 us missed it on a core
    fast enough to beat 100 us at 3e7 FLOP: 'settled', nothing to propose)."""
    [sweep] = load_sweeps([cpu_file])
    middle = float(np.sqrt(1e5 * 3e7))
    rec = min((r for r in sweep.records if r.status == "ok"), key=lambda r: abs(np.log(r.flops / middle)))
    return other_device(tmp_path, t0_s=float(rec.median_s))


def test_cross_machine_loop_refine_then_resume_two_files_then_compare(tmp_path: Path) -> None:
    files = [tmp_path / "cpu-a.json", tmp_path / "cpu-b.json"]
    for path, label in zip(files, ("cpu-a", "cpu-b"), strict=True):
        res = cli("sweep", *FAST, *RANGE, "--label", label, "-o", str(path))
        assert res.exit_code == 0, res.output
    other = other_device_crossing(tmp_path, files[0])
    shapes = tmp_path / "next.csv"
    res = cli("refine", *map(str, files), str(other), "--metric", "tflops", "-o", str(shapes))
    assert res.exit_code == 0, res.output
    assert "run on every device" in shapes.read_text() and "refine-1-of-8" in shapes.read_text()
    assert f"--shape-file {shapes} --resume -o {files[0]}" in res.output
    before = {p: len(load_sweeps([p])[0].records) for p in files}
    for path in files:
        res = cli("sweep", *FAST, "--shape-file", str(shapes), "--resume", "-o", str(path))
        assert res.exit_code == 0, res.output
    for path in files:
        [sw] = load_sweeps([path])
        new = [r for r in sw.records if r.family == "refine-1-of-8"]
        assert new and len(sw.records) > before[path]
        assert sw.settings["repeats"] == max(r.run_pass for r in sw.records) + 1
    res = cli("compare", *map(str, files), str(other), "--metric", "tflops", "--no-fit")
    assert res.exit_code == 0 and "slow-start" in res.output
    # the next look counts the round: its verdicts are at alpha / looks, the look index is 2
    res = cli("refine", *map(str, files), str(other), "--metric", "tflops", "-o", str(tmp_path / "n2.csv"))
    assert res.exit_code in (0, EXIT_NOTHING_PROPOSED) and "look 2 of 8" in res.output


def test_sweep_loop_stops_and_says_why(tmp_path: Path) -> None:
    other = other_device(tmp_path)
    out = tmp_path / "cpu.json"
    res = cli("sweep", *FAST, *RANGE, "--label", "cpu", "-o", str(out), "--refine-against", str(other),
              "--until", "crossover-width=1.5", "--refine-budget", "30s")
    assert res.exit_code == 0, res.output
    assert "refine loop stopped after" in res.output
    assert any(why in res.output for why in ("narrower than the target", "looks are used up", "budget left",
                                             "nothing left to propose"))
    assert res.output.count("refine: look") <= 9  # the 8 planned looks and the stop: the loop never spins
    [sw] = load_sweeps([out])
    rounds = {r.family for r in sw.records if r.family.startswith("refine-")}
    # one shape file per round the loop ran (it says how many); a round whose proposals were all passes the
    # file already had measures nothing new, so the records' families may name fewer rounds than files
    (ran,) = re.findall(r"refine loop stopped after (\d+) round", res.output)
    files = sorted(p.name for p in tmp_path.glob("cpu.refine-*.csv"))
    assert rounds and len(files) == int(ran) >= len(rounds)
    assert {f"cpu.refine-{r.split('-')[1]}.csv" for r in rounds} <= set(files)


@pytest.mark.parametrize("args, fragment", [
    (["--until", "bend-width=1.5", "--refine-budget", "0.05s"], "below one pass"),
    (["--until", "bend-width=1.5", "--refine-budget", "soon"], "positive duration"),
    (["--until", "crossover-width=0.5", "--refine-against", "x.json"], "X > 1"),
    (["--until", "crossover-width=2"], "needs --refine-against"),
    (["--refine-against", "missing.json"], "no such file"),
])
def test_bad_loop_options_are_one_line_errors(tmp_path: Path, args: list[str], fragment: str) -> None:
    res = cli("sweep", *FAST, *RANGE, "-o", str(tmp_path / "x.json"), *args)
    assert res.exit_code != 0 and fragment in res.output, res.output
    assert "Traceback" not in res.output and not (tmp_path / "x.json").exists()


def test_refine_bad_input_one_line(tmp_path: Path) -> None:
    out = tmp_path / "cpu.json"
    assert cli("sweep", *FAST, "--shape", "64x64x64", "--shape", "96x96x96", "--repeats", "1", "--label", "cpu",
               "-o", str(out)).exit_code == 0
    res = cli("refine", str(out), "-o", str(tmp_path / "s.csv"))
    assert res.exit_code == 1 and "one only (cpu)" in res.output and "Traceback" not in res.output
    fp16 = make_sweep_doc("other", P_tflops=10.0, W_tbs=1.0, t0_s=1e-5, dtype="fp16", flops=[1e6, 1e7], seed=1)
    res = cli("refine", str(out), str(write_sweep(tmp_path, fp16)), "-o", str(tmp_path / "s.csv"))
    assert res.exit_code == 1 and "share no dtype" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "s.csv").exists()


def test_resume_with_more_passes_appends_only_what_the_shape_file_asks(tmp_path: Path) -> None:
    out = tmp_path / "cpu.json"
    assert cli("sweep", *FAST, "--shape", "64x64x64", "--shape", "96x96x96", "--repeats", "1",
               "-o", str(out)).exit_code == 0
    rows = tmp_path / "rows.csv"
    rows.write_text("m,n,k,family,passes\n96,96,96,refine-1,3\n80,80,80,refine-1,2\n")
    res = cli("sweep", *FAST, "--shape-file", str(rows), "--resume", "-o", str(out))
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    slots = sorted((r["shape"]["m"], r.get("pass", 0), r["family"]) for r in data["records"])
    assert slots == [(64, 0, "custom"), (80, 0, "refine-1"), (80, 1, "refine-1"),
                     (96, 0, "custom"), (96, 1, "refine-1"), (96, 2, "refine-1")]
    assert data["settings"]["repeats"] == 3 and len(data["settings"]["order_seeds"]) == 3
    # fewer passes than the file has is still refused: one file, one way of measuring
    res = cli("sweep", *FAST, "--shape", "64x64x64", "--repeats", "2", "--resume", "-o", str(out))
    assert res.exit_code == 1 and "--repeats=2 differs" in res.output


def test_larger_repeats_without_a_passes_column_is_still_refused(tmp_path: Path) -> None:
    out = tmp_path / "cpu.json"
    assert cli("sweep", *FAST, "--shape", "64x64x64", "--repeats", "1", "-o", str(out)).exit_code == 0
    rows = tmp_path / "rows.csv"
    rows.write_text("m,n,k,passes\n64,64,64,2\n80,80,80,\n")  # one row without passes: the sweep's rules apply
    res = cli("sweep", *FAST, "--shape-file", str(rows), "--repeats", "2", "--resume", "-o", str(out))
    assert res.exit_code == 1 and "settings.repeats=1" in res.output
