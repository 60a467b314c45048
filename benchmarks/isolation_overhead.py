"""Cost of running shapes in worker processes, against running them in-process.

Run:  .venv/bin/python benchmarks/isolation_overhead.py

Runs the same small CPU sweep with ``--isolate none``, ``sweep`` (one
long-lived worker, the default) and ``shape`` (a fresh worker per shape)
and prints wall times and the per-shape overhead. Goal: the default's
overhead stays below 5% of a default CPU sweep's wall time. A report, not a test.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ARGS = ["sweep", "--device", "cpu", "--quiet", "--max-flop", "2e9", "--points", "10"]


def wall(isolate: str, tmp: Path) -> tuple[float, int]:
    out = tmp / f"{isolate}.json"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mfu_sweep", *ARGS, "--isolate", isolate, "-o", str(out), "--force"],
                   check=True, capture_output=True)
    import json

    return time.perf_counter() - start, len(json.loads(out.read_text())["records"])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        results = {iso: wall(iso, Path(tmp)) for iso in ("none", "sweep", "shape")}
    base, n = results["none"]
    print(f"{'isolate':>8} {'wall (s)':>9} {'overhead (s)':>13} {'per shape (s)':>14} {'of wall':>8}")
    for iso, (t, _) in results.items():
        extra = t - base
        print(f"{iso:>8} {t:>9.2f} {extra:>13.2f} {extra / n:>14.3f} {extra / t:>8.1%}")


if __name__ == "__main__":
    main()
