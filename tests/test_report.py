"""The one-shot report: sections, numbers, self-contained HTML, and the ``report`` command.

All inputs are SYNTHETIC sweeps from tests/synthetic.py (made-up numbers).
"""

from __future__ import annotations

import base64
import html
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from click.testing import CliRunner  # noqa: E402
from synthetic import make_sweep_doc, write_sweep  # noqa: E402

from mfu_sweep.cli import main  # noqa: E402
from mfu_sweep.present.report.compare import adds_segments  # noqa: E402
from mfu_sweep.present.report.render import md_text  # noqa: E402
from mfu_sweep.present.report.write import analyse, write_report  # noqa: E402
from mfu_sweep.records.results import Sweep, parse_document
from mfu_sweep.records.summaries import summary_line

FLOPS = [float(f) for f in np.geomspace(1e6, 1e12, 10)]
ODD_LABEL = 'chip-c<b>&"$x'
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def docs() -> list[dict[str, Any]]:
    common = {"flops": FLOPS, "n_samples": 10}
    # chip-a and chip-b: 40 shapes, so their bands lean each way and the crossover is the data's (issue 35)
    pair = {"flops": [float(f) for f in np.geomspace(1e6, 1e12, 40)], "n_samples": 10}
    a = make_sweep_doc("chip-a", P_tflops=100.0, W_tbs=1.0, t0_s=2e-6, peak_tflops=200.0, bandwidth_tbs=1.2,
                       seed=1, **pair)
    a_compile = make_sweep_doc("chip-a", P_tflops=120.0, W_tbs=1.0, t0_s=6e-6, peak_tflops=200.0,
                               bandwidth_tbs=1.2, mode="compile", seed=2, **common)
    b = make_sweep_doc("chip-b", P_tflops=400.0, W_tbs=3.0, t0_s=5e-5, peak_tflops=500.0, bandwidth_tbs=3.5,
                       seed=3, **pair)
    c = make_sweep_doc(ODD_LABEL, P_tflops=250.0, W_tbs=2.0, t0_s=1e-5, seed=4, mode="compile",
                       statuses=["ok"] * 7 + ["timeout", "oom", "error"], **common)
    c["peak"]["estimated"] = True
    return [a, a_compile, b, c]


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory: pytest.TempPathFactory) -> list[Sweep]:
    d = tmp_path_factory.mktemp("sweeps")
    out = []
    for i, doc in enumerate(docs()):
        path = write_sweep(d, doc, name=f"s{i}.json")
        out += parse_document(doc, source=str(path))
    return out


@pytest.fixture(scope="module")
def report(sweeps: list[Sweep], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, list[Path]]:
    analysis = analyse(sweeps, fit_n_boot=20)
    out = tmp_path_factory.mktemp("report")
    return out, analysis, write_report(sweeps, out, analysis=analysis)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def test_report_writes_markdown_html_json_and_figures(report: tuple[Path, Any, list[Path]]) -> None:
    out, _, written = report
    names = {p.relative_to(out).as_posix() for p in written}
    assert {"index.md", "index.html", "analysis.json", "figures/mfu-vs-flops.png", "figures/roofline.png",
            "figures/first-call.png", "figures/speedup.png", "figures/status.png"} <= names
    assert all(p.exists() for p in written)


def test_markdown_has_every_section_and_fact(report: tuple[Path, Any, list[Path]], sweeps: list[Sweep]) -> None:
    out, analysis, _ = report
    md = (out / "index.md").read_text()
    for heading in ("# mfu-sweep report", "## Summary", "## Comparisons", "## Figures", "## Series",
                    "### chip-a bf16 eager", "### chip-a bf16 compile", "### chip-b bf16 eager", "## How to read"):
        assert heading in md
    sw = sweeps[0]
    for fact in (sw.run["id"], "synthetic-host", "torch n/a", "mfu-sweep-synthetic 1", "SYNTHETIC: made-up peak",
                 "(vendor spec)", "(estimated)", "compute ceiling P", "bandwidth W", "overhead t0",
                 "first call / steady median", "compile time | total", "MFU range", "best shape"):
        assert fact in md, fact
    # crossover verdicts and their intervals, as the analysis returns them
    for c in analysis.comparisons:
        assert md_text(c.summary()) in md and (md_text(c.sentence()) in md) == adds_segments(c)
        assert c.method == "shapes" and "[method shapes; run-to-run variation not measured]" in c.sentence()
    assert "method runs" in md and "method shapes" in md  # "How to read" explains both
    crossing = [x for c in analysis.comparisons for x in c.crossovers]
    assert crossing, "the synthetic pair must cross"
    from mfu_sweep.analysis.verdicts.compare import format_flops
    from mfu_sweep.present.report.compare import crossover_text

    for x in crossing:
        assert f"{format_flops(x.low_flops)} – {format_flops(x.high_flops)}" in md
        assert md_text(crossover_text(x)) in md  # also in the series' own table
    assert "| vs chip-b |" in md and "| vs chip-a |" in md
    [compiled] = analysis.compile_comparisons.values()
    escaped = compiled.sentence().replace("|", "\\|")  # Markdown table cells escape pipes
    assert f"| where compiling pays | {escaped} |" in md
    fit = analysis.fits[next(k for k in analysis.fits if k.label == "chip-a" and k.mode == "eager")]
    from mfu_sweep.present.export.tables import significant

    assert f"{significant(fit.p_tflops)} TFLOP/s [{significant(fit.p_tflops_ci[0])}" in md
    assert "![mfu-vs-flops](figures/mfu-vs-flops.png)" in md
    assert "| 10000x10000x10000" not in md  # no invented shapes
    assert "timeout" in md and "SYNTHETIC oom" in md  # the failed-records table


