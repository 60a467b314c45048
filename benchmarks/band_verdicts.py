"""Band verdicts (``compare``): false leads, power, agreement with win shares on published pairs, and the
measured goals of the four verdicts (margin, measured shapes only, power across bands).

Run:  python benchmarks/band_verdicts.py                 # the synthetic and published tables (minutes on 2 cores)
      python benchmarks/band_verdicts.py --only published
      python benchmarks/band_verdicts.py --seeds 1000
      python benchmarks/band_verdicts.py --only real --mamf DIR --xla sweeps/published/sm_90.json
          # DIR: real mamf-finder logs imported with `mfu-sweep import mamf-finder` (never committed)

``false``: SYNTHETIC pairs of identical devices (tests/synthetic_bands.py, a mamf-finder-like grid of
216 shapes, 256..8192): every shape shifted by a drawn factor up to 20% common to both copies, plus
per-shape and per-pass noise, with and without passes; the share of seeds with any band lead
(family-wise, goal <= 5%).

``power``: SYNTHETIC planted leads of 2-5% on 70% of the shapes (every band), 1% or 2% noise per shape
and device; the share of (seed, band) called for a, per band size, and of seeds where a band is
called for b (goal >= 80% power).

``published``: every DeepBench and OpenXLA pair of sweeps/published/ with the same dtype. Win shares
are counted here, independently of compare (shapes both sources measured, per band of compare); a
band's sign test (two-sided binomial on wins vs losses, Holm over the pair's bands) is "clear" at
p < 0.01; the band verdict "matches" when it names the winner of every clear band (and no verdict
ever names the loser of a clear band).

``disjoint``: SYNTHETIC identical devices that measured DISJOINT halves of one grid (shape effects up to 20%,
the same population on both sides), each side's shapes against the other side's prediction there (compare's
model-based points): false leads (goal <= 5%). Sides with their own aspects: benchmarks/unmatched_shapes.py.

``seedlike``: the SYNTHETIC seed-like pair at the default accelerator design (one square shape per FLOP count,
4 per decade from 10 MFLOP to 10 TFLOP, 3 passes, 2% run-to-run noise per pass and shape): 10% leads within a
quarter decade of 1e9, 1e11 and 1e12 found (an a-lead band within 0.25 decade), and identical devices called
"the same" over what share of the range (band by band, or taken together over a run of bands), at 4 and 8
shapes per decade.

``audit``: every pair of sweeps/published/ sharing a dtype (and of ``--mamf`` logs when given), by TFLOP/s and
by MFU where both have a peak: bands called a lead or "the same" against their own interval (goal 0), bands
labelled although their own test does not call them (goal 0), and band calls, segments and sentences by MFU
that say "faster" or "slower" (goal 0).

``real``: imported real logs (``--mamf``): each log against ``--xla`` (mixed sources: no band uses more
points than the side with fewer measured shapes in it), and pairs of logs of one node (share "the same
within 2%", crossovers).
"""

from __future__ import annotations

import argparse
import math
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from synthetic_bands import MAMF_SIZES, PairModel, band_calls, disjoint_calls, grid_flops, seed_like  # noqa: E402

from mfu_sweep.analysis.ground.series import group_series  # noqa: E402
from mfu_sweep.analysis.verdicts.bands import band_edges  # noqa: E402
from mfu_sweep.analysis.verdicts.compare import compare_across, compare_series  # noqa: E402
from mfu_sweep.analysis.verdicts.evidence import holm  # noqa: E402
from mfu_sweep.records.results import load_sweeps  # noqa: E402

FLOPS = grid_flops()


def calls(model: PairModel, seeds: int, repeats: int, seed: int, **kw: object) -> np.ndarray:
    """Band states: +1/-1 leads, 2 the same within the margin, 0 ambiguous. One pass through a drift along FLOP
    order is a series measured in FLOP order (the drift factor applies); other one-pass rows are tables."""
    if repeats == 1 and model.drift:
        kw = {"ordered": True, **kw}
    return band_calls(model, FLOPS, seeds, repeats, seed, **kw)


