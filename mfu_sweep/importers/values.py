"""One rule for every number an importer reads: the number the source printed, or a one-line error naming
where it stands; never a different number.

A source value is parsed whole (``-5.0`` is not 5.0, ``1e308`` is not 308, ``nan`` is not the next
column's value) and must be finite and not negative. After a reader has turned a source's values into
seconds per call, :func:`check_devices` refuses a time that is not positive and finite, or one that
implies more than :data:`ABSURD_FACTOR` times the highest peak of any chip in the spec table (a
misplaced exponent, a unit read wrong): such a value is not a measurement of any chip. A value the
source prints as zero (below its resolution) stays what it was: a record with status ``error`` that
says so, used by no analysis.

:func:`read_text` reads a source within the input size limit (:mod:`mfu_sweep.util.inputs`), as UTF-8 with
or without a byte-order mark, or as UTF-16/32 with one (a PowerShell redirect, Notepad's "Unicode").
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from mfu_sweep.importers.common import SourceDevice, SourceError
from mfu_sweep.specs import load_chips
from mfu_sweep.util.inputs import InputError, decode, read_limited

ABSURD_FACTOR = 10


@cache
def absurd_tflops() -> float:
    """:data:`ABSURD_FACTOR` times the highest dense peak of any chip and dtype in the shipped spec table."""
    return ABSURD_FACTOR * max(v for chip in load_chips().values() for v in chip.peak_tflops.values())


def read_text(path: Path, kind: str) -> str:
    """The text of a source file (``kind`` names what it should be, for the error), within the input limit."""
    name = str(path)
    try:
        data = read_limited(path)
    except InputError as exc:
        raise SourceError(str(exc)) from None
    try:
        return decode(data)
    except UnicodeDecodeError as exc:
        raise SourceError(f"{name!r}: cannot read as text: byte {data[exc.start]:#04x} at offset {exc.start} is not "
                          f"UTF-8; not {kind}") from None


def number(text: object, where: str, what: str) -> float:
    """``text`` as a finite, non-negative number, or a :class:`SourceError` naming ``where`` and ``what``."""
    try:
        value = float(text) if not isinstance(text, bool) else math.nan
    except (TypeError, ValueError, OverflowError):
        raise SourceError(f"{where}: {what} {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise SourceError(f"{where}: {what} {text!r} is not a finite, non-negative number; not read as any other")
    return value


def tflops(text: object, where: str, what: str) -> float:
    """A TFLOP/s value the source printed (:func:`number`), refused beyond :func:`absurd_tflops`."""
    value = number(text, where, what)
    if value > absurd_tflops():
        raise SourceError(f"{where}: {what} {text!r} is {beyond_any_peak()}; not a measurement (an exponent read "
                          "wrong?)")
    return value


def beyond_any_peak() -> str:
    """How a refused value's size is worded: beyond ABSURD_FACTOR times the highest peak in the spec table."""
    return f"more than {ABSURD_FACTOR}x the highest peak of any chip ({absurd_tflops() / ABSURD_FACTOR:g} TFLOP/s)"


def count(text: str, where: str, what: str) -> int:
    """``text`` as a non-negative whole number (ASCII digits), or a :class:`SourceError`."""
    cell = text.strip()
    if not (cell.isascii() and cell.isdigit()):
        raise SourceError(f"{where}: {what} {text!r} is not a whole number")
    return int(cell)


def check_devices(devices: Iterable[SourceDevice], source: str) -> None:
    """Refuse a row whose time is not positive and finite, or implies an absurd TFLOP/s (see the module)."""
    limit = absurd_tflops()
    for dev in devices:
        for row in dev.rows:
            if row.seconds is None:
                continue
            where = row.where or f"{source!r}: {row.shape} {row.dtype}"
            if not (math.isfinite(row.seconds) and row.seconds > 0):
                raise SourceError(f"{where}: time {row.seconds!r} s per call is not a positive finite time")
            for sample in row.samples_s:
                if not (math.isfinite(sample) and sample > 0):
                    raise SourceError(f"{where}: sample {sample!r} s is not a positive finite time")
            rate = row.shape.flops / row.seconds / 1e12
            if rate > limit:
                raise SourceError(f"{where}: {row.seconds:.3g} s per call for {row.shape} gives {rate:.4g} TFLOP/s, "
                                  f"{beyond_any_peak()}; not a measurement (an exponent or unit read wrong?)")
