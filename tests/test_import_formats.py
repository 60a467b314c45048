"""Real formats of `mfu-sweep import`: every mamf-finder log layout since 2024, summary-only pastes,
nvbench CSV and markdown, per-file --label/--chip, timing vocabulary, and bad input.

Real fixtures (tests/data/import/, cited in provenance.toml): the shisa-ai/mamf-finder 8xH100 logs
(excerpts), the GH200 summary pasted in stas00/ml-engineering PR #60, the nvbench README markdown
output, and a GEMM benchmark's nvbench CSV/markdown (R100001/Programming-Massively-Parallel-Processors).
Log layouts with no public sample are SYNTHETIC, built below with the script's own format strings at
the cited commits, with made-up numbers.
"""

from __future__ import annotations

import json
import random
import re
import shlex
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st
from import_cli import one_line_error, run

from mfu_sweep.cli import main
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.importers import import_sources
from mfu_sweep.importers.common import CACHES, TIMERS, SourceError
from mfu_sweep.importers.mamf_summary import parse_summary
from mfu_sweep.records.results import load_sweeps, validate_file
from mfu_sweep.records.summaries import timing_of

DATA = Path(__file__).parent / "data" / "import"
GPU0 = DATA / "mamf_finder_shisa_gpu0_bf16_excerpt.txt"
GPU1 = DATA / "mamf_finder_shisa_gpu1_bf16_excerpt.txt"
FP8 = DATA / "mamf_finder_shisa_gpu0_fp8_excerpt.txt"
PR60 = DATA / "mamf_finder_pr60_gh200_summary.txt"
NVB_README = DATA / "nvbench_readme_md_excerpt.md"
NVB_CSV = DATA / "nvbench_r100001_matmat_3060_excerpt.csv"
NVB_MD = DATA / "nvbench_r100001_matmat_3060_excerpt.md"
XLA = DATA / "xla_main_excerpt.txtpb"
H100 = "NVIDIA H100 80GB HBM3"
AXES = {"M": "Num Rows 1", "K": "Num Cols 1 / Rows 2", "N": "Num Cols 2"}


def only(sweeps):
    (sw,) = sweeps.values()
    return sw


def rec(sweep, shape):
    (r,) = [r for r in sweep.records if r.shape == shape]
    return r


# --- mamf-finder: real logs and pastes --------------------------------------------------------------------


def test_real_log_written_before_dash_headers() -> None:
    sw = only(import_sources("mamf-finder", [GPU0]).sweeps)
    assert sw.device["name"] == H100 and sw.peak.chip == "h100-sxm"
    assert sw.environment["software"]["versions"] == {"torch": "2.5.1+cu121", "cuda": "12.1"}
    imp = sw.extra["import"]
    assert imp["tool"] == "mamf-finder.py (benchmark version 2)"
    assert imp["measured_on"].startswith("2025-01-05 06:20:47")
    assert imp["repository"] == "shisa-ai/mamf-finder" and imp["license"] == "Apache-2.0"
    assert len(sw.records) == 8 and {r.dtype for r in sw.records} == {"bf16"}
    r = rec(sw, Shape(1, 1024, 1024, 1024))  # "1 |  134.8(mean)  134.9(median)  140.1(max) @ 1024x1024x1024"
    assert r.samples_s[0] == pytest.approx(2 * 1024**3 / 134.9e12)
    assert r.extra["source_mean_tflops"] == 134.8 and r.extra["source_max_tflops"] == 140.1
    assert r.timer == "cuda-events+flush" and r.extra["cache"] == "flush" and r.mode == "eager"
    assert "source_shape_reordered" not in r.flags and "truncated" not in r.flags
    # the excerpt keeps 8 of the 3375 shapes: said, not hidden
    assert any("3375 shapes were tried; the log holds 8" in n for n in imp["notes"])


def test_real_fp8_log() -> None:
    sw = only(import_sources("mamf-finder", [FP8]).sweeps)
    assert {r.dtype for r in sw.records} == {"fp8"}
    assert sw.extra["import"]["dtype_keys"] == {"fp8": "torch.float8_e4m3fn"}


