"""The headline `sweep` ends with, and how a fit that constrains nothing is reported (`fit`, headline).

Inputs: the committed real CPU sweep, the real short CPU sweep of tests/data/short-sweep/ (its fit
pins down no parameter), and one tiny real CPU sweep run here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from mfu_sweep.analysis.ground.series import group_series
from mfu_sweep.analysis.ground.summary import summarise
from mfu_sweep.cli import main
from mfu_sweep.present.export.tables import significant
from mfu_sweep.present.report.headline import sweep_headline
from mfu_sweep.records.results import load_sweeps

ROOT = Path(__file__).resolve().parents[1]
CPU = ROOT / "sweeps" / "amd-epyc-zen5-cpu.json"
SHORT = ROOT / "tests" / "data" / "short-sweep" / "cpu-4-shapes.json"


def test_headline_gives_each_series_best_shape_ceiling_and_next_step() -> None:
    sweeps = load_sweeps([CPU])
    lines = sweep_headline(sweeps, CPU).splitlines()
    series = group_series(sweeps)
    assert len(lines) == len(series) + 1  # no re-estimated peak in this file: no "peak:" line
    for line, (key, s) in zip(lines, series.items(), strict=False):
        best = summarise(s).best
        assert line.startswith(f"best {key.dtype} {key.mode}: {significant(best.tflops)} TFLOP/s, "
                               f"MFU {best.mfu:.1%} of the estimated peak, at {best.shape} (")
        assert re.search(r"fitted ceiling P [\d.]+ TFLOP/s \[[\d.]+, [\d.]+\]", line), line
    assert lines[-1].startswith(f"next: mfu-sweep report {CPU} -o report/")


def test_headline_of_an_unconstrained_fit_names_no_ceiling_and_says_why() -> None:
    (line, _next) = sweep_headline(load_sweeps([SHORT]), SHORT).splitlines()
    assert "no fitted ceiling: the 4 shapes (1 MFLOP to 4.2 MFLOP) pin down none of P, W and t0" in line
    assert "fitted ceiling P" not in line


def test_fit_command_says_why_a_fit_constrains_nothing() -> None:
    res = CliRunner().invoke(main, ["fit", str(SHORT)])
    assert res.exit_code == 0, res.output
    notes = [ln for ln in res.output.splitlines() if ln.startswith("note:")]
    # one phrase for the whole fit instead of one note per parameter
    assert sum("not constrained" in n for n in notes) == 1
    assert "pin down none of P, W and t0; sweep a wider FLOP range" in notes[0]
    data = CliRunner().invoke(main, ["fit", str(SHORT), "--json"])
    (fit,) = json.loads(data.output)["fits"]
    assert fit["is_constrained"] is False and fit["unconstrained_reason"].startswith("not constrained: the 4 shapes")


def test_a_real_sweep_ends_with_the_headline(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    shapes = [a for s in ("64x64x64", "96x96x96", "128x128x128") for a in ("--shape", s)]
    res = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--dtype", "fp32", *shapes, "--budget-s", "0.02",
                                    "--repeats", "1", "--quiet", "--isolate", "none", "-o", str(out)])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    # the best line, then a "peak: ..." line where the clock probe re-estimated the peak, then "next: ..."
    tail = [next(line for line in lines if line.startswith("best ")), lines[-1]]
    (s,) = group_series(load_sweeps([out])).values()
    if (basis := load_sweeps([out])[0].peak.basis):
        assert lines[-2] == f"peak: {basis}"
    best = summarise(s).best
    assert tail[0].startswith(f"best fp32 eager: {significant(best.tflops)} TFLOP/s") and best.shape in tail[0]
    assert "no roofline fit (only 3 distinct shapes" in tail[0]
    assert tail[1].startswith(f"next: mfu-sweep report {out}")


def test_headline_says_when_mfu_is_above_the_peak_and_why_a_peak_was_re_estimated() -> None:
    import dataclasses

    (sweep,) = load_sweeps([CPU])
    lines = sweep_headline([sweep], CPU).splitlines()
    above = [line for line in lines if "above 100%" in line]
    # the committed Zen 5 bf16 series peaks above its table estimate (flagged above_peak), fp32 does not
    assert [line.split(":")[0] for line in above] == ["best bf16 eager"], lines
    assert not any(line.startswith("peak: ") for line in lines)
    basis = "cores ran at ~3.05 GHz, the spec clock is 2.60 GHz: peak re-estimated from the measured clock"
    moved = dataclasses.replace(sweep, peak=dataclasses.replace(sweep.peak, basis=basis))
    lines = sweep_headline([moved], CPU).splitlines()
    assert lines[-2] == f"peak: {basis}" and lines[-1].startswith("next: ")
