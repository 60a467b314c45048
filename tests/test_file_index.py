"""The digest cache's stat index: an unchanged file is not opened again; any change a stat can see is read.

Real files in ``tmp_path`` (SYNTHETIC sweeps, made-up numbers); the only thing faked is the wall clock the
index records, moved ten seconds on where a test needs files older than the racy window (a file's ctime
cannot be set back). Opens are counted by wrapping the function the reader reads a file's bytes with.
"""

from __future__ import annotations

import os
from pathlib import Path
from time import time_ns

import pytest
from click.testing import CliRunner
from synthetic import write_sweep
from synthetic_fleet import SERIES, fleet_docs

from mfu_sweep.analysis.sources import file_index, reading
from mfu_sweep.analysis.sources.cache import DigestCache, content_key
from mfu_sweep.analysis.sources.digest import encode
from mfu_sweep.analysis.sources.file_index import Seen, lookup, record
from mfu_sweep.analysis.sources.reading import read_digests
from mfu_sweep.cli import main
from mfu_sweep.records.journal import journal_path

LATER_NS = 10_000_000_000  # the clock of a run ten seconds after the files were written


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("MFU_SWEEP_CACHE_MB", raising=False)
    return tmp_path / "xdg" / "mfu-sweep"


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths whose bytes the reader reads, in order (the reads run here: fewer files than the pool needs)."""
    paths: list[str] = []
    real = reading.read_bytes

    def counted(path: str) -> bytes:
        paths.append(str(path))
        return real(path)

    monkeypatch.setattr(reading, "read_bytes", counted)
    return paths


def _later(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_index, "time_ns", lambda: time_ns() + LATER_NS)


def _fleet(folder: Path) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    docs = fleet_docs(6, series=SERIES[:2], seed=5, n_samples=9)
    return [str(write_sweep(folder, d, name=f"d{i:03d}.json")) for i, d in enumerate(docs)]


def _entries(digests: list) -> list[bytes | None]:
    return [encode([d], False) for d in digests]


def _rewrite_in_place(path: str) -> None:
    """Change one sample's digit in place (same inode, same size) and set atime and mtime back."""
    before = os.stat(path)
    data = bytearray(Path(path).read_bytes())
    at = data.index(b'"samples_s"')
    at = next(i for i in range(at, len(data)) if data[i:i + 1] in b"123456789" and data[i - 1:i] == b".")
    data[at] = ord("1") if data[at] != ord("1") else ord("2")
    with open(path, "r+b") as fh:
        fh.write(data)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    while os.stat(path).st_ctime_ns == before.st_ctime_ns:  # a coarse clock may give both writes one tick
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


def test_an_unchanged_file_is_not_opened_again(tmp_path, monkeypatch, opened):
    files = _fleet(tmp_path / "f")
    _later(monkeypatch)
    cache = DigestCache.default()
    cold, stats = read_digests(files, cache)
    assert (stats.stored, stats.unread, len(opened)) == (len(files), 0, len(files))
    opened.clear()
    warm, stats = read_digests(files, cache)
    assert opened == [] and (stats.hits, stats.unread, stats.stored) == (len(files), len(files), 0)
    assert _entries(warm) == _entries(cold) and [d.sweep.source for d in warm] == [d.sweep.source for d in cold]


def test_a_file_rewritten_with_its_size_and_mtime_is_read_again(tmp_path, monkeypatch, opened):
    """Same inode, same size, mtime set back: only ctime tells, and it does."""
    files = _fleet(tmp_path / "f")
    _later(monkeypatch)
    cache = DigestCache.default()
    read_digests(files, cache)
    _rewrite_in_place(files[3])
    opened.clear()
    warm, stats = read_digests(files, cache)
    assert opened == [files[3]] and (stats.unread, stats.stored) == (len(files) - 1, 1)
    fresh, _ = read_digests(files, None)
    assert _entries(warm) == _entries(fresh)


