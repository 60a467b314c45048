"""`mfu-sweep import`: real excerpts of the published sources parse to the right records, carry their
provenance, validate, and every bad input is a one-line error that writes nothing.

Fixtures live in tests/data/import/ (see the README there): excerpts of the cited files, except the
mamf-finder log, which is synthetic (no published log exists), and the GEMM nvbench file, built here
from the real nvbench excerpt (synthetic values, marked below).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from mfu_sweep.cli import main
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.importers import import_sources
from mfu_sweep.importers.common import SourceError
from mfu_sweep.importers.txtpb import TextProtoError, parse
from mfu_sweep.records.results import load_sweeps, parse_document, validate_file

DATA = Path(__file__).parent / "data" / "import"
XLA = DATA / "xla_main_excerpt.txtpb"
XLA_SOL = DATA / "xla_rocm_sol_excerpt.txtpb"
P100 = DATA / "DeepBench_NV_P100.xlsx"
TITANXP = DATA / "DeepBench_NV_TitanXp.xlsx"
MAMF = DATA / "mamf_finder_synthetic.log"
NVB_REAL = DATA / "nvbench_test_ref_excerpt.json"


def run(*args: str):
    return CliRunner().invoke(main, ["import", *args])


def rec(sweep, dtype, shape):
    (r,) = [r for r in sweep.records if r.dtype == dtype and r.shape == shape]
    return r


# --- XLA table -------------------------------------------------------------------------------------------


def test_xla_excerpt_values_and_provenance() -> None:
    res = import_sources("xla-perf-table", [XLA])
    assert list(res.sweeps) == ["sm_100_B200", "sm_90", "gfx950"]
    b200 = res.sweeps["sm_100_B200"]
    # bf16, f32 and e4m3 fp8 keys per entry; the mixed e4m3/e5m2 keys have no dtype here
    assert sorted({r.dtype for r in b200.records}) == ["bf16", "fp32", "fp8"]
    r = rec(b200, "bf16", Shape(1, 256, 256, 256))
    # 2*256^3 FLOP at 6765006451612 FLOP/s: the generator's whole-ns kernel time is 4960 ns
    assert r.extra["kernel_time_ns"] == 4960 and r.samples_s == (4960e-9,)
    assert r.median_s == pytest.approx(4.96e-6) and r.iqr_s == 0
    assert r.extra["source_dtype"] == "bf16xbf16->bf16" and r.extra["source_value"] == 6765006451612
    assert {"imported", "single_value"} <= set(r.flags) and r.timer == "cupti-kernel" and r.mode == "compile"
    assert r.extra["cache"] == "none"
    assert "maybe_tf32" in rec(b200, "fp32", Shape(1, 256, 256, 256)).flags
    assert r.mfu == pytest.approx(r.tflops / 2250.0)
    imp = b200.extra["import"]
    assert imp["format"] == "xla-perf-table" and imp["commit"] == "dc660322168302831d1cbc4c99683cd79671286e"
    assert imp["repository"].startswith("openxla/xla") and imp["license"] == "Apache-2.0"
    assert "CUPTI" in imp["timing_method"] and imp["dtype_keys"]["fp32"] == "f32xf32->f32"
    assert any("TF32" in n for n in imp["notes"]) and any("clocks" in u for u in imp["unknown"])
    assert any("f8e4m3fnxf8e5m2->bf16" in n for n in imp["notes"])  # skipped keys are said, not hidden
    assert b200.device["backend"] == "imported" and b200.peak.chip == "b200"


def test_gfx942_uses_roctracer_and_fnuz() -> None:
    res = import_sources("xla-perf-table", [XLA_SOL], chip_overrides={"gfx942": "mi325x"})
    sw = res.sweeps["gfx942"]
    assert sw.peak.chip == "mi325x" and not res.warnings  # an override silences the ambiguity warning
    fp8 = [r for r in sw.records if r.dtype == "fp8"]
    assert fp8 and all(r.extra["source_dtype"] == "f8e4m3fnuzxf8e4m3fnuz->bf16" for r in fp8)
    # the fp8 flavour per record (issue 48): gfx942's fp8 is e4m3fnuz, the other chips' e4m3fn
    assert {r.extra.get("fp8_format") for r in fp8} == {"e4m3fnuz"}
    assert all("fp8_format" not in r.extra for r in sw.records if r.dtype != "fp8")
    others = import_sources("xla-perf-table", [XLA]).sweeps["sm_90"].records
    assert {r.extra.get("fp8_format") for r in others if r.dtype == "fp8"} == {"e4m3fn"}
    assert all(r.timer == "roctracer-kernel" for r in sw.records)


@pytest.mark.parametrize(("name", "want"), [
    ("torch.float8_e4m3fnuz", "e4m3fnuz"), ("torch.float8_e4m3fn", "e4m3fn"), ("float8_e5m2", "e5m2"),
    ("f8e4m3fnuzxf8e4m3fnuz->bf16", "e4m3fnuz"), ("f8e4m3fnxf8e4m3fn->bf16", "e4m3fn"), ("__nv_fp8_e4m3", "e4m3fn"),
    ("e4m3", "e4m3fn"), ("f8e5m2fnuzxf8e5m2fnuz->bf16", "e5m2fnuz"),
    ("f8e4m3fnxf8e5m2->bf16", None), ("fp8", None), ("--dtype fp8", None), ("bf16xbf16->bf16", None),
])
def test_fp8_format_is_read_off_the_type_name_or_left_unknown(name: str, want: str | None) -> None:
    from mfu_sweep.gemm.dtypes import fp8_format

    assert fp8_format(name) == want


def test_ambiguous_gfx950_warns_naming_both() -> None:
    res = import_sources("xla-perf-table", [XLA])
    (w,) = [w for w in res.warnings if w.startswith("gfx950")]
    assert "mi355x" in w and "mi350x" in w
    assert res.sweeps["gfx950"].peak.chip == "mi355x"
    chosen = import_sources("xla-perf-table", [XLA], chip_overrides={"gfx950": "mi350x"})
    assert chosen.sweeps["gfx950"].peak.chip == "mi350x"
    assert not [w for w in chosen.warnings if w.startswith("gfx950")]


def test_txtpb_reader_subset() -> None:
    msg = parse('a: 1 b: "x\\"y" # c\n m { k: -2.5e3 n < v: ident > }')
    assert msg.all("a") == [1] and msg.all("b") == ['x"y']
    (m,) = msg.all("m")
    assert m.all("k") == [-2500.0] and m.all("n")[0].all("v") == ["ident"]
    with pytest.raises(TextProtoError, match="opened at line 1"):
        parse("m { a: 1")
    with pytest.raises(TextProtoError, match="unmatched"):
        parse("a: 1 }")


# --- DeepBench -------------------------------------------------------------------------------------------


def test_deepbench_excerpt_k1530_rounding_layouts() -> None:
    res = import_sources("deepbench", [P100, TITANXP])
    assert list(res.sweeps) == ["NV_P100", "NV_TitanXp"]
    p100 = res.sweeps["NV_P100"]
    assert p100.device["name"] == "NVIDIA Tesla P100" and p100.device["backend"] == "imported"
    assert sorted({r.dtype for r in p100.records}) == ["fp16", "fp32"]
    r = rec(p100, "fp32", Shape(1, 1760, 16, 1760))
    assert r.samples_s == (55e-6,) and "rounded_source" in r.flags and r.timer == "host-mean"
    assert r.extra["cache"] == "none" and p100.settings["timing"]["timer"] == "host-mean"
    # every row with its layout: the TN row of this shape is a record of its own (a series of its own), never
    # dropped for the NN one (issue 48: 83 of 160 rows per chip survived)
    assert r.extra["source_layout"] == "NN" and r.shape.layout == "nn"
    tn = rec(p100, "fp32", Shape(1, 1760, 16, 1760, "tn"))
    assert tn.samples_s == (81e-6,) and tn.extra["source_layout"] == "TN" and tn.series_mode == "eager-tn"
    assert len([r for r in p100.records if r.dtype == "fp32"]) == 6  # all the excerpt's rows
    notes = p100.extra["import"]["notes"]
    assert any(n.startswith("rows per layout: fp32 5 nn, 1 tn; fp16 5 nn, 1 tn;") for n in notes)
    k = rec(p100, "fp32", Shape(1, 512, 24000, 1536))  # the sheet says K=1530
    assert "source_k_1530" in k.flags and k.extra["source_k"] == 1530
    assert k.flops == 2 * 512 * 24000 * 1536 and k.samples_s == (4364e-6,)
    assert not [r for r in p100.records if r.shape.k == 1530]
    assert "pseudo" not in rec(p100, "fp16", Shape(1, 1760, 32, 1760)).extra["source_dtype"].lower()
    imp = p100.extra["import"]
    assert imp["repository"] == "baidu-research/DeepBench" and imp["path"].endswith("DeepBench_NV_P100.xlsx")
    assert "400" in imp["timing_method"] and imp["timer_resolution_s"] == 1e-6
    assert p100.environment["software"]["CUDA Version"] == "8.0.88"
    # no spec entry for these chips: a warning, MFU left empty, never a guessed peak
    assert any(w.startswith("NV_P100: no spec entry") for w in res.warnings)
    assert p100.peak.chip is None and r.mfu is None and r.tflops == pytest.approx(r.flops / 55e-6 / 1e12)


def _deepbench_transpose(tmp_path: Path, cells: dict[int, str]) -> Path:
    """The P100 excerpt with the A Transpose of data rows of its first sheet (1-based within the GEMM section) set to
    ``cells``."""
    import openpyxl

    wb = openpyxl.load_workbook(P100)
    for ws in wb.worksheets:
        for row in ws.iter_rows():
            cols = [c.column for c in row if c.value == "A Transpose"]
            if cols:
                for k, value in cells.items():
                    ws.cell(row=row[0].row + k, column=cols[0]).value = value
                f = tmp_path / "DeepBench_transposes.xlsx"
                wb.save(f)
                return f  # the first sheet only
    raise AssertionError("no A Transpose column")


def test_deepbench_transpose_x_is_a_note_naming_its_row_never_a_silent_swap(tmp_path: Path) -> None:
    """Issue 47 item 10: a row with transpose ``X`` was dropped without a word and the TN row took its place."""
    f = _deepbench_transpose(tmp_path, {1: "X"})  # the NN row of 1760x16x1760 in the first sheet
    res = import_sources("deepbench", [f])
    (sw,) = res.sweeps.values()
    fp32 = [r for r in sw.records if r.dtype == "fp32"]
    assert len(fp32) == 5 and {str(r.shape) for r in fp32 if r.shape.m == 1760 and r.shape.n == 16} == {
        "1760x16x1760:tn"}  # the TN row stays what it is, a tn record; nothing stands in for the X row
    (note,) = [n for n in sw.extra["import"]["notes"] if "neither N nor T" in n]
    assert note.startswith("sheet 'Results FP32' row 4 (1760x16x1760): A Transpose 'X' is neither N nor T")
    out = tmp_path / "o"
    cli = run("deepbench", str(f), "-o", str(out))
    assert cli.exit_code == 0 and "neither N nor T" in cli.output  # said on the terminal too


def test_deepbench_section_of_only_unknown_transposes_is_a_one_line_error(tmp_path: Path) -> None:
    f = _deepbench_transpose(tmp_path, {k: "?" for k in range(1, 7)})
    with pytest.raises(SourceError, match=r"section has no rows \(sheet 'Results FP32' row 4 \(1760x16x1760\): "
                                          r"A Transpose '\?' is neither N nor T"):
        import_sources("deepbench", [f])


def test_deepbench_published_sheets_import_every_row() -> None:
    """Issue 48's measured goal: 160 rows per chip wherever the sheet has them (77 nn, 73 tn, 10 nt)."""
    root = Path(__file__).resolve().parents[1] / "data" / "published" / "deepbench"
    res = import_sources("deepbench", [root / "DeepBench_AMD_MI25.xlsx", root / "DeepBench_NV_T4.xlsx"])
    for key, sw in res.sweeps.items():
        for dtype in {r.dtype for r in sw.records}:
            got = [r for r in sw.records if r.dtype == dtype]
            layouts = {lay: sum(r.shape.layout == lay for r in got) for lay in ("nn", "tn", "nt")}
            assert len(got) == 160 and layouts == {"nn": 77, "tn": 73, "nt": 10}, (key, dtype, layouts)


