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


# ---------------------------------------------------------------- the peak, its basis and the math mode come back

def _peak_fields(peak) -> dict:
    return {f: getattr(peak, f) for f in ("chip", "tflops", "memory_bandwidth_tbs", "source", "estimated", "override",
                                          "scope", "notes", "basis", "dtype_basis")}


def _facts(rec) -> tuple:
    """What a record says of its peak and math, beyond its times."""
    peak_flags = ("estimated_peak", "override_peak", "maybe_tf32", "tf32_peak_assumed")
    return (tuple(f for f in rec.flags if f in peak_flags), rec.extra.get("peak_basis"),
            *(rec.extra.get(k) for k in ("mat_mul_precision", "neuron_cc_flags", "neuronx_cc")))


def _pairs(orig, back) -> list[tuple]:
    """(original record, record read back) per shape: one pass in, one record back."""
    by_key = {(r.shape, r.dtype, r.mode): r for r in back.records}
    assert len(by_key) == len(orig.records)
    return [(r, by_key[(r.shape, r.dtype, r.mode)]) for r in orig.records]


def test_a_cpu_sweeps_estimated_peak_and_its_basis_come_back(tmp_path: Path) -> None:
    doc = make_sweep_doc("epyc", P_tflops=0.3, W_tbs=0.05, t0_s=2e-5, shapes=SHAPES[:3], dtype="fp32",
                         peak_tflops=0.3323, backend="cpu", device_name="AMD EPYC")
    doc["device"]["chip"] = "cpu"
    doc["peak"].update(chip="cpu", estimated=True, source="estimated for AMD EPYC: fp32: 2 cores x 2.60 GHz x 64",
                       basis="clock measured at 3.1 GHz (clockprobe), not cpufreq's 2.6")
    for rec in doc["records"]:
        rec["flags"] = ["estimated_peak"]
    orig, label, back = _round_trip(write_sweep(tmp_path, doc, "epyc.json"), tmp_path)
    assert _peak_fields(back.peak) == _peak_fields(orig.peak)
    assert back.peak.estimated and back.peak.basis.startswith("clock measured") and back.device["chip"] == "cpu"
    for a, b in _pairs(orig, back):
        assert _facts(b) == _facts(a) == (("estimated_peak",), None, None, None, None)
        assert b.mfu == pytest.approx(a.mfu, rel=1e-6)


def test_the_recorded_cpu_sweep_keeps_its_estimate_without_a_warning(tmp_path: Path) -> None:
    (orig,) = load_sweeps([ROOT / "sweeps" / "amd-epyc-zen5-cpu.json"])
    out = tmp_path / "zen5.nvbench.json"
    write_nvbench([orig], out)
    res = import_sources("nvbench", [out])
    (back,) = res.sweeps.values()
    assert _peak_fields(back.peak) == _peak_fields(orig.peak) and back.peak.estimated
    assert res.warnings == () and all("estimated_peak" in r.flags for r in back.records)
    assert all(r.mfu == pytest.approx(r.tflops / orig.peak.for_dtype(r.dtype)) for r in back.records)


def test_an_xla_tables_fp32_as_tf32_basis_comes_back(tmp_path: Path) -> None:
    orig, _, back = _round_trip(ROOT / "sweeps" / "published" / "sm_90.json", tmp_path)
    assert _peak_fields(back.peak) == _peak_fields(orig.peak)
    assert back.peak.for_dtype("fp32") == 494.5 and "tf32 peak" in back.peak.dtype_basis["fp32"]
    pairs = _pairs(orig, back)
    assert any(a.dtype == "fp32" for a, _ in pairs)
    for a, b in pairs:
        assert _facts(b) == _facts(a), (a.shape, a.dtype)
        assert b.mfu == pytest.approx(a.mfu, rel=1e-6)


