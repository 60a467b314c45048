"""Guess which importer a file belongs to, for the hint of a wrong-format error (never to choose a reader)."""

from __future__ import annotations

import re
from pathlib import Path

from mfu_sweep.inputs import decode

_HEAD = 65536


def sniff(path: Path) -> str | None:
    """``xla-perf-table``, ``deepbench``, ``mamf-finder``, ``nvbench`` or None, from the file's first bytes."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_HEAD)
    except OSError:
        return None
    if head.startswith(b"PK\x03\x04"):
        return "deepbench"
    text = decode(head, errors="replace")  # a byte-order mark (Excel's CSV) is not part of the text
    stripped = text.lstrip()
    if stripped.startswith("{") and '"benchmarks"' in text:
        return "nvbench"
    if stripped.startswith("Benchmark,Device,") or "# Benchmark Results" in text:
        return "nvbench"
    if re.search(r"^\s*entries\s*\{", text, re.M) and "flops" in text:
        return "xla-perf-table"
    if "** Dtype:" in text or re.search(r"best outcomes? (?:was|were)|TFLOPS @ \d+x\d+x\d+", text):
        return "mamf-finder"
    return None