def test_real_summary_only_paste_of_version_1() -> None:
    """PR #60's GH200 paste: header without `- `, no per-shape lines, the 2024-08 one-number summary."""
    sw = only(import_sources("mamf-finder", [PR60]).sweeps)
    (r,) = sw.records
    assert sw.device["name"] == "NVIDIA GH200 480GB" and r.dtype == "bf16"
    # printed 11264x19712x1536 with the contraction in the middle (m x n @ n x k until 2025-01-04)
    assert r.shape == Shape(1, 11264, 1536, 19712) and r.extra["source_shape"] == "11264x19712x1536"
    assert r.tflops == pytest.approx(821.0)
    assert {"summary_only", "best_of_search", "source_min_time", "source_shape_reordered"} <= set(r.flags)
    assert r.timer == "imported-best" and r.extra["cache"] == "none"  # version 1 had no cache flush
    assert "biased upward" in sw.extra["import"]["timing_method"]
    assert sw.environment["software"]["versions"]["torch"] == "2.4.0a0+f70bd71a48.nv24.06"


def test_two_gpus_of_one_node_get_their_own_labels_and_per_file_labels_still_work(tmp_path) -> None:
    # gpu0 and gpu1 print different uuids (57a10f45-..., becb720b-...): two GPUs, no clash, no --label needed
    out = tmp_path / "o"
    res = run("mamf-finder", str(GPU0), str(GPU1), "-o", str(out))
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.glob("*.json")) == ["NVIDIA-H100-80GB-HBM3-57a10f45.json",
                                                          "NVIDIA-H100-80GB-HBM3-becb720b.json"]
    # a plain --label applies to both files and clashes; the error names the per-file option that fixes it
    line = one_line_error(run("mamf-finder", str(GPU0), str(GPU1), "-o", str(out), "--label", f"{H100}=x"),
                          "label 'x'", GPU1.name)
    hint = shlex.split(line.split("--label ", 1)[1])[0]
    assert hint == f"{GPU1.name}:{H100}=NAME"
    out2 = tmp_path / "o2"
    res = run("mamf-finder", str(GPU0), str(GPU1), "-o", str(out2), "--label", hint.replace("NAME", "h100-gpu1"))
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out2.glob("*.json")) == ["NVIDIA-H100-80GB-HBM3-57a10f45.json", "h100-gpu1.json"]
    assert all(validate_file(p) == [] for p in out2.glob("*.json"))
    gpu1 = json.loads((out2 / "h100-gpu1.json").read_text())
    # gpu1 line 1: "137.5(mean)  137.2(median)  142.5(max) @ 1024x1024x1024"
    assert gpu1["import"]["source_file"] == GPU1.name and gpu1["records"][0]["tflops"] == pytest.approx(137.2)


def test_per_file_label_by_path_and_chip(tmp_path) -> None:
    twin = tmp_path / "twin"
    twin.mkdir()
    shutil.copy(XLA, twin / XLA.name)
    # two tables with the same file name: the name alone is ambiguous, the path is not; one error lists
    # every clash with the option that fixes it, and applying them all works
    line = one_line_error(run("xla-perf-table", str(XLA), str(twin / XLA.name), "-o", str(tmp_path / "o")),
                          "label 'sm_100_B200'", "also 'sm_90', 'gfx950'", f"--label {twin / XLA.name}:sm_90=NAME")
    fixes = [re.sub(r":(\w+)=NAME$", r":\1=\1-twin", a) for a in shlex.split(line.split("per file: ", 1)[1])]
    res = run("xla-perf-table", str(XLA), str(twin / XLA.name), "-o", str(tmp_path / "o"), *fixes)
    assert res.exit_code == 0 and len(list((tmp_path / "o").glob("*-twin.json"))) == 3, res.output
    one_line_error(run("xla-perf-table", str(XLA), str(twin / XLA.name), "-o", str(tmp_path / "o"),
                       "--label", f"{XLA.name}:sm_90=a"), "matches several sources")
    labels = {f"{twin / XLA.name}:{k}": f"twin-{k}" for k in ("sm_100_B200", "sm_90", "gfx950")}
    res = import_sources("xla-perf-table", [XLA, twin / XLA.name], labels=labels,
                         chip_overrides={f"{twin / XLA.name}:gfx950": "mi350x"})
    assert sorted(res.sweeps) == ["gfx950", "sm_100_B200", "sm_90", "twin-gfx950", "twin-sm_100_B200", "twin-sm_90"]
    assert res.sweeps["twin-gfx950"].peak.chip == "mi350x" and res.sweeps["gfx950"].peak.chip == "mi355x"
    with pytest.raises(SourceError, match="has no device 'sm_999'"):
        import_sources("xla-perf-table", [XLA], labels={f"{XLA.name}:sm_999": "x"})
    # --only per file: one device of the twin, all of the first table
    res = import_sources("xla-perf-table", [XLA, twin / XLA.name], only=[f"{twin / XLA.name}:gfx950"],
                         labels={f"{twin / XLA.name}:gfx950": "twin-gfx950"})
    assert sorted(res.sweeps) == ["twin-gfx950"]
    res = import_sources("mamf-finder", [GPU0, GPU1], only=[f"{GPU1.name}:{H100}"])
    assert [sw.extra["import"]["source_file"] for sw in res.sweeps.values()] == [GPU1.name]


