"""Reading input files within limits: size, text encoding, JSON nesting and one value per JSON key.

Every file the tool reads (result files and their journals, shape files, and the sources ``import``
reads) comes through :func:`read_limited`: a file larger than ``MFU_SWEEP_MAX_INPUT_MB`` (default
:data:`DEFAULT_MAX_MB` MiB) is refused before it is read. Only regular files are read, each opened
without blocking and checked before a byte is read: a FIFO, a device node (``/dev/zero``, or a symlink
to it) or a socket is refused in one line, so no read waits forever on a pipe nobody writes or runs
through an endless device. ``-`` is standard input (read once per process, up to the limit; it may be
a pipe). A fleet's merged file of 1,024 devices is tens of MB, a sweep of 10,000 records about 10 MB;
raise the limit for a larger file with ``MFU_SWEEP_MAX_INPUT_MB=2048``.

:func:`decode` reads UTF-8 with or without a byte-order mark and UTF-16/32 with one (what Excel,
Notepad and a PowerShell redirect write). :func:`parse_json` refuses nesting deeper than
:data:`MAX_DEPTH` (a result file nests about 6 levels; the parsers recurse, so a file of 100,000 ``[``
would otherwise end in ``RecursionError``) and an object that names one key twice (the standard parser
and orjson both keep the last value silently). Failures are :class:`InputError` (a ``ValueError``,
one line naming the file and the limit).
"""

from __future__ import annotations

import codecs
import json
import math
import os
import stat
import sys
from pathlib import Path
from typing import Any

import numpy as np

try:  # twice as fast as json at parsing: a fleet is thousands of files
    import orjson
except ImportError:  # pragma: no cover - a dependency; the standard parser does the same job
    orjson = None

MAX_MB_ENV = "MFU_SWEEP_MAX_INPUT_MB"
DEFAULT_MAX_MB = 256
MAX_DEPTH = 64
# Byte-order marks, longest first (UTF-32 LE starts with the UTF-16 LE mark).
BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


class InputError(ValueError):
    """An input file is too large, too deeply nested or ambiguous; the message names the file and the limit."""


