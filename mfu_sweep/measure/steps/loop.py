"""``mfu-sweep steps``: a real model's steps, each run in a fresh process, into a step file.

The plan is every (mode, compile mode, cache, repeat): per repeat, eager, then each cache of compile (and of
lazy, XLA's graph mode), cold before warm, so repeats interleave and slow drift of the machine spreads
over every series. Before anything is written a fresh process opens the device and builds the model once
(:func:`mfu_sweep.measure.steps.proc.describe`): a model that cannot be built is one error line, no file.

Caches (:class:`CacheDirs`, all in one private temporary folder removed at the end; the user's own cache
folders are never touched):

- **cold**: a fresh, empty folder for inductor's caches (its FX graph and AOTAutograd caches, the compiled
  kernels), triton's, TorchNeuron's NEFF cache and neuronx-cc's (:func:`mfu_sweep.measure.sweep.cold_cache_env`)
  and XLA's persistent cache;
- **warm**: a copy of a folder primed by an earlier run of the same model and mode: the first cold run that
  finished in this invocation, else a priming run made for the purpose (fresh process, empty cache, not a
  measured run; ``priming`` in the file says what primed each series). Every warm run starts from its own
  copy of the primed folder, so each sees the same cache.

The file is written whole (atomically) when the run starts and after every run, so Ctrl-C or a crash keeps
every finished run; ``resume`` goes on with the runs still missing. Every run is read against the machine
(the sweep's contended rule, :mod:`mfu_sweep.records.contention`).
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mfu_sweep import __version__
from mfu_sweep.measure.machine.cores import HostMonitor
from mfu_sweep.measure.steps.proc import RunOutcome, RunProcess, describe
from mfu_sweep.measure.sweep import cold_cache_env, default_label, git_sha, utc_now
from mfu_sweep.measure.task import THREADS_ENV
from mfu_sweep.records.contention import is_contended
from mfu_sweep.records.results import NOISY_IQR_RATIO, ResultError
from mfu_sweep.records.step_files import StepFile, StepModel, StepRun, load_step_file, save_step_file, steady_of
from mfu_sweep.util.filelock import LockError, OutputLock
from mfu_sweep.util.outputs import OutputError, check_output_file, check_suffix

# Settings a resumed file must share with the command: they change what a run measures.
RESUME_MUST_MATCH = ("model", "step_kind", "dtype", "steps", "warmup_steps")


class StepsError(RuntimeError):
    """The steps cannot start or continue; the message says why, in one line."""


@dataclass(frozen=True)
class StepPlan:
    """Everything ``run_steps`` needs, already validated by the caller."""

    device: str
    model: str
    output: Path
    kind: str = "train"
    dtype: str = "fp32"
    modes: tuple[str, ...] = ("eager", "compile")
    compile_mode: str = "default"
    caches: tuple[str, ...] = ("cold", "warm")
    repeats: int = 3
    steps: int = 10
    warmup: int = 2
    profile_steps: int = 2
    timeout_s: float | None = 600.0
    start_timeout_s: float | None = 300.0
    label: str | None = None
    threads: int | None = None
    resume: bool = False
    force: bool = False
    argv: Sequence[str] = field(default_factory=list)

    def settings(self) -> dict[str, Any]:
        return {"device": self.device, "modes": list(self.modes), "compile_mode": self.compile_mode,
                "caches": list(self.caches), "repeats": self.repeats, "steps": self.steps,
                "warmup_steps": self.warmup, "profile_steps": self.profile_steps, "timeout_s": self.timeout_s,
                "start_timeout_s": self.start_timeout_s, "threads": self.threads}


@dataclass(frozen=True)
class Slot:
    """One planned run: (mode, compile mode, cache, repeat)."""

    mode: str
    compile_mode: str | None
    cache: str | None
    repeat: int

    @property
    def key(self) -> tuple[str, str | None, str | None, int]:
        return (self.mode, self.compile_mode, self.cache, self.repeat)

    @property
    def series(self) -> tuple[str, str | None]:
        """What a warm cache is primed for: the mode and compile mode."""
        return (self.mode, self.compile_mode)


def plan_slots(plan: StepPlan) -> list[Slot]:
    """Every run of ``plan`` in the order run: per repeat, each mode, cold before warm."""
    out = []
    for repeat in range(plan.repeats):
        for mode in plan.modes:
            if mode == "eager":
                out.append(Slot("eager", None, None, repeat))
                continue
            for cache in sorted(plan.caches, key=("cold", "warm").index):
                out.append(Slot(mode, plan.compile_mode if mode == "compile" else None, cache, repeat))
    return out


class CacheDirs:
    """The private cache folders of one invocation (see the module docstring)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="mfu-sweep-steps-"))
        self.primed: dict[tuple[str, str | None], tuple[Path, str]] = {}
        self.failed: dict[tuple[str, str | None], dict[str, Any]] = {}
        self._n = 0

    def fresh(self) -> Path:
        self._n += 1
        path = self.root / f"run-{self._n}"
        path.mkdir()
        return path

    def prime(self, series: tuple[str, str | None], path: Path, by: str) -> None:
        """Keep ``path`` (a run's filled cache folder) as the warm cache of ``series``."""
        self.primed.setdefault(series, (path, by))

    def warm(self, series: tuple[str, str | None]) -> tuple[Path, str]:
        """A fresh copy of ``series``' primed folder, and what primed it."""
        source, by = self.primed[series]
        self._n += 1
        path = self.root / f"run-{self._n}"
        shutil.copytree(source, path, symlinks=True)
        return path, by

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def run_env(cache_dir: Path, threads: int | None) -> dict[str, str]:
    """A run process's environment: every compile cache in ``cache_dir``, the FX graph and AOTAutograd caches
    on (a warm run must be able to hit them), ``--threads``."""
    env = cold_cache_env(str(cache_dir))
    env.update(TORCHINDUCTOR_FX_GRAPH_CACHE="1", TORCHINDUCTOR_AUTOGRAD_CACHE="1")
    if threads:
        env[THREADS_ENV] = str(threads)
    return env


