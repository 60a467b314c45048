"""One set of numbers: the report's summary table, its series section and analysis.json agree.

Three inputs: the committed CPU sweep (real measurement), a committed published import (real,
cited), and a merged fleet of SYNTHETIC devices (tests/synthetic_fleet.py, made-up numbers).
The expected values are recomputed here from the records (median of the pass medians per shape),
independently of :mod:`mfu_sweep.analysis.ground.summary`.
"""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path
from typing import Any

import pytest
from synthetic_fleet import fleet_docs

from mfu_sweep.analysis.ground.series import group_series
from mfu_sweep.analysis.sources.merge import merge_sweeps
from mfu_sweep.present.report.write import analyse, analysis_json, build_report, to_markdown
from mfu_sweep.records.results import Sweep, load_sweeps, parse_document

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _fleet() -> list[Sweep]:
    sweeps = [s for i, d in enumerate(fleet_docs(5, flops=[1e6, 1e8, 1e10, 1e12], n_samples=8))
              for s in parse_document(d, source=f"synthetic-{i}")]
    return parse_document(merge_sweeps(sweeps).to_json(), source="merged")


INPUTS = {
    "cpu": lambda: load_sweeps([ROOT / "sweeps/amd-epyc-zen5-cpu.json"]),
    "published": lambda: load_sweeps([ROOT / "sweeps/published/sm_90.json"]),
    "fleet": _fleet,
    "short": lambda: load_sweeps([ROOT / "tests/data/short-sweep/cpu-4-shapes.json"]),
}


def _tables(markdown: str) -> dict[str, list[list[str]]]:
    """Markdown tables by the heading above them (cells unescaped)."""
    out: dict[str, list[list[str]]] = {}
    heading = ""
    for line in markdown.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        elif line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            out.setdefault(heading, []).append(cells)
    return out


def _numbers(text: str) -> list[float]:
    return [float(x) for x in NUMBER.findall(text)]


def _expected(sweeps: list[Sweep]) -> dict[str, dict[str, Any]]:
    """Best and worst TFLOP/s per series from the records: one value per shape (median of pass medians)."""
    out = {}
    for key, s in group_series(sweeps).items():
        by_shape: dict[str, list[float]] = {}
        flops: dict[str, float] = {}
        for r in s.records:
            by_shape.setdefault(str(r.shape), []).append(float(r.median_s))
            flops[str(r.shape)] = r.flops
        tf = {sh: flops[sh] / statistics.median(m) / 1e12 for sh, m in by_shape.items()}
        out[str(key)] = {"best": max(tf.values()), "worst": min(tf.values()),
                         "best_shape": max(tf, key=tf.__getitem__), "peak": s.peak_tflops}
    return out


def _close(a: float, b: float, digits: int = 3) -> bool:
    """``a`` is ``b`` written with ``digits`` significant digits."""
    return abs(a - b) <= 0.51 * 10 ** (math.floor(math.log10(abs(b))) - digits + 1)


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_report_tables_and_json_agree(name: str) -> None:
    sweeps = INPUTS[name]()
    analysis = analyse(sweeps, fit_n_boot=10)
    tables = _tables(to_markdown(build_report(sweeps, analysis, [])))
    data = analysis_json(analysis)
    expected = _expected(sweeps)
    by_key = {f"{s['label']} {s['dtype']} {s['mode']}": s for s in data["series"]}
    assert set(by_key) == set(expected)
    header, *rows = tables["Summary"]
    col = {h: i for i, h in enumerate(header)}
    assert len(rows) >= len(expected)
    for row in rows:
        key = row[col["series"]]
        if key not in by_key:  # a series without usable records has no numbers
            assert row[col["best TFLOP/s"]] == "–"
            continue
        js, want = by_key[key], expected[key]
        # JSON against the records
        assert js["best"]["tflops"] == pytest.approx(want["best"], rel=1e-12)
        assert js["worst"]["tflops"] == pytest.approx(want["worst"], rel=1e-12)
        assert js["best"]["shape"] == want["best_shape"]
        # summary table against JSON
        (best,) = _numbers(row[col["best TFLOP/s"]])
        assert _close(best, js["best"]["tflops"])
        facts = dict((r[0], r[1]) for r in tables[key][1:])
        # series section against JSON
        assert facts["best shape"].startswith(f"{js['best']['shape']} (")
        tf_lo, tf_hi = _numbers(facts["TFLOP/s range"])
        assert _close(tf_lo, js["worst"]["tflops"]) and _close(tf_hi, js["best"]["tflops"])
        if want["peak"]:
            lo, hi = _numbers(row[col["MFU range"]])
            assert lo == pytest.approx(100 * js["mfu_range"][0], abs=0.051)
            assert hi == pytest.approx(100 * js["mfu_range"][1], abs=0.051)
            section = [float(x) for x in re.findall(r"(\d+(?:\.\d+)?)%", facts["MFU range"])]
            assert section == [lo, hi]
            assert f"MFU {hi:.1f}%" in facts["best shape"]
        else:
            assert row[col["MFU range"]] == "–" and js["mfu_range"] is None


def test_a_fit_that_constrains_nothing_gives_no_ceiling_in_the_summary_table() -> None:
    sweeps = INPUTS["short"]()
    analysis = analyse(sweeps, fit_n_boot=50)
    header, row = _tables(to_markdown(build_report(sweeps, analysis, [])))["Summary"]
    assert row[header.index("fitted P, TFLOP/s [95%]")] == "fit not constrained (see notes)"
    (fit,) = analysis_json(analysis)["fits"]
    assert fit["is_constrained"] is False
