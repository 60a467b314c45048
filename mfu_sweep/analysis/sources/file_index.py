"""The cache's stat index: which bytes a result file held when it was last read, so that an unchanged file is
not read again.

The digest cache (:mod:`mfu_sweep.analysis.sources.cache`) finds a digest by the SHA-256 of a file's bytes, so
finding it means reading and hashing the file. As git's index does, this index remembers, per absolute path,
the file's ``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)`` when it was read, the SHA-256 of the bytes
read and the moment (wall clock) just before the file was stat'ed. A later run that finds all five unchanged
takes the hash from here and the file is not opened; anything else (a file rewritten, touched, replaced,
moved over, on another device) is read and hashed as before. The digests stay keyed by content: this index
only maps a stat to a hash, and a hash whose digest is gone is a miss like any other.

Why a stat is enough. A write to a file, a ``chmod``, a ``touch -d`` or a rename over it all set its ctime to
the moment they happen, and no user call can set ctime back; a file replaced by another has another inode.
The one gap is the file system's clock grain: a write in the same tick as the read that recorded the entry
leaves mtime and ctime as they were (git's "racily clean" files). So an entry is written only for a file
whose mtime and ctime are older than its recording moment less :data:`RACY_NS` (2 s, more than any file
system's grain and a little clock skew), and trusted only on the same condition; a file changed that
recently is read and hashed, on every run until it has aged.

Where and how: one file, ``<cache root>/index`` (a header line with the format and a hash of the body, then
JSON), written to a temporary file and renamed over the old one after a run that read files, under an
advisory lock (``.index.lock``) so that two runs at once merge their entries instead of dropping one's. A
run that cannot get the lock within :data:`LOCK_WAIT_S`, or cannot write, writes nothing: its files are read
again next time, never wrongly skipped. An index that does not decode (cut short, another format) is empty.
Bounded to :data:`MAX_ENTRIES` paths, the most recently recorded kept. Only on POSIX systems, where ctime
is the change time (on Windows it is the creation time, which a write does not change).

Ground of ``analysis/``: imports the top-level modules and ``sources/`` only.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from time import time_ns
from typing import Any

from mfu_sweep.analysis.sources.cache import write_whole
from mfu_sweep.util import jsonio

INDEX_FORMAT = 1
MAGIC = b"mfu-sweep index %d " % INDEX_FORMAT
MAX_ENTRIES = 1 << 17  # four pods of 32,768 files: about 20 MB
RACY_NS = 2_000_000_000
LOCK_WAIT_S = 10.0
USABLE = os.name == "posix"

Stat = tuple[int, int, int, int, int]  # st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns


@dataclass(frozen=True)
class Seen:
    """A file as it was read: its stat, the SHA-256 (hex) of its bytes, and the wall clock (ns) just before
    the stat was taken."""

    stat: Stat
    key: str
    recorded_ns: int

    def trusted(self, now: Stat | None) -> bool:
        """Whether a file that stats as ``now`` still holds the bytes of :attr:`key`."""
        return now == self.stat and clean(self.stat, self.recorded_ns)

    def to_json(self) -> list[Any]:
        return [*self.stat, self.key, self.recorded_ns]

    @classmethod
    def from_json(cls, row: Any) -> Seen | None:
        """The entry, or None for a row that is not one."""
        if not (isinstance(row, list) and len(row) == 7 and all(type(v) is int for v in row[:5] + row[6:])
                and isinstance(row[5], str) and len(row[5]) == 64):
            return None
        return cls(tuple(row[:5]), row[5], row[6])  # type: ignore[arg-type]


def clean(stat: Stat, recorded_ns: int) -> bool:
    """Whether the file was last changed at least :data:`RACY_NS` before ``recorded_ns`` (not racily clean)."""
    return max(stat[3], stat[4]) < recorded_ns - RACY_NS


def stat_now(path: str) -> tuple[Stat, int] | None:
    """(``path``'s stat, the wall clock just before it was taken), or None where it cannot be stat'ed."""
    now = time_ns()
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns), now


def lookup(path: Path, files: Sequence[str]) -> list[Seen | None]:
    """The entry of each of ``files`` (by absolute path) in the index at ``path``; all None without one."""
    if not USABLE:
        return [None] * len(files)
    rows = _load(path)
    if not rows:
        return [None] * len(files)
    return [Seen.from_json(rows.get(os.path.abspath(f))) for f in files]


def record(path: Path, seen: Mapping[str, Seen]) -> bool:
    """Merge ``seen`` (by file path) into the index at ``path``, keeping the :data:`MAX_ENTRIES` most recently
    recorded; False where it was not written (no lock in time, a cache that cannot be written)."""
    if not USABLE or not seen:
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError:
        return False
    try:
        if not _lock(fd):
            return False
        rows = _load(path)
        rows.update((os.path.abspath(p), s.to_json()) for p, s in seen.items())
        if len(rows) > MAX_ENTRIES:
            rows = dict(sorted(rows.items(), key=_recorded)[-MAX_ENTRIES:])
        body = jsonio.dumps(rows)
        return write_whole(path, MAGIC + hashlib.sha256(body).hexdigest()[:16].encode() + b"\n" + body)
    finally:
        os.close(fd)  # closing drops the lock


def _recorded(item: tuple[str, Any]) -> int:
    row = item[1]
    return row[6] if isinstance(row, list) and len(row) == 7 and type(row[6]) is int else -1


def _lock(fd: int) -> bool:
    import fcntl

    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        except OSError:
            return False


def _load(path: Path) -> dict[str, Any]:
    """The index's rows by absolute path; empty when there is none or it does not decode."""
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    head = len(MAGIC) + 17
    if not data.startswith(MAGIC) or data[head - 1:head] != b"\n" \
            or hashlib.sha256(data[head:]).hexdigest()[:16].encode() != data[len(MAGIC):head - 1]:
        return {}
    try:
        rows = jsonio.loads(data[head:])
    except ValueError:
        return {}
    return rows if isinstance(rows, dict) else {}
