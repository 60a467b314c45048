"""Journal, then fold: a sweep's checkpoint whose cost does not grow with its file.

While a sweep runs, its result file ``NAME.json`` is written whole once, when the
run starts (the header and every record of earlier runs), and each record
measured since is appended as one JSON line to the journal ``.NAME.json.journal``
beside it, then synced to disk: a checkpoint costs one line, whether the file
holds ten records or ten thousand. When the run ends (finished, interrupted or
failed) it folds the journal into ``NAME.json`` and removes it. A SIGKILL leaves
both; every reader folds them (``results.read_json`` calls :func:`fold`), so
``--resume``, ``merge``, ``validate`` and every other command see every finished
record, and the next run folds them for good.

The journal's first line names the run it extends and how many records the file
held when it began; every other line is one record::

    {"journal":"mfu-sweep","format":1,"run_id":"9f...","base_records":120}
    {"record":{"shape":{...},"dtype":"fp32",...}}

A journal is folded only into the file it extends (the same ``run.id`` and
``base_records`` records). One left beside a file rewritten since (a fold killed
after writing the file, before removing the journal) is already in that file and
is ignored. A last line cut short (a kill in the middle of a write) is dropped
with a note on stderr: it is the shape that was in flight, measured again on
``--resume``. A broken line before the last is an error naming the journal and
the line.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mfu_sweep.jsonio import dumps, loads

MAGIC = "mfu-sweep"
FORMAT = 1


class JournalError(ValueError):
    """A journal beside a result file is unreadable; the message names it and the line."""


def journal_path(target: str | Path) -> Path:
    """The journal of ``target``: ``.NAME.journal`` beside it (hidden, like its lock file)."""
    target = Path(target)
    return target.with_name(f".{target.name}.journal")


@dataclass(frozen=True)
class JournalContents:
    """What a journal holds: its header, its records (as JSON objects) and whether its last line was cut short."""

    header: Mapping[str, Any]
    records: list[Any]
    torn: bool


def _header(path: Path, item: Any) -> Mapping[str, Any]:
    if not isinstance(item, dict) or item.get("journal") != MAGIC:
        raise JournalError(f"{str(path)!r}: line 1 is not an mfu-sweep journal header; remove the file if it is "
                           "not a sweep's journal")
    if item.get("format") != FORMAT:
        raise JournalError(f"{str(path)!r}: journal format={item.get('format')!r} is not supported (this tool "
                           f"reads {FORMAT})")
    return item


def parse_journal(path: Path, raw: bytes) -> JournalContents:
    """The header and records of the journal text ``raw`` (read from ``path``, named in errors)."""
    *lines, tail = raw.split(b"\n")  # tail is b"" when the last line is whole
    items = []
    for number, line in enumerate(lines, 1):
        try:
            items.append(loads(line))
        except ValueError:
            raise JournalError(f"{str(path)!r}: line {number} is not JSON (only the last line of a journal "
                               "may be cut short)") from None
    torn = False
    if tail:
        try:
            items.append(loads(tail))  # whole, only its newline missing
        except ValueError:
            torn = True
    if not items:
        return JournalContents({}, [], torn)
    header, records = _header(path, items[0]), []
    for number, item in enumerate(items[1:], 2):
        if not isinstance(item, dict) or not isinstance(item.get("record"), dict):
            raise JournalError(f"{str(path)!r}: line {number} is not a record line ({{\"record\": {{...}}}})")
        records.append(item["record"])
    return JournalContents(header, records, torn)


def read_journal(target: str | Path) -> JournalContents | None:
    """The journal of ``target``, or None when it has none."""
    path = journal_path(target)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalError(f"{str(path)!r}: cannot read ({exc.strerror or exc})") from None
    return parse_journal(path, raw)


def extends(header: Mapping[str, Any], data: Mapping[str, Any]) -> bool:
    """Whether a journal with ``header`` continues the sweep document ``data`` (same run, same record count)."""
    run = data.get("run")
    return (bool(header) and isinstance(run, dict) and header.get("run_id") == run.get("id")
            and header.get("base_records") == len(data["records"]))


def fold(target: str | Path, data: Any) -> Any:
    """``data`` (the parsed document of ``target``) with the records of its journal appended, when it has one
    that extends it; ``data`` itself otherwise (no journal, a stale one, or not a sweep document)."""
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        return data
    contents = read_journal(target)
    if contents is None or not extends(contents.header, data):
        return data
    if contents.torn:
        sys.stderr.write(f"note: {journal_path(target)}: its last line is cut short (the sweep was killed while "
                         "writing it, or is writing it now); left out: that shape is measured again on --resume\n")
    if not contents.records:
        return data
    return {**data, "records": [*data["records"], *contents.records]}


def discard(target: str | Path) -> None:
    """Remove the journal of ``target`` (after ``target`` was written whole); nothing when it has none."""
    try:
        os.unlink(journal_path(target))
    except FileNotFoundError:
        pass


class Journal:
    """The writer: :meth:`open` writes the header, :meth:`append` one synced line per record.

    A line is written at once, so a killed sweep loses none (the kernel keeps what was written); its sync
    to disk, which guards against a power cut and costs milliseconds, runs in the background while the
    next shape is measured. The next :meth:`append` and :meth:`close` wait for it: one line at most is
    written and not yet synced, and a failed sync is raised there, naming the journal.
    """

    def __init__(self, target: str | Path) -> None:
        self.path = journal_path(target)
        self._fd: int | None = None
        self._size = 0
        self._sync: threading.Thread | None = None
        self._sync_error: OSError | None = None

    def open(self, run_id: str, base_records: int) -> Journal:
        """Start an empty journal extending a file of ``base_records`` records of run ``run_id``.

        The header is written to a temporary file renamed into place, so a journal
        never lacks its header; an older journal of the same file is replaced.
        """
        head = dumps({"journal": MAGIC, "format": FORMAT, "run_id": run_id, "base_records": base_records}) + b"\n"
        fd, tmp = tempfile.mkstemp(prefix=f"{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            _write_all(fd, head)
            os.fsync(fd)
            os.close(fd)
            fd = -1
            os.replace(tmp, self.path)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._size = len(head)
        return self

    def append(self, record: Mapping[str, Any]) -> int:
        """Append one record and start its sync to disk; returns the bytes written.

        A failed write (a full disk) is cut back off, so the journal never holds
        half a line before a whole one; the OSError names the journal.
        """
        if self._fd is None:
            raise RuntimeError("journal not open")
        self._wait()
        line = dumps({"record": record}) + b"\n"
        try:
            _write_all(self._fd, line)
        except OSError as exc:
            try:
                os.ftruncate(self._fd, self._size)
            except OSError:
                pass  # a reader drops a cut-short last line anyway
            raise self._named(exc) from exc
        self._size += len(line)
        self._sync = threading.Thread(target=self._datasync, args=(self._fd,), name="journal-sync", daemon=True)
        self._sync.start()
        return len(line)

    def _datasync(self, fd: int) -> None:
        try:
            os.fdatasync(fd)  # the data and the file's new size: what a reader after a power cut needs
        except OSError as exc:
            self._sync_error = exc

    def _wait(self) -> None:
        """The last line's sync has finished; raise its error, if any."""
        if self._sync is not None:
            self._sync.join()
            self._sync = None
        if self._sync_error is not None:
            exc, self._sync_error = self._sync_error, None
            raise self._named(exc) from exc

    def _named(self, exc: OSError) -> OSError:
        return OSError(exc.errno, exc.strerror, str(self.path))

    def close(self, check: bool = True) -> None:
        """Wait for the last sync and close the file. A failed sync is raised only with ``check``: after a fold
        the records are in the result file, written whole and synced, and the journal's own sync no longer
        matters; after an error the first error is the one to report."""
        if self._fd is None:
            return
        try:
            if not check and self._sync is not None:
                self._sync.join()
                self._sync_error = None
            self._wait()
        finally:
            os.close(self._fd)
            self._fd = None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
