"""The report's first screen: who leads where, per dtype and mode, then the notes that change the reading.

Per dtype and mode, one *band strip*: a two-row table whose columns are the FLOP bands and whose cells name the
device that leads each band — with many devices the leaderboard's leader (ahead of the median of the others
beyond the margin, Holm-corrected), with a few the device that leads every pair it takes part in there — and
under the strips one sentence per dtype and mode saying where the leader changes (the crossovers). The metric
is named on every strip: MFU (each device against its own peak: leading means closer to its own peak) where
every device of the dtype and mode has a peak, else TFLOP/s (:mod:`mfu_sweep.present.group_metric`).
File lists, pass rates and per-series detail come after this section.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from mfu_sweep.analysis.fleet.leaderboard import Leaderboard
from mfu_sweep.analysis.verdicts.compare import Comparison
from mfu_sweep.analysis.verdicts.comparison import verdict_span
from mfu_sweep.analysis.verdicts.margin import margin_words
from mfu_sweep.present.report.blocks import Block, Bullets, Heading, Para, Table
from mfu_sweep.present.report.compare import crossover_text
from mfu_sweep.present.words import metric_name, metric_phrase, metric_words
from mfu_sweep.util.text import format_flops

HEADING = "Who leads where"
STRIP = "strip"  # the css class of a band strip
INTRO = "intro"  # the css class of the strips' one-line key
NO_LEADER = "–"  # a band no device leads beyond the margin
NOT_SHARED = ""  # a band the pair does not both cover

Group = tuple[str, str]


def short_flops(value: float) -> str:
    """``1e10 -> "10 G"``: a band edge in a strip's header."""
    return format_flops(value).removesuffix("FLOP").strip()


def band_label(low: float, high: float) -> str:
    """``"10 M–100 M"``: a FLOP band as a strip column."""
    return f"{short_flops(low)}–{short_flops(high)}"


# --------------------------------------------------------------------------- many devices: the leaderboard


def board_cells(board: Leaderboard) -> list[str]:
    """Per band of ``board``, its leader with the ratio to the reference, ``"+N"`` for the others also ahead."""
    cells = []
    for b in board.boards:
        if not b.ahead:
            cells.append(NO_LEADER)
            continue
        label, ratio = b.ahead[0]
        more = f" +{len(b.ahead) - 1}" if len(b.ahead) > 1 else ""
        cells.append(f"{label} x{ratio:.2f}{more}")
    return cells


def board_sentence(board: Leaderboard) -> str:
    """Where each device leads the leaderboard, band run by band run, and where the leader changes."""
    runs: list[list[Any]] = []  # [leader or None, first band, last band]
    for b in board.boards:
        leader = b.ahead[0][0] if b.ahead else None
        if runs and runs[-1][0] == leader:
            runs[-1][2] = b.band
        else:
            runs.append([leader, b.band, b.band])
    beyond = f" beyond {margin_words(board.margin)}" if board.margin > 0 else ""
    parts = [(f"{leader} leads" if leader else f"no device leads{beyond}")
             + f" from {format_flops(first.low_flops)} to {format_flops(last.high_flops)}"
             for leader, first, last in runs]
    changes = [f"{a[0]} → {b[0]} at {format_flops(b[1].low_flops)}" for a, b in zip(runs, runs[1:], strict=False)
               if a[0] and b[0]]
    tail = f"; the leader changes: {', '.join(changes)}" if changes else ""
    return (f"{board.dtype} · {board.mode}, by {metric_name(board.metric)} against {board.reference_text()}: "
            + ", ".join(parts) + tail + ".")


def board_strip(board: Leaderboard) -> Table:
    """The band strip of a leaderboard: its bands as columns, each band's leader."""
    head = f"{board.dtype} · {board.mode} · by {metric_name(board.metric)}"
    return Table((head, *(band_label(b.band.low_flops, b.band.high_flops) for b in board.boards)),
                 ((f"leads: {metric_words(board.metric)}", *board_cells(board)),), css=STRIP)


# --------------------------------------------------------------------------- a few devices: the pairs


def _covering(c: Comparison, x: float) -> Any:
    return next((b for b in c.bands if b.low_flops <= x < b.high_flops), None)


