"""What every distinct GEMM of a model step costs on one series, pass by pass.

A *step series* is a device label, dtype and mode, and the compile cache its sweep ran with
(``settings.compile_cache``: cold, a fresh cache per shape, or warm, caches reused), so cold and warm
first calls are never pooled. For each distinct shape of the workload it keeps, per pass, the steady
time per call (the record's median) and the first call (``first_call_s``: compile, autotune, kernel
load and the call itself); a shape that recurs in the step (the same product in two roles) is one
shape, called ``calls`` times per step, and pays its first call once.

A shape that timed out, failed or ran out of memory in any pass makes the series *did not finish*: it
is never dropped, and no time is given for that series. A shape the sweeps never measured, or measured
without a first call (an imported table), makes it *incomplete*.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from mfu_sweep.gemm.shapes import Shape
from mfu_sweep.gemm.workloads import WorkloadGemm
from mfu_sweep.records.results import Record, Sweep, sweep_repeats

FINISHED, DID_NOT_FINISH, INCOMPLETE = "finished", "did not finish", "incomplete"
CACHES = ("cold", "warm")


def cache_of(sweep: Sweep) -> str:
    """``cold`` or ``warm`` from ``settings.compile_cache``; ``""`` when the sweep does not say (older files)."""
    text = str(sweep.settings.get("compile_cache") or "").strip().lower()
    return next((c for c in CACHES if text.startswith(c)), "")


@dataclass(frozen=True, order=True)
class StepKey:
    """What identifies a step series: device label, dtype, mode, compile cache (``""``: not recorded) and
    compile mode (``""``: default or not recorded; a measured step's ``max-autotune`` is a series apart)."""

    label: str
    dtype: str
    mode: str
    cache: str = ""
    compile_mode: str = ""

    @property
    def mode_name(self) -> str:
        """``compile``, ``compile max-autotune``, ``eager``, ``lazy``."""
        return f"{self.mode} {self.compile_mode}" if self.compile_mode else self.mode

    def __str__(self) -> str:
        return f"{self.label} {self.dtype} {self.mode_name}" + (f", {self.cache} cache" if self.cache else "")

    def to_json(self) -> dict[str, str | None]:
        return {"label": self.label, "dtype": self.dtype, "mode": self.mode, "compile_cache": self.cache or None,
                "compile_mode": self.compile_mode or None}


@dataclass(frozen=True)
class PassCost:
    """One pass of one shape: steady seconds per call and the first call's seconds."""

    run: str
    run_pass: int
    steady_s: float
    first_s: float


@dataclass(frozen=True)
class ShapeCost:
    """One distinct shape of the step on one series: its calls per step and its passes."""

    shape: Shape
    calls: int
    passes: tuple[PassCost, ...]

    @property
    def steady_s(self) -> float:
        """Mean over the passes of the steady time per call (a step is a total: means add up)."""
        return math.fsum(p.steady_s for p in self.passes) / len(self.passes)

    @property
    def first_s(self) -> float:
        """Mean over the passes of the first call."""
        return math.fsum(p.first_s for p in self.passes) / len(self.passes)


@dataclass(frozen=True)
class Failure:
    """A record of a step shape that did not finish: what happened, in which pass, under which limit."""

    shape: Shape
    status: str
    run_pass: int
    error: str | None = None
    limit_s: float | None = None

    def text(self) -> str:
        """E.g. ``"32x4096x1792 timeout (limit 600 s) in pass 1"``."""
        limit = f" (limit {self.limit_s:g} s)" if self.status == "timeout" and self.limit_s else ""
        return f"{self.shape} {self.status}{limit} in pass {self.run_pass}"


@dataclass(frozen=True)
class SeriesCosts:
    """Every distinct shape of the step on one step series, or why the step cannot be timed there."""

    key: StepKey
    shapes: tuple[ShapeCost, ...]
    failures: tuple[Failure, ...] = ()
    missing: tuple[Shape, ...] = ()
    no_first_call: tuple[Shape, ...] = ()
    repeats: tuple[tuple[str, int], ...] = ()

    @property
    def state(self) -> str:
        """``finished``, ``did not finish`` (a shape failed) or ``incomplete`` (shapes without a time)."""
        if self.failures:
            return DID_NOT_FINISH
        return INCOMPLETE if (self.missing or self.no_first_call) else FINISHED

    @property
    def limit_s(self) -> float | None:
        """The largest per-shape limit (``sweep --timeout``) a failed shape ran into, if any timed out."""
        limits = [f.limit_s for f in self.failures if f.status == "timeout" and f.limit_s]
        return max(limits) if limits else None

    @property
    def passes(self) -> int:
        """The most passes any shape has (0 without shapes)."""
        return max((len(s.passes) for s in self.shapes), default=0)

    def why(self) -> str:
        """Why the step has no time here ("" when it has one)."""
        if self.failures:
            within = f" within {self.limit_s:g} s per shape" if self.limit_s else ""
            shown = "; ".join(f.text() for f in self.failures[:3])
            more = f" and {len(self.failures) - 3} more" if len(self.failures) > 3 else ""
            return f"did not finish{within}: {shown}{more}"
        parts = []
        if self.missing:
            parts.append(f"{len(self.missing)} shapes not measured ({', '.join(map(str, self.missing[:3]))}"
                         f"{', ...' if len(self.missing) > 3 else ''})")
        if self.no_first_call:
            parts.append(f"{len(self.no_first_call)} shapes without a first-call time (imported tables carry none)")
        return "incomplete: " + "; ".join(parts) if parts else ""


def step_calls(gemms: Iterable[WorkloadGemm]) -> dict[Shape, int]:
    """Calls per step of every distinct shape, in the workload's order (a shape in two roles adds up)."""
    calls: dict[Shape, int] = {}
    for g in gemms:
        calls[g.shape] = calls.get(g.shape, 0) + g.count
    return calls


def _limit(sweep: Sweep) -> float | None:
    value = sweep.settings.get("timeout_s")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _run(sweep: Sweep) -> str:
    return str(sweep.run.get("id") or sweep.source or sweep.label)


@dataclass
class _Acc:
    passes: dict[Shape, list[PassCost]]
    failures: list[Failure]
    no_first: set[Shape]
    repeats: dict[str, int]


def _add(acc: _Acc, sweep: Sweep, rec: Record) -> None:
    if rec.ok and rec.first_call_s is not None and math.isfinite(rec.first_call_s):
        acc.passes.setdefault(rec.shape, []).append(
            PassCost(_run(sweep), rec.run_pass, float(rec.median_s), float(rec.first_call_s)))  # type: ignore[arg-type]
    elif rec.ok:
        acc.no_first.add(rec.shape)
    else:
        acc.failures.append(Failure(rec.shape, rec.status, rec.run_pass, rec.error, _limit(sweep)))


def collect_costs(sweeps: Sequence[Sweep], gemms: Sequence[WorkloadGemm], dtype: str,
                  modes: Collection[str] | None = None) -> list[SeriesCosts]:
    """The step's shapes on every step series of ``sweeps`` that measured any of them in ``dtype``.

    Parameters
    ----------
    sweeps:
        Loaded sweeps; a series is a device label, dtype, mode and compile cache.
    gemms:
        The workload (:func:`mfu_sweep.gemm.workloads.resolve_family`).
    dtype:
        Which records to use.
    modes:
        Only these modes (None: every mode).

    Returns
    -------
    list of SeriesCosts
        Sorted by label, dtype, eager before compile, then cache.
    """
    calls = step_calls(gemms)
    accs: dict[StepKey, _Acc] = {}
    for sweep in sweeps:
        cache = cache_of(sweep)
        for rec in sweep.records:
            if rec.dtype != dtype or rec.shape not in calls or (modes is not None and rec.mode not in modes):
                continue
            acc = accs.setdefault(StepKey(sweep.label, dtype, rec.mode, cache), _Acc({}, [], set(), {}))
            acc.repeats[_run(sweep)] = sweep_repeats(sweep.settings)
            _add(acc, sweep, rec)
    out = []
    for key, acc in accs.items():
        shapes = tuple(ShapeCost(s, n, tuple(acc.passes[s])) for s, n in calls.items() if s in acc.passes)
        failed = sorted(acc.failures, key=lambda f: (f.run_pass, str(f.shape)))
        missing = tuple(s for s in calls if s not in acc.passes and s not in acc.no_first
                        and not any(f.shape == s for f in failed))
        out.append(SeriesCosts(key, shapes, tuple(failed), missing,
                               tuple(s for s in calls if s in acc.no_first and s not in acc.passes),
                               tuple(sorted(acc.repeats.items()))))
    return sorted(out, key=lambda c: (c.key.label, c.key.dtype, c.key.mode != "eager", c.key.mode, c.key.cache))

