"""What a report draws when there is too much to draw every figure (present/figures/choice.py).

All inputs are SYNTHETIC sweeps from tests/synthetic.py and tests/synthetic_fleet.py (made-up numbers).
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from synthetic import make_sweep_doc  # noqa: E402
from synthetic_fleet import fleet_docs  # noqa: E402

from mfu_sweep.analysis.fleet.view import replicate_fleets  # noqa: E402
from mfu_sweep.analysis.ground.series import group_series  # noqa: E402
from mfu_sweep.present.figures import choice as figure_choice  # noqa: E402
from mfu_sweep.present.figures.choice import choose_figures  # noqa: E402
from mfu_sweep.present.report.write import analyse, write_report  # noqa: E402
from mfu_sweep.records.results import parse_document  # noqa: E402

TRUTH = {"P_tflops": 300.0, "W_tbs": 2.0, "t0_s": 5e-6}


def grid_sweeps(labels: list[str], ks: list[int]) -> list:
    shapes = [f"{m}x{n}x{k}" for k in ks for m in (512, 1024) for n in (512, 1024)]
    return [s for i, lab in enumerate(labels)
            for s in parse_document(make_sweep_doc(lab, shapes=shapes, n_samples=5, seed=i, **TRUTH))]


def test_many_grids_draw_one_device_at_a_few_ks_spread_over_the_range() -> None:
    sweeps = grid_sweeps(["a", "b"], [64, 128, 256, 512, 1024, 2048, 4096])
    choice = choose_figures(sweeps)
    assert len(choice.grids) == 14 and choice.featured is None  # two devices: every curve is drawn
    assert [g[3] for g in choice.heatmaps] == [64, 256, 1024, 4096]  # smallest, largest, evenly between
    assert {g[0] for g in choice.heatmaps} == {"a"}
    assert "4 of 14 m x n heatmaps" in choice.sentence(2)
    few = grid_sweeps(["a"], [64, 128])
    assert choose_figures(few).heatmaps == choose_figures(few).grids and choose_figures(few).sentence(1) is None


def test_a_fleet_features_its_flagged_and_slowest_devices() -> None:
    docs = fleet_docs(8, flops=[float(f) for f in (1e9, 1e10, 1e11, 1e12)] * 1, n_samples=10,
                      slow={5: (1.3, 0.0, 1e13)}, seed=2)
    sweeps = [s for d in docs for s in parse_document(d)]
    fleets = replicate_fleets(group_series(sweeps))
    choice = choose_figures(sweeps, fleets)
    [featured] = choice.featured.values()
    assert len(featured) == 4 and featured[0] == "synthetic-gpu.r5"
    assert "draw 4 of the 8 devices" in choice.sentence(8)


def test_detail_links_the_figures_beyond_the_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(figure_choice, "MAX_HEATMAPS", 2)
    monkeypatch.setattr(figure_choice, "MAX_K", 2)
    sweeps = grid_sweeps(["a", "b"], [64, 256, 1024])
    analysis = analyse(sweeps, fit_n_boot=20)
    write_report(sweeps, tmp_path / "chosen", analysis=analysis)
    page = (tmp_path / "chosen" / "index.html").read_text()
    assert len(re.findall(r'<img alt="heatmap-', page)) == 2 and "--detail" in page
    assert len(list((tmp_path / "chosen" / "figures").glob("heatmap-*.png"))) == 2
    write_report(sweeps, tmp_path / "detail", analysis=analysis, detail=True)
    page = (tmp_path / "detail" / "index.html").read_text()
    assert len(re.findall(r'<img alt="heatmap-', page)) == 2
    links = re.findall(r'<a href="figures/(heatmap-[^"]+)\.png">', page)
    assert len(links) == 4
    assert all((tmp_path / "detail" / "figures" / f"{stem}.png").exists() for stem in links)
    assert "](figures/heatmap-" in (tmp_path / "detail" / "index.md").read_text()


def test_a_fleet_report_describes_the_featured_devices_only(tmp_path: Path) -> None:
    docs = fleet_docs(6, flops=[float(f) for f in (1e8, 1e9, 1e10, 1e11, 1e12)], n_samples=8,
                      slow={4: (1.3, 0.0, 1e13)}, seed=3)
    sweeps = [s for d in docs for s in parse_document(d)]
    analysis = analyse(sweeps, fit_n_boot=20)
    write_report(sweeps, tmp_path / "r", analysis=analysis)
    md = (tmp_path / "r" / "index.md").read_text()
    assert md.count("\n### synthetic-gpu.r") == 4 and "### synthetic-gpu.r4 " in md
    assert "the other 2 are in the summary table" in md and "draw 4 of the 6 devices" in md
    write_report(sweeps, tmp_path / "d", analysis=analysis, detail=True)
    assert (tmp_path / "d" / "index.md").read_text().count("\n### synthetic-gpu.r") == 6