# --- mamf-finder and nvbench -----------------------------------------------------------------------------


def test_mamf_finder_log_with_dash_headers() -> None:
    """SYNTHETIC log (the `- ` header form of 2025-10 on, end="\r" lines); real logs: test_import_formats.py."""
    res = import_sources("mamf-finder", [MAMF])
    (sw,) = res.sweeps.values()
    assert sw.label == "NVIDIA-H100-80GB-HBM3" and sw.peak.chip == "h100-sxm"
    r = rec(sw, "bf16", Shape(1, 2048, 4096, 4096))
    assert r.samples_s[0] == pytest.approx(2 * 2048 * 4096 * 4096 / 701.5e12)
    assert r.timer == "cuda-events+flush" and "rounded_source" in r.flags and r.extra["source_mean_tflops"] == 700.4
    assert r.extra["cache"] == "flush" and r.mode == "eager"
    zero = rec(sw, "bf16", Shape(1, 3072, 4096, 4096))
    assert zero.status == "error" and zero.samples_s == ()
    imp = sw.extra["import"]
    assert "median of 100" in imp["timing_method"] and "truncated" not in imp
    assert sw.environment["software"]["versions"] == {"torch": "2.9.0", "cuda": "12.8"}
    assert sw.environment["software"]["environment"] == {"PYTORCH_TUNABLEOP_ENABLED": "0"}
    assert imp["tool"] == "mamf-finder.py (benchmark version 2)"


