"""Scale-out: --shard pieces and real torchrun runs on the CPU with gloo."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from mfu_sweep.analysis.ground.series import group_series, with_peak
from mfu_sweep.analysis.sources.merge import merge_files, merge_sweeps
from mfu_sweep.cli import main
from mfu_sweep.measure.distributed import placement
from mfu_sweep.records.results import ResultError, load_sweeps, parse_document
from mfu_sweep.records.shards import parse_shard, shard_plan

SHAPES = ["--shape", "64x64x64", "--shape", "96x96x96", "--shape", "128x128x128"]
FAST = ["--device", "cpu", "--budget-s", "0.05", "--max-samples", "8", "--quiet", "--isolate", "none",
        "--repeats", "1"]


def test_parse_shard() -> None:
    assert parse_shard("1/4") == (1, 4)
    for bad in ("4/4", "1", "a/b", "-1/2", "1/0"):
        with pytest.raises(ValueError, match="--shard"):
            parse_shard(bad)


def test_placement_from_environment() -> None:
    env = {"WORLD_SIZE": "4", "RANK": "2", "LOCAL_RANK": "1"}
    rep = placement(None, None, env)
    assert rep.launcher and rep.distribute == "replicate" and rep.label_suffix == ".r2"
    assert rep.select(list(range(6))) == list(range(6))
    assert rep.device("cuda") == "cuda:1" and rep.device("cuda:3") == "cuda:3" and rep.device("cpu") == "cpu"
    sh = placement("shard", None, env)
    assert sh.select(list(range(10))) == [2, 6] and sh.label_suffix == ""
    with pytest.raises(ValueError, match="torchrun"):
        placement("shard", None, {})
    with pytest.raises(ValueError, match="--shard"):
        placement(None, "0/2", env)


def test_shard_pieces_record_their_job_so_two_jobs_never_link(tmp_path: Path) -> None:
    slurm = placement(None, "1/4", {"SLURM_ARRAY_JOB_ID": "777", "SLURM_JOB_ID": "781"})
    assert slurm.settings() == {"shard": "1/4", "job_id": "SLURM_ARRAY_JOB_ID=777"}
    torchrun = placement("shard", None, {"WORLD_SIZE": "2", "RANK": "1", "TORCHELASTIC_RUN_ID": "abc"})
    assert torchrun.settings()["job_id"] == "TORCHELASTIC_RUN_ID=abc"
    assert "job_id" not in placement(None, None, {"SLURM_ARRAY_JOB_ID": "777"}).settings()  # not sharded
    a, b = (s for p in _shard_pieces(tmp_path, count=2) for s in load_sweeps([p]))
    job = {"job_id": "SLURM_ARRAY_JOB_ID=777"}
    same = replace(a, settings={**a.settings, **job}), replace(b, settings={**b.settings, **job})
    assert shard_plan(same[0]) == shard_plan(same[1])
    other = replace(b, settings={**b.settings, "job_id": "SLURM_ARRAY_JOB_ID=778"})
    assert shard_plan(same[0]) != shard_plan(other)


def _shard_pieces(tmp_path: Path, count: int = 3) -> list[Path]:
    """Run ``sweep --shard I/count`` for every I on this host, like a Slurm array; return the pieces."""
    out = tmp_path / "s.json"
    for i in range(count):
        res = CliRunner().invoke(main, ["sweep", *FAST, *SHAPES, "--shard", f"{i}/{count}", "-o", str(out)])
        assert res.exit_code == 0, res.output
    pieces = sorted(tmp_path.glob(f"s.shard*-of-{count}.json"))
    assert len(pieces) == count
    return pieces


def _edit(path: Path, edit: Callable[[dict], None]) -> Path:
    """Change a piece in place (SYNTHETIC: the result no longer is what this host measured)."""
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    return path


def _move_to(host: str) -> Callable[[dict], None]:
    """SYNTHETIC: pretend another host ran the piece (``run.host``, as sweep writes it)."""
    return lambda doc: doc["run"].update(host=host)


def test_shards_merge_back_to_the_full_set(tmp_path: Path) -> None:
    pieces = _shard_pieces(tmp_path)
    merged = merge_files(pieces)
    shapes = sorted(r.shape.m for sw in merged.sweeps for r in sw.records)
    assert shapes == [64, 96, 128]
    with pytest.raises(ResultError, match="missing"):
        merge_files(pieces[:2])
    dup = tmp_path / "dup.json"
    doc = json.loads(pieces[0].read_text())
    doc["run"]["id"] = "another-run"
    dup.write_text(json.dumps(doc))
    with pytest.raises(ResultError, match="twice"):
        merge_files([*pieces, dup])


@pytest.mark.parametrize("mode", ["replicate", "shard"])
def test_torchrun_two_ranks_gloo(tmp_path: Path, mode: str) -> None:
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    assert torchrun, "torchrun ships with torch"
    out = tmp_path / "t.json"
    proc = subprocess.run([torchrun, "--nproc-per-node", "2", "--master-port", str(29500 + (mode == "shard")),
                           "-m", "mfu_sweep", "sweep", *FAST, *SHAPES, "--distribute", mode, "-o", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["kind"] == "merged" and len(doc["sweeps"]) == 2
    records = [r for sw in doc["sweeps"] for r in sw["records"]]
    assert {r["rank"] for r in records} == {0, 1}
    assert all("host" in r and "device_index" in r for r in records)
    got = sorted(r["shape"]["m"] for r in records)
    if mode == "replicate":
        assert got == [64, 64, 96, 96, 128, 128]
        assert sorted(sw["device"]["label"][-3:] for sw in doc["sweeps"]) == [".r0", ".r1"]
        res = CliRunner().invoke(main, ["compare", str(out), "--metric", "tflops", "--no-fit"])
        assert res.exit_code == 0, res.output
        assert "spread: " in res.output and "over 2 devices" in res.output
    else:
        assert got == [64, 96, 128]
        # SYNTHETIC: rank 1's checkpoint as if a second node ran it (torchrun --nnodes 2); rank 0's merge takes it
        ranks = [s for p in sorted(tmp_path.glob("t.rank*.json")) for s in load_sweeps([p])]
        ranks[1] = replace(ranks[1], run={**ranks[1].run, "host": "node-2"})
        two_nodes = merge_sweeps(ranks)
        assert two_nodes.hosts == {ranks[0].label: tuple(sorted({ranks[0].run["host"], "node-2"}))}
        assert sorted(r.shape.m for sw in two_nodes.sweeps for r in sw.records) == [64, 96, 128]
    assert CliRunner().invoke(main, ["validate", str(out)]).exit_code == 0


def test_replicate_spread_names_the_slow_device(tmp_path: Path) -> None:
    """SYNTHETIC: rank 1 is 10% slower everywhere; the spread says so."""
    from synthetic import make_sweep_doc

    from mfu_sweep.analysis.fleet.spread import replicate_spreads

    flops = [1e8, 1e9, 1e10, 1e11]
    fast = make_sweep_doc("gpu.r0", P_tflops=100, W_tbs=2, t0_s=1e-5, flops=flops, noise=0.0, run_id="a")
    slow = make_sweep_doc("gpu.r1", P_tflops=100, W_tbs=2, t0_s=1e-5, flops=flops, noise=0.0, run_id="b",
                          time_fn=lambda f, b: 1.1 * (1e-5 + max(f / 1e14, b / 2e12)))
    other = make_sweep_doc("cpu", P_tflops=1, W_tbs=0.1, t0_s=1e-5, flops=flops, run_id="c")
    sweeps = [s for d in (fast, slow, other) for s in parse_document(d)]
    (spread,) = replicate_spreads(sweeps)
    assert spread.label == "gpu" and spread.devices == ("gpu.r0", "gpu.r1")
    assert len(spread.shapes) == 4 and all(s.slowest == "gpu.r1" for s in spread.shapes)
    assert abs(spread.median_ratio - 1.1) < 1e-6
    assert "over 2 devices" in spread.sentence()


def test_shard_pieces_from_several_hosts_merge_as_one_device(tmp_path: Path) -> None:
    """Real --shard pieces; SYNTHETIC: pieces 1 and 2 are relabelled as run on node-2 and node-3."""
    pieces = _shard_pieces(tmp_path)
    here = json.loads(pieces[0].read_text())["run"]["host"]
    _edit(pieces[1], _move_to("node-2"))
    _edit(pieces[2], _move_to("node-3"))
    merged = merge_files(pieces)
    (label,) = merged.labels
    assert merged.hosts == {label: tuple(sorted([here, "node-2", "node-3"]))}
    assert any("3 hosts" in n and "node-2" in n for n in merged.notes)
    assert sorted(r.shape.m for sw in merged.sweeps for r in sw.records) == [64, 96, 128]
    (series,) = group_series(load_sweeps(pieces)).values()
    assert series.hosts == merged.hosts[label] and series.n_shapes == 3
    out = tmp_path / "merged.json"
    res = CliRunner().invoke(main, ["merge", *map(str, pieces), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "merged 3 sweeps" in res.output and "node-3" in res.output
    assert sorted(sw["run"]["host"] for sw in json.loads(out.read_text())["sweeps"]) == list(merged.hosts[label])
    assert merge_files([out]).to_json() == merged.to_json()  # merging the output again gives the same file


def test_shard_pieces_with_measured_peaks_apart_merge_with_a_note(tmp_path: Path) -> None:
    """Real --shard pieces; SYNTHETIC peaks: each piece's clock probe re-estimated the fp32 peak, piece 1's 8%
    above the others' (the probe reads low on a busy machine: two real pieces once differed by 5.8%). The
    pieces are still one device: MFU uses the first piece's peak and a note names both values. Peaks that are
    not measured (no ``peak.basis``), or measured for another chip, must agree: those are refused."""
    pieces = _shard_pieces(tmp_path, count=2)

    def measured(tflops: float, chip: str = "cpu") -> Callable[[dict], None]:
        def edit(doc: dict) -> None:
            doc["peak"].update(chip=chip, basis="cores ran at ~3.00 GHz under load (measured) [SYNTHETIC]")
            doc["peak"]["tflops"]["fp32"] = tflops
            for rec in doc["records"]:  # MFU against the new peak, as a sweep with that peak writes it
                if rec["dtype"] == "fp32" and rec["mfu"] is not None:
                    rec["mfu"] = rec["tflops"] / tflops
        return edit

    def same_second(run_id: str) -> Callable[[dict], None]:
        # two pieces started within one second (started_at has whole seconds), piece 1's run id sorting first:
        # the first piece is piece 0 all the same (by shard index, not by run id)
        return lambda doc: doc["run"].update(started_at="2026-12-04T21:00:00Z", id=run_id)

    _edit(_edit(pieces[0], measured(1.0)), same_second("f" * 32))
    _edit(_edit(pieces[1], measured(1.08)), same_second("0" * 32))
    (series,) = group_series(load_sweeps(pieces)).values()
    assert series.n_shapes == 3 and series.peak_tflops == 1.0
    (note,) = series.notes
    assert "differ by 7.4%" in note and "1.08" in note and "MFU uses 1, the first" in note, note
    assert with_peak({series.key: series}, "mfu")[1] == [note]  # what report and leaderboards print
    assert merge_files(pieces).labels  # merge keeps both pieces' peaks as written

    for edit in (lambda doc: doc["peak"].update(basis=""), measured(1.08, chip="another-cpu")):
        _edit(pieces[1], edit)
        with pytest.raises(ResultError, match="disagree on peak"):
            group_series(load_sweeps(pieces))


def test_other_devices_under_one_label_are_still_refused(tmp_path: Path) -> None:
    """Real --shard pieces with SYNTHETIC edits: each edit breaks what makes them one sharded sweep."""
    pieces = _shard_pieces(tmp_path, count=2)
    _edit(pieces[1], _move_to("node-2"))
    assert merge_files(pieces).hosts  # the baseline merges

    def no_shard_metadata(doc: dict) -> None:
        doc["settings"].pop("shard")

    def other_plan(doc: dict) -> None:
        doc["settings"]["seed"] += 1

    def other_chip(doc: dict) -> None:
        doc["device"]["name"] = "Another CPU"

    for edit in (no_shard_metadata, other_plan, other_chip):
        doc = json.loads(pieces[1].read_text())
        edit(doc)
        other = tmp_path / f"{edit.__name__}.json"
        other.write_text(json.dumps(doc))
        with pytest.raises(ResultError, match="names two devices"):
            merge_files([pieces[0], other])
        with pytest.raises(ResultError, match="names two devices"):
            group_series(load_sweeps([pieces[0], other]))
        res = CliRunner().invoke(main, ["merge", str(pieces[0]), str(other), "-o", str(tmp_path / "m.json")])
        assert res.exit_code == 1 and res.output.count("\n") == 1 and "Traceback" not in res.output
        assert "node-2" in res.output and "--relabel" in res.output


def test_shard_plan_is_shared_by_the_pieces_of_one_sweep(tmp_path: Path) -> None:
    a, b = (s for p in _shard_pieces(tmp_path, count=2) for s in load_sweeps([p]))
    assert shard_plan(a) == shard_plan(b) and shard_plan(a)[0] == 2
    torchrun = {"shard": "1/2", "rank": 1, "world_size": 2, "local_rank": 0, "distribute": "shard"}
    assert shard_plan(replace(a, settings={**a.settings, **torchrun})) is not None
    assert shard_plan(replace(b, settings={**b.settings, "seed": -1})) != shard_plan(a)  # another plan
    for bad in ({"shard": None}, {"shard": "3/2"}, {**torchrun, "world_size": 4}, {**torchrun, "rank": 0},
                {**torchrun, "distribute": "replicate"}):
        assert shard_plan(replace(b, settings={**b.settings, **bad})) is None, bad
