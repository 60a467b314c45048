"""Atomic writes: readers see the old file or the new one, never half of one; ``-`` is standard output.

The result file, reports and tables are written through here (:func:`mfu_sweep.records.results.save_sweep`).
"""

from __future__ import annotations

import io
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mfu_sweep.util import jsonio
from mfu_sweep.util.outputs import check_replaceable, is_stdout


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write JSON so that readers see the old file or the new one, never half of one (non-finite floats as null);
    ``-`` writes it to standard output."""
    text = jsonio.dumps(data, indent=True) + b"\n"  # orjson: a 10,000-record sweep in a tenth of json's time
    _write_atomic(path, lambda fh: fh.write(text), binary=True)


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` so that readers see the old file or the new one, never half of one; ``-`` writes it to
    standard output."""
    _write_atomic(path, lambda fh: fh.write(text))


def _write_atomic(path: str | Path, write: Callable[[Any], Any], binary: bool = False) -> None:
    if is_stdout(path):
        _write_stdout(write, binary)
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=".tmp", dir=path.parent)
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        with os.fdopen(fd, "wb" if binary else "w") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        check_replaceable(path)  # a device node, a FIFO or a socket is never replaced by a file
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and exc.filename is None:  # a failed write names no file: name it
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


def _write_stdout(write: Callable[[Any], Any], binary: bool) -> None:
    """``write`` to standard output (``-o -``), as UTF-8 bytes where the stream has a buffer."""
    sink: Any = io.BytesIO() if binary else io.StringIO()
    write(sink)
    data = sink.getvalue()
    buffer = getattr(sys.stdout, "buffer", None)
    sys.stdout.flush()
    if buffer is None:
        sys.stdout.write(data.decode("utf-8") if binary else data)
    else:
        buffer.write(data if binary else data.encode("utf-8"))
        buffer.flush()
