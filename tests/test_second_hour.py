"""A newcomer's second hour: the docs' examples work as written, writers check before they work,
and every message fits what the user can do.

Each test runs the real command in-process (CliRunner) on SYNTHETIC sweeps from
``tests/synthetic.py`` or on the committed reference files, and fails on the
behaviour a new user tripped over: a figure command that stopped on a series
without a peak, a refusal to overwrite that came after seconds of fitting, an
exit 3 that did not say the shape file was not written.
"""

from __future__ import annotations

import glob
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from mfu_sweep.cli import main
from tests.synthetic import make_sweep_doc, write_sweep

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GOLDEN = str(HERE / "golden" / "v1_sweep.json")
FLOPS = [10 ** (6 + 0.5 * i) for i in range(10)]


def run(*args: str) -> Result:
    res = CliRunner().invoke(main, list(args))
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output, res.output
    return res


def error_line(res: Result) -> str:
    lines = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
    assert res.exit_code != 0 and len(lines) == 1, res.output
    return lines[0]


def _devices(tmp_path: Path, n: int, no_peak: str | None = None) -> list[str]:
    """``n`` synthetic devices (labels d0, d1 ...), the one named ``no_peak`` with no peak figure."""
    return [str(write_sweep(tmp_path, make_sweep_doc(
        f"d{i}", P_tflops=50.0 * (i + 1), W_tbs=1.0, t0_s=1e-5, flops=FLOPS, n_samples=5, seed=i,
        peak_tflops=0 if f"d{i}" == no_peak else None), name=f"d{i}.json")) for i in range(n)]


# -- plot: a series without a peak is left out with a note, as compare does ---------------------


@pytest.mark.parametrize("n", [2, 5])  # a pair, and more than a handful (the leaderboard path)
def test_plot_leaves_a_series_without_peak_out_with_a_note(tmp_path: Path, n: int) -> None:
    files = _devices(tmp_path, n, no_peak="d1")
    res = run("plot", *files, "--figure", "vs-flops", "--n-boot", "5", "-o", str(tmp_path / "fig"))
    assert res.exit_code == 0, res.output
    assert "note: left d1 bf16 eager out: no bf16 peak, so its MFU is undefined; --metric tflops includes it" \
        in res.output
    assert (tmp_path / "fig" / "mfu-vs-flops.png").stat().st_size > 0
    assert "metric='" not in res.output


def test_report_ranks_by_tflops_where_a_series_has_no_peak_with_a_note(tmp_path: Path) -> None:
    """The report does not leave d1 out (plot does): it ranks that dtype and mode by TFLOP/s and says so."""
    files = _devices(tmp_path, 5, no_peak="d1")
    res = run("report", *files, "--n-boot", "5", "-o", str(tmp_path / "rep"))
    assert res.exit_code == 0, res.output
    note = "bf16 · eager compared by TFLOP/s (speed): MFU would leave out 1 of its 5 devices (no bf16 peak: d1)"
    assert f"note: {note}" in res.output
    assert note in (tmp_path / "rep" / "index.md").read_text()


def test_plot_default_output_is_not_the_committed_plots_dir() -> None:
    from mfu_sweep.cli.report import plot

    default = next(p.default for p in plot.params if p.name == "output")
    assert Path(default).parts[0] == "out"  # gitignored, like make sweep's figures
    assert "out/" in (ROOT / ".gitignore").read_text().split()


def test_the_figures_page_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/figures.md's published-data example, from the repository root, with its own -o."""
    line = next(ln.strip() for ln in (ROOT / "docs" / "figures.md").read_text().splitlines()
                if "mfu-sweep plot sweeps/published/*.json" in ln)
    args = line.split("#")[0].split()[1:]
    out = args[args.index("-o") + 1]
    assert not Path(out).is_absolute() and Path(out).parts[0] == "out", line
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sweeps").symlink_to(ROOT / "sweeps")
    files = sorted(glob.glob("sweeps/published/*.json"))
    star = args.index("sweeps/published/*.json")
    res = run(*args[:star], *files, *args[star + 1:], "--n-boot", "5")
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / out).iterdir()) == ["mfu-vs-flops.png", "roofline.png"]


# -- writers check their output before the work ----------------------------------------------


