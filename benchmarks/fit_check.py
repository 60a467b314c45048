"""The batch fit against the full bootstrap: same estimates and intervals, and how much cheaper.

Run:  python benchmarks/fit_check.py [sweeps/*.json]

For every series of the given sweep files (default: the committed ``sweeps/*.json``)
and of a few SYNTHETIC series (``tests/synthetic.py``: mixed and square shapes,
40 shapes x 30 samples), it fits twice on the same resamples: ``solver="batch"``
(the default: all starts and bootstrap refits at once, warm-started, stopped when
the intervals settle) and ``solver="scipy"`` (one ``least_squares`` call per start
and per resample, run to convergence: the full bootstrap). It prints the CPU time
of each, the speed-up, and per constrained parameter both estimates and 95%
intervals, and whether each estimate lies inside the other's interval. A report,
not a test (``tests/test_fit.py`` checks the same on small data).
"""

from __future__ import annotations

import glob
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

NAMES = (("p_tflops", "P", 1.0, "TFLOP/s"), ("w_tbs", "W", 1e3, "GB/s"), ("t0_s", "t0", 1e6, "µs"))


def synthetic_series() -> list:
    import numpy as np
    from synthetic import make_sweep_doc

    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.records.results import parse_document

    flops = [float(f) for f in np.geomspace(1e6, 2e12, 40)]
    mixed = [f"{m}x{m}x{k}" for m in (256, 1024, 2048, 4096, 8192) for k in (64, 256, 512, 1024, 2048, 4096, 8192,
                                                                               16384)]
    docs = [make_sweep_doc("SYNTHETIC-square", P_tflops=600, W_tbs=2.5, t0_s=6e-6, flops=flops, n_samples=30,
                           noise=0.02, seed=1),
            make_sweep_doc("SYNTHETIC-mixed", P_tflops=600, W_tbs=2.5, t0_s=6e-6, shapes=mixed, n_samples=30,
                           noise=0.02, seed=2)]
    return [s for d in docs for s in group_series(parse_document(d)).values()]


def cpu(fn, *args, **kw):  # noqa: ANN001, ANN002, ANN003, ANN201
    start = time.process_time()
    out = fn(*args, **kw)
    return out, time.process_time() - start


def main() -> None:
    from mfu_sweep.analysis.fits.fit import fit_series
    from mfu_sweep.analysis.fits.physical import measured_copy_bandwidth
    from mfu_sweep.analysis.ground.series import group_series
    from mfu_sweep.records.results import load_sweeps

    files = sys.argv[1:] or sorted(glob.glob(str(ROOT / "sweeps" / "*.json")))
    sweeps = load_sweeps(files)
    copy = measured_copy_bandwidth(sweeps)
    series = list(group_series(sweeps).values()) + synthetic_series()
    total = {"batch": 0.0, "scipy": 0.0}
    print(f"{'series':<30} {'batch ms':>9} {'full ms':>9} {'x':>6}  parameter: batch [95%] | full bootstrap [95%]")
    for s in series:
        fast, t_fast = cpu(fit_series, s, solver="batch", cache=False, copy_bandwidth_tbs=copy.get(s.label))
        full, t_full = cpu(fit_series, s, solver="scipy", cache=False, copy_bandwidth_tbs=copy.get(s.label))
        total["batch"] += t_fast
        total["scipy"] += t_full
        parts = []
        for attr, short, scale, unit in NAMES:
            if not (fast.constrained[attr] and full.constrained[attr]):
                continue
            a, b = getattr(fast, attr), getattr(full, attr)
            (alo, ahi), (blo, bhi) = getattr(fast, attr + "_ci"), getattr(full, attr + "_ci")
            inside = "ok" if (blo <= a <= bhi and alo <= b <= ahi) else "OUTSIDE"
            parts.append(f"{short} {a * scale:.4g} [{alo * scale:.4g}, {ahi * scale:.4g}] | {b * scale:.4g} "
                         f"[{blo * scale:.4g}, {bhi * scale:.4g}] {unit} {inside}")
        same = "" if fast.model == full.model and fast.constrained == full.constrained else "  (model/flags differ)"
        print(f"{str(s.key):<30} {t_fast * 1e3:>9.0f} {t_full * 1e3:>9.0f} {t_full / t_fast:>6.1f}  "
              + ("; ".join(parts) or "nothing constrained") + same)
    print(f"total CPU: batch {total['batch']:.2f} s, full bootstrap {total['scipy']:.2f} s, "
          f"x{total['scipy'] / total['batch']:.1f}")


if __name__ == "__main__":
    main()
