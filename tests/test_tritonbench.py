"""`mfu-sweep import tritonbench`: a GEMM operator's CSV and JSON tables, one device per backend column.

The fixtures (tests/data/import/tritonbench_*_synthetic.*) are SYNTHETIC: made-up numbers written in the
format of tritonbench/utils/triton_op.py (``write_csv_to_file``, ``userbenchmark_dict``), three backends
with one failing on two shapes. Variants (log lines before the table, tflops only, a torch.compile
backend, another operator) are built from them here and are synthetic too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from import_cli import one_line_error, run

from mfu_sweep.cli import main
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.importers import import_sources
from mfu_sweep.records.results import load_sweeps

DATA = Path(__file__).parent / "data" / "import"
CSV = DATA / "tritonbench_gemm_bf16_synthetic.csv"
JSON = DATA / "tritonbench_gemm_bf16_synthetic.json"
NIGHTLY = DATA / "tritonbench_nightly_a100_bf16_synthetic.json"
BACKENDS = ["aten_matmul", "triton_tutorial_matmul", "matmul_partition_k"]
OOR = "out of resource: shared memory, Required: 262144"


def _imported(path: Path, **kw) -> dict:
    return dict(import_sources("tritonbench", [path], dtype="bf16", **kw).sweeps)


def _by_shape(sweep) -> dict:
    return {r.shape: r for r in sweep.records}


def _cells(path: Path) -> dict[tuple[str, str], list[str]]:
    """(x-value, backend) -> that backend's cells of the row, read straight from the CSV."""
    lines = path.read_text().splitlines()
    header = lines[0].split(";")
    out: dict[tuple[str, str], list[str]] = {}
    for line in lines[1:-1]:
        row = line.split(";")
        for col, cell in zip(header[1:], row[1:]):
            out.setdefault((row[0], col.rsplit("-", 1)[0]), []).append(cell)
    return out


def test_csv_one_device_per_backend_with_latency_failed_cells_and_timer() -> None:
    sweeps = _imported(CSV, chip_overrides={"tritonbench": "h100-sxm"})
    assert list(sweeps) == BACKENDS
    cells = _cells(CSV)
    for label, sw in sweeps.items():
        assert sw.device["name"] == "tritonbench" and sw.peak.chip == "h100-sxm"
        imp = sw.extra["import"]
        assert imp["format"] == "tritonbench" and imp["tool"] == "tritonbench (CSV)" and imp["backend"] == label
        assert "triton.testing.do_bench" in imp["timing_method"] and "median_low" in imp["timing_method"]
        assert any("--cudagraph" in u for u in imp["unknown"]) and any("which GPU" in u for u in imp["unknown"])
        assert len(sw.records) == 8
        for r in sw.records:
            assert (r.dtype, r.mode, r.timer, r.extra["cache"]) == ("bf16", "eager", "cuda-events+flush", "flush")
            x = f"({r.shape.m}, {r.shape.n}, {r.shape.k})"
            first = cells[(x, label)][0]
            if r.ok:  # the latency column, milliseconds -> seconds, the one value kept
                assert r.samples_s == (float(first) / 1e3,) and "single_value" in r.flags
                assert r.extra["source_value"] == first and r.extra["source_unit"].startswith("ms")
            else:
                assert r.error == f"tritonbench: {first}" and r.samples_s == ()
    failed = [r.shape for r in sweeps["matmul_partition_k"].records if not r.ok]
    assert failed == [Shape(1, 256, 256, 256), Shape(1, 8192, 8192, 8192)]
    assert OOR in _by_shape(sweeps["matmul_partition_k"])[Shape(1, 256, 256, 256)].error
    aten = _by_shape(sweeps["aten_matmul"])[Shape(1, 4096, 4096, 4096)]  # latency and tflops columns agree
    assert aten.tflops == pytest.approx(float(cells[("(4096, 4096, 4096)", "aten_matmul")][1]), rel=1e-12)


def test_json_of_the_same_run_gives_the_same_records_as_its_csv() -> None:
    from_csv, from_json = _imported(CSV), _imported(JSON)
    assert list(from_json) == BACKENDS
    for label in BACKENDS:
        a, b = _by_shape(from_csv[label]), _by_shape(from_json[label])
        assert a.keys() == b.keys()
        assert all((a[s].samples_s, a[s].status, a[s].error) == (b[s].samples_s, b[s].status, b[s].error) for s in a)
    assert from_json["aten_matmul"].extra["import"]["tool"] == "tritonbench (--output-json)"


def test_nightly_result_names_the_gpu_and_commits() -> None:
    sweeps = _imported(NIGHTLY)
    sw = sweeps["aten_matmul"]
    assert sw.device["name"] == "NVIDIA A100-SXM4-80GB" and sw.peak.chip == "a100-sxm"
    assert sw.environment["software"]["tritonbench"]["tritonbench_commit"].startswith("db2155c")
    assert not any("which GPU" in u for u in sw.extra["import"]["unknown"])
    assert all(r.ok for s in sweeps.values() for r in s.records) and len(sw.records) == 8


