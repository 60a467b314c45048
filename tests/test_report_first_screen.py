"""The report's first screen answers who leads where, and every lead is in the words of its metric.

On the published data (sweeps/published/: DeepBench, the OpenXLA tables) the report opens with one band strip
per dtype and mode naming each band's leader, by TFLOP/s where MFU would leave a device out, before any file
list or pass-rate table; a real browser (headless Chromium, where installed) shows every strip within a
1280x800 screen. By MFU no table, sentence or export calls a lead "faster" or "slower". SYNTHETIC data where
marked.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from synthetic import make_sweep_doc

from mfu_sweep.present.export.tables import export_table
from mfu_sweep.present.report.blocks import Bullets, Para, Table
from mfu_sweep.present.report.headline import pair_sentences
from mfu_sweep.present.report.leads import HEADING, NO_LEADER, board_cells, pair_cells
from mfu_sweep.present.report.render import to_html, to_markdown
from mfu_sweep.present.report.write import analyse, build_report
from mfu_sweep.records.results import load_sweeps, parse_document

PUBLISHED = sorted((Path(__file__).resolve().parents[1] / "sweeps" / "published").glob("*.json"))
SCREEN = (1280, 800)
LEAD_WORD = re.compile(r"\b(faster|slower)\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def published() -> tuple[list[Any], Any, list[Any]]:
    sweeps = load_sweeps([str(p) for p in PUBLISHED])
    analysis = analyse(sweeps, fit_n_boot=2)
    return sweeps, analysis, build_report(sweeps, analysis, [])


def _first_section(md: str) -> str:
    start = md.index(f"## {HEADING}")
    return md[start:md.index("\n## ", start + 1)]


def test_published_report_opens_with_who_leads_where_before_files_and_pass_rates(published) -> None:
    """Markdown and HTML: the strips and their sentences come before any file path or pass-rate table."""
    sweeps, analysis, blocks = published
    md, page = to_markdown(blocks), to_html(blocks, {})
    for text, heading in ((md, f"## {HEADING}"), (page, f"<h2>{HEADING}</h2>")):
        first = text.index(heading)
        assert first < text.index("sweeps/published/") and first < text.index("pass rate")
        assert first == min(text.index(h) for h in ("## ", "<h2>") if h in text)  # the first section of all
    opening = _first_section(md)
    assert "sweeps/published/" not in opening and "pass rate" not in opening
    # every dtype and mode with two or more devices has a strip: MFU for the XLA tables, TFLOP/s for DeepBench
    heads = re.findall(r"^\| ([\w-]+ · [\w-]+ · by [\w/]+) \|", opening, re.M)
    assert heads == ["bf16 · compile · by MFU", "fp16 · eager · by TFLOP/s", "fp16 · eager-nt · by TFLOP/s",
                     "fp16 · eager-tn · by TFLOP/s", "fp32 · eager · by TFLOP/s", "fp32 · compile · by MFU",
                     "fp32 · eager-nt · by TFLOP/s", "fp32 · eager-tn · by TFLOP/s", "fp8 · compile · by MFU"]
    # (DeepBench's layouts, issue 48: each a series and a strip of its own, never pooled into one curve)
    assert "MFU would leave out 11 of its 11 devices (no fp32 peak" in opening  # the note that changes the reading
    assert {b.metric for b in analysis.leaderboards if b.dtype == "fp32" and b.mode == "eager"} == {"tflops"}


def test_every_shared_band_names_its_leader_on_the_first_screen(published) -> None:
    """The leader of each band (ahead of the median of the others beyond the margin) is in that band's cell."""
    _, analysis, blocks = published
    opening = _first_section(to_markdown(blocks))
    named = 0
    for board in analysis.leaderboards:
        row = next(line for line in opening.splitlines() if line.startswith("| leads") and
                   all(cell in line for cell in board_cells(board)))
        cells = [c.strip() for c in row.strip("|").split("|")][1:]
        assert len(cells) == len(board.boards)
        for cell, band in zip(cells, board.boards, strict=True):
            assert cell.startswith(band.ahead[0][0]) if band.ahead else cell == NO_LEADER
            named += bool(band.ahead)
    assert sum(len(b.boards) for b in analysis.leaderboards) == 49 and named > 0  # 9 dtypes and modes, 4-7 bands


def _chromium() -> str | None:
    return next((p for name in ("chromium", "chromium-browser", "google-chrome") if (p := shutil.which(name))), None)