# --- mamf-finder: every layout, SYNTHETIC lines from the script's format strings ----------------------------


def _shape_line(era: str, n: int, mean: float, median: float, mx: float, cfg: str) -> str:
    """One per-shape line as the script printed it in each era (numbers made up)."""
    if era == "v1":  # 12a2c44 (2024-08-07)
        return f"{n:>6} | {mx:6.1f} TFLOPS @ {cfg:<20} | best: {mx:6.1f} TFLOPS @ {cfg} (MxNxK)"
    if era == "v1-median":  # 9057122 (2024-12-23)
        return (f"{n:>6} | {mx:6.1f}(max) / {median:6.1f}(median) TFLOPS @ {cfg:<20} | best: {mx:6.1f}(max)/"
                f"{median:6.1f}(median) TFLOPS @ {cfg} (MxNxK)")
    if era == "v2-max-first":  # dacf05a (2025-01-03)
        return (f"{n:>6} | {mx:6.1f}(max) {median:6.1f}(median) {mean:6.1f}(mean) @ {cfg:<20} | best: "
                f"{mx:6.1f}(max) {median:6.1f}(median) {mean:6.1f}(mean) TFLOPS")
    tag, tinfo = ("   wave ", " |  688W 1980MHz SUSPECT") if era == "v4" else ("", "")  # 082816f (fast-mamf)
    return (f"{n:>6} | {tag}{mean:6.1f}(mean) {median:6.1f}(median) {mx:6.1f}(max) @ {cfg:<20} | best: "
            f"{mean:6.1f}(mean) {median:6.1f}(median) {mx:6.1f}(max) TFLOPS{tinfo}")


def _synthetic_log(tmp_path: Path, era: str, dash: bool = False) -> Path:
    d = "- " if dash else ""
    head = (f"\nBenchmark started on 2026-01-01 00:00:00\n\n** Command line:\n/usr/bin/python mamf-finder.py "
            f"--dtype bfloat16\n\n** Dtype: torch.bfloat16\n\n** Platform/Device info:\n{d}Linux host\n"
            f"{d}_CudaDeviceProperties(name='{H100}', major=9, minor=0)\n\n** Critical software versions:\n"
            f"{d}torch=2.9.0\n{d}cuda=12.8\n\n{'-' * 80}\n\n")
    lines = [_shape_line(era, 1, 600.0, 610.0, 650.0, "1024x2048x4096"),
             _shape_line(era, 2, 700.0, 701.5, 720.0, "2048x4096x8192")]
    summary = ("\nTried 2 shapes => the best outcomes were:\nmean:   700.0 TFLOPS @ 2048x4096x8192 (MxNxK)\n"
               "median: 701.5 TFLOPS @ 2048x4096x8192 (MxNxK)\nmax:    720.0 TFLOPS @ 2048x4096x8192 (MxNxK)\n")
    f = tmp_path / f"{era}.log"
    f.write_text(head + "\r".join(lines) + "\r\033[K" + summary + "Elapsed time: 0:00:09\n")
    return f


