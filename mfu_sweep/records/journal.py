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
is ignored. Any other journal that does not extend its file (another run's, a
``base_records`` that does not match) is left out with a note naming it and how
many records it holds, never silently. A last line cut short (a kill in the middle of a write) is dropped
with a note on stderr: it is the shape that was in flight, measured again on
``--resume``. A broken line before the last is an error naming the journal, the
line and the two remedies: ``--allow-invalid`` reads the intact records without
it (a note names the lines skipped), ``mfu-sweep repair FILE`` folds them into the
file for good (:func:`repair`). A journal is read like every input
(:mod:`mfu_sweep.util.inputs`): a regular file within the size limit, never a FIFO or a device.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mfu_sweep.util.inputs import InputError, is_stdin, read_regular
from mfu_sweep.util.jsonio import dumps, loads
from mfu_sweep.util.text import counted

MAGIC = "mfu-sweep"
FORMAT = 1


class JournalError(ValueError):
    """A journal beside a result file is unreadable; the message names it and the line (``problem``: the same
    without the remedies)."""

    def __init__(self, message: str, problem: str | None = None) -> None:
        super().__init__(message)
        self.problem = problem or message


def journal_path(target: str | Path) -> Path:
    """The journal of ``target``: ``.NAME.journal`` beside it (hidden, like its lock file)."""
    target = Path(target)
    return target.with_name(f".{target.name}.journal")


def target_of(journal: Path) -> Path:
    """The result file whose journal is ``journal`` (``.NAME.journal`` -> ``NAME``)."""
    return journal.with_name(journal.name.removeprefix(".").removesuffix(".journal"))


@dataclass(frozen=True)
class JournalContents:
    """What a journal holds: its header, its records (as JSON objects), whether its last line was cut short,
    and the lines skipped as damaged (line number, why; only when read with ``skip_invalid``)."""

    header: Mapping[str, Any]
    records: list[Any]
    torn: bool
    dropped: tuple[tuple[int, str], ...] = ()


def _damaged(path: Path, number: int, what: str) -> JournalError:
    problem = f"{str(path)!r}: line {number} {what} (only the last line of a journal may be cut short)"
    return JournalError(f"{problem}; `mfu-sweep repair {target_of(path)}` folds its intact records into the file, "
                        "and --allow-invalid reads them without it", problem)


def resume_problem(target: str | Path, data: Mapping[str, Any]) -> str | None:
    """Why ``sweep --resume`` must not continue ``target`` (its document ``data``, read without the journal):
    a damaged journal (``repair`` first), or one that does not extend the file yet holds records it lacks
    (the resume would replace that journal). None when it may."""
    try:
        contents = read_journal(target)
    except JournalError as exc:
        if exc.problem == str(exc):  # not a damaged line (a FIFO, a device, past the size limit): no repair mends it
            return str(exc)
        return f"{exc.problem}; run `mfu-sweep repair {target}` first, then resume"
    if contents is None or extends(contents.header, data):
        return None
    note = foreign_note(target, contents, data)
    return f"{note}; a resume would replace that journal" if note else None


def _header(path: Path, item: Any) -> Mapping[str, Any]:
    if not isinstance(item, dict) or item.get("journal") != MAGIC:
        raise JournalError(f"{str(path)!r}: line 1 is not an mfu-sweep journal header; remove the file if it is "
                           "not a sweep's journal")
    if item.get("format") != FORMAT:
        raise JournalError(f"{str(path)!r}: journal format={item.get('format')!r} is not supported (this tool "
                           f"reads {FORMAT})")
    return item


def parse_journal(path: Path, raw: bytes, skip_invalid: bool = False) -> JournalContents:
    """The header and records of the journal text ``raw`` (read from ``path``, named in errors).

    A line before the last that is not JSON, or not a record line, is an error (:class:`JournalError`
    naming the line and the remedies); with ``skip_invalid`` it is left out and listed in ``dropped``.
    A header that cannot be read is an error either way: which run the records belong to is unknown.
    """
    *lines, tail = raw.split(b"\n")  # tail is b"" when the last line is whole
    items: list[tuple[int, Any]] = []
    dropped: list[tuple[int, str]] = []
    for number, line in enumerate(lines, 1):
        try:
            items.append((number, loads(line)))
        except ValueError:
            if not skip_invalid or number == 1:
                raise _damaged(path, number, "is not JSON") from None
            dropped.append((number, "not JSON"))
    torn = False
    if tail:
        try:
            items.append((len(lines) + 1, loads(tail)))  # whole, only its newline missing
        except ValueError:
            torn = True
    if not items:
        return JournalContents({}, [], torn)
    header, records = _header(path, items[0][1]), []
    for number, item in items[1:]:
        if not isinstance(item, dict) or not isinstance(item.get("record"), dict):
            if not skip_invalid:
                raise _damaged(path, number, 'is not a record line ({"record": {...}})')
            dropped.append((number, "not a record line"))
            continue
        records.append(item["record"])
    return JournalContents(header, records, torn, tuple(sorted(dropped)))


def read_journal(target: str | Path, skip_invalid: bool = False) -> JournalContents | None:
    """The journal of ``target``, or None when it has none (``-``, standard input, has none)."""
    if is_stdin(target):
        return None
    path = journal_path(target)
    try:
        raw = read_regular(path)  # within the input limit; a FIFO or a device is refused, never read
    except FileNotFoundError:
        return None
    except InputError as exc:
        raise JournalError(f"journal of {str(target)!r}: {exc}") from None
    return parse_journal(path, raw, skip_invalid)


