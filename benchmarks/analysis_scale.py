"""How the analysis commands scale: SYNTHETIC fleets (made-up numbers, never measured) and a real 8-GPU node.

Run:  python benchmarks/analysis_scale.py                           # the goal sizes: 1024x40, 64x400, node
      python benchmarks/analysis_scale.py --cases 64x40,256x40      # smaller synthetic fleets
      python benchmarks/analysis_scale.py --code OLD --cases node    # another checkout (before/after)

Cases:

* ``DxS`` (e.g. ``1024x40``): a ``--distribute replicate``-style SYNTHETIC fleet from
  ``tests/synthetic_fleet.py`` of D devices (labels ``synthetic-gpu.r<rank>``; bf16 and fp8, eager
  and compile: 4 series per device) with S square shapes from 1 MFLOP to 2 TFLOP, 30 samples per
  shape with 1% sample and 2% per-shape noise; one device 10% slower from 1 to 100 GFLOP. One
  file per device and series, in a temporary directory.
* ``node``: a REAL 8-GPU node: the eight mamf-finder logs of one H100 node (3,375 shapes each,
  ``gpu3/gpu<i>-2025-01-05-06-20-34.txt`` of shisa-ai/mamf-finder, read from the local mirror
  given by ``--mamf-mirror``), imported with ``mfu-sweep import mamf-finder`` into a temporary
  directory as labels ``h100.r0`` .. ``h100.r7``.

Every command runs as its own process, the way a user runs it: ``load`` (only reading and
validating the files, which every command pays), ``fit``, ``compare --baseline`` (one vs rest),
``compare`` (the leaderboard and fleet view), ``report``, and the fleet gate ``compare --fail-on slower``
three times: ``gate cold`` with an empty digest cache (a private ``XDG_CACHE_HOME`` in the temporary
directory), ``gate warm`` right after it (nothing changed: every digest from the cache), and
``gate --no-cache``; each gate line says how many devices it counted. The pod-scale goal of issue 51 is
``--cases 8192x40 --steps gate cold,gate warm`` (8,192 devices x 2 dtypes x 2 modes x 40 shapes: 32,768
files). Printed per command: wall and CPU
seconds (CPU includes worker processes), peak memory (the largest single process, from wait4;
and the largest proportional sum (PSS) over the command's process tree, sampled every 0.1 s), the load average of
the machine before and after (other work on a shared machine slows wall time; CPU seconds move
less), and for ``report`` the size of index.html and the figures it embeds. This is a report, not
a test: docs/performance.md quotes its output.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

SERIES = (("bf16", "eager"), ("bf16", "compile"), ("fp8", "eager"), ("fp8", "compile"))
MIRROR = Path("/work/.mirror/shisa-ai+mamf-finder/repo")
NODE_LOGS = [f"gpu3/gpu{i}-2025-01-05-06-20-34.txt" for i in range(8)]
H100 = "NVIDIA H100 80GB HBM3"


def write_fleet(directory: Path, n: int, n_shapes: int, n_samples: int) -> list[str]:
    import numpy as np
    from synthetic import write_sweep
    from synthetic_fleet import fleet_docs

    flops = [float(f) for f in np.geomspace(1e6, 2e12, n_shapes)]
    docs = fleet_docs(n, series=SERIES, flops=flops, n_samples=n_samples, sample_noise=0.01, shape_noise=0.02,
                      slow={n // 2: (1.1, 1e9, 1e11)}, seed=n)
    return [str(write_sweep(directory, d, name=f"dev{i // len(SERIES):04d}-{i % len(SERIES)}.json"))
            for i, d in enumerate(docs)]


def write_fleet_apart(directory: Path, n: int, n_shapes: int, n_samples: int) -> list[str]:
    """:func:`write_fleet` in a process of its own: a fleet of 8,192 devices takes GiB to build, and a command
    started from a process that large reports that process's peak as its own (Linux keeps the peak RSS
    across the exec)."""
    code = (f"import sys; sys.path[:0] = [{str(ROOT / 'tests')!r}, {str(ROOT / 'benchmarks')!r}]; "
            f"from analysis_scale import write_fleet; from pathlib import Path; "
            f"print('\\n'.join(write_fleet(Path({str(directory)!r}), {n}, {n_shapes}, {n_samples})))")
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT)
    return done.stdout.split()


def import_node(directory: Path, mirror: Path, code: Path) -> list[str]:
    logs = directory / "logs"
    logs.mkdir()
    for i, name in enumerate(NODE_LOGS):
        text = subprocess.run(["git", "-C", str(mirror), "show", f"HEAD:{name}"], check=True, capture_output=True,
                              text=True).stdout
        (logs / f"gpu{i}.txt").write_text(text)
    labels = [a for i in range(8) for a in ("--label", f"gpu{i}.txt:{H100}=h100.r{i}")]
    out = directory / "sweeps"
    subprocess.run([sys.executable, "-m", "mfu_sweep", "import", "mamf-finder", *sorted(map(str, logs.iterdir())),
                    "-o", str(out), *labels], check=True, capture_output=True, env=_env(code))
    return sorted(str(p) for p in out.glob("*.json"))


def _env(code: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(code), "MPLBACKEND": "Agg"}


def _tree_rss(pid: int) -> int:
    """Proportional resident KiB (PSS: a page shared by n processes counts 1/n in each) of ``pid`` and
    its descendants now (0 once gone). Forked workers share the parent's pages, which RSS would count
    once per process."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            rollup = Path(f"/proc/{p}/smaps_rollup").read_text()
            total += int(re.search(r"Pss:\s+(\d+)", rollup).group(1))
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, AttributeError, ValueError):
            continue
    return total