@pytest.mark.parametrize("era,middle_is_k,stat,timer,cache", [
    ("v1", True, "max", "cuda-events", "none"),
    ("v1-median", True, "median", "cuda-events+flush", "flush"),
    ("v2-max-first", True, "median", "cuda-events+flush", "flush"),
    ("v2", False, "median", "cuda-events+flush", "flush"),
    ("v4", False, "median", "cuda-events+flush", "flush"),
])
def test_every_per_shape_layout(tmp_path, era, middle_is_k, stat, timer, cache) -> None:
    sw = only(import_sources("mamf-finder", [_synthetic_log(tmp_path, era, dash=era == "v4")]).sweeps)
    shape = Shape(1, 2048, 8192, 4096) if middle_is_k else Shape(1, 2048, 4096, 8192)
    r = rec(sw, shape)
    value = {"max": 720.0, "median": 701.5}[stat]
    assert r.tflops == pytest.approx(value) and r.extra["source_statistic"] == stat
    assert r.timer == timer and r.extra["cache"] == cache and r.flops == 2 * 2048 * 4096 * 8192
    assert ("source_shape_reordered" in r.flags) == middle_is_k and ("source_min_time" in r.flags) == (stat == "max")
    assert sw.device["name"] == H100 and sw.environment["software"]["versions"]["cuda"] == "12.8"
    method = sw.extra["import"]["timing_method"]
    if era == "v4":
        assert r.extra["power_w"] == 688 and r.extra["clock_mhz"] == 1980 and "suspect_power" in r.flags
        assert r.extra["search_phase"] == "wave"
        assert "20 cuda-event-timed" in method and "scout readings" in method  # --scout_num_iterations default
    else:
        assert "100 cuda-event-timed" in method
    assert sw.extra["import"]["source_summary"][1] == {"statistic": "median", "tflops": 701.5,
                                                       "shape": "2048x4096x8192"}


@pytest.mark.parametrize("text,stat,tflops,shape,flags", [
    ("The best outcome was 785.5(max)/765.5(median) TFLOPS @ 4096x3072x13312 (MxNxK) (tried 3375 shapes)",
     "median", 765.5, Shape(1, 4096, 13312, 3072), {"source_shape_reordered"}),
    ("Tried  3375 shapes => the best outcomes were:\nmean:   761.0 TFLOPS @ 2048x2048x15360 (MxNxK)\n"
     "median: 765.5 TFLOPS @ 4096x3072x13312 (MxNxK)\nmax:    785.5 TFLOPS @ 4096x3072x13312 (MxNxK)\n",
     "median", 765.5, Shape(1, 4096, 3072, 13312), set()),
    ("MAMF (max achievable,  boost burst): 1018.3 TFLOPS @ 4096x8192x8192 (MxNxK)  688W 1980MHz\n"
     "MSMF (max sustainable, saturated):   901.2 TFLOPS @ 8192x8192x8192 (MxNxK)  700W 1755MHz\n",
     "msmf", 901.2, Shape(1, 8192, 8192, 8192), set()),
])
def test_summary_only_pastes(tmp_path, text, stat, tflops, shape, flags) -> None:
    """SYNTHETIC pastes in each summary form; a bare paste names no dtype, so --dtype is needed."""
    f = tmp_path / "paste.txt"
    f.write_text(text)
    with pytest.raises(SourceError, match="pass --dtype"):
        import_sources("mamf-finder", [f])
    res = import_sources("mamf-finder", [f], dtype="bf16")
    sw = only(res.sweeps)
    (r,) = sw.records
    assert r.shape == shape and r.tflops == pytest.approx(tflops) and r.extra["source_statistic"] == stat
    assert {"summary_only", "best_of_search"} | flags <= set(r.flags) and r.timer == "imported-best"
    assert sw.device["name"] == "unknown" and any("no spec entry" in w for w in res.warnings)
    if stat == "msmf":
        assert r.extra["power_w"] == 700 and r.extra["source_best_mamf"]["tflops"] == 1018.3


def test_summary_without_a_shape_is_one_line_error(tmp_path) -> None:
    f = tmp_path / "paste.txt"
    f.write_text("** Dtype: torch.bfloat16\n\nThe best outcome was 785.5TFLOPS\n")
    one_line_error(run("mamf-finder", str(f), "-o", str(tmp_path / "o")), "paste.txt", "no shape", "785.5")


