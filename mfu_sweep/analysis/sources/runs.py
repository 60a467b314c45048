"""Runs under one label: telling them apart (``FILE:LABEL``) and refusing to pool runs measured differently.

Sweeps with the same ``device.label`` pool into one series (the pieces of a
sharded run, or more passes of one machine). Two runs of one machine made to be
compared (before and after a driver update, two thread counts) need apart:
:func:`pick_runs` reads ``FILE:LABEL`` selectors and relabels the sweeps of each
named file as ``LABEL@<file stem>``. :func:`pooling_problems` finds labels
whose runs were measured with different settings, which a pooled series would
mix silently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from mfu_sweep.analysis.ground.series import SeriesError
from mfu_sweep.records.results import Sweep

# Settings that change what a record measures (missing: the default older files ran with).
POOL_MUST_MATCH: dict[str, Any] = {"repeats": 1, "cache": "rotate", "threads": None, "timer": "auto",
                                   "timing": None, "compile_mode": None, "compile_cache": None}


def _same_file(a: str, b: str) -> bool:
    return a == b or (Path(a).exists() and Path(b).exists() and Path(a).resolve() == Path(b).resolve())


def split_selector(text: str, files: Sequence[str]) -> tuple[str | None, str]:
    """``FILE:LABEL[/DTYPE[/MODE]]`` -> (FILE, rest) when FILE is one of ``files``; else (None, text)."""
    head, sep, rest = text.rpartition(":")
    if sep and rest:
        for f in files:
            if _same_file(head, f):
                return f, rest
    return None, text


def _file_of(sweep: Sweep) -> str:
    """The file a sweep was loaded from (a merged file's sweeps carry ``: sweeps[i]``)."""
    return sweep.source.split(": sweeps[")[0]


def _stem(path: str, other: str | None) -> str:
    stem = Path(path).stem
    if other is not None and Path(other).stem == stem:
        return path  # two files of one name in different folders: the path tells them apart
    return stem


def pick_runs(sweeps: Sequence[Sweep], a: str | None, b: str | None, files: Sequence[str]
              ) -> tuple[list[Sweep], str | None, str | None]:
    """Resolve ``FILE:LABEL`` selectors: the named file's sweeps of LABEL become ``LABEL@<stem>``.

    Returns the (relabelled) sweeps and the selectors to use. Selectors without a
    file are returned unchanged; ``--a L --b L`` without files is refused with the
    way to tell two runs apart.
    """
    fa, ra = split_selector(a, files) if a else (None, a)
    fb, rb = split_selector(b, files) if b else (None, b)
    if a is not None and a == b and fa is None:
        label = a.split("/")[0]
        held = list(dict.fromkeys(_file_of(s) for s in sweeps if s.label == label)) + ["FILE1", "FILE2"]
        raise SeriesError(f"--a and --b both name {a!r}; to compare two runs of one label name their files: "
                          f"--a {held[0]}:{a} --b {held[1]}:{a}")
    out = list(sweeps)
    picked: list[str | None] = []
    for f, rest, other in ((fa, ra, fb), (fb, rb, fa)):
        if f is None or rest is None:
            picked.append(rest)
            continue
        label = rest.split("/")[0]
        new = f"{label}@{_stem(f, other)}"
        hits = [i for i, s in enumerate(out) if _same_file(_file_of(s), f) and s.label == label]
        if not hits:
            have = sorted({s.label for s in out if _same_file(_file_of(s), f)})
            fix = f"; use one of them, e.g. {f}:{have[0]}" if have else ""
            raise SeriesError(f"{f} holds no series labelled {label!r} (it has: {', '.join(have) or 'none'}){fix}")
        for i in hits:
            out[i] = replace(out[i], device={**out[i].device, "label": new})
        picked.append(new + rest[len(label):])
    if picked[0] is not None and picked[0] == picked[1]:
        raise SeriesError(f"--a and --b name the same series {a!r}; name two files or two labels")
    return out, picked[0], picked[1]


def _runs_by_label(sweeps: Iterable[Sweep]) -> dict[str, list[Sweep]]:
    out: dict[str, list[Sweep]] = {}
    for s in sweeps:
        out.setdefault(s.label, []).append(s)
    return out


def _setting(sweep: Sweep, key: str) -> Any:
    return sweep.settings.get(key, POOL_MUST_MATCH[key])


def pooling_problems(sweeps: Iterable[Sweep]) -> list[str]:
    """One line per label whose runs differ in a setting of :data:`POOL_MUST_MATCH`, with the fix."""
    problems = []
    for label, group in _runs_by_label(sweeps).items():
        measured = [s for s in group if s.settings]  # imported sweeps carry no measurement settings
        for key in POOL_MUST_MATCH:
            values = {repr(_setting(s, key)): s for s in measured}
            if len(values) < 2:
                continue
            (va, sa), (vb, sb) = list(values.items())[:2]
            where_a, where_b = sa.source or "<data>", sb.source or "<data>"
            problems.append(
                f"series {label!r} pools runs measured differently: settings.{key}={va} in {where_a}, {vb} in "
                f"{where_b}; compare them with `mfu-sweep compare {where_a} {where_b} --a {where_a}:{label} "
                f"--b {where_b}:{label}`, or relabel one (mfu-sweep merge --relabel {where_b}:{label}=NEW ...)")
            break
    return problems


def check_pooling(sweeps: Iterable[Sweep]) -> None:
    """Raise :class:`SeriesError` with the first of :func:`pooling_problems`."""
    problems = pooling_problems(sweeps)
    if problems:
        raise SeriesError(problems[0])


def _record_modes(sweep: Sweep) -> Iterable[tuple[str, str]]:
    return dict.fromkeys((r.dtype, r.mode) for r in sweep.records)


def label_collisions(sweeps: Iterable[Sweep],
                     modes_of: Callable[[Sweep], Iterable[tuple[str, str]]] = _record_modes) -> list[str]:
    """A hint per series (label, dtype, mode) whose records come from several files of different runs: how to
    compare those runs instead of pooling them. Files of one label that hold different dtypes or modes are
    separate series, not pooled, and get no hint; nor do the pieces of one sharded sweep.

    ``modes_of``: a sweep's distinct (dtype, mode) in record order (what its records hold, by default)."""
    hints = []
    for label, group in _runs_by_label(sweeps).items():
        if any(s.settings.get("shard") for s in group):
            continue
        by_series: dict[tuple[str, str], list[Sweep]] = {}
        for s in group:
            for key in modes_of(s):
                by_series.setdefault(key, []).append(s)
        for (dtype, mode), held in by_series.items():
            files = list(dict.fromkeys(_file_of(s) for s in held if s.source))
            if len(files) > 1 and len({s.run.get("id") for s in held}) > 1:
                hints.append(f"series {label} {dtype} {mode} is in {len(files)} files ({', '.join(files[:3])}), "
                             f"pooled as one series; to compare the runs: --a {files[0]}:{label} "
                             f"--b {files[1]}:{label}")
    return hints
