"""SYNTHETIC step files (``"kind": "steps"``) with planted first and steady steps. Every number is MADE UP.

Nothing here was measured on any device. :func:`step_doc` builds the document ``mfu-sweep steps`` writes
(the contract of issue 45) for one device label: per series (mode, compile mode, cache) R fresh-process
runs, each with

* a first step ``F · exp(σ_F z)`` (a run's compile time varies: ``σ_F`` about 0.15 by default);
* a steady level ``S · exp(σ_S z')`` for the run (a process is fast or slow as a whole), and steps about that
  level, symmetric in pairs, so the run's median after warm-up (``steady_step_s``) is the level itself;
* warm-up steps after step 1, excluded from steady;
* an optional status per run (``timeout``: no step finished, ``oom``, ``error``) and contended flag.

The truth of a series is the expectation over runs (time to N steps is a total): :meth:`Series.expected`.
Never write this module's output into ``sweeps/`` or ``plots/``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from synthetic import STAMP
from synthetic_steps import FAMILY

from mfu_sweep.records.results import write_json_atomic

MODEL = {"spec": f"{FAMILY}:attn=sdpa", "source": "llm", "params": 21_000_000, "gemm_family": FAMILY}
STEADY_STEPS = 9  # steady steps per run (odd: the median is the run's level exactly)
WARMUP = 2


@dataclass(frozen=True)
class Series:
    """One planted series: mode, cache, compile mode, the median first and steady step, and the log noise."""

    mode: str
    first_s: float
    steady_s: float
    cache: str | None = None
    compile_mode: str | None = None
    first_noise: float = 0.15
    steady_noise: float = 0.03
    statuses: tuple[str, ...] = ()  # per repeat; missing ones are ok
    contended: tuple[int, ...] = ()  # repeats flagged contended
    gemm_share: float | None = 0.54
    compile_share: float = 0.0  # share of the first step the compile parts record (0: no breakdown)

    def expected(self) -> tuple[float, float]:
        """(E first step, E steady step) over runs: the lognormal means."""
        return (self.first_s * math.exp(self.first_noise**2 / 2), self.steady_s * math.exp(self.steady_noise**2 / 2))

    @property
    def overhead(self) -> float:
        first, steady = self.expected()
        return first - steady


def break_even(eager: Series, graph: Series) -> float:
    """The planted N from which ``graph`` finishes first: ``(O_g − O_e) / (S_e − S_g)`` of the expectations."""
    return (graph.overhead - eager.overhead) / (eager.expected()[1] - graph.expected()[1])


def _run(s: Series, repeat: int, rng: np.random.Generator, timeout_s: float) -> dict[str, Any]:
    status = s.statuses[repeat] if repeat < len(s.statuses) else "ok"
    first = float(s.first_s * math.exp(s.first_noise * rng.standard_normal()))
    level = float(s.steady_s * math.exp(s.steady_noise * rng.standard_normal()))
    spread = np.abs(rng.standard_normal(STEADY_STEPS // 2)) * 0.02
    steady = [level, *(level * math.exp(x) for x in spread), *(level * math.exp(-x) for x in spread)]
    steps = [first, *(level * 1.3 for _ in range(WARMUP)), *rng.permutation(steady).tolist()]
    compile_mode = s.compile_mode or ("default" if s.mode == "compile" else None)  # validate wants it named
    run: dict[str, Any] = {
        "mode": s.mode, "compile_mode": compile_mode, "cache": s.cache, "repeat": repeat, "status": status,
        "error": None, "timeout_s": timeout_s, "steps_s": steps, "warmup_steps": WARMUP, "first_step_s": first,
        "steady_step_s": level, "compile": {}, "graphs": 1 if s.mode != "eager" else None, "graph_breaks": 0,
        "recompiles": 0, "peak_memory_bytes": 1_000_000, "gemm_share": s.gemm_share,
        "contended": repeat in s.contended, "flags": ["contended"] if repeat in s.contended else []}
    if s.compile_share:
        c = first * s.compile_share
        run["compile"] = {"dynamo_s": 0.1 * c, "aot_autograd_s": 0.2 * c, "backend_s": 0.7 * c, "cache_hits": 0}
    if status == "timeout":
        run.update(steps_s=[], first_step_s=None, steady_step_s=None, compile={},
                   error=f"TimeoutError: SYNTHETIC: step 1 did not finish within {timeout_s:g} s")
    elif status in ("oom", "error"):
        run.update(steps_s=[], first_step_s=None, steady_step_s=None,
                   error="OutOfMemoryError: SYNTHETIC" if status == "oom" else "BackendCompilerFailed: SYNTHETIC")
    return run


def step_doc(label: str, series: Sequence[Series], *, repeats: int = 3, seed: int = 0, model: dict | None = None,
             step_kind: str = "train", dtype: str = "fp32", timeout_s: float = 600.0) -> dict[str, Any]:
    """A SYNTHETIC step file of one device: ``repeats`` runs of every series, interleaved as a tool would run them."""
    rng = np.random.default_rng([seed, len(label)])
    runs = [_run(s, r, rng, timeout_s) for r in range(repeats) for s in series]
    return {
        "schema_version": 1, "kind": "steps", "label": label,
        "provenance": {"tool": {"name": "mfu-sweep-synthetic", "version": "1"}, "version": "1",
                       "run_id": f"synthetic-{label}-{seed}", "argv": ["tests/synthetic_step_runs.py"],
                       "started_at": STAMP, "finished_at": STAMP, "host": "synthetic-host", "git_sha": None,
                       "synthetic": True},
        "device": {"backend": "synthetic", "name": f"Synthetic {label}", "label": label, "synthetic": True},
        "model": dict(model or MODEL), "step_kind": step_kind, "dtype": dtype, "runs": runs,
    }


def write_steps(directory: Path, doc: dict[str, Any], name: str | None = None) -> Path:
    """Write ``doc`` as ``directory/<name or label>.json``; the path."""
    path = Path(directory) / f"{name or doc['label']}.json"
    write_json_atomic(path, doc)
    return path


EAGER = Series("eager", first_s=1.5, steady_s=1.0)
COLD = Series("compile", first_s=120.0, steady_s=0.8, cache="cold", compile_share=0.9)
WARM = Series("compile", first_s=12.0, steady_s=0.8, cache="warm", compile_share=0.5)
