"""`export --format nvbench`: the records as nvbench JSON, read back by the project's own nvbench importer.

The round trips use the committed reference sweeps (real CPU measurements); the small sweeps built here
with tests/synthetic.py are SYNTHETIC. nvbench's own nvbench_compare.py is run on two exports in
docs/analysis.md (it is not part of this repository).
"""

from __future__ import annotations

import json
import statistics
from array import array
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from synthetic import example_pair, make_sweep_doc, write_sweep

from mfu_sweep.analysis.ground.series import shape_seconds
from mfu_sweep.cli import main
from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.importers import import_sources
from mfu_sweep.present.export.nvbench import nvbench_document, write_nvbench
from mfu_sweep.records.results import load_sweeps, parse_document

REPO = Path(__file__).resolve().parents[1]
ONE_PASS = REPO / "sweeps" / "amd-epyc-cpu.json"  # fp32 and bf16, one pass
FIVE_PASSES = REPO / "sweeps" / "amd-epyc-zen5-cpu.json"  # five shuffled passes per shape


def _f32(values) -> list[float]:
    return [float(v) for v in np.asarray(values, dtype=np.float32)]


def _records_by_shape(sweep) -> dict:
    out: dict = {}
    for r in sweep.records:
        out.setdefault((r.shape, r.dtype), []).append(r)
    return out


def _summary(state: dict, tag: str, name: str = "value"):
    (s,) = [s for s in state["summaries"] if s["tag"] == tag]
    (d,) = [d for d in s["data"] if d["name"] == name]
    return d["value"]


def test_round_trip_through_the_nvbench_importer_matches_the_sweep(tmp_path: Path) -> None:
    (sweep,) = load_sweeps([ONE_PASS])
    out = tmp_path / "epyc.json"
    write_nvbench([sweep], out)
    (back,) = import_sources("nvbench", [out]).sweeps.values()
    assert back.extra["import"]["tool"] == "nvbench ? (json output, JSON 1.0.0)"
    mine = _records_by_shape(sweep)
    assert len(back.records) == len(sweep.records) and {r.dtype for r in back.records} == {"fp32", "bf16"}
    for r in back.records:
        (orig,) = mine[(r.shape, r.dtype)]
        assert r.ok and list(r.samples_s) == _f32(orig.samples_s)  # every sample, as float32 (nvbench's sidecar)
        assert r.median_s == pytest.approx(orig.median_s, rel=1e-6)
        assert r.tflops == pytest.approx(orig.tflops, rel=1e-6)


def test_modes_and_layouts_come_back_from_an_nvbench_round_trip(tmp_path: Path) -> None:
    """A model family's sweep in both modes with nn, nt and tn shapes: each (shape and layout, mode) is its own
    state, and the importer gives every one back in its mode with its layout (none taken as a repeat)."""
    (sweep,) = load_sweeps([REPO / "sweeps" / "amd-epyc-zen4-cpu-steps-warm.json"])
    out = tmp_path / "steps.json"
    write_nvbench([sweep], out)
    (back,) = import_sources("nvbench", [out]).sweeps.values()
    want = {(r.shape, r.mode) for r in sweep.records}
    assert {s.layout for s, _ in want} == {"nn", "nt", "tn"} and {m for _, m in want} == {"eager", "compile"}
    assert sorted((r.shape, r.mode) for r in back.records) == sorted(want)
    assert not back.extra["import"]["notes"]
    pooled = {}
    for r in sweep.records:
        pooled.setdefault((r.shape, r.mode), []).extend(r.samples_s)
    for r in back.records:
        assert list(r.samples_s) == _f32(pooled[(r.shape, r.mode)])


def test_passes_are_pooled_and_the_shape_time_is_kept(tmp_path: Path) -> None:
    (sweep,) = load_sweeps([FIVE_PASSES])
    out = tmp_path / "zen5.json"
    write_nvbench([sweep], out)
    doc = json.loads(out.read_text())
    mine = _records_by_shape(sweep)
    states = [st for b in doc["benchmarks"] for st in b["states"]]
    assert len(states) == len(mine)
    for st in states:
        ax = {a["name"]: a["value"] for a in st["axis_values"]}
        recs = [r for r in mine[(Shape(*(int(ax[k]) for k in "BMNK")), ax["T"])] if r.ok]
        pooled = [t for r in recs for t in r.samples_s]
        assert len(recs) == 5 and int(_summary(st, "nv/cold/sample_size")) == len(pooled)
        assert float(_summary(st, "nv/cold/time/gpu/median")) == pytest.approx(statistics.median(pooled), rel=1e-12)
        assert float(_summary(st, "nv/cold/time/gpu/mean")) == pytest.approx(statistics.fmean(pooled), rel=1e-12)
        assert float(_summary(st, "nv/cold/time/gpu/stdev/relative")) == pytest.approx(
            statistics.stdev(pooled) / statistics.fmean(pooled), rel=1e-9)
        assert float(_summary(st, "mfu-sweep/time")) == pytest.approx(shape_seconds(recs), rel=1e-12)
        assert _summary(st, "mfu-sweep/timing", "passes") == "5"
        side = array("f")
        side.frombytes((tmp_path / _summary(st, "nv/json/bin:nv/cold/sample_times", "filename")).read_bytes())
        assert list(side) == _f32(pooled)
    (back,) = import_sources("nvbench", [out]).sweeps.values()
    for r in back.records:  # the importer takes every sample of every pass
        assert list(r.samples_s) == _f32([t for p in mine[(r.shape, r.dtype)] for t in p.samples_s])


