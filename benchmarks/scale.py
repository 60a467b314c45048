"""Scale of one big input (issue 47 item 5): fit a 200k-record import, dry-run a million shapes, import 300k records.

Run:  python benchmarks/scale.py                          # all three at the goal sizes
      python benchmarks/scale.py --parts fit --records 20000     # smaller, to try it
      python benchmarks/scale.py --code ../old-checkout          # another checkout (before/after)

Every input is SYNTHETIC (made-up numbers, built here in a temporary directory by a process of its own, so
the commands' peak memory is theirs):

* ``fit``: one merged file of four sweeps (bf16, fp32, fp16, fp8) of ``--records`` / 4 random shapes each,
  one sample per record as an import has (``tests/synthetic.py``); ``mfu-sweep fit FILE``.
  Goal: 20 s and 1.5 GB for 200,000 records.
* ``dry-run``: a shape file of ``--shapes`` random ``m,n,k`` rows; ``mfu-sweep sweep --device cpu
  --shape-file F --dry-run``. Goal: 15 s and 600 MB for a million shapes.
* ``import``: an OpenXLA GEMM perf table (text proto) of one device with ``--entries`` shapes and four dtypes
  each (four records per entry); ``mfu-sweep import xla-perf-table``, then ``mfu-sweep validate`` of what
  it wrote. Goal: every file it writes passes validate at the default input limit (a 300k-record import was
  one 269 MiB file, which validate refused).

Printed per command: wall and CPU seconds (with children), the peak resident memory of the command's own
process (VmHWM, sampled; wait4's figure carries the peak of whatever started it across the exec) and of its
process tree (PSS, sampled every 0.1 s), the load average before and after. Ratios against the goals are
printed at the end. This is a report, not a test: docs/performance.md quotes it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from analysis_scale import _tree_rss  # noqa: E402

GEN_FIT = """
import sys
sys.path.insert(0, {tests!r})
import numpy as np
from synthetic import make_sweep_doc
from mfu_sweep.util import jsonio
from mfu_sweep.gemm.shapes import Shape
n = {records} // 4
rng = np.random.default_rng(0)
docs = []
for j, dtype in enumerate(("bf16", "fp32", "fp16", "fp8")):
    dims = np.exp(rng.uniform(np.log(64), np.log(16384), (n, 3))).astype(int)
    shapes = list(dict.fromkeys(Shape(1, int(m), int(k2), int(k)) for m, k2, k in dims))
    docs.append(make_sweep_doc("synthetic-import", dtype=dtype, shapes=shapes, n_samples=1, P_tflops=800.0 / (1 + j),
                               W_tbs=3.0, t0_s=5e-6, seed=j, noise=0.05))
open({out!r}, "wb").write(jsonio.dumps({{"schema_version": 1, "kind": "merged", "sweeps": docs}}, indent=True))
"""

DTYPE_KEYS = ("bf16xbf16->bf16", "f32xf32->f32", "f16xf16->f16", "f8e4m3fnxf8e4m3fn->bf16")


def write_shapes(path: Path, n: int) -> None:
    import numpy as np

    dims = np.random.default_rng(0).integers(16, 8192, (n, 3))
    path.write_text("m,n,k\n" + "\n".join(f"{m},{k2},{k}" for m, k2, k in dims) + "\n")


def write_table(path: Path, entries: int) -> None:
    """SYNTHETIC: an OpenXLA GEMM perf table of one device (sm_90), ``entries`` shapes x four dtypes."""
    import numpy as np

    rng = np.random.default_rng(1)
    seen: set[tuple[int, int, int]] = set()
    with open(path, "w") as fh:
        fh.write('# SYNTHETIC table: made-up numbers for benchmarks/scale.py\nentries {\n  key: "sm_90"\n  value {\n')
        while len(seen) < entries:
            m, n, k = (int(x) for x in 16 * rng.integers(1, 1024, 3))
            if (m, n, k) in seen:
                continue
            seen.add((m, n, k))
            flops = 2 * m * n * k / (1e-5 + 2 * m * n * k / 4e14)
            fh.write(f"    entries {{\n      b: 1\n      m: {m}\n      n: {n}\n      k: {k}\n")
            for i, key in enumerate(DTYPE_KEYS):
                fh.write(f'      flops {{ key: "{key}" value: {int(flops * (1 + 0.3 * i))} }}\n')
            fh.write("    }\n")
        fh.write("  }\n}\n")


def _hwm(pid: int) -> int:
    """Peak resident KiB of ``pid``'s own address space (VmHWM), 0 once gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(r"VmHWM:\s+(\d+)", text)
    return int(found.group(1)) if found else 0