def false_table(seeds: int) -> None:
    rows = [("offsets <= 20% common, 2% shape noise", PairModel(offset=0.2, shape_noise=0.02), 1),
            ("offsets <= 20% common, 5% shape noise", PairModel(offset=0.2, shape_noise=0.05), 1),
            ("offsets <= 20% per device (shape x device)", PairModel(offset=0.2, common=False), 1),
            ("offsets <= 20% common, 2% shape + 2% pass noise", PairModel(offset=0.2, pass_noise=0.02), 3),
            ("offsets <= 20% common, 2% drift along FLOP order", PairModel(offset=0.2, drift=0.02), 3),
            ("offsets <= 20% common, 2% drift along FLOP order", PairModel(offset=0.2, drift=0.02), 1)]
    print(f"| null (SYNTHETIC, {len(FLOPS)} shapes) | passes | seeds | false band leads (family-wise) |")
    print("|---|---|---|---|")
    for name, model, repeats in rows:
        c = calls(model, seeds, repeats, seed=11)
        rate = float(np.isin(c, (1, -1)).any(axis=1).mean())
        print(f"| {name} | {repeats} | {seeds} | {rate:.1%} (MC sd {math.sqrt(rate * (1 - rate) / seeds):.1%}) |")


def power_table(seeds: int) -> None:
    sizes = [e - s for s, e, _, _ in band_edges(FLOPS)]
    print("| planted lead (SYNTHETIC) | noise per shape | margin | bands | power per band (shapes: power) "
          "| seeds calling b |")
    print("|---|---|---|---|---|---|")
    for noise, margin in ((0.01, 0.0), (0.02, 0.0), (0.01, 0.02)):
        model = PairModel(offset=0.2, shape_noise=noise, lead=(0.02, 0.05), lead_share=0.7)
        c = calls(model, seeds, 1, seed=12, margin=margin)
        power = ", ".join(f"{n}: {float((c[:, k] == 1).mean()):.0%}" for k, n in enumerate(sizes))
        wrong = float((c == -1).any(1).mean())
        print(f"| 2-5% on 70% of shapes | {noise:.0%} | {margin:.0%} | {len(sizes)} | {power} | {wrong:.1%} |")


def published_table() -> None:
    sweeps = load_sweeps(sorted((ROOT / "sweeps" / "published").glob("*.json")))
    series = group_series(sweeps)
    groups: dict[tuple[str, str], list] = {}
    for key, s in series.items():
        groups.setdefault((key.dtype, key.mode), []).append(s)
    print("| pair | dtype | mode | bands | clear bands (sign p<0.01, Holm) | matched "
          "| per band: a wins/b wins: leader |")
    print("|---|---|---|---|---|---|---|")
    total = agree = 0
    for (dtype, mode), members in sorted(groups.items()):
        for sa, sb in combinations(sorted(members, key=lambda s: s.label), 2):
            ta = {r.shape: r.median_s for r in sa.records}
            tb = {r.shape: r.median_s for r in sb.records}
            shared = sorted(set(ta) & set(tb), key=lambda sh: (2 * sh.m * sh.n * sh.k * sh.batch, str(sh)))
            if len(shared) < 10:
                continue
            c = compare_series(sa, sb, "tflops", use_fit=False)
            cells, ps, wins = [], [], []
            for band in c.bands:
                lo, hi = band.low_flops, band.high_flops
                inside = [sh for sh in shared if lo <= 2 * sh.m * sh.n * sh.k * sh.batch < hi]
                wa = sum(ta[sh] < tb[sh] for sh in inside)
                wb = sum(tb[sh] < ta[sh] for sh in inside)
                ps.append(binomtest(wa, wa + wb).pvalue if wa + wb else 1.0)
                wins.append((wa, wb))
                cells.append(f"{wa}/{wb}: {({1: sa.label, -1: sb.label}.get(band.verdict)) or '-'}")
            adj = holm(ps) if ps else []
            clear = [k for k, p in enumerate(adj) if p < 0.01]
            ok = [k for k in clear if c.bands[k].verdict == (1 if wins[k][0] > wins[k][1] else -1)]
            wrong = [k for k, b in enumerate(c.bands) if b.verdict and (wins[k][0] - wins[k][1]) * b.verdict < 0
                     and adj[k] < 0.01]
            total += len(clear)
            agree += len(ok)
            mark = "" if not wrong else f" ({len(wrong)} against)"
            print(f"| {sa.label} vs {sb.label} | {dtype} | {mode} | {len(c.bands)} | {len(clear)} | {len(ok)}{mark} | "
                  f"{'; '.join(cells)} |")
    print(f"\nclear bands: {total}, band verdict names their winner: {agree}")


