"""``sweep --repeats``: pass planning, the pass index in the result format, real CPU sweeps over passes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.analysis.sources.merge import merge_files
from mfu_sweep.cli import main
from mfu_sweep.gemm.dtypes import get_dtype
from mfu_sweep.gemm.shapes import Shape, working_bytes
from mfu_sweep.measure.passes import order_seed, order_seeds, plan_passes, shuffled
from mfu_sweep.measure.planning import (
    ACCEL_REPEATS,
    BUDGET_PER_PASS_S,
    CPU_REPEATS,
    default_budget,
    default_repeats,
    make_tasks,
    select_shapes,
)
from mfu_sweep.measure.sweep import SweepPlan, _capped, cap_by_memory
from mfu_sweep.records.results import ResultError, load_sweeps, parse_document, save_sweep, validate_file

GOLDEN = Path(__file__).parent / "golden" / "v1_sweep.json"


def golden() -> dict:
    return json.loads(GOLDEN.read_text())


# -- pass planning (pure) --

def test_order_seed_is_deterministic_and_differs_per_pass_and_seed() -> None:
    assert order_seed(0, 0) == order_seed(0, 0)
    seeds = order_seeds(0, 8)
    assert len(set(seeds)) == 8 and all(0 <= s < 2**31 for s in seeds)
    assert order_seeds(1, 8) != seeds and order_seeds(0, 3) == seeds[:3]


def test_every_pass_is_a_seeded_permutation_of_its_own() -> None:
    items = list(range(40))
    passes = plan_passes(items, 4, seed=7, key=lambda x: x)
    orders = [list(p.todo) for p in passes]
    assert all(sorted(o) == items for o in orders)  # a permutation: every item once per pass
    assert len({tuple(o) for o in orders}) == 4  # a different order per pass
    assert all(o != items for o in orders)  # shuffled, not FLOP order
    again = plan_passes(items, 4, seed=7, key=lambda x: x)
    assert [list(p.todo) for p in again] == orders and [p.seed for p in passes] == order_seeds(7, 4)
    assert [list(p.todo) for p in plan_passes(items, 4, seed=8, key=lambda x: x)] != orders


def test_resumed_plan_keeps_each_pass_order_and_skips_done_pairs() -> None:
    items = list(range(10))
    full = plan_passes(items, 3, seed=0, key=lambda x: x)
    done = {(0, x) for x in items} | {(1, x) for x in full[1].todo[:4]}
    resumed = plan_passes(items, 3, seed=0, key=lambda x: x, done=done)
    assert resumed[0].todo == () and resumed[1].todo == full[1].todo[4:] and resumed[2].todo == full[2].todo


def test_plan_rejects_no_passes() -> None:
    with pytest.raises(ValueError, match="repeats=0"):
        plan_passes([1], 0, 0, key=lambda x: x)


def test_shuffled_leaves_input_alone() -> None:
    items = [3, 1, 2]
    out = shuffled(items, 5)
    assert items == [3, 1, 2] and sorted(out) == [1, 2, 3]


# -- the result format --

def _with_passes(repeats: int = 2) -> dict:
    """The golden file's records measured over ``repeats`` passes (synthetic copy, for format tests only)."""
    data = golden()
    recs = []
    for p in range(repeats):
        for r in data["records"]:
            recs.append({**copy.deepcopy(r), "pass": p})
    data["records"] = recs
    data["settings"] = {**data.get("settings", {}), "repeats": repeats, "order_seeds": order_seeds(0, repeats)}
    data["run"] = {**data["run"], "id": f"passes-{repeats}"}
    return data


def test_old_file_without_passes_loads_as_one_pass() -> None:
    (sweep,) = load_sweeps([GOLDEN])
    assert all(r.pass_index is None and r.run_pass == 0 for r in sweep.records)
    assert "pass" not in json.dumps([r.to_json() for r in sweep.records])  # saved back unchanged
    assert {(r.run_pass, *r.key) for r in sweep.records} == {(0, *r.key) for r in sweep.records}


def test_pass_index_survives_save_load_and_merge(tmp_path: Path) -> None:
    (sweep,) = parse_document(_with_passes(3))
    assert sorted({r.run_pass for r in sweep.records}) == [0, 1, 2]
    slots = {(r.run_pass, *r.key) for r in sweep.records}
    assert len(slots) == len(sweep.records) == 3 * len({r.key for r in sweep.records})
    path = tmp_path / "s.json"
    save_sweep(path, sweep)
    assert validate_file(path) == []
    (back,) = load_sweeps([path])
    assert [r.run_pass for r in back.records] == [r.run_pass for r in sweep.records]
    assert back.settings["repeats"] == 3
    merged = merge_files([str(path), str(GOLDEN)])
    out = tmp_path / "m.json"
    out.write_text(json.dumps(merged.to_json()))
    assert validate_file(out) == []
    by_run = {s.run["id"]: s for s in load_sweeps([out])}
    assert [r.run_pass for r in by_run[sweep.run["id"]].records] == [r.run_pass for r in sweep.records]


