"""The fleet view and the gate on a REAL healthy 8xH100 node, and on SYNTHETIC copies with one GPU 5% slower.

Input: the eight bf16 mamf-finder logs of one node run at the same time (shisa-ai/mamf-finder, folder
``gpu3``, files ``gpu<i>-2025-01-05-06-20-34.txt``, 3,375 shapes each), read from a bare git mirror or a
folder of the eight files. Nothing is fetched. The logs are imported into a temporary folder with
``mfu-sweep import``; then, per margin:

* the healthy node: flagged devices, the fleet sentence's length, leads in the leaderboard, the gate;
* for each GPU in turn, a SYNTHETIC copy of the node with that GPU's times divided by 0.95 (5% fewer
  TFLOP/s), made in memory: is that GPU flagged, is any other, is it named once, how long is the sentence,
  does the gate fail.

    python benchmarks/fleet_gate.py --mirror /work/.mirror/shisa-ai+mamf-finder/repo
    python benchmarks/fleet_gate.py --logs DIR --margins 0.02 0

Prints one line per case, then the goals (healthy: 0 flagged at the default margin; each 5%-slower GPU
flagged alone, named once, in a sentence of a few hundred characters; the gate 0 and 1).
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mfu_sweep.analysis.fleet.gate import gate  # noqa: E402
from mfu_sweep.analysis.fleet.view import FleetView, fleet_view  # noqa: E402
from mfu_sweep.analysis.ground.series import Series, group_series  # noqa: E402
from mfu_sweep.analysis.verdicts.margin import DEFAULT_MARGIN  # noqa: E402
from mfu_sweep.records.results import load_sweeps  # noqa: E402

NODE = "gpu3"
STAMP = "2025-01-05-06-20-34"
DEVICE = "NVIDIA H100 80GB HBM3"


def logs_from_mirror(mirror: Path, out: Path) -> list[Path]:
    paths = []
    for i in range(8):
        text = subprocess.run(["git", "-C", str(mirror), "show", f"HEAD:{NODE}/gpu{i}-{STAMP}.txt"],
                              capture_output=True, text=True, check=True).stdout
        paths.append(out / f"gpu{i}-{STAMP}.txt")
        paths[-1].write_text(text)
    return paths


def import_logs(logs: list[Path], out: Path) -> list[Series]:
    labels = [a for i, log in enumerate(logs) for a in ("--label", f"{log.name}:{DEVICE}=h100.r{i}")]
    done = subprocess.run([sys.executable, "-m", "mfu_sweep", "import", "mamf-finder", *map(str, logs), *labels,
                           "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"import failed: {done.stderr[-2000:]}")
    series = group_series(load_sweeps(sorted(out.glob("*.json"))))
    return [series[k] for k in sorted(series)]


def slower(s: Series, factor: float = 0.95) -> Series:
    """SYNTHETIC: ``s`` with every time divided by ``factor``."""
    recs = tuple(dataclasses.replace(r, samples_s=tuple(t / factor for t in r.samples_s)) for r in s.records)
    return dataclasses.replace(s, records=recs)


def case(name: str, series: list[Series], margin: float, slow: str | None) -> dict:
    start = time.perf_counter()
    view: FleetView = fleet_view(series, "h100", margin=margin)
    g = gate([view], [], "slower")
    sentence = view.sentence()
    leads = sum(c.verdict != 0 for c in view.board.cells)
    flagged = [h.label for h in view.flagged]
    row = {"case": name, "margin": margin, "flagged": flagged, "leads": leads, "chars": len(sentence),
           "gate": 0 if g.passed else 1, "seconds": time.perf_counter() - start, "sentence": sentence}
    if slow is not None:
        row["alone"] = flagged == [slow]
        row["named"] = sentence.count(f"flagged {slow} (")
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--mirror", type=Path, help="bare git mirror of shisa-ai/mamf-finder")
    src.add_argument("--logs", type=Path, help="folder holding the eight gpu<i>-2025-01-05-06-20-34.txt")
    parser.add_argument("--margins", type=float, nargs="+", default=[DEFAULT_MARGIN, 0.0])
    parser.add_argument("--show", action="store_true", help="print each fleet sentence")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        logs = (logs_from_mirror(args.mirror, work) if args.mirror
                else [args.logs / f"gpu{i}-{STAMP}.txt" for i in range(8)])
        series = import_logs(logs, work / "node")
    rows = []
    for margin in args.margins:
        rows.append(case("healthy node (real)", series, margin, None))
        for i in range(8):
            copy = [slower(s) if j == i else s for j, s in enumerate(series)]
            rows.append(case(f"h100.r{i} x0.95 (synthetic)", copy, margin, f"h100.r{i}"))
    for r in rows:
        extra = f" alone={r['alone']} named={r['named']}" if "alone" in r else ""
        print(f"margin {r['margin']:.0%}  {r['case']:<28} flagged={','.join(r['flagged']) or '-':<20} "
              f"band leads={r['leads']:<3} sentence={r['chars']} chars  gate exit {r['gate']}{extra}  "
              f"({r['seconds']:.1f} s)")
        if args.show:
            print("    " + r["sentence"])
    default = [r for r in rows if r["margin"] == DEFAULT_MARGIN]
    if default:
        healthy, slow = default[0], default[1:]
        print(f"goal, healthy node at {DEFAULT_MARGIN:.0%}: flagged {len(healthy['flagged'])} (want 0), "
              f"gate exit {healthy['gate']} (want 0)")
        print(f"goal, one GPU 5% slower: flagged alone in {sum(r['alone'] for r in slow)} of {len(slow)}, named once "
              f"in {sum(r['named'] == 1 for r in slow)}, gate exit 1 in {sum(r['gate'] for r in slow)}, "
              f"sentence {min(r['chars'] for r in slow)}-{max(r['chars'] for r in slow)} chars")


if __name__ == "__main__":
    main()
