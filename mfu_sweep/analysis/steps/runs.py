"""Measured steps as step series: the fresh-process runs of a step file, grouped, counted and drawn.

A series is one device label, dtype, mode, compile mode and cache of one model and step kind; its R runs
(fresh processes) are the replicates. Each finished run gives a first step ``F_r`` and a steady step
``S_r`` (already the median of that run's steps after warm-up), so a run is one draw of what a user
gets. Time to N steps is the line ``O + N·S`` with ``S`` the mean of the ``S_r`` and ``O`` the mean of
``F_r − S_r``: the expected time of N steps of a fresh process, as the GEMM sum's line is
(:mod:`mfu_sweep.analysis.steps.time_to_n`).

The intervals are Student's t over the runs (R − 1 degrees of freedom): the draws of
:mod:`mfu_sweep.analysis.steps.draws` with one weight per run, shared by its first and its steady step
(a slow process is slow in both), so each of ``F``, ``S`` and ``T(N)`` gets exactly the t interval of
its mean, ``mean ± t·s/√R``, and a ratio or a break-even its draws. Series are drawn apart (their runs
are separate processes). Calibration: ``benchmarks/step_runs_calibration.py`` and docs/time-to-steps.md.

A run that did not finish (timeout, out of memory, an error) is counted and shown, never dropped: a
series with no finished run *did not finish*, with its reasons ("did not compile within 600 s: 3 of 3
runs"); a series where some finished is timed over those, and the others are said beside it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mfu_sweep.analysis.steps.costs import DID_NOT_FINISH, FINISHED, INCOMPLETE, StepKey
from mfu_sweep.analysis.steps.crossings import GRAPH_MODES
from mfu_sweep.analysis.steps.draws import DEFAULT_N_BOOT, StepLine, mean_draws, pass_weights
from mfu_sweep.records.step_files import StepFile, StepRun
from mfu_sweep.util.text import counted


def key_of(file: StepFile, run: StepRun) -> StepKey:
    """The series of one run: ``default`` compile mode and no cache (eager) are ``""``."""
    compile_mode = "" if run.compile_mode in (None, "default") else str(run.compile_mode)
    return StepKey(file.label, file.dtype, run.mode, run.cache or "", compile_mode)


def reason(run: StepRun) -> str:
    """Why a run has no time: ``did not compile within 600 s``, ``ran out of memory``, ``failed (KeyError)``."""
    within = f"within {run.timeout_s:g} s" if run.timeout_s else "within its time limit"
    if run.status == "timeout" and run.first_step_s is None:
        return f"did not compile {within}" if run.mode in GRAPH_MODES else f"did not finish step 1 {within}"
    if run.status == "timeout":
        return f"did not finish its steps {within}"
    if run.status == "oom":
        return "ran out of memory"
    if run.status == "error":
        kind = (run.error_line or "").split(":", 1)[0].strip()
        return f"failed ({kind})" if kind else "failed"
    return "too few steps for a steady step"


@dataclass(frozen=True)
class RunFacts:
    """What a measured series' runs say beside its times: counts, reasons, compile breakdown, GEMM share.

    ``compile_parts`` are the means over finished runs of each recorded compile time (``dynamo_s``,
    ``aot_autograd_s``, ``backend_s``, ``xla_compile_s``), ``compile_s`` their sum; ``gemm_share`` the
    mean profiler share of GEMMs in the steady step; graph counts and peak memory the largest of the runs.
    """

    runs: int
    finished: int
    not_finished: tuple[tuple[str, int], ...] = ()
    contended: int = 0
    excluded: int = 0
    compile_parts: tuple[tuple[str, float], ...] = ()
    first_s: float | None = None
    gemm_share: float | None = None
    graphs: int | None = None
    graph_breaks: int | None = None
    recompiles: int | None = None
    peak_memory_bytes: int | None = None

    @property
    def compile_s(self) -> float | None:
        return math.fsum(v for _, v in self.compile_parts) if self.compile_parts else None

    @property
    def rest_s(self) -> float | None:
        """The first step beyond the recorded compile; None where the parts overlap (their sum exceeds it)."""
        c = self.compile_s
        if c is None or self.first_s is None or c > self.first_s:
            return None
        return self.first_s - c

    def failures_text(self) -> str:
        """``did not compile within 600 s: 2 of 3 runs; ran out of memory: 1 of 3 runs`` ("" when none)."""
        return "; ".join(f"{why}: {n} of {counted(self.runs, 'run')}" for why, n in self.not_finished)

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "finished_runs": self.finished,
                "not_finished": [{"reason": why, "runs": n} for why, n in self.not_finished],
                "contended_runs": self.contended, "excluded_contended_runs": self.excluded,
                "first_step_breakdown": {"compile_s": self.compile_s, "rest_s": self.rest_s,
                                         "parts": dict(self.compile_parts)} if self.compile_parts else None,
                "gemm_share": self.gemm_share, "graphs": self.graphs, "graph_breaks": self.graph_breaks,
                "recompiles": self.recompiles, "peak_memory_bytes": self.peak_memory_bytes}


def _largest(values: Iterable[int | None]) -> int | None:
    have = [v for v in values if v is not None]
    return max(have) if have else None


def _mean(values: Iterable[float | None]) -> float | None:
    have = [v for v in values if v is not None]
    return math.fsum(have) / len(have) if have else None


@dataclass(frozen=True)
class RunSeries:
    """The runs of one measured step series (after ``--exclude-contended``), and how many that left out."""

    key: StepKey
    runs: tuple[StepRun, ...]
    excluded: int = 0
    sources: tuple[str, ...] = ()

    @property
    def done(self) -> tuple[StepRun, ...]:
        """The finished runs, in the order run."""
        return tuple(r for r in self.runs if r.finished)

    @property
    def state(self) -> str:
        """``finished`` (some run finished), ``did not finish`` (none did, some failed) or ``incomplete``."""
        if self.done:
            return FINISHED
        return DID_NOT_FINISH if any(r.status != "ok" for r in self.runs) else INCOMPLETE

    @property
    def limit_s(self) -> float | None:
        limits = [r.timeout_s for r in self.runs if r.status == "timeout" and r.timeout_s]
        return max(limits) if limits else None

    def facts(self) -> RunFacts:
        done = self.done
        reasons: dict[str, int] = {}
        for r in self.runs:
            if not r.finished:
                reasons[reason(r)] = reasons.get(reason(r), 0) + 1
        times = [r.compile_times() for r in done]
        means = tuple((k, _mean(t.get(k) for t in times) or 0.0) for k in sorted({k for t in times for k in t}))
        return RunFacts(len(self.runs), len(done), tuple(reasons.items()), sum(r.is_contended for r in self.runs),
                        self.excluded, means, _mean(r.first_step_s for r in done), _mean(r.gemm_share for r in done),
                        _largest(r.graphs for r in self.runs), _largest(r.graph_breaks for r in self.runs),
                        _largest(r.recompiles for r in self.runs), _largest(r.peak_memory_bytes for r in self.runs))

    def why(self) -> str:
        """Why the series has no time ("" when it has one)."""
        if self.state == FINISHED:
            return ""
        if self.state == DID_NOT_FINISH:
            return f"not finished: {self.facts().failures_text()}"
        if not self.runs:
            return f"no run left: {counted(self.excluded, 'contended run')} left out (--exclude-contended)"
        return f"incomplete: {self.facts().failures_text()}"

    def line(self, n_boot: int = DEFAULT_N_BOOT, seed: int = 0) -> StepLine | None:
        """Time to N as ``O + N·S`` over the finished runs with t-scaled draws; None without a finished run."""
        done = self.done
        if not done:
            return None
        first = np.array([r.first_step_s for r in done], dtype=float)
        steady = np.array([r.steady_step_s for r in done], dtype=float)
        stream = f"measured {self.key!r}"  # a stream of its own per series (its runs are processes of their own)
        weights = pass_weights([(stream, i) for i in range(len(done))], {stream: len(done)}, n_boot, seed)
        first_d, steady_d = mean_draws(first, weights), mean_draws(steady, weights)
        return StepLine(float(first.mean() - steady.mean()), float(steady.mean()), first_d - steady_d, steady_d,
                        len(done) > 1)


def collect_runs(files: Sequence[StepFile], modes: Collection[str] | None = None,
                 exclude_contended: bool = False) -> list[RunSeries]:
    """The measured step series of ``files`` (one model and step kind), runs of one series pooled across files.

    ``modes`` keeps only those modes (None: all); ``exclude_contended`` leaves out runs flagged contended
    (a series they empty is kept, saying so). Sorted by label, dtype, eager first, mode, cache, compile mode.
    """
    runs: dict[StepKey, list[StepRun]] = {}
    excluded: dict[StepKey, int] = {}
    sources: dict[StepKey, dict[str, None]] = {}
    for f in files:
        for r in f.runs:
            if modes is not None and r.mode not in modes:
                continue
            key = key_of(f, r)
            sources.setdefault(key, {})[f.source] = None
            if exclude_contended and r.is_contended:
                excluded[key] = excluded.get(key, 0) + 1
                runs.setdefault(key, [])
            else:
                runs.setdefault(key, []).append(r)
    out = [RunSeries(k, tuple(rs), excluded.get(k, 0), tuple(sources[k])) for k, rs in runs.items()]
    return sorted(out, key=lambda s: (s.key.label, s.key.dtype, s.key.mode != "eager", s.key.mode, s.key.cache,
                                      s.key.compile_mode))


def contention_line(files: Sequence[StepFile], excluded: bool) -> str | None:
    """One line: how many runs of each device were flagged contended, and whether they were kept."""
    parts = []
    for label in dict.fromkeys(f.label for f in files):
        rs = [r for f in files if f.label == label for r in f.runs]
        n = sum(r.is_contended for r in rs)
        if n:
            parts.append(f"{label}: {n} of {counted(len(rs), 'run')}")
    if not parts:
        return None
    how = "left out (--exclude-contended)" if excluded else "kept; --exclude-contended leaves them out"
    return f"measured under contention: {'; '.join(parts)}; {how}"

