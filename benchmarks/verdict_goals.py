"""Issue 48's measured goals on the published data (counts, not timings): DeepBench rows per chip, fit crossovers
toward a side that leads nowhere, lines per change of leader, runs called "the same" over a band past the margin,
bands called ambiguous with their printed interval past the margin, model-based bands whose exact matches disagree,
split leads that say so, and fp8 pairs across formats.

    python benchmarks/verdict_goals.py                    # every pair of sweeps/published/, by TFLOP/s and MFU
    python benchmarks/verdict_goals.py --mamf DIR         # and the pairs of imported mamf-finder logs in DIR
    python benchmarks/verdict_goals.py --fit-n-boot 60    # fewer bootstrap draws of each fit (faster)

Every pair of series sharing a dtype and mode is compared with fits (each series fitted once), by TFLOP/s and, where
both have a peak, by MFU. The counts read only what a comparison holds (bands, runs, crossovers, notes), so the
script also runs against an older checkout (``PYTHONPATH=OLD``, from outside this folder) to give the "before".
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def sheet_rows(path: Path) -> dict[str, int]:
    """Rows of each results sheet's GEMM section, counted from the workbook itself (openpyxl, not the importer)."""
    import openpyxl

    wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    out = {}
    for ws in wb.worksheets:
        rows = [tuple(r) for r in ws.iter_rows(values_only=True)]
        start = next((i for i, r in enumerate(rows) if r and isinstance(r[0], str)
                      and r[0].strip().lower() == "dense matrix multiplication"), None)
        if start is None:
            continue
        n = 0
        for r in rows[start + 1:]:
            if r and isinstance(r[0], str):
                break
            n += bool(r) and any(c is not None for c in r)
        out[ws.title] = n
    wb.close()
    return out


def deepbench_table(published: Path) -> None:
    from mfu_sweep.records.results import load_sweeps

    print("| chip | sheet rows per sheet | imported records per dtype | layouts |")
    print("|---|---|---|---|")
    for xlsx in sorted((ROOT / "data" / "published" / "deepbench").glob("DeepBench_*.xlsx")):
        key = xlsx.stem.removeprefix("DeepBench_")
        (sweep,) = load_sweeps([published / f"{key}.json"])
        per = Counter(r.dtype for r in sweep.records)
        lay = Counter(f"{r.dtype} {r.shape.layout}" for r in sweep.records)
        print(f"| {key} | {', '.join(str(n) for n in sheet_rows(xlsx).values())} | "
              f"{', '.join(f'{d} {n}' for d, n in sorted(per.items()))} | "
              f"{', '.join(f'{k} {n}' for k, n in sorted(lay.items()))} |")


def _state(band: Any) -> int:
    return band.state or (band.via[3] if band.via is not None else 0)


def _interval(band: Any) -> tuple[float, float]:
    """The printed interval (log): what ``to_json`` writes as ratio_low/ratio_high (older code: the 95% one)."""
    j = band.to_json("a", "b")
    lo, hi = j["ratio_low"], j["ratio_high"]
    return (math.log(lo) if lo else -math.inf), (math.log(hi) if hi else math.inf)


def _changes(c: Any) -> int:
    leads = [s for s in (_state(b) for b in c.bands) if s in (1, -1)]
    return sum(x != y for x, y in zip(leads, leads[1:], strict=False))


def _fit_crossings(c: Any) -> list[tuple[float, str, str]]:
    """Every fit crossing the comparison reports as a claim: a line of method fit, or one merged into a data line."""
    out = [(x.flops, x.from_label, x.to_label) for x in c.crossovers if x.method == "fit"]
    for x in c.crossovers:
        out += [(f[0], x.from_label, x.to_label) for f in (getattr(x, "fits", None) or ())]
    return out


def _leads_nowhere(c: Any, flops: float, frm: str, to: str) -> bool:
    before = 1 if frm == c.a else -1
    below = any(_state(b) == before for b in c.bands if b.median_flops < flops)
    above = any(_state(b) == -before for b in c.bands if b.median_flops > flops)
    return not (below and above)


