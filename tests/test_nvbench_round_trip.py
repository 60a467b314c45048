"""`export --format nvbench` then `import nvbench` gives back the sweep: its label, chip, timer, cache, modes and
every dtype (fp8-rowwise and the block-scaled ones too), so `compare` against the original sees one timing
(issue 47 item 17). The sweeps are SYNTHETIC (tests/synthetic.py) but for the committed sm_90 table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from synthetic import make_sweep_doc, write_sweep

from mfu_sweep.analysis.ground.series import group_series
from mfu_sweep.analysis.verdicts.timing import timing_differences
from mfu_sweep.cli import main
from mfu_sweep.gemm.dtypes import DTYPES
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.importers import import_sources
from mfu_sweep.present.export.nvbench import write_nvbench
from mfu_sweep.records.results import load_sweeps

ROOT = Path(__file__).resolve().parents[1]
SHAPES = [Shape(1, n, n, n, layout="nt") for n in (256, 512, 1024, 2048, 4096)]


def _sweep(tmp_path: Path, dtype: str) -> Path:
    """A SYNTHETIC sweep of ``dtype`` on one GPU: label node-7, chip h100-sxm, CUDA events with a flush."""
    doc = make_sweep_doc("node-7", P_tflops=500, W_tbs=2, t0_s=5e-6, shapes=SHAPES, dtype=dtype, mode="compile",
                         device_name="NVIDIA H100 80GB HBM3", backend="cuda")
    doc["device"]["chip"] = "h100-sxm"
    for rec in doc["records"]:
        rec["timer"], rec["cache"] = "cuda-events+flush", "flush"
    return write_sweep(tmp_path, doc, f"node-7-{dtype}.json")


def _round_trip(path: Path, tmp_path: Path) -> tuple:
    (orig,) = load_sweeps([path])
    out = tmp_path / f"{path.stem}.nvbench.json"
    write_nvbench([orig], out)
    sweeps = import_sources("nvbench", [out]).sweeps
    (label, back), = sweeps.items()
    return orig, label, back


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_every_dtype_keeps_label_chip_timer_and_cache(tmp_path: Path, dtype: str) -> None:
    orig, label, back = _round_trip(_sweep(tmp_path, dtype), tmp_path)
    assert label == back.label == "node-7" and back.device["chip"] == "h100-sxm"
    assert {r.dtype for r in back.records} == {dtype} and {r.mode for r in back.records} == {"compile"}
    assert {(r.timer, r.extra["cache"]) for r in back.records} == {("cuda-events+flush", "flush")}
    assert sorted(r.shape for r in back.records) == sorted(r.shape for r in orig.records)
    (a,), (b,) = group_series([orig]).values(), group_series([back]).values()
    assert timing_differences(a, b) == []
    assert back.extra["import"]["exported_by_mfu_sweep"]["label"] == "node-7"


def test_compare_against_the_original_says_no_timing_differs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    src = (ROOT / "sweeps" / "published" / "sm_90.json").read_text()
    Path("orig.json").write_text(src)
    runner = CliRunner()
    assert runner.invoke(main, ["export", "orig.json", "--format", "nvbench", "-o", "h.json"]).exit_code == 0
    res = runner.invoke(main, ["import", "nvbench", "h.json", "-o", "imp", "--json"])
    assert res.exit_code == 0, res.output
    (written,) = json.loads(res.stdout)["files"]
    assert written["label"] == "sm_90" and written["chip"] == "h100-sxm" and written["file"] == "imp/sm_90.json"
    res = runner.invoke(main, ["compare", "orig.json", "imp/sm_90.json", "--a", "orig.json:sm_90", "--b",
                               "imp/sm_90.json:sm_90", "--metric", "tflops", "--no-fit", "--dtype", "bf16"])
    assert res.exit_code == 0, res.output
    assert "timed differently" not in res.output and "timing differs" not in res.output
    assert "the same within 2% over 100%" in res.output


def test_an_nvbench_file_of_another_tool_keeps_nvbenchs_timing(tmp_path: Path) -> None:
    doc = json.loads((ROOT / "tests" / "data" / "import" / "nvbench_test_ref_excerpt.json").read_text())
    assert "mfu_sweep" not in (doc.get("meta") or {})
    from mfu_sweep.importers.nvbench import _exported

    assert _exported(doc) == {}


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
def test_an_export_saved_with_a_byte_order_mark_reads_the_same(tmp_path: Path, encoding: str) -> None:
    orig, _, back = _round_trip(_sweep(tmp_path, "fp8-rowwise"), tmp_path)
    out = tmp_path / "node-7-fp8-rowwise.nvbench.json"
    out.write_text(out.read_text(encoding="utf-8"), encoding=encoding)
    (marked,) = import_sources("nvbench", [out]).sweeps.values()
    assert [r.samples_s for r in marked.records] == [r.samples_s for r in back.records]