def test_what_nvbench_compare_reads_is_there_for_every_state() -> None:
    """nvbench_compare.py matches benchmarks by name and states by name, formats each axis value through
    the benchmark's axis of that name, and reads the cold mean and relative noise as float64."""
    sweeps = [s for d in example_pair() for s in parse_document(d)]  # two devices: two nvbench devices
    doc = nvbench_document(sweeps, "x.json-bin").document
    assert [d["id"] for d in doc["devices"]] == [0, 1] and doc["meta"]["version"]["json"]["string"] == "1.0.0"
    for bench in doc["benchmarks"]:
        axes = {a["name"]: a["type"] for a in bench["axes"]}
        assert axes == {"B": "int64", "M": "int64", "N": "int64", "K": "int64", "T": "type", "mode": "string",
                        "layout": "string"}
        names = [st["name"] for st in bench["states"]]
        assert len(set(names)) == len(names) and set(bench["devices"]) == {0, 1}
        for st in bench["states"]:
            assert {a["name"] for a in st["axis_values"]} == set(axes)
            assert st["name"].startswith(f"Device={st['device']} B=1 M=")
            if st["is_skipped"]:
                assert st["summaries"] == [] and st["skip_reason"]
                continue
            tags = {s["tag"]: s for s in st["summaries"]}
            for tag in ("nv/cold/time/gpu/mean", "nv/cold/time/gpu/stdev/relative"):
                (value,) = [d for d in tags[tag]["data"] if d["name"] == "value"]
                assert value["type"] == "float64"
            float(_summary(st, "nv/cold/time/gpu/mean"))


def test_failed_shapes_are_skipped_states_and_few_samples_have_no_noise(tmp_path: Path) -> None:
    doc = make_sweep_doc("tiny", P_tflops=100, W_tbs=1, t0_s=5e-6, flops=[1e8, 1e9, 1e10], n_samples=3,
                         statuses=["ok", "oom", "ok"])
    path = write_sweep(tmp_path, doc)
    out = tmp_path / "tiny.nvbench.json"
    write_nvbench(load_sweeps([path]), out)
    states = json.loads(out.read_text())["benchmarks"][0]["states"]
    assert [st["is_skipped"] for st in states] == [False, True, False]
    assert states[1]["skip_reason"] == "oom: SYNTHETIC oom"
    assert _summary(states[0], "nv/cold/time/gpu/stdev/relative") is None  # 3 samples: nvbench's "unknown"
    assert not any(s["tag"] == "nv/cold/time/gpu/iqr/relative" for s in states[0]["summaries"])
    (back,) = import_sources("nvbench", [out]).sweeps.values()
    assert [r.status for r in back.records] == ["ok", "error", "ok"]
    assert "skipped by nvbench: oom: SYNTHETIC oom" in back.records[1].error


def _one_line(res, *fragments: str) -> str:
    lines = res.output.strip().splitlines()
    assert res.exit_code == 1 and len(lines) == 1 and lines[0].startswith("Error: "), res.output
    assert all(f in lines[0] for f in fragments), lines[0]
    return lines[0]


