"""The fleet gate at pod scale: file digests read in parallel and cached, the same answers as loading the files.

Every comparison here runs ``compare`` twice on the same SYNTHETIC files (made-up numbers, from
``tests/synthetic_fleet.py``): through the digests (the default for many files) and through the whole
files (``board.fleet_inputs`` replaced by one that declines), and asks for the same stdout and the same
notes on stderr, with and without ``--json``, ``--baseline``, ``--metric tflops`` and
``--exclude-contended``, on fleets with contended records, an incomplete sweep, a merged file and two
runs of one label. The cache is checked by what it must never do: serve a digest of other bytes, write
with ``--no-cache``, trust an entry cut short, or grow past its bound.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from synthetic import write_sweep
from synthetic_fleet import SERIES, aspect_shapes, fleet_docs

from mfu_sweep.analysis.fleet import cells, evidence
from mfu_sweep.analysis.sources import cache as cache_mod
from mfu_sweep.analysis.sources.cache import DigestCache, namespace
from mfu_sweep.analysis.sources.digest import decode, digest_sweep, encode
from mfu_sweep.analysis.sources.digest_series import group_digests
from mfu_sweep.analysis.sources.reading import read_digests
from mfu_sweep.cli import board, main
from mfu_sweep.records.journal import journal_path
from mfu_sweep.records.results import ResultError, load_sweeps
from mfu_sweep.util import jsonio


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test reads and writes its own cache, never the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("MFU_SWEEP_CACHE_MB", raising=False)
    return tmp_path / "xdg" / "mfu-sweep"


def _contend(doc: dict, every: int) -> dict:
    """SYNTHETIC: every ``every``-th record flagged contended with a made-up machine reading."""
    for i, rec in enumerate(doc["records"]):
        if i % every == 0:
            rec["flags"] = [*rec.get("flags", []), "contended"]
            rec["machine"] = {"window_s": 1.0, "other_share": 0.2 + 0.01 * i}
    return doc


def _fleet(folder: Path, n: int = 8, **kw) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    docs = fleet_docs(n, **{"series": SERIES[:2], "slow": {3: (1.06, 1e8, 1e11)}, "seed": 5, "n_samples": 9, **kw})
    return [str(write_sweep(folder, d, name=f"d{i:03d}.json")) for i, d in enumerate(docs)]


def _compare(args: list[str], whole: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    with monkeypatch.context() as m:
        if whole:
            m.setattr(board, "fleet_inputs", lambda *a, **k: None)
        res = CliRunner().invoke(main, ["compare", *args])
    notes = "\n".join(line for line in res.stderr.splitlines() if not line.startswith("reading"))
    return res.exit_code, res.stdout, notes


def _same(args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    digested = _compare(args, False, monkeypatch)
    assert digested == _compare(args, True, monkeypatch), args
    return digested


def test_the_gate_through_digests_answers_as_the_whole_files(tmp_path, monkeypatch, private_cache):
    files = _fleet(tmp_path / "f")
    code, out, _ = _same([*files, "--fail-on", "slower"], monkeypatch)
    assert code == 1 and "FAIL: 1 of 8 devices" in out and "synthetic-gpu.r3" in out
    assert list(private_cache.rglob("*.json")), "the digests were cached"
    _same([*files, "--fail-on", "slower"], monkeypatch)  # warm: every digest from the cache
    _same([*files, "--fail-on", "ambiguous", "--metric", "tflops", "--json"], monkeypatch)
    _same([*files, "--baseline", "synthetic-gpu.r0", "--fail-on", "slower", "--margin", "0"], monkeypatch)
    _same([*files, "--no-cache", "--min-run", "3", "--alpha", "0.01"], monkeypatch)


def test_contended_incomplete_and_merged_files_read_the_same(tmp_path, monkeypatch):
    folder = tmp_path / "f"
    folder.mkdir()
    docs = fleet_docs(7, series=SERIES[:1], shapes=aspect_shapes(10), seed=9, n_samples=5,
                      slow={2: (1.05, 0.0, 1e15)})
    _contend(docs[1], 3)
    _contend(docs[4], 1)  # every record: --exclude-contended leaves this sweep empty
    docs[5]["run"]["finished_at"] = None  # an interrupted sweep
    files = [str(write_sweep(folder, d, name=f"d{i}.json")) for i, d in enumerate(docs[:5])]
    merged = {"schema_version": 1, "kind": "merged", "sweeps": docs[5:]}
    (folder / "merged.json").write_bytes(jsonio.dumps(merged))
    files.append(str(folder / "merged.json"))
    for extra in ([], ["--exclude-contended"], ["--json", "--exclude-contended", "--fail-on", "slower"]):
        code, out, notes = _same([*files, "--fail-on", "slower", *extra], monkeypatch)
        assert "measured under contention: synthetic-gpu.r1: 14 of 40 records in 1 pass" in notes
        assert "incomplete sweep" in notes and "merged.json: sweeps[0]" in notes


def test_two_runs_of_one_label_pool_through_the_whole_files(tmp_path, monkeypatch):
    """A shape that two files of one series measured needs both files' samples: the digests hand over."""
    files = _fleet(tmp_path / "a", n=6)
    again = _fleet(tmp_path / "b", n=6, seed=6)
    sweeps = [s for f in [*files, *again] for s in load_sweeps([f])]
    assert group_digests([digest_sweep(s) for s in sweeps]) is None
    _same([*files, *again, "--fail-on", "slower"], monkeypatch)


