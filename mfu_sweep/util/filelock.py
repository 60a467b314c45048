"""One writer per result file: an advisory lock held for a whole run.

``with output_lock("sweeps/a.json"):`` takes an exclusive ``fcntl.flock`` on
``sweeps/.a.json.lock`` and writes the holder (pid, host, start time, command)
into it. A second writer fails at once with :class:`LockError`, whose one-line
message names the holder. The kernel drops the lock when its process dies, so a
lock file left by a killed process is *stale*: the next writer takes it over and
:attr:`OutputLock.note` says whose it was (``stale lock of pid 123 on host h,
started ...: that process is gone; taken over``). The lock file is removed on
release.

A running sweep's journal (``.a.json.journal``, :mod:`mfu_sweep.records.journal`) is
covered by the same lock: only the holder appends to it or folds it; readers
take no lock and fold what they find.

The lock is advisory: it stops mfu-sweep writers (sweep, ``--resume``,
``merge -o``, ``import -o``, ``ceilings --into``), not other programs. On a
network file system ``flock`` works across hosts only where the file system
supports it (NFSv4, Lustre with ``flock`` mounts); on others two hosts may both
get the lock.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


class LockError(ValueError):
    """Another writer holds the lock; the message names it.

    A ValueError, like the other errors a user's command line can cause, so the CLI's
    one-line error handling reports it without a traceback.
    """


@dataclass(frozen=True)
class Holder:
    """Who holds (or held) a lock."""

    pid: int
    host: str
    started_at: str
    argv: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "host": self.host, "started_at": self.started_at, "argv": list(self.argv)}

    @classmethod
    def from_text(cls, text: str) -> Holder | None:
        try:
            data = json.loads(text)
            return cls(pid=int(data["pid"]), host=str(data["host"]), started_at=str(data["started_at"]),
                       argv=tuple(str(a) for a in data.get("argv") or ()))
        except (ValueError, KeyError, TypeError):
            return None

    def __str__(self) -> str:
        return f"pid {self.pid} on host {self.host}, started {self.started_at}"


def lock_path(target: str | Path) -> Path:
    """The lock file of ``target``: ``.NAME.lock`` beside it."""
    target = Path(target)
    return target.with_name(f".{target.name}.lock")


def this_holder() -> Holder:
    now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    return Holder(pid=os.getpid(), host=socket.gethostname(), started_at=now, argv=tuple(sys.argv))


def pid_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class OutputLock:
    """An exclusive advisory lock on one output file (a context manager; see the module docstring)."""

    def __init__(self, target: str | Path, holder: Holder | None = None) -> None:
        self.target = Path(target)
        self.path = lock_path(self.target)
        self.holder = holder or this_holder()
        self.note: str | None = None
        self._fd: int | None = None

    def acquire(self) -> OutputLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:  # never through a symlink planted at the lock's path: the holder would overwrite its target
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                self.path.unlink()  # replaced, as every write replaces a symlink
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                other = Holder.from_text(_read(fd))
                os.close(fd)
                who = str(other) if other else "another process (no holder recorded yet)"
                raise LockError(f"{self.target}: another writer holds its lock ({who}); wait for it to finish "
                                f"or write elsewhere (lock file {self.path})") from None
            if _same_file(fd, self.path):  # not a file a releasing holder just unlinked
                break
            os.close(fd)
        self.note = _stale_note(Holder.from_text(_read(fd)))
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(self.holder.to_json()).encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.close(self._fd)  # closing drops the flock
        self._fd = None

    def __enter__(self) -> OutputLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def output_lock(target: str | Path) -> OutputLock:
    """``with output_lock(path) as lock:`` — hold the one-writer lock of ``path``; ``lock.note`` on a takeover."""
    return OutputLock(target)


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode(errors="replace")
    except OSError:
        return ""


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _stale_note(old: Holder | None) -> str | None:
    """What to say about a lock file whose holder did not release it (the flock was free)."""
    if old is None:
        return None
    if old.host == socket.gethostname() and not pid_alive(old.pid):
        return f"stale lock of {old}: that process is gone; taken over"
    return f"lock file left by {old} was not held; taken over"
