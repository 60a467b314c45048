"""Peaks of imported (published) data: which chip a device name maps to, the peak an XLA f32 dot is
measured against, no MFU above 1 without a reason, and `compare` skipping only the pairs without a peak.

Real inputs only: the GH200 summary pasted in stas00/ml-engineering PR #60 and the shisa-ai/mamf-finder
H100 log excerpts (tests/data/import, cited in provenance.toml), the OpenXLA table excerpt, and the
committed sweeps/published/ files that `make published` writes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.importers import import_sources
from mfu_sweep.importers.peak_basis import ASSUMED, CITATION
from mfu_sweep.present.machine_facts import machine_facts
from mfu_sweep.records.results import load_sweeps
from mfu_sweep.specs import load_chips

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "import"
PUBLISHED = ROOT / "sweeps" / "published"
PR60 = DATA / "mamf_finder_pr60_gh200_summary.txt"
GPU0 = DATA / "mamf_finder_shisa_gpu0_bf16_excerpt.txt"
GPU1 = DATA / "mamf_finder_shisa_gpu1_bf16_excerpt.txt"
XLA = DATA / "xla_main_excerpt.txtpb"
CHIPS = load_chips()
H100 = "NVIDIA H100 80GB HBM3"


def only(result):
    (sw,) = result.sweeps.values()
    return sw


def published(name: str):
    (sw,) = load_sweeps([PUBLISHED / f"{name}.json"])
    return sw


# --- 1. a GH200 is not an H200 --------------------------------------------------------------------------


def test_gh200_log_maps_to_no_chip_and_says_so() -> None:
    res = import_sources("mamf-finder", [PR60])
    sw = only(res)
    (r,) = sw.records
    assert sw.device["name"] == "NVIDIA GH200 480GB"
    assert sw.device["chip"] is None and sw.peak.chip is None and dict(sw.peak.tflops) == {}
    assert r.mfu is None and r.tflops == pytest.approx(821.0)  # TFLOP/s still works
    assert any("no spec entry for 'NVIDIA GH200 480GB'" in w and "--chip" in w for w in res.warnings), res.warnings


def test_h100_log_still_maps_to_h100_sxm() -> None:
    sw = only(import_sources("mamf-finder", [GPU0]))
    assert sw.device["name"] == H100 and sw.peak.chip == "h100-sxm"


# --- 2. f32 dots of the XLA table are measured against the tf32 peak ------------------------------------


@pytest.mark.parametrize("name,chip", [("sm_90", "h100-sxm"), ("sm_100_B200", "b200"), ("gfx942", "mi300x")])
def test_published_fp32_mfu_is_against_the_tf32_peak(name: str, chip: str) -> None:
    sw = published(name)
    tf32 = CHIPS[chip].peak_tflops["tf32"]
    fp32 = [r for r in sw.records if r.dtype == "fp32" and r.ok]
    assert len(fp32) == 375 and sw.peak.tflops["fp32"] == tf32
    assert CITATION in sw.peak.dtype_basis["fp32"] and f"{CHIPS[chip].peak_tflops['fp32']:g}" in \
        sw.peak.dtype_basis["fp32"]
    for r in fp32:
        assert {"maybe_tf32", ASSUMED} <= set(r.flags) and r.extra["peak_basis"].startswith("tf32 peak, assumed")
        assert r.mfu == pytest.approx(r.tflops / tf32) and r.mfu <= 1.0 and "above_peak" not in r.flags
        # the raw value is the source's: FLOP/s stored as an integer
        assert r.tflops == pytest.approx(r.extra["source_value"] / 1e12, rel=1e-6)


@pytest.mark.parametrize("name", ["sm_90", "sm_100_B200", "gfx942", "gfx950"])
def test_no_published_mfu_above_one_without_a_reason(name: str) -> None:
    sw = published(name)
    for r in sw.records:
        if r.mfu is not None and r.mfu > 1.0:
            assert "above_peak" in r.flags and len(r.extra["above_peak_reason"]) > 40, r
        assert ("above_peak" in r.flags) == (r.mfu is not None and r.mfu > 1.0)


def test_chip_without_tf32_peak_keeps_fp32_and_says_why() -> None:
    sw = published("gfx950")  # mi355x: no cited tf32 peak
    assert "tf32" not in sw.peak.tflops and sw.peak.tflops["fp32"] == CHIPS["mi355x"].peak_tflops["fp32"]
    above = [r for r in sw.records if "above_peak" in r.flags]
    assert above and {r.dtype for r in above} == {"fp32"} and max(r.mfu for r in above) > 5
    assert all("no cited tf32 peak" in r.extra["above_peak_reason"] and ASSUMED not in r.flags for r in above)


def test_report_rows_give_the_basis_and_the_reason() -> None:
    sm90 = published("sm_90")
    rows = dict(machine_facts(sm90.peak, [r for r in sm90.records if r.dtype == "fp32"]))
    assert rows["peak basis"].startswith("fp32 MFU is against the tf32 peak (494.5") and "above peak" not in rows
    fp8 = [r for r in sm90.records if r.dtype == "fp8"]
    rows = dict(machine_facts(sm90.peak, fp8))
    n = sum("above_peak" in r.flags for r in fp8)
    assert n > 0 and rows["above peak"].startswith(f"{n} of {len(fp8)} records have MFU above 1")
    assert "kernel" in rows["above peak"] and "peak basis" not in rows  # fp8 is against its own peak


def test_import_of_the_real_excerpt_sets_the_basis() -> None:
    res = import_sources("xla-perf-table", [XLA])
    for sw in res.sweeps.values():
        fp32 = [r for r in sw.records if r.dtype == "fp32" and r.ok]
        tf32 = sw.peak.for_dtype("tf32")
        assert fp32 and all(r.dtype == "fp32" for r in fp32)
        if tf32:
            assert all(r.mfu == pytest.approx(r.tflops / tf32) and ASSUMED in r.flags for r in fp32)
        else:
            assert all(ASSUMED not in r.flags for r in fp32) and "fp32" not in sw.peak.dtype_basis


# --- 3. compare skips only the pairs without a peak -----------------------------------------------------


@pytest.fixture(scope="module")
def three_logs(tmp_path_factory) -> list[str]:
    """Two H100 logs of one node (peaks) and the GH200 paste (no peak), all bf16 eager."""
    out = tmp_path_factory.mktemp("logs")
    labels = [f"{GPU1.name}:{H100}=h100-gpu1", f"{GPU0.name}:{H100}=h100-gpu0", "NVIDIA GH200 480GB=gh200"]
    res = CliRunner().invoke(main, ["import", "mamf-finder", str(GPU0), str(GPU1), str(PR60), "-o", str(out),
                                    *(a for label in labels for a in ("--label", label))])
    assert res.exit_code == 0, res.output
    return sorted(str(p) for p in out.glob("*.json"))


def test_compare_mfu_skips_only_pairs_without_a_peak(three_logs) -> None:
    res = CliRunner().invoke(main, ["compare", *three_logs, "--no-fit"])
    assert res.exit_code == 0, res.output
    notes = [ln for ln in res.output.splitlines() if ln.startswith("note: skipped")]
    assert len(notes) == 2 and all("gh200" in n and "--metric tflops" in n for n in notes), notes
    assert "h100-gpu0 vs h100-gpu1: bf16 eager, MFU" in res.output


def test_compare_json_lists_the_skipped_pairs(three_logs) -> None:
    res = CliRunner().invoke(main, ["compare", *three_logs, "--no-fit", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert len(out["comparisons"]) == 1 and len(out["skipped"]) == 2


def test_compare_fails_only_when_nothing_is_comparable(three_logs) -> None:
    gh200 = [p for p in three_logs if p.endswith("gh200.json")]
    h100 = [p for p in three_logs if p.endswith("h100-gpu0.json")]
    res = CliRunner().invoke(main, ["compare", *h100, *gh200, "--no-fit"])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: nothing to compare"), res.output
    assert "--metric tflops" in lines[0]
    # with TFLOP/s the pair is comparable in principle, but the two excerpts share no measured shape and none
    # within 12% in FLOPs: values read off the other's curve are not evidence, so one line says why and what
    # to sweep (they were compared through interpolated values before)
    res = CliRunner().invoke(main, ["compare", *h100, *gh200, "--no-fit", "--metric", "tflops"])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1 and "no shape was measured by both" in lines[0], res.output
    assert "h100-gpu0" in lines[0] and "gh200" in lines[0] and "sweep the same shapes" in lines[0]


def test_mfu_leaderboard_leaves_out_only_the_series_without_a_peak(three_logs) -> None:
    res = CliRunner().invoke(main, ["compare", *three_logs, "--no-fit", "--baseline", "h100-gpu0"])
    assert res.exit_code == 0, res.output
    notes = [ln for ln in res.output.splitlines() if ln.startswith("note: left")]
    assert len(notes) == 1 and "gh200" in notes[0] and "--metric tflops" in notes[0], res.output
    assert "1 device vs baseline h100-gpu0" in res.output and "h100-gpu1" in res.output