PROBE = ("<script>document.body.dataset.bottom = Math.max(...Array.from(document.querySelectorAll('table.strip'),"
         " t => t.getBoundingClientRect().bottom)); document.body.dataset.strips = "
         "document.querySelectorAll('table.strip').length;</script>")


@pytest.mark.skipif(_chromium() is None, reason="needs a headless Chromium (apt-get install chromium)")
def test_every_strip_is_on_the_first_1280x800_screen_in_a_real_browser(published, tmp_path: Path) -> None:
    """Chromium lays the page out at 1280x800 and reports where the last band strip ends: above the fold."""
    _, analysis, blocks = published
    page = tmp_path / "index.html"
    page.write_text(to_html(blocks, {}).replace("</body>", PROBE + "</body>"))
    dom = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          f"--window-size={SCREEN[0]},{SCREEN[1]}", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    bottom = float(re.search(r'data-bottom="([\d.]+)"', dom)[1])
    strips = int(re.search(r'data-strips="(\d+)"', dom)[1])
    assert strips == len(analysis.leaderboards) == 9
    assert 0 < bottom <= SCREEN[1], f"the last band strip ends at {bottom} px, below the first screen"


# --------------------------------------------------------------------------- words that match the metric


def _pair(metric: str) -> tuple[list[Any], Any]:
    """SYNTHETIC: chip-a 40% faster everywhere, but against a peak twice as high (so lower MFU), no compile."""
    flops = [float(f) for f in np.geomspace(1e8, 1e12, 24)]
    a = make_sweep_doc("chip-a", P_tflops=700.0, W_tbs=3.0, t0_s=5e-6, peak_tflops=2000.0, flops=flops, seed=1,
                       noise=0.01)
    b = make_sweep_doc("chip-b", P_tflops=500.0, W_tbs=2.1, t0_s=7e-6, peak_tflops=700.0, flops=flops, seed=2,
                       noise=0.01)
    sweeps = [s for doc in (a, b) for s in parse_document(doc)]
    return sweeps, analyse(sweeps, metric, fit_n_boot=5)


def _fleet() -> tuple[list[Any], Any]:
    """SYNTHETIC: six devices of one dtype (a leaderboard, not pairs), one far ahead in MFU and one far behind."""
    flops = [float(f) for f in np.geomspace(1e8, 1e12, 20)]
    docs = [make_sweep_doc(f"gpu-{name}", P_tflops=p, W_tbs=2.0, t0_s=6e-6, peak_tflops=1000.0, flops=flops,
                           seed=i, noise=0.01)
            for i, (name, p) in enumerate(zip("abcdef", (900.0, 600.0, 610.0, 590.0, 605.0, 300.0), strict=True))]
    sweeps = [s for doc in docs for s in parse_document(doc)]
    return sweeps, analyse(sweeps, "mfu", fit_n_boot=5)


def _lead_claims(text: str, labels: list[str]) -> list[str]:
    """Clauses that name a device and call it (or its lead) faster or slower."""
    names = "|".join(re.escape(lab) for lab in labels)
    return re.findall(rf"\b(?:{names})\b[^;.|\n]*?\b(?:faster|slower)\b", text, re.IGNORECASE)


def _tables(blocks: list[Any]) -> list[str]:
    return [cell for b in blocks if isinstance(b, Table) for cell in (*b.header, *(c for row in b.rows for c in row))]


