"""A report folder's manifest: the files the tool wrote there, so that ``--force`` removes only those.

A report's folder is often the user's own (``paper/``, with ``paper/figures/fig1.pdf`` beside the
report's figures). :func:`mfu_sweep.util.outputs.staged` writes :data:`MANIFEST` (one relative path a line,
``/``-separated, after a ``#`` comment) listing every file of the report it just put in place; the next
run with ``--force`` replaces the files it writes again and removes only the listed files it no longer
writes. Every other file stays, and :func:`foreign_files` names those inside the report's folders, for
the refusal without ``--force`` and the note after a run. An entry that leaves the report's products
(``..``, an absolute path, another folder) is never acted on: the manifest is a file in the user's
folder, not an instruction to delete anything anywhere.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

from mfu_sweep.util.inputs import InputError, decode, read_regular

MANIFEST = ".mfu-sweep-manifest"
HEADER = "# written by mfu-sweep: the files of this report; report --force removes only these"


def files_in(root: Path, products: Sequence[str]) -> list[str]:
    """The files of ``products`` under ``root``: ``name`` for a file, ``name/.../file`` inside a folder."""
    out = []
    for name in products:
        path = root / name
        if path.is_dir() and not path.is_symlink():
            out += sorted(p.relative_to(root).as_posix() for p in path.rglob("*") if not p.is_dir())
        elif path.exists() or path.is_symlink():
            out.append(name)
    return out


def manifest_text(files: Sequence[str]) -> str:
    """The manifest listing ``files``."""
    return HEADER + "\n" + "".join(f"{rel}\n" for rel in files)


def read_manifest(directory: str | Path) -> set[str]:
    """The files an earlier run listed in ``directory``'s :data:`MANIFEST`; empty when there is none or it
    cannot be read (then no file there counts as the tool's own)."""
    try:
        text = decode(read_regular(Path(directory) / MANIFEST))
    except (OSError, InputError, UnicodeDecodeError):
        return set()
    return {line for line in text.splitlines() if line and not line.startswith("#")}


def inside(rel: str, products: Sequence[str]) -> bool:
    """Whether a manifest entry names a file of one of ``products`` (never ``..``, never absolute)."""
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and ".." not in parts and "" not in parts and parts[0] in products


def remove_listed(directory: Path, rel: str, products: Sequence[str]) -> None:
    """Remove the file an earlier run wrote at ``rel`` (a manifest entry), if it still is a file or a symlink."""
    if not inside(rel, products):
        return
    path = directory / rel
    try:
        info = os.lstat(path)
    except OSError:
        return
    if stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode):
        path.unlink(missing_ok=True)


def foreign_files(directory: str | Path, products: Sequence[str]) -> list[str]:
    """Files inside ``directory``'s product folders (``figures/``) that its manifest does not list: not the
    tool's, so ``--force`` leaves them."""
    directory = Path(directory)
    listed = read_manifest(directory)
    folders = [name for name in products if (directory / name).is_dir() and not (directory / name).is_symlink()]
    return [rel for rel in files_in(directory, folders) if rel not in listed]


def left_note(directory: str | Path, products: Sequence[str]) -> str | None:
    """One sentence naming the files ``--force`` leaves in ``directory``'s product folders; None when none."""
    left = foreign_files(directory, products)
    if not left:
        return None
    more = f" and {len(left) - 3} more" if len(left) > 3 else ""
    them = "it" if len(left) == 1 else "them"
    return (f"{str(directory)!r} holds {', '.join(left[:3])}{more}, which no report of this tool wrote (its "
            f"{MANIFEST} does not list {them}): left as {'it is' if len(left) == 1 else 'they are'}")
