"""Where a command writes: one up-front check for every writer, one way to say why a write failed, and
writes that replace a file (or a whole report) instead of writing through a symlink or leaving half of one.

Every command that writes (``sweep``, ``merge``, ``export``, ``import``, ``ceilings``,
``plot``, ``report``) calls :func:`check_output_file` or :func:`check_output_dir`
before it measures, fits or draws anything. The check creates the parent
directory, writes and removes a small probe file beside the target (so a
read-only mount, a full disk, ``/proc`` or ``/sys`` fail here, not after the
work) and applies the one overwrite rule: an existing output is replaced only
with ``--force``. Failures are :class:`OutputError` (a ``ValueError``: the
CLI prints it as one line) whose message names the path, the reason and the
fix. :func:`os_error_message` words an ``OSError`` met later (a disk that
fills during a sweep) the same way. :func:`replacing` writes one file through a temporary file and a
rename (a symlink in its place is replaced, never followed); :func:`staged` does the same for all the
files of a report at once. File names made from labels are :func:`mfu_sweep.names.safe_name`'s.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

PROBE_BYTES = 4096  # a write this small still fails on a full file system; an empty file may not
# Suffixes of files the tool writes or reads: an output directory named with one (plot -o fig.png) is a slip.
FILE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".html", ".htm", ".md", ".json", ".csv", ".tex", ".txt",
                 ".xlsx")


class OutputError(ValueError):
    """An output path cannot be written (or exists without ``--force``); the message says how to fix it."""


def _free_text(directory: Path) -> str:
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return ""
    return f", {free / 2**20:.1f} MiB free"


def os_error_message(exc: OSError, path: str | Path, flag: str = "-o", where: Path | None = None) -> str:
    """One line for an ``OSError`` met while writing ``path``: the path, the reason, the fix.

    ``where`` is the directory the failure is about (default: ``path`` if it is
    a directory, else its parent).
    """
    path = Path(path)
    if where is None:
        where = path if path.is_dir() else (path.parent if str(path.parent) else Path("."))
    code = exc.errno
    if code in (errno.EACCES, errno.EPERM):
        reason = f"directory {str(where)!r} is not writable (permission denied)"
    elif code == errno.EROFS:
        reason = f"{str(where)!r} is on a read-only file system"
    elif code in (errno.ENOSPC, errno.EDQUOT):
        return (f"cannot write {str(path)!r}: no space left on the device holding {str(where)!r}"
                f"{_free_text(where)}; free some space there or write elsewhere ({flag} PATH on another disk)")
    elif code == errno.ENOTDIR:
        reason = f"directory {str(where)!r} cannot be created: a part of it is a file"
    else:
        reason = f"directory {str(where)!r} does not take new files ({exc.strerror or exc})"
    return f"cannot write {str(path)!r}: {reason}; write elsewhere ({flag} PATH in a directory you own)"


WORDED = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT)


def _existing_ancestor(path: Path) -> Path:
    for p in (path, *path.parents):
        if p.exists():
            return p
    return Path(".")


def _probe(directory: Path, target: Path, flag: str) -> None:
    """Write and remove a small file in ``directory``; :class:`OutputError` when that fails."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".mfu-sweep-probe-", dir=directory)
    except OSError as exc:
        raise OutputError(os_error_message(exc, target, flag)) from None
    try:
        os.write(fd, b"\0" * PROBE_BYTES)
        os.fsync(fd)
    except OSError as exc:
        raise OutputError(os_error_message(exc, target, flag)) from None
    finally:
        os.close(fd)
        os.unlink(tmp)


def _make_dir(directory: Path, target: Path, flag: str) -> None:
    if directory.exists() and not directory.is_dir():
        raise OutputError(f"cannot write {str(target)!r}: {str(directory)!r} is a file, not a directory; "
                          f"pick another path with {flag}")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno in WORDED:
            raise OutputError(os_error_message(exc, target, flag, where=_existing_ancestor(directory))) from None
        if exc.errno in (errno.ENOTDIR, errno.EEXIST):
            raise OutputError(f"cannot write {str(target)!r}: directory {str(directory)!r} cannot be created: "
                              f"a part of it is a file; pick another path with {flag}") from None
        raise OutputError(f"cannot write {str(target)!r}: directory {str(directory)!r} cannot be created "
                          f"({exc.strerror or exc}); write elsewhere ({flag} PATH in a directory you own)") from None


def check_suffix(path: str | Path, suffix: str = ".json", what: str = "JSON", flag: str = "-o") -> Path:
    """Refuse a file name whose suffix says another format than the one written (``out.csv`` for JSON).

    A name without a suffix passes: it claims no format.

    Raises
    ------
    OutputError
        When ``path`` has a suffix other than ``suffix`` (compared without case).
    """
    target = Path(path)
    if target.suffix and target.suffix.lower() != suffix:
        fixed = target.with_suffix(suffix)
        raise OutputError(f"{str(target)!r} ends in {target.suffix}, but the file written is {what}; "
                          f"name it {fixed.name} ({flag} {fixed})")
    return target


def check_output_file(path: str | Path, force: bool = False, flag: str = "-o",
                      exists_hint: str = "use --force to overwrite it") -> Path:
    """Check that ``path`` can be written, before any work; return it as a Path.

    Parameters
    ----------
    path:
        The file to write.
    force:
        Replace an existing file (``--force``); without it an existing file is an error.
    flag:
        The option that named the path, for the fix in messages.
    exists_hint:
        What the message about an existing file suggests.

    Raises
    ------
    OutputError
        When ``path`` is a directory, exists without ``force``, or its directory cannot be
        created or written (permissions, read-only or full file system, ``/proc``, ``/sys``).
    """
    target = Path(path)
    if target.is_dir():
        raise OutputError(f"{str(target)!r} is a directory; give a file name ({flag} {target / 'NAME'})")
    if target.exists() and not force:
        raise OutputError(f"{str(target)!r} exists; {exists_hint}")
    parent = target.parent if str(target.parent) else Path(".")
    _make_dir(parent, target, flag)
    _probe(parent, target, flag)
    return target


