"""Progress of a long step on stderr: a live bar on a terminal, a few plain lines in a log.

A tqdm bar redraws itself with ``\\r``; written into a file (``2> err.txt``, a
``make`` log, CI) every frame stays, and one sweep left 89 KB of them. So
:class:`Progress` draws the bar only when its stream is a terminal; otherwise it
writes one plain line every ``every_s`` seconds at most, and one when it closes
(always with ``close_line=True``, else only after a step long enough to have
printed a line already). Every command that works for more than a few seconds
(``sweep`` per pass; fits, comparisons, reports) reports through it.

Example::

    with Progress("fitting", total=len(series), unit="series") as bar:
        for s in series:
            bar.describe(s.key)
            fit(s)
            bar.advance()
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO, Any

PLAIN_EVERY_S = 15.0
"""In a log, at most one line per this many seconds (besides the closing line)."""
MAX_LINE = 200
"""A plain line is cut to this many characters (a shape name or a note cannot make it long)."""


def is_terminal(stream: IO[str]) -> bool:
    """Whether ``stream`` is an interactive terminal (a bar may redraw itself there)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or stream-like object without isatty
        return False


class Progress:
    """One step's progress: ``advance`` after each unit of work, ``describe`` what runs now.

    Parameters
    ----------
    desc:
        What the step is, at the start of every line (``"pass 2/5"``, ``"fitting"``).
    total:
        Units of work, when known.
    unit, units:
        The unit's name in plain lines, singular and plural [``unit + "s"``] (``"series"`` takes both).
    stream:
        Where to write [``sys.stderr`` at construction].
    quiet:
        Write nothing at all.
    every_s:
        In a log, the least time between two lines.
    close_line:
        In a log, always end with a line (a sweep's one line per pass); else only after a step
        that already printed one.
    terminal:
        Force the terminal (bar) or log (lines) mode; by default ``stream.isatty()``.
    clock:
        Seconds, monotonic (a test passes a fake one).
    after:
        Units of work that follow this step (a sweep's later passes): the ETA counts them at this
        step's rate.
    """

    def __init__(self, desc: str = "", total: int | None = None, *, unit: str = "step", units: str | None = None,
                 stream: IO[str] | None = None, quiet: bool = False, every_s: float = PLAIN_EVERY_S,
                 close_line: bool = False, terminal: bool | None = None,
                 clock: Callable[[], float] = time.monotonic, after: int = 0) -> None:
        self.desc, self.total, self.unit, self.units = desc, total, unit, units or f"{unit}s"
        self.after = after
        self.stream = stream if stream is not None else sys.stderr
        self.quiet, self.every_s, self.close_line, self.clock = quiet, every_s, close_line, clock
        self.done = 0
        self.now = ""
        self.note = ""
        self.started = self.last_line = clock()
        self.lines = 0
        self.closed = False
        self.bar: Any = None
        if not quiet and (is_terminal(self.stream) if terminal is None else terminal):
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit=unit, file=self.stream, dynamic_ncols=True, desc=desc)

    def describe(self, text: str) -> None:
        """What runs now (the bar shows it at once; a log line shows the last finished unit's note)."""
        self.now = text
        if self.bar is not None:
            self.bar.set_description(f"{self.desc} {text}".strip())

    def advance(self, n: int = 1, note: str = "") -> None:
        """``n`` more units done; ``note`` says how the last one went (e.g. its TFLOP/s)."""
        self.done += n
        self.note = note
        if self.bar is not None:
            eta = self.eta_text() if self.after else ""  # the bar shows this step's own rate and time left
            if note or eta:
                self.bar.set_postfix_str(", ".join(x for x in (note, eta and f"{eta} in all") if x))
            self.bar.update(n)
        elif not self.quiet and self.clock() - self.last_line >= self.every_s:
            self._line()

    def close(self) -> None:
        """End the step: close the bar, or write the closing line in a log."""
        if self.closed:
            return
        self.closed = True
        if self.bar is not None:
            self.bar.close()
        elif not self.quiet and (self.close_line or self.lines):
            self._line(closing=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rate_text(self) -> str:
        """How fast units finish: ``2.5 shapes/s``, or ``3.1 s per shape`` below one a second ("" before any)."""
        elapsed = self.clock() - self.started
        if not self.done or elapsed <= 0:
            return ""
        rate = self.done / elapsed
        return f"{rate:.3g} {self.units}/s" if rate >= 1 else f"{1 / rate:.3g} s per {self.unit}"

    def eta_text(self) -> str:
        """Time left at this step's rate, with the work that follows it: ``ETA 3.2 min`` ("" when unknown)."""
        elapsed = self.clock() - self.started
        if self.total is None or not self.done or elapsed <= 0:
            return ""
        left = max(0, self.total - self.done) + self.after
        return f"ETA {format_duration(left * elapsed / self.done)}" if left else ""

    def line_text(self, closing: bool = False) -> str:
        """The plain line for now: ``desc: done/total units[, note][, what ran], N s[, rate][, ETA]``."""
        units = self.unit if (self.done if self.total is None else self.total) == 1 else self.units
        count = f"{self.done}/{self.total}" if self.total is not None else f"{self.done}"
        parts = [f"{self.desc}: {count} {units}".lstrip(": ")]
        if self.now and not closing:
            parts.append(f"last {self.now}")
        if self.note:
            parts.append(self.note)
        parts.append(f"{self.clock() - self.started:.0f} s" + (" in all" if closing else ""))
        parts += [x for x in (self.rate_text(), self.eta_text()) if x]
        text = ", ".join(parts)
        return text if len(text) <= MAX_LINE else text[:MAX_LINE - 3] + "..."

    def _line(self, closing: bool = False) -> None:
        self.stream.write(self.line_text(closing) + "\n")
        self.stream.flush()
        self.lines += 1
        self.last_line = self.clock()


def format_duration(seconds: float) -> str:
    """``0.4 s``, ``45 s``, ``3.2 min``, ``1.5 h``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
