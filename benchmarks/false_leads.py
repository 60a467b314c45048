"""False leads of the fit crossovers on identical chips, and the coverage of the fits' intervals.

Run:  .venv/bin/python benchmarks/false_leads.py [--fit-seeds 40] [--fit-n-boot 200] [--real]

SYNTHETIC part (the default; every number comes from tests/synthetic.py, nothing
is measured): the ``fit`` method on two identical chips, 48 square shapes from 1
MFLOP to 10 TFLOP, 20 samples per shape and pass, under each noise model of
``synthetic.NOISE_MODELS`` (independent per-sample noise, per-shape run-to-run
shifts of 1-5%, a slow drift across consecutive shapes in sweep order, outlying
passes), measured once in FLOP order (R = 1) or in R = 3 passes, in FLOP order
or each shuffled: a lead anywhere on the simultaneous band of the two fitted
rooflines, and the coverage of the 95% intervals of P, W and t0 against the
known truth (fit.py's own bootstrap). The false leads and coverage of compare's
band verdicts are benchmarks/calibration.py and benchmarks/band_verdicts.py.

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
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from synthetic import NOISE_MODELS, NoiseModel, make_sweep_doc  # noqa: E402  (SYNTHETIC data lives in tests/)

ALPHA = 0.05
LAYOUTS = (("R=1, FLOP order", 1, False), ("R=3, FLOP order", 3, False), ("R=3, shuffled", 3, True))


def _pct(x: float) -> str:
    return "—" if math.isnan(x) else f"{100 * x:.0f}%"


# -- fit: lead anywhere on the fitted band, and coverage of P, W, t0 --------------------------

TRUTH = {"P_tflops": 600.0, "W_tbs": 2.0, "t0_s": 2e-6}


def _fit_pair(model: NoiseModel, seed: int, repeats: int, shuffle: bool, n_boot: int):  # noqa: ANN202
    from mfu_sweep.analysis.fits.fit import fit_series
    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.records.results import parse_document

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
    parser.add_argument("--fit-seeds", type=int, default=40, help="synthetic pairs per fit row (default 40)")
    parser.add_argument("--fit-n-boot", type=int, default=200,
                        help="bootstrap refits per fit (default 200, fit_series' own default)")
    parser.add_argument("--real", action="store_true", help="run the real part (this CPU) instead")
    args, rest = parser.parse_known_args()
    if args.real:
        real(rest)
        return
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    fit_table(args.fit_seeds, args.fit_n_boot)


if __name__ == "__main__":
    main()