def run(cmd: list[str], code: Path) -> dict[str, float]:
    """Wall and CPU s, peak MiB of the command's process (VmHWM) and of its tree (PSS), exit code."""
    env = {**os.environ, "PYTHONPATH": str(code), "MPLBACKEND": "Agg"}
    before = os.getloadavg()[0]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak, tree, done = [0], [0], threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            peak[0] = max(peak[0], _hwm(proc.pid))
            tree[0] = max(tree[0], _tree_rss(proc.pid))

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    err = proc.stderr.read().decode() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    watcher.join()
    rc = os.waitstatus_to_exitcode(status)
    if rc:
        print(f"  ! {' '.join(cmd[:5])} ... exited {rc}: {err.strip().splitlines()[-1:]}", file=sys.stderr)
    return {"wall": time.perf_counter() - start, "cpu": usage.ru_utime + usage.ru_stime, "mib": peak[0] / 1024,
            "tree": tree[0] / 1024, "rc": rc, "load0": before, "load1": os.getloadavg()[0], "err": err}


def line(name: str, r: dict[str, float], goal: tuple[float, float] | None) -> str:
    text = (f"{name:<34} {r['wall']:>7.1f} {r['cpu']:>7.1f} {r['mib']:>9.0f} {r['tree']:>9.0f} "
            f"{r['load0']:>5.2f}-{r['load1']:<5.2f}")
    if goal:
        ratio = r["mib"] * 1.048576 / goal[1]  # MiB to the goal's MB
        text += f"  goal {goal[0]:g} s, {goal[1]:g} MB: wall x{r['wall'] / goal[0]:.2f}, memory x{ratio:.2f}"
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="fit,dry-run,import")
    parser.add_argument("--records", type=int, default=200_000, help="records of the fit's import [200000]")
    parser.add_argument("--shapes", type=int, default=1_000_000, help="rows of the dry run's shape file [1000000]")
    parser.add_argument("--entries", type=int, default=75_000, help="shapes of the imported table, 4 records each")
    parser.add_argument("--code", type=Path, default=ROOT, help="Checkout whose mfu_sweep is timed [this one].")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "mfu_sweep"]
    parts = args.parts.split(",")
    print(f"code {args.code}; {os.cpu_count()} CPUs; load average at start {os.getloadavg()[0]:.2f}")
    print(f"{'command':<34} {'wall s':>7} {'cpu s':>7} {'MiB proc':>9} {'MiB tree':>9} {'load':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        if "fit" in parts:
            data = out / "import.json"
            subprocess.run([sys.executable, "-c", GEN_FIT.format(tests=str(ROOT / "tests"), records=args.records,
                                                                 out=str(data))], check=True, cwd=ROOT)
            print(f"# fit: SYNTHETIC import of {args.records} records ({data.stat().st_size / 2**20:.0f} MiB)")
            goal = (20.0, 1500.0) if args.records == 200_000 else None
            print(line("fit", run([*cli, "fit", str(data)], args.code), goal), flush=True)
        if "dry-run" in parts:
            shapes = out / "shapes.csv"
            write_shapes(shapes, args.shapes)
            print(f"# dry-run: SYNTHETIC shape file of {args.shapes} rows")
            goal = (15.0, 600.0) if args.shapes == 1_000_000 else None
            r = run([*cli, "sweep", "--device", "cpu", "--shape-file", str(shapes), "--dry-run"], args.code)
            print(line("sweep --dry-run", r, goal), flush=True)
        if "import" in parts:
            table = out / "table" / "default_matmul_perf_table.txtpb"
            table.parent.mkdir()
            write_table(table, args.entries)
            print(f"# import: SYNTHETIC xla-perf-table, {args.entries} shapes x 4 dtypes "
                  f"({table.stat().st_size / 2**20:.0f} MiB)")
            r = run([*cli, "import", "xla-perf-table", str(table), "-o", str(out / "imported")], args.code)
            print(line("import xla-perf-table", r, None), flush=True)
            written = sorted((out / "imported").glob("*.json"))
            sizes = ", ".join(f"{p.name} {p.stat().st_size / 2**20:.0f} MiB" for p in written)
            v = run([*cli, "validate", *map(str, written)], args.code)
            print(line("validate (what it wrote)", v, None))
            print(f"  wrote {len(written)} file(s): {sizes}; validate exit {v['rc']} (goal 0)")


if __name__ == "__main__":
    main()