def _no_work(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("the command fitted and compared before it checked its output")


@pytest.mark.parametrize("command,made", [("plot", "mfu-vs-flops.png"), ("report", "index.md")])
def test_an_existing_output_is_refused_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       command: str, made: str) -> None:
    import mfu_sweep.present.report.write as report_module

    out = tmp_path / "out"
    out.mkdir()
    (out / made).write_text("from an earlier run")
    monkeypatch.setattr(report_module, "analyse", _no_work)
    res = run(command, GOLDEN, "-o", str(out))
    line = error_line(res)
    assert str(out) in line and made in line and "--force" in line
    assert "fitting and comparing" not in res.output
    assert (out / made).read_text() == "from an earlier run"


def test_plot_figure_stems_are_the_figures_it_draws() -> None:
    from mfu_sweep.present.figures.arrange import figure_stems, make_figures
    from mfu_sweep.records.results import load_sweeps

    for files in ([GOLDEN], [str(ROOT / "sweeps" / "amd-epyc-cpu-grid.json")],
                  [str(ROOT / "sweeps" / "amd-epyc-cpu.json"), str(ROOT / "sweeps" / "amd-epyc-cpu-compile.json")]):
        sweeps = load_sweeps(files)
        for kinds in (None, ("vs-flops", "heatmap")):
            drawn = make_figures(sweeps, metric="tflops", kinds=kinds)
            assert figure_stems(sweeps, metric="tflops", kinds=kinds) == list(drawn), files


# -- refine: exit 3 says what happened to the shape file ---------------------------------------


def test_refine_with_settled_verdicts_says_the_shape_file_was_not_written(tmp_path: Path) -> None:
    files = [str(write_sweep(tmp_path, make_sweep_doc(
        label, P_tflops=p, W_tbs=1.0, t0_s=1e-5, flops=FLOPS, n_samples=5, seed=i, repeats=2), name=f"{label}.json"))
        for i, (label, p) in enumerate((("fast", 300.0), ("slow", 30.0)))]
    target = tmp_path / "next.csv"
    res = run("refine", *files, "--metric", "tflops", "-o", str(target))
    assert res.exit_code == 3, res.output
    assert f"{target} not written: no shape to propose (status settled; exit 3)" in res.output
    assert not target.exists()


def test_refine_refuses_an_existing_shape_file_before_comparing(tmp_path: Path) -> None:
    target = tmp_path / "next.csv"
    target.write_text("batch,m,n,k\n")
    line = error_line(run("refine", GOLDEN, "-o", str(target)))
    assert str(target) in line and "--force" in line


# -- messages that fit what the user can do ------------------------------------------------------


def test_a_figure_passed_as_a_sweep_is_named_as_such() -> None:
    png = str(ROOT / "plots" / "roofline.png")
    for command in (["fit"], ["compare"], ["report", "-o", "unused"], ["plot", "-o", "unused"]):
        line = error_line(run(*command, png))
        assert line == (f"Error: {png!r} is not a sweep JSON file (a PNG image); pass the sweep or merged .json "
                        "files that `mfu-sweep sweep` or `merge` wrote (e.g. sweeps/*.json)"), line
        assert "codec" not in line


def test_no_python_repr_in_the_no_peak_error(tmp_path: Path) -> None:
    files = _devices(tmp_path, 2, no_peak="d1")
    line = error_line(run("compare", *files, "--no-fit"))
    assert "no bf16 peak" in line or "no peak for bf16" in line, line
    assert "--metric tflops" in line and "metric='" not in line


def _published_pair(tmp_path: Path) -> list[str]:
    res = run("import", "xla-perf-table", str(HERE / "data" / "import" / "xla_main_excerpt.txtpb"),
              "-o", str(tmp_path / "pub"))
    assert res.exit_code == 0, res.output
    return [str(tmp_path / "pub" / f"{name}.json") for name in ("sm_90", "sm_100_B200")]


def test_notes_on_published_data_do_not_advise_a_new_sweep(tmp_path: Path) -> None:
    files = _published_pair(tmp_path)
    res = run("compare", *files, "--metric", "tflops", "--no-fit")
    assert res.exit_code == 0, res.output
    assert "--repeats" not in res.output
    assert "sm_100_B200 and sm_90 come from published tables, which cannot be swept again" in res.output
    res = run("fit", str(ROOT / "sweeps" / "published" / "gfx950.json"), "--n-boot", "5")
    assert "--repeats" not in res.output and "a published table cannot be swept again" in res.output
    # a measured series keeps the advice it can follow
    mine = _devices(tmp_path, 2)
    assert "sweep both with --repeats 2 or more" in run("compare", *mine, "--no-fit").output


