"""Shapes one side measured: calibration of compare's model-based points (issue 35), SYNTHETIC and on real splits.

Run:  python benchmarks/unmatched_shapes.py                    # both tables (several minutes on 2 cores)
      python benchmarks/unmatched_shapes.py --only synthetic --seeds 200
      python benchmarks/unmatched_shapes.py --only real --splits 3

``synthetic``: SYNTHETIC sides that measured their OWN shape lists (tests/synthetic_aspect.py): 250 shapes each,
side a preferring skinny shapes and side b square ones (``prefer`` 1.5: mean spread of log2 M, N, K 1.2 against
0.5; 3.0: 1.6 against 0.4), up to 2x slower at equal FLOPs for the skinniest shapes, per-shape offsets up to
10% (common to both devices, or each its own) and 2% noise. Per case: the share of seeds with a false band
lead (identical devices; goal <= 5%), and with a 10% lead of a the share of bands called for a (goal >= 80%) and
of seeds with a band called for b. The ``FLOP pairs`` column is round 4's method on the same draws (each
unmatched shape paired with the other side's nearest in FLOPs, within 12% and one half-decade), kept here
only as the reference it replaces.

``real``: two REAL published series that measured the same shapes (every pair of sweeps/published/ sharing a
dtype and at least 20 shapes), split into sides with their own lists (tests/synthetic_aspect.py's
``split_table``: 30% of the shapes on both sides; the rest on one side only, the skinnier half on a and the
squarer half on b, or at random); every value stays a published one. Scored against the matched shapes alone
in every band with >= 5 of them: a lead those matches do not show beyond the margin (goal: none), and the
band's ratio against the matches' geometric mean (goal: within 10%) and against their Hodges-Lehmann ratio
(the band test's estimator). The full tables, unsplit, give the baseline of the Hodges-Lehmann ratio against
the geometric mean of the same shapes.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from synthetic_aspect import AspectModel, aspect_calls, curve, draw_sides, split_goals, split_table  # noqa: E402

from mfu_sweep.analysis.ground.series import group_series  # noqa: E402
from mfu_sweep.analysis.verdicts.bands import band_verdicts  # noqa: E402
from mfu_sweep.analysis.verdicts.compare import compare_series  # noqa: E402
from mfu_sweep.analysis.verdicts.curves import _log_metric  # noqa: E402
from mfu_sweep.records.results import load_sweeps  # noqa: E402

LEAD = math.log(1.1)


def flop_pairs(va: dict[str, float], vb: dict[str, float]) -> list[tuple[float, float, float]]:
    """Round 4's reference (removed from compare): matched shapes, then unmatched shapes paired by FLOPs (the
    smaller side's in FLOP order, each taking the nearest unused shape of the other side within 12% in FLOPs
    in one half-decade). (FLOPs, log a, log b) per point."""
    ca, cb = curve("a", va), curve("b", vb)
    out = [(ca.shapes[n][0], float(_log_metric(math.log(ca.shapes[n][0]), ca.shapes[n][1], ca)[0]),
            float(_log_metric(math.log(cb.shapes[n][0]), cb.shapes[n][1], cb)[0])) for n in va.keys() & vb.keys()]
    only_a = sorted((ca.shapes[n][0], va[n]) for n in va.keys() - vb.keys())
    only_b = sorted((cb.shapes[n][0], vb[n]) for n in vb.keys() - va.keys())
    small, large, flip = (only_a, only_b, False) if len(only_a) <= len(only_b) else (only_b, only_a, True)
    free = [True] * len(large)
    for f, y in small:
        level = math.floor(math.log10(f) * 2 + 1e-9)
        best = min(((abs(math.log10(g / f)), j) for j, (g, _) in enumerate(large)
                    if free[j] and math.floor(math.log10(g) * 2 + 1e-9) == level), default=None)
        if best is None or best[0] > 0.05:
            continue
        free[best[1]] = False
        g, z = large[best[1]]
        out.append((math.sqrt(f * g), z, y) if flip else (math.sqrt(f * g), y, z))
    return sorted(out)


def flop_pair_rate(model: AspectModel, seeds: int, seed: int) -> tuple[float, float]:
    """Round 4's method on the draws of :func:`aspect_calls`: share of seeds with a band lead (for a with a
    planted lead: share of bands called for a)."""
    rng = np.random.default_rng(seed)
    states = []
    for _ in range(seeds):
        pts = flop_pairs(*draw_sides(model, rng))
        f, a, b = (np.array(x) for x in zip(*pts, strict=True))
        states.append([band.state for band in band_verdicts(f, a[None, :], b[None, :])])
    return (float(np.mean([any(s in (1, -1) for s in row) for row in states])),
            float(np.mean([s == 1 for row in states for s in row])))


def synthetic_table(seeds: int) -> None:
    rows = [("null, no shape in common", AspectModel(prefer=1.5)),
            ("null, 20% of shapes in common", AspectModel(prefer=1.5, matched=0.2)),
            ("null, per-device offsets", AspectModel(prefer=1.5, common=False)),
            ("null, batched (b = 1, 2, 4)", AspectModel(prefer=1.5, batched=True)),
            ("a 10% faster, no shape in common", AspectModel(prefer=1.5, lead=LEAD)),
            ("a 10% faster, 20% in common", AspectModel(prefer=1.5, matched=0.2, lead=LEAD)),
            ("null, no shape in common, prefer 3", AspectModel(prefer=3.0)),
            ("null, per-device offsets, prefer 3", AspectModel(prefer=3.0, common=False)),
            ("a 10% faster, no shape in common, prefer 3", AspectModel(prefer=3.0, lead=LEAD))]
    print("| case (SYNTHETIC, 250 shapes per side) | seeds | false band leads (seeds) | bands called for a "
          "| seeds with a band for b | bands | weight of matched shapes | FLOP pairs (round 4) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, model in rows:
        t = time.time()
        calls = aspect_calls(model, seeds, seed=21)
        lead = model.lead > 0
        false = float(np.mean([any(s in (1, -1) for s, _, _ in bands) for bands in calls]))
        power = float(np.mean([s == 1 for bands in calls for s, _, _ in bands]))
        wrong = float(np.mean([any(s == -1 for s, _, _ in bands) for bands in calls]))
        weight = float(np.mean([w for bands in calls for _, _, w in bands]))
        old_false, old_power = flop_pair_rate(model, min(seeds, 60), seed=21)
        sd = math.sqrt(max(false * (1 - false), 1e-12) / seeds)
        print(f"| {name} | {seeds} | {'-' if lead else f'{false:.1%} (MC sd {sd:.1%})'} | "
              f"{f'{power:.0%}' if lead else '-'} | {wrong:.1%} | {np.mean([len(b) for b in calls]):.1f} | "
              f"{weight:.2f} | {f'{old_power:.0%} called for a' if lead else f'{old_false:.0%} false'} |",
              flush=True)
        print(f"<!-- {time.time() - t:.0f} s -->", file=sys.stderr)


def real_table(splits: int) -> None:
    series = group_series(load_sweeps(sorted((ROOT / "sweeps" / "published").glob("*.json"))))
    groups: dict[str, list] = {}
    for key, s in series.items():
        groups.setdefault(key.dtype, []).append(s)
    full_off = []
    scored = against = 0
    off_geo, off_hl, comparisons = [], [], 0
    for _, members in sorted(groups.items()):
        for sa, sb in combinations(sorted(members, key=lambda s: s.label), 2):
            if len({str(r.shape) for r in sa.records} & {str(r.shape) for r in sb.records}) < 20:
                continue
            whole = compare_series(sa, sb, "tflops", use_fit=False)
            for band in whole.bands:
                d = [math.log(p.ratio) for p in whole.points[band.start:band.stop]]
                full_off.append(abs(band.estimate - float(np.mean(d))))
            for seed in range(splits):
                for adversarial in (True, False):
                    xa, xb = split_table(sa, sb, 0.3, np.random.default_rng(seed), adversarial)
                    c = compare_series(xa, xb, "tflops", use_fit=False)
                    n, bad, _ = split_goals(c, c.margin)
                    scored, against, comparisons = scored + n, against + bad, comparisons + 1
                    for band in c.bands:
                        d = [math.log(p.ratio) for p in c.points[band.start:band.stop] if p.method == "matched"]
                        if len(d) >= 5:
                            off_geo.append(abs(band.estimate - float(np.mean(d))))
                            hl = compare_hl(d)
                            off_hl.append(abs(band.estimate - hl))

    def share(x: list[float]) -> str:
        r = np.exp(np.array(x))
        return f"{np.mean(r > 1.1):.1%} (median x{np.median(r):.3f}, max x{r.max():.3f})"

    print("| real splits (published pairs, 30% matched) | comparisons | bands with >= 5 matches | leads the "
          "matches do not show beyond the margin | band ratio > 10% off the matches' geometric mean | ... off "
          "their Hodges-Lehmann ratio |")
    print("|---|---|---|---|---|---|")
    print(f"| {splits} seeds x (skinnier half on a, at random) | {comparisons} | {scored} | {against} | "
          f"{share(off_geo)} | {share(off_hl)} |")
    print(f"\nbaseline, the full tables unsplit ({len(full_off)} bands): the band's Hodges-Lehmann ratio > 10% off "
          f"the geometric mean of the same shapes in {share(full_off)}")


def compare_hl(d: list[float]) -> float:
    from mfu_sweep.analysis.verdicts.band_tests import hodges_lehmann

    return hodges_lehmann(np.array(d), 0.05)[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--splits", type=int, default=2)
    ap.add_argument("--only", choices=("synthetic", "real"), default=None)
    args = ap.parse_args()
    if args.only in (None, "synthetic"):
        synthetic_table(args.seeds)
        print()
    if args.only in (None, "real"):
        real_table(args.splits)


if __name__ == "__main__":
    main()
