"""``--exclude-contended`` and the contention line shared by ``fit``, ``compare``, ``plot`` and ``report``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import click

from mfu_sweep.records.contention import CONTENDED_SHARE, contention_note, exclude_contended


def exclude_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--exclude-contended`` flag."""
    return click.option(
        "--exclude-contended", is_flag=True,
        help=f"Leave out records flagged 'contended' (others used >= {CONTENDED_SHARE:.0%} of the worker's "
             "cores, or another process used the GPU, while the shape ran). Default: keep them and say how many.",
    )(fn)


def apply(sweeps: Sequence[Any], exclude: bool, echo: bool = True) -> list[Any]:
    """The sweeps, without contended records when ``exclude``; says on stderr how many are flagged."""
    note = contention_note(sweeps, excluded=exclude)
    if note and echo:
        click.echo(f"note: {note}", err=True)
    if not exclude:
        return list(sweeps)
    kept, _ = exclude_contended(sweeps)
    if sweeps and not any(s.records for s in kept):
        raise click.ClickException("every record is flagged contended: nothing is left with --exclude-contended")
    return kept