def test_csv_printed_after_log_lines_tflops_only_and_a_compiled_backend(tmp_path: Path) -> None:
    stdout = tmp_path / "run.log"  # `run.py --op gemm --csv > run.log`: the run's own lines come first
    stdout.write_text("Removed 3 outliers from 517 samples\n100%|####| 8/8 [00:41<00:00]\n" + CSV.read_text())
    assert {k: [r.samples_s for r in v.records] for k, v in _imported(stdout).items()} == \
        {k: [r.samples_s for r in v.records] for k, v in _imported(CSV).items()}
    lines = CSV.read_text().splitlines()
    keep = [0, 2, 5]  # x-value, aten_matmul-tflops, triton_tutorial_matmul-tflops
    text = "\n".join(";".join(ln.split(";")[i] for i in keep) for ln in lines) + "\n"
    only_tflops = tmp_path / "tflops.csv"
    only_tflops.write_text(text.replace("triton_tutorial_matmul-", "pt2_triton_matmul-"))
    sweeps = _imported(only_tflops)
    r = _by_shape(sweeps["aten_matmul"])[Shape(1, 2048, 2048, 2048)]
    printed = float(_cells(CSV)[("(2048, 2048, 2048)", "aten_matmul")][1])
    assert r.samples_s == (2 * 2048**3 / (printed * 1e12),) and r.extra["source_unit"].startswith("TFLOP/s")
    assert any("tflops column used" in n for n in sweeps["aten_matmul"].extra["import"]["notes"])
    assert {r.mode for r in sweeps["pt2_triton_matmul"].records} == {"compile"}  # torch.compile chose the kernel


@pytest.mark.parametrize(("edit", "fragments"), [
    (lambda t: t, ("do not name the dtype", "pass --dtype")),
    (lambda t: t.replace("(M, N, K);", "(group_size, M, N, K);"), ("'(group_size, M, N, K)'", "not a GEMM")),
    (lambda t: t.replace("-latency", "-walltime").replace("-tflops", "-gbps"), ("no backend has a latency or tflops",)),
    (lambda t: "M;N;K\n1;2;3\n", ("no tritonbench table", "CSV header", "--csv or --output FILE")),
    (lambda t: t.replace("(512, 512, 512)", "(512, 512)"), ("x-value '(512, 512)'", "not (M, N, K)")),
    (lambda t: t.replace("(512, 512, 512)", "(512, 0, 512)"), ("(512, 0, 512)",)),
])
def test_refusals_are_one_line(tmp_path: Path, edit, fragments) -> None:
    src = tmp_path / "bad.csv"
    src.write_text(edit(CSV.read_text()))
    dtype = [] if "dtype" in fragments[0] else ["--dtype", "bf16"]
    one_line_error(run("tritonbench", str(src), *dtype, "-o", str(tmp_path / "o")), *fragments)
    assert not (tmp_path / "o").exists()


def test_other_operators_in_a_nightly_result_are_left_out(tmp_path: Path) -> None:
    doc = json.loads(NIGHTLY.read_text())
    doc["metrics"]["tritonbench_softmax_fwd[x_4096-triton_softmax]_latency"] = "0.01"
    src = tmp_path / "result.json"
    src.write_text(json.dumps(doc))
    sw = _imported(src)["aten_matmul"]
    assert any("1 cell of other operators" in n for n in sw.extra["import"]["notes"])
    doc["metrics"] = {"tritonbench_softmax_fwd[x_4096-triton_softmax]_latency": "0.01"}
    src.write_text(json.dumps(doc))
    one_line_error(run("tritonbench", str(src), "--dtype", "bf16", "-o", str(tmp_path / "o")), "no tritonbench_")


def test_compare_two_backends_of_one_file_and_one_backend_of_two_files(tmp_path: Path) -> None:
    out = tmp_path / "tb"
    res = run("tritonbench", str(CSV), str(NIGHTLY), "--dtype", "bf16", "--chip", "tritonbench=h100-sxm",
              "--label", f"{CSV.name}:aten_matmul=h100-aten",
              "--label", f"{CSV.name}:triton_tutorial_matmul=h100-triton",
              "--label", f"{NIGHTLY.name}:aten_matmul=a100-aten", "--only", "aten_matmul",
              "--only", "triton_tutorial_matmul", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert sorted(p.stem for p in out.glob("*.json")) == ["a100-aten", "h100-aten", "h100-triton",
                                                          "triton_tutorial_matmul"]
    assert [s.device["chip"] for s in load_sweeps([out / "a100-aten.json"])] == ["a100-sxm"]
    one_file = CliRunner().invoke(main, ["compare", str(out / "h100-aten.json"), str(out / "h100-triton.json")])
    assert one_file.exit_code == 0, one_file.output
    assert "h100-aten leads from 34 MFLOP to 1.1 TFLOP" in one_file.output  # aten is faster on every shape
    two_files = CliRunner().invoke(main, ["compare", str(out / "h100-aten.json"), str(out / "a100-aten.json"),
                                          "--metric", "tflops"])
    assert two_files.exit_code == 0, two_files.output
    assert "h100-aten leads from 34 MFLOP to 1.1 TFLOP" in two_files.output
