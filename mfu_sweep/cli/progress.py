"""Progress of the analysis commands (fit, compare, report) on stderr, in one place.

Nothing shows for work that ends within :data:`QUIET_S` seconds. After that, on a terminal, one
line redrawn in place (``\\r``); in a log (stderr not a terminal), a plain line at most every
:data:`LOG_EVERY_S` seconds and one when the step ends, so a log holds a few readable lines, never
a stack of redrawn frames. The library reports through ``progress(done, total)`` callbacks
(:func:`mfu_sweep.analysis.fits.fit.fit_groups`, :func:`mfu_sweep.present.report.write_report`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any

QUIET_S = 5.0
LOG_EVERY_S = 15.0


class StepProgress:
    """``done`` of ``total`` units of one step (see the module docstring); ``clock`` is injectable for tests."""

    def __init__(self, desc: str, unit: str, stream: IO[str] | None = None, terminal: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.desc, self.unit, self.clock = desc, unit, clock
        self.stream = stream or sys.stderr
        self.terminal = _isatty(self.stream) if terminal is None else terminal
        self.start = self.last = clock()
        self.shown = False
        self.text = ""

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        self.text = f"{self.desc}: {done}/{total} {self.unit}, {now - self.start:.0f} s"
        if now - self.start < QUIET_S:
            return
        if self.terminal:
            self.stream.write("\r" + self.text)
        elif not self.shown or now - self.last >= LOG_EVERY_S:
            self.stream.write(self.text + "\n")
            self.last = now
        else:
            return
        self.shown = True
        self.stream.flush()

    def close(self) -> None:
        """End the step: the terminal line ends; a log gets the closing line (only if it showed any)."""
        if not self.shown:
            return
        self.stream.write("\n" if self.terminal else f"{self.text.rsplit(',', 1)[0]}, done in "
                          f"{self.clock() - self.start:.0f} s\n")
        self.stream.flush()


def _isatty(stream: IO[str]) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


@contextmanager
def step(desc: str, unit: str, **kw: object) -> Iterator[StepProgress]:
    """A :class:`StepProgress` closed at the end of the block."""
    bar = StepProgress(desc, unit, **kw)  # type: ignore[arg-type]
    try:
        yield bar
    finally:
        bar.close()


def load_files(files: Sequence[str]) -> list[Any]:
    """``load_sweeps(files)`` with a ``reading`` progress step (a fleet is thousands of files)."""
    from mfu_sweep.results import load_sweeps

    if len(files) < 2:
        return load_sweeps(files)
    with step("reading", "files") as bar:
        out: list[Any] = []
        for i, path in enumerate(files):
            out += load_sweeps([path])
            bar(i + 1, len(files))
    return out
