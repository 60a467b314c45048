"""Reading many result files at once for the fleet gate: in parallel, in bounded memory, through the cache.

:func:`read_digests` hands the files to worker processes (one per core, forked where the platform can),
chunk by chunk. A worker stats a file: when the cache's stat index
(:mod:`mfu_sweep.analysis.sources.file_index`) says a file of that stat held bytes of a known hash, it looks the
digest up by that hash without opening the file. Otherwise it reads the file's bytes, looks its digest up in
the cache by their hash (:mod:`mfu_sweep.analysis.sources.cache`), and on a miss loads and validates the file exactly as
:func:`mfu_sweep.records.results.load_sweeps` does, digests it (:mod:`mfu_sweep.analysis.sources.digest`) and
stores the digest. Only digests (a few KiB a file) come back, so memory holds one file per worker and the
fleet's digests, never its samples. A file that fails is the error of the first such file in the order
given, with the message :func:`~mfu_sweep.records.results.load_sweeps` gives. The parent writes the stat index
once, after the run, with the files that were read.

Ground of ``analysis/``: imports the top-level modules, ``series`` and ``sources/`` only.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass

from mfu_sweep.analysis.sources.cache import DigestCache, content_key
from mfu_sweep.analysis.sources.digest import SweepDigest, decode, digest_sweep, encode, intact
from mfu_sweep.analysis.sources.file_index import USABLE, Seen, clean, lookup, record, stat_now
from mfu_sweep.records.journal import journal_path
from mfu_sweep.records.results import ResultError, parse_document, read_bytes, read_json

Progress = Callable[[int, int], None]
CHUNK = 64  # files per task: progress every few hundred milliseconds, little pickling
SERIAL_BELOW = 2 * CHUNK  # fewer files than this are read here, without workers


@dataclass(frozen=True)
class Outcome:
    """What a worker made of one file: its encoded digest (``data``), the digests themselves where they do not
    encode, or the ``error`` line; ``hit`` when the cache had it, ``unread`` when the stat index named it (the
    file not opened), ``seen`` the stat index's new entry for the file."""

    data: bytes | None = None
    digests: tuple[SweepDigest, ...] | None = None
    error: str | None = None
    hit: bool = False
    stored: bool = False
    unread: bool = False
    seen: Seen | None = None


def digest_file(path: str, cache: DigestCache | None, known: Seen | None = None) -> Outcome:
    """One file's digest, from the cache or from the file (then stored). ``known``: the stat index's entry for
    the file; when the file still stats as it says, its digest is looked up without reading the file."""
    try:
        running = os.path.exists(journal_path(path))  # a running sweep's journal: never cached
        now = None if cache is None or running or not USABLE else stat_now(path)
        if known is not None and now is not None and known.trusted(now[0]):
            data = cache.get(known.key)  # type: ignore[union-attr]
            if data is not None and intact(data):
                return Outcome(data=data, hit=True, unread=True)
        raw = read_bytes(path)
        key = None if running else content_key(raw)
        seen = None if now is None or key is None or not clean(*now) else Seen(now[0], key, now[1])
        if cache is not None and key is not None:
            data = cache.get(key)
            if data is not None and intact(data):  # else cut short or overwritten: digest the file again
                return Outcome(data=data, hit=True, seen=seen)
        doc = read_json(path, raw=raw)
        digests = [digest_sweep(s) for s in parse_document(doc, source=str(path))]
    except ResultError as exc:
        return Outcome(error=str(exc))
    data = encode(digests, isinstance(doc, dict) and doc.get("kind") == "merged")
    if data is None:
        return Outcome(digests=tuple(digests))
    stored = cache is not None and key is not None and cache.put(key, data)
    return Outcome(data=data, stored=stored, seen=seen if stored else None)


Job = tuple[Sequence[str], Sequence[Seen | None], DigestCache | None]  # files, their index entries, the cache


def _digest_chunk(job: Job) -> list[Outcome]:
    paths, known, cache = job
    return [digest_file(p, cache, k) for p, k in zip(paths, known, strict=True)]


def _quiet_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the pool


def workers_for(n_files: int) -> int:
    """Worker processes for ``n_files``: one per core this process may use, none below :data:`SERIAL_BELOW`."""
    if n_files < SERIAL_BELOW:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, n_files // CHUNK))


@dataclass(frozen=True)
class ReadStats:
    """How a read went: files, cache hits, entries written, and files whose digest was found by their stat,
    without opening them (``unread``, hits too)."""

    files: int
    hits: int
    stored: int
    unread: int = 0


def read_digests(files: Sequence[str], cache: DigestCache | None = None, *, workers: int | None = None,
                 progress: Progress | None = None) -> tuple[list[SweepDigest], ReadStats]:
    """The digests of every sweep of ``files``, in file order, and how the read went.

    Raises :class:`~mfu_sweep.records.results.ResultError` for the first file (in ``files``' order) that cannot be
    read or fails validation; with no file at all, "no result files given" as ``load_sweeps`` says.
    """
    files = [str(f) for f in files]
    if not files:
        raise ResultError("no result files given")
    known = [None] * len(files) if cache is None else lookup(cache.index, files)
    chunks = [(files[a:a + CHUNK], known[a:a + CHUNK], cache) for a in range(0, len(files), CHUNK)]
    workers = workers_for(len(files)) if workers is None else workers
    out: list[SweepDigest] = []
    seen: dict[str, Seen] = {}
    hits = stored = unread = done = 0
    with closing(_outcomes(chunks, workers)) as parts:  # an error closes it: the pool stops
        for part in parts:  # decoded here as they come, while the workers read on
            for got in part:
                path = files[done]
                done += 1
                if got.error is not None:
                    raise ResultError(got.error)
                out += got.digests if got.digests is not None else decode(got.data or b"", path)
                hits, stored, unread = hits + got.hit, stored + got.stored, unread + got.unread
                if got.seen is not None:
                    seen[path] = got.seen
            if progress is not None:
                progress(done, len(files))
    if not out:  # merged files without sweeps
        raise ResultError("no result files given")
    if cache is not None:
        record(cache.index, seen)  # the files read: next time their stat finds them
        if stored:
            cache.trim()  # new entries may have taken it past its bound: the oldest go
    return out, ReadStats(len(files), hits, stored, unread)


def _outcomes(chunks: Sequence[Job], workers: int) -> Iterator[list[Outcome]]:
    """Each chunk's outcomes in order: read here with one worker, else by a pool (forked where possible)."""
    if workers <= 1:
        for job in chunks:
            yield _digest_chunk(job)
        return
    fork = "fork" in multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if fork else None)
    with context.Pool(workers, initializer=_quiet_worker) as pool:  # left early (an error): the pool is ended
        yield from pool.imap(_digest_chunk, chunks)
