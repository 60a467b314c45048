"""The report's comparison section: per pair its summary, sentence, verdict per FLOP band and crossovers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mfu_sweep.analysis.ground.series import SeriesKey
from mfu_sweep.analysis.verdicts.compare import Comparison, format_flops
from mfu_sweep.present.report.blocks import Block, Bullets, Heading, Para, Table
from mfu_sweep.present.words import metric_name, metric_phrase


def band_table(c: Comparison) -> Table:
    """One row per FLOP band: shapes used of each side (matched), ratio a/b of the metric with its interval, the
    band's own verdict in the metric's words (:meth:`~mfu_sweep.analysis.verdicts.bands.Band.call`: by MFU a lead
    is "higher MFU", never "faster"), and for a band that is part of a run's conclusion the run's, said as the
    run's ("ambiguous alone; A higher MFU taken together (over 1 GFLOP-10 GFLOP)")."""
    rows = []
    for band in c.bands:
        j = band.to_json(c.a, c.b)
        lo, hi = j["ratio_low"], j["ratio_high"]
        interval = f"[{lo:.3g}, {hi:.3g}]" if lo is not None and hi is not None else "-"
        via = (f" (over {format_flops(band.via[0])}-{format_flops(band.via[1])})" if band.via else "")
        rows.append((f"{format_flops(band.low_flops)}-{format_flops(band.high_flops)}",
                     f"{band.n} ({j['matched']} matched)", f"{j['measured_a']} / {j['measured_b']}",
                     f"x{j['ratio']:.3g} {interval}", f"{band.p_adjusted:.2g}",
                     band.call(c.a, c.b) + via))
    return Table(("FLOP band", "shapes used of each", f"measured {c.a} / {c.b}",
                  f"{c.a}/{c.b} {metric_name(c.metric)} [Holm-adjusted interval]", "p(Holm)",
                  f"verdict by {metric_name(c.metric)}"), tuple(rows))


def comparison_blocks(comparisons: Sequence[Comparison], notes: Sequence[str]) -> list[Block]:
    """The report's "Comparisons" section."""
    blocks: list[Block] = [Heading(2, "Comparisons")]
    if not comparisons:
        blocks.append(Para("Nothing to compare: no two devices share a dtype and mode."))
    for c in comparisons:
        blocks.append(Heading(3, f"{c.a} vs {c.b} · {c.dtype} · {c.mode} · by {metric_phrase(c.metric)}"))
        blocks.append(Para(f"In short: {c.summary()}"))
        if adds_segments(c):
            blocks.append(Para(f"Segment by segment: {c.sentence()}"))
        if c.bands:
            blocks.append(band_table(c))
        if c.crossovers:  # one row per change of leader: the data's interval, the fits' estimates beside
            blocks.append(Table(("method", "leader change", "crossover", f"{1 - c.alpha:.0%} interval", "the fits"),
                                tuple((x.method, f"{x.from_label} → {x.to_label}", format_flops(x.flops),
                                       f"{format_flops(x.low_flops)} – {format_flops(x.high_flops)}", _fits(x))
                                      for x in c.crossovers)))
        else:
            blocks.append(Para("No crossover found over the shared FLOP range."))
        if c.notes:
            blocks.append(Bullets(tuple(c.notes)))
    if notes:
        blocks.append(Para("Pairs not compared:"))
        blocks.append(Bullets(tuple(notes)))
    return blocks


def adds_segments(c: Comparison) -> bool:
    """Whether the segment-by-segment sentence says more than the summary (which names the longest lead):
    more than one lead, or a lead between two other stretches."""
    return sum(s.leader is not None for s in c.segments) > 1 or len(c.segments) > 2


def _pct(share: float) -> str:
    return "<1%" if 0 < share < 0.005 else f"{share:.0%}"


def crossover_text(x: Any) -> str:
    """``"chip-a → chip-b at 36 GFLOP [10 GFLOP, 46 GFLOP] (shapes; the fits cross at 30 GFLOP)"``: one change of
    leader, both estimates (:meth:`~mfu_sweep.analysis.verdicts.comparison.Crossover.text`)."""
    return x.text("→")


def _fits(x: Any) -> str:
    """Where the fits cross in this change of leader: "30 GFLOP [25 GFLOP, 34 GFLOP]", "none", or "-" (not fitted)."""
    if x.fits is None:
        return "-"
    return "; ".join(f"{format_flops(f)} [{format_flops(lo)}, {format_flops(hi)}]" for f, lo, hi in x.fits) or "none"


def comparison_facts(key: SeriesKey, comparisons: Sequence[Comparison]) -> list[tuple[str, str]]:
    """The summary, verdict and crossovers of every comparison ``key`` takes part in."""
    rows = []
    for c in comparisons:
        if (c.dtype, c.mode) != (key.dtype, key.mode) or key.label not in (c.a, c.b):
            continue
        other = c.b if key.label == c.a else c.a
        crossings = "; ".join(crossover_text(x) for x in c.crossovers) or "none"
        s = c.lead_summary()
        shares = "no shapes in a common FLOP range" if s is None else (
            f"{key.label} leads over {_pct(s.share_a if key.label == c.a else s.share_b)}, {other} over "
            f"{_pct(s.share_b if key.label == c.a else s.share_a)}, "
            + (f"the same within {c.margin * 100:.3g}% over {_pct(s.share_same)}, " if c.margin > 0 else "")
            + f"ambiguous over {_pct(s.share_ambiguous)} of the shared FLOP range")
        rows.append((f"vs {other}", f"{shares}; crossovers: {crossings} (details under Comparisons: "
                     f"{c.a} vs {c.b} · {c.dtype} · {c.mode})"))
    return rows