def test_a_replaced_file_is_read_again(tmp_path, monkeypatch, opened):
    """The same bytes under a new inode, mtime set back: read (and found by its content)."""
    files = _fleet(tmp_path / "f")
    _later(monkeypatch)
    cache = DigestCache.default()
    read_digests(files, cache)
    before = os.stat(files[2])
    copy = tmp_path / "copy.json"
    copy.write_bytes(Path(files[2]).read_bytes())
    os.utime(copy, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(copy, files[2])
    assert os.stat(files[2]).st_ino != before.st_ino
    opened.clear()
    _, stats = read_digests(files, cache)
    assert opened == [files[2]] and (stats.hits, stats.unread) == (len(files), len(files) - 1)


def test_a_file_changed_within_the_racy_window_is_read(tmp_path, monkeypatch, opened):
    """Files read right after they were written get no entry; an entry whose file changed less than 2 s
    before it was recorded is not trusted, even with its stat unchanged (a write in the same clock tick)."""
    files = _fleet(tmp_path / "f")
    newest = max(max(os.stat(f).st_mtime_ns, os.stat(f).st_ctime_ns) for f in files)
    monkeypatch.setattr(file_index, "time_ns", lambda: newest + 1_000_000_000)  # a run 1 s after the last write
    cache = DigestCache.default()
    read_digests(files, cache)
    assert lookup(cache.index, files) == [None] * len(files)
    opened.clear()
    read_digests(files, cache)
    assert opened == files
    # an entry naming other bytes (another file's, whose digest is cached) under this file's stat
    info = os.stat(files[0])
    stat = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    other = content_key(Path(files[1]).read_bytes())
    changed = max(info.st_mtime_ns, info.st_ctime_ns)
    assert record(cache.index, {files[0]: Seen(stat, other, changed + 1_900_000_000)})
    opened.clear()
    racy, stats = read_digests(files, cache)
    assert files[0] in opened and stats.unread == 0
    assert _entries(racy)[0] == _entries(read_digests(files, None)[0])[0]
    assert record(cache.index, {files[0]: Seen(stat, other, changed + 2_100_000_000)})  # past the window:
    trusted, stats = read_digests(files, cache)  # trusted, which is why the window must hold
    assert stats.unread == 1 and _entries(trusted)[0] == _entries(racy)[1]


def test_no_cache_reads_every_file_and_writes_no_index(tmp_path, monkeypatch, opened, private_cache):
    files = _fleet(tmp_path / "f")
    _later(monkeypatch)
    read_digests(files, DigestCache.default())
    index = DigestCache.default().index
    written = index.read_bytes()
    opened.clear()
    res = CliRunner().invoke(main, ["compare", *files, "--fail-on", "slower", "--no-cache"])
    assert res.exit_code in (0, 1), res.output
    assert sorted(set(opened)) == sorted(files) and index.read_bytes() == written
    opened.clear()
    _, stats = read_digests(files, None)
    assert opened == files and stats.unread == 0


def test_a_running_sweeps_file_is_read_whatever_the_index_says(tmp_path, monkeypatch, opened):
    files = _fleet(tmp_path / "f")
    _later(monkeypatch)
    cache = DigestCache.default()
    read_digests(files, cache)
    journal_path(files[1]).write_text("")
    opened.clear()
    _, stats = read_digests(files, cache)
    assert opened == [files[1]] and stats.unread == len(files) - 1


def test_the_index_is_bounded_and_a_broken_one_is_empty(tmp_path, monkeypatch):
    files = _fleet(tmp_path / "f")
    _later(monkeypatch)
    monkeypatch.setattr(file_index, "MAX_ENTRIES", 5)
    cache = DigestCache.default()
    read_digests(files, cache)
    kept = [s is not None for s in lookup(cache.index, files)]
    assert kept == [False] * (len(files) - 5) + [True] * 5  # the most recently recorded
    cache.index.write_bytes(cache.index.read_bytes()[:-10])  # cut short
    assert lookup(cache.index, files) == [None] * len(files)
    _, stats = read_digests(files, cache)
    assert (stats.hits, stats.unread) == (len(files), 0)


def test_a_second_writer_waits_for_the_lock_then_gives_up(tmp_path, monkeypatch):
    import fcntl

    files = _fleet(tmp_path / "f")
    _later(monkeypatch)
    monkeypatch.setattr(file_index, "LOCK_WAIT_S", 0.2)
    cache = DigestCache.default()
    cache.index.parent.mkdir(parents=True)
    fd = os.open(cache.index.with_name(".index.lock"), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another run writing the index
        read_digests(files, cache)
        assert not cache.index.exists()
    finally:
        os.close(fd)
    read_digests(files, cache)
    assert all(s is not None for s in lookup(cache.index, files))
