"""Helpers of benchmarks/gpu_check.sh: judge a sweep step by its file's record statuses, and write the summary.

``python benchmarks/gpu_check_eval.py sweep FILE``
    prints the file's record statuses (``ok=12 error=1``) and exits 0 when the step passed (at least one record
    ok), 3 when every record is ``unsupported`` (the step is a skip, with the reason), 1 otherwise (no file,
    no record, or every record error, mismatch, oom or timeout).
``python benchmarks/gpu_check_eval.py summary STEPS_TSV WORK_DIR``
    prints the summary JSON: each step (status, exit code, seconds, cap, reason) and every result file's record
    statuses, and exits 1 naming the failed steps when one failed.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

BAD = ("error", "mismatch", "oom", "timeout")


def statuses(path: Path) -> Counter[str]:
    """Record statuses of a result file (its journal folded in, as every reader does); of a step file
    (``mfu-sweep steps``), its runs' statuses."""
    from mfu_sweep.records.results import load_sweeps, read_json
    from mfu_sweep.records.step_files import is_step_document, parse_step_document

    data = read_json(path)
    if is_step_document(data):
        return Counter(r.status for r in parse_step_document(data, str(path)).runs)
    counts: Counter[str] = Counter()
    for sweep in load_sweeps([path]):
        counts.update(r.status for r in sweep.records)
    return counts


def judge(path: Path) -> tuple[int, str]:
    """(exit code, words) of one sweep step: see the module docstring."""
    if not path.exists():
        return 1, f"{path.name}: no file"
    try:
        counts = statuses(path)
    except Exception as exc:  # noqa: BLE001 - a file that does not load is the step's failure, said in one line
        return 1, f"{path.name}: does not load ({type(exc).__name__}: {exc})"[:300]
    words = " ".join(f"{k}={v}" for k, v in sorted(counts.items())) or "no records"
    if counts["ok"]:
        return 0, words
    if counts and set(counts) == {"unsupported"}:
        return 3, f"every record unsupported ({words})"
    return 1, words


def summary(steps_tsv: Path, work: Path) -> tuple[dict, list[str]]:
    """The summary of a run: its steps from the TSV the script wrote, and each result file's statuses."""
    steps = []
    for line in steps_tsv.read_text().splitlines():
        name, status, rc, seconds, cap, reason = (line.split("\t") + [""] * 6)[:6]
        steps.append({"step": name, "status": status, "exit": int(rc) if rc.lstrip("-").isdigit() else None,
                      "seconds": int(seconds or 0), "cap_s": int(cap or 0), "reason": reason})
    files = {}
    for path in sorted(work.glob("*.json")):
        try:
            files[path.name] = dict(statuses(path))
        except Exception:  # noqa: BLE001, S112 - not a result file (detect.json, the profiler's table): skipped
            continue
    failed = [s["step"] for s in steps if s["status"] == "failed"]
    return {"steps": steps, "record_statuses": files, "failed": failed,
            "skipped": {s["step"]: s["reason"] for s in steps if s["status"] == "skipped"}}, failed


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "sweep":
        code, words = judge(Path(argv[1]))
        print(words)
        return code
    if len(argv) == 3 and argv[0] == "summary":
        doc, failed = summary(Path(argv[1]), Path(argv[2]))
        print(json.dumps(doc, indent=1))
        return 1 if failed else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