def disjoint_table(seeds: int) -> None:
    print(f"| null (SYNTHETIC, disjoint halves of {len(FLOPS)} shapes) | seeds | false band leads | bands 'same' |")
    print("|---|---|---|---|")
    for name, model in (("offsets <= 20% common, 2% shape noise", PairModel(offset=0.2, shape_noise=0.02)),
                        ("offsets <= 20% per device, 2% shape noise", PairModel(offset=0.2, common=False))):
        c = disjoint_calls(model, MAMF_SIZES, seeds, seed=13)
        rate = float(np.isin(c, (1, -1)).any(axis=1).mean())
        print(f"| {name} | {seeds} | {rate:.1%} (MC sd {math.sqrt(rate * (1 - rate) / seeds):.1%}) | "
              f"{float((c == 2).mean()):.0%} |")


LEADS = (1e9, 1e11, 1e12)


def _near(band: object, centre: float, tol: float) -> bool:
    x, lo, hi = math.log10(centre), math.log10(band.first_flops), math.log10(band.last_flops)
    return lo - tol <= x <= hi + tol


def seedlike_table(seeds: int) -> None:
    _, runs = seed_like(LEADS, seeds=seeds, seed=1)
    found = [float(np.mean([any(b.verdict == 1 and _near(b, c, 0.25) for b in bs) for bs in runs])) for c in LEADS]
    wrong = float(np.mean([any(b.verdict == -1 or (b.verdict == 1 and not any(_near(b, c, 0.5) for c in LEADS))
                               for b in bs) for bs in runs]))
    print("| seed-like pair, 4 shapes/decade, 3 passes, 2% noise | seeds | 10% lead found within 0.25 decade "
          "(1e9, 1e11, 1e12) | a wrong lead (b, or a far from every lead) |")
    print("|---|---|---|---|")
    print(f"| 10% leads at 1e9, 1e11, 1e12 | {seeds} | {', '.join(f'{x:.0%}' for x in found)} | {wrong:.1%} |")
    print()
    print("| identical devices, 3 passes, 2% noise | seeds | share of shapes 'the same within 2%' taken together "
          "(mean, median) | ... band by band | seeds with a lead |")
    print("|---|---|---|---|---|")
    for per_decade in (4, 8):
        _, runs = seed_like((), per_decade=per_decade, seeds=seeds, seed=2)
        share = [sum(b.n for b in bs if b.same or (b.via is not None and b.via[3] == 2)) / sum(b.n for b in bs)
                 for bs in runs]
        alone = [sum(b.n for b in bs if b.same) / sum(b.n for b in bs) for bs in runs]
        leads = float(np.mean([any(b.verdict for b in bs) for bs in runs]))
        print(f"| {per_decade} shapes per decade | {seeds} | {np.mean(share):.0%}, {np.median(share):.0%} | "
              f"{np.mean(alone):.0%} | {leads:.1%} |")


def real_table(mamf: Path, xla: Path) -> None:
    logs = sorted(mamf.glob("*.json"))
    if not logs:
        print(f"no imported logs in {mamf}")
        return
    table = load_sweeps([str(xla)])
    print("| pair | bands | points per band | measured a / b per band | points > fewer side's shapes |")
    print("|---|---|---|---|---|")
    for log in logs:
        mine = load_sweeps([str(log)])
        [sa] = group_series(mine).values()
        sb = next(s for k, s in group_series(table).items() if k.dtype == sa.dtype)
        c = compare_across([*mine, *table], f"{sa.label}/{sa.dtype}/{sa.mode}", f"{sb.label}/{sb.dtype}/{sb.mode}",
                           "tflops", use_fit=False)
        over = sum(b.n > min(b.measured_a, b.measured_b) for b in c.bands)
        print(f"| {sa.label} vs {sb.label} | {len(c.bands)} | {', '.join(str(b.n) for b in c.bands)} | "
              f"{', '.join(f'{b.measured_a}/{b.measured_b}' for b in c.bands)} | {over} |")
    print()
    print("| pair of one node | share 'the same within 2%' | a / b leads | crossovers | sentence |")
    print("|---|---|---|---|---|")
    for la, lb in combinations(logs, 2):
        [sa], [sb] = (group_series(load_sweeps([str(x)])).values() for x in (la, lb))
        if sa.dtype != sb.dtype:
            continue
        c = compare_series(sa, sb, "tflops", use_fit=False)
        s = c.lead_summary()
        cross = [x for x in c.crossovers if x.method != "fit"]
        print(f"| {sa.label} vs {sb.label} | {s.share_same:.0%} | {s.share_a:.0%} / {s.share_b:.0%} | {len(cross)} "
              f"| {c.sentence()} |")


