"""Full calibration table of the statistics on SYNTHETIC data: false leads and interval coverage per layout.

Run:  make calibration    (or: .venv/bin/python benchmarks/calibration.py [--seeds 400] [--part compare ...])

Every number comes from tests/synthetic.py and tests/calibration_cases.py
(made-up chips, nothing measured). The cases are those of
tests/test_calibration.py, more of them and with more seeds:

* compare: identical chips with unequal passes (1/2/3/5), per-pass offsets, a
  slow drift in FLOP order or shuffled, imported single values (1 pass)
  against multi-pass sweeps, through compare's calls; false-lead rate (seeds
  with a band verdict) and the coverage of the 95% intervals per shape
  (``ratio_low``/``ratio_high``) and per band;
* crossovers: the seed's pattern at +-10%; how often both crossovers are found
  and how often their ``[low_flops, high_flops]`` holds the true crossing;
* fleets of 2, 3, 4 and 8 devices: seeds with a healthy device called ahead,
  behind or flagged, and the coverage of the band intervals (``cells[].low/high``);
* fits: coverage of the 95% intervals of P, W and t0;
* round6: the long versions of tests/test_properties_evidence.py and tests/test_properties_steps.py: a
  calibrated band test's false leads with a 3% calibration error, fleet p-values under the null, the coverage
  of the fleet's predicted values and of the steps break-even at R = 2, 3, 5.

Each false-lead cell also prints the one-sided 95% upper confidence bound of
the rate (Clopper-Pearson), so "<= 5%" is read with its sampling error.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from calibration_cases import (  # noqa: E402  (SYNTHETIC cases live in tests/)
    DRIFT,
    FIT_TRUTH,
    PASS_OFFSETS,
    PER_SHAPE_2,
    PER_SHAPE_5,
    FleetCase,
    PairCase,
    score_compare,
    score_crossovers,
    score_fit,
    score_fleet,
)
from scipy.stats import beta  # noqa: E402
from synthetic import NoiseModel  # noqa: E402

CROSSINGS = (PairCase("1 vs 1", PER_SHAPE_2, (1, 1)), PairCase("3 vs 1", PER_SHAPE_2, (3, 1)),
             PairCase("2 vs 2", PER_SHAPE_2, (2, 2)), PairCase("5 vs 2", PER_SHAPE_5, (5, 2)),
             PairCase("2 vs 2, FLOP order", DRIFT, (2, 2), shuffle=False),
             PairCase("3 vs 3, per-pass offsets", PASS_OFFSETS, (3, 3)))
FLEETS = (*(FleetCase(f"{n} identical", n) for n in (2, 3, 4, 8)),
          *(FleetCase(f"{n}, one 15% slow at 1-100 GFLOP", n, slow=((1, (1.15, 1e9, 1e11)),)) for n in (2, 3, 4, 8)))
FITS = (("per-shape 2%", PER_SHAPE_2, 1, True), ("per-shape 2%", PER_SHAPE_2, 3, True),
        ("per-pass offsets 1%", PASS_OFFSETS, 2, True), ("per-pass offsets 1%", PASS_OFFSETS, 5, True),
        ("drift", DRIFT, 1, False), ("drift", DRIFT, 2, False), ("drift", DRIFT, 3, True))


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _upper(k: int, n: int) -> float:
    """One-sided 95% Clopper-Pearson upper bound of a rate seen k times in n."""
    return 1.0 if k >= n else float(beta.ppf(0.95, k + 1, n - k))


COMPARE = (
    PairCase("1 vs 1", PER_SHAPE_2, (1, 1)), PairCase("1 vs 1", PER_SHAPE_5, (1, 1)),
    PairCase("1 vs 3", PER_SHAPE_2, (1, 3)), PairCase("2 vs 2", PER_SHAPE_2, (2, 2)),
    PairCase("5 vs 2", PER_SHAPE_5, (5, 2)), PairCase("2 vs 5", PER_SHAPE_5, (2, 5)),
    PairCase("3 vs 2", PASS_OFFSETS, (3, 2)), PairCase("5 vs 5", PASS_OFFSETS, (5, 5)),
    PairCase("2 vs 2", NoiseModel("per-pass offsets 3%", shape_shift=0.01, pass_shift=0.03), (2, 2)),
    PairCase("2 vs 2, FLOP order", DRIFT, (2, 2), shuffle=False),
    PairCase("3 vs 3, FLOP order", DRIFT, (3, 3), shuffle=False),
    PairCase("2 vs 2, shuffled", DRIFT, (2, 2)), PairCase("1 vs 1, FLOP order", DRIFT, (1, 1), shuffle=False),
    PairCase("1 vs 1, shuffled", DRIFT, (1, 1)),
)


def compare(seeds: int) -> None:
    print(f"\nWhat compare reports, identical SYNTHETIC chips, {seeds} seeds: seeds with a band verdict (95% upper "
          "bound) / per-shape coverage / band-interval coverage")
    print("| noise | passes (a vs b) | method | false leads | shape coverage | band coverage |")
    print("|---|---|---|---:|---:|---:|")
    for case in COMPARE:
        s = score_compare(case, seeds, seed=1)
        print(f"| {case.model.name} | {case.name} | {'/'.join(sorted(s.methods))} | "
              f"{_pct(s.false_leads / seeds)} (<= {_pct(_upper(s.false_leads, seeds))}) | {_pct(s.point_coverage)} | "
              f"{_pct(s.band_coverage)} |", flush=True)


def crossings(seeds: int) -> None:
    print(f"\nThe seed's crossovers (+-10%), {seeds} seeds: both found / interval holds the true crossing / "
          "a lead for the wrong chip")
    print("| noise | passes | found | coverage | wrong |")
    print("|---|---|---:|---:|---:|")
    for case in CROSSINGS:
        s = score_crossovers(case, seeds, seed=3)
        cover = _pct(s.coverage) if s.found else "—"
        print(f"| {case.model.name} | {case.name} | {_pct(s.found / seeds)} | {cover} | "
              f"{_pct(s.wrong / seeds)} |", flush=True)


def fleets(seeds: int) -> None:
    print(f"\nFleets (per-shape noise 3%), {seeds} seeds: seeds with a healthy device called or flagged / "
          "band-interval coverage / slow device found")
    print("| fleet | false flags | band coverage | slow found |")
    print("|---|---:|---:|---:|")
    for case in FLEETS:
        s = score_fleet(case, seeds, seed=100)
        found = _pct(s.slow_found / seeds) if case.slow else "—"
        print(f"| {case.name} | {_pct(s.false_flags / seeds)} (<= {_pct(_upper(s.false_flags, seeds))}) | "
              f"{_pct(s.coverage)} | {found} |", flush=True)


def fits(seeds: int) -> None:
    print(f"\nRoofline fits of one SYNTHETIC chip, {seeds} seeds, 100 bootstrap refits: coverage of P, W, t0")
    print("| noise | passes | order | P | W | t0 | not constrained |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for name, model, repeats, shuffle in FITS:
        s = score_fit(model, repeats, seeds, shuffle=shuffle)
        cells = " | ".join(_pct(s.coverage(k)) for k in FIT_TRUTH)
        print(f"| {name} | {repeats} | {'shuffled' if shuffle else 'FLOP order'} | {cells} | "
              f"{s.unconstrained} |", flush=True)


def round6(seeds: int) -> None:
    """The long versions of round 6's property tests (issue 52) (their helpers, with more seeds)."""
    from test_properties_evidence import calibrated_false_leads, fleet_p_values, prediction_coverage
    from test_properties_steps import break_even_coverage

    leads = calibrated_false_leads(seeds)
    print(f"\nCalibrated band test, 3% calibration error, {seeds} seeds: {leads} with a lead "
          f"({_pct(leads / seeds)}, <= {_pct(_upper(leads, seeds))})")
    print("\nFleet p-values of identical devices (margin 0): share below 1% / 5% / 20%")
    print("| devices | per shape | per band |")
    print("|---:|---|---|")
    for n in (2, 3, 5):
        shape_p, cell_p = fleet_p_values(n, max(seeds // 2, 50))
        cols = [" / ".join(_pct(float((p < a).mean())) for a in (0.01, 0.05, 0.2)) for p in (shape_p, cell_p)]
        print(f"| {n} | {cols[0]} | {cols[1]} |", flush=True)
    hits, total = prediction_coverage(max(seeds // 10, 20))
    print(f"\nPredicted values' 95% intervals: {hits} of {total} hold the truth ({_pct(hits / total)})")
    print("\nBreak-even N, 95% interval (analytic-noise steps)")
    print("| passes | coverage | median width / N |")
    print("|---:|---:|---:|")
    for repeats in (2, 3, 5):
        n = seeds * 5
        hits, width = break_even_coverage(repeats, n)
        print(f"| {repeats} | {_pct(hits / n)} | {width:.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=400, help="seeds per pair row (default 400)")
    parser.add_argument("--fleet-seeds", type=int, default=200, help="seeds per fleet row (default 200)")
    parser.add_argument("--fit-seeds", type=int, default=100, help="seeds per fit row (default 100)")
    parser.add_argument("--part", nargs="*", choices=("compare", "crossings", "fleets", "fits", "round6"),
                        default=["compare", "crossings", "fleets", "fits"], help="which tables (default all)")
    args = parser.parse_args()
    start = time.monotonic()
    for part in args.part:
        {"compare": lambda: compare(args.seeds),
         "crossings": lambda: crossings(max(args.seeds // 4, 20)),
         "fleets": lambda: fleets(args.fleet_seeds), "fits": lambda: fits(args.fit_seeds),
         "round6": lambda: round6(args.seeds)}[part]()
    print(f"\n({time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