def _nvbench_gemm(tmp_path: Path, with_samples: bool) -> Path:
    """SYNTHETIC: the real nvbench excerpt with M/N/K/T axes and a median summary added."""
    root = json.loads(NVB_REAL.read_text())
    state = root["benchmarks"][0]["states"][0]
    state["axis_values"] = [{"name": n, "type": "int64", "value": str(v)} for n, v in (("M", 512), ("N", 256),
                                                                                       ("K", 128))]
    state["axis_values"].append({"name": "T", "type": "type", "value": "__nv_bfloat16"})
    state["summaries"].append({"tag": "nv/cold/time/gpu/median", "data": [
        {"name": "value", "type": "float64", "value": "2e-05"}]})
    if with_samples:
        from array import array

        (tmp_path / "s.bin").write_bytes(array("f", [1e-5, 2e-5, 3e-5]).tobytes())
        state["summaries"].append({"tag": "nv/json/bin:nv/cold/sample_times", "data": [
            {"name": "filename", "type": "string", "value": "s.bin"}]})
    f = tmp_path / "gemm.json"
    f.write_text(json.dumps(root))
    return f


def test_nvbench_gemm_states(tmp_path) -> None:
    res = import_sources("nvbench", [_nvbench_gemm(tmp_path, with_samples=False)])
    (sw,) = res.sweeps.values()
    (r,) = sw.records
    assert sw.device["name"] == "Quadro GV100" and r.dtype == "bf16" and r.samples_s == (2e-5,)
    assert r.timer == "nvbench-cold" and r.extra["cache"] == "flush" and "source_mean" not in r.flags
    res = import_sources("nvbench", [_nvbench_gemm(tmp_path, with_samples=True)])
    (r,) = next(iter(res.sweeps.values())).records
    assert r.samples_s == pytest.approx((1e-5, 2e-5, 3e-5)) and "single_value" not in r.flags