def _against_interval(c: object) -> int:
    """Bands labelled a lead or "the same" against their printed interval (``ratio_low``/``ratio_high`` of
    ``to_json``: the Holm-adjusted one the verdict reads; before it, the own 1 - alpha one), and bands left
    ambiguous with it wholly past the margin."""
    delta = math.log1p(c.margin)
    bad = 0
    for b in c.bands:
        j = b.to_json(c.a, c.b)
        if j["ratio_low"] is None or j["ratio_high"] is None:
            bad += bool(b.verdict or b.same)
            continue
        lo, hi = math.log(j["ratio_low"]), math.log(j["ratio_high"])
        past = 1 if lo > delta else -1 if hi < -delta else 0
        bad += past != b.verdict or (b.same and not (-delta < lo and hi < delta))
    return bad


def audit_table(mamf: Path | None) -> None:
    files = sorted((ROOT / "sweeps" / "published").glob("*.json")) + (sorted(mamf.glob("*.json")) if mamf else [])
    series = group_series(load_sweeps(files))
    groups: dict[tuple[str, str], list] = {}
    for key, s in series.items():
        groups.setdefault((key.dtype, key.mode), []).append(s)
    pairs = bands = against = carried = words = 0
    for members in groups.values():
        for sa, sb in combinations(sorted(members, key=lambda s: s.label), 2):
            for metric in ("tflops", "mfu"):
                if metric == "mfu" and None in (sa.peak_tflops, sb.peak_tflops):
                    continue
                try:
                    c = compare_series(sa, sb, metric, use_fit=False)
                except ValueError:
                    continue
                pairs += 1
                bands += len(c.bands)
                against += _against_interval(c)
                carried += sum(b.via is not None and b.state != 0 for b in c.bands)
                if metric == "mfu":
                    text = " ".join([b.call(c.a, c.b) for b in c.bands] + [c.sentence(), c.summary()])
                    words += text.count("faster") + text.count("slower")
    print("| audit (real published pairs" + (" and mamf-finder logs" if mamf else "") + ") | comparisons | bands | "
          "labelled against their printed interval (or ambiguous with it past the margin) | labelled by a run, not "
          "their own test | 'faster'/'slower' by MFU |")
    print("|---|---|---|---|---|---|")
    print(f"| TFLOP/s and MFU | {pairs} | {bands} | {against} | {carried} | {words} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=400)
    ap.add_argument("--only", choices=("false", "power", "published", "disjoint", "seedlike", "real", "audit"),
                    default=None)
    ap.add_argument("--mamf", type=Path, default=None, help="folder of imported mamf-finder sweeps (--only real)")
    ap.add_argument("--xla", type=Path, default=ROOT / "sweeps" / "published" / "sm_90.json")
    args = ap.parse_args()
    if args.only == "real":
        real_table(args.mamf, args.xla)
        return
    if args.only == "audit":
        audit_table(args.mamf)
        return
    if args.only in (None, "disjoint"):
        disjoint_table(args.seeds)
        print()
    if args.only in (None, "seedlike"):
        seedlike_table(args.seeds)
        print()
    if args.only in (None, "false"):
        false_table(args.seeds)
        print()
    if args.only in (None, "power"):
        power_table(args.seeds)
        print()
    if args.only in (None, "published"):
        published_table()


if __name__ == "__main__":
    main()
