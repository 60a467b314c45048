"""Every importer reads through the bounded reader (mfu_sweep.util.inputs): a UTF-8 byte-order mark (Excel, Notepad)
and UTF-16 with its mark (a PowerShell redirect) give the same records as the plain file."""

from __future__ import annotations

from pathlib import Path

import pytest

from mfu_sweep.importers import import_sources

DATA = Path(__file__).parent / "data" / "import"
# nvbench's real matmat excerpt names its integer type U32; renamed F32 (SYNTHETIC) its values import, with its
# axes mapped as tests/test_import_formats.py does
NVB = {"axes": {"M": "Num Rows 1", "K": "Num Cols 1 / Rows 2", "N": "Num Cols 2"}}
SOURCES = [
    ("mamf-finder", "mamf_finder_shisa_gpu0_bf16_excerpt.txt", {}),
    ("mamf-finder", "mamf_finder_pr60_gh200_summary.txt", {"dtype": "bf16"}),
    ("nvbench", "nvbench_r100001_matmat_3060_excerpt.csv", NVB),
    ("nvbench", "nvbench_r100001_matmat_3060_excerpt.md", NVB),
    ("xla-perf-table", "xla_main_excerpt.txtpb", {}),
    ("tritonbench", "tritonbench_gemm_bf16_synthetic.csv", {"dtype": "bf16"}),
    ("tritonbench", "tritonbench_gemm_bf16_synthetic.json", {"dtype": "bf16"}),
    ("tritonbench", "tritonbench_gemm_bf16_synthetic_console.txt", {"dtype": "bf16"}),
]


def _records(fmt: str, path: Path, kw: dict) -> dict:
    sweeps = import_sources(fmt, [path], **kw).sweeps
    return {label: sorted((str(r.shape), r.dtype, r.mode, r.status, r.samples_s) for r in sw.records)
            for label, sw in sweeps.items()}


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
@pytest.mark.parametrize(("fmt", "name", "kw"), SOURCES, ids=[s[1] for s in SOURCES])
def test_a_byte_order_mark_changes_nothing(tmp_path: Path, fmt: str, name: str, kw: dict, encoding: str) -> None:
    plain, marked = tmp_path / "plain", tmp_path / "marked"
    plain.mkdir()
    marked.mkdir()
    source = DATA / name
    text = source.read_text(encoding="utf-8").replace("U32", "F32")
    (plain / name).write_text(text, encoding="utf-8")
    (marked / name).write_text(text, encoding=encoding)
    expected = _records(fmt, plain / name, kw)
    assert expected and _records(fmt, marked / name, kw) == expected