def test_cut_log_is_a_flagged_partial_import(tmp_path) -> None:
    text = GPU0.read_text()
    cut = text[: text.index("@ 1024x1024x6144") - 10]  # inside the 6th per-shape line, before the summary
    f = tmp_path / "cut.txt"
    f.write_text(cut)
    sw = only(import_sources("mamf-finder", [f]).sweeps)
    assert len(sw.records) == 5 and all("truncated" in r.flags for r in sw.records)
    imp = sw.extra["import"]
    assert imp["truncated"] is True and imp["skipped_lines"] == {"cut mid-line at the end of the file": 1}
    assert any("no final summary" in n for n in imp["notes"])
    head = tmp_path / "head.txt"
    head.write_text(text[: text.index("** Critical software")])
    one_line_error(run("mamf-finder", str(head), "-o", str(tmp_path / "o")), "head.txt", "cut before the first shape")


# --- nvbench CSV and markdown -----------------------------------------------------------------------------


@pytest.mark.parametrize("src,fragment", [
    (NVB_README, "no M, N, K axis (has: NumElements, DataSize)"),
    (NVB_CSV, "line 2 (benchmark 'Simple Matrix Matrix Multiplication"),
    (NVB_MD, "line 24 (benchmark 'Simple Matrix Matrix Multiplication"),
])
def test_real_nvbench_outputs_without_gemm_axes(tmp_path, src, fragment) -> None:
    one_line_error(run("nvbench", str(src), "-o", str(tmp_path / "o")), src.name, fragment, "--axis")


@pytest.mark.parametrize("src", [NVB_CSV, NVB_MD])
def test_real_gemm_axes_map_and_the_integer_dtype_is_refused(tmp_path, src) -> None:
    axes = [a for k, v in AXES.items() for a in ("--axis", f"{k}={v}")]
    one_line_error(run("nvbench", str(src), "-o", str(tmp_path / "o"), *axes), src.name, "unknown dtype key 'U32'")


def _as_f32(src: Path, tmp_path: Path) -> Path:
    """SYNTHETIC: the real excerpt with its integer type U32 renamed F32, so the values import."""
    f = tmp_path / src.name.replace("excerpt", "as_f32")
    f.write_text(src.read_text().replace("U32", "F32"))
    return f


def test_nvbench_csv_and_markdown_values(tmp_path) -> None:
    csv_sw = only(import_sources("nvbench", [_as_f32(NVB_CSV, tmp_path)], axes=AXES).sweeps)
    md_sw = only(import_sources("nvbench", [_as_f32(NVB_MD, tmp_path)], axes=AXES).sweeps)
    assert csv_sw.device["name"] == md_sw.device["name"] == "NVIDIA GeForce RTX 3060"
    two = rec(csv_sw, Shape(1, 2, 2, 2))
    assert two.samples_s == (7.096711333182266e-06,) and two.dtype == "fp32"  # "GPU Time (sec)" of line 2
    assert two.timer == "nvbench-cold" and two.extra["cache"] == "flush" and "source_mean" in two.flags
    assert two.extra["source_samples"] == 70456
    skipped = rec(csv_sw, Shape(1, 8, 2, 2))  # "Skipped: Yes": kept as an error record, not dropped
    assert skipped.status == "error" and "skipped by nvbench" in skipped.error
    assert len(md_sw.records) == 3  # markdown lists no skipped states (said in the notes)
    assert any("no skipped states" in n for n in md_sw.extra["import"]["notes"])
    for r in md_sw.records:  # the same states, printed to 3 decimals of us in markdown
        c = rec(csv_sw, r.shape)
        assert r.median_s == pytest.approx(c.median_s, abs=0.5e-9) and "rounded_source" in r.flags
    assert md_sw.environment["software"]["sm_version"].startswith("860")