def test_a_second_table_into_the_same_folder_is_told_label_or_only_not_force(tmp_path: Path) -> None:
    _published_pair(tmp_path)
    other = tmp_path / "another_table.txtpb"  # the same devices from another source (another sha256)
    other.write_text((HERE / "data" / "import" / "xla_main_excerpt.txtpb").read_text() + "\n")
    line = error_line(run("import", "xla-perf-table", str(other), "-o", str(tmp_path / "pub")))
    assert "imported from another source (xla_main_excerpt.txtpb)" in line and "--label sm_100_B200=NEW_NAME" in line
    assert "pass --force" not in line
    # the same table again: overwriting it is what --force is for
    line = error_line(run("import", "xla-perf-table", str(HERE / "data" / "import" / "xla_main_excerpt.txtpb"),
                          "-o", str(tmp_path / "pub")))
    assert "pass --force to overwrite" in line


def test_import_deepbench_lets_no_openpyxl_warning_through(tmp_path: Path) -> None:
    import json
    import warnings

    pytest.importorskip("openpyxl")
    src = ROOT / "data" / "published" / "deepbench" / "DeepBench_NV_TitanXp.xlsx"  # has an extension openpyxl drops
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run("import", "deepbench", str(src), "-o", str(tmp_path))
    assert res.exit_code == 0, res.output
    assert [str(w.message) for w in caught] == [] and "site-packages" not in res.output
    notes = json.loads((tmp_path / "NV_TitanXp.json").read_text())["import"]["notes"]
    assert "openpyxl while reading: Unknown extension is not supported and will be removed " \
           "(not a value the import uses)" in notes


# -- one shape, one number ----------------------------------------------------------------------


def test_compare_shows_each_shape_at_the_reports_value() -> None:
    """The reference Zen 5 file (5 passes): compare's per-shape values are the summary's, which the report,
    analysis.json and the figures show (bf16 1024³ was 0.7751 in compare, 0.781 in the report)."""
    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.analysis.ground.summary import shape_points
    from mfu_sweep.analysis.verdicts.compare import compare_all
    from mfu_sweep.records.results import load_sweeps

    sweeps = load_sweeps([str(ROOT / "sweeps" / "amd-epyc-zen5-cpu.json")])
    series = group_series(sweeps)
    label = next(iter(series)).label
    (c,) = compare_all(sweeps, "tflops", f"{label}/bf16", f"{label}/fp32", use_fit=False)
    want = {k.dtype: {p.shape: p.tflops for p in shape_points(s)} for k, s in series.items()}
    matched = [p for p in c.points if p.interpolated is None]
    assert len(matched) > 10
    for p in matched:
        assert p.a_value == pytest.approx(want["bf16"][p.shape], rel=1e-9), p.shape
        assert p.b_value == pytest.approx(want["fp32"][p.shape], rel=1e-9), p.shape
    big = next(p for p in matched if p.shape == "1024x1024x1024")
    assert f"{big.a_value:.3g}" == "0.781"
    res = run("compare", str(ROOT / "sweeps" / "amd-epyc-zen5-cpu.json"), "--a", f"{label}/bf16", "--b",
              f"{label}/fp32", "--metric", "tflops", "--no-fit")
    assert "each side's value at its median time over passes" in res.output
    assert " 0.7814 " in next(ln for ln in res.output.splitlines() if "1024x1024x1024" in ln)


# -- export: an empty table says why, and passes are told apart ------------------------------------


def test_latex_crossovers_without_any_say_so(tmp_path: Path) -> None:
    files = _devices(tmp_path, 2)  # d1 is twice d0's ceiling throughout: a lead, no crossover
    res = run("export", *files, "--format", "latex", "--what", "crossovers", "--fit-n-boot", "5")
    assert res.exit_code == 0, res.output
    assert "\\multicolumn{8}{l}{no crossover: no compared pair changes leader over its shared FLOP range} \\\\" \
        in res.output
    assert "note: no crossover" in res.output
    md = run("export", *files, "--format", "markdown", "--what", "crossovers", "--fit-n-boot", "5").output
    assert "| no crossover: no compared pair changes leader" in md


