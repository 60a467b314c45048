"""Where a command writes: one up-front check for every writer, one way to say why a write failed, and
writes that replace a file (or a whole report) instead of writing through a symlink or leaving half of one.

Every command that writes (``sweep``, ``merge``, ``export``, ``import``, ``ceilings``,
``plot``, ``report``, ``refine``, ``repair``) calls :func:`check_output_file` or :func:`check_output_dir`
before it measures, fits or draws anything. The check creates the parent
directory, writes and removes a small probe file beside the target (so a
read-only mount, a full disk, ``/proc`` or ``/sys`` fail here, not after the
work) and applies the one overwrite rule: an existing output is replaced only
with ``--force``, and only when it is a regular file or a symlink (which is replaced, never followed).
A device node, a FIFO or a socket, or a symlink to one, is refused with or without ``--force``
(:func:`check_replaceable`, checked again by every replacing write), and so is a name longer than the
file system takes (:func:`check_name`). ``-`` is standard output where a command can write its one
file there (``export``, ``merge``, ``refine``, ``ceilings``), and refused in one line where it cannot (a
sweep's checkpoint, a report's folder). Failures are :class:`OutputError` (a ``ValueError``: the
CLI prints it as one line) whose message names the path, the reason and the
fix. :func:`os_error_message` words an ``OSError`` met later (a disk that
fills during a sweep) the same way. :func:`replacing` writes one file through a temporary file and a
rename (a symlink in its place is replaced, never followed); :func:`staged` does the same for all the
files of a report at once, and keeps a manifest of what it wrote (:data:`MANIFEST`): a later ``--force``
removes only files listed there and names every other file it leaves. File names made from labels are
:func:`mfu_sweep.util.names.safe_name`'s.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from mfu_sweep.util.inputs import STDIN, special_kind
from mfu_sweep.util.manifest import MANIFEST, files_in, left_note, manifest_text, read_manifest, remove_listed

PROBE_BYTES = 4096  # a write this small still fails on a full file system; an empty file may not
# Suffixes of files the tool writes or reads: an output directory named with one (plot -o fig.png) is a slip.
FILE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg", ".html", ".htm", ".md", ".json", ".csv", ".tex", ".txt",
                 ".xlsx")


class OutputError(ValueError):
    """An output path cannot be written (or exists without ``--force``); the message says how to fix it."""


STDOUT = STDIN  # "-": an output of "-" is standard output
NAME_MAX = 255  # bytes of one file name where the file system does not say (ext4, xfs, btrfs, tmpfs: 255)
PATH_MAX = 4096  # bytes of a whole path (Linux)
# Bytes a file the tool keeps beside an output adds to its name: .NAME.journal (a sweep's), .NAME.lock.
COMPANION_BYTES = len("..journal")


def is_stdout(path: str | Path | None) -> bool:
    """Whether ``path`` is ``-``, standard output."""
    return path is not None and str(path) == STDOUT


def _shown(text: str, keep: int = 40) -> str:
    """``text`` for a message: whole when short, else its start and its length."""
    return text if len(text) <= keep + 10 else f"{text[:keep]}... ({len(text)} characters)"


def _name_max(path: Path) -> int:
    try:
        return int(os.pathconf(_existing_ancestor(path), "PC_NAME_MAX"))
    except (OSError, ValueError):
        return NAME_MAX


def check_name(path: str | Path, flag: str = "-o", companions: bool = True) -> Path:
    """Refuse a path the file system cannot take, before any work: a part of it longer than its file names
    may be (less :data:`COMPANION_BYTES` for a file with ``companions``: its journal and lock file beside it),
    or a whole path longer than :data:`PATH_MAX`.

    Raises
    ------
    OutputError
        Naming the part, its length in bytes and the limit.
    """
    target = Path(path)
    whole = len(os.fsencode(os.path.abspath(target)))
    if whole >= PATH_MAX:
        raise OutputError(f"cannot write {_shown(str(target))!r}: the path is {whole} bytes long, beyond the "
                          f"{PATH_MAX - 1} a path may have; pick a shorter one with {flag}")
    limit = _name_max(target)
    parts = target.parts
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        room = limit - (COMPANION_BYTES if last and companions else 0)
        size = len(os.fsencode(part))
        if size > room:
            why = (f" less {COMPANION_BYTES} for the files kept beside it (.NAME.journal, .NAME.lock)"
                   if room < limit else "")
            raise OutputError(f"cannot write {_shown(str(target))!r}: the name {_shown(part)!r} is {size} bytes "
                              f"long, beyond the {room} this file system takes ({limit}{why}); pick a shorter "
                              f"name with {flag}")
    return target


def check_replaceable(path: str | Path, flag: str = "-o", stdout_ok: bool = False) -> None:
    """Refuse an output path that holds a device node, a FIFO or a socket, or a symlink to one.

    The tool replaces only regular files and symlinks (a symlink is replaced as a link, never written
    through); writing over ``/dev/null``, a named pipe or ``/dev/stdout`` would replace the node with a
    regular file (as root) or hang. Nothing to refuse when ``path`` does not exist, is a directory or a
    dangling symlink.

    Raises
    ------
    OutputError
        One line naming the path and what it is, with or without ``--force``.
    """
    try:
        info = os.lstat(path)
    except OSError:
        return
    fix = f"give a regular file's name with {flag}" + (f" ({flag} - writes to standard output)" if stdout_ok else "")
    via = _descriptor_link(path)
    if via:
        raise OutputError(f"{str(path)!r} leads to {via!r}, an open file descriptor of a process (standard output, "
                          f"a pipe), not a file; the tool does not replace it (with --force or without): {fix}")
    kind = special_kind(info.st_mode)
    if kind:
        raise OutputError(f"{str(path)!r} is {kind}, not a regular file; the tool replaces only regular files "
                          f"(with --force or without): {fix}")
    if os.path.islink(path):
        try:
            kind = special_kind(os.stat(path).st_mode)
        except OSError:  # dangling, or a loop: the link itself is replaced
            return
        if kind:
            raise OutputError(f"{str(path)!r} is a symlink to {kind} ({os.readlink(path)!r}); the tool replaces "
                              f"only regular files and symlinks to them (with --force or without): {fix}")


# /dev/stdout -> /proc/self/fd/1: a process's descriptor, not a file
DESCRIPTOR_PATH = re.compile(r"^(/proc/[^/]+/(task/[^/]+/)?fd/|/dev/fd/)")


def _descriptor_link(path: str | Path) -> str | None:
    """The first of ``path`` and its symlink targets that names a process's file descriptor
    (``/proc/self/fd/1``, ``/dev/fd/1``); None when none does."""
    here = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on a chain of links
        if DESCRIPTOR_PATH.match(here):
            return here
        try:
            here = os.path.join(os.path.dirname(here), os.readlink(here))
        except OSError:  # not a link (or gone): the chain ends here
            return None
    return None


def _no_stdout(path: str | Path, flag: str, why: str) -> OutputError:
    return OutputError(f"{flag} - means standard output, but {why}; name a file (./- for a file called '-')")


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
                      exists_hint: str = "use --force to overwrite it", stdout: str | None = None) -> Path:
    """Check that ``path`` can be written, before any work; return it as a Path.

    Parameters
    ----------
    path:
        The file to write; ``-`` is standard output where ``stdout`` is None.
    force:
        Replace an existing file (``--force``); without it an existing file is an error.
    flag:
        The option that named the path, for the fix in messages.
    exists_hint:
        What the message about an existing file suggests.
    stdout:
        Why this command cannot write to standard output (``-`` is then refused with it); None where it can.

    Raises
    ------
    OutputError
        When ``path`` is a directory, a device node, a FIFO or a socket (or a symlink to one; ``force`` or
        not), a name too long (:func:`check_name`), exists without ``force``, or its directory cannot be
        created or written (permissions, read-only or full file system, ``/proc``, ``/sys``).
    """
    if is_stdout(path):
        if stdout is not None:
            raise _no_stdout(path, flag, stdout)
        return Path(STDOUT)
    target = check_name(path, flag)
    if target.is_dir():
        raise OutputError(f"{str(target)!r} is a directory; give a file name ({flag} {target / 'NAME'})")
    check_replaceable(target, flag, stdout_ok=stdout is None)
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
        As :func:`check_output_file`; also when ``path`` is ``-`` (a folder of files cannot go to standard
        output), a file, or is no directory yet and ends in a file's suffix (``fig.png``, ``report.html``;
        ``fig.png/`` is taken as the directory it says); when one of ``products`` is a device node, a FIFO or
        a socket. The refusal names the files ``force`` would leave (:func:`mfu_sweep.util.manifest.left_note`).
    """
    if is_stdout(path):
        raise _no_stdout(path, flag, "this command writes a folder of files")
    out = check_name(path, flag, companions=False)
    if out.exists() and not out.is_dir():
        raise OutputError(f"{str(out)!r} exists and is not a directory; pick a directory with {flag}")
    suffix = out.suffix.lower()
    if suffix in FILE_SUFFIXES and not out.is_dir() and not str(path).endswith(("/", os.sep)):
        raise OutputError(f"{str(out)!r} ends in {out.suffix}, a file's suffix, but {flag} names the directory the "
                          f"files are written into; pick a directory ({flag} {out.with_suffix('')}), or end the "
                          f"name with / if you mean a directory called {out.name}")
    _make_dir(out, out, flag)
    _probe(out, out, flag)
    products = list(products)
    for name in products:
        check_replaceable(out / name, flag)
    existing = [name for name in products if (out / name).exists()]
    if existing and not force:
        more = f" and {len(existing) - 1} more" if len(existing) > 1 else ""
        left = left_note(out, products)
        kept = f" (--force replaces only files this tool wrote; {left})" if left else ""
        raise OutputError(f"{str(out)!r} already holds {existing[0]}{more}; pass --force to overwrite, "
                          f"or {flag} a new directory{kept}")
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
        check_replaceable(path)  # again at the moment of the rename: the path may have changed since the check
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
    a directory (``figures/``) that does not exist yet is renamed into place whole; into one that exists,
    each new file is renamed in, and the files the previous run listed in ``out``'s :data:`MANIFEST` that
    this run did not write are removed: any other file there (the user's own) stays. The manifest is then
    written anew. A symlink among the old products is replaced, never followed; a device node, a FIFO or a
    socket is never replaced. Ctrl-C is held back during the renames (it takes effect right after them).
    """
    directory = Path(directory)
    stage = Path(tempfile.mkdtemp(prefix=".mfu-sweep-stage-", dir=directory))
    try:
        yield stage
        old = read_manifest(directory)
        new = files_in(stage, products)
        for name in products:
            check_replaceable(directory / name)
            for rel in new:
                if rel.startswith(f"{name}/"):
                    check_replaceable(directory / rel)
        with _signals_held():
            for name in products:
                _swap_in(stage / name, directory / name, stage / f".old-{name}", new)
            for rel in sorted(old - set(new)):
                remove_listed(directory, rel, products)
            with replacing(directory / MANIFEST) as tmp:
                tmp.write_text(manifest_text(new), encoding="utf-8")
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _swap_in(new: Path, old: Path, aside: Path, files: Sequence[str]) -> None:
    if not new.exists():
        return
    if new.is_dir() and old.is_dir() and not old.is_symlink():  # file by file: the folder may hold others' files
        base = new.parent
        for rel in files:
            src = base / rel
            if src.is_relative_to(new):
                dst = old / src.relative_to(new)
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dst)
    elif new.is_dir() or (old.is_dir() and not old.is_symlink()):
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
