"""False leads on real hardware: sweep this machine's CPU twice, N times, and compare each pair.

Both sweeps of a pair measure the same machine with the same settings, so any
lead ``compare`` reports between them is false. Prints, per pair, the load
average around it, the sweep wall times and the verdict, then how many of the
N pairs show any lead. Real measurements only (CPU backend, worker processes).

    python benchmarks/false_leads_real.py --pairs 10            # the default sweep settings
    python benchmarks/false_leads_real.py --pairs 10 -- --repeats 1 --budget-s 2   # one pass per sweep
    python benchmarks/false_leads_real.py --pairs 10 --keep DIR --reuse   # compare the kept sweeps again

Arguments after ``--`` go to both ``mfu-sweep sweep`` calls (default: ``--device cpu --dtype fp32``
and nothing else, i.e. the tool's defaults). The machine's other load changes the answer: the
load averages are printed so a reader can judge. (The synthetic half, identical chips under
modelled noise, is ``benchmarks/false_leads.py``.)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def mfu_sweep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mfu_sweep", *args], capture_output=True, text=True)


def sweep(out: Path, label: str, extra: list[str]) -> float:
    start = time.perf_counter()
    done = mfu_sweep("sweep", "--device", "cpu", "--dtype", "fp32", *extra, "--label", label, "--quiet",
                     "-o", str(out), "--force")
    if done.returncode != 0:
        raise SystemExit(f"sweep failed: {done.stderr[-2000:]}")
    return time.perf_counter() - start


def verdict(a: Path, b: Path, fit: bool) -> dict:
    args = ["compare", str(a), str(b), "--metric", "tflops", "--json"] + ([] if fit else ["--no-fit"])
    done = mfu_sweep(*args)
    if done.returncode != 0:
        raise SystemExit(f"compare failed: {done.stderr[-2000:]}")
    (comp,) = json.loads(done.stdout)["comparisons"]
    leads = [s for s in comp["segments"] if s.get("leader")]
    share = 1.0 - comp["summary"]["share_ambiguous"] if comp.get("summary") else None
    return {"leads": len(leads), "crossovers": len(comp["crossovers"]), "lead_share": share,
            "sentence": comp["sentence"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--keep", type=Path, default=None, help="Keep the sweep files in this folder.")
    parser.add_argument("--fit", action="store_true", help="Also compute fit crossovers (slower).")
    parser.add_argument("--reuse", action="store_true",
                        help="Sweep nothing: compare the pairs already in --keep again (e.g. after compare changed).")
    parser.add_argument("sweep_args", nargs="*", help="After --: extra arguments for both sweeps.")
    opts = parser.parse_args()
    if opts.reuse and opts.keep is None:
        parser.error("--reuse needs --keep DIR")
    folder = opts.keep or Path(tempfile.mkdtemp(prefix="false-leads-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"same-machine pairs, sweep settings: defaults {' '.join(opts.sweep_args)}".rstrip())
    with_lead = 0
    for i in range(opts.pairs):
        load_before = os.getloadavg()[0]
        a, b = folder / f"pair{i}-a.json", folder / f"pair{i}-b.json"
        if opts.reuse:
            where = "kept sweeps"
        else:
            wall_a = sweep(a, "run-a", opts.sweep_args)
            wall_b = sweep(b, "run-b", opts.sweep_args)
            where = f"load {load_before:.1f}->{os.getloadavg()[0]:.1f}, sweeps {wall_a:.0f} s + {wall_b:.0f} s"
        v = verdict(a, b, opts.fit)
        with_lead += v["leads"] > 0
        share = f"{v['lead_share']:.0%}" if v["lead_share"] is not None else "-"
        print(f"pair {i + 1}: {where}, {v['leads']} lead segment(s) over {share} of the range, "
              f"{v['crossovers']} crossover(s)\n  {v['sentence']}", flush=True)
    print(f"{with_lead} of {opts.pairs} same-machine pairs show a lead (files in {folder})")


if __name__ == "__main__":
    main()