def test_latex_records_have_a_pass_column_and_flag_above_peak() -> None:
    res = run("export", str(ROOT / "sweeps" / "amd-epyc-zen5-cpu.json"), "--format", "latex")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "Shape & Pass & GFLOP" in next(ln for ln in lines if ln.startswith("Device &"))
    rows = [ln for ln in lines if ln.startswith("amd-epyc-zen5-cpu & bf16 & eager & 1024x1024x1024 &")]
    assert [r.split(" & ")[4] for r in rows] == ["0", "1", "2", "3", "4"]
    assert len(set(rows)) == len(rows)
    from mfu_sweep.records.results import load_sweeps

    above = sum("above_peak" in r.flags for s in load_sweeps([str(ROOT / "sweeps" / "amd-epyc-zen5-cpu.json")])
                for r in s.records)
    assert sum(", above peak &" in ln for ln in lines) == above
    assert ("% above peak: MFU over 100%" in res.output) == (above > 0)


# -- fitted ceilings: never below the measurements, a poor fit says so, above 100% is flagged ------


def _jagged(flops: float, nbytes: float) -> float:
    """SYNTHETIC: alternate shapes 8x slower in overhead; no roofline describes it."""
    return 1e-5 * (1 if int(round(math.log10(flops) * 2.5)) % 2 else 8) + flops / 1e12


def _falling(flops: float, nbytes: float) -> float:
    """SYNTHETIC: throughput drops by 60% above 3 GFLOP (a cache falling off); the fit's P lands below the best."""
    return 2e-5 + flops / (50e12 if flops < 3e9 else 20e12)


def _fit_file(tmp_path: Path, name: str, time_fn: Any, peak: float | None = None) -> str:
    flops = [10 ** (6 + 0.4 * i) for i in range(12)]
    return str(write_sweep(tmp_path, make_sweep_doc(name, P_tflops=50.0, W_tbs=1.0, t0_s=1e-5, flops=flops,
                                                    time_fn=time_fn, n_samples=5, peak_tflops=peak),
                           name=f"{name}.json"))


def test_a_poor_fit_says_so_in_fit_report_and_headline(tmp_path: Path) -> None:
    from mfu_sweep.present.report.headline import sweep_headline
    from mfu_sweep.records.results import load_sweeps

    path = _fit_file(tmp_path, "jag", _jagged)
    res = run("fit", path, "--n-boot", "10")
    assert res.exit_code == 0, res.output
    assert "note: jag bf16 eager: poor fit: RMS log error 0.66 (a typical shape is x1.93 off the curve)" \
        in res.output
    row = next(ln for ln in res.output.splitlines() if ln.startswith("jag bf16 eager"))
    assert "0.658*" in row and "*: P below the best measured shape, above the peak, or a poor fit" in res.output
    head = sweep_headline(load_sweeps([path]), path, n_boot=10)
    assert "fitted ceiling" not in head and "not a ceiling" in head and "a poor fit (RMS log error 0.66" in head
    out = tmp_path / "rep"
    assert run("report", path, "--n-boot", "10", "-o", str(out)).exit_code == 0
    md = (out / "index.md").read_text()
    assert "compute term P (not a ceiling)" in md and "a poor fit (see the note)" in md and "poor fit: RMS" in md


def test_a_fitted_p_below_the_best_measured_is_never_called_a_ceiling(tmp_path: Path) -> None:
    from mfu_sweep.present.report.headline import sweep_headline
    from mfu_sweep.records.results import load_sweeps

    path = _fit_file(tmp_path, "fall", _falling)
    head = sweep_headline(load_sweeps([path]), path, n_boot=10)
    assert "fitted ceiling" not in head
    assert "fitted P 20.7 TFLOP/s" in head and "not a ceiling, below the best measured 30.2 TFLOP/s" in head
    res = run("fit", path, "--n-boot", "10")
    assert "P 20.7 TFLOP/s is 31% below the best measured 30.2 TFLOP/s" in res.output
    # a good fit whose P the best shape reaches is still a ceiling (the reference Zen 5 fp32: 0.188 vs 0.187)
    zen5 = str(ROOT / "sweeps" / "amd-epyc-zen5-cpu.json")
    assert "best fp32 eager: 0.188 TFLOP/s" in sweep_headline(load_sweeps([zen5]), zen5)
    assert "fitted ceiling P 0.187 TFLOP/s" in sweep_headline(load_sweeps([zen5]), zen5)