def test_nvbench_csv_missing_axis_cut_row_and_batch_only(tmp_path) -> None:
    """SYNTHETIC CSVs in nvbench's layout."""
    head = "Benchmark,Device,Device Name,T,M,N,Skipped,Samples,GPU Time (sec),Noise\n"
    f = tmp_path / "mn.csv"
    f.write_text(head + "gemm,0,NVIDIA H100,F32,64,64,No,10,1e-05,0.01\n")
    one_line_error(run("nvbench", str(f), "-o", str(tmp_path / "o")), "mn.csv", "line 2", "no K axis", "has: T, M, N")
    head = "Benchmark,Device,Device Name,T,M,N,K,Skipped,Samples,GPU Time (sec),Noise\n"
    cut = tmp_path / "cut.csv"
    cut.write_text(head + "gemm,0,NVIDIA H100,F32,64,64,64,No,10,1e-05,0.01\ngemm,0,NVIDIA H100,F32,128,64,6")
    sw = only(import_sources("nvbench", [cut]).sweeps)
    assert len(sw.records) == 1 and "truncated" in sw.records[0].flags
    assert sw.extra["import"]["skipped_lines"] == {"cut mid-row at the end of the file": 1}
    batch = tmp_path / "batch.csv"
    batch.write_text("Benchmark,Device,Device Name,T,M,N,K,Skipped,Samples,Batch GPU (sec)\n"
                     "gemm,0,NVIDIA H100,F32,64,64,64,No,1000,2e-06\n")
    (r,) = only(import_sources("nvbench", [batch]).sweeps).records
    assert r.timer == "nvbench-batch" and r.extra["cache"] == "none" and r.samples_s == (2e-6,)


# --- every source: vocabulary and bad input ---------------------------------------------------------------


def test_every_importer_writes_the_documented_vocabulary(tmp_path) -> None:
    sources = [("mamf-finder", GPU0, {}), ("mamf-finder", PR60, {}), ("xla-perf-table", XLA, {}),
               ("deepbench", DATA / "DeepBench_NV_P100.xlsx", {}),
               ("nvbench", _as_f32(NVB_CSV, tmp_path), {"axes": AXES})]
    seen = set()
    for fmt, src, kw in sources:
        for sw in import_sources(fmt, [src], **kw).sweeps.values():
            t = sw.settings["timing"]
            for r in sw.records:
                assert r.timer in TIMERS and r.extra["cache"] in CACHES and r.mode in ("eager", "compile")
                assert (r.timer, r.extra["cache"], r.mode) == (t["timer"], t["cache"], t["mode"])
                seen.add(r.timer)
    assert seen == {"cuda-events+flush", "imported-best", "cupti-kernel", "roctracer-kernel", "host-mean",
                    "nvbench-cold"}
    sw = only(import_sources("mamf-finder", [GPU0]).sweeps)
    assert timing_of(sw, sw.records[0]) == ("cuda-events+flush", "flush", "eager")
    (measured,) = load_sweeps([Path(__file__).parent / "data" / "short-sweep" / "cpu-4-shapes.json"])
    assert timing_of(measured, measured.records[0]) == ("host", "rotate", measured.records[0].mode)
    (old,) = load_sweeps([Path(__file__).parent / "golden" / "v1_sweep.json"])  # written before --cache
    assert timing_of(old, old.records[0])[1] == "unknown"
    docs = (Path(__file__).parents[1] / "docs" / "importing.md").read_text()
    assert all(f"`{t}`" in docs for t in TIMERS)


def _junk(kind: str, tmp_path: Path) -> Path:
    f = tmp_path / f"{kind}.bin"
    if kind == "empty":
        f.write_bytes(b"")
    elif kind == "random":
        f.write_bytes(random.Random(19).randbytes(3000))
    elif kind == "nul":
        f.write_bytes(b"\x00" * 500 + b"** Dtype: torch.bfloat16\n")
    else:
        f.write_text("hello\nworld\n" * 20)
    return f


@pytest.mark.parametrize("fmt", ["mamf-finder", "nvbench", "xla-perf-table", "deepbench"])
@pytest.mark.parametrize("kind", ["empty", "random", "nul", "text"])
def test_junk_is_one_line_error_naming_the_file(tmp_path, fmt, kind) -> None:
    src = _junk(kind, tmp_path)
    one_line_error(run(fmt, str(src), "-o", str(tmp_path / "o")), src.name)
    assert not (tmp_path / "o").exists()