def audit(c: Any, counts: Counter, sides: tuple[Any, Any]) -> None:
    delta = math.log1p(c.margin)
    counts["comparisons"] += 1
    counts["bands"] += len(c.bands)
    counts["changes of leader"] += _changes(c)
    counts["crossover lines"] += len(c.crossovers)
    counts["comparisons with lines != changes"] += len(c.crossovers) != _changes(c)
    fits = _fit_crossings(c)
    counts["fit crossings reported"] += len(fits)
    counts["fit crossings toward a side that leads nowhere"] += sum(_leads_nowhere(c, *f) for f in fits)
    counts["fit crossings noted as unsupported"] += len(c.fit_only)
    for r in c.runs:
        if r.state == 2:
            counts["runs called the same"] += 1
            counts["runs the same over a band past the margin"] += any(
                abs(b.estimate) >= delta for b in c.bands[r.first:r.last + 1])
    for b in c.bands:
        lo, hi = _interval(b)
        past = 1 if lo > delta else -1 if hi < -delta else 0
        counts["bands ambiguous with the printed interval past the margin"] += b.state == 0 and past != 0
        counts["bands called a lead against the printed interval"] += b.verdict != 0 and past != b.verdict
        counts["bands called the same against the printed interval"] += b.same and not (-delta < lo and hi < delta)
        split = b.split
        if split is not None and split.matched and split.model:  # decided through the local model
            counts["bands decided through the model with exact matches"] += 1
            own_lo, own_hi = b.low, b.high
            outside = not own_lo <= math.log(split.ratio_matched) <= own_hi
            counts["... exact matches outside its interval, still a lead"] += outside and b.verdict != 0
        if getattr(split, "outside", None) is not None:
            counts["bands whose exact matches disagree with the model (said so)"] += 1
        if b.verdict:
            ahead = b.wins_a if b.verdict > 0 else b.wins_b
            if ahead < 2 / 3 * b.n:
                counts["split leads (under 2/3 of shapes for the leader)"] += 1
                counts["... saying how many go the other way"] += "the other way" in b.call(c.a, c.b)
    if c.dtype.startswith("fp8"):
        formats = [{r.extra.get("fp8_format") for r in s.records} for s in sides]
        if formats[0] != formats[1]:
            counts["fp8 comparisons across formats (as the records say)"] += 1
            counts["... saying so"] += any(n.startswith("fp8 formats differ") for n in c.notes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--published", type=Path, default=ROOT / "sweeps" / "published")
    ap.add_argument("--mamf", type=Path, default=None, help="folder of imported mamf-finder sweeps")
    ap.add_argument("--fit-n-boot", type=int, default=200)
    args = ap.parse_args()
    from mfu_sweep.analysis.fits.fit import fit_series
    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.analysis.verdicts.compare import CompareError, compare_series
    from mfu_sweep.records.results import load_sweeps

    if (ROOT / "data" / "published" / "deepbench").is_dir():
        deepbench_table(args.published)
        print()
    files = sorted(args.published.glob("*.json")) + (sorted(args.mamf.glob("*.json")) if args.mamf else [])
    series = group_series(load_sweeps([str(f) for f in files]))
    groups: dict[tuple[str, str], list] = {}
    for key, s in series.items():
        groups.setdefault((key.dtype, key.mode), []).append(s)
    fits = {key: fit_series(s, seed=0, n_boot=args.fit_n_boot) for key, s in series.items()}
    counts: Counter = Counter()
    for members in groups.values():
        for sa, sb in combinations(sorted(members, key=lambda s: s.label), 2):
            for metric in ("tflops", "mfu"):
                if metric == "mfu" and None in (sa.peak_tflops, sb.peak_tflops):
                    continue
                try:
                    c = compare_series(sa, sb, metric, fit_a=fits[sa.key], fit_b=fits[sb.key],
                                       fit_n_boot=args.fit_n_boot)
                except CompareError:
                    continue
                audit(c, counts, (sa, sb))
    print("| count (every pair of " + ("sweeps/published/ and the mamf-finder logs" if args.mamf else
                                       "sweeps/published/") + ", by TFLOP/s and MFU) | n |")
    print("|---|---|")
    for key, n in counts.items():
        print(f"| {key} | {n} |")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