def _request(plan: StepPlan, slot: Slot, cache_dir: Path, profile: bool = True) -> dict[str, Any]:
    return {"op": "run", "device": plan.device, "model": plan.model, "kind": plan.kind, "dtype": plan.dtype,
            "mode": slot.mode, "compile_mode": slot.compile_mode, "steps": plan.steps,
            "profile_steps": plan.profile_steps if profile else 0,
            "xla_cache_dir": str(cache_dir / "xla") if slot.mode == "lazy" else None}


def _noisy(steps_s: Sequence[float], warmup: int) -> bool:
    after = list(steps_s[1 + warmup:])
    if len(after) < 4:
        return False
    q = statistics.quantiles(after, n=4, method="inclusive")
    return (q[2] - q[0]) / statistics.median(after) > NOISY_IQR_RATIO


def make_run(plan: StepPlan, slot: Slot, out: RunOutcome, reading: dict[str, Any],
             extra: dict[str, Any] | None = None) -> StepRun:
    """The step file's entry for one run (the contract of ``docs/results.md``)."""
    stats = out.stats
    contended = is_contended(reading)
    flags = (("contended",) if contended else ()) + (("noisy",) if _noisy(out.steps_s, plan.warmup) else ())
    kept = {k: stats[k] for k in ("peak_memory_source", "gemm_s", "profiled_s", "profiled_steps", "gemm_share_note")
            if k in stats}
    more = {"machine": reading, "wall_s": round(out.wall_s, 4), **kept, **(extra or {})}
    if out.ready:
        more["build_s"] = out.ready.get("build_s")
    if out.status != "ok" and out.stderr_tail:
        more["stderr_tail"] = out.stderr_tail
    return StepRun(mode=slot.mode, compile_mode=slot.compile_mode, cache=slot.cache, repeat=slot.repeat,
                   status=out.status, error=out.error, timeout_s=plan.timeout_s, steps_s=tuple(out.steps_s),
                   warmup_steps=plan.warmup, first_step_s=out.steps_s[0] if out.steps_s else None,
                   steady_step_s=steady_of(out.steps_s, plan.warmup), compile=stats.get("compile") or {},
                   graphs=stats.get("graphs"), graph_breaks=stats.get("graph_breaks"),
                   recompiles=stats.get("recompiles"), peak_memory_bytes=stats.get("peak_memory_bytes"),
                   gemm_share=stats.get("gemm_share"), contended=contended, flags=flags, extra=more)