def test_pass_rate_line(sweeps: list[Sweep]) -> None:

    assert summary_line(sweeps[3].records) == "7/10 ok; 1 timeout, 1 oom, 0 mismatch, 1 error"


def test_html_is_self_contained_and_escaped(report: tuple[Path, Any, list[Path]]) -> None:
    out, _, written = report
    page = (out / "index.html").read_text()
    parser = _Tags()
    parser.feed(page)
    tags = parser.tags
    assert not [t for t, _ in tags if t in ("script", "link", "iframe", "object", "embed")]
    assert not [a for _, a in tags if "href" in a]
    images = [a["src"] for t, a in tags if t == "img"]
    figures = [p for p in written if p.suffix == ".png"]
    assert len(images) == len(figures)
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG_MAGIC)
    assert "<style>" in page and "http://" not in page.split("<body>")[0]
    assert "chip-c&lt;b&gt;&amp;&quot;$x" in page and "<b>" not in page
    for section in ("Summary", "Comparisons", "Figures", "Series", "How to read this"):
        assert f"<h2>{section}</h2>" in page


def test_analysis_json_holds_fits_and_comparisons(report: tuple[Path, Any, list[Path]]) -> None:
    out, analysis, _ = report
    data = json.loads((out / "analysis.json").read_text())
    assert len(data["fits"]) == len(analysis.fits)
    assert [c["sentence"] for c in data["comparisons"]] == [c.sentence() for c in analysis.comparisons]


def test_report_command_on_one_series(tmp_path: Path) -> None:
    doc = make_sweep_doc("solo", P_tflops=100.0, W_tbs=1.0, t0_s=1e-5, flops=FLOPS[:5], n_samples=5, seed=9)
    path = str(write_sweep(tmp_path, doc))
    out = tmp_path / "rep"
    res = CliRunner().invoke(main, ["report", path, "-o", str(out), "--n-boot", "5"])
    assert res.exit_code == 0, res.output
    assert (out / "index.html").exists() and f"wrote {out / 'index.html'}" in res.output
    md = (out / "index.md").read_text()
    assert "Nothing to compare" in md and "### solo bf16 eager" in md
    res = CliRunner().invoke(main, ["report", str(tmp_path / "missing.json"), "-o", str(out)])
    assert res.exit_code == 1 and "no such file" in res.output and "Traceback" not in res.output
    res = CliRunner().invoke(main, ["report", path, "--mode", "bogus", "-o", str(out)])
    assert res.exit_code == 1 and "--mode bogus matches no records" in res.output


def test_report_shows_replicate_spread(tmp_path: Path) -> None:
    """SYNTHETIC: two ranks of one chip, rank 1 slower; the report has a spread section naming it."""
    from mfu_sweep.records.results import parse_document

    flops = list(np.geomspace(1e8, 1e11, 5))
    r0 = make_sweep_doc("gpu.r0", P_tflops=100, W_tbs=2, t0_s=1e-5, flops=flops, run_id="r0")
    r1 = make_sweep_doc("gpu.r1", P_tflops=80, W_tbs=2, t0_s=1e-5, flops=flops, run_id="r1")
    sweeps = [s for d in (r0, r1) for s in parse_document(d)]
    write_report(sweeps, tmp_path / "rep", analysis=analyse(sweeps, fit_n_boot=10))
    md = (tmp_path / "rep" / "index.md").read_text()
    assert "## Spread across devices (replicate runs)" in md
    assert "gpu (bf16, eager) over 2 devices" in md and "slowest: gpu.r1" in md


def test_every_comparison_has_its_summary(report: tuple[Path, Any, list[Path]]) -> None:
    out, analysis, _ = report
    md, page = (out / "index.md").read_text(), (out / "index.html").read_text()
    data = json.loads((out / "analysis.json").read_text())
    assert analysis.comparisons
    for c, js in zip(analysis.comparisons, data["comparisons"], strict=True):
        text = c.summary()
        assert "of the shared FLOP range" in text
        segments = f"\n\nSegment by segment: {md_text(c.sentence())}" if adds_segments(c) else ""
        # the summary first; the segments when they say more (a label's markup escaped: chip-c<b>&"$x)
        assert f"In short: {md_text(text)}{segments}\n\n" in md
        assert md.count(f"In short: {md_text(text)}") == 1
        assert f"<p>In short: {html.escape(text)}</p>" in page
        assert js["summary"]["text"] == text and js["summary"]["share_a"] == c.lead_summary().share_a