@pytest.mark.parametrize("dtype,extra", [
    ("tf32", {"neuron_cc_flags": "--auto-cast=matmult --auto-cast-type=tf32", "neuronx_cc": "2.22.12471.0"}),
    ("fp32", {"mat_mul_precision": "highest"}),
])
def test_an_xla_records_math_mode_comes_back(tmp_path: Path, dtype: str, extra: dict) -> None:
    doc = make_sweep_doc("trn2", P_tflops=80, W_tbs=2.9, t0_s=1e-4, shapes=SHAPES[:3], dtype=dtype, backend="xla",
                         device_name="Trainium2")
    doc["peak"]["dtype_basis"] = {dtype: "SYNTHETIC: the bf16 figure, as the compiler casts the matmul"}
    for rec in doc["records"]:
        rec.update(extra)  # a record's extras are its keys beyond the schema's
    orig, _, back = _round_trip(write_sweep(tmp_path, doc, f"trn2-{dtype}.json"), tmp_path)
    assert back.peak.dtype_basis == orig.peak.dtype_basis
    for a, b in _pairs(orig, back):
        assert {k: a.extra[k] for k in extra} == extra
        assert _facts(b) == _facts(a) and {k: b.extra[k] for k in extra} == extra
        assert "tf32_peak_assumed" not in b.flags  # a basis alone is no assumption of tf32


def test_chip_overrides_the_carried_peak_and_assumes_tf32_only_for_maybe_tf32(tmp_path: Path) -> None:
    path = _sweep(tmp_path, "fp8-rowwise")
    out = tmp_path / "rowwise.nvbench.json"
    write_nvbench(load_sweeps([path]), out)
    (back,) = import_sources("nvbench", [out], chip_overrides={"node-7": "h100-sxm"}).sweeps.values()
    assert back.peak.chip == "h100-sxm" and back.peak.for_dtype("fp8-rowwise") == 1979.0
    assert "fp8-rowwise" in back.peak.dtype_basis  # the fp8 figure's basis, not a tf32 assumption
    assert all("tf32_peak_assumed" not in r.flags and "peak_basis" not in r.extra for r in back.records)


def test_an_export_without_a_peak_says_so_once(tmp_path: Path) -> None:
    path = _sweep(tmp_path, "bf16")
    out = tmp_path / "old.nvbench.json"
    write_nvbench(load_sweeps([path]), out)
    doc = json.loads(out.read_text())
    del doc["meta"]["mfu_sweep"]["devices"][0]["peak"]  # as an export before the peak was carried
    out.write_text(json.dumps(doc))
    (back,) = import_sources("nvbench", [out]).sweeps.values()
    notes = [n for n in back.extra["import"]["notes"] if "carries no peak" in n]
    assert len(notes) == 1 and back.peak.chip == "h100-sxm"


@pytest.mark.parametrize("peak,fragment", [
    ({"tflops": {"fp32": "fast"}}, "peak tflops.fp32 'fast' is not a number"),
    ({"tflops": {"fp32": -1}}, "peak tflops.fp32 -1 is not a finite, non-negative number"),
    ({"tflops": {"fp32": 0}}, "peak tflops.fp32 0 is not above 0"),
    ({"tflops": [1, 2]}, "is not a peak block"),
    ({"tflops": {}, "dtype_basis": {"fp32": 3}}, "peak dtype_basis.fp32 3 is not text"),
    ({"tflops": {}, "estimated": "yes"}, "peak estimated 'yes' is not true or false"),
])
def test_a_broken_carried_peak_is_one_line(tmp_path: Path, peak: dict, fragment: str) -> None:
    from mfu_sweep.importers.common import SourceError

    out = tmp_path / "bad.nvbench.json"
    write_nvbench(load_sweeps([_sweep(tmp_path, "bf16")]), out)
    doc = json.loads(out.read_text())
    doc["meta"]["mfu_sweep"]["devices"][0]["peak"] = peak
    out.write_text(json.dumps(doc))
    with pytest.raises(SourceError, match=None) as exc:
        import_sources("nvbench", [out])
    assert fragment in str(exc.value) and "device 'node-7'" in str(exc.value)