def test_an_invalid_file_is_refused_as_the_whole_path_refuses_it(tmp_path, monkeypatch):
    files = _fleet(tmp_path / "f")
    doc = json.loads(Path(files[5]).read_text())
    doc["records"][2]["samples_s"] = [-1.0]
    Path(files[5]).write_text(json.dumps(doc))
    code, out, notes = _same([*files, "--fail-on", "slower"], monkeypatch)
    assert code == 1 and Path(files[5]).name in notes and "Traceback" not in notes


def test_digests_round_trip_and_parallel_reading_equals_serial(tmp_path):
    files = _fleet(tmp_path / "f", n=40)  # 80 files: 2 workers over 64-file chunks
    serial, _ = read_digests(files, None, workers=1)
    parallel, stats = read_digests(files, None, workers=2)
    assert stats.hits == stats.stored == 0
    for a, b in zip(serial, parallel, strict=True):
        assert encode([a], False) == encode([b], False)
    (sweep,) = load_sweeps([files[0]])
    (back,) = decode(encode([digest_sweep(sweep)], False) or b"", files[0])
    assert back.sweep.peak == sweep.peak and back.sweep.device == sweep.device and back.sweep.source == files[0]
    assert back.records == len(sweep.records) and not back.sweep.records
    table = back.table(("bf16", "eager"), False)
    assert table is not None and len(table) == 40
    assert np.array_equal(table.log_s, digest_sweep(sweep).table(("bf16", "eager"), False).log_s)


def test_the_cache_serves_only_the_same_bytes(tmp_path, monkeypatch, private_cache):
    """Cold, every file is digested and stored; warm, every digest is a hit; a file changed in place is read
    again and the gate sees the change (never a stale digest)."""
    files = _fleet(tmp_path / "f")
    cache = DigestCache.default()
    _, cold = read_digests(files, cache)
    assert (cold.hits, cold.stored) == (0, len(files))
    _, warm = read_digests(files, cache)
    assert (warm.hits, warm.stored) == (len(files), 0)
    gate = _compare([*files, "--fail-on", "slower"], False, monkeypatch)[1].splitlines()[-1]
    assert "FAIL: 1 of 8 devices" in gate and "synthetic-gpu.r5" not in gate
    doc = json.loads(Path(files[10]).read_text())  # device r5, bf16 eager: 20% slower everywhere
    assert doc["device"]["label"] == "synthetic-gpu.r5"
    for rec in doc["records"]:
        rec["samples_s"] = [t * 1.2 for t in rec["samples_s"]]
        rec["median_s"] *= 1.2
        rec["tflops"] /= 1.2
        rec["mfu"] /= 1.2
        rec["ci_low_s"], rec["ci_high_s"] = rec["ci_low_s"] * 1.2, rec["ci_high_s"] * 1.2
        rec["iqr_s"] *= 1.2
    Path(files[10]).write_text(json.dumps(doc))
    _, changed = read_digests(files, cache)
    assert (changed.hits, changed.stored) == (len(files) - 1, 1)
    gate = _compare([*files, "--fail-on", "slower"], False, monkeypatch)[1].splitlines()[-1]
    assert "FAIL: 2 of 8 devices" in gate and "synthetic-gpu.r5 (bf16 eager" in gate


def test_no_cache_writes_nothing_and_a_broken_entry_is_a_miss(tmp_path, monkeypatch, private_cache):
    files = _fleet(tmp_path / "f")
    _compare([*files, "--fail-on", "slower", "--no-cache"], False, monkeypatch)
    assert not private_cache.exists()
    cache = DigestCache.default()
    read_digests(files, cache)
    entry = next(private_cache.rglob("*.json"))
    entry.write_bytes(entry.read_bytes()[:100])  # cut short, as a crash between write and sync may leave it
    _, again = read_digests(files, cache)
    assert (again.hits, again.stored) == (len(files) - 1, 1)
    assert _compare([*files, "--fail-on", "slower"], False, monkeypatch) == \
        _compare([*files, "--fail-on", "slower"], True, monkeypatch)


def test_a_cache_that_cannot_be_written_changes_nothing(tmp_path, monkeypatch):
    files = _fleet(tmp_path / "f")
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    _, stats = read_digests(files, DigestCache.default())
    assert stats.stored == 0
    _same([*files, "--fail-on", "slower"], monkeypatch)


def test_a_running_sweeps_file_is_never_cached(tmp_path):
    files = _fleet(tmp_path / "f")
    journal_path(files[0]).write_text("")  # a journal beside it: its records may change under the same bytes
    _, stats = read_digests(files, DigestCache.default())
    assert stats.stored == len(files) - 1