def _check_output(plan: StepPlan) -> None:
    if plan.resume and plan.force:
        raise StepsError("--resume continues a file and --force overwrites it; pass one of them")
    if plan.resume and not plan.output.exists():
        raise StepsError(f"cannot resume {str(plan.output)!r}: no such file; drop --resume to start it")
    try:
        check_suffix(plan.output, ".json", "a JSON step file")
        check_output_file(plan.output, force=plan.resume or plan.force,
                          exists_hint="pass --resume to continue it or --force to overwrite it")
    except OutputError as exc:
        raise StepsError(str(exc)) from None


def _header(plan: StepPlan, described: dict[str, Any]) -> StepFile:
    hello = described["hello"]
    device = dict(hello["device"])
    label = plan.label or default_label(device)
    device["label"] = label
    device["torch"] = hello["environment"].get("torch")
    provenance = {"tool": "mfu-sweep", "version": __version__, "run_id": uuid.uuid4().hex, "started_at": utc_now(),
                  "finished_at": None, "argv": list(plan.argv), "host": socket.gethostname(), "git_sha": git_sha()}
    return StepFile(label=label, provenance=provenance, device=device, model=StepModel.from_json(described["model"]),
                    step_kind=plan.kind, dtype=plan.dtype, settings=plan.settings(),
                    extra={"environment": hello["environment"], "peak": hello["peak"], "priming": []})


def _resume_from(plan: StepPlan, fresh: StepFile) -> StepFile:
    try:
        old = load_step_file(plan.output)
    except ResultError as exc:
        raise StepsError(f"cannot resume: {exc}") from None
    now = {"model": fresh.model.spec, "step_kind": fresh.step_kind, "dtype": fresh.dtype,
           "steps": plan.steps, "warmup_steps": plan.warmup}
    was = {"model": old.model.spec, "step_kind": old.step_kind, "dtype": old.dtype,
           "steps": old.settings.get("steps"), "warmup_steps": old.settings.get("warmup_steps")}
    for key in RESUME_MUST_MATCH:
        if was[key] != now[key]:
            raise StepsError(f"cannot resume {str(plan.output)!r}: its {key}={was[key]!r} differs from this run's "
                             f"{now[key]!r}; one file holds one way of measuring")
    for key in ("backend", "name", "fingerprint"):
        if old.device.get(key) and fresh.device.get(key) and old.device.get(key) != fresh.device.get(key):
            raise StepsError(f"cannot resume {str(plan.output)!r}: its device.{key}={old.device.get(key)!r} differs "
                             f"from this device's {fresh.device.get(key)!r}")
    prov = dict(old.provenance)
    prov["resumed_at"] = [*prov.get("resumed_at", []), utc_now()]
    prov["resumed_argv"] = [*prov.get("resumed_argv", []), list(plan.argv)]
    prov["finished_at"] = None
    return replace(old, provenance=prov, settings={**old.settings, **plan.settings()})


ProgressFn = Callable[[Slot, StepRun | None], None]


def run_steps(plan: StepPlan, progress: ProgressFn | None = None,
              on_start: Callable[[StepFile, int], None] | None = None,
              on_step: Callable[[int, float], None] | None = None,
              notify: Callable[[str], None] | None = None) -> StepFile:
    """Run every slot of ``plan`` not already in the output file; return the final step file.

    ``progress(slot, None)`` before a run and ``progress(slot, run)`` after it; ``on_step(i, seconds)`` as each
    step of a run finishes. The output's one-writer lock is held throughout; Ctrl-C or any exception leaves the
    file with every finished run (and kills the run in flight with its process group).
    """
    _check_output(plan)
    try:
        lock = OutputLock(plan.output).acquire()
    except LockError as exc:
        raise StepsError(str(exc)) from None
    caches = CacheDirs()
    try:
        if lock.note and notify:
            notify(lock.note)
        _check_output(plan)
        return _run_locked(plan, caches, progress, on_start, on_step)
    finally:
        caches.cleanup()
        lock.release()


