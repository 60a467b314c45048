"""Hand count of wins per FLOP decade between imported published sweeps (no statistics, no fit).

For each pair of devices and one dtype, every shape both sources measured is a win for the device
with the lower time (equal times are ties); shapes are grouped by FLOP decade. This is the count
docs/published.md sets beside `mfu-sweep compare`'s data-based verdicts, so it uses nothing of compare.

    python benchmarks/published_wins.py            # the tables of docs/published.md (sweeps/published/)
    python benchmarks/published_wins.py --dir DIR  # other imported files
"""

from __future__ import annotations

import argparse
import math
import statistics
from pathlib import Path

from mfu_sweep.records.results import Sweep, load_sweeps

PAIRS = (
    ("bf16", "sm_100_B200", "sm_90"),
    ("bf16", "gfx950", "gfx942"),
    ("bf16", "sm_100_B200", "gfx950"),
    ("bf16", "sm_90", "gfx942"),
    ("fp32", "NV_P100", "NV_TitanXp"),
)


def times(sweep: Sweep, dtype: str, layout: str = "nn") -> dict:
    """One published time per shape of ``dtype`` in one operand ``layout`` (DeepBench's nn, tn and nt rows are three
    tables, as compare keeps them three series)."""
    return {r.shape: (r.flops, r.median_s) for r in sweep.records
            if r.ok and r.dtype == dtype and r.shape.layout == layout}


def decade(flops: float) -> int:
    return math.floor(math.log10(flops))


def count(a: Sweep, b: Sweep, dtype: str, layout: str = "nn") -> list[tuple[int, int, int, int, float]]:
    """Per decade: (decade, wins of a, wins of b, ties, median time_b/time_a)."""
    ta, tb = times(a, dtype, layout), times(b, dtype, layout)
    bands: dict[int, list[tuple[float, float]]] = {}
    for shape in ta.keys() & tb.keys():
        flops, sa = ta[shape]
        bands.setdefault(decade(flops), []).append((sa, tb[shape][1]))
    out = []
    for d in sorted(bands):
        pts = bands[d]
        wa = sum(sa < sb for sa, sb in pts)
        wb = sum(sb < sa for sa, sb in pts)
        out.append((d, wa, wb, len(pts) - wa - wb, statistics.median(sb / sa for sa, sb in pts)))
    return out


def table(a: Sweep, b: Sweep, dtype: str, layout: str = "nn") -> str:
    mode = a.records[0].mode + ("" if layout == "nn" else f"-{layout}")
    rows = [f"{a.label} vs {b.label} ({dtype}, {mode}; one published value per shape)", "",
            f"| FLOP band | shapes | {a.label} faster | {b.label} faster | ties | median t({b.label})/t({a.label}) |",
            "|---|---|---|---|---|---|"]
    for d, wa, wb, tie, ratio in count(a, b, dtype, layout):
        rows.append(f"| 1e{d}-1e{d + 1} | {wa + wb + tie} | {wa} | {wb} | {tie} | {ratio:.3g} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=str(Path(__file__).resolve().parent.parent / "sweeps" / "published"))
    args = ap.parse_args()
    by_label = {s.label: s for s in load_sweeps(sorted(Path(args.dir).glob("*.json")))}
    for dtype, la, lb in PAIRS:
        if la in by_label and lb in by_label:
            a, b = by_label[la], by_label[lb]
            for layout in sorted({r.shape.layout for r in a.records} & {r.shape.layout for r in b.records}):
                print(table(a, b, dtype, layout))
                print()


if __name__ == "__main__":
    main()