def test_the_cache_is_trimmed_oldest_first_and_a_hit_stays(tmp_path):
    cache = DigestCache(tmp_path / "digests" / "ns")
    for i in range(6):
        assert cache.put(f"{i:02d}" + "a" * 62, b"x" * 1000)
        os.utime(cache.path(f"{i:02d}" + "a" * 62), (time.time() - 100 + i, time.time() - 100 + i))
    assert cache.get("00" + "a" * 62) == b"x" * 1000  # a hit: now the newest
    assert cache.trim(3500) == 3
    left = sorted(p.name[:2] for p in (tmp_path / "digests").rglob("*.json"))
    assert left == ["00", "04", "05"]


def test_a_bad_cache_bound_is_one_line(tmp_path, monkeypatch):
    files = _fleet(tmp_path / "f")
    monkeypatch.setenv("MFU_SWEEP_CACHE_MB", "lots")
    res = CliRunner().invoke(main, ["compare", *files, "--fail-on", "slower"])
    assert res.exit_code == 1 and "MFU_SWEEP_CACHE_MB='lots' must be a number of MiB" in res.output
    assert "Traceback" not in res.output


def test_the_namespace_follows_the_tool_version(monkeypatch):
    import mfu_sweep

    before = namespace()
    monkeypatch.setattr(mfu_sweep, "__version__", "9.9.9")
    assert namespace() != before and namespace().startswith("9.9.9-d")
    monkeypatch.setattr(cache_mod, "KEYED_MODULES", (*cache_mod.KEYED_MODULES, "util/text.py"))
    assert namespace().split("-")[-1] != before.split("-")[-1]  # the source hash covers the keyed modules


def test_every_keyed_module_is_a_file_of_the_package():
    """A moved module left under its old name would hash as "missing": the cache would outlive a change to it."""
    import mfu_sweep

    package = Path(mfu_sweep.__file__).parent
    assert [name for name in cache_mod.KEYED_MODULES if not (package / name).is_file()] == []


def test_no_result_file_at_all():
    with pytest.raises(ResultError, match="no result files given"):
        read_digests([], None)


# -- the fleet tests over devices at once, against the loops they replaced --------------------------------


def _noise_loop(log_ratio, median_var, band):
    """The per-device loop ``_noise`` was before it ran over every device at once (kept as the reference)."""
    n_dev = log_ratio.shape[0]
    own, dof = np.full(n_dev, np.nan), np.zeros(n_dev)
    for d in range(n_dev):
        ok = ~np.isnan(log_ratio[d])
        if not ok.any():
            continue
        b, x = band[ok], log_ratio[d, ok]
        counts = np.bincount(b)
        means = np.bincount(b, x) / np.maximum(counts, 1)
        k = counts[b]
        keep = k > 1
        dof[d] = float(np.sum(counts[counts > 1] - 1))
        if dof[d] >= 1:
            resid = (x - means[b])[keep] * np.sqrt(k[keep] / (k[keep] - 1))
            own[d] = (evidence.MAD_TO_SIGMA * float(np.median(np.abs(resid - np.median(resid))))) ** 2
    pooled = float(np.nanmedian(own)) if np.isfinite(own).any() else 0.0
    seen = ~np.isnan(log_ratio) & ~np.isnan(median_var)
    floor = np.where(seen, median_var, 0.0).sum(axis=1) / np.maximum(seen.sum(axis=1), 1)
    var = np.fmax(np.nan_to_num(own, nan=pooled), np.maximum(pooled, floor))
    pooled_dof = float(np.median(dof[dof >= 1])) if (dof >= 1).any() else 1.0
    worth = evidence.MAD_EFFICIENCY * max(1, n_dev - 2)
    return np.maximum(var, 1e-300), worth * np.where(dof >= 1, dof, pooled_dof)


def test_vectorised_noise_and_band_means_equal_the_per_device_loops():
    rng = np.random.default_rng(3)
    for trial in range(30):
        n_dev, n_shapes = int(rng.integers(2, 30)), int(rng.integers(1, 60))
        band = np.unique(np.sort(rng.integers(0, 6, n_shapes)), return_inverse=True)[1]
        lr = rng.normal(0, 0.05, (n_dev, n_shapes))
        lr[rng.random(lr.shape) < (0.0 if trial % 3 == 0 else 0.25)] = np.nan
        if trial % 4 == 1:
            lr[0] = np.nan  # a device without a value
        var = rng.uniform(1e-5, 1e-3, lr.shape)
        got, want = evidence._noise(lr, var, band), _noise_loop(lr, var, band)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), trial
        mean, count = cells._band_means(lr, band, int(band.max()) + 1)
        for d in range(n_dev):
            for b in range(int(band.max()) + 1):
                x = lr[d, band == b]
                x = x[~np.isnan(x)]
                assert count[d, b] == len(x)
                assert (np.isnan(mean[d, b]) and not len(x)) or mean[d, b] == np.mean(x), (trial, d, b)
