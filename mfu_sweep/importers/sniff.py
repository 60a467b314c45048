"""Guess which tool wrote a file, for the message of a refusal (never to choose a reader).

:func:`sniff` names an import format (``xla-perf-table``, ``deepbench``, ``mamf-finder``, ``nvbench``,
``tritonbench``) or, for JSON, any kind of :data:`mfu_sweep.records.foreign.KINDS` (pyperf, Google Benchmark,
pytest-benchmark, an mfu-sweep result ...).
"""

from __future__ import annotations

import re
from pathlib import Path

from mfu_sweep.records.foreign import json_kind
from mfu_sweep.util.inputs import InputError, decode, parse_json, read_limited

_HEAD = 65536
_JSON_MAX = 64 * 2**20  # parse whole JSON files up to this size; past it the key test of the head decides
_TRITON_CSV = re.compile(r"^\(M, N, K\);", re.M)


def _json(path: Path, head: str) -> str | None:
    """The kind of a JSON file: parsed whole when it is not huge, else by the keys in its head."""
    if path.stat().st_size <= _JSON_MAX:
        try:
            return json_kind(parse_json(read_limited(path), str(path)))
        except (InputError, ValueError, OSError):
            pass  # cut or not JSON after all: the head's keys decide
    if '"schema_version"' in head:
        return "mfu-sweep"
    if '"benchmarks"' in head:
        return "nvbench" if '"states"' in head or '"devices"' in head else None
    return "tritonbench" if '"tritonbench_' in head else None


def sniff(path: Path) -> str | None:
    """The format or kind of JSON ``path`` looks like, from its content; None when none fits."""
    try:
        with path.open("rb") as fh:
            raw = fh.read(_HEAD)
    except OSError:
        return None
    if raw.startswith(b"PK\x03\x04"):
        return "deepbench"
    text = decode(raw, errors="replace")  # a byte-order mark (Excel's CSV) is not part of the text
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            return _json(path, text)
        except OSError:
            return None
    if stripped.startswith("Benchmark,Device,") or "# Benchmark Results" in text:
        return "nvbench"
    if _TRITON_CSV.search(text):
        return "tritonbench"
    if re.search(r"^\s*entries\s*\{", text, re.M) and "flops" in text:
        return "xla-perf-table"
    if "** Dtype:" in text or re.search(r"best outcomes? (?:was|were)|TFLOPS @ \d+x\d+x\d+", text):
        return "mamf-finder"
    return None

