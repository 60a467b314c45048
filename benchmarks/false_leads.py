"""False leads: how often a chip "leads" an identical one, and the power and coverage of each method.

Run:  .venv/bin/python benchmarks/false_leads.py [--seeds 100] [--fit-seeds 40] [--part fit] [--real]

SYNTHETIC part (the default; every number comes from tests/synthetic.py, nothing
is measured): two identical chips, 48 square shapes from 1 MFLOP to 10 TFLOP, 20
samples per shape and pass, under each noise model of ``synthetic.NOISE_MODELS``
(independent per-sample noise, per-shape run-to-run shifts of 1-5%, a slow drift
across consecutive shapes in sweep order, outlying passes), measured once in FLOP
order (R = 1, like files without a pass index) or in R = 3 passes, each shuffled.
For each method it prints

* the false-lead rate: the share of seeds in which the pair shows any lead
  (a method that controls its family-wise error at alpha = 0.05 shows <= 5%);
* the coverage of the 95% interval of the per-shape ratio (share of shapes whose
  true ratio, 1, lies inside it; pointwise, so about 95% is right);

then the power on planted uniform differences of 2-10% and on planted one-decade
leads at both ends of the range and the seed's crossover pattern (share of the
shapes with a planted lead that are called for the right chip, and the share of
seeds with a call for the wrong chip), and the ``fit`` method: a lead anywhere on
the simultaneous band of the two fitted rooflines, and the coverage of the 95%
intervals of P, W and t0 against the known truth (fit.py's own bootstrap).

Methods: ``old`` is the within-run bootstrap compare used before issue 12
(``evidence.within_run_evidence``, samples of all passes pooled per shape);
``runs`` and ``shapes`` are ``mfu_sweep.analysis.verdicts.evidence``.

REAL part (``--real``): sweeps this machine's CPU twice, N times, with the default
settings, and prints how many same-machine pairs show any lead. It lives in
``benchmarks/false_leads_real.py``, owned by the ``repeats`` branch (the
measurement side of issue 12); this file only dispatches to it, so the two halves
merge without conflicts.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from synthetic import (  # noqa: E402  (SYNTHETIC data lives in tests/)
    NOISE_MODELS,
    NoiseModel,
    SyntheticPairs,
    log_ratio_constant,
    log_ratio_seed_crossover,
    log_ratio_window,
    make_sweep_doc,
    synthetic_pairs,
)

from mfu_sweep.analysis.verdicts.evidence import Evidence, lead_evidence, within_run_evidence  # noqa: E402

ALPHA = 0.05
LAYOUTS = (("R=1, FLOP order", 1, False), ("R=3, FLOP order", 3, False), ("R=3, shuffled", 3, True))
Method = Callable[[SyntheticPairs, int], Evidence]


# -- the methods on one seed of a synthetic pair ---------------------------------------


def _log_flops(p: SyntheticPairs) -> np.ndarray:
    return p.log10_flops * math.log(10)


def old(p: SyntheticPairs, s: int) -> Evidence:
    """Within-run bootstrap of the pooled samples of each shape (the compare of before issue 12)."""
    pooled = [np.exp(x[s].transpose(1, 0, 2).reshape(x.shape[2], -1)) for x in (p.log_a, p.log_b)]
    return within_run_evidence(_log_flops(p), *pooled, alpha=ALPHA, n_boot=200, seed=s)


def runs(p: SyntheticPairs, s: int) -> Evidence:
    return lead_evidence(_log_flops(p), p.pass_values("a")[s], p.pass_values("b")[s], alpha=ALPHA, method="runs")


def shapes(p: SyntheticPairs, s: int) -> Evidence:
    return lead_evidence(_log_flops(p), p.pass_values("a")[s], p.pass_values("b")[s], alpha=ALPHA,
                         method="shapes")


METHODS: dict[str, Method] = {"old": old, "runs": runs, "shapes": shapes}


def _methods(repeats: int) -> dict[str, Method]:
    return {k: v for k, v in METHODS.items() if k != "runs" or repeats >= 2}


# -- scores ------------------------------------------------------------------------------


def _coverage(ev: Evidence, truth: np.ndarray) -> float:
    return float(np.mean((ev.low <= truth) & (truth <= ev.high)))


def _wrong(ev: Evidence, p: SyntheticPairs, margin: float = 0.5) -> bool:
    """A call for the wrong chip, or a lead more than ``margin`` decades from any planted lead."""
    lead = p.truth != 0
    if not lead.any():
        return bool((ev.verdict != 0).any())
    far = np.min(np.abs(p.log10_flops[:, None] - p.log10_flops[None, lead]), axis=1) > margin
    return bool(((ev.verdict * np.sign(p.truth)) < 0).any() or ((ev.verdict != 0) & far).any())


def score(p: SyntheticPairs, method: Method, seeds: int) -> tuple[float, float, float]:
    """(share of seeds with a wrong or false lead, pointwise coverage, power on the planted leads)."""
    lead = p.truth != 0
    wrong, cover, power = [], [], []
    for s in range(seeds):
        ev = method(p, s)
        wrong.append(_wrong(ev, p))
        cover.append(_coverage(ev, p.truth))
        power.append(float(np.mean(ev.verdict[lead] == np.sign(p.truth[lead]))) if lead.any() else math.nan)
    return float(np.mean(wrong)), float(np.mean(cover)), float(np.mean(power)) if lead.any() else math.nan


# -- tables --------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return "—" if math.isnan(x) else f"{100 * x:.0f}%"


def null_table(seeds: int) -> None:
    print(f"\nIdentical SYNTHETIC chips, {seeds} seeds: false-lead rate (any lead in the pair) / 95% coverage")
    print("| noise | layout | old | runs | shapes |")
    print("|---|---|---:|---:|---:|")
    for name, model in NOISE_MODELS.items():
        for layout, repeats, shuffle in LAYOUTS:
            p = synthetic_pairs(model, seeds=seeds, repeats=repeats, shuffle=shuffle, seed=1)
            cells = {k: score(p, m, seeds) for k, m in _methods(repeats).items()}
            row = [f"{_pct(cells[k][0])} / {_pct(cells[k][1])}" if k in cells else "—" for k in METHODS]
            print(f"| {name} | {layout} | " + " | ".join(row) + " |")


def _planted(x: np.ndarray) -> dict[str, np.ndarray]:
    return {**{f"+{d}% everywhere": log_ratio_constant(x, math.log1p(d / 100)) for d in (2, 5, 10)},
            "+10%, 1-10 MFLOP": log_ratio_window(x, 6.0, 7.0, math.log(1.1)),
            "+10%, 1-10 TFLOP": log_ratio_window(x, 12.0, 13.0, math.log(1.1)),
            "seed's crossovers (10%)": log_ratio_seed_crossover(x, math.log(1.1))}


def power_table(seeds: int, model: NoiseModel) -> None:
    print(f"\nPlanted differences under '{model.name}' noise, {seeds} seeds: "
          f"power (share of planted shapes called right) / wrong-lead rate / 95% coverage")
    print("| truth | layout | old | runs | shapes |")
    print("|---|---|---:|---:|---:|")
    x = np.linspace(6.0, 13.0, 48)
    for name, truth in _planted(x).items():
        for layout, repeats, shuffle in LAYOUTS:
            p = synthetic_pairs(model, seeds=seeds, truth=truth, repeats=repeats, shuffle=shuffle, seed=2)
            cells = {k: score(p, m, seeds) for k, m in _methods(repeats).items()}
            row = [f"{_pct(cells[k][2])} / {_pct(cells[k][0])} / {_pct(cells[k][1])}" if k in cells else "—"
                   for k in METHODS]
            print(f"| {name} | {layout} | " + " | ".join(row) + " |")


# -- fit: lead anywhere on the fitted band, and coverage of P, W, t0 --------------------------

TRUTH = {"P_tflops": 600.0, "W_tbs": 2.0, "t0_s": 2e-6}


def _fit_pair(model: NoiseModel, seed: int, repeats: int, shuffle: bool, n_boot: int):  # noqa: ANN202
    from mfu_sweep.analysis.fits.fit import fit_series
    from mfu_sweep.analysis.series import group_series
    from mfu_sweep.results import parse_document

    flops = list(np.geomspace(1e6, 1e13, 48))
    docs = [make_sweep_doc(label, flops=flops, seed=2 * seed + k, noise_model=model, repeats=repeats,
                           shuffle=shuffle, n_samples=20, **TRUTH) for k, label in enumerate("AB")]
    series = list(group_series([s for d in docs for s in parse_document(d)]).values())
    return series, [fit_series(s, seed=seed, n_boot=n_boot) for s in series]


def _fit_lead(series: list, fits: list) -> bool:
    """Whether the simultaneous 95% band of log(time_b / time_a) excludes 0 anywhere on the shared range."""
    recs = series[0].records
    f = np.array([r.flops for r in recs])
    b = np.array([r.bytes for r in recs])
    fa, fb = fits
    central = np.log(fb.predict_time(f, b)) - np.log(fa.predict_time(f, b))
    n = min(len(fa.boot), len(fb.boot))
    draws = np.log(fb.predict_time_draws(f, b)[:n]) - np.log(fa.predict_time_draws(f, b)[:n])
    se = np.maximum(np.std(draws, axis=0, ddof=1), 1e-12)
    crit = float(np.quantile(np.max(np.abs(draws - central) / se, axis=1), 1 - ALPHA))
    return bool(((central - crit * se > 0) | (central + crit * se < 0)).any())


def fit_table(seeds: int, n_boot: int) -> None:
    print(f"\nfit on identical SYNTHETIC chips ({seeds} seeds, {n_boot} bootstrap refits, truth "
          f"P={TRUTH['P_tflops']:g} TFLOP/s, W={TRUTH['W_tbs']:g} TB/s, t0={TRUTH['t0_s']:g} s): "
          f"false-lead rate / 95% coverage of P, W, t0 (n/c: share of fits where W is not constrained)")
    print("| noise | layout | lead | P | W | t0 | W n/c |")
    print("|---|---|---:|---:|---:|---:|---:|")
    names = {"p_tflops": "P_tflops", "w_tbs": "W_tbs", "t0_s": "t0_s"}
    for name, model in NOISE_MODELS.items():
        for layout, repeats, shuffle in LAYOUTS:
            leads, cover, unconstrained = [], {k: [] for k in names}, []
            for s in range(seeds):
                series, fits = _fit_pair(model, s, repeats, shuffle, n_boot)
                leads.append(_fit_lead(series, fits))
                for fit in fits:
                    for attr, key in names.items():
                        lo, hi = getattr(fit, f"{attr}_ci")
                        cover[attr].append(lo <= TRUTH[key] <= hi)
                    unconstrained.append(not fit.constrained["w_tbs"])
            cells = [_pct(float(np.mean(leads)))] + [_pct(float(np.mean(cover[k]))) for k in names]
            print(f"| {name} | {layout} | " + " | ".join(cells) + f" | {_pct(float(np.mean(unconstrained)))} |")


# == REAL PART: owned by the `repeats` branch ====================================================
# Two sweeps of this machine's CPU with the default settings, N times; how many pairs show any lead.
# Its code lives in benchmarks/false_leads_real.py (its own `main()`, reading sys.argv), written by the
# `repeats` branch, so that the synthetic and real halves of this benchmark never edit the same file.


def real(argv: list[str]) -> None:
    here = Path(__file__).resolve().parent
    script = here / "false_leads_real.py"
    if not script.exists():
        raise SystemExit("false_leads.py --real: the real part is not implemented in this branch "
                         "(benchmarks/false_leads_real.py comes with the `repeats` branch of issue 12)")
    sys.path.insert(0, str(here))
    from false_leads_real import main as real_main  # type: ignore[import-not-found]

    sys.argv = [str(script), *argv]
    real_main()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100, help="synthetic pairs per row (default 100)")
    parser.add_argument("--fit-seeds", type=int, default=40, help="synthetic pairs per fit row (default 40)")
    parser.add_argument("--fit-n-boot", type=int, default=200,
                        help="bootstrap refits per fit (default 200, fit_series' own default)")
    parser.add_argument("--part", choices=("all", "null", "power", "fit"), default="all",
                        help="which synthetic tables to print (default all)")
    parser.add_argument("--real", action="store_true", help="run the real part (this CPU) instead")
    args, rest = parser.parse_known_args()
    if args.real:
        real(rest)
        return
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.part in ("all", "null"):
        null_table(args.seeds)
    if args.part in ("all", "power"):
        power_table(args.seeds, NOISE_MODELS["per-shape 2%"])
    if args.part in ("all", "fit"):
        fit_table(args.fit_seeds, args.fit_n_boot)


if __name__ == "__main__":
    main()
