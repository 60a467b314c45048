"""Merging SYNTHETIC sweep files (tests/synthetic.py): round trip, order, duplicates, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from synthetic import make_sweep_doc, write_sweep

from mfu_sweep.analysis.sources.merge import Relabel, merge_files
from mfu_sweep.cli import main
from mfu_sweep.records.results import ResultError, load_sweeps, write_json_atomic

FLOPS = [1e8, 1e9, 1e10, 1e11]


def _doc(label: str, **kw) -> dict:
    params = {"P_tflops": 500.0, "W_tbs": 2.0, "t0_s": 5e-6, "flops": FLOPS, "n_samples": 5, **kw}
    return make_sweep_doc(label, **params)


@pytest.fixture()
def two(tmp_path: Path) -> tuple[Path, Path]:
    return write_sweep(tmp_path, _doc("a", seed=1)), write_sweep(tmp_path, _doc("b", seed=2))


def test_merge_round_trips_and_keeps_provenance(tmp_path: Path, two: tuple[Path, Path]) -> None:
    result = merge_files(list(two))
    out = tmp_path / "merged.json"
    write_json_atomic(out, result.to_json())
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == 1 and doc["kind"] == "merged" and len(doc["sweeps"]) == 2
    originals = [json.loads(p.read_text()) for p in two]
    assert doc["sweeps"] == originals  # provenance (tool, run, environment, device, peak, settings) intact
    again = merge_files([out])
    assert again.to_json() == doc
    assert [s.to_json() for s in load_sweeps([out])] == [s.to_json() for s in load_sweeps(list(two))]


def test_merge_is_order_independent_and_mixes_kinds(tmp_path: Path, two: tuple[Path, Path]) -> None:
    a, b = two
    c = write_sweep(tmp_path, _doc("c", seed=3))
    ab = tmp_path / "ab.json"
    write_json_atomic(ab, merge_files([b, a]).to_json())
    forward = merge_files([a, b, c]).to_json()
    assert merge_files([c, b, a]).to_json() == forward
    assert merge_files([c, ab]).to_json() == forward
    assert [s["device"]["label"] for s in forward["sweeps"]] == ["a", "b", "c"]


def test_exact_duplicate_runs_are_kept_once_with_a_note(tmp_path: Path, two: tuple[Path, Path]) -> None:
    a, b = two
    ab = tmp_path / "ab.json"
    write_json_atomic(ab, merge_files([a, b]).to_json())
    result = merge_files([a, ab])
    assert len(result.sweeps) == 2
    assert any("appears twice" in n for n in result.notes)


def test_same_run_id_with_different_contents_is_an_error(tmp_path: Path) -> None:
    a = write_sweep(tmp_path, _doc("a", seed=1, run_id="run-1"), "a1.json")
    b = write_sweep(tmp_path, _doc("a", seed=2, run_id="run-1"), "a2.json")
    with pytest.raises(ResultError, match="run.id 'run-1'.*different contents"):
        merge_files([a, b])


def test_label_clash_is_an_error_until_relabelled(tmp_path: Path) -> None:
    a = write_sweep(tmp_path, _doc("gpu", host="node-1", seed=1), "n1.json")
    b = write_sweep(tmp_path, _doc("gpu", host="node-2", seed=2), "n2.json")
    with pytest.raises(ResultError, match="device.label 'gpu' names two devices.*--relabel"):
        merge_files([a, b])
    result = merge_files([a, b], [Relabel.parse(f"{b}:gpu=gpu-node2")])
    assert result.labels == ["gpu", "gpu-node2"]
    renamed = next(s for s in result.sweeps if s.label == "gpu-node2")
    assert renamed.device["relabeled_from"] == "gpu" and renamed.run["host"] == "node-2"


def _piece(label: str, host: str, shard: str | None, **kw) -> dict:
    """SYNTHETIC sweep tagged like a ``--shard I/N`` piece run on ``host`` (no shard tag when ``shard`` is None)."""
    doc = _doc(label, host=host, **kw)
    if shard:
        doc["settings"]["shard"] = shard
    return doc


def test_shard_pieces_from_two_hosts_are_one_device_in_any_order(tmp_path: Path) -> None:
    a = write_sweep(tmp_path, _piece("gpu", "node-1", "0/2", seed=1), "p0.json")
    b = write_sweep(tmp_path, _piece("gpu", "node-2", "1/2", seed=1, flops=[1e12, 1e13]), "p1.json")
    again = write_sweep(tmp_path, _piece("gpu", "node-1", None, seed=3, flops=[1e7]), "rerun.json")
    result = merge_files([a, b, again])
    assert result.labels == ["gpu"] and result.hosts == {"gpu": ("node-1", "node-2")}
    assert any("2 hosts (node-1, node-2)" in n for n in result.notes)
    assert merge_files([again, b, a]).to_json() == result.to_json()


@pytest.mark.parametrize("shards", [("0/2", None), (None, None), ("0/2", "1/3")],
                         ids=["no-shard-metadata-on-node-2", "no-shard-metadata-at-all", "different-shard-counts"])
def test_hosts_not_linked_by_one_shard_plan_are_two_devices(tmp_path: Path, shards: tuple) -> None:
    a = write_sweep(tmp_path, _piece("gpu", "node-1", shards[0], seed=1), "n1.json")
    b = write_sweep(tmp_path, _piece("gpu", "node-2", shards[1], seed=1, flops=[1e12]), "n2.json")
    two_hosts = r"device.label 'gpu' names two devices: .*node-[12].* and .*node-[12].*--relabel"
    with pytest.raises(ResultError, match=two_hosts):
        merge_files([a, b])


def test_shard_pieces_do_not_make_an_outside_host_the_same_device(tmp_path: Path) -> None:
    pieces = [write_sweep(tmp_path, _piece("gpu", f"node-{i + 1}", f"{i}/2", seed=1, flops=[10.0 ** (8 + i)]),
                          f"p{i}.json") for i in range(2)]
    assert merge_files(pieces).hosts == {"gpu": ("node-1", "node-2")}
    outsider = write_sweep(tmp_path, _piece("gpu", "node-3", None, seed=1), "n3.json")
    with pytest.raises(ResultError, match=r"names two devices: .*, shard [01]/2\) in .* and .*host node-3\)"):
        merge_files([*pieces, outsider])
    other_plan = write_sweep(tmp_path, _piece("gpu", "node-2", "1/2", seed=2, flops=[1e9]), "other-plan.json")
    two_plans = r"names two devices: .*node-[12], shard [01]/2.* and .*node-[12], shard [01]/2"
    with pytest.raises(ResultError, match=two_plans):
        merge_files([pieces[0], other_plan])  # settings.synthetic (the pieces' settings) differ: another sweep


def test_same_device_twice_is_one_series_not_a_clash(tmp_path: Path) -> None:
    a = write_sweep(tmp_path, _doc("gpu", seed=1), "r1.json")
    b = write_sweep(tmp_path, _doc("gpu", seed=2, flops=[1e12, 1e13]), "r2.json")
    assert len(merge_files([a, b]).sweeps) == 2


def test_relabel_parsing_and_unmatched_rules(two: tuple[Path, Path]) -> None:
    assert Relabel.parse("old=new") == Relabel("old", "new", None)
    assert Relabel.parse("dir/x.json:old=new") == Relabel("old", "new", "dir/x.json")
    with pytest.raises(ResultError, match="must be OLD=NEW"):
        Relabel.parse("nothing")
    with pytest.raises(ResultError, match="matched no sweep"):
        merge_files(list(two), [Relabel.parse("zzz=y")])


@pytest.mark.parametrize(("content", "message"), [
    ("", "file is empty"),
    ("{not json", "not valid JSON"),
    ('{"schema_version": 2, "kind": "merged", "sweeps": []}', "schema_version=2 is not supported"),
    ('{"kind": "sweep"}', "no schema_version"),
])
def test_bad_files_are_rejected_naming_the_problem(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(ResultError, match=message):
        merge_files([bad])


def test_mixed_schema_versions_are_refused(tmp_path: Path, two: tuple[Path, Path]) -> None:
    future = tmp_path / "future.json"
    future.write_text(json.dumps({**_doc("z"), "schema_version": 2}))
    with pytest.raises(ResultError, match="different schema versions.*schema_version=2"):
        merge_files([two[0], future])


def test_ok_record_without_samples_is_rejected_naming_the_field(tmp_path: Path) -> None:
    doc = _doc("a")
    doc["records"][1]["samples_s"] = []
    bad = write_sweep(tmp_path, doc)
    with pytest.raises(ResultError, match=r"records/1/samples_s"):
        merge_files([bad])


def test_cli_merge_writes_and_refuses_to_overwrite(tmp_path: Path, two: tuple[Path, Path]) -> None:
    out = tmp_path / "m.json"
    runner = CliRunner()
    ok = runner.invoke(main, ["merge", *map(str, two), "-o", str(out)])
    assert ok.exit_code == 0, ok.output
    assert "merged 2 sweeps from 2 files (labels: a, b)" in ok.output
    again = runner.invoke(main, ["merge", *map(str, two), "-o", str(out)])
    assert again.exit_code == 1 and "exists; use --force" in again.output
    assert runner.invoke(main, ["merge", *map(str, two), "-o", str(out), "--force"]).exit_code == 0


def test_cli_merge_label_clash_is_one_line(tmp_path: Path) -> None:
    a = write_sweep(tmp_path, _doc("gpu", host="node-1", seed=1), "n1.json")
    b = write_sweep(tmp_path, _doc("gpu", host="node-2", seed=2), "n2.json")
    res = CliRunner().invoke(main, ["merge", str(a), str(b), "-o", str(tmp_path / "m.json")])
    assert res.exit_code == 1
    assert "Traceback" not in res.output and res.output.count("\n") == 1
    assert "device.label 'gpu'" in res.output
    fixed = CliRunner().invoke(main, ["merge", str(a), str(b), "-o", str(tmp_path / "m.json"),
                                      "--relabel", f"{b}:gpu=gpu-2"])
    assert fixed.exit_code == 0, fixed.output


@pytest.mark.parametrize(("basis", "peaks", "ok", "noted"), [
    ("measured clock", (600.0, 606.0), True, False),  # two runs' clock probes of one machine, 1% apart
    ("measured clock", (600.0, 660.0), True, True),   # 10% apart (a probe on a busy machine): first kept, said
    ("", (600.0, 606.0), False, False),               # table or vendor peaks never differ within one series
])
def test_one_series_takes_two_measured_peaks_and_says_when_they_disagree(tmp_path: Path, basis: str, peaks,
                                                                         ok: bool, noted: bool) -> None:
    """SYNTHETIC peaks: two measured-clock peaks of one machine are one series against the first peak, with a
    note naming both when they differ beyond MEASURED_PEAK_RTOL; peaks that are not measured must agree."""
    from mfu_sweep.analysis.ground.series import SeriesError, group_series, with_peak

    docs = [_doc("gpu", seed=i, peak_tflops=p) for i, p in enumerate(peaks)]
    for d in docs:
        d["peak"]["basis"] = basis
    files = [write_sweep(tmp_path, d, f"r{i}.json") for i, d in enumerate(docs)]
    sweeps = load_sweeps(files)
    if ok:
        (series,) = group_series(sweeps).values()
        assert len(series.records) == 2 * len(FLOPS)
        assert series.peak_tflops == peaks[0]
        assert bool(series.notes) == noted, series.notes
        assert with_peak({series.key: series}, "mfu")[1] == list(series.notes)
        if noted:
            assert "600" in series.notes[0] and "660" in series.notes[0] and "MFU uses 600" in series.notes[0]
    else:
        with pytest.raises(SeriesError, match="disagree on peak"):
            group_series(sweeps)


def test_a_labels_files_of_other_dtypes_are_separate_series_and_get_no_pooling_hint(tmp_path: Path) -> None:
    """SYNTHETIC: one label in three files of three runs: bf16, fp8, and bf16 again. Only the two bf16 files
    feed one series; the hint names that series once (a report of a 1,024-device fleet, 4 files of other
    dtypes and modes per device, printed 1,024 hints that the files were pooled as one series)."""
    from mfu_sweep.analysis.sources.runs import label_collisions

    truth = {"P_tflops": 600, "W_tbs": 2.0, "t0_s": 8e-6}
    runs = [("bf16", "bf16"), ("fp8", "fp8"), ("bf16", "bf16-again")]
    paths = [write_sweep(tmp_path, make_sweep_doc("gpu", dtype=dtype, run_id=f"run-{i}", seed=i, **truth),
                         f"{name}.json") for i, (dtype, name) in enumerate(runs)]
    assert label_collisions(load_sweeps(paths[:2])) == []
    (hint,) = label_collisions(load_sweeps(paths))
    assert hint.startswith("series gpu bf16 eager is in 2 files (") and "fp8" not in hint, hint
    assert "to compare the runs: --a " in hint
