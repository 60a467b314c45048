"""tritonbench output as people paste it (the console table), and read the way every importer reads: within the
input limit, with a UTF-8 byte-order mark (Excel) or as UTF-16 (a PowerShell redirect).

The console fixtures are SYNTHETIC: the numbers of tritonbench_gemm_bf16_synthetic.csv, printed the way
``BenchmarkOperatorResult.__str__`` prints (tabulate's default table, ``stralign="right"``, latency cells as
``Latency.to_str("with_variance")``), as in the pastes of meta-pytorch/tritonbench PRs #894 and #1011: all three
backends, and one backend alone (``--only``) with its speedup column blank.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from import_cli import one_line_error, run

from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.importers import import_sources
from mfu_sweep.importers.tritonbench_text import console_table, latency_cell

DATA = Path(__file__).parent / "data" / "import"
CSV = DATA / "tritonbench_gemm_bf16_synthetic.csv"
CONSOLE = DATA / "tritonbench_gemm_bf16_synthetic_console.txt"
ONLY = DATA / "tritonbench_gemm_bf16_synthetic_only.txt"


def _imported(path: Path) -> dict:
    return dict(import_sources("tritonbench", [path], dtype="bf16").sweeps)


def _times(sweeps: dict) -> dict:
    return {(label, r.shape): (r.samples_s, r.status) for label, sw in sweeps.items() for r in sw.records}


def _printed_latencies(path: Path, column: int) -> dict[Shape, float]:
    """The table's own p50 of one latency column (the n-th ``(±x%)`` cell of each row), read with a regex."""
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"\s*\((\d+), (\d+), (\d+)\)", line)
        cells = re.findall(r"([0-9.]+) \(±[0-9.]+%\)", line)
        if m and len(cells) > column:
            out[Shape(1, *map(int, m.groups()))] = float(cells[column])
    return out


def test_the_console_table_imports_the_values_it_prints_and_the_csvs() -> None:
    console = _imported(CONSOLE)
    assert list(console) == ["aten_matmul", "triton_tutorial_matmul", "matmul_partition_k"]
    assert _times(console) == _times(_imported(CSV))  # the same run as the CSV: the same seconds, the same errors
    for col, label in enumerate(["aten_matmul", "triton_tutorial_matmul"]):
        printed = _printed_latencies(CONSOLE, col)
        assert len(printed) == 8
        for r in console[label].records:
            assert r.samples_s == (printed[r.shape] / 1e3,) and r.extra["source_unit"].startswith("ms")
    failed = [r for r in console["matmul_partition_k"].records if r.status == "error"]
    assert len(failed) == 2 and all("out of resource: shared memory" in r.error for r in failed)
    assert console["aten_matmul"].extra["import"]["tool"] == "tritonbench (console table)"


def test_one_backend_with_a_blank_speedup_column() -> None:
    (label, sw), = _imported(ONLY).items()
    printed = _printed_latencies(ONLY, 0)
    assert label == "triton_tutorial_matmul" and {r.shape: r.samples_s[0] for r in sw.records} == {
        s: v / 1e3 for s, v in printed.items()}
    table = console_table(ONLY.read_text(), "only")
    assert {c["speedup"] for c in table[label].values()} == {""}


def test_latency_cells_with_and_without_the_spread() -> None:
    assert latency_cell("0.192416 (±1.53%)") == ("0.192416", "1.53")
    assert latency_cell(" 1.237024 (±25.50%)") == ("1.237024", "25.50")
    assert latency_cell("0.192416") == ("0.192416", None)


def test_the_table_before_the_variance_era_reads_the_same(tmp_path: Path) -> None:
    old = tmp_path / "old.txt"
    # the p50 alone, right-aligned in the same columns (tritonbench before January 2025)
    old.write_text(re.sub(r"([0-9.]+) \(±[0-9.]+%\)", lambda m: m[1].rjust(len(m[0])), CONSOLE.read_text()))
    assert "±" not in old.read_text()
    assert _times(_imported(old)) == _times(_imported(CONSOLE))


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
@pytest.mark.parametrize("source", [CSV, CONSOLE], ids=["csv", "console"])
def test_byte_order_marks_and_utf16(tmp_path: Path, encoding: str, source: Path) -> None:
    marked = tmp_path / f"marked{source.suffix}"
    marked.write_text(source.read_text(), encoding=encoding)
    assert _times(_imported(marked)) == _times(_imported(source))


def test_the_input_limit_holds_for_tritonbench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MFU_SWEEP_MAX_INPUT_MB", "0.001")
    one_line_error(run("tritonbench", str(CSV), "--dtype", "bf16", "-o", str(tmp_path / "o")),
                   "beyond the input limit", "MFU_SWEEP_MAX_INPUT_MB")


def test_a_wrapped_console_table_is_refused_with_the_way_to_a_file(tmp_path: Path) -> None:
    lines = CONSOLE.read_text().splitlines()
    wrapped = [ln[:120] + "\n" + ln[120:] if len(ln) > 120 else ln for ln in lines]
    src = tmp_path / "wrapped.txt"
    src.write_text("\n".join(wrapped) + "\n")
    one_line_error(run("tritonbench", str(src), "--dtype", "bf16", "-o", str(tmp_path / "o")),
                   "wrapped or cut", "--csv", "--output FILE")


def test_a_console_table_without_latency_or_tflops_names_the_metrics_and_a_file(tmp_path: Path) -> None:
    text = CONSOLE.read_text().replace("-latency", "-walltime").replace("-tflops", "-gbps")
    src = tmp_path / "speedup.txt"
    src.write_text(text)
    one_line_error(run("tritonbench", str(src), "--dtype", "bf16", "-o", str(tmp_path / "o")),
                   "no backend has a latency or tflops column", "--metrics latency,tflops", "--csv or --output FILE")