def pair_cells(comparisons: Sequence[Comparison]) -> list[tuple[float, float, str]]:
    """The strip of one dtype and mode from its pairs: per FLOP range between any two band edges, the device
    that leads every pair it takes part in there (with one pair, its ratio), the same, or no single leader.

    Each cell is the bands' own verdicts: a band that only a run of adjacent bands' conclusion calls (``via``)
    is no leader here, and the run is said once, as the run's, in the sentence (:func:`pair_sentence`)."""
    edges = sorted({e for c in comparisons for b in c.bands for e in (b.low_flops, b.high_flops)})
    labels = sorted({x for c in comparisons for x in (c.a, c.b)})
    out = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        mid = math.sqrt(lo * hi)
        here = [(c, band) for c in comparisons if (band := _covering(c, mid)) is not None]
        if not here:
            out.append((lo, hi, NOT_SHARED))
            continue
        leaders = [lab for lab in labels if (mine := [(c, b) for c, b in here if lab in (c.a, c.b)])
                   and all(b.verdict and (c.a if b.verdict > 0 else c.b) == lab for c, b in mine)]
        if len(leaders) == 1 and len(here) == 1:
            (c, band), = here
            ratio = math.exp(band.estimate if leaders[0] == c.a else -band.estimate)
            text = f"{leaders[0]} x{ratio:.2f}"
        elif len(leaders) == 1:
            text = leaders[0]
        elif all(b.same for _, b in here):
            text = f"the same within {margin_words(here[0][1].margin)}"
        else:
            text = NO_LEADER
        out.append((lo, hi, text))
    return out


def pair_strip(comparisons: Sequence[Comparison]) -> Table:
    """The band strip of one dtype and mode compared pair by pair."""
    c = comparisons[0]
    cells = pair_cells(comparisons)
    who = f"{c.a} vs {c.b}" if len(comparisons) == 1 else f"{len({x for p in comparisons for x in (p.a, p.b)})} devices"
    head = f"{c.dtype} · {c.mode} · by {metric_name(c.metric)}"
    return Table((head, *(band_label(lo, hi) for lo, hi, _ in cells)),
                 ((f"leads: {metric_words(c.metric)}, {who}", *(text for *_, text in cells)),), css=STRIP)


MOST_SEGMENTS = 4


def pair_sentence(c: Comparison) -> str:
    """The crossovers of one pair (or that there is none) and where each side leads, a run of adjacent bands'
    conclusion said as the run's ("A leads over 1 GFLOP-10 GFLOP taken together": its bands stay "–" on the
    strip); the pair's summary (shares of the range, the size of the longest lead) is under Comparisons."""
    head = f"{c.a} vs {c.b} ({c.dtype} · {c.mode}, by {metric_name(c.metric)}): "
    crossings = ("crossovers " + "; ".join(crossover_text(x) for x in c.crossovers) if c.crossovers
                 else "no crossover")
    leads = [f"{s.leader} leads {verdict_span(s)}" for s in c.segments if s.leader is not None]
    more = f" and {len(leads) - MOST_SEGMENTS} more leads" if len(leads) > MOST_SEGMENTS else ""
    beyond = f" beyond {margin_words(c.margin)}" if c.margin > 0 else ""
    return head + crossings + "; " + (", ".join(leads[:MOST_SEGMENTS]) + more or f"no lead{beyond}") + "."


# --------------------------------------------------------------------------- the section


def lead_blocks(comparisons: Sequence[Comparison], boards: Sequence[Leaderboard], fleet_sentences: Sequence[str],
                notes: Sequence[str], metric: str, caveat: str | None = None) -> list[Block]:
    """The first section of the report: the band strips, one sentence per dtype and mode, the notes.

    ``fleet_sentences`` are the fleet views' own sentences (replicate runs); ``notes`` what changes the
    reading (devices left out and why, dtypes and modes compared by TFLOP/s, figures not drawn); ``caveat``
    the warning line said before the strips (:func:`~mfu_sweep.present.report.caveats.caveats`).
    """
    blocks: list[Block] = [Heading(2, HEADING)]
    groups: dict[Group, list[Any]] = {}
    for item in [*boards, *comparisons]:
        groups.setdefault((item.dtype, item.mode), []).append(item)
    order = sorted(groups, key=lambda g: (g[0], g[1] != "eager", g[1]))
    if not order:
        blocks.append(Para("Nothing to compare: no two devices share a dtype and mode."))
    else:
        blocks.append(Para(f"The device that leads each FLOP band, by {metric_phrase(metric)}"
                           + (" where every device has one, else TFLOP/s" if metric == "mfu" else "")
                           + "; x: against the median of the others (or the pair's other); +N: N more ahead too; "
                           "–: none beyond the margin"
                           + (" in the band alone (a lead over a run of bands: sentences below)."
                              if any(c.runs for c in comparisons) else "."), css=INTRO))
    if caveat:
        blocks.append(Para(caveat, css="warn"))
    sentences: list[str] = []
    for group in order:
        items = groups[group]
        group_boards = [b for b in items if isinstance(b, Leaderboard)]
        pairs = [c for c in items if isinstance(c, Comparison)]
        for board in group_boards:
            blocks.append(board_strip(board))
            sentences.append(board_sentence(board))
        if pairs:
            blocks.append(pair_strip(pairs))
            sentences += [pair_sentence(c) for c in pairs]
    if sentences or fleet_sentences:
        blocks.append(Bullets((*sentences, *fleet_sentences)))
    if notes:
        blocks += [Para("Notes that change the reading:"), Bullets(tuple(notes))]
    return blocks
