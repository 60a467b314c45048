"""Text logs of mamf-finder (stas00/ml-engineering ``compute/accelerator/benchmarks/mamf-finder.py``).

Every log format released since 2024 is read:

- **Header.** ``** Dtype: torch.bfloat16``, ``** Platform/Device info:`` (the
  second line is ``torch.cuda.get_device_properties``, e.g.
  ``_CudaDeviceProperties(name='NVIDIA H100 80GB HBM3', ...)``), ``** Critical
  software versions:`` (``torch=...``, ``cuda=...`` or ``hip=...``), ``**
  Additional notes:`` (``benchmark version: 2``). Until 2025-10-09 these lines
  had no leading ``- ``; from then on they do, and ``** Critical environment
  variables:`` (``PYTORCH_TUNABLEOP_ENABLED``) was added. Both are read.
- **Per-shape lines**, written with ``end="\\r"`` (so one physical line may hold
  thousands), in four layouts::

     12 |  700.1 TFLOPS @ 4096x4096x4096 | best: ...                          (2024-08 .. 2024-12-03)
     12 |  710.9(max) /  702.3(median) TFLOPS @ 4096x4096x4096 | best: ...      (2024-12-23)
     12 |  710.9(max)  702.3(median)  700.1(mean) @ 4096x4096x4096 | best: ...  (2025-01-03)
     12 |  700.1(mean)  702.3(median)  710.9(max) @ 4096x4096x4096 | best: ...  (2025-01-04 on)

  and on the ``fast-mamf`` branch (benchmark version 4) with a search-phase tag
  before the numbers and power/clock after them (``| 688W 1980MHz [SUSPECT]``).
- **Summary** (:mod:`mfu_sweep.importers.mamf_summary`), also alone: a pasted
  summary becomes one record flagged ``summary_only``.

How it was measured: per shape ``--num_warmup_iterations`` (50) untimed and
``--num_iterations`` (100) timed ``torch.mm`` (fp8: ``torch._scaled_mm``)
calls, each between its own device-event pair. From 2024-12-23 a 256 MiB buffer
is zeroed before each call (cache flush), from 2025-01-03 the output is also
re-randomised. TFLOP/s of the mean, median and minimum time are printed with
one decimal. This reader takes the *median* (version 1 printed only the
minimum time) and turns it back into seconds, so values are flagged
``rounded_source`` (0.1 TFLOP/s resolution).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from mfu_sweep.gemm.shapes import Shape, ShapeError
from mfu_sweep.importers.common import SourceDevice, SourceError, SourceRow, read_provenance, sha256_of
from mfu_sweep.importers.identity import Identity, IdentityError, cuda_properties, from_torch_properties, one_device
from mfu_sweep.importers.mamf_summary import Outcome, Summary, parse_summary
from mfu_sweep.importers.values import tflops
from mfu_sweep.util.inputs import InputError, decode, encoding_name, read_limited
from mfu_sweep.util.text import counted

FORMAT = "mamf-finder"
TORCH_DTYPES = {
    "torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16",
    "torch.float8_e4m3fn": "fp8", "torch.float8_e4m3fnuz": "fp8",
}
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_SHAPE_LIKE = re.compile(r"^\s*\d+\s*\|")
# where the next per-shape record starts inside one physical line: "N |" then a statistic or "X TFLOPS @"
_NEXT_RECORD = re.compile(r"(?<=\S)\s+(?=\d+\s*\|\s*(?:[a-z]+\s+)?(?:[^\s|()]*\((?:mean|median|max)\)"
                          r"|[^\s|]+\s*TFLOPS\s*@))")
_AT = re.compile(r"@\s*([\dx]+)")
_LINE = re.compile(r"^\s*(\d+)\s*\|\s*(?:([a-z]+)\s+)?(?P<vals>\S.*?)\s*@\s*(\d+)x(\d+)x(\d+)\s*\|"
                   r"(?P<tail>.*)$")
# a value is whatever stands before "(median)": parsed whole, so "-5.0" or "nan" is refused, never read as 5.0
_TOKEN = re.compile(r"([^\s/|()]*)\((mean|median|max)\)")
_PLAIN = re.compile(r"^(\S+?)\s*TFLOPS$")
_POWER = re.compile(r"\|\s*(\d+)W(?:\s+(\d+)MHz)?(\s+SUSPECT)?\s*$")
_ITERS = re.compile(r"(?<![\w])--num_iterations[ =](\d+)")
_WARMUP = re.compile(r"(?<![\w])--num_warmup_iterations[ =](\d+)")
_SCOUT_ITERS = re.compile(r"--scout_num_iterations[ =](\d+)")
_SCOUT_WARMUP = re.compile(r"--scout_num_warmup_iterations[ =](\d+)")
_DTYPE_ARG = re.compile(r"--dtype[ =]([\w.]+)")
# what every mamf-finder log or paste holds at least one of (lower case): the header, a per-shape line's
# "(median)" or "TFLOPS", a summary's "best outcome" or fast-mamf's MAMF/MSMF; plain substring tests, so
# 50 MB of something else is refused in well under a second
MARKS = ("** dtype:", "(median)", "tflops", "best outcome", "mamf", "msmf")
NOT_MAMF = ("no '** Dtype:' header, per-shape lines ('N | ... @ MxNxK | ...') or 'best outcome' summary; "
            "not a mamf-finder log")
UNKNOWN = ("clocks and power during each shape (unless the log prints them)",
           "the mean/median spread beyond the three printed numbers")


def _text(path: Path) -> str:
    name = str(path)
    try:
        data = read_limited(path)
    except InputError as exc:
        raise SourceError(str(exc)) from None
    if encoding_name(data) is None and b"\x00" in data[:65536]:
        raise SourceError(f"{name!r}: binary data (NUL byte at offset {data.index(0)}), not a mamf-finder text log")
    text = decode(data, errors="replace")
    bad = text.count("\ufffd")
    if bad > max(8, len(text) // 100):
        raise SourceError(f"{name!r}: {bad} bytes are not UTF-8 text; not a mamf-finder text log")
    low = text.lower()
    if not any(mark in low for mark in MARKS):  # before splitting 50 MB of something else into lines
        raise SourceError(f"{name!r}: {NOT_MAMF}")
    return _ANSI.sub("", text)


def _sections(lines: list[str]) -> dict[str, list[str]]:
    """The lines under each ``** Tag:`` header (a leading ``- `` removed), up to a blank line.

    ``** Dtype: X`` keeps its inline value as the one line of ``Dtype``.
    """
    out: dict[str, list[str]] = {}
    for i, ln in enumerate(lines):
        s = ln.strip()
        if not s.startswith("** ") or ":" not in s:
            continue
        tag, _, inline = s[3:].partition(":")
        got = [inline.strip()] if inline.strip() else []
        for nxt in lines[i + 1:]:
            t = nxt.strip()
            if not t:
                if got:
                    break
                continue
            if t.startswith("** ") or t.startswith("---"):
                break
            got.append(t[2:].strip() if t.startswith("- ") else t)
        out.setdefault(tag.strip(), got)
    return out


def _software(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for ln in lines:
        for part in ln.split(","):
            k, sep, v = part.strip().partition("=")
            if sep and k:
                out[k.strip()] = v.strip()
    return out


def shape_of(a: int, b: int, c: int, middle_is_k: bool) -> Shape:
    """The GEMM shape of a printed ``AxBxC``.

    Until 2025-01-04 the script multiplied ``(m x n) @ (n x k)`` and printed
    ``MxNxK``, so the contraction was the middle number (``middle_is_k``);
    since then it multiplies ``(m x k) @ (k x n)`` and prints ``MxNxK``.
    """
    return Shape(1, a, c, b) if middle_is_k else Shape(1, a, b, c)


def _device(sections: dict[str, list[str]]) -> str:
    platform = sections.get("Platform/Device info", [])
    for ln in platform:
        m = re.search(r"name='([^']*)'", ln)
        if m:
            return m.group(1)
    return platform[1] if len(platform) > 1 else "unknown"


def _identity(text: str, sections: dict[str, list[str]], name: str) -> tuple[Identity, dict[str, str]]:
    """The GPU the log names (uuid, gcnArchName or compute capability, PCI bus id, host) and the printed
    properties; a log whose properties lines contradict each other is refused."""
    host = next((ln.split()[1] for ln in sections.get("Platform/Device info", [])
                 if ln.startswith("Linux ") and len(ln.split()) > 1), None)
    try:
        picked = one_device(cuda_properties(text), name)
        if picked is None:
            return Identity(host=host), {}
        props, line = picked
        return from_torch_properties(props, f"{name!r}: line {line}", host), props
    except IdentityError as exc:
        raise SourceError(str(exc)) from None


def _dtype(name: str, sections: dict[str, list[str]], command: str, dtype_opt: str | None) -> tuple[str, str]:
    """(this tool's dtype, the source's key) from the header, the logged command line or ``--dtype``."""
    key = (sections.get("Dtype") or [""])[0]
    if not key and (m := _DTYPE_ARG.search(command)):
        key = m.group(1) if m.group(1).startswith("torch.") else f"torch.{m.group(1)}"
    if key:
        if key not in TORCH_DTYPES:
            raise SourceError(f"{name!r}: unknown dtype key {key!r} (known: {', '.join(TORCH_DTYPES)})")
        return TORCH_DTYPES[key], key
    if dtype_opt is None:
        raise SourceError(f"{name!r}: no '** Dtype:' header or --dtype in a logged command line; pass --dtype")
    return dtype_opt, f"--dtype {dtype_opt}"


def _values(vals: str, where: str) -> tuple[dict[str, float], bool] | None:
    """Printed statistics of one shape and whether the printed middle number is K (old layouts); each value
    parsed whole (importers/values.py), and a line of statistics without its median refused."""
    tokens = _TOKEN.findall(vals)
    if tokens:
        stats = {tag: tflops(v, where, f"{tag} TFLOPS") for v, tag in tokens}
        if "median" not in stats:
            raise SourceError(f"{where}: no (median) value among {vals.strip()!r}; the median is what this "
                              "reader takes, never another statistic in its place")
        return stats, tokens[0][1] != "mean"
    plain = _PLAIN.match(vals.strip())
    if plain:
        return {"max": tflops(plain.group(1), where, "TFLOPS")}, True
    return None


def _row(hit: re.Match, stats: dict[str, float], middle_is_k: bool, dtype: str, key: str, where: str) -> SourceRow:
    a, b, c = (int(hit.group(j)) for j in (4, 5, 6))
    shape = shape_of(a, b, c, middle_is_k)
    stat = "median" if "median" in stats else "max"
    value = stats[stat]
    flags = ["rounded_source"] + (["source_min_time"] if stat == "max" else [])
    extra: dict[str, Any] = {"source_value": value, "source_statistic": stat,
                             "source_unit": f"TFLOP/s of the {'median' if stat == 'median' else 'minimum'} time "
                                            "(1 decimal)"}
    extra.update({f"source_{s}_tflops": v for s, v in stats.items() if s != stat})
    if middle_is_k:
        extra["source_shape"] = f"{a}x{b}x{c}"
        flags.append("source_shape_reordered")
    if hit.group(2):
        extra["search_phase"] = hit.group(2)
    if p := _POWER.search(hit.group("tail")):
        extra["power_w"] = float(p.group(1))
        if p.group(2):
            extra["clock_mhz"] = float(p.group(2))
        if p.group(3):
            flags.append("suspect_power")
    seconds = shape.flops / (value * 1e12) if value > 0 else None
    return SourceRow(shape=shape, dtype=dtype, seconds=seconds, source_dtype=key, flags=tuple(flags),
                     error=None if seconds else f"{stat} TFLOPS printed as 0.0 (below 0.1 TFLOP/s resolution)",
                     family="mamf-finder", extra=extra, where=where)


def _records(lines: list[str], name: str) -> list[tuple[str, str]]:
    """(where, text) of every per-shape record: a physical line holds several where the ``\r`` between them
    became spaces (a terminal's copy), each then named ``line N, record J``."""
    out = []
    for i, ln in enumerate(lines):
        if not _SHAPE_LIKE.match(ln):
            continue
        parts = _NEXT_RECORD.split(ln)
        for j, part in enumerate(parts, 1):
            out.append((f"{name!r}: line {i + 1}" + (f", record {j}" if len(parts) > 1 else ""), part))
    return out


def _unparsable(text: str) -> str:
    """Why a per-shape line is not read, in words."""
    shape = _AT.search(text)
    if shape and shape.group(1).count("x") != 2:
        return f"its shape {shape.group(1)!r} is not MxNxK"
    return "not the layout of a per-shape line ('N | values @ MxNxK | ...')"


def _shape_rows(lines: list[str], name: str, dtype: str, key: str
                ) -> tuple[list[SourceRow], Counter, str, list[str]]:
    """Per-shape rows (first reading of each shape), the lines skipped by reason, the layout seen, and one
    warning per record skipped before the last (the last may be cut by the end of the file)."""
    rows: dict[Shape, SourceRow] = {}
    skipped: Counter = Counter()
    dropped: list[str] = []
    layout = ""
    records = _records(lines, name)
    for n, (where, text) in enumerate(records, 1):
        hit = _LINE.match(text)
        parsed = _values(hit.group("vals"), where) if hit else None
        if hit is None or parsed is None:
            last = n == len(records)
            skipped["cut mid-line at the end of the file" if last else "unparsable per-shape line"] += 1
            if not last:
                dropped.append(f"{where}: skipped, {_unparsable(text)}: {text.strip()[:80]!r}")
            continue
        stats, middle_is_k = parsed
        layout = layout or ("mkn" if middle_is_k else "mnk")
        try:
            row = _row(hit, stats, middle_is_k, dtype, key, where)
        except ShapeError as exc:
            raise SourceError(f"{where}: {exc}") from None
        if row.shape in rows:
            skipped["a shape measured again (first reading kept)"] += 1
            continue
        rows[row.shape] = row
    return list(rows.values()), skipped, layout, dropped


def _summary_row(summary: Summary, name: str, dtype: str, key: str) -> SourceRow:
    best = summary.headline()
    if best is None:
        raise SourceError(f"{name!r}: summary has no TFLOPS value")
    if best.shape is None:
        raise SourceError(f"{name!r}: line {best.line}: summary gives {best.tflops} TFLOPS ({best.stat}) but no "
                          "shape ('@ MxNxK'); a value without its shape cannot be compared")
    middle_is_k = summary.form.startswith("v1") or (summary.form == "v2" and summary.outcomes[0].stat == "max")
    shape = shape_of(*best.shape, middle_is_k)
    flags = ["summary_only", "best_of_search", "rounded_source"]
    if best.stat in ("max", "mamf"):
        flags.append("source_min_time")
    extra: dict[str, Any] = {"source_value": best.tflops, "source_statistic": best.stat,
                             "source_unit": "TFLOP/s (1 decimal), the best of the search"}
    if middle_is_k:
        flags.append("source_shape_reordered")
        extra["source_shape"] = "x".join(map(str, best.shape))
    extra.update(_other_outcomes(summary, best))
    if best.power_w is not None:
        extra["power_w"] = best.power_w
    if best.clock_mhz is not None:
        extra["clock_mhz"] = best.clock_mhz
    return SourceRow(shape=shape, dtype=dtype, seconds=shape.flops / (best.tflops * 1e12) if best.tflops > 0 else None,
                     source_dtype=key, flags=tuple(flags), family="mamf-finder", extra=extra,
                     error=None if best.tflops > 0 else "summary TFLOPS printed as 0.0",
                     where=f"{name!r}: line {best.line}")


def _other_outcomes(summary: Summary, best: Outcome) -> dict[str, Any]:
    return {f"source_best_{o.stat}": {"tflops": o.tflops, "shape": "x".join(map(str, o.shape)) if o.shape else None}
            for o in summary.outcomes if o is not best}


def _iterations(command: str, scouts: bool) -> tuple[int, int]:
    """Timed and warm-up calls per shape: the logged command line's, else the script's defaults."""
    if scouts:
        return (int(m.group(1)) if (m := _SCOUT_ITERS.search(command)) else 20,
                int(m.group(1)) if (m := _SCOUT_WARMUP.search(command)) else 8)
    return (int(m.group(1)) if (m := _ITERS.search(command)) else 100,
            int(m.group(1)) if (m := _WARMUP.search(command)) else 50)


def _timing(summary_only: bool, flushed: bool, stat: str, iters: int, warm: int, events: str,
            fp8: bool) -> tuple[str, str, str]:
    """(record timer, cache, long description)."""
    cache = "flush" if flushed else "none"
    calls = f"{iters} {events}-event-timed {'torch._scaled_mm' if fp8 else 'torch.mm'} calls after {warm} warm-ups"
    how = (f"{calls}, a 256 MiB buffer zeroed before each call (cache flush)" if flushed
           else f"{calls}, no cache flush (version 1)")
    which = "median" if stat == "median" else "minimum" if stat in ("max", "mamf") else stat
    if summary_only:
        return "imported-best", cache, (f"summary only: the highest TFLOP/s of the {which} time over all shapes "
                                        f"the run tried ({how}); one value, selected as the maximum, so biased "
                                        "upward")
    return (f"{events}-events+flush" if flushed else f"{events}-events", cache,
            f"{which} of {how}; printed as TFLOP/s, 1 decimal")


def read(path: Path, dtype: str | None = None) -> list[SourceDevice]:
    name = str(path)
    text = _text(path)
    lines = re.split(r"\r\n|\r|\n", text)
    if not any(ln.strip() for ln in lines):
        raise SourceError(f"{name!r}: empty file")
    sections = _sections(lines)
    command = (sections.get("Command line") or [""])[0]
    try:
        summary = parse_summary(lines)
    except SourceError as exc:
        raise SourceError(f"{name!r}: {exc}") from None
    has_shape_lines = any(_SHAPE_LIKE.match(ln) for ln in lines)
    if not sections.get("Dtype") and not has_shape_lines and summary is None:
        raise SourceError(f"{name!r}: {NOT_MAMF}")
    dtype, key = _dtype(name, sections, command, dtype)
    rows, skipped, layout, dropped = _shape_rows(lines, name, dtype, key)
    summary_only = not rows
    if summary_only and summary is None:
        why = f" ({sum(skipped.values())} unparsable per-shape lines)" if skipped else ""
        raise SourceError(f"{name!r}: no per-shape lines and no summary{why}; the log was cut before the first "
                          "shape finished")
    if summary_only:
        rows = [_summary_row(summary, name, dtype, key)]
    truncated = not summary_only and summary is None
    notes = _notes(rows, skipped, summary, layout, truncated, summary_only)
    if truncated:
        rows = [_flag(r, "truncated") for r in rows]
    software = _software(sections.get("Critical software versions", []))
    events = "cuda" if ("cuda" in software or "hip" in software or not software) else "device"
    scouts = any("search_phase" in r.extra for r in rows)  # fast-mamf --search auto: per-shape lines are scouts
    iters, warm = _iterations(command, scouts)
    flushed = summary.cache_flushed if summary_only else any(
        r.extra.get("source_statistic") == "median" for r in rows)
    stat = rows[0].extra.get("source_statistic", "median")
    timer, cache, method = _timing(summary_only, flushed, stat, iters, warm, events, dtype == "fp8")
    if scouts:
        method += " (fast-mamf --search auto: the per-shape lines are its scout readings)"
    version = next((ln.split(":", 1)[1].strip() for ln in sections.get("Additional notes", [])
                    if ln.startswith("benchmark version")), None)
    identity, props = _identity(text, sections, name)
    device = props.get("name") or _device(sections)
    if props.get("uuid") and identity.uuid is None:
        notes.append(f"uuid {props['uuid']} names no single GPU (ROCm's placeholder or all zeros); this file is "
                     "never merged with another")
    started = next((ln.removeprefix("Benchmark started on").strip() for ln in lines
                    if ln.startswith("Benchmark started on")), None)
    env = _software(sections.get("Critical environment variables", []))
    return [SourceDevice(
        key=device, name=device, rows=tuple(rows), mode="eager", timer=timer, cache=cache, identity=identity,
        warnings=tuple(dropped),
        details={"software": {"versions": software, "command": command, "environment": env}},
        provenance={
            "source_file": path.name, "source_sha256": sha256_of(path), **read_provenance(path),
            "tool": f"mamf-finder.py (benchmark version {version or 'not printed (version 1 or a paste)'})",
            "timing_method": method, "device_key": device, "dtype_keys": {dtype: key}, "notes": notes,
            "unknown": list(UNKNOWN) + ([] if env else ["whether PYTORCH_TUNABLEOP_ENABLED was set"]),
            **({"measured_on": f"{started} (the machine's local time)"} if started else {}),
            **({"device_properties": props} if props else {}),
            **({"source_summary": _summary_json(summary)} if summary else {}),
            **({"truncated": True} if truncated else {}),
            **({"skipped_lines": dict(skipped)} if skipped else {}),
        },
    )]


def _summary_json(summary: Summary) -> list[dict[str, Any]]:
    """The log's "best" lines as printed (statistic, TFLOP/s, printed shape, power, clock)."""
    return [{"statistic": o.stat, "tflops": o.tflops, "shape": "x".join(map(str, o.shape)) if o.shape else None,
             **({"power_w": o.power_w} if o.power_w is not None else {}),
             **({"clock_mhz": o.clock_mhz} if o.clock_mhz is not None else {})} for o in summary.outcomes]


def _flag(row: SourceRow, flag: str) -> SourceRow:
    return replace(row, flags=(*row.flags, flag))


def _notes(rows: list[SourceRow], skipped: Counter, summary: Summary | None, layout: str, truncated: bool,
           summary_only: bool) -> list[str]:
    notes = []
    if rows and rows[0].dtype == "fp32":
        notes.append("fp32 here is torch.float32 with torch's default (TF32 off for matmul)")
    if summary_only:
        notes.append("summary only: one 'best' value, the maximum over the shapes the run tried (flag summary_only)")
    if layout == "mkn" or any("source_shape_reordered" in r.flags for r in rows):
        notes.append("written before 2025-01-04, when the middle printed number was the contraction dimension; "
                     "shapes reordered to M, N, K (record 'source_shape' keeps the printed one)")
    if truncated:
        notes.append(f"no final summary: the run was interrupted or the file cut; {counted(len(rows), 'shape')} "
                     "imported, each flagged truncated")
    for why, n in sorted(skipped.items()):
        notes.append(f"{counted(n, 'line')} skipped: {why}")
    if summary and summary.tried is not None and not summary_only and summary.tried != len(rows) + sum(
            n for w, n in skipped.items() if w.startswith("a shape")):
        notes.append(f"the summary says {summary.tried} shapes were tried; the log holds {len(rows)} readable ones")
    if summary and summary.means:
        notes.append("summary: " + ", ".join(f"{k} {v} TFLOPS" for k, v in summary.means.items()))
    return notes
