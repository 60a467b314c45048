"""Scale (issue 47 item 5): fit, dry-run and imports linear in records, with the same answers as before.

Speed is the benchmarks' to measure (benchmarks/scale.py); here each mechanism is checked against the
code it replaced, kept in this file as the reference, and memory (peak RSS does not depend on the machine's
load) is bounded in a subprocess where the old code used several times more.
"""

from __future__ import annotations

import gc
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from mfu_sweep.analysis.fits import lsq
from mfu_sweep.analysis.fits.fit import fit_series
from mfu_sweep.analysis.fits.roofline import shape_data
from mfu_sweep.analysis.ground.series import group_series
from mfu_sweep.cli import main
from mfu_sweep.gemm.shape_files import PLAIN_HEADER, _csv_values, _plain_row, _shape_row, read_shape_rows
from mfu_sweep.gemm.shapes import Shape, ShapeError
from mfu_sweep.measure.estimate import estimate_sweep
from mfu_sweep.measure.task import Task
from mfu_sweep.measure.timing import TimingConfig
from mfu_sweep.records.results import Record, ResultError, load_sweeps, parse_document
from mfu_sweep.util import inputs
from mfu_sweep.util.allocator import paused_gc

ROOT = Path(__file__).resolve().parents[1]
XLA_TABLE = ROOT / "data/published/xla/openxla-main/default_matmul_perf_table.txtpb"


# -- reading -----------------------------------------------------------------------------------------------


def _max_depth_before(data: bytes) -> int:
    """max_depth as it was (numpy over every byte), the reference."""
    opened = data.count(b"[") + data.count(b"{")
    if opened <= inputs.MAX_DEPTH:
        return opened
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    b = np.frombuffer(data, np.uint8)
    quotes = np.flatnonzero(b == 34)
    brackets = np.flatnonzero((b == 123) | (b == 91) | (b == 125) | (b == 93))
    brackets = brackets[(np.searchsorted(quotes, brackets) & 1) == 0]
    kind = b[brackets]
    return int(np.cumsum(np.where((kind == 123) | (kind == 91), 1, -1)).max(initial=0))


def test_max_depth_counts_as_before():
    rng = random.Random(4)
    alphabet = '{}[]"\\ab:,'
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(70, 500))).encode()
        assert inputs.max_depth(text) == _max_depth_before(text), text
    deep = b'{"a": "[[[{", "b": ' + b"[" * 100 + b"]" * 100 + b"}"
    assert inputs.max_depth(deep) == _max_depth_before(deep) == 101


def test_records_read_as_the_dataclass_makes_them(tmp_path):
    from synthetic import make_sweep_doc

    doc = make_sweep_doc("x", P_tflops=100, W_tbs=1, t0_s=1e-5, n_samples=3)
    raw = doc["records"][0]
    for variant in (raw, {**raw, "pass": 1, "machine": {"other_share": 0.5}}, {**raw, "flags": ["noisy"]}):
        got = Record.from_json(variant)
        want = Record(**{f: getattr(got, f) for f in Record.__dataclass_fields__})
        assert got == want and list(vars(got)) == list(vars(want)) and repr(got) == repr(want)
    broken = {k: v for k, v in raw.items() if k != "status"}
    with pytest.raises(TypeError, match="status"):
        Record.from_json(broken)
    bad = {**doc, "records": [broken]}
    with pytest.raises(ResultError, match=r"records\[0\]"):
        parse_document(bad, validate=False)


def test_plain_shape_lines_read_as_the_csv_reader_reads_them():
    lines = ["64,64,64", " 1024 , 8,  16 ", "1,2,3", "0,1,1", "99999999999,1,1", "+1,2,3", "1.0,2,3", "1,2",
             "1,2,3,4", "١,2,3", "\t7,8,9\t", '"5",6,7', "5,,7", "a,b,c"]
    for line in lines:
        fast = None
        try:
            fast = _plain_row(line)
        except ShapeError as exc:
            with pytest.raises(ShapeError, match=str(exc).split(" ")[0]):
                _shape_row(PLAIN_HEADER, _csv_values(line), line)
            continue
        if fast is None:
            continue  # the general reader takes it
        assert fast == _shape_row(PLAIN_HEADER, _csv_values(line), line), line


