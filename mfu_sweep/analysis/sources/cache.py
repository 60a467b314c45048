"""The cache of file digests: a nightly gate over an unchanged fleet rereads no sweep.

Where: ``$XDG_CACHE_HOME/mfu-sweep/digests/`` (``~/.cache/mfu-sweep/digests/`` when ``XDG_CACHE_HOME`` is
unset), one small JSON file per digest (:mod:`mfu_sweep.analysis.sources.digest`), under a folder named
for the cache's *namespace* and a two-character fan-out.

Never stale. An entry is found by the SHA-256 of the result file's bytes (a file changed in any byte, under
any name or date, is another entry), inside a namespace made of the tool's
version, the digest format and a hash of the source of the modules that decide what a digest holds and
which files pass (reading, validation, the schema, series, medians, digests): a checkout whose code
differs reads and writes another namespace. A file read together with a journal (a running sweep) is
never cached. The hash is that of the bytes read now, or the one the stat index
(:mod:`mfu_sweep.analysis.sources.file_index`) recorded for a file whose device, inode, size, mtime and ctime
are all as they were when it was read (and which had not changed in the 2 s before): such a file is not
opened. An entry that does not decode (cut short by a crash: entries are replaced at once but not
synced) is a miss and is written again.

Bounded. After a run that wrote entries, the cache is trimmed to :data:`MAX_BYTES` (``MFU_SWEEP_CACHE_MB``
overrides), oldest first by modification time; a hit refreshes its entry's time, so what the last runs
read stays. A cache that cannot be written (read-only home, full disk) is read where it can be and
otherwise skipped: results never depend on it. ``compare --no-cache`` neither reads nor writes it, nor the stat index.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import mfu_sweep

CACHE_ENV = "XDG_CACHE_HOME"
SIZE_ENV = "MFU_SWEEP_CACHE_MB"
MAX_BYTES = 1 << 30  # 1 GiB: the digests of a 32,768-file fleet take about a tenth of it
# What a digest holds and which files pass: a change to any of these changes the namespace.
KEYED_MODULES = ("records/results.py", "records/checks.py", "util/inputs.py", "records/journal.py", "util/jsonio.py",
                 "records/contention.py", "gemm/shapes.py", "analysis/ground/series.py", "analysis/sources/medians.py",
                 "analysis/sources/digest.py")


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/mfu-sweep`` (``~/.cache/mfu-sweep`` without it)."""
    base = os.environ.get(CACHE_ENV) or str(Path.home() / ".cache")
    return Path(base) / "mfu-sweep"


def max_bytes() -> int:
    """The size the cache is trimmed to: :data:`MAX_BYTES`, or ``MFU_SWEEP_CACHE_MB`` mebibytes when set."""
    raw = os.environ.get(SIZE_ENV, "").strip()
    if not raw:
        return MAX_BYTES
    try:
        mb = float(raw)
    except ValueError:
        mb = float("nan")
    if not 0 <= mb < float("inf"):
        raise ValueError(f"{SIZE_ENV}={raw!r} must be a number of MiB, 0 or more (0 keeps no digest)")
    return int(mb * 2**20)


def namespace() -> str:
    """The tool's version, the digest format and a hash of :data:`KEYED_MODULES`' source."""
    from mfu_sweep.analysis.sources.digest import DIGEST_FORMAT

    package = Path(mfu_sweep.__file__).parent
    h = hashlib.sha256()
    for name in KEYED_MODULES + tuple(sorted(str(p.relative_to(package)) for p in (package / "schema").glob("*"))):
        try:
            h.update(name.encode() + b"\0" + (package / name).read_bytes())
        except OSError:
            h.update(name.encode() + b"\0missing")
    return f"{mfu_sweep.__version__}-d{DIGEST_FORMAT}-{h.hexdigest()[:16]}"


def content_key(data: bytes) -> str:
    """The entry's name for a file of these bytes."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class DigestCache:
    """The digests under ``folder`` (``root/digests/<namespace>``)."""

    folder: Path

    @classmethod
    def default(cls) -> DigestCache:
        """The user's cache, its size bound checked first (a bad ``MFU_SWEEP_CACHE_MB`` is one line, before any
        file is read)."""
        max_bytes()
        return cls(cache_root() / "digests" / namespace())

    def path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> bytes | None:
        """The entry's bytes (its time refreshed), or None."""
        path = os.path.join(self.folder, key[:2], f"{key}.json")  # self.path(key), without pathlib's cost
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            return None
        try:
            os.utime(path)
        except OSError:
            pass
        return data

    def put(self, key: str, data: bytes) -> bool:
        """Write an entry whole or not at all; False when it cannot be."""
        return write_whole(self.path(key), data)

    @property
    def index(self) -> Path:
        """The stat index beside the digests (:mod:`mfu_sweep.analysis.sources.file_index`): ``root/index``."""
        return self.folder.parent.parent / "index"

    def trim(self, limit: int | None = None) -> int:
        """Delete the oldest entries of the whole cache (every namespace) until it holds at most ``limit``
        bytes [:func:`max_bytes`]; returns how many were deleted."""
        limit = max_bytes() if limit is None else limit
        entries = sorted(_entries(self.folder.parent))
        total = sum(size for _, size, _ in entries)
        removed = 0
        for _, size, path in entries:
            if total <= limit:
                break
            if _unlink(path):
                total -= size
                removed += 1
        return removed


def write_whole(path: Path, data: bytes) -> bool:
    """Write ``data`` whole or not at all (a temporary file renamed over ``path``); False when it cannot be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            _unlink(tmp)
            raise
    except OSError:
        return False
    return True


def _entries(root: Path) -> Iterable[tuple[float, int, str]]:
    """(modification time, size, path) of every entry under ``root``."""
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            try:
                info = os.stat(path)
            except OSError:
                continue
            yield info.st_mtime, info.st_size, path


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
    except OSError:
        return False
    return True