def extends(header: Mapping[str, Any], data: Mapping[str, Any]) -> bool:
    """Whether a journal with ``header`` continues the sweep document ``data`` (same run, same record count)."""
    run = data.get("run")
    return (bool(header) and isinstance(run, dict) and header.get("run_id") == run.get("id")
            and header.get("base_records") == len(data["records"]))


def record_key(record: Mapping[str, Any]) -> str:
    """A record's (pass, shape, dtype, mode) as one string: what makes it one slot of a sweep."""
    return dumps([record.get("pass"), record.get("shape"), record.get("dtype"), record.get("mode")]).decode()


def missing(contents: JournalContents, data: Mapping[str, Any]) -> list[Any]:
    """The journal's records whose slot (:func:`record_key`) the document ``data`` does not hold."""
    held = {record_key(r) for r in data["records"] if isinstance(r, dict)}
    return [r for r in contents.records if record_key(r) not in held]


def same_run(header: Mapping[str, Any], data: Mapping[str, Any]) -> bool:
    run = data.get("run")
    return isinstance(run, dict) and header.get("run_id") == run.get("id")


def foreign_note(target: str | Path, contents: JournalContents, data: Mapping[str, Any]) -> str | None:
    """Why a journal that does not extend ``data`` holds records the file lacks; None when it holds none
    (a stale journal: its records are in the file already)."""
    lost = missing(contents, data)
    if not lost:
        return None
    header, run = contents.header, data.get("run") or {}
    if not same_run(header, data):
        why = f"records of run {header.get('run_id')!r}, not of this file's run {run.get('id')!r}"
    else:
        why = (f"records after base_records={header.get('base_records')!r}, but the file holds "
               f"{len(data['records'])} records")
    return (f"{journal_path(target)}: a journal whose {counted(len(lost), 'record')} the file lacks holds {why}: "
            f"left out; `mfu-sweep repair {target}` says what it can fold")


def fold(target: str | Path, data: Any, on_invalid: Callable[[str], None] | None = None) -> Any:
    """``data`` (the parsed document of ``target``) with the records of its journal appended, when it has one
    that extends it; ``data`` itself otherwise (no journal, a stale one, or not a sweep document).

    A journal that does not extend the file yet holds records the file lacks is left out with a note on
    stderr. With ``on_invalid`` (``--allow-invalid``) damaged lines are skipped, and ``on_invalid`` hears
    which; without it they are a :class:`JournalError`.
    """
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        return data
    contents = read_journal(target, skip_invalid=on_invalid is not None)
    if contents is None:
        return data
    if contents.dropped and on_invalid is not None:
        on_invalid(dropped_note(journal_path(target), contents.dropped))
    if not extends(contents.header, data):
        note = foreign_note(target, contents, data) if contents.header else None
        if note:
            sys.stderr.write(f"note: {note}\n")
        return data
    if contents.torn:
        sys.stderr.write(f"note: {journal_path(target)}: its last line is cut short (the sweep was killed while "
                         "writing it, or is writing it now); left out: that shape is measured again on --resume\n")
    if not contents.records:
        return data
    return {**data, "records": [*data["records"], *contents.records]}


def dropped_note(path: Path, dropped: Sequence[tuple[int, str]]) -> str:
    """``JOURNAL: skipped lines 3 (not JSON), 7 (not a record line)``, the lines left out as damaged."""
    lines = ", ".join(f"{n} ({why})" for n, why in dropped[:10]) + (f" and {len(dropped) - 10} more"
                                                                    if len(dropped) > 10 else "")
    return (f"{path}: skipped {'line' if len(dropped) == 1 else 'lines'} {lines}; "
            f"`mfu-sweep repair {target_of(path)}` folds the intact records into the file for good")


@dataclass(frozen=True)
class Repair:
    """What :func:`plan_repair` found: the records to fold, the lines dropped, and why nothing can be folded."""

    records: list[Any]
    dropped: tuple[tuple[int, str], ...]
    refused: str | None = None


def plan_repair(target: str | Path, data: Mapping[str, Any]) -> Repair | None:
    """What ``mfu-sweep repair`` folds into ``target`` (its document ``data``, read without its journal): every
    intact record of the journal the file lacks, and the damaged lines left out (line number, why). None
    when there is no journal. A journal of another run is refused (``refused`` says why): its records were
    measured by another sweep, maybe on another device.
    """
    contents = read_journal(target, skip_invalid=True)
    if contents is None:
        return None
    dropped = contents.dropped + (((len(contents.records) + len(contents.dropped) + 2, "cut short"),)
                                  if contents.torn else ())
    if not contents.header or extends(contents.header, data):
        return Repair(list(contents.records), dropped)
    if same_run(contents.header, data):  # a stale journal, or one whose base_records is wrong: only what is new
        return Repair(missing(contents, data), dropped)
    run = data.get("run") or {}
    return Repair([], dropped, refused=(
        f"{journal_path(target)} holds {counted(len(contents.records), 'record')} of run "
        f"{contents.header.get('run_id')!r}, not of {str(target)!r}'s run {run.get('id')!r}: another sweep's "
        "journal, never folded into this file; move it beside its own file, or delete it"))


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
        fd, tmp = tempfile.mkstemp(prefix=f"{self.path.name[:100]}.", suffix=".tmp", dir=self.path.parent)
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