def test_a_shape_file_is_read_once_and_a_changed_file_again(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("m,n,k\n64,64,64\n# a comment\n\n128,64,32\n")
    first = read_shape_rows(path)
    assert [str(r.shape) for r in first] == ["64x64x64", "128x64x32"]
    assert read_shape_rows(path) == first
    path.write_text("m,n,k\n64,64,64\n256,256,256\n")
    assert [str(r.shape) for r in read_shape_rows(path)] == ["64x64x64", "256x256x256"]
    path.write_text("# only a comment\n")
    with pytest.raises(ShapeError, match="has no shapes"):
        read_shape_rows(path)


def test_the_collector_is_paused_and_given_back():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # it was off: it stays off
    finally:
        gc.enable()


def test_an_analysis_command_gives_back_what_it_froze(tmp_path):
    from synthetic import make_sweep_doc, write_sweep

    files = [str(write_sweep(tmp_path, make_sweep_doc(f"d{i}", P_tflops=100, W_tbs=1, t0_s=1e-5, seed=i)))
             for i in range(2)]
    res = CliRunner().invoke(main, ["fit", *files])
    assert res.exit_code == 0, res.output
    assert gc.get_freeze_count() == 0


# -- the estimate of a dry run ------------------------------------------------------------------------------


def _estimate_before(tasks, repeats, done):
    """The counts estimate_sweep gave when it listed every (pass, task) slot, the reference."""
    key = lambda t: (t.shape, t.dtype, t.mode)  # noqa: E731
    slots = [(p, t) for t in tasks for p in range(min(repeats, t.passes or repeats))]
    todo = [(p, t) for p, t in slots if (p, key(t)) not in done]
    kept = len(set(done) - {(p, key(t)) for p, t in slots})
    return len(slots), len(slots) - len(todo), kept, len(todo), len({p for p, _ in todo})


def test_the_estimate_counts_the_slots_it_no_longer_lists():
    rng = random.Random(2)
    shapes = [Shape(1, 64 * (i + 1), 64, 64) for i in range(12)]
    cfg = TimingConfig()
    for _ in range(40):
        tasks = [Task(shape=s, dtype=d, passes=rng.choice([None, 1, 2, 3]), timing=cfg)
                 for s in rng.sample(shapes, 8) for d in ("fp32", "bf16")]
        repeats = rng.randint(1, 4)
        done = {(rng.randint(0, 4), (rng.choice(shapes), rng.choice(["fp32", "bf16"]), "eager")) for _ in range(10)}
        for d in (done, set()):
            est = estimate_sweep(tasks, repeats, cfg, {"fp32": 1.0, "bf16": 2.0}, done=d)
            want = _estimate_before(tasks, repeats, d)
            assert (est.planned, est.in_file, est.kept, est.measurements, est.workers) == want


# Peak memory of this process's own address space (VmHWM): getrusage's maxrss would carry over the peak of the
# process that started it (Linux keeps it across exec), here pytest's.
PEAK_MIB = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) // 1024"
DRY_RSS = f"""
import sys
from click.testing import CliRunner
from mfu_sweep.cli import main
res = CliRunner().invoke(main, ["sweep", "--device", "cpu", "--shape-file", sys.argv[1], "--dry-run"])
assert res.exit_code == 0, res.output
print({PEAK_MIB})
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status")
def test_a_dry_run_of_200000_shapes_stays_small(tmp_path):
    """200,000 shapes planned in under 250 MiB (the code before took 580 MiB here, 2.4 GB at a million)."""
    rng = np.random.default_rng(0)
    dims = rng.integers(16, 4096, (200_000, 3))
    path = tmp_path / "shapes.csv"
    path.write_text("m,n,k\n" + "\n".join(f"{m},{n},{k}" for m, n, k in dims) + "\n")
    peak = int(subprocess.run([sys.executable, "-c", DRY_RSS, str(path)], capture_output=True, text=True,
                              check=True).stdout.split()[-1])
    assert peak < 250, peak


# -- the fit --------------------------------------------------------------------------------------------------


def _series(n_shapes: int, seed: int = 0, n_samples: int = 1):
    from synthetic import make_sweep_doc

    rng = np.random.default_rng(seed)
    dims = np.exp(rng.uniform(np.log(64), np.log(8192), (n_shapes, 3))).astype(int)
    shapes = list(dict.fromkeys(Shape(1, int(m), int(n), int(k)) for m, n, k in dims))
    doc = make_sweep_doc("big", shapes=shapes, n_samples=n_samples, P_tflops=500, W_tbs=2, t0_s=5e-6, seed=seed,
                         noise=0.05)
    (series,) = group_series(parse_document(doc, validate=False)).values()
    return series


def test_a_fit_evaluated_in_blocks_is_the_same_fit(monkeypatch):
    series = _series(600, n_samples=3)
    whole = fit_series(series, cache=False, n_boot=60)
    monkeypatch.setattr(lsq, "EVAL_CELLS", 997)  # blocks of a row or two: every evaluation split
    split = fit_series(series, cache=False, n_boot=60)
    assert np.array_equal(whole.boot, split.boot)
    assert whole.to_json() == split.to_json()


def _shape_data_before(series):
    pooled, run_pass, size = {}, {}, {}
    dense = {p: i for i, p in enumerate(sorted({rec.run_pass for rec in series.records}))}
    for rec in series.records:
        pooled.setdefault(rec.shape, []).extend(rec.samples_s)
        run_pass.setdefault(rec.shape, []).extend([dense[rec.run_pass]] * len(rec.samples_s))
        size[rec.shape] = (rec.flops, rec.bytes)
    order = sorted(pooled, key=lambda s: (size[s][0], s))
    return order, [pooled[s] for s in order], [run_pass[s] for s in order]


def test_shape_data_pools_as_before():
    from synthetic import NoiseModel, make_sweep_doc

    doc = make_sweep_doc("p", P_tflops=100, W_tbs=1, t0_s=1e-5, n_samples=4, repeats=3, seed=3,
                         noise_model=NoiseModel("SYNTHETIC passes"))
    (series,) = group_series(parse_document(doc, validate=False)).values()
    data = shape_data(series)
    order, samples, passes = _shape_data_before(series)
    assert list(data.flops) == [s.flops for s in order]
    assert [list(x) for x in data.samples] == samples and [list(p) for p in data.passes] == passes


FIT_RSS = f"""
import sys
sys.path.insert(0, sys.argv[1])
from test_scale import _series
from mfu_sweep.analysis.fits.fit import fit_series
series = _series(20_000)
before = {PEAK_MIB}
fit_series(series, cache=False)
print({PEAK_MIB} - before)
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status")
def test_a_fit_of_20000_shapes_holds_no_bootstrap_jacobian(tmp_path):
    """The bootstrap of 200 resamples over 20,000 shapes: its residuals and Jacobian were held whole (about
    600 MiB more at the peak); evaluated in blocks the fit adds under 250 MiB."""
    grown = int(subprocess.run([sys.executable, "-c", FIT_RSS, str(Path(__file__).parent)], capture_output=True,
                               text=True, check=True, cwd=ROOT).stdout.split()[-1])
    assert grown < 250, grown


