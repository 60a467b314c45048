"""``sweep --repeats``: pass planning, the pass index in the result format, real CPU sweeps over passes."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from mfu_sweep.merge import merge_files
from mfu_sweep.measure.passes import order_seed, order_seeds, plan_passes, shuffled
from mfu_sweep.results import ResultError, load_sweeps, parse_document, save_sweep, validate_file

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
    assert {r.slot for r in sweep.records} == {(0, *r.key) for r in sweep.records}


def test_pass_index_survives_save_load_and_merge(tmp_path: Path) -> None:
    (sweep,) = parse_document(_with_passes(3))
    assert sorted({r.run_pass for r in sweep.records}) == [0, 1, 2]
    assert len({r.slot for r in sweep.records}) == len(sweep.records) == 3 * len({r.key for r in sweep.records})
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
    (lambda d: d["settings"].pop("repeats"), "not below settings.repeats=1"),
])
def test_loader_rejects_inconsistent_passes(edit, fragment: str) -> None:
    data = _with_passes(2)
    edit(data)
    if "order_seeds" in data["settings"] and "repeats" not in data["settings"]:
        data["settings"].pop("order_seeds")
    with pytest.raises(ResultError, match=fragment):
        parse_document(data, "f.json")