def test_cli_writes_the_pair_and_refuses_what_it_cannot_write(tmp_path: Path) -> None:
    path = str(write_sweep(tmp_path, make_sweep_doc("tiny", P_tflops=100, W_tbs=1, t0_s=5e-6,
                                                    flops=[1e8, 1e9], n_samples=6)))
    out = tmp_path / "n.json"
    res = CliRunner().invoke(main, ["export", path, "--format", "nvbench", "-o", str(out)])
    assert res.exit_code == 0 and "1 benchmarks, 2 states" in res.output and "n.json-bin/" in res.output, res.output
    assert sorted(p.name for p in (tmp_path / "n.json-bin").iterdir()) == ["0.bin", "1.bin"]
    again = ["export", path, "--format", "nvbench", "-o", str(out)]
    _one_line(CliRunner().invoke(main, again), "exists; use --force")
    out.unlink()
    _one_line(CliRunner().invoke(main, again), "n.json-bin", "earlier export", "--force")
    (tmp_path / "n.json-bin" / "7.bin").write_bytes(b"old")
    assert CliRunner().invoke(main, [*again, "--force"]).exit_code == 0
    assert sorted(p.name for p in (tmp_path / "n.json-bin").iterdir()) == ["0.bin", "1.bin"]  # the old pair gone
    (tmp_path / "n.json-bin" / "notes.txt").write_text("mine")
    _one_line(CliRunner().invoke(main, [*again, "--force"]), "holds 'notes.txt'", "not written by an export")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary folder left
    _one_line(CliRunner().invoke(main, ["export", path, "--format", "nvbench"]), "give -o FILE.json")
    _one_line(CliRunner().invoke(main, ["export", path, "--format", "nvbench", "--what", "fits", "-o",
                                        str(tmp_path / "f.json")]), "--what fits has no nvbench form")
    _one_line(CliRunner().invoke(main, ["export", path, "--format", "nvbench", "-o", str(tmp_path / "n.csv")]),
              "ends in .csv", "n.json")


def test_an_interrupted_export_leaves_the_previous_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import mfu_sweep.present.export.nvbench as nvb

    sweeps = load_sweeps([write_sweep(tmp_path, make_sweep_doc("tiny", P_tflops=100, W_tbs=1, t0_s=5e-6,
                                                               flops=[1e8, 1e9], n_samples=6))])
    out = tmp_path / "out" / "n.json"
    write_nvbench(sweeps, out)
    before = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()}

    def disk_full(path, data):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(nvb, "write_json_atomic", disk_full)
    other = load_sweeps([write_sweep(tmp_path, make_sweep_doc("tiny", P_tflops=90, W_tbs=1, t0_s=5e-6, seed=1,
                                                              flops=[1e8, 1e9], n_samples=6), "other.json")])
    with pytest.raises(OSError, match="No space left"):
        write_nvbench(other, out, force=True)
    after = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()}
    assert after == before and sorted(p.name for p in (tmp_path / "out").iterdir()) == ["n.json", "n.json-bin"]


def test_grouped_gemms_come_back_grouped_from_an_nvbench_round_trip(tmp_path: Path) -> None:
    """SYNTHETIC: two splits of one M over three experts and the dense GEMM of the same M, N, K are three states
    (a ``groups`` axis, in the state name too), and each comes back as it went, none as a dense GEMM or a
    repeat of another."""
    shapes = [Shape(1, 1024, 512, 256, groups=(512, 256, 256)), Shape(1, 1024, 512, 256, groups=(256, 256, 512)),
              Shape(1, 1024, 512, 256), Shape(1, 512, 512, 700, groups=(400, 300), group_dim="k")]
    doc = make_sweep_doc("moe", shapes=shapes, P_tflops=100, W_tbs=1, t0_s=5e-6, n_samples=6)
    (sweep,) = parse_document(doc)
    out = tmp_path / "moe.json"
    document = write_nvbench([sweep], out).document
    (bench,) = document["benchmarks"]
    names = [s["name"] for s in bench["states"]]
    assert len(set(names)) == 4 and sum("groups=none" in n for n in names) == 1, names
    assert [a["name"] for a in bench["axes"]][-1] == "groups"
    (back,) = import_sources("nvbench", [out]).sweeps.values()
    assert sorted(map(str, (r.shape for r in back.records))) == sorted(map(str, shapes))
    assert {r.shape: r.flops for r in back.records} == {s: s.flops for s in shapes}
    assert not back.extra["import"]["notes"]


def test_a_dense_export_has_no_groups_axis_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    doc = make_sweep_doc("dense", flops=[1e9, 1e10], P_tflops=100, W_tbs=1, t0_s=5e-6, n_samples=6)
    out = tmp_path / "dense.json"
    (bench,) = write_nvbench(parse_document(doc), out).document["benchmarks"]
    assert "groups" not in [a["name"] for a in bench["axes"]] and "groups=" not in bench["states"][0]["name"]
    data = json.loads(out.read_text())
    for value, expect in (("m=7*3", "group"), ("q=5", "m=SIZES or k=SIZES")):
        data["benchmarks"][0]["states"][0]["axis_values"].append({"name": "groups", "type": "string",
                                                                  "value": value})
        out.write_text(json.dumps(data))
        res = CliRunner().invoke(main, ["import", "nvbench", str(out), "-o", str(tmp_path / "back")])
        assert res.exit_code == 1 and expect in res.output and "Traceback" not in res.output, res.output
        assert len(res.output.strip().splitlines()) == 1, res.output
        data["benchmarks"][0]["states"][0]["axis_values"].pop()