def test_report_reuses_fits_and_lists_pairs_by_dtype_and_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    """SYNTHETIC: three devices in bf16 and fp32 (one without an fp32 peak); the report compares each
    dtype in turn, with the fits it already has: bf16 by MFU, fp32 by TFLOP/s (MFU would leave q out), and
    says so."""
    from mfu_sweep.analysis.verdicts import compare as compare_module
    from mfu_sweep.analysis.verdicts.compare import compare_all

    flops = FLOPS[3:8]
    sweeps = [s for i, label in enumerate(("p", "q", "r")) for dtype in ("bf16", "fp32")
              for s in parse_document(make_sweep_doc(
                  label, P_tflops=100.0 * (i + 1), W_tbs=1.0, t0_s=1e-5, flops=flops, dtype=dtype, n_samples=5,
                  seed=i, peak_tflops=0 if (label, dtype) == ("q", "fp32") else None))]

    def refit(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the report refitted a series it had already fitted")

    monkeypatch.setattr(compare_module, "fit_series", refit)
    analysis = analyse(sweeps, fit_n_boot=5)
    assert [(c.a, c.b, c.dtype, c.metric) for c in analysis.comparisons] == [
        ("p", "q", "bf16", "mfu"), ("p", "r", "bf16", "mfu"), ("q", "r", "bf16", "mfu"),
        ("p", "q", "fp32", "tflops"), ("p", "r", "fp32", "tflops"), ("q", "r", "fp32", "tflops")]
    assert list(analysis.compare_notes) == list(analysis.skipped) == [
        "fp32 · eager compared by TFLOP/s (speed): MFU would leave out 1 of its 3 devices (no fp32 peak: q)"]
    assert analysis.metrics.of("fp32", "eager") == "tflops" and analysis.metrics.of("bf16", "eager") == "mfu"
    # the same comparisons compare_all gives with these fits, each dtype by its metric
    direct = [*(c for c in compare_all(sweeps, fits=analysis.fits, seed=0, alpha=0.05, on_error=lambda e: None)
                if c.dtype == "bf16"),
              *(c for c in compare_all(sweeps, "tflops", fits=analysis.fits, seed=0, alpha=0.05) if c.dtype == "fp32")]
    by_pair = {(c.a, c.b, c.dtype): c.to_json() for c in direct}
    assert [c.to_json() for c in analysis.comparisons] == [by_pair[(c.a, c.b, c.dtype)] for c in analysis.comparisons]


def test_a_series_without_any_peak_is_not_called_vendor_spec() -> None:
    from mfu_sweep.present.figures.theme import peak_kind, series_name
    from mfu_sweep.specs import Peak

    none = Peak(chip=None, tflops={}, memory_bandwidth_tbs=None, source="no spec entry (imported)")
    assert peak_kind(none) == "none"
    assert series_name("NV_P100", none) == "NV_P100 (no peak)"


def test_best_shape_of_a_repeats_sweep_is_a_shape_median_not_its_luckiest_pass() -> None:
    from synthetic import NOISE_MODELS, make_sweep_doc

    from mfu_sweep.analysis.ground.series import group_series, shape_seconds
    from mfu_sweep.analysis.ground.summary import summarise
    from mfu_sweep.present.export.tables import significant
    from mfu_sweep.present.report.write import performance_facts

    doc = make_sweep_doc("chip", P_tflops=100, W_tbs=1, t0_s=1e-6, flops=[1e8, 1e9, 1e10, 1e11], n_samples=3,
                         noise_model=NOISE_MODELS["per-shape 5%"], repeats=5)
    (series,) = group_series(parse_document(doc)).values()
    per_shape = {}
    for r in series.records:
        per_shape.setdefault(r.shape, []).append(r)
    best = max(recs[0].flops / shape_seconds(recs) / 1e12 for recs in per_shape.values())
    assert best < max(r.tflops for r in series.records)
    facts = dict(performance_facts(summarise(series), "tflops"))
    assert f"{significant(best)} TFLOP/s" in facts["best shape"]


def test_files_written_by_forked_workers_equal_one_process(report: tuple[Path, Any, list[Path]], sweeps: list[Sweep],
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """write_report spreads the JSON, the text and the figures over worker processes: the same bytes as in one."""
    from mfu_sweep.analysis.fits import parallel

    out, analysis, paths = report
    monkeypatch.setattr(parallel, "cores", lambda: 1)
    serial = write_report(sweeps, tmp_path, analysis=analysis)
    assert [p.relative_to(tmp_path) for p in serial] == [p.relative_to(out) for p in paths]
    assert all(p.read_bytes() == (tmp_path / p.relative_to(out)).read_bytes() for p in paths)
