"""Progress of the analysis commands (fit, compare, report): ``progress(done, total)`` callbacks over the
shared :class:`mfu_sweep.util.progress.Progress` (a bar on a terminal, a plain line every 15 s in a log).

The library reports through such callbacks (:func:`mfu_sweep.analysis.fits.fit.fit_groups`,
:func:`mfu_sweep.present.report.write.write_report`); :func:`load_files` reads many files with progress.
:class:`SweepProgress` is a sweep's progress, pass by pass.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import click

from mfu_sweep.util.allocator import paused_gc
from mfu_sweep.util.progress import Progress


class StepProgress:
    """A ``progress(done, total)`` callback drawing one :class:`~mfu_sweep.util.progress.Progress` step.

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
    frees for reuse (:func:`mfu_sweep.util.allocator.keep_freed_memory`: 10-20% of a fleet's analysis time was
    the kernel faulting numpy's temporaries in and out).
    """
    from mfu_sweep.cli.common import invalid_note
    from mfu_sweep.records.results import load_sweeps
    from mfu_sweep.util.allocator import keep_freed_memory

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
    and the step files among ``files`` (:func:`mfu_sweep.records.step_files.read_inputs`)."""
    from mfu_sweep.cli.common import invalid_note
    from mfu_sweep.records.step_files import read_inputs
    from mfu_sweep.util.allocator import keep_freed_memory

    keep_freed_memory()
    on_invalid = invalid_note()
    if len(files) < 2:
        return read_inputs(files, on_invalid=on_invalid)
    with step("reading", "file") as bar:
        return read_inputs(files, on_invalid=on_invalid, each=lambda i: bar(i, len(files)))


LINE_WIDTH = 160  # the peak's basis runs to ~550 characters; wrapped, a log stays readable


class SweepProgress:
    """The sweep's progress per pass on stderr (``mfu_sweep.util.progress``): a bar on a terminal, a line per pass
    (and one every few seconds in a long pass) in a log: "pass i/R", shapes done, the shape and its MFU."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bar: Any = None
        self.left = 0  # shapes of the passes not started yet: the ETA counts them
        self.before = 0  # records in the file before this run

    def new_pass(self, index: int, repeats: int, todo: int | None = None) -> None:
        from mfu_sweep.util.progress import Progress

        self.close()
        desc = f"pass {index + 1}/{repeats}" if repeats > 1 else "sweep"
        self.left = max(0, self.left - (todo or 0))
        self.bar = Progress(desc, todo, unit="shape", quiet=self.quiet, close_line=True, after=self.left)

    def start(self, sweep: Any, total: int) -> None:
        import textwrap

        self.left, self.before = total, len(sweep.records)

        line = f"device: {sweep.device['label']} ({sweep.device['name']}); peak: {sweep.peak.source}"
        click.echo(textwrap.fill(line, width=LINE_WIDTH, subsequent_indent="  ", break_on_hyphens=False), err=True)

    def update(self, task: Any, record: Any) -> None:
        if self.bar is None:
            return
        if record is None:
            self.bar.describe(f"{task.shape} {task.dtype} {task.mode}")
            return
        mfu = f"{record.mfu:.1%}" if record.mfu is not None else record.status
        tf = f"{record.tflops:.3g} TFLOP/s " if record.tflops is not None else ""
        busy = (record.extra.get("machine") or {}).get("other_share") if "contended" in record.flags else None
        self.bar.advance(note=f"{tf}MFU {mfu}" + (f" contended (others {busy:.0%})" if busy is not None else ""))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