def run(cmd: list[str], code: Path, env: dict[str, str] | None = None, out: Path | None = None) -> dict[str, float]:
    """Wall s, CPU s (with children), peak RSS MiB (one process; process tree) and exit code of one command
    (its stdout to ``out``, or dropped)."""
    before = os.getloadavg()[0]
    start = time.perf_counter()
    sink = open(out, "wb") if out is not None else subprocess.DEVNULL  # noqa: SIM115 - closed below
    proc = subprocess.Popen(cmd, env={**_env(code), **(env or {})}, cwd=code, stdout=sink, stderr=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.1):
            peak[0] = max(peak[0], _tree_rss(proc.pid))

    watcher = threading.Thread(target=sample, daemon=True)
    watcher.start()
    err = proc.stderr.read().decode() if proc.stderr else ""  # drained while it runs: no pipe stall
    _, status, usage = os.wait4(proc.pid, 0)
    done.set()
    watcher.join()
    wall = time.perf_counter() - start
    if out is not None:
        sink.close()  # type: ignore[union-attr]
    rc = os.waitstatus_to_exitcode(status)
    if rc and not (rc == 1 and out is not None):  # a gate's exit 1 is its verdict
        print(f"  ! {' '.join(cmd[:4])} ... exited {rc}: {err.strip().splitlines()[-1:]}", file=sys.stderr)
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss / 1024,
            "tree": peak[0] / 1024, "rc": rc, "load0": before, "load1": os.getloadavg()[0]}


def steps(files: list[str], out: Path, baseline: str) -> list[tuple[str, list[str]]]:
    cli = [sys.executable, "-m", "mfu_sweep"]
    listing = out / "files.txt"
    listing.write_text("\n".join(files))
    load = [sys.executable, "-c", "import sys; from mfu_sweep.records.results import load_sweeps; "
            "load_sweeps(open(sys.argv[1]).read().split())", str(listing)]
    gate = [*cli, "compare", *files, "--fail-on", "slower"]
    return [("load", load), ("fit", [*cli, "fit", *files]),
            ("compare --baseline", [*cli, "compare", *files, "--baseline", baseline]),
            ("compare (fleet)", [*cli, "compare", *files]),
            ("report", [*cli, "report", *files, "-o", str(out / "report")]),
            ("gate cold", gate), ("gate warm", gate), ("gate --no-cache", [*gate, "--no-cache"])]


def _gate_line(path: Path) -> str:
    """The gate's line and how many devices it counts ("of N devices")."""
    line = next((x for x in path.read_text().splitlines() if x.startswith("gate (")), "")
    found = re.search(r" of (\d+) devices", line)
    return f"  gate counts {found.group(1) if found else '?'} devices: {line[:90]}..."


def _page(out: Path) -> str:
    page = out / "report" / "index.html"
    if not page.exists():
        return ""
    text = page.read_text()
    return f"  html {page.stat().st_size / 1e6:.2f} MB, {text.count('<img ')} figures embedded"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="1024x40,64x400,node", help="Comma-separated DxS fleets and/or node.")
    parser.add_argument("--code", type=Path, default=ROOT, help="Checkout whose mfu_sweep is timed [this one].")
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--mamf-mirror", type=Path, default=MIRROR, help="Bare git mirror of shisa-ai/mamf-finder.")
    parser.add_argument("--steps", default=None, help="Comma-separated steps to run (default: all).")
    args = parser.parse_args()
    print(f"code {args.code}; {os.cpu_count()} CPUs; load average at start {os.getloadavg()[0]:.2f}")
    print(f"{'case':<10} {'step':<20} {'wall s':>8} {'cpu s':>8} {'MiB 1 proc':>10} {'MiB tree':>9} {'load':>11}")
    for case in args.cases.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            if case == "node":
                files, baseline = import_node(out, args.mamf_mirror, args.code), "h100.r0"
                what = "REAL 8 x H100 node, mamf-finder logs, 3,375 shapes per device"
            else:
                n, shapes = (int(x) for x in case.split("x"))
                files, baseline = write_fleet_apart(out, n, shapes, args.samples), "synthetic-gpu.r0"
                what = f"SYNTHETIC fleet: {n} devices x {len(SERIES)} series x {shapes} shapes x {args.samples} samples"
            print(f"# {case}: {what}", flush=True)
            cache = out / "cache"  # the gate's digest cache: empty for "gate cold", filled by it for "gate warm"
            for name, cmd in steps(files, out, baseline):
                if args.steps is not None and name not in args.steps.split(","):
                    continue
                if name == "gate cold":
                    shutil.rmtree(cache, ignore_errors=True)
                gated = name.startswith("gate")
                r = run(cmd, args.code, env={"XDG_CACHE_HOME": str(cache)}, out=out / "gate.txt" if gated else None)
                flag = "" if r["rc"] == 0 else f"  (exit {r['rc']})"
                extra = _page(out) if name == "report" else _gate_line(out / "gate.txt") if gated else ""
                print(f"{case:<10} {name:<20} {r['wall']:>8.1f} {r['cpu']:>8.1f} {r['rss']:>10.0f} {r['tree']:>9.0f} "
                      f"{r['load0']:>5.2f}-{r['load1']:<5.2f}{extra}{flag}", flush=True)


if __name__ == "__main__":
    main()