def test_by_mfu_no_report_export_or_leaderboard_calls_a_lead_faster_or_slower() -> None:
    """chip-a is faster but further from its peak: by MFU chip-b leads ("higher MFU", "closer to its own peak");
    the leaderboard's columns read "higher MFU"/"lower MFU". By TFLOP/s the same pair reads "chip-a faster"."""
    for sweeps, analysis in (_pair("mfu"), _fleet()):
        labels = sorted({s.label for s in sweeps})
        blocks = build_report(sweeps, analysis, [])
        md, page = to_markdown(blocks), to_html(blocks, {})
        cells = _tables(blocks)
        assert cells and not [c for c in cells if LEAD_WORD.search(c)], "a table cell says faster or slower by MFU"
        prose = [t for b in blocks if isinstance(b, (Para, Bullets)) for t in ([b.text] if isinstance(b, Para)
                                                                               else b.items)]
        assert not _lead_claims("\n".join(prose), labels) and not _lead_claims(md, labels)
        assert not _lead_claims(page, labels)
        for fmt in ("csv", "markdown", "latex"):
            table = export_table(sweeps, "bands", fmt, metric="mfu", seed=0)
            rows = [ln for ln in table.splitlines() if not ln.startswith(("%", "_"))]  # notes explain both metrics
            assert not [ln for ln in rows if LEAD_WORD.search(ln)], f"export --what bands ({fmt}) by MFU"
        assert not [s for s in pair_sentences(analysis.comparisons) if _lead_claims(s, labels)]
    pair_md = to_markdown(build_report(*_pair("mfu"), []))
    assert "chip-b higher MFU" in pair_md and "closer to its own peak" in pair_md and "by MFU" in pair_md
    assert "| Metric |" in export_table(_pair("mfu")[0], "bands", "markdown", metric="mfu", seed=0)
    fleet_md = to_markdown(build_report(*_fleet(), []))
    assert "| higher MFU |" in fleet_md and "| lower MFU |" in fleet_md
    speed = to_markdown(build_report(*_pair("tflops"), []))
    assert "chip-a faster" in speed  # the words follow the metric, not a blanket ban


def test_pair_strip_names_each_bands_leader_and_the_sentence_its_crossovers() -> None:
    """SYNTHETIC pair: the strip's cells are the band verdicts, the sentence says where the leader changes."""
    sweeps, analysis = _pair("tflops")
    (c,) = analysis.comparisons
    cells = pair_cells([c])
    assert [text.split()[0] for *_, text in cells if text not in (NO_LEADER, "")] == \
        [c.a if band.verdict > 0 else c.b for band in c.bands if band.verdict]
    opening = _first_section(to_markdown(build_report(sweeps, analysis, [])))
    assert "chip-a vs chip-b (bf16 · eager, by TFLOP/s): " in opening
    assert ("crossovers " in opening) == bool(c.crossovers) and ("no crossover" in opening) != bool(c.crossovers)


def test_a_runs_conclusion_is_said_as_the_runs_never_copied_onto_its_bands() -> None:
    """REAL published DeepBench fp32 (cited import), AMD_MI25 vs NV_TitanX_Pascal: no band from 3.2 MFLOP to
    3.2 GFLOP is called alone, the run of the three is (tests/test_bands.py). The strip keeps each band's own
    verdict, the sentence and the summary say the lead as the run's, and the report's band table and export
    --what bands print the analysis' own band call (Band.call), the run's range beside it."""
    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.analysis.verdicts.compare import compare_series
    from mfu_sweep.present.export.tables import bands_table
    from mfu_sweep.present.report.compare import band_table
    from mfu_sweep.present.report.leads import lead_blocks

    published = Path(__file__).resolve().parents[1] / "sweeps" / "published"
    series = group_series(load_sweeps([str(published / f"{n}.json") for n in ("AMD_MI25", "NV_TitanX_Pascal")]))
    sa, sb = (next(s for k, s in series.items() if k.label == x and k.dtype == "fp32")
              for x in ("AMD_MI25", "NV_TitanX_Pascal"))
    c = compare_series(sa, sb, "tflops", use_fit=False)
    inside = [b for b in c.bands if b.via is not None]
    assert len(inside) == 3 and all(b.verdict == 0 and b.via[3] == 1 for b in inside)
    for lo, hi, text in pair_cells([c]):
        band = next(b for b in c.bands if b.low_flops <= lo and hi <= b.high_flops)
        if band in inside:  # the run's leader is on none of its bands
            assert text == NO_LEADER
    md = to_markdown(lead_blocks([c], [], [], [], "tflops"))
    assert "AMD_MI25 leads over 8.4 MFLOP-3.2 GFLOP taken together" in md
    assert "AMD_MI25 leads from" not in md and "in the band alone" in md
    assert "longest lead: AMD_MI25 over 8.4 MFLOP-3.2 GFLOP taken together" in c.summary()
    run = "ambiguous alone; AMD_MI25 faster taken together (over 3.2 MFLOP-3.2 GFLOP)"
    for table in (band_table(c), bands_table([c])):
        verdicts = [row[-1][0] if isinstance(row[-1], tuple) else row[-1] for row in table.rows]
        assert verdicts == [b.call(c.a, c.b) + (" (over 3.2 MFLOP-3.2 GFLOP)" if b.via else "") for b in c.bands]
        assert verdicts[:3] == [run] * 3 and verdicts[-1] == "NV_TitanX_Pascal faster"
