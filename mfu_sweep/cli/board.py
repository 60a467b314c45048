"""``compare`` at fleet scale: the leaderboard, one-vs-rest against a baseline, and the fleet view.

Called from the ``compare`` command of :mod:`mfu_sweep.cli.analysis`: with
``--baseline LABEL``, or with more than :data:`HANDFUL` devices of one dtype
and mode and no ``--a``/``--b``/``--pairwise``, ``compare`` prints leaderboards
(:mod:`mfu_sweep.analysis.fleet.leaderboard`) instead of every pair; replicate runs
(labels ``<label>.r<rank>``) get their fleet view (:mod:`mfu_sweep.analysis.fleet.view`)
first in every mode.

A fleet gate over many files (``compare FILES`` ranking devices, no ``--a``/``--b``/``--pairwise``/
``--calibrate``/``--allow-invalid``) reads them through :func:`fleet_inputs`: file digests read in parallel
and cached (:mod:`mfu_sweep.analysis.sources.reading`), series of per-shape medians; whatever that path
cannot answer the same way falls back to loading the files whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from mfu_sweep.analysis.fleet.leaderboard import HANDFUL, REST, Leaderboard, many_devices
from mfu_sweep.analysis.fleet.view import fleets_json
from mfu_sweep.analysis.verdicts.margin import lead_words

__all__ = ["HANDFUL", "boards_json", "device_lines", "echo_boards", "finish_gate", "fleet_inputs", "gate_of",
           "use_board"]

def fleet_inputs(files: Sequence[str], exclude: bool, baseline: str | None, use_cache: bool = True
                 ) -> tuple[list[Any], dict[Any, Any], list[str]] | None:
    """(sweeps without records, series of per-shape medians, label hints) for a fleet gate, having printed the
    notes ``compare`` prints before its boards; None when the files are better loaded whole: no more than
    :data:`HANDFUL` files, too few devices to rank, or a case the digests cannot answer as the records would
    (see the module docstring). No note is printed then, so the whole path prints each once."""
    from mfu_sweep.analysis.ground.series import SeriesError
    from mfu_sweep.analysis.sources import digest_series as ds
    from mfu_sweep.analysis.sources.cache import DigestCache
    from mfu_sweep.analysis.sources.reading import read_digests, workers_for
    from mfu_sweep.analysis.sources.runs import check_pooling
    from mfu_sweep.cli.common import invalid_note
    from mfu_sweep.cli.progress import keep_for_the_command, step
    from mfu_sweep.util.allocator import keep_freed_memory, paused_gc

    if len(files) <= HANDFUL or invalid_note() is not None:  # a few files: read whole, never twice
        return None
    keep_freed_memory()
    with step("reading", "file") as bar, paused_gc():
        digests, _ = read_digests(files, DigestCache.default() if use_cache else None,
                                  workers=workers_for(len(files)), progress=bar)
        try:
            if not ds.anything_left(digests, exclude):
                return None
            check_pooling([d.sweep for d in digests])
            series = ds.group_digests(digests, exclude)
        except SeriesError:
            return None
    keep_for_the_command()  # the digests stay to the end: the collections until then need not walk them
    if series is None or not use_board(series, baseline, False, None, None):
        return None
    note = ds.contention_note_of(digests, exclude)
    if note:
        click.echo(f"note: {note}", err=True)
    for reason in ds.incomplete_notes(digests, exclude):
        click.echo(f"note: {reason}", err=True)
    return [d.sweep for d in digests], series, ds.collisions(digests, exclude)


def use_board(series: Mapping[Any, Any], baseline: str | None, pairwise: bool, label_a: str | None,
              label_b: str | None) -> bool:
    """Whether ``compare`` answers with leaderboards (see the module docstring)."""
    if baseline is not None:
        if label_a is not None or label_b is not None:
            raise click.BadParameter("give --baseline or --a/--b, not both", param_hint="--baseline")
        return True
    if pairwise or label_a is not None or label_b is not None:
        return False
    return many_devices(series)


def device_lines(board: Leaderboard) -> list[str]:
    """One line per device against a baseline: mean ratio, the bands it is ahead or behind in (beyond the margin),
    in the metric's words (faster/slower by TFLOP/s, higher/lower MFU by MFU)."""
    ahead, behind = lead_words(board.metric)
    name = "MFU" if board.metric == "mfu" else "TFLOP/s"
    rows = [f"{'device':<28} {'mean ratio':>10}  {ahead} in / {behind} in (bands by {name}, beyond the margin)"]
    for label in sorted(board.devices, key=lambda lbl: (-board.overall.get(lbl, 0.0), lbl)):
        cells = board.cells_of.get(label, ())
        ahead = ", ".join(board.bands[c.band].name for c in cells if c.verdict > 0) or "-"
        behind = ", ".join(board.bands[c.band].name for c in cells if c.verdict < 0) or "-"
        ratio = board.overall.get(label)
        rows.append(f"{label:<28} {'x' + format(ratio, '.3f') if ratio else '-':>10}  {ahead} / {behind}")
    return rows


def echo_boards(fleets: Sequence[Any], boards: Sequence[Leaderboard], notes: Sequence[str]) -> None:
    """Print fleet sentences, then each leaderboard (and, against a baseline, one line per device)."""
    for f in fleets:
        click.echo(f"fleet: {f.sentence()}")
    for i, board in enumerate(boards):
        if i or fleets:
            click.echo("")
        for line in board.lines():
            click.echo(line)
        if board.reference != REST:
            click.echo("")
            for line in device_lines(board):
                click.echo(line)
    for note in notes:
        click.echo(f"note: {note}")


def boards_json(fleets: Sequence[Any], boards: Sequence[Leaderboard], notes: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if fleets:
        out["fleets"] = fleets_json(fleets, boards)
    if boards or notes:
        out["leaderboards"] = [b.to_json() for b in boards]
        out["leaderboard_notes"] = list(notes)
    return out


def gate_of(fleets: Sequence[Any], boards: Sequence[Leaderboard], fail_on: str | None) -> Any:
    """The gate of ``--fail-on`` (None without it); a usage error when there is nothing to rank."""
    if fail_on is None:
        return None
    from mfu_sweep.analysis.fleet.gate import GateError, gate

    try:
        return gate(fleets, boards, fail_on)
    except GateError as exc:
        raise click.BadParameter(str(exc), param_hint="--fail-on") from None


def finish_gate(verdict: Any, err: bool = False) -> None:
    """Print the gate's one line and exit 1 when it fails (nothing without ``--fail-on``)."""
    if verdict is None:
        return
    click.echo(verdict.line(), err=err)
    if not verdict.passed:
        click.get_current_context().exit(1)
