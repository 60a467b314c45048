"""Refinement placement on SYNTHETIC devices with known crossovers (tests/synthetic_refine.py), the look accounting,
shape files with family and passes, and bad input. The real CPU loop is in test_refine_cpu.py."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from synthetic_refine import SimDevice, SimSweep, base_time, crossing_ratio

from mfu_sweep.analysis.ground.series import group_series
from mfu_sweep.analysis.refine.knees import bends
from mfu_sweep.analysis.refine.looks import Look, RefineError, current_look, refine_round
from mfu_sweep.analysis.refine.plan import gap_targets, plan_refinement, shape_file_text, square_near
from mfu_sweep.analysis.refine.regions import trend_regions
from mfu_sweep.analysis.verdicts.compare import compare_all
from mfu_sweep.gemm.shape_files import read_shape_rows
from mfu_sweep.gemm.shapes import Shape, ShapeError, points_for_range, square_family
from mfu_sweep.measure.passes import plan_passes

TRUTH = (8.5, 11.0)
GRID = square_family(1e6, 1e13, points_for_range(1e6, 1e13))


def start(seed: int, planted: bool = True) -> tuple[SimSweep, SimSweep, np.random.Generator]:
    rng = np.random.default_rng(seed)
    dev = SimDevice("dev", crossing_ratio(TRUTH)) if planted else SimDevice("dev")
    a, b = SimSweep(dev, 3), SimSweep(SimDevice("ref"), 3)
    a.run(GRID, "square", rng)
    b.run(GRID, "square", rng)
    return a, b, rng


def loop(a: SimSweep, b: SimSweep, rng: np.random.Generator, looks: int = 8):
    while True:
        plan = plan_refinement([a.sweep(), b.sweep()], looks=looks)
        if plan.status != "open":
            return plan
        rows = [(p.shape, p.passes) for p in plan.proposals]
        a.run(rows, plan.family, rng)
        b.run(rows, plan.family, rng)


def test_looks_split_alpha_and_count_rounds_from_families() -> None:
    look = Look(3, looks=8, alpha=0.05)
    assert look.alpha_look == pytest.approx(0.05 / 8)
    assert look.spent == pytest.approx(3 * 0.05 / 8)
    assert not look.last and Look(8, 8).last
    assert refine_round("refine-12") == 12 and refine_round("square") is None and refine_round("refine-x") is None
    a, b, rng = start(0)
    assert current_look([a.sweep(), b.sweep()]).index == 1
    a.run([Shape(1, 1000, 1000, 1008)], "refine-2", rng)  # not on the grid
    assert current_look([a.sweep(), b.sweep()], looks=4).index == 3  # an old file's family without "-of-"
    a.run([Shape(1, 1000, 1000, 1016)], "refine-3-of-4", rng)
    assert current_look([a.sweep(), b.sweep()]) == Look(4, looks=4)  # the plan travels with the records
    with pytest.raises(RefineError, match="looks=8 differs from the 4 looks"):
        current_look([a.sweep(), b.sweep()], looks=8)


def test_comparisons_are_tested_at_the_looks_share_of_alpha() -> None:
    a, b, _ = start(1)
    plan = plan_refinement([a.sweep(), b.sweep()], looks=5, alpha=0.1)
    assert [c.alpha for c in plan.comparisons] == [pytest.approx(0.02)]
    # the same data at the full alpha can call more, never less: the refine verdicts are the stricter ones
    full = compare_all([a.sweep(), b.sweep()], alpha=0.1, use_fit=False)[0]
    called = sum(p.leader is not None for p in plan.comparisons[0].points)
    assert called <= sum(p.leader is not None for p in full.points)


def test_gap_targets_split_every_gap_to_the_step() -> None:
    targets = [f for f, _ in gap_targets([1e6, 1e7, 1.1e7], 1e6, 1.1e7, 1.5)]
    edges = sorted([1e6, 1e7, 1.1e7, *targets])
    assert max(hi / lo for lo, hi in zip(edges, edges[1:])) <= 1.5 + 1e-9
    assert len(targets) == math.ceil(math.log(10) / math.log(1.5)) - 1  # the 1.1 gap needs none


def test_square_near_prefers_aligned_sizes_within_tolerance() -> None:
    s = square_near(2 * 4096.0**3, 1.05)
    assert s.m == 4096
    odd = square_near(2 * 800.0**3, 1.02)  # 768 and 832 are >6% off in FLOPs: a finer multiple is taken
    assert odd.m % 8 == 0 and abs(math.log(odd.flops / (2 * 800.0**3))) <= math.log(1.02)


def test_first_round_places_shapes_only_around_the_planted_crossovers() -> None:
    # 20 seeds: every new shape must lie within a factor 10 (one decade) of a true crossover, and each true
    # crossover must get shapes within a factor 1.5 in >= 18 seeds (90%, the goal's rate; 20 seeds suffice
    # because in the benchmark's 40 seeds every seed placed shapes there).
    # margin 0: the planted leads are under 2% near the crossings, and where the ratio crosses 1 is the pure
    # difference test's question (the default 2% margin places them in 17 of 20 seeds)
    near = np.zeros(2, dtype=int)
    for seed in range(20):
        a, b, _ = start(seed)
        plan = plan_refinement([a.sweep(), b.sweep()], margin=0.0)
        new = [math.log10(p.shape.flops) for p in plan.proposals if not p.extra_pass]
        assert new, f"seed {seed}: nothing proposed"
        assert all(min(abs(x - t) for t in TRUTH) <= 1.0 for x in new), (seed, new)
        near += [any(abs(x - t) <= math.log10(1.5) for x in new) for t in TRUTH]
    assert (near >= 18).all(), near


def test_more_passes_go_to_shapes_in_focus_and_never_below_the_files_passes() -> None:
    a, b, rng = start(3)
    plan = plan_refinement([a.sweep(), b.sweep()])
    a.run([(p.shape, p.passes) for p in plan.proposals], "refine-1", rng)
    b.run([(p.shape, p.passes) for p in plan.proposals], "refine-1", rng)
    plan = plan_refinement([a.sweep(), b.sweep()])
    assert all(p.passes >= 3 for p in plan.proposals)
    extra = [p for p in plan.proposals if p.extra_pass]
    assert all(min(abs(math.log10(p.shape.flops) - t) for t in TRUTH) <= 1.0 for p in extra)
    assert plan.repeats == max([3, *(p.passes for p in plan.proposals)])


def test_loop_locates_both_crossovers_and_narrows_them() -> None:
    # 10 seeds of the full loop (the benchmark runs 40): both crossovers within a factor 1.5 of the truth in
    # >= 9 (the goal's 90%), and the wider interval at most x1.5 in >= 3. In this configuration (8 looks) the
    # loop reaches x1.5 in about half the seeds: 9 of 20 here, 10 of 20 with round 4's code (seeds 100-119;
    # `benchmarks/refine.py --seeds 20 --grids 4x3`: 50%, round 4's code 45%), 6 of these 10; the uniform
    # default grid never does (x14.7 median), so 3 of 10 still fails a loop that stops narrowing.
    located = narrow = 0
    for seed in range(10):
        a, b, rng = start(100 + seed)
        plan = loop(a, b, rng)
        xs = [c for c in plan.comparisons[0].crossovers if c.method != "fit"]
        located += len(xs) == 2 and all(abs(math.log10(c.flops) - t) <= math.log10(1.5) for c, t in zip(xs, TRUTH))
        narrow += bool(xs) and max(c.high_flops / c.low_flops for c in xs) <= 1.5
    assert located >= 9 and narrow >= 3, (located, narrow)


def test_identical_devices_get_no_false_crossovers_and_few_rounds() -> None:
    # 10 seeds; the benchmark's 40 seeds show none. Any false crossover here would be a strong signal (the
    # looks' Bonferroni bound is 5% for any lead, and a crossover needs two opposite leads).
    for seed in range(10):
        a, b, rng = start(200 + seed, planted=False)
        plan = loop(a, b, rng)
        assert not [c for c in plan.comparisons[0].crossovers if c.method != "fit"], seed
        assert plan.look.index <= 3, seed


def test_settled_pair_proposes_nothing() -> None:
    a, b, rng = start(5)
    plan = plan_refinement([a.sweep(), b.sweep()], target=1e6)  # every interval is narrower than 1e6
    candidates = [r for r in plan.regions if r.kind == "candidate"]
    assert plan.status == ("settled" if not candidates else "open")
    assert all(r.kind != "crossover" for r in plan.regions)


def test_last_look_proposes_nothing() -> None:
    a, b, _ = start(6)
    plan = plan_refinement([a.sweep(), b.sweep()], looks=1)
    assert plan.status == "looks-spent" and plan.proposals == ()


def test_bends_find_the_roofline_knee_of_one_device() -> None:
    # SYNTHETIC roofline t0 + max(F/P, B/W): with t0 = 6 us and P = 700 TFLOP/s the per-call overhead gives way to
    # compute at F = t0 * P = 4.2 GFLOP (the bandwidth term never dominates: it is below t0 at that size)
    knee = 6e-6 * 700e12
    assert float(base_time(knee)) == pytest.approx(2 * 6e-6)
    rng = np.random.default_rng(0)
    one = SimSweep(SimDevice("dev"), 3)
    one.run(GRID, "square", rng)
    [series] = group_series([one.sweep()]).values()
    found = bends(series)
    assert any(lo / 3 <= knee <= hi * 3 for lo, hi, _ in found), found
    plan = plan_refinement([one.sweep()], bends_only=True)
    assert plan.proposals and all(r.kind == "bend" for r in plan.regions)
    assert sum(abs(math.log10(p.shape.flops / knee)) < 1 for p in plan.proposals) >= len(plan.proposals) / 2


def test_one_device_without_bends_is_refused_with_a_hint() -> None:
    a, _, _ = start(0)
    with pytest.raises(RefineError, match="one only.*--bends"):
        plan_refinement([a.sweep()])


def test_devices_without_a_common_dtype_are_refused() -> None:
    from dataclasses import replace

    a, b, _ = start(0)
    sb = b.sweep()
    sb = sb.with_records([replace(r, dtype="fp16") for r in sb.records])
    sb = replace(sb, peak=replace(sb.peak, tflops={"fp16": 1000.0}))
    with pytest.raises(RefineError, match="share no dtype and mode: dev has bf16 eager; ref has fp16 eager"):
        plan_refinement([a.sweep(), sb])


def test_shape_file_round_trips_with_family_and_passes(tmp_path) -> None:  # noqa: ANN001
    a, b, _ = start(2)
    plan = plan_refinement([a.sweep(), b.sweep()])
    path = tmp_path / "next.csv"
    path.write_text(shape_file_text(plan, ["run on every device: mfu-sweep sweep ..."]))
    rows = read_shape_rows(path)
    assert [(r.shape, r.passes) for r in rows] == [(p.shape, p.passes) for p in plan.proposals]
    assert {r.family for r in rows} == {"refine-1-of-8"}
    bad = tmp_path / "bad.csv"
    bad.write_text("m,n,k,passes\n64,64,64,0\n")
    with pytest.raises(ShapeError, match="line 2.*passes"):
        read_shape_rows(bad)


def test_plan_passes_limits_items_to_their_passes() -> None:
    passes = plan_passes(["a", "b", "c"], 3, seed=0, key=str, passes_of=lambda t: {"a": 1, "b": 2}.get(t))
    assert [sorted(p.todo) for p in passes] == [["a", "b", "c"], ["b", "c"], ["c"]]
    plain = plan_passes(["a", "b", "c"], 3, seed=0, key=str)
    assert [p.todo for p in passes][2] == tuple(t for t in plain[2].todo if t == "c")


def _loop_files(tmp_path, seed: int):  # noqa: ANN001, ANN202
    from mfu_sweep.records.results import write_json_atomic

    a, b, rng = start(seed)
    out, other = tmp_path / "dev.json", tmp_path / "ref.json"
    write_json_atomic(out, a.sweep().to_json())
    write_json_atomic(other, b.sweep().to_json())
    clock = [0.0]

    def measure(rows):  # noqa: ANN001, ANN202  -- the SYNTHETIC device measures both sides, like two machines
        before = a.seconds
        for sim in (a, b):
            sim.run([(s, n) for s, _, n in rows], rows[0][1], rng)
        clock[0] += a.seconds - before  # a seeded fake clock: the simulated device seconds of this device
        write_json_atomic(out, a.sweep().to_json())
        write_json_atomic(other, b.sweep().to_json())
        return a.sweep()

    return out, other, measure, clock, a


def test_refine_loop_stops_settled_or_on_budget_and_says_which(tmp_path) -> None:  # noqa: ANN001
    from mfu_sweep.workflow.loop import LoopSettings, refine_loop

    out, other, measure, clock, a = _loop_files(tmp_path, 7)
    roomy = refine_loop(out, LoopSettings(target=1.5, budget_s=1e6, others=(str(other),)), measure, a.seconds,
                        clock=lambda: clock[0])
    assert roomy.reason in ("settled", "looks") and roomy.rounds >= 1
    assert roomy.seconds == pytest.approx(a.seconds)
    assert len(roomy.shape_files) == roomy.rounds and all(Path(f).exists() for f in roomy.shape_files)
    (tmp_path / "tight").mkdir()
    out, other, measure, clock, a = _loop_files(tmp_path / "tight", 7)
    budget = a.seconds + 1  # any first round costs more than 1 simulated second: it must not start
    tight = refine_loop(out, LoopSettings(target=1.5, budget_s=budget, others=(str(other),)), measure, a.seconds,
                        clock=lambda: clock[0])
    assert tight.reason == "budget" and tight.rounds == 0 and tight.seconds <= budget
    assert "budget" in tight.sentence()


def test_parse_until_and_duration() -> None:
    from mfu_sweep.workflow.loop import LoopError, parse_duration, parse_until

    assert parse_duration("20m") == 1200 and parse_duration("1.5h") == 5400 and parse_duration("90") == 90
    assert parse_until("crossover-width=1.5") == ("crossover-width", 1.5)
    for bad in ("width=2", "crossover-width=1", "crossover-width=x"):
        with pytest.raises(LoopError):
            parse_until(bad)
    with pytest.raises(LoopError, match="positive duration"):
        parse_duration("0m")


def test_a_ratio_sweeping_through_one_inside_an_uncalled_band_is_a_candidate(tmp_path: Path) -> None:
    # SYNTHETIC (tests/synthetic.py): 6 shapes measured once each over 2.7 decades are one band (a one-pass
    # band needs 10 shapes), which cannot be called; a 100 us per-call overhead makes "slow-start" far behind
    # on the smallest shapes and far ahead on the largest, so its ratio crosses 1 inside that band.
    from synthetic import make_sweep_doc, write_sweep

    from mfu_sweep.records.results import load_sweeps

    flops = [float(f) for f in np.geomspace(1e5, 3e7, 6)]
    docs = [make_sweep_doc("slow-start", P_tflops=1000.0, W_tbs=100.0, t0_s=1e-4, dtype="fp32", flops=flops,
                           peak_tflops=0.1, seed=3),
            make_sweep_doc("quick", P_tflops=0.05, W_tbs=0.05, t0_s=2e-6, dtype="fp32", flops=flops,
                           peak_tflops=0.1, seed=4)]
    (c,) = compare_all(load_sweeps([write_sweep(tmp_path, d) for d in docs]), metric="tflops", use_fit=False)
    assert all(b.verdict == 0 for b in c.bands) and not c.crossovers
    (region,) = trend_regions(c, [])
    def ratio_at(flops: float) -> float:
        return min(c.points, key=lambda p: abs(math.log(p.flops / flops))).ratio

    below, above = ratio_at(region.low_flops), ratio_at(region.high_flops)
    assert region.kind == "candidate" and (below - 1) * (above - 1) < 0  # the two shapes either side of 1
    assert trend_regions(c, [(region.low_flops, region.high_flops)]) == []  # a covered stretch is not repeated


def test_refine_on_imported_tables_prints_no_command_that_cannot_run(tmp_path: Path) -> None:
    """Published tables cannot be measured again: refine writes the shape file for the user's own device and
    says so, instead of printing ``sweep --device imported ... -o <published file>`` (which fails)."""
    from click.testing import CliRunner

    from mfu_sweep.cli import main

    published = Path(__file__).resolve().parents[1] / "sweeps" / "published"
    out = tmp_path / "next.csv"
    res = CliRunner().invoke(main, ["refine", str(published / "sm_100_B200.json"), str(published / "gfx950.json"),
                                    "--metric", "tflops", "-o", str(out)])
    assert res.exit_code in (0, 3), res.output
    assert "--device imported" not in res.output and "--resume" not in res.output
    if res.exit_code == 0:
        assert "sm_100_B200, gfx950 are imported (published data) and cannot be measured again" in res.output
        assert "--device imported" not in out.read_text()
        assert read_shape_rows(out)


def test_candidate_regions_on_published_tables_are_never_empty_or_repeated() -> None:
    """Shapes of one FLOP count that lean both ways (a shape effect) once gave "possible crossover in
    [540 MFLOP, 540 MFLOP]" nine times for B200 vs gfx950 fp32; a region now spans two FLOP counts, once."""
    from mfu_sweep.records.results import load_sweeps

    published = Path(__file__).resolve().parents[1] / "sweeps" / "published"
    plan = plan_refinement(load_sweeps([published / "sm_100_B200.json", published / "gfx950.json"]),
                           metric="tflops")
    spans = [(r.where, r.low_flops, r.high_flops) for r in plan.regions]
    assert spans and all(lo < hi for _, lo, hi in spans)
    assert len(spans) == len(set(spans))


