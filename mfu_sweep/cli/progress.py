"""Progress of the analysis commands (fit, compare, report): ``progress(done, total)`` callbacks over the
shared :class:`mfu_sweep.progress.Progress` (a bar on a terminal, a plain line every 15 s in a log).

The library reports through such callbacks (:func:`mfu_sweep.analysis.fits.fit.fit_groups`,
:func:`mfu_sweep.present.report.write_report`); :func:`load_files` reads many files with progress.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click

from mfu_sweep.allocator import paused_gc
from mfu_sweep.progress import Progress


class StepProgress:
    """A ``progress(done, total)`` callback drawing one :class:`~mfu_sweep.progress.Progress` step.

    The step starts at the first call (when the total is known); keyword arguments go to ``Progress``.
    """

    def __init__(self, desc: str, unit: str, **kw: Any) -> None:
        self.desc, self.unit, self.kw = desc, unit, kw
        self.bar: Progress | None = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            self.bar = Progress(self.desc, total, unit=self.unit, units=self.unit if self.unit == "series" else None,
                                **self.kw)
        self.bar.advance(done - self.bar.done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


@contextmanager
def step(desc: str, unit: str, **kw: Any) -> Iterator[StepProgress]:
    """A :class:`StepProgress` closed at the end of the block."""
    bar = StepProgress(desc, unit, **kw)
    try:
        yield bar
    finally:
        bar.close()


def keep_for_the_command() -> None:
    """Exempt what this process holds now from the collections until the command ends (it holds it to the end
    anyway); the command's context lifts it on closing, so an in-process caller gets it back."""
    gc.freeze()
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.call_on_close(gc.unfreeze)
    else:
        gc.unfreeze()


def load_files(files: Sequence[str]) -> list[Any]:
    """``load_sweeps(files)`` with a ``reading`` progress step (a fleet is thousands of files), refusing a file
    that fails validation unless the command was given ``--allow-invalid``.

    The analysis commands (fit, compare, plot, report) start here; their process then keeps the memory it
    frees for reuse (:func:`mfu_sweep.allocator.keep_freed_memory`: 10-20% of a fleet's analysis time was
    the kernel faulting numpy's temporaries in and out).
    """
    from mfu_sweep.allocator import keep_freed_memory
    from mfu_sweep.cli.common import invalid_note
    from mfu_sweep.results import load_sweeps

    keep_freed_memory()
    on_invalid = invalid_note()  # --allow-invalid: drop what fails validation, with a note
    with paused_gc():
        if len(files) < 2:
            out = load_sweeps(files, on_invalid=on_invalid)
        else:
            with step("reading", "file") as bar:
                out = []
                for i, path in enumerate(files):
                    out += load_sweeps([path], on_invalid=on_invalid)
                    bar(i + 1, len(files))
    keep_for_the_command()
    return out


def load_inputs(files: Sequence[str]) -> tuple[list[Any], list[Any]]:
    """:func:`load_files` for commands that also take step files (``predict``, ``plot``, ``report``): the sweeps
    and the step files among ``files`` (:func:`mfu_sweep.analysis.steps.step_files.read_inputs`)."""
    from mfu_sweep.allocator import keep_freed_memory
    from mfu_sweep.analysis.steps.step_files import read_inputs
    from mfu_sweep.cli.common import invalid_note

    keep_freed_memory()
    on_invalid = invalid_note()
    if len(files) < 2:
        return read_inputs(files, on_invalid=on_invalid)
    with step("reading", "file") as bar:
        return read_inputs(files, on_invalid=on_invalid, each=lambda i: bar(i, len(files)))