def check_output_dir(path: str | Path, force: bool = False, products: Iterable[str] = (),
                     flag: str = "-o") -> Path:
    """Check that the directory ``path`` can take the files ``products`` (names inside it); return it.

    Creates the directory, writes a probe file in it, and refuses when one of
    ``products`` exists there already, unless ``force``.

    Raises
    ------
    OutputError
        As :func:`check_output_file`; also when ``path`` is a file, or is no directory yet and ends in a file's
        suffix (``fig.png``, ``report.html``; ``fig.png/`` is taken as the directory it says).
    """
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise OutputError(f"{str(out)!r} exists and is not a directory; pick a directory with {flag}")
    suffix = out.suffix.lower()
    if suffix in FILE_SUFFIXES and not out.is_dir() and not str(path).endswith(("/", os.sep)):
        raise OutputError(f"{str(out)!r} ends in {out.suffix}, a file's suffix, but {flag} names the directory the "
                          f"files are written into; pick a directory ({flag} {out.with_suffix('')}), or end the "
                          f"name with / if you mean a directory called {out.name}")
    _make_dir(out, out, flag)
    _probe(out, out, flag)
    existing = [name for name in products if (out / name).exists()]
    if existing and not force:
        more = f" and {len(existing) - 1} more" if len(existing) > 1 else ""
        raise OutputError(f"{str(out)!r} already holds {existing[0]}{more}; pass --force to overwrite, "
                          f"or {flag} a new directory")
    return out


@contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """``with replacing(path) as tmp:`` write ``tmp``; on success it replaces ``path``, on an error it is removed.

    ``tmp`` is a new file beside ``path`` (one file system, so the final rename is atomic: readers see the old
    file or the new one). A symlink at ``path`` is replaced by the new file, never written through, so a
    link planted in an output directory cannot make a command overwrite the file it points to. The new
    file gets the permissions a plain ``open`` would give (``0o666`` less the umask).
    """
    path = Path(path)
    fd, name = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextmanager
def staged(directory: str | Path, products: Sequence[str]) -> Iterator[Path]:
    """``with staged(out, names) as stage:`` write the files and directories ``names`` into ``stage``; when the
    block ends without an error they replace ``out``'s, else ``out`` is left as it was.

    ``stage`` is a new hidden directory inside ``out`` (so inside what the user named, and on its file
    system), removed at the end in every case: an interrupted report leaves the previous report, or none,
    never half of the new one beside half of the old. A file replaces its old version in one atomic rename;
    a directory (``figures/``) moves the old one into the stage first, so it goes with the stage. A symlink
    among the old products is replaced, never followed. Ctrl-C is held back during the renames (it takes
    effect right after them).
    """
    directory = Path(directory)
    stage = Path(tempfile.mkdtemp(prefix=".mfu-sweep-stage-", dir=directory))
    try:
        yield stage
        with _signals_held():
            for name in products:
                _swap_in(stage / name, directory / name, stage / f".old-{name}")
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _swap_in(new: Path, old: Path, aside: Path) -> None:
    if not new.exists():
        return
    if new.is_dir() or (old.is_dir() and not old.is_symlink()):
        if old.exists() or old.is_symlink():
            os.rename(old, aside)
        os.rename(new, old)
    else:
        os.replace(new, old)


HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block ends (where the platform can block signals)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


# The table formats of `export` and the suffixes that name them (the first is the one a fix suggests).
TABLE_SUFFIXES = {"csv": (".csv",), "markdown": (".md", ".markdown"), "latex": (".tex",)}
NOT_A_TABLE = {".json": "JSON", ".html": "HTML", ".htm": "HTML", ".png": "PNG", ".pdf": "PDF", ".svg": "SVG",
               ".xlsx": "an Excel workbook"}


def table_format(path: str | Path | None, fmt: str | None, flag: str = "-o") -> str:
    """The format of an ``export`` table: ``fmt`` (``--format``) when given, else the one ``path``'s suffix
    names (``.csv``, ``.md``/``.markdown``, ``.tex``), else csv.

    Raises
    ------
    OutputError
        When ``fmt`` and ``path``'s suffix name different formats (``table.csv`` with latex), or the suffix
        names a file that is no table (``.json``, ``.html``, an image). Another suffix (``.txt``) claims no
        format and passes.
    """
    if path is None:
        return fmt or "csv"
    target = Path(path)
    suffix = target.suffix.lower()
    named = next((f for f, suffixes in TABLE_SUFFIXES.items() if suffix in suffixes), None)
    if suffix in NOT_A_TABLE:
        want = fmt or "csv"
        fixed = target.with_suffix(TABLE_SUFFIXES[want][0])
        raise OutputError(f"{str(target)!r} ends in {target.suffix}, but export writes a {want} table, not "
                          f"{NOT_A_TABLE[suffix]}; name it {fixed.name} ({flag} {fixed})")
    if fmt is None:
        return named or "csv"
    if named is not None and named != fmt:
        fixed = target.with_suffix(TABLE_SUFFIXES[fmt][0])
        raise OutputError(f"--format {fmt} contradicts {flag} {target} (its suffix {target.suffix} names {named}): "
                          f"name it {fixed.name} ({flag} {fixed}), or drop --format to write {named}")
    return fmt