@pytest.mark.parametrize("edit,fragment", [
    (lambda d: d["records"][0].update({"pass": -1}), "records/0/pass"),
    (lambda d: d["records"][0].update({"pass": "1"}), "records/0/pass"),
    (lambda d: d["settings"].update({"repeats": 0}), "settings/repeats"),
    (lambda d: d["settings"].update({"order_seeds": ["x", 1]}), "settings/order_seeds"),
])
def test_schema_rejects_bad_pass_fields(tmp_path: Path, edit, fragment: str) -> None:
    data = _with_passes(2)
    edit(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    problems = validate_file(path)
    assert problems and fragment in problems[0], problems
    with pytest.raises(ResultError, match=fragment.split("/")[-1]):
        load_sweeps([path])


@pytest.mark.parametrize("edit,fragment", [
    (lambda d: d["records"][0].update({"pass": 2}), "pass=2 is not below settings.repeats=2"),
    (lambda d: d["settings"].update({"order_seeds": [1]}), "1 seeds for settings.repeats=2"),
])
def test_loader_rejects_inconsistent_passes(edit, fragment: str) -> None:
    data = _with_passes(2)
    edit(data)
    with pytest.raises(ResultError, match=fragment):
        parse_document(data, "f.json")


def test_passes_without_declared_repeats_load() -> None:
    """Files assembled elsewhere (synthetic benchmarks, imports) may carry passes without settings.repeats."""
    data = _with_passes(3)
    for key in ("repeats", "order_seeds"):
        data["settings"].pop(key)
    (sweep,) = parse_document(data, "f.json")
    assert sorted({r.run_pass for r in sweep.records}) == [0, 1, 2]


# -- shape planning defaults --

def _decade_counts(flops: list[float]) -> list[int]:
    hi, out, a = max(flops), [], min(flops)
    while a * 10 <= hi:
        out.append(len({f for f in flops if a <= f <= 10 * a}))
        a *= 10 ** 0.01
    return out


def test_default_accelerator_plan_resolves_every_decade_to_10_tflop() -> None:
    shapes = select_shapes(on_cpu=False)
    flops = [s.flops for s, _ in shapes]
    assert len(shapes) == 29 and 1e6 <= flops[0] < 1.1e6 and 9e12 < flops[-1] <= 1e13
    assert min(_decade_counts(flops)) >= 3  # a one-decade lead anywhere meets the 2-FLOP-count run rule
    cpu = [s.flops for s, _ in select_shapes(on_cpu=True)]
    assert len(cpu) == 19 and cpu[-1] <= 2.1e10 and min(_decade_counts(cpu)) >= 3
    assert len(select_shapes(min_flop=1e6, max_flop=1e8, on_cpu=False)) == 9  # density follows the range
    assert len(select_shapes(max_flop=1e8, points=4)) == 4  # --points still wins


def test_square_family_is_capped_by_device_memory_named_shapes_are_not() -> None:
    tasks = make_tasks(select_shapes(on_cpu=False) + [(Shape(1, 20000, 20000, 20000), "custom")], ["bf16"],
                       ["eager"])
    memory = 8 * 2**30
    kept, dropped = cap_by_memory(tasks, memory)
    assert dropped and all(t.family == "square" for t in dropped)
    assert all(working_bytes(t.shape, get_dtype("bf16")) > 0.5 * memory for t in dropped)
    assert any(t.family == "custom" for t in kept) and len(kept) + len(dropped) == len(tasks)
    assert cap_by_memory(tasks, None) == (tasks, [])  # a device that does not report memory: nothing capped
    assert cap_by_memory(tasks, 141 * 2**30)[1] == []  # an H200 holds the whole default range


def test_capped_plan_says_what_it_left_out(tmp_path: Path) -> None:
    tasks = make_tasks(select_shapes(on_cpu=False), ["fp32"], ["eager"])
    plan = SweepPlan(device="cuda", tasks=tasks, output=tmp_path / "x.json")
    capped, note = _capped(plan, {"memory_bytes": 8 * 2**30})
    assert note and len(capped.tasks) + len(note["dropped"]) == len(tasks)
    assert note["max_flops_kept"] == max(t.shape.flops for t in capped.tasks) < 1e13
    assert _capped(plan, {"memory_bytes": 141 * 2**30}) == (plan, None)


def test_default_repeats_and_budget() -> None:
    assert default_repeats(True) == CPU_REPEATS and default_repeats(False) == ACCEL_REPEATS
    assert default_budget(1) == 2.0 and default_budget(3) == 1.0


# -- real CPU sweeps over passes --

FAST = ["--device", "cpu", "--budget-s", "0.05", "--max-samples", "8"]
SHAPES = ["--shape", "64x64x64", "--shape", "96x96x96", "--shape", "32x32x32"]


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def _slots(path: Path) -> list[tuple[int, int]]:
    return [(r["pass"], r["shape"]["m"]) for r in json.loads(path.read_text())["records"]]


def test_passes_in_fresh_workers_each_in_its_own_order(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = cli("sweep", *FAST, *SHAPES, "--repeats", "3", "--seed", "5", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert "9/9 ok" in res.output and "over 3 passes" in res.output
    assert "pass 1/3" in res.output and "pass 3/3" in res.output  # the progress bar names the pass
    assert validate_file(out) == []
    (sweep,) = load_sweeps([out])
    assert sweep.settings["repeats"] == 3 and sweep.settings["order_seeds"] == order_seeds(5, 3)
    assert sweep.settings["pass_worker"] == "fresh"
    sizes = [64, 96, 32]  # the order the shapes were given in
    expected = [(p, m) for p, s in enumerate(order_seeds(5, 3)) for m in shuffled(sizes, s)]
    assert _slots(out) == expected  # measured pass by pass, each pass in its seeded order
    pids = [{r.extra["worker_pid"] for r in sweep.records if r.run_pass == p} for p in range(3)]
    assert all(len(p) == 1 for p in pids) and len(set.union(*pids)) == 3  # one fresh process per pass


def test_resume_continues_missing_pass_shape_pairs_and_keeps_repeats(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert cli("sweep", *FAST, *SHAPES, "--repeats", "2", "--isolate", "none", "--quiet", "-o", str(out)).exit_code == 0
    full = _slots(out)
    data = json.loads(out.read_text())
    data["records"] = data["records"][:4]  # as if the sweep had been killed in pass 1 (test copy of a real file)
    out.write_text(json.dumps(data))
    kept = data["records"]
    for bad, fragment in ((["--repeats", "3"], "settings.repeats=2"), (["--repeats", "2", "--seed", "1"],
                                                                       "settings.seed=0")):
        res = CliRunner().invoke(main, ["sweep", *FAST, *SHAPES, *bad, "--isolate", "none", "--quiet", "-o", str(out),
                                        "--resume"])
        assert res.exit_code != 0 and fragment in res.output and "Traceback" not in res.output, res.output
    res = cli("sweep", *FAST, *SHAPES, "--repeats", "2", "--isolate", "none", "--quiet", "-o", str(out), "--resume")
    assert res.exit_code == 0, res.output
    assert _slots(out) == full  # the missing pairs, in the order their pass would have used
    assert json.loads(out.read_text())["records"][:4] == kept  # finished records are not re-measured


def test_old_one_pass_file_resumes_as_one_pass(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert cli("sweep", *FAST, "--shape", "64x64x64", "--repeats", "1", "--isolate", "none", "--quiet",
               "-o", str(out)).exit_code == 0
    data = json.loads(out.read_text())
    for key in ("repeats", "order_seeds", "pass_worker"):
        data["settings"].pop(key)
    for r in data["records"]:
        r.pop("pass")
    out.write_text(json.dumps(data))  # what a sweep written before --repeats looks like
    assert "settings.repeats=1" in CliRunner().invoke(main, ["sweep", *FAST, "--shape", "64x64x64", "--repeats",
                                                             "2", "--quiet", "-o", str(out), "--resume"]).output
    res = cli("sweep", *FAST, "--shape", "64x64x64", "--shape", "96x96x96", "--repeats", "1", "--isolate", "none",
              "--quiet", "-o", str(out), "--resume")
    assert res.exit_code == 0, res.output
    (sweep,) = load_sweeps([out])
    assert [(r.pass_index, r.shape.m) for r in sweep.records] == [(None, 64), (0, 96)]


def test_default_repeats_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    res = cli("sweep", "--device", "cpu", "--max-samples", "5", "--shape", "32x32x32", "--isolate", "none",
              "--quiet", "-o", str(out))
    assert res.exit_code == 0, res.output
    (sweep,) = load_sweeps([out])
    assert sweep.settings["repeats"] == CPU_REPEATS and len(sweep.records) == CPU_REPEATS
    assert sweep.settings["timing"]["budget_s"] == BUDGET_PER_PASS_S


@pytest.mark.parametrize("args,fragment", [(["--repeats", "0"], "--repeats"), (["--repeats", "x"], "--repeats")])
def test_bad_repeats(args: list[str], fragment: str) -> None:
    res = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--quiet", "--shape", "32x32x32", *args])
    assert res.exit_code != 0 and fragment in res.output and "Traceback" not in res.output
