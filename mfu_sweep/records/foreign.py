"""Other tools' JSON results: what a document that went to the wrong command looks like, and what reads it.

Several benchmark tools write a top-level ``benchmarks`` list: nvbench, pyperf, Google Benchmark and
pytest-benchmark. A reader that keyed on that list alone would take any of them for nvbench, so each
is told apart here by the structure of its entries (nvbench's ``states`` and ``devices``, pyperf's
``runs``, Google Benchmark's ``context`` and ``real_time``, pytest-benchmark's ``stats``). The result
serves one purpose: the one-line refusal names what the file looks like and the command that reads
it (``compare`` given nvbench JSON, ``import nvbench`` given pyperf JSON or a sweep). It never chooses
a reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# kind -> (what the file is, the command that reads it; {path} is the file as given)
KINDS: dict[str, tuple[str, str]] = {
    "mfu-sweep": ("an mfu-sweep result", "no import needed: compare, fit, plot and report read it as it is"),
    "mfu-sweep-analysis": ("a report's analysis.json (the numbers behind a report, not a sweep)",
                           "give the sweep files the report was made from"),
    "nvbench": ("nvbench JSON output", "import it first: mfu-sweep import nvbench {path} -o DIR"),
    "tritonbench": ("tritonbench --output-json output",
                    "import it first: mfu-sweep import tritonbench {path} --dtype DTYPE -o DIR"),
    "pyperf": ("pyperf JSON (a 'benchmarks' list of runs)",
               "pyperf reads it (python -m pyperf show {path}); it holds no GEMM shapes, so mfu-sweep does not"),
    "google-benchmark": ("Google Benchmark JSON (a 'context' and a 'benchmarks' list of iterations)",
                         "Google Benchmark's tools/compare.py reads it; it holds no GEMM shapes, so mfu-sweep "
                         "does not"),
    "pytest-benchmark": ("pytest-benchmark JSON (a 'benchmarks' list with 'stats')",
                         "pytest-benchmark compare reads it; it holds no GEMM shapes, so mfu-sweep does not"),
}
NOT_IMPORTED = ("mfu-sweep", "mfu-sweep-analysis", "pyperf", "google-benchmark", "pytest-benchmark")
"""Kinds no ``mfu-sweep import`` format reads: a file of these is refused before any reader sees it."""

_GBENCH_CONTEXT = ("library_build_type", "num_cpus", "mhz_per_cpu", "executable", "host_name")
_GBENCH_ENTRY = ("real_time", "cpu_time", "time_unit", "run_type", "iterations")


def _entries(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = doc.get("benchmarks")
    return [b for b in items if isinstance(b, Mapping)] if isinstance(items, list) else []


def _benchmarks_kind(doc: Mapping[str, Any]) -> str | None:
    """Which tool wrote a document with a top-level ``benchmarks`` list, by its entries and neighbours."""
    entries = _entries(doc)
    context = doc.get("context")
    if isinstance(context, Mapping) and (any(k in context for k in _GBENCH_CONTEXT)
                                         or any(k in e for e in entries for k in _GBENCH_ENTRY)):
        return "google-benchmark"
    if "machine_info" in doc or any("stats" in e and "fullname" in e for e in entries):
        return "pytest-benchmark"
    if any("runs" in e for e in entries) or isinstance(doc.get("metadata"), Mapping) and "version" in doc:
        return "pyperf"
    if "devices" in doc or any("states" in e for e in entries):
        return "nvbench"
    return None


def _tritonbench(doc: Mapping[str, Any]) -> bool:
    """tritonbench's ``--output-json`` (metric keys ``tritonbench_<op>_<mode>[x_...-<backend>]_<metric>``),
    alone or under ``metrics`` beside ``env`` (its nightly ``result.json``)."""
    metrics = doc.get("metrics") if isinstance(doc.get("metrics"), Mapping) else doc
    return any(isinstance(k, str) and k.startswith("tritonbench_") for k in metrics)


def json_kind(doc: Any) -> str | None:
    """The kind of a parsed JSON document (a key of :data:`KINDS`), or None when it is none of them."""
    if not isinstance(doc, Mapping):
        return None
    if "schema_version" in doc and ("records" in doc or doc.get("kind") == "merged"):
        return "mfu-sweep"
    tool = doc.get("tool")
    if isinstance(tool, Mapping) and tool.get("name") == "mfu-sweep" and "fits" in doc:
        return "mfu-sweep-analysis"
    if "benchmarks" in doc:
        return _benchmarks_kind(doc)
    return "tritonbench" if _tritonbench(doc) else None


def describe(kind: str, path: str) -> str:
    """``it looks like <what>: <the command that reads it>`` for a kind of :data:`KINDS`."""
    what, reader = KINDS[kind]
    return f"it looks like {what}: {reader.format(path=path)}"


def hint(doc: Any, path: str) -> str:
    """`` (it looks like ...: ...)`` for a document that is not an mfu-sweep result, or an empty string."""
    kind = json_kind(doc)
    return f" ({describe(kind, path)})" if kind is not None and kind != "mfu-sweep" else ""