def max_input_bytes() -> int:
    """The size limit on one input file: ``MFU_SWEEP_MAX_INPUT_MB`` MiB, default :data:`DEFAULT_MAX_MB`."""
    raw = os.environ.get(MAX_MB_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_MB * 2**20
    try:
        mb = float(raw)
    except ValueError:
        mb = float("nan")
    if not mb > 0 or mb == float("inf"):
        raise InputError(f"{MAX_MB_ENV}={raw!r} must be a positive number of MiB")
    return math.ceil(mb * 2**20)


def _too_large(name: str, what: str, limit: int) -> InputError:
    return InputError(f"{name!r} {what} the input limit of {limit / 2**20:.3g} MiB; if it really is one input, "
                      f"raise the limit with {MAX_MB_ENV}=<MiB>")


STDIN = "-"  # a path of "-" reads standard input (and, for an output, writes standard output)
# What a path may be besides a regular file or a directory, in words.
SPECIAL_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                 (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"))


def special_kind(mode: int) -> str | None:
    """``a character device``, ``a FIFO (named pipe)`` ... for a ``st_mode`` that is none of a regular file,
    a directory or a symlink; None for those."""
    return next((what for test, what in SPECIAL_KINDS if test(mode)), None)


def is_stdin(path: str | Path) -> bool:
    """Whether ``path`` is ``-``, standard input."""
    return str(path) == STDIN


def _not_regular(name: str, kind: str) -> InputError:
    return InputError(f"{name!r} is {kind}, not a regular file; only regular files are read (pass a file, or pipe "
                      "the data into standard input and give - as the file)")


def check_size(path: str | Path) -> None:
    """Refuse a path that is no regular file (:func:`special_kind`), or a regular file past
    :func:`max_input_bytes` (for readers that open it themselves)."""
    info = os.stat(path)
    kind = special_kind(info.st_mode)
    if kind:
        raise _not_regular(str(path), kind)
    size, limit = info.st_size, max_input_bytes()
    if size > limit:
        raise _too_large(str(path), f"is {size / 2**20:.4g} MiB, beyond", limit)


def read_regular(path: str | Path) -> bytes:
    """The bytes of the regular file ``path`` within :func:`max_input_bytes`; ``FileNotFoundError`` when it
    does not exist, :class:`InputError` for everything else that stops the read.

    A FIFO, a device or a socket (also behind a symlink) is refused before it is opened; the file is then
    opened without blocking and checked again with ``fstat`` (it may have been swapped meanwhile) before
    anything is read.
    """
    name, limit = str(path), max_input_bytes()
    kind = _kind_at(path)  # before opening: opening a device node can itself do something
    if kind:
        raise _not_regular(name, kind)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise InputError(f"{name!r} is a directory, not a file") from None
    except OSError as exc:
        raise InputError(f"{name!r}: cannot read ({exc.strerror or exc})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = special_kind(info.st_mode)
        raise _not_regular(name, kind) if kind else InputError(f"{name!r} is a directory, not a file")
    with os.fdopen(fd, "rb") as fh:
        if info.st_size > limit:
            raise _too_large(name, f"is {info.st_size / 2**20:.4g} MiB, beyond", limit)
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise InputError(f"{name!r}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:  # grew while read
        raise _too_large(name, "runs past", limit)
    return data


def _kind_at(path: str | Path) -> str | None:
    try:
        return special_kind(os.stat(path).st_mode)
    except OSError:
        return None


def read_limited(path: str | Path) -> bytes:
    """The bytes of ``path`` (``-``: standard input), refusing anything but a regular file, and a file or a
    stream past :func:`max_input_bytes` (see :func:`read_regular`)."""
    if is_stdin(path):
        return read_stdin()
    try:
        return read_regular(path)
    except FileNotFoundError:
        raise InputError(f"{str(path)!r}: no such file") from None


_STDIN: list[tuple[object, bytes]] = []  # (the stream, its bytes): standard input is read once per stream


def read_stdin() -> bytes:
    """Standard input's bytes, up to :func:`max_input_bytes`; a second call gets the same bytes.

    Refused when there is none, or it is a terminal (``-`` meant a pipe or a redirect: a terminal would
    wait for typing).
    """
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise InputError("'-' (standard input): this process has no standard input to read")
    if _STDIN and _STDIN[0][0] is stream:
        return _STDIN[0][1]
    try:
        tty = stream.isatty()
    except (OSError, ValueError):
        tty = False
    if tty:
        raise InputError("'-' reads standard input, which is a terminal here; pipe or redirect a file into it "
                         "(... < FILE, or cat FILE | ...)")
    limit = max_input_bytes()
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise _too_large("-", "(standard input) runs past", limit)
    _STDIN[:] = [(stream, data)]
    return data


def decode(data: bytes, errors: str = "strict") -> str:
    """Text of ``data``: by its byte-order mark (UTF-8, UTF-16, UTF-32), else UTF-8; the mark is dropped."""
    codec = next((c for bom, c in BOMS if data.startswith(bom)), "utf-8")
    return data.decode(codec, errors=errors)


def encoding_name(data: bytes) -> str | None:
    """``UTF-16`` or ``UTF-32`` where ``data`` starts with such a byte-order mark, else None."""
    return next((c.upper() for bom, c in BOMS if data.startswith(bom) and c.startswith("utf-")
                 and c != "utf-8-sig"), None)


def max_depth(data: bytes) -> int:
    """How deeply the arrays and objects of JSON text nest (brackets inside strings do not count); at most
    :data:`MAX_DEPTH` may stand for less (a text with that few brackets is not scanned)."""
    opened = data.count(b"[") + data.count(b"{")
    if opened <= MAX_DEPTH:  # an upper bound within the limit: no need to scan
        return opened
    if b"\\" in data:  # drop escaped backslashes, then escaped quotes: every quote left delimits a string
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    # the quotes and brackets alone, in order (one pass in C, not numpy over every byte)
    kind = np.frombuffer(data.translate(None, _NOT_STRUCTURE), np.uint8)
    quote = kind == ord('"')
    outside = (np.cumsum(quote) & 1) == 0  # an even number of quotes so far (a bracket is no quote): outside
    kind = kind[outside & ~quote]
    return int(np.cumsum(np.where((kind == ord("{")) | (kind == ord("[")), 1, -1)).max(initial=0))


_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'"{}[]')  # what max_depth drops


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def _no_duplicate_keys(data: bytes, parsed: Any) -> bool:
    """Whether the text names no key twice in one object, judged without a second parse.

    Every ``:`` of JSON text separates a key from its value or sits inside a string, and orjson writes
    the parsed value back with exactly one ``:`` per key and the strings' own; a key given twice is
    parsed once, so the text then holds more. Only a ``\\u003a`` escape (a ``:`` spelled in six
    characters) breaks the count: such a file takes the slow parse.
    """
    if orjson is None or b"\\u003a" in data.lower():
        return False
    return data.count(b":") == orjson.dumps(parsed).count(b":")


def parse_json(data: bytes, name: str) -> Any:
    """Parse JSON ``data`` (UTF-8 with or without a byte-order mark, UTF-16/32 with one) read from the file ``name``.

    Raises
    ------
    InputError
        Nesting deeper than :data:`MAX_DEPTH`, or an object naming a key twice.
    json.JSONDecodeError
        Text that is not JSON (the caller words it).
    """
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    elif encoding_name(data):  # UTF-16/32 with its mark (PowerShell's redirect): the parsers read UTF-8
        try:
            data = decode(data).encode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{name!r}: not valid {encoding_name(data)} text ({exc.reason} at byte {exc.start})"
                             ) from None
    depth = max_depth(data)
    if depth > MAX_DEPTH:
        raise InputError(f"{name!r}: JSON nested {depth} levels deep, beyond the limit of {MAX_DEPTH} "
                         "(a result file nests about 6); not a result file")
    if orjson is not None:
        try:
            parsed = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # NaN, Infinity, huge integers, lone surrogates: the standard parser's rules and messages
        else:
            if _no_duplicate_keys(data, parsed):
                return parsed
    try:
        return json.loads(data.decode("utf-8"), parse_constant=float, object_pairs_hook=_unique_pairs)
    except _DuplicateKey as exc:
        raise InputError(f"{name!r}: key {exc.key!r} appears twice in one JSON object; which value is meant is "
                         "ambiguous (a JSON object holds one value per key)") from None