# -- imports within the input limit ---------------------------------------------------------------------------


def test_an_import_larger_than_the_input_limit_is_written_in_pieces_that_pool_back(tmp_path, monkeypatch):
    whole, split = tmp_path / "whole", tmp_path / "split"
    assert CliRunner().invoke(main, ["import", "xla-perf-table", str(XLA_TABLE), "--only", "gfx950",
                                     "-o", str(whole)]).exit_code == 0
    b = group_series(load_sweeps(sorted(whole.glob("*.json"))))
    monkeypatch.setenv("MFU_SWEEP_MAX_INPUT_MB", "1")  # the gfx950 table writes 1.4 MiB
    res = CliRunner().invoke(main, ["import", "xla-perf-table", str(XLA_TABLE), "--only", "gfx950", "-o", str(split)])
    assert res.exit_code == 0, res.output
    assert "gfx950.json and 1 more piece (gfx950.part2.json ...): one import of 1500 records" in res.stderr
    pieces = sorted(split.glob("*.json"))
    assert [p.name for p in pieces] == ["gfx950.json", "gfx950.part2.json"]
    assert all(p.stat().st_size <= 2**20 for p in pieces)
    assert CliRunner().invoke(main, ["validate", *map(str, pieces)]).exit_code == 0
    blocks = [json.loads(p.read_text())["import"]["piece"] for p in pieces]
    assert blocks == [{"index": 1, "count": 2, "records": 1500}, {"index": 2, "count": 2, "records": 1500}]
    a = group_series(load_sweeps(pieces))
    assert a.keys() == b.keys()
    for key in a:
        assert [(r.shape, r.samples_s) for r in a[key].records] == [(r.shape, r.samples_s) for r in b[key].records]
    # imported again whole (the default limit), --force: the stale second piece goes with the first
    monkeypatch.delenv("MFU_SWEEP_MAX_INPUT_MB")
    again = CliRunner().invoke(main, ["import", "xla-perf-table", str(XLA_TABLE), "--only", "gfx950",
                                      "-o", str(split), "--force"])
    assert again.exit_code == 0, again.output
    assert [p.name for p in split.glob("*.json")] == ["gfx950.json"]