def test_real_nvbench_file_without_gemm_axes_is_refused() -> None:
    with pytest.raises(SourceError, match="no M, N, K axis"):
        import_sources("nvbench", [NVB_REAL])


# --- schema and CLI --------------------------------------------------------------------------------------


def test_cli_happy_path_validates_and_refuses_overwrite(tmp_path) -> None:
    out = tmp_path / "out"
    res = run("deepbench", str(P100), str(TITANXP), "-o", str(out))
    assert res.exit_code == 0, res.output
    files = sorted(out.glob("*.json"))
    assert [f.name for f in files] == ["NV_P100.json", "NV_TitanXp.json"]
    assert all(validate_file(f) == [] for f in files)
    sweeps = load_sweeps(files)
    assert sweeps[0].run["argv"][:2] == ["mfu-sweep", "import"]
    before = files[0].read_bytes()
    again = run("deepbench", str(P100), "-o", str(out))
    assert again.exit_code == 1 and "--force" in again.output and files[0].read_bytes() == before
    assert run("deepbench", str(P100), "-o", str(out), "--force").exit_code == 0


def test_cli_chip_override_and_xla(tmp_path) -> None:
    res = run("xla-perf-table", str(XLA), "-o", str(tmp_path), "--chip", "gfx950=mi350x", "--chip", "sm_90=h200-sxm")
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "gfx950.json").read_text())["peak"]["chip"] == "mi350x"
    assert json.loads((tmp_path / "sm_90.json").read_text())["peak"]["chip"] == "h200-sxm"
    assert "ambiguous" not in res.output


