"""``--timer cputime``: the passive OpenMP wait policy it starts workers with, against bounded spinning.

Run:  PYTHONPATH=. .venv/bin/python benchmarks/cputime_spin.py [--pairs 4]

docs/fidelity.md suspected the passive policy (``OMP_WAIT_POLICY=PASSIVE``: a thread that waits at a barrier
sleeps at once) of slowing the cputime sweep at 256^3 on an idle machine, since waking a sleeping thread costs
time a short call feels. The alternative is to spin a bounded while before sleeping (libgomp's
``GOMP_SPINCOUNT``; with ``OMP_WAIT_POLICY=ACTIVE`` set too, the tool leaves the user's policy alone). Each
"pair" is four real CLI sweeps (``mfu-sweep sweep --device cpu --repeats 1 --cache none``, 256^3 and 1024^3,
fp32 and bf16) in alternating order: the default timer, and ``--timer cputime`` with the passive policy,
with ``GOMP_SPINCOUNT=10000`` and with ``GOMP_SPINCOUNT=100000``. ``--pairs`` run on the machine as it is
(meant: idle), as many again beside two busy loops per core. Printed per point and variant: cputime/default
idle (the median over pairs; goal 0.97-1.03) and busy/idle of its own (goal within 0.90-1.10), and the
default timer's busy/idle. A report, not a test; docs/fidelity.md quotes it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cputime import busy_loops  # noqa: E402
from fidelity import load, tool_run  # noqa: E402

VARIANTS = {"passive": {}, "spin1e4": {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "10000"},
            "spin1e5": {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "100000"}}
SIZES, DTYPES = [256, 1024], ["fp32", "bf16"]


def run(env: dict[str, str], extra: list[str], out: Path) -> dict[str, float]:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return tool_run(SIZES, DTYPES, out, ["--cache", "none", *extra])["medians"]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def phase(pairs: int, tmp: Path, tag: str) -> dict[str, list[dict[str, float]]]:
    got: dict[str, list[dict[str, float]]] = {"default": [], **{v: [] for v in VARIANTS}}
    for i in range(pairs):
        names = ["default", *VARIANTS]
        for name in names if i % 2 == 0 else reversed(names):
            extra = [] if name == "default" else ["--timer", "cputime"]
            got[name].append(run(VARIANTS.get(name, {}), extra, tmp / f"{tag}{i}-{name}.json"))
        print(f"{tag} {i} load {load()} "
              + "; ".join(f"{n} " + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in got[n][-1].items()) for n in got),
              flush=True)
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=4)
    args = ap.parse_args()
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        idle = phase(args.pairs, Path(tmp), "idle")
        loops = busy_loops(2 * (os.cpu_count() or 1))
        time.sleep(2)
        try:
            busy = phase(args.pairs, Path(tmp), "busy")
        finally:
            for p in loops:
                p.kill()
                p.wait()

    def med(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    for key in idle["default"][0]:
        line = f"{key:10}"
        for name in VARIANTS:
            ratios = [c[key] / d[key] for c, d in zip(idle[name], idle["default"], strict=True)]
            line += (f" | {name}: idle/default {statistics.median(ratios):.3f} "
                     f"busy/idle {med(busy[name], key) / med(idle[name], key):.3f}")
        print(line + f" | default busy/idle {med(busy['default'], key) / med(idle['default'], key):.2f}")
    print(f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
