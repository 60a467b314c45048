"""Issue 47, items 8, 9, 18 and 21: every silent drop becomes a note or a refusal naming the line, and the
smaller inconsistencies of the hostile walk.

The mamf-finder logs are the committed excerpt of a real log (``tests/data/import``), rearranged; the
sweeps are the golden file and SYNTHETIC ones (``tests/synthetic.py``).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from synthetic import example_pair, make_sweep_doc, write_sweep

from mfu_sweep.cli import main
from mfu_sweep.gemm.shapes import MAX_PASSES

HERE = Path(__file__).parent
GOLDEN = HERE / "golden" / "v1_sweep.json"
MAMF = HERE / "data" / "import" / "mamf_finder_shisa_gpu0_bf16_excerpt.txt"  # shape lines 25-29 and on
FIRST, LAST = 25, 29  # five per-shape lines of the excerpt, then more and the summary


def run(*args: str | Path, stdin: str | None = None) -> Result:
    res = CliRunner().invoke(main, [str(a) for a in args], input=stdin)
    assert "Traceback" not in res.output, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def imported(out: Path) -> dict:
    (path,) = out.glob("*.json")
    return json.loads(path.read_text())


# -- item 8: a shape file of a header alone ------------------------------------------------------------------

@pytest.mark.parametrize("text", ["m,n,k\n", "m,n,k\n# only a comment\n\n", "\ufeffbatch,m,n,k,passes\n"])
def test_a_shape_file_of_a_header_alone_is_refused_not_the_default_sweep(tmp_path: Path, text: str) -> None:
    path = tmp_path / "shapes.csv"
    path.write_text(text, encoding="utf-8")
    res = run("sweep", "--device", "cpu", "--shape-file", path, "--dry-run")
    assert res.exit_code == 1 and "has a header" in res.output and "and no shapes" in res.output, res.output
    assert "measurement" not in res.output  # no plan of the default sweep


# -- item 9: mamf-finder lines that were dropped silently ---------------------------------------------------

def _log(tmp_path: Path, shape_lines: list[str]) -> Path:
    lines = MAMF.read_text().splitlines()
    path = tmp_path / "log.txt"
    path.write_text("\n".join([*lines[:FIRST - 1], *shape_lines]) + "\n")
    return path


def test_mamf_lines_joined_by_spaces_import_every_shape(tmp_path: Path) -> None:
    lines = MAMF.read_text().splitlines()[FIRST - 1:LAST]
    path = _log(tmp_path, ["   ".join(lines)])  # a terminal's copy: the \r between records became spaces
    res = run("import", "mamf-finder", path, "-o", tmp_path / "o")
    assert res.exit_code == 0, res.output
    doc = imported(tmp_path / "o")
    assert len(doc["records"]) == 5
    assert "5 shapes imported" in " ".join(doc["import"]["notes"])


def test_the_note_counts_one_shape_in_the_singular(tmp_path: Path) -> None:
    path = _log(tmp_path, MAMF.read_text().splitlines()[FIRST - 1:FIRST])
    assert run("import", "mamf-finder", path, "-o", tmp_path / "o").exit_code == 0
    assert "1 shape imported" in " ".join(imported(tmp_path / "o")["import"]["notes"])


def test_a_two_dimensional_shape_line_is_a_warning_naming_the_line(tmp_path: Path) -> None:
    lines = MAMF.read_text().splitlines()[FIRST - 1:LAST]
    lines[1] = lines[1].replace("@ 1024x1024x2048", "@ 1024x4096")
    path = _log(tmp_path, lines)
    res = run("import", "mamf-finder", path, "-o", tmp_path / "o")
    assert res.exit_code == 0, res.output
    (warning,) = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    assert f"line {FIRST + 1}: skipped, its shape '1024x4096' is not MxNxK" in warning
    assert len(imported(tmp_path / "o")["records"]) == 4


def test_a_cut_last_line_is_no_warning(tmp_path: Path) -> None:
    lines = MAMF.read_text().splitlines()[FIRST - 1:LAST]
    lines[-1] = lines[-1][:30]  # the kill's cut: a note in the file, as before, not a warning
    res = run("import", "mamf-finder", _log(tmp_path, lines), "-o", tmp_path / "o")
    assert res.exit_code == 0 and "warning:" not in res.stderr, res.output


# -- item 18: export's CSV ---------------------------------------------------------------------------------

def test_crossovers_csv_without_crossovers_has_its_header(tmp_path: Path) -> None:
    flops = [1e8, 1e9, 1e10, 1e11, 1e12, 3e12]
    same = {"P_tflops": 600.0, "W_tbs": 2.0, "t0_s": 8e-6, "flops": flops, "peak_tflops": 800.0}
    a = write_sweep(tmp_path, make_sweep_doc("chip-c", seed=11, **same))
    b = write_sweep(tmp_path, make_sweep_doc("chip-d", seed=12, **same))
    out = tmp_path / "x.csv"
    res = run("export", a, b, "--what", "crossovers", "-o", out)
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert text.startswith("a,b,dtype,mode,metric,flops,low_flops,high_flops,from,to,method")
    assert len(text.splitlines()) == 1 and "the table has no rows" in res.stderr


def test_bands_csv_has_no_python_dict_in_a_cell(tmp_path: Path) -> None:
    a, b = (write_sweep(tmp_path, d) for d in example_pair())
    res = run("export", a, b, "--what", "bands")
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert rows and "evidence_split" not in rows[0] and "evidence_split_matched" in rows[0]
    assert not any("{" in v for r in rows for v in r.values() if v)
    assert all(r["evidence_split_matched"].isdigit() for r in rows)


# -- item 21: smaller inconsistencies ------------------------------------------------------------------------

def test_resume_dry_run_refuses_another_backend_than_the_files(tmp_path: Path) -> None:
    path = tmp_path / "cpu.json"
    path.write_text(GOLDEN.read_text())  # a CPU sweep
    doc = json.loads(path.read_text())
    doc["run"]["argv"] = ["mfu-sweep", "sweep", "--device", "cpu", "--shape", "64x64x64", "-o", str(path)]
    path.write_text(json.dumps(doc))
    res = run("sweep", "--resume", "--dry-run", "--device", "cuda", "-o", path)
    assert res.exit_code == 1 and "device.backend='cpu' differs from the device asked for (cuda)" in res.output
    assert run("sweep", "--resume", "--dry-run", "--device", "cpu", "-o", path).exit_code == 0


def test_a_blank_label_fails_validate_as_sweep_label_refuses_it(tmp_path: Path) -> None:
    doc = json.loads(GOLDEN.read_text())
    doc["device"]["label"] = "   "
    path = tmp_path / "blank.json"
    path.write_text(json.dumps(doc))
    res = run("validate", path)
    assert res.exit_code == 1 and "device/label: '   ' is blank" in res.output
    assert run("report", path, "-o", tmp_path / "r").exit_code == 1
    assert run("sweep", "--device", "cpu", "--label", "   ", "--dry-run").exit_code == 2


def test_shapes_square_is_the_square_family() -> None:
    res = run("sweep", "--device", "cpu", "--shapes", "square", "--dry-run")
    default = run("sweep", "--device", "cpu", "--dry-run")
    assert res.exit_code == 0, res.output
    shapes = [ln for ln in res.output.splitlines() if ln.startswith("shapes:")]
    assert shapes == [ln for ln in default.output.splitlines() if ln.startswith("shapes:")]
    both = run("sweep", "--device", "cpu", "--shapes", "square", "--shape", "100x100x100", "--dry-run")
    count = int(shapes[0].split()[1])
    assert f"shapes: {count + 1} " in both.output and "100x100x100" in both.output  # beside the other shapes
    assert "takes no arguments" in run("sweep", "--device", "cpu", "--shapes", "square:9", "--dry-run").output


@pytest.mark.parametrize("passes,ok", [(MAX_PASSES, True), (MAX_PASSES + 1, False), (100_000, False)])
def test_a_shape_files_passes_are_capped_as_repeats(tmp_path: Path, passes: int, ok: bool) -> None:
    path = tmp_path / "shapes.csv"
    path.write_text(f"m,n,k,passes\n64,64,64,{passes}\n")
    res = run("sweep", "--device", "cpu", "--shape-file", path, "--dry-run")
    assert (res.exit_code == 0) == ok, res.output
    if not ok:
        assert f"must be from 1 to {MAX_PASSES} (as --repeats)" in res.output and "line 2" in res.output
    assert run("sweep", "--device", "cpu", "--repeats", str(MAX_PASSES + 1), "--dry-run").exit_code == 2


def test_moe_grouped_on_a_dense_model_is_refused() -> None:
    for args in (["shapes", "llm:llama-3-8b:moe=grouped"],
                 ["sweep", "--device", "cpu", "--shapes", "llm:llama-3-8b:moe=grouped", "--dry-run"]):
        res = run(*args)
        assert res.exit_code == 1 and "is dense (no experts): drop moe=grouped" in res.output, res.output


def test_the_no_torch_hint_installs_as_the_readme_does() -> None:
    from mfu_sweep.cli.common import MEASURE_INSTALL

    assert "'.[measure]'" in MEASURE_INSTALL and "'.[measure]'" in (HERE.parent / "README.md").read_text()
    assert "mfu-sweep[measure]" not in MEASURE_INSTALL