def test_imported_file_needs_its_import_block() -> None:
    data = import_sources("deepbench", [P100]).sweeps["NV_P100"].to_json()
    assert parse_document(json.loads(json.dumps(data)))
    del data["import"]
    with pytest.raises(ValueError, match="import"):
        parse_document(data)


def _truncated(src: Path, tmp_path: Path) -> Path:
    f = tmp_path / f"cut{src.suffix}"
    f.write_bytes(src.read_bytes()[: src.stat().st_size // 2])
    return f


def _renamed_key(tmp_path: Path) -> Path:
    f = tmp_path / "badkey.txtpb"
    f.write_text(XLA.read_text().replace("bf16xbf16->bf16", "q7xq7->q7", 1))
    return f


def _no_gemm_section(tmp_path: Path) -> Path:
    import openpyxl

    wb = openpyxl.load_workbook(P100)
    for ws in wb.worksheets:
        for row in ws.iter_rows():
            for c in row:
                if c.value == "Dense Matrix Multiplication":
                    c.value = "Sparse Matrix Multiplication"
    f = tmp_path / "DeepBench_nogemm.xlsx"
    wb.save(f)
    return f


@pytest.mark.parametrize("fmt,make,fragment", [
    ("xla-perf-table", lambda t: P100, "cannot read as text"),
    ("deepbench", lambda t: XLA, "not a readable xlsx workbook"),
    ("xla-perf-table", lambda t: _truncated(XLA, t), "truncated"),
    ("deepbench", lambda t: _truncated(P100, t), "not a readable xlsx workbook"),
    ("xla-perf-table", _renamed_key, "unknown dtype key 'q7xq7->q7'"),
    ("deepbench", _no_gemm_section, "no importable 'Dense Matrix Multiplication' section"),
    ("mamf-finder", lambda t: XLA, "not a mamf-finder log"),
    ("nvbench", lambda t: XLA, "not nvbench --json, --csv or --md output"),
    ("xla-perf-table", lambda t: t / "missing.txtpb", "no such file"),
    ("mamf-finder", lambda t: (t / "logs").mkdir() or t / "logs", "is a directory, not a file"),
    ("nvbench", lambda t: Path(os.devnull), "a device, a pipe or a socket, not a file"),
])
def test_bad_input_one_line_error_nothing_written(tmp_path, fmt, make, fragment) -> None:
    src = make(tmp_path)
    out = tmp_path / "out"
    # a good file first: nothing of it may be written either when a later source is bad
    good = {"xla-perf-table": XLA, "deepbench": P100, "mamf-finder": MAMF, "nvbench": NVB_REAL}[fmt]
    args = [str(src)] if fmt == "nvbench" else [str(good), str(src)]
    res = run(fmt, *args, "-o", str(out))
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and fragment in lines[0], res.output
    assert src.name in lines[0]
    assert "Traceback" not in res.output and not out.exists()


@pytest.mark.parametrize("args,fragment", [
    (["--chip", "gfx950"], "must be SRC=VALUE"),
    (["--chip", "gfx950=nope"], "unknown chip 'nope'"),
    (["--chip", "sm_999=b200"], "not a device of these sources"),
    (["--only", "sm_999"], "not a device of these sources"),
    (["--dtype", "bf16"], "--dtype applies to nvbench, mamf-finder and tritonbench only"),
])
def test_bad_options(tmp_path, args, fragment) -> None:
    res = run("xla-perf-table", str(XLA), "-o", str(tmp_path / "o"), *args)
    assert res.exit_code == 1 and fragment in res.output and not (tmp_path / "o").exists(), res.output


def test_label_option_and_collision(tmp_path) -> None:
    res = run("deepbench", str(P100), "-o", str(tmp_path), "--label", "NV_P100=p100-deepbench")
    assert res.exit_code == 0 and (tmp_path / "p100-deepbench.json").exists()
    twin = tmp_path / "twin"
    twin.mkdir()
    shutil.copy(P100, twin / P100.name)
    res = run("deepbench", str(P100), str(twin / P100.name), "-o", str(tmp_path / "o"))
    assert res.exit_code == 1 and "label 'NV_P100'" in res.output


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet='ab{}<>:;"#\\ \n0123456789.-eE_x', max_size=120))
def test_txtpb_reader_never_crashes(text: str) -> None:
    try:
        parse(text)
    except TextProtoError:
        pass


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=4000))
def test_any_cut_of_the_table_is_a_clean_error_or_a_prefix(cut: int) -> None:
    full = XLA.read_text()
    try:
        msg = parse(full[: len(full) - cut])
    except TextProtoError:
        return
    # text format has no end marker: a cut exactly between top-level entries is a valid, smaller table;
    # anything that parses must be a prefix of the whole (never a mangled entry)
    whole = parse(full).fields
    assert msg.fields == whole[: len(msg.fields)]


