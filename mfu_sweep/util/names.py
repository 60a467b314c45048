"""Safe file names from labels: the one rule of every command that names a file after a label.

A label (``device.label``, a series in a figure's name) is free text and stays as it is in the JSON. The file
name made from it keeps ASCII letters, digits and ``_ . + -``; every other run of characters (``/``, ``..``,
spaces, a newline, non-ASCII letters) becomes one ``-``; leading and trailing ``-`` and ``.`` go (no hidden
file, no ``..``, nothing a shell reads as an option); a label with nothing left is the caller's default and
a hash of the label (``..`` and ``日本`` stay apart). A name longer
than :data:`MAX_NAME` characters is cut and ends in a hash of the whole label, so two long labels that share
their first hundred characters keep different names, and a file system's 255-byte limit is never reached
(a figure's stem adds its kind, dtype and mode around the label; an atomic write adds a temporary suffix).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

MAX_NAME = 96  # characters (ASCII, so bytes): leaves room for a stem's parts and a temporary file's suffix
HASH_CHARS = 10  # hex digits of the label's SHA-256 a shortened name ends in
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]+")


def safe_name(label: str, default: str = "device", max_len: int = MAX_NAME) -> str:
    """A file-name part for ``label``: ASCII ``[A-Za-z0-9_.+-]``, never ``.``, ``..``, hidden or empty.

    Parameters
    ----------
    label:
        The label as the user or the source wrote it.
    default:
        The name when nothing of ``label`` is left (``"..."``, ``"/"``, ``""``).
    max_len:
        The longest name returned; a longer one is cut and ends in ``-`` and a hash of ``label``.

    Returns
    -------
    str
        ``label`` itself when it is already safe and short (``amd-epyc-zen5-cpu``).

    Examples
    --------
    >>> safe_name("../../tmp/y"), safe_name("node1/gpu0"), safe_name("H100 SXM"), safe_name("")
    ('tmp-y', 'node1-gpu0', 'H100-SXM', 'device')
    >>> safe_name("..")
    'device-5ec1f7e700'
    >>> len(safe_name("x" * 5000))
    96
    """
    name = _UNSAFE.sub("-", label).strip("-.")
    if not name:  # nothing safe left: two such labels (".." and "日本") still get two names
        return f"{default}-{_digest(label)}" if label else default
    if len(name) <= max_len:
        return name
    return f"{name[:max_len - HASH_CHARS - 1].rstrip('-.')}-{_digest(label)}"


def _digest(label: str) -> str:
    return hashlib.sha256(label.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


class NameClashError(ValueError):
    """Two different labels whose file names would be the same: one file would overwrite the other."""


def check_distinct_names(labels: Iterable[str], what: str, fix: str, default: str = "device") -> None:
    """Raise :class:`NameClashError` when two of ``labels`` get one :func:`safe_name` (``a b`` and ``a/b``).

    ``what`` names the files (``figure``, ``output file``), ``fix`` says how to tell the labels apart.
    """
    seen: dict[str, str] = {}
    for label in dict.fromkeys(labels):
        name = safe_name(label, default)
        other = seen.setdefault(name, label)
        if other != label:
            raise NameClashError(f"labels {printable(other)} and {printable(label)} both name the {what} "
                                 f"{name!r}, so one would overwrite the other; {fix}")


# What the schema refuses in a label or a device name: C0, DEL and C1 (a line break, a terminal escape), the
# line and paragraph separators, and the bidirectional marks, embeddings, overrides and isolates that make text
# display in another order than it is stored ("Trojan Source", CVE-2021-42574): a label "gpu1<RLO>0pu" prints
# as another GPU's name.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def has_control(text: str) -> bool:
    """Whether ``text`` holds a control character (a newline, an escape that moves the terminal's cursor, a
    bidirectional override that reorders what is shown)."""
    return _CONTROL.search(text) is not None


def without_control(text: str) -> str:
    """``text`` with every control character replaced by a space (a device name read from someone's log)."""
    return _CONTROL.sub(" ", text)


def escape_control(text: str) -> str:
    """``text`` with every control character but none other written as an escape: ``\\xNN``, or ``\\uNNNN``
    for a bidirectional mark (``\\x202e`` would read as ``\\x20`` and "2e")."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) <= 0xFF
                        else f"\\u{ord(m.group()):04x}", text)


def printable(text: str) -> str:
    """``text`` quoted for a message, control characters escaped (a label never moves the terminal's cursor)."""
    return repr(text) if text.isprintable() else ascii(text)