def test_a_stricter_look_never_narrows_a_crossover_interval_elsewhere() -> None:
    """refine's looks test at alpha / looks: B200 vs gfx950 bf16 once got [1.05, 1.48] GFLOP at a look beside
    compare's [1.3, 2.4] (a 95% Fieller interval in a different bracket); now each look's interval holds
    compare's, for every dtype of the published pair."""
    from mfu_sweep.records.results import load_sweeps

    published = Path(__file__).resolve().parents[1] / "sweeps" / "published"
    sweeps = load_sweeps([published / "sm_100_B200.json", published / "gfx950.json"])
    loose = {c.dtype: c.crossovers for c in compare_all(sweeps, "tflops", alpha=0.05, use_fit=False)}
    strict = {c.dtype: c.crossovers for c in compare_all(sweeps, "tflops", alpha=0.05 / 8, use_fit=False)}
    checked = 0
    for dtype, xs in loose.items():
        for x in xs:
            near = [y for y in strict.get(dtype, []) if y.low_flops <= x.flops <= y.high_flops]
            if near:
                checked += 1
                assert near[0].low_flops <= x.low_flops * 1.0001 and near[0].high_flops >= x.high_flops * 0.9999
    assert checked >= 2


def test_refine_over_many_files_plans_the_pairs_it_can_and_notes_the_rest(tmp_path: Path) -> None:
    """The committed sweeps hold a model's layer shapes (skinny) beside square sweeps: a pair with no shape either
    side can be compared at is left out with one note each, and the other pairs are still planned (it stopped at
    the first such pair)."""
    from click.testing import CliRunner

    from mfu_sweep.cli import main
    from mfu_sweep.records.results import load_sweeps

    files = sorted(str(p) for p in (Path(__file__).resolve().parents[1] / "sweeps").glob("*.json"))
    plan = plan_refinement(load_sweeps(files))
    assert plan.skipped and all(n.startswith("cannot compare ") for n in plan.skipped)
    skipped_pairs = {n.split(" (")[0] for n in plan.skipped}
    assert plan.comparisons and not any(f"cannot compare {c.a} with {c.b}" in skipped_pairs for c in plan.comparisons)
    res = CliRunner().invoke(main, ["refine", *files, "-o", str(tmp_path / "next.csv")])
    assert res.exit_code in (0, 3), res.output  # 3: nothing to propose
    assert res.output.count("note: cannot compare ") == len(plan.skipped) and "Error" not in res.output
