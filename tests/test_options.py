"""Options across commands: torch's dtype names wherever a dtype is taken, compare --dtype/--mode, and --json for
validate, import and merge."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.cli import main
from mfu_sweep.gemm.dtypes import ALIASES, DTYPES, canonical_dtype

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "sweeps" / "published"
PAIR = [str(PUBLISHED / "sm_100_B200.json"), str(PUBLISHED / "gfx950.json")]
ZEN5 = str(ROOT / "sweeps" / "amd-epyc-zen5-cpu.json")
MAMF = ROOT / "tests" / "data" / "import" / "mamf_finder_shisa_gpu0_bf16_excerpt.txt"


def _run(*args: str, code: int = 0) -> str:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code == code, res.output
    return res.output


@pytest.mark.parametrize(("alias", "name"), [("bfloat16", "bf16"), ("torch.bfloat16", "bf16"), ("float16", "fp16"),
                                             ("half", "fp16"), ("float32", "fp32"), ("FLOAT32", "fp32"),
                                             ("float8_e4m3fn", "fp8"), ("fp8-rowwise", "fp8-rowwise")])
def test_torch_names_are_the_tools_dtypes(alias: str, name: str) -> None:
    assert canonical_dtype(alias) == name


def test_every_alias_names_a_dtype_and_an_unknown_name_is_refused_with_the_known_ones() -> None:
    assert set(ALIASES.values()) <= set(DTYPES)
    with pytest.raises(ValueError, match=r"unknown dtype 'bfloat17' \(known: fp32, .*torch's names"):
        canonical_dtype("bfloat17")


def test_sweep_dry_run_takes_bfloat16() -> None:
    out = _run("sweep", "--device", "cpu", "--dtype", "bfloat16", "--dtype", "float32", "--dry-run",
               "--max-flop", "1e7")
    assert "bf16" in out and "fp32" in out and "bfloat16" not in out


def test_an_unknown_dtype_is_still_clicks_one_line_listing_the_choices() -> None:
    out = _run("sweep", "--device", "cpu", "--dtype", "bfloat17", "--dry-run", code=2)
    assert "'bfloat17' is not one of" in out and "fp32" in out


def test_compare_dtype_and_mode_select_the_pairs() -> None:
    res = json.loads(_run("compare", *PAIR, "--metric", "tflops", "--no-fit", "--dtype", "bfloat16", "--mode",
                          "compile", "--json"))
    assert {(c["dtype"], c["mode"]) for c in res["comparisons"]} == {("bf16", "compile")}
    every = json.loads(_run("compare", *PAIR, "--metric", "tflops", "--no-fit", "--json"))
    assert {c["dtype"] for c in every["comparisons"]} == {"bf16", "fp32", "fp8"}
    bf16 = next(c for c in every["comparisons"] if c["dtype"] == "bf16")
    assert res["comparisons"][0]["bands"] == bf16["bands"]


def test_compare_dtype_that_matches_nothing_names_what_is_present() -> None:
    out = _run("compare", *PAIR, "--dtype", "mxfp4", code=1)
    assert "--dtype mxfp4 matches no records (present: bf16, fp16, fp32, fp8)" in out


def test_report_and_plot_dtype_take_torch_names(tmp_path: Path) -> None:
    out = _run("plot", ZEN5, "--dtype", "bfloat16", "--figure", "vs-flops", "--n-boot", "20", "-o",
               str(tmp_path / "plots"))
    assert "wrote" in out


def test_validate_json_says_per_file_valid_problems_and_records(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    doc = json.loads(Path(ZEN5).read_text())
    doc["records"][0]["flops"] *= 2
    bad.write_text(json.dumps(doc))
    res = CliRunner().invoke(main, ["validate", ZEN5, str(bad), "--json"])
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    good, broken = out["files"]
    assert out["invalid"] == 1 and good["valid"] and good["records"] == len(doc["records"])
    assert not broken["valid"] and "flops" in broken["problems"][0]
    assert "1 of 2 files invalid" in res.stderr


def test_import_json_names_each_file_written(tmp_path: Path) -> None:
    out = json.loads(_run("import", "mamf-finder", str(MAMF), "-o", str(tmp_path), "--json"))
    (written,) = out["files"]
    assert Path(written["file"]).is_file() and written["chip"] == "h100-sxm"
    assert written["records"] == sum(written["status"].values()) > 0 and out["format"] == "mamf-finder"


def test_merge_json_says_what_was_merged(tmp_path: Path) -> None:
    a = tmp_path / "a.json"
    shutil.copy(ZEN5, a)
    out = json.loads(_run("merge", str(a), PAIR[0], "-o", str(tmp_path / "m.json"), "--json"))
    assert out["sweeps"] == 2 and out["labels"] == ["amd-epyc-zen5-cpu", "sm_100_B200"]
    assert (tmp_path / "m.json").is_file() and out["output"] == str(tmp_path / "m.json")