def test_published_files_are_what_make_published_writes(tmp_path) -> None:
    """sweeps/published/ is the importer's output of the cited copies in data/published/, nothing else."""
    root = Path(__file__).parent.parent
    src = root / "data" / "published" / "deepbench" / "DeepBench_NV_P100.xlsx"
    res = run("deepbench", str(src), "-o", str(tmp_path))
    assert res.exit_code == 0, res.output
    fresh = json.loads((tmp_path / "NV_P100.json").read_text())
    committed = json.loads((root / "sweeps" / "published" / "NV_P100.json").read_text())
    for doc in (fresh, committed):
        doc["run"].pop("argv")
    assert fresh == committed
    assert committed["import"]["source_sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()


def test_figures_mark_published_series_hollow() -> None:
    import matplotlib

    matplotlib.use("Agg")
    from mfu_sweep.present.figures.mfu import plot_mfu
    from mfu_sweep.present.figures.roofline import plot_roofline

    xla = import_sources("xla-perf-table", [XLA]).sweeps
    measured = load_sweeps([Path(__file__).parent / "golden" / "v1_sweep.json"])[0]
    assert measured.device["backend"] != "imported"
    for draw in (plot_mfu, plot_roofline):
        ax = draw([xla["sm_90"], xla["sm_100_B200"]], dtype="bf16", show_fit=False)
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "sm_90 (published)" in legend and "sm_100_B200 (published)" in legend
        faces = {line.get_markerfacecolor() for line in ax.get_lines() if line.get_marker() not in ("None", "")}
        assert faces == {"white"}
    m = plot_mfu([measured], dtype=measured.records[0].dtype, mode=measured.records[0].mode, show_fit=False)
    assert not any("published" in t.get_text() for t in m.get_legend().get_texts())
    assert "white" not in {line.get_markerfacecolor() for line in m.get_lines()}


def test_imported_devices_carry_the_sources_identity() -> None:
    """Issue 15: an imported sweep's fingerprint names the source's device; two chips never share one."""
    from mfu_sweep.records.fingerprint import fingerprint_from_fields

    root = Path(__file__).resolve().parents[1] / "sweeps" / "published"
    devices = [json.loads(p.read_text())["device"] for p in sorted(root.glob("*.json"))]
    assert devices and all(d["fingerprint"].startswith("imported-") for d in devices)
    assert len({d["fingerprint"] for d in devices}) == len(devices)
    for d in devices:  # the id is reproducible from the recorded fields
        fields = {k: v for k, v in d["fingerprint_fields"].items() if k != "kind"}
        assert fingerprint_from_fields("imported", fields).id == d["fingerprint"]