def test_mixed_formats_in_one_call_name_the_odd_file(tmp_path) -> None:
    line = one_line_error(run("mamf-finder", str(GPU0), str(XLA), "-o", str(tmp_path / "o")), XLA.name)
    assert "looks like xla-perf-table" in line and not (tmp_path / "o").exists()
    axes = [a for k, v in AXES.items() for a in ("--axis", f"{k}={v}")]
    line = one_line_error(run("nvbench", str(_as_f32(NVB_CSV, tmp_path)), str(GPU0), "-o", str(tmp_path / "o"),
                              *axes), GPU0.name)
    assert "looks like mamf-finder" in line
    line = one_line_error(run("xla-perf-table", str(PR60), "-o", str(tmp_path / "o")), PR60.name)
    assert "looks like mamf-finder" in line


@settings(max_examples=80, deadline=None, derandomize=True)
@given(cut=st.integers(min_value=1, max_value=2073), drop=st.lists(st.integers(min_value=0, max_value=40), max_size=4))
def test_any_cut_or_lost_lines_of_a_log_is_an_error_or_a_flagged_import(tmp_path_factory, cut, drop) -> None:
    """No cut of the real log and no lost lines give a traceback, and a log without its summary is flagged."""
    lines = GPU0.read_text()[:cut].split("\n")
    text = "\n".join(ln for i, ln in enumerate(lines) if i not in drop)
    f = tmp_path_factory.mktemp("cut") / "cut.txt"
    f.write_text(text)
    try:
        sw = only(import_sources("mamf-finder", [f]).sweeps)
    except SourceError as exc:
        assert "cut.txt" in str(exc)
        return
    full = {r.shape: r.median_s for r in only(import_sources("mamf-finder", [GPU0]).sweeps).records}
    assert all(full[r.shape] == r.median_s for r in sw.records if r.status == "ok")  # never a mangled value
    if parse_summary(text.split("\n")) is None and not any("summary_only" in r.flags for r in sw.records):
        assert all("truncated" in r.flags for r in sw.records)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(cut=st.integers(min_value=1, max_value=1497))
def test_any_cut_of_a_csv_is_an_error_or_a_flagged_import(tmp_path_factory, cut) -> None:
    f = tmp_path_factory.mktemp("cut") / "cut.csv"
    text = NVB_CSV.read_text().replace("U32", "F32")[:cut]
    f.write_text(text)
    try:
        sw = only(import_sources("nvbench", [f], axes=AXES).sweeps)
    except SourceError as exc:
        assert "cut.csv" in str(exc)
        return
    full = {r.shape: r.median_s for r in only(import_sources("nvbench", [_as_f32(NVB_CSV, tmp_path_factory.mktemp(
        "full"))], axes=AXES).sweeps).records}
    assert all(full[r.shape] == r.median_s for r in sw.records)  # never a value cut short
    # a cut right after a newline leaves a valid shorter file (CSV has no end marker); any other cut is flagged
    assert ("truncated" in sw.records[0].flags) == (not text.endswith("\n"))


# --- other tools' JSON: refused with what it looks like and what reads it ---------------------------------------

# SYNTHETIC: small samples in each tool's own layout (pyperf's BenchmarkSuite JSON, version 1.0; Google
# Benchmark's JSON reporter), numbers made up. Both have a top-level "benchmarks" list, as nvbench has.
PYPERF = {"benchmarks": [{"metadata": {"name": "sgemm_1024", "loops": 4},
                          "runs": [{"metadata": {"date": "2025-03-01 10:00:00.1", "duration": 0.52},
                                    "values": [0.0131, 0.0129, 0.0130], "warmups": [[4, 0.0142]]}]}],
          "metadata": {"cpu_count": 16, "hostname": "bench-host", "perf_version": "2.8.1", "unit": "second",
                       "timer": "clock_gettime(CLOCK_MONOTONIC), resolution: 1.00 ns"},
          "version": "1.0"}
