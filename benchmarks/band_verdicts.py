"""Band verdicts (``compare``): false leads, power, and agreement with win shares on published pairs.

Run:  python benchmarks/band_verdicts.py                 # all three tables (a few minutes on 2 cores)
      python benchmarks/band_verdicts.py --only published
      python benchmarks/band_verdicts.py --seeds 1000

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

from synthetic_bands import PairModel, band_calls, grid_flops  # noqa: E402

from mfu_sweep.analysis.series import group_series  # noqa: E402
from mfu_sweep.analysis.verdicts.bands import band_edges  # noqa: E402
from mfu_sweep.analysis.verdicts.compare import compare_series  # noqa: E402
from mfu_sweep.analysis.verdicts.evidence import holm  # noqa: E402
from mfu_sweep.results import load_sweeps  # noqa: E402

FLOPS = grid_flops()


def calls(model: PairModel, seeds: int, repeats: int, seed: int) -> np.ndarray:
    return band_calls(model, FLOPS, seeds, repeats, seed)


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
        rate = float((c != 0).any(axis=1).mean())
        print(f"| {name} | {repeats} | {seeds} | {rate:.1%} (MC sd {math.sqrt(rate * (1 - rate) / seeds):.1%}) |")


def power_table(seeds: int) -> None:
    sizes = [e - s for s, e, _, _ in band_edges(FLOPS)]
    print("| planted lead (SYNTHETIC) | noise per shape | bands | power per band (shapes: power) | seeds calling b |")
    print("|---|---|---|---|---|")
    for noise in (0.01, 0.02):
        model = PairModel(offset=0.2, shape_noise=noise, lead=(0.02, 0.05), lead_share=0.7)
        c = calls(model, seeds, 1, seed=12)
        power = ", ".join(f"{n}: {float((c[:, k] == 1).mean()):.0%}" for k, n in enumerate(sizes))
        wrong = float((c == -1).any(1).mean())
        print(f"| 2-5% on 70% of shapes | {noise:.0%} | {len(sizes)} | {power} | {wrong:.1%} |")


def published_table() -> None:
    sweeps = load_sweeps(sorted((ROOT / "sweeps" / "published").glob("*.json")))
    series = group_series(sweeps)
    groups: dict[tuple[str, str], list] = {}
    for key, s in series.items():
        groups.setdefault((key.dtype, key.mode), []).append(s)
    print("| pair | dtype | bands | clear bands (sign p<0.01, Holm) | matched | per band: a wins/b wins: leader |")
    print("|---|---|---|---|---|---|")
    total = agree = 0
    for (dtype, _), members in sorted(groups.items()):
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
            print(f"| {sa.label} vs {sb.label} | {dtype} | {len(c.bands)} | {len(clear)} | {len(ok)}{mark} | "
                  f"{'; '.join(cells)} |")
    print(f"\nclear bands: {total}, band verdict names their winner: {agree}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=400)
    ap.add_argument("--only", choices=("false", "power", "published"), default=None)
    args = ap.parse_args()
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