def _describe(plan: StepPlan, caches: CacheDirs) -> dict[str, Any]:
    request = {"op": "describe", "device": plan.device, "model": plan.model, "kind": plan.kind}
    described = describe(request, run_env(caches.fresh(), plan.threads), plan.start_timeout_s)
    if "error" in described:
        raise StepsError(str(described["error"]).removeprefix("BackendError: "))
    return described


def _run_locked(plan: StepPlan, caches: CacheDirs, progress: ProgressFn | None,
                on_start: Callable[[StepFile, int], None] | None,
                on_step: Callable[[int, float], None] | None) -> StepFile:
    steps = _header(plan, _describe(plan, caches))
    if plan.resume:
        steps = _resume_from(plan, steps)
    done = {run.key for run in steps.runs}
    todo = [s for s in plan_slots(plan) if s.key not in done]
    if on_start:
        on_start(steps, len(todo))
    save_step_file(plan.output, steps)
    threads = steps.device.get("threads") if steps.device.get("backend") == "cpu" else 1
    monitor = HostMonitor(used=int(threads) if threads else None)
    for slot in todo:
        if progress:
            progress(slot, None)
        steps = _one(plan, slot, steps, caches, monitor, on_step)
        save_step_file(plan.output, steps)
        if progress:
            progress(slot, steps.runs[-1])
    steps = replace(steps, provenance={**steps.provenance, "finished_at": utc_now()})
    save_step_file(plan.output, steps)
    return steps


def _one(plan: StepPlan, slot: Slot, steps: StepFile, caches: CacheDirs, monitor: HostMonitor,
         on_step: Callable[[int, float], None] | None) -> StepFile:
    """``steps`` with ``slot``'s run (and the priming run a warm cache needed) added."""
    extra: dict[str, Any] = {}
    if slot.cache == "warm":
        if slot.series not in caches.primed and slot.series not in caches.failed:
            steps = _prime(plan, slot, steps, caches)
        if slot.series not in caches.primed:
            why = caches.failed[slot.series]
            out = RunOutcome(status="error", error=f"no warm cache: the run that was to prime it ended "
                                                   f"{why['status']}: {why['error']}")
            return steps.with_runs([*steps.runs, make_run(plan, slot, out, {}, {"primed_by": None})])
        cache_dir, by = caches.warm(slot.series)
        extra["primed_by"] = by
    else:
        cache_dir = caches.fresh()
    monitor.begin()
    out = RunProcess(_request(plan, slot, cache_dir), run_env(cache_dir, plan.threads), plan.timeout_s,
                     plan.start_timeout_s, on_step).run()
    run = make_run(plan, slot, out, monitor.end(), extra)
    if slot.cache == "cold" and run.ok:
        caches.prime(slot.series, cache_dir, f"cold run, repeat {slot.repeat}")
    return steps.with_runs([*steps.runs, run])


def _prime(plan: StepPlan, slot: Slot, steps: StepFile, caches: CacheDirs) -> StepFile:
    """Prime ``slot.series``' warm cache with a run of its own (not measured: kept in the file's ``priming``)."""
    cache_dir = caches.fresh()
    started = utc_now()
    out = RunProcess(_request(plan, slot, cache_dir, profile=False), run_env(cache_dir, plan.threads),
                     plan.timeout_s, plan.start_timeout_s).run()
    n = len(steps.extra.get("priming") or [])
    entry = {"mode": slot.mode, "compile_mode": slot.compile_mode, "started_at": started, "status": out.status,
             "error": out.error, "first_step_s": out.steps_s[0] if out.steps_s else None, "wall_s": out.wall_s}
    if out.status == "ok":
        caches.prime(slot.series, cache_dir, f"priming run {n}")
    else:  # not tried again for the next warm run: each would wait as long
        caches.failed[slot.series] = entry
    return replace(steps, extra={**steps.extra, "priming": [*(steps.extra.get("priming") or []), entry]})


def environment_note() -> str | None:
    """A one-line note when compile caches are redirected by the user's own environment (they are replaced)."""
    given = [k for k in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR") if os.environ.get(k)]
    if not given:
        return None
    return (f"{' and '.join(given)} set in this environment: steps gives every run private cache folders "
            "instead (yours are not touched)")
