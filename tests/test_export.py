"""Export of SYNTHETIC sweeps (tests/synthetic.py): tidy CSV, Markdown, LaTeX, rounding to uncertainty."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from synthetic import NOISE_MODELS, example_pair, make_sweep_doc, write_sweep

from mfu_sweep.analysis.verdicts.compare import CompareError
from mfu_sweep.cli import main
from mfu_sweep.present.export.tables import (
    export_table,
    latex_escape,
    round_to_uncertainty,
    significant,
    uncertainty_decimals,
)
from mfu_sweep.records.results import parse_document

GOLDEN = Path(__file__).parent / "golden"
REGEN = os.environ.get("MFU_SWEEP_REGEN_GOLDEN") == "1"


def _pair_sweeps() -> list:
    return [s for d in example_pair() for s in parse_document(d)]


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if REGEN:
        path.write_text(text)
    assert text == path.read_text()


@pytest.mark.parametrize(("value", "half", "want"), [
    (123.456, 0.53, ("123.5", "0.5")),
    (123.456, 0.13, ("123.46", "0.13")),
    (123.456, 23.0, ("120", "20")),
    (0.012345, 0.0004, ("0.0123", "0.0004")),
    (5.0, 0.96, ("5.0", "1.0")),  # 0.96 rounds to 1, so two digits
    (987.6, None, ("988", None)),
    (99.99, 0.0, ("100", None)),
])
def test_round_to_uncertainty(value: float, half: float | None, want: tuple) -> None:
    assert round_to_uncertainty(value, half) == want


def test_significant_and_decimals() -> None:
    assert significant(99.99, 3) == "100" and significant(0.0001234, 2) == "0.00012"
    assert uncertainty_decimals(0.0096) == 3 and uncertainty_decimals(250.0) == -2
    assert uncertainty_decimals(None) is None and uncertainty_decimals(float("nan")) is None


def test_records_csv_is_tidy_and_unrounded() -> None:
    sweeps = _pair_sweeps()
    rows = list(csv.DictReader(io.StringIO(export_table(sweeps, "records", "csv"))))
    assert len(rows) == sum(len(s.records) for s in sweeps) == 19
    required = {"label", "device", "dtype", "mode", "shape", "flops", "bytes", "intensity", "status", "median_s",
                "iqr_s", "tflops", "mfu", "first_call_s", "flags", "peak_tflops", "n_samples"}
    assert required <= set(rows[0])
    rec = sweeps[0].records[0]
    first = rows[0]
    assert first["label"] == "chip-a" and float(first["median_s"]) == rec.median_s
    assert float(first["mfu"]) == rec.mfu
    oom = next(r for r in rows if r["status"] == "oom")
    assert oom["median_s"] == "" and oom["n_samples"] == "0"


def test_records_latex_golden() -> None:
    text = export_table(_pair_sweeps(), "records", "latex")
    assert "\\toprule" in text and "\\midrule" in text and "\\bottomrule" in text
    assert text.count("\\\\") == 20  # header + 19 records
    _check_golden("export_records.tex", text)


def test_fits_latex_golden_and_csv_columns() -> None:
    sweeps = _pair_sweeps()
    text = export_table(sweeps, "fits", "latex", n_boot=20)
    assert "n/c" in text  # bandwidth is not constrained by these square shapes
    _check_golden("export_fits.tex", text)
    rows = list(csv.DictReader(io.StringIO(export_table(sweeps, "fits", "csv", n_boot=20))))
    assert [r["label"] for r in rows] == ["chip-a", "chip-b"]
    assert {"p_tflops", "p_tflops_low", "p_tflops_high", "w_tbs", "t0_s", "r2_log", "constrained_w_tbs"} <= set(rows[0])


def test_crossovers_markdown_and_csv() -> None:
    sweeps = _pair_sweeps()
    # nine shapes measured once are one FLOP band: no data crossover, and no fit crossover either (the data do
    # not lean both ways, issue 35)
    empty = export_table(sweeps, "crossovers", "csv", use_fit=False)  # a table without rows: its header alone
    assert empty.splitlines() == ["a,b,dtype,mode,metric,flops,low_flops,high_flops,from,to,method"]
    assert "no crossover" in export_table(sweeps, "crossovers", "markdown", fit_n_boot=20)
    flops = [float(f) for f in np.geomspace(1e8, 1e12, 24)]
    common = {"W_tbs": 2.0, "flops": flops, "noise_model": NOISE_MODELS["per-shape 1%"], "repeats": 3,
              "peak_tflops": 1000.0}
    pair = [s for d in (make_sweep_doc("chip-a", P_tflops=600, t0_s=6e-6, seed=1, **common),
                        make_sweep_doc("chip-b", P_tflops=700, t0_s=9e-6, seed=2, **common))
            for s in parse_document(d)]
    rows = list(csv.DictReader(io.StringIO(export_table(pair, "crossovers", "csv", use_fit=False))))
    assert [(r["from"], r["to"], r["method"]) for r in rows] == [("chip-a", "chip-b", "runs")]
    assert float(rows[0]["low_flops"]) <= float(rows[0]["flops"]) <= float(rows[0]["high_flops"])
    md = export_table(pair, "crossovers", "markdown", fit_n_boot=20)
    lines = md.splitlines()
    assert lines[0].startswith("| A | B |") and lines[1].startswith("| :--- |")
    assert "chip-a -> chip-b" in md and "GFLOP" in md


def test_latex_escapes_labels() -> None:
    assert latex_escape("gpu_0 & 50%") == r"gpu\_0 \& 50\%"
    doc = make_sweep_doc("my_chip#1", P_tflops=500, W_tbs=2, t0_s=5e-6, flops=[1e9, 1e10])
    text = export_table(parse_document(doc), "records", "latex")
    assert r"my\_chip\#1" in text and "my_chip" not in text


def test_cli_export_writes_file(tmp_path: Path) -> None:
    paths = [str(write_sweep(tmp_path, d)) for d in example_pair()]
    out = tmp_path / "t.tex"
    res = CliRunner().invoke(main, ["export", *paths, "--format", "latex", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text() == (GOLDEN / "export_records.tex").read_text()
    again = CliRunner().invoke(main, ["export", *paths, "-o", str(out)])
    assert again.exit_code == 1 and "exists; use --force" in again.output
    md = CliRunner().invoke(main, ["export", *paths, "--format", "markdown"])
    assert md.exit_code == 0 and md.output.startswith("| Device | dtype |")


def _refused(res, *fragments: str) -> str:
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: "), res.output
    assert "Traceback" not in res.output and all(f in lines[0] for f in fragments), lines[0]
    return lines[0]


def test_cli_export_format_follows_the_suffix_and_a_contradiction_is_refused(tmp_path: Path) -> None:
    paths = [str(write_sweep(tmp_path, d)) for d in example_pair()]
    tex = tmp_path / "t.tex"
    res = CliRunner().invoke(main, ["export", *paths, "-o", str(tex)])  # no --format: the suffix says latex
    assert res.exit_code == 0, res.output
    assert tex.read_text() == (GOLDEN / "export_records.tex").read_text()
    md = tmp_path / "T.MD"
    assert CliRunner().invoke(main, ["export", *paths, "-o", str(md)]).exit_code == 0
    assert md.read_text().startswith("| Device | dtype |")
    csv_path = tmp_path / "table.csv"
    line = _refused(CliRunner().invoke(main, ["export", *paths, "-o", str(csv_path), "--format", "latex"]),
                    "--format latex", str(csv_path), ".csv names csv", "-o " + str(tmp_path / "table.tex"))
    assert "drop --format" in line and not csv_path.exists()
    _refused(CliRunner().invoke(main, ["export", *paths, "-o", str(tmp_path / "x.json")]),
             "x.json", "ends in .json", "not JSON", "x.csv")
    assert not (tmp_path / "x.json").exists()
    txt = tmp_path / "t.txt"  # a suffix that names no table format takes --format, or csv
    assert CliRunner().invoke(main, ["export", *paths, "-o", str(txt), "--format", "markdown"]).exit_code == 0
    assert txt.read_text().startswith("| Device | dtype |")
    assert CliRunner().invoke(main, ["export", *paths, "-o", str(tmp_path / "u.txt")]).exit_code == 0
    assert (tmp_path / "u.txt").read_text().startswith("label,")


def test_table_format_rules() -> None:
    from mfu_sweep.util.outputs import OutputError, table_format

    assert [table_format(None, None), table_format(None, "latex")] == ["csv", "latex"]
    assert [table_format(f"t{s}", None) for s in (".csv", ".md", ".markdown", ".tex", ".TEX", ".txt", "")] == \
        ["csv", "markdown", "markdown", "latex", "latex", "csv", "csv"]
    assert table_format("t.md", "markdown") == "markdown" and table_format("t.txt", "latex") == "latex"
    for path, fmt in (("t.csv", "latex"), ("t.tex", "markdown"), ("t.md", "csv"), ("t.png", None)):
        with pytest.raises(OutputError, match=r"t\."):
            table_format(path, fmt)


def test_plot_and_report_refuse_a_file_name_for_their_directory(tmp_path: Path) -> None:
    paths = [str(write_sweep(tmp_path, d)) for d in example_pair()[:1]]
    for cmd, name in (("plot", "fig.png"), ("report", "report.html")):
        target = tmp_path / name
        line = _refused(CliRunner().invoke(main, [cmd, *paths, "-o", str(target)]),
                        f"ends in {target.suffix}", "-o " + str(target.with_suffix("")))
        assert "end the name with /" in line and not target.exists()
    from mfu_sweep.util.outputs import check_output_dir

    assert check_output_dir(str(tmp_path / "fig.png") + "/").is_dir()  # a trailing / says: a directory
    assert check_output_dir(tmp_path / "fig.png") == tmp_path / "fig.png"  # it exists as one now


def test_every_analysis_command_has_help_with_an_example() -> None:
    for cmd in ("merge", "fit", "compare", "export"):
        res = CliRunner().invoke(main, [cmd, "--help"])
        assert res.exit_code == 0 and "Example:" in res.output and f"mfu-sweep {cmd}" in res.output


# -- CSV columns: the union over rows, on every committed file ------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
REFERENCE = sorted((REPO / "sweeps").glob("*.json"))
PUBLISHED = sorted((REPO / "sweeps" / "published").glob("*.json"))


def _csv(text: str) -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(text))
    rows = list(reader)
    assert all(None not in r for r in rows)  # no row longer than the header
    return list(reader.fieldnames or []), rows


def test_csv_columns_are_the_union_over_rows_in_first_seen_order() -> None:
    from mfu_sweep.present.export.tables import csv_columns, to_csv

    rows = [{"a": 1, "b": None}, {"a": 2, "c": 3}, {"d": 4, "a": 5}]
    assert csv_columns(rows) == ["a", "b", "c", "d"]
    assert to_csv(rows) == "a,b,c,d\n1,,,\n2,,3,\n5,,,4\n"
    assert to_csv([]) == ""


@pytest.mark.parametrize("what", ["records", "fits", "crossovers", "bands"])
def test_every_what_exports_the_reference_sweeps_in_every_format(what: str) -> None:
    from mfu_sweep.records.results import load_sweeps

    sweeps = load_sweeps(REFERENCE)
    kw = {"records": {}, "fits": {"n_boot": 20}, "crossovers": {"fit_n_boot": 20}, "bands": {}}[what]
    skipped: list[str] = []
    kw = {**kw, "on_skip": skipped.append} if what in ("crossovers", "bands") else kw
    header, rows = _csv(export_table(sweeps, what, "csv", **kw))
    steps = {s.label for s in sweeps if any(r.family and r.family.startswith("llm:") for r in s.records)}
    # the model-step sweeps' layer shapes are out of the square sweeps' reach: those pairs only are noted
    assert all(any(f" {label} " in f" {n.replace('(', ' ')} " for label in steps) for n in skipped)
    if what == "records":
        assert len(rows) == sum(len(s.records) for s in sweeps)
    if what == "fits":  # the reference fits differ in their columns: some bounded by a bandwidth range, some not
        assert {r["label"] for r in rows} == {s.label for s in sweeps}
        ranged = [r["bandwidth_range_high_tbs"] != "" for r in rows]
        assert any(ranged) and not all(ranged)
    if what == "bands":
        assert rows and {"a", "b", "verdict"} <= set(header)
    for fmt in ("markdown", "latex"):
        assert export_table(sweeps, what, fmt, **kw).strip()


def test_export_of_many_files_keeps_the_pairs_it_can_compare_and_notes_the_others(tmp_path: Path) -> None:
    # SYNTHETIC: A and C sweep the same square shapes, B skinny ones (k = 64) no square shape is near
    base = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6, "n_samples": 5}
    flops = [float(f) for f in np.geomspace(1e8, 1e13, 12)]
    skinny = [f"{s}x{s}x64" for s in (256, 512, 1024, 2048, 4096, 8192)]
    docs = (make_sweep_doc("A", flops=flops, seed=1, **base), make_sweep_doc("B", shapes=skinny, seed=2, **base),
            make_sweep_doc("C", flops=flops, seed=3, **base))
    sweeps = [s for d in docs for s in parse_document(d)]
    skipped: list[str] = []
    _, rows = _csv(export_table(sweeps, "bands", "csv", metric="tflops", on_skip=skipped.append))
    assert rows and {(r["a"], r["b"]) for r in rows} == {("A", "C")}
    assert [n.split(":")[0] for n in skipped] == ["cannot compare A with B (bf16 eager)",
                                                  "cannot compare B with C (bf16 eager)"]
    md = export_table(sweeps, "bands", "markdown", metric="tflops", on_skip=lambda n: None)
    assert md.count("_not compared: cannot compare ") == 2 and "| A | C |" in md
    tex = export_table(sweeps, "crossovers", "latex", metric="tflops", use_fit=False, on_skip=lambda n: None)
    assert tex.count("% not compared: cannot compare ") == 2
    paths = [str(write_sweep(tmp_path, d)) for d in docs]
    res = CliRunner().invoke(main, ["export", *paths, "--what", "bands", "--metric", "tflops"])
    assert res.exit_code == 0 and res.stdout.startswith("a,b,") and "A,C," in res.stdout
    assert [line.split(":")[1] for line in res.stderr.splitlines()] == [" cannot compare A with B (bf16 eager)",
                                                                         " cannot compare B with C (bf16 eager)"]
    # by MFU a series without a peak is skipped the same way; only without any comparable pair is it the error
    nopeak = make_sweep_doc("D", flops=flops, seed=4, peak_tflops=0, **base)
    kept: list[str] = []
    _, rows = _csv(export_table([*sweeps, *parse_document(nopeak)], "bands", "csv", on_skip=kept.append))
    assert {(r["a"], r["b"]) for r in rows} == {("A", "C")} and sum("D bf16 eager has no peak" in n for n in kept) == 3
    with pytest.raises(CompareError, match="nothing to compare: 1 pair skipped .*--metric tflops"):
        export_table([*sweeps[:1], *parse_document(nopeak)], "bands", "csv", on_skip=kept.append)
    # one pair that cannot be compared: one line, no table
    res = CliRunner().invoke(main, ["export", *paths[:2], "--what", "bands", "--metric", "tflops"])
    assert res.exit_code == 1 and res.output.count("\n") == 1
    assert res.output.startswith("Error: cannot compare A with B")


def test_records_and_fits_export_every_committed_and_published_sweep() -> None:
    from mfu_sweep.records.results import load_sweeps

    sweeps = load_sweeps([*REFERENCE, *PUBLISHED])
    _, rows = _csv(export_table(sweeps, "records", "csv"))
    assert len(rows) == sum(len(s.records) for s in sweeps)
    assert {r["label"] for r in rows} == {s.label for s in sweeps}
    header, fits = _csv(export_table(sweeps, "fits", "csv", n_boot=10))
    assert len(fits) >= len(sweeps) and "bandwidth_range_high_tbs" in header
    pair = [s for s in sweeps if s.label in ("sm_90", "gfx942")]  # published XLA tables that cross; ~1 s
    _, crossings = _csv(export_table(pair, "crossovers", "csv", metric="tflops", fit_n_boot=10))
    assert crossings and all({r["a"], r["b"]} == {"sm_90", "gfx942"} for r in crossings)


def test_latex_escapes_less_greater_and_bar_which_ot1_prints_as_other_glyphs() -> None:
    from mfu_sweep.present.export.tables import Table, latex_escape, to_latex

    assert latex_escape("a<b>c|d") == r"a\textless{}b\textgreater{}c\textbar{}d"
    table = Table(header=("Device", "Leader change"), rows=((("gpu|x<1>", None), ("a -> b", None)),), align="ll")
    body = to_latex(table).splitlines()
    row = next(ln for ln in body if ln.startswith("gpu"))
    assert row == r"gpu\textbar{}x\textless{}1\textgreater{} & a $\to$ b \\"
    assert not any(ch in ln for ln in body if not ln.startswith(("%", "\\begin")) for ch in "<>|")
