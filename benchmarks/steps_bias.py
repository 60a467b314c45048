"""Is the tool's steady step below an independent timer's? Eager runs only, ABBA-interleaved, quiet machine.

Issue 45's accuracy run (benchmarks/steps_accuracy.py, three rounds, the tool always first in a round) found
the tool's steady step below the independent one in 11 of 12 series. This separates a difference of the code
from an order effect and from the spread between fresh processes: per pair, one eager run of the tool
(`mfu-sweep steps --mode eager --repeats 1`), one of steps_accuracy.py's independent worker (plain torch and
transformers, perf_counter around each step), and one of the same worker started in a session of its own (as
the tool starts its run processes), in the order A B C in even pairs and C B A in odd ones. Printed: each run's
steady step (median after the warm-up) and first step, then per side the median over the pairs and every
value, and tool/independent.

    python benchmarks/steps_bias.py --kind infer --pairs 4
    python benchmarks/steps_bias.py --kind train --pairs 4

The 20M model of steps_accuracy.py, batch 1 x 128 tokens, 20 steps, 2 warm-up steps. Every number is
measured in this run; nothing is written outside a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SEQ = 128
STEPS, WARMUP = 20, 2
SIDES = ("tool", "indep", "indep-session")


def tool_run(config: Path, kind: str, out: Path) -> list[float]:
    subprocess.run([sys.executable, "-m", "mfu_sweep", "steps", "--device", "cpu", "--model",
                    f"hf:{config}:tokens={SEQ}", "--kind", kind, "--mode", "eager", "--repeats", "1", "--steps",
                    str(STEPS), "--warmup", str(WARMUP), "--profile-steps", "0", "--quiet", "-o", str(out), "--force"],
                   check=True, capture_output=True, cwd=ROOT)
    return json.loads(out.read_text())["runs"][0]["steps_s"]


def indep_run(config: Path, kind: str, session: bool) -> list[float]:
    done = subprocess.run([sys.executable, str(HERE / "steps_accuracy.py"), "--worker", str(config), kind, "eager",
                           str(STEPS)], check=True, capture_output=True, text=True, start_new_session=session)
    return json.loads(done.stdout.strip().splitlines()[-1])["steps_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=("train", "infer"), default="infer")
    ap.add_argument("--pairs", type=int, default=4)
    args = ap.parse_args()
    sys.path.insert(0, str(HERE))
    from steps_accuracy import MODELS, steady

    with tempfile.TemporaryDirectory(prefix="steps-bias-") as tmp:
        config = Path(tmp) / "20m.json"
        config.write_text(json.dumps({"model_type": "llama", "max_position_embeddings": SEQ, **MODELS["20m"]}))
        got: dict[str, list[float]] = {side: [] for side in SIDES}
        for p in range(args.pairs):
            for side in SIDES if p % 2 == 0 else tuple(reversed(SIDES)):
                s = tool_run(config, args.kind, Path(tmp) / "t.json") if side == "tool" else \
                    indep_run(config, args.kind, session=side == "indep-session")
                got[side].append(steady(s, WARMUP))
                print(f"pair {p} {side:14} steady {got[side][-1] * 1e3:8.2f} ms  first {s[0] * 1e3:8.2f} ms",
                      flush=True)
    for side, values in got.items():
        print(f"{side:14} median {statistics.median(values) * 1e3:.2f} ms  runs "
              + ", ".join(f"{v * 1e3:.2f}" for v in values))
    print(f"tool/indep {statistics.median(got['tool']) / statistics.median(got['indep']):.3f}")


if __name__ == "__main__":
    main()
