"""The report's sections for many devices: the fleet view of replicate runs and the leaderboard per FLOP band.

Both stay readable however many devices there are: one sentence and a short
table per fleet (its flagged devices and the slowest few), one row per FLOP
band per leaderboard, and the device x band heatmap; never a sentence per pair.
"""

from __future__ import annotations

from collections.abc import Sequence

from mfu_sweep.analysis.fleet.leaderboard import Leaderboard, Run
from mfu_sweep.analysis.fleet.view import FleetView
from mfu_sweep.present.figures.fleet import figure_stem
from mfu_sweep.present.report.blocks import Block, Bullets, FigureRef, Heading, Para, Table
from mfu_sweep.present.words import ahead_words, metric_name
from mfu_sweep.util.text import counted

SLOWEST_ROWS = 5
MOST_FLAGGED = 20
MOST_NAMED = 3

FLEET_CAPTION = (
    "Each device's {metric} over the median of the other devices, per FLOP band (geometric mean over the band's "
    "shapes; blue: {ahead}, red: {behind}; lowest device on top). Dots: {ahead} or {behind} than the rest by more "
    "than the margin, with confidence (Holm over devices x bands, shape-level noise).")
BOARD_CAPTION = (
    "Each device's {metric} over {reference}, per FLOP band (geometric mean over the band's shapes; blue: {ahead}, "
    "red: {behind}; lowest device on top). Dots: {ahead} or {behind} by more than the margin, with confidence (Holm "
    "over devices x bands).")


def is_board_figure(stem: str) -> bool:
    """Whether a figure stem is a fleet or leaderboard heatmap (shown in its own section)."""
    return stem.startswith(("fleet-", "leaderboard-"))


def _metric(board: Leaderboard) -> str:
    return metric_name(board.metric)


def _caption(template: str, board: Leaderboard, **kw: str) -> str:
    ahead, behind = ahead_words(board.metric)
    return template.format(metric=_metric(board), ahead=ahead, behind=behind, **kw)


def _fleet_table(view: FleetView) -> Table:
    flagged = list(view.flagged)
    rows = flagged[:MOST_FLAGGED] + [h for h in view.health[:SLOWEST_ROWS] if not h.flagged]
    out = []
    for h in rows:
        bands = "; ".join(f"{b.name} x{r:.3f}" for b, r in h.slow_bands) or "-"
        runs = _runs_cell(h.slow_runs)
        out.append((h.label, f"x{h.mean_ratio:.3f}", f"x{h.worst_ratio:.3f} ({h.worst_shape})", bands, runs,
                    "flagged" if h.flagged else ""))
    if len(flagged) > MOST_FLAGGED:
        out.append(("…", "", "", f"and {len(flagged) - MOST_FLAGGED} more flagged devices (see analysis.json)",
                    "", ""))
    behind = ahead_words(view.board.metric)[1]
    return Table(("device", f"mean {_metric(view.board)} ratio", "worst shape", f"{behind} in bands",
                  f"{behind} runs", ""), tuple(out))


def _runs_cell(runs: Sequence[Run]) -> str:
    if not runs:
        return "-"
    counts = sum(r.n_points for r in runs)
    ratios = [r.ratio for r in runs]
    return f"{counted(len(runs), 'run')} over {counted(counts, 'FLOP count')}, x{min(ratios):.3f} to x{max(ratios):.3f}"


def _named(items: Sequence[tuple[str, float]]) -> str:
    text = ", ".join(f"{lbl} x{r:.3f}" for lbl, r in items[:MOST_NAMED])
    return (text + (f" +{len(items) - MOST_NAMED} more" if len(items) > MOST_NAMED else "")) or "–"


def _board_table(board: Leaderboard) -> Table:
    rows = tuple((b.band.name, str(b.n_devices), _named(b.ahead), str(len(b.same)), str(len(b.ambiguous)),
                  _named(b.behind), _named([b.median]), _named([b.slowest])) for b in board.boards)
    ahead, behind = ahead_words(board.metric)
    return Table(("FLOP band", "devices", ahead, "same", "ambiguous", behind, "median device", "lowest"), rows)


def fleet_blocks(fleets: Sequence[FleetView], figures: Sequence[str]) -> list[Block]:
    """The "Fleet" section: per replicate group, its sentence, flagged and slowest devices, and heatmap."""
    if not fleets:
        return []
    blocks: list[Block] = [Heading(2, "Fleet (replicate runs)"), Para(
        "Every device against the median of the other devices at each shape. Flagged: behind the rest (lower "
        "MFU, or slower by TFLOP/s) by "
        "more than the margin (2% by default), with confidence, in a FLOP band or over a run of consecutive FLOP "
        "counts, with the noise taken from the scatter of shapes (not only the samples of one run) and Holm's "
        "correction over all devices. A difference within the margin is never a flag.")]
    for view in fleets:
        blocks += [Heading(3, f"{view.label} · {view.dtype} · {view.mode}"), Para(view.sentence()),
                   _fleet_table(view)]
        stem = figure_stem(view)
        if stem in figures:
            blocks.append(FigureRef(stem, _caption(FLEET_CAPTION, view.board)))
    return blocks


def board_blocks(boards: Sequence[Leaderboard], notes: Sequence[str], figures: Sequence[str],
                 fleets: Sequence[FleetView] = ()) -> list[Block]:
    """The "Leaderboard" section: per dtype and mode, one row per FLOP band, and the heatmap (for a
    leaderboard that is a fleet's own, a pointer to the fleet's heatmap, the same picture)."""
    owners = {id(f.board): f for f in fleets}
    if not boards and not notes:
        return []
    blocks: list[Block] = [Heading(2, "Leaderboard per FLOP band"), Para(
        "With many devices the report ranks them instead of comparing every pair: per FLOP band, who is ahead of "
        "or behind the reference by more than the margin (by MFU: higher or lower MFU, each device against its own "
        "peak; by TFLOP/s: faster or slower), how many are the same within it (an equivalence test) and how many "
        "ambiguous (each Holm-corrected over devices x bands), the median device and the lowest.")]
    for board in boards:
        blocks.append(Heading(3, f"{board.dtype} · {board.mode} · {_metric(board)} vs {board.reference_text()}"))
        if board.boards:  # else every device is left out: the notes below say why
            blocks.append(_board_table(board))
        stem = figure_stem(board)
        owner = owners.get(id(board))
        if stem in figures:
            blocks.append(FigureRef(stem, _caption(BOARD_CAPTION, board, reference=board.reference_text())))
        elif owner is not None and figure_stem(owner) in figures:
            blocks.append(Para(f"Its heatmap is the fleet's: {owner.label} · {owner.dtype} · {owner.mode}, above."))
        if board.notes:
            blocks.append(Bullets(board.notes))
    if notes:
        blocks.append(Bullets(tuple(notes)))
    return blocks
