"""Time ``mfu-sweep compare`` on two SYNTHETIC mamf-finder-like logs (made-up numbers, never measured).

Run:  python benchmarks/compare_speed.py              # 15 x 15 x 15 = 3,375 shapes per side, --no-fit
      python benchmarks/compare_speed.py --n 10       # 1,000 shapes
      python benchmarks/compare_speed.py --fit        # with the fitted crossovers too

Each side is a grid of M, N, K (``--n`` values each, 256 .. 16,384 like mamf-finder's
``--m_range/--n_range/--k_range``), one value per shape (one sample, as a mamf-finder
log gives), times from a roofline model with 3% per-shape noise; the second device is
5% faster where compute-bound. The files go to a temporary directory and ``compare`` runs as its
own process, the way a user runs it; the script prints wall and CPU seconds and the load
average of the machine (other work on a shared machine slows everything).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def write_logs(directory: Path, n: int) -> list[str]:
    import numpy as np
    from synthetic import make_sweep_doc, write_sweep

    sizes = np.unique(np.geomspace(256, 16384, n).round(-1).astype(int))
    shapes = [f"{m}x{k}x{nn}" for m in sizes for nn in sizes for k in sizes]

    docs = [make_sweep_doc("h100-a", P_tflops=700, W_tbs=3.0, t0_s=8e-6, shapes=shapes, n_samples=1, noise=0.03,
                           seed=1),
            make_sweep_doc("h100-b", P_tflops=735, W_tbs=3.0, t0_s=8e-6, shapes=shapes, n_samples=1, noise=0.03,
                           seed=2)]
    return [str(write_sweep(directory, d)) for d in docs]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=15, help="values of each of M, N, K (shapes = n**3)")
    ap.add_argument("--fit", action="store_true", help="also fit rooflines (default: --no-fit)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_logs(Path(tmp), args.n)
        cmd = [sys.executable, "-m", "mfu_sweep", "compare", *paths, "--metric", "tflops"]
        cmd += [] if args.fit else ["--no-fit"]
        load = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode:
        sys.exit(res.stderr or res.stdout)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    print(f"compare on two {args.n ** 3:,}-shape logs ({'with' if args.fit else 'no'} fit): wall {wall:.1f} s, "
          f"cpu {cpu:.1f} s, load average {load:.1f} before")
    print(res.stdout.rstrip().splitlines()[-1])


if __name__ == "__main__":
    main()