GBENCH = {"context": {"date": "2025-03-01T10:00:00+00:00", "host_name": "bench-host", "executable": "./gemm_bench",
                      "num_cpus": 16, "mhz_per_cpu": 3000, "cpu_scaling_enabled": False,
                      "caches": [{"type": "Data", "level": 1, "size": 32768, "num_sharing": 2}],
                      "load_avg": [0.5, 0.4, 0.3], "library_version": "v1.9.1", "library_build_type": "release",
                      "json_schema_version": 1},
          "benchmarks": [{"name": "BM_Sgemm/1024/1024/1024", "family_index": 0, "per_family_instance_index": 0,
                          "run_name": "BM_Sgemm/1024/1024/1024", "run_type": "iteration", "repetitions": 1,
                          "repetition_index": 0, "threads": 1, "iterations": 52, "real_time": 1.31e7,
                          "cpu_time": 1.30e7, "time_unit": "ns", "items_per_second": 76.3}]}
FOREIGN = {"pyperf": (PYPERF, "pyperf JSON", "python -m pyperf show"),
           "gbench": (GBENCH, "Google Benchmark JSON", "tools/compare.py")}


@pytest.mark.parametrize("fmt", ["nvbench", "tritonbench", "mamf-finder", "xla-perf-table", "deepbench"])
@pytest.mark.parametrize("tool", sorted(FOREIGN))
def test_pyperf_and_google_benchmark_json_never_become_records(tmp_path, fmt, tool) -> None:
    doc, what, reader = FOREIGN[tool]
    src = tmp_path / f"{tool}.json"
    src.write_text(json.dumps(doc, indent=2))
    dtype = ["--dtype", "fp32"] if fmt in ("nvbench", "tritonbench", "mamf-finder") else []
    line = one_line_error(run(fmt, str(src), *dtype, "-o", str(tmp_path / "o")), src.name, what, reader)
    assert f"not {fmt} output" in line and not (tmp_path / "o").exists()


def test_a_sweep_given_to_import_and_nvbench_or_pyperf_given_to_compare(tmp_path) -> None:
    sweep = Path(__file__).parents[1] / "sweeps" / "amd-epyc-cpu.json"
    one_line_error(run("nvbench", str(sweep), "-o", str(tmp_path / "o")), "an mfu-sweep result",
                   "no import needed: compare, fit, plot and report read it")
    nvb = DATA / "nvbench_test_ref_excerpt.json"
    for cmd in ("compare", "fit", "export"):
        res = CliRunner().invoke(main, [cmd, str(nvb), str(sweep)])
        one_line_error(res, "not an mfu-sweep result", "it looks like nvbench JSON output",
                       f"mfu-sweep import nvbench {nvb} -o DIR")
    src = tmp_path / "pyperf.json"
    src.write_text(json.dumps(PYPERF))
    one_line_error(CliRunner().invoke(main, ["compare", str(src), str(sweep)]), "pyperf JSON", "pyperf show")
    tb = DATA / "tritonbench_gemm_bf16_synthetic.csv"
    one_line_error(run("nvbench", str(tb), "-o", str(tmp_path / "o")), "looks like tritonbench output")
    one_line_error(CliRunner().invoke(main, ["compare", str(DATA / "tritonbench_gemm_bf16_synthetic.json"),
                                             str(sweep)]), "tritonbench --output-json", "--dtype DTYPE")


def test_json_kinds_are_told_apart_by_structure() -> None:
    from mfu_sweep.records.foreign import json_kind

    nvb = json.loads((DATA / "nvbench_test_ref_excerpt.json").read_text())
    assert [json_kind(d) for d in (nvb, PYPERF, GBENCH)] == ["nvbench", "pyperf", "google-benchmark"]
    pytest_bench = {"machine_info": {"node": "h"}, "commit_info": {}, "version": "4.0.0", "datetime": "2025",
                    "benchmarks": [{"group": None, "name": "test_mm", "fullname": "t.py::test_mm",
                                    "stats": {"min": 0.01, "median": 0.011}}]}
    analysis = {"tool": {"name": "mfu-sweep", "version": "0.1.0"}, "metric": "mfu", "fits": [], "comparisons": []}
    assert [json_kind(d) for d in (pytest_bench, analysis, {"benchmarks": []}, [], {"a": 1})] == \
        ["pytest-benchmark", "mfu-sweep-analysis", None, None, None]