def test_mfu_above_100_percent_is_flagged_in_fit_compare_and_the_figure(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from mfu_sweep.present.figures.mfu import plot_mfu
    from mfu_sweep.records.results import load_sweeps

    flops = [10 ** (6 + 0.4 * i) for i in range(12)]
    files = [str(write_sweep(tmp_path, make_sweep_doc(
        label, P_tflops=p, W_tbs=1.0, t0_s=1e-5, flops=flops, n_samples=5, seed=i, peak_tflops=40.0),
        name=f"{label}.json")) for i, (label, p) in enumerate((("hot", 60.0), ("cool", 20.0)))]
    fit = run("fit", files[0], "--n-boot", "10")
    row = next(ln for ln in fit.output.splitlines() if ln.startswith("hot bf16 eager"))
    assert "%*" in row, row
    assert "above 100%, so the peak is lower than what this run reached" in fit.output
    comp = run("compare", *files, "--no-fit")
    assert "%* " in comp.output and "*: MFU above 100%: the peak is lower than this run reached" in comp.output
    ax = plot_mfu(load_sweeps(files), dtype="bf16", mode="eager", show_fit=False)
    assert any(line.get_gid() == "peak-100" for line in ax.get_lines())
    assert any("100% of peak" in t.get_text() for t in ax.get_legend().get_texts())


# -- "leads" by MFU is never read as faster ------------------------------------------------------


def test_an_mfu_lead_is_shown_beside_the_speed_verdict(tmp_path: Path) -> None:
    """SYNTHETIC: 'near' runs at 80% of a small peak, 'fast' at 40% of a big one and twice as fast."""
    files = [str(write_sweep(tmp_path, make_sweep_doc(
        label, P_tflops=p, W_tbs=1.0, t0_s=1e-5, flops=FLOPS, n_samples=5, seed=i, peak_tflops=peak),
        name=f"{label}.json")) for i, (label, p, peak) in enumerate((("fast", 40.0, 100.0), ("near", 20.0, 25.0)))]
    res = run("compare", *files, "--no-fit")
    assert res.exit_code == 0, res.output
    first = res.output.splitlines()[0]
    mfu, speed = first.split(" By TFLOP/s (speed): ")
    assert mfu.startswith("fast vs near (bf16, eager): by MFU, each against its own peak (not speed): ")
    assert "longest lead: near" in mfu and "closer to its own peak" in mfu
    assert "longest lead: fast" in speed and "(faster: +" in speed
    tflops = run("compare", *files, "--no-fit", "--metric", "tflops").output.splitlines()[0]
    assert tflops.startswith("fast vs near (bf16, eager): by TFLOP/s (speed): ") and "By TFLOP/s" not in tflops


# -- the HTML report: each sentence once, words never broken -------------------------------------


def test_report_says_each_comparison_once_and_keeps_words_whole(tmp_path: Path) -> None:
    import json

    files = _devices(tmp_path, 2)  # by MFU d0 leads throughout: one segment, so the summary says it all
    out = tmp_path / "rep"
    assert run("report", *files, "--n-boot", "5", "-o", str(out)).exit_code == 0
    md = (out / "index.md").read_text()
    (comp,) = json.loads((out / "analysis.json").read_text())["comparisons"]
    summary = comp["summary"]["text"]
    assert md.count(summary) == 1, md
    assert md.count("In short:") == 1 and "Segment by segment" not in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| vs d1 |"))
    assert row.startswith("| vs d1 | d0 leads over 100%, d1 over 0%, the same within 2% over 0%, ambiguous over 0% "
                          "of the shared FLOP range; "
                          "crossovers: none (details under Comparisons: d0 vs d1 · bf16 · eager) |"), row
    page = (out / "index.html").read_text()
    # "anywhere" let "estimated" break into "estimate / d": only the compact band strips (which must fit the text
    # column at 800 px, issue 47 item 24) may break inside a word, no other table
    assert all(line.startswith("table.strip th, table.strip td") for line in page.splitlines()
               if "overflow-wrap: anywhere" in line)
    assert "td { overflow-wrap: break-word; }" in page
