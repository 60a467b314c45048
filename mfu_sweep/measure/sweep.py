"""Sweep orchestration: plan tasks, run them isolated, checkpoint every record.

``run_sweep`` makes ``repeats`` passes over the tasks (``passes.py``) and
checkpoints every task (``checkpoint.py``: the file written whole when the run
starts and ends, one journal line per record between), so a crash, a SIGKILL or
Ctrl-C loses at most the task in flight; ``resume=True`` continues an existing
file and skips the (pass, shape, dtype, mode) slots it holds.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mfu_sweep import __version__
from mfu_sweep.gemm.dtypes import DTYPES, get_dtype
from mfu_sweep.gemm.shapes import DEVICE_MEMORY_FRACTION, Shape, fits_device
from mfu_sweep.measure.checkpoint import Checkpoint, ShapeClock
from mfu_sweep.measure.machine.watch import SweepWatch
from mfu_sweep.measure.passes import order_seeds, plan_passes, plan_slots
from mfu_sweep.measure.task import Task
from mfu_sweep.measure.worker import InProcessRunner, SubprocessRunner
from mfu_sweep.records.journal import resume_problem
from mfu_sweep.records.results import Record, ResultError, Sweep, finish_record, load_sweeps, read_json
from mfu_sweep.specs import Peak, apply_peak_override
from mfu_sweep.util.filelock import LockError, OutputLock
from mfu_sweep.util.outputs import OutputError, check_name, check_output_file, check_suffix

# Settings that change what a record measures: a resumed file keeps one value (default for older files).
# --repeats and --seed are here because they fix which (pass, shape) pairs exist and in what order; a shape
# file whose every row has a passes column may extend a file's passes (see _resume_from).
RESUME_MUST_MATCH: dict[str, Any] = {"cache": "rotate", "threads": None, "repeats": 1, "seed": 0}


class SweepError(RuntimeError):
    """A sweep cannot start or continue; the message says why."""


NO_STDOUT = "a sweep checkpoints every record into its file, which --resume continues: give -o FILE.json"


@dataclass(frozen=True)
class SweepPlan:
    """Everything a sweep needs, already validated by the caller."""

    device: str
    tasks: Sequence[Task]
    output: Path
    label: str | None = None
    isolate: str = "sweep"
    timeout_s: float | None = 600.0
    cold_compile: bool = False
    spec_file: str | None = None
    chip: str | None = None
    peak_tflops: float | None = None
    resume: bool = False
    force: bool = False
    label_suffix: str = ""
    argv: Sequence[str] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    repeats: int = 1
    start_timeout_s: float | None = 300.0
    watch: bool = True
    """Observe the machine (contention per shape, clock probe); off only to measure what watching costs."""


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def git_sha() -> str | None:
    """Commit of the tool's own checkout, when it runs from one (never of a repository it is merely inside)."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "-C", str(here), "rev-parse", "--show-toplevel", "HEAD"],
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() / "mfu_sweep" != here:
        return None
    return lines[1]


def default_label(device: dict[str, Any]) -> str:
    """``<chip or name>-<backend>``, slugified, e.g. ``h100-sxm-cuda``.

    A CPU's label adds its microarchitecture (``device.uarch``, e.g. ``amd-epyc-zen5-cpu``), since
    CPU model names ("AMD EPYC" in a VM) do not tell machine kinds apart; it equals
    ``specs.cpu.default_cpu_label``.
    """
    chip = device.get("chip")
    base = device.get("name") if chip in (None, "cpu") else chip
    if chip == "cpu" and device.get("uarch"):
        base = f"{base} {device['uarch']}"
    slug = re.sub(r"[^a-z0-9]+", "-", str(base or "device").lower()).strip("-")
    return f"{slug}-{device.get('backend', 'unknown')}"


def _make_runner(plan: SweepPlan) -> InProcessRunner | SubprocessRunner:
    if plan.isolate == "none":
        if plan.cold_compile:
            raise SweepError("--cold-compile needs a worker per shape; use --isolate shape or sweep")
        return InProcessRunner(plan.device, plan.spec_file, plan.chip, modes=_modes(plan))
    cold = _cold_env if plan.cold_compile else None
    return SubprocessRunner(plan.device, plan.spec_file, plan.chip,
                            per_task=plan.isolate == "shape" or plan.cold_compile, env_for_task=cold,
                            start_timeout_s=plan.start_timeout_s, modes=_modes(plan))


def _modes(plan: SweepPlan) -> list[str]:
    """The modes the plan's tasks run in: the worker does their fixed start-up work before any shape."""
    return sorted({t.mode for t in plan.tasks})


_COLD_ROOT: list[str] = []


def cold_cache_env(root: str) -> dict[str, str]:
    """Environment pointing every compile cache a worker may use into the empty folder ``root``.

    Inductor and triton (CPU/CUDA), TorchNeuron's NEFF cache and neuronx-cc's cache (XLA-based
    torch-neuronx). Set before the worker starts, so it needs no knowledge of the backend.
    """
    flags = os.environ.get("NEURON_CC_FLAGS", "")
    return {
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor"),
        "TRITON_CACHE_DIR": os.path.join(root, "triton"),
        "TORCH_NEURONX_NEFF_CACHE_DIR": os.path.join(root, "neff"),
        "NEURON_CC_FLAGS": f"{flags} --cache_dir={os.path.join(root, 'neuron')}".strip(),
    }


def _cold_env(task: Task) -> dict[str, str]:
    """Fresh, empty compile caches for one task (removed when the sweep ends)."""
    root = tempfile.mkdtemp(prefix="mfu-sweep-cold-")
    _COLD_ROOT.append(root)
    return cold_cache_env(root)


def _cleanup_cold() -> None:
    while _COLD_ROOT:
        shutil.rmtree(_COLD_ROOT.pop(), ignore_errors=True)


def _header(plan: SweepPlan, hello: dict[str, Any]) -> Sweep:
    device = dict(hello["device"])
    device["label"] = (plan.label or default_label(device)) + plan.label_suffix
    peak = Peak.from_json(hello["peak"])
    peak = apply_peak_override(peak, plan.peak_tflops, sorted({t.dtype for t in plan.tasks}))
    if plan.spec_file:
        peak = replace(peak, overrides={**peak.overrides, "spec_file": str(plan.spec_file)})
    if plan.chip:
        peak = replace(peak, overrides={**peak.overrides, "chip": plan.chip})
    settings = {**plan.settings, "isolate": plan.isolate, "timeout_s": plan.timeout_s,
                "start_timeout_s": plan.start_timeout_s,
                "compile_cache": "cold (fresh cache per shape)" if plan.cold_compile else "warm (caches reused)",
                "repeats": plan.repeats, "order_seeds": order_seeds(_seed(plan), plan.repeats),
                "pass_worker": "same process" if plan.isolate == "none" else "fresh"}
    return Sweep(
        tool={"name": "mfu-sweep", "version": __version__},
        run={"id": uuid.uuid4().hex, "started_at": utc_now(), "finished_at": None, "argv": list(plan.argv),
             "host": socket.gethostname(), "git_sha": git_sha()},
        environment=hello["environment"], device=device, peak=peak, settings=settings,
    )


def _seed(plan: SweepPlan) -> int:
    return int(plan.settings.get("seed") or 0)


def cap_by_memory(tasks: Sequence[Task], memory_bytes: float | None) -> tuple[list[Task], list[Task]]:
    """(kept, dropped): square-family tasks whose working set exceeds the device's memory share are dropped.

    Only the square family is capped (its default range reaches 10 TFLOP); shapes
    asked for by name are measured, and an out-of-memory becomes their status.
    """
    kept, dropped = [], []
    for t in tasks:
        fits = t.family != "square" or fits_device(t.shape, get_dtype(t.dtype), memory_bytes)
        (kept if fits else dropped).append(t)
    return kept, dropped


def _capped(plan: SweepPlan, device: dict[str, Any]) -> tuple[SweepPlan, dict[str, Any] | None]:
    memory = device.get("memory_bytes")
    kept, dropped = cap_by_memory(plan.tasks, memory)
    if not dropped:
        return plan, None
    note = {"memory_bytes": memory, "fraction": DEVICE_MEMORY_FRACTION,
            "max_flops_kept": max((t.shape.flops for t in kept if t.family == "square"), default=None),
            "dropped": sorted({f"{t.shape} {t.dtype}" for t in dropped})}
    return replace(plan, tasks=kept), note


def _resume_from(plan: SweepPlan, fresh: Sweep) -> Sweep:
    try:
        problem = resume_problem(plan.output, read_json(plan.output, fold=False))
        if problem:
            raise SweepError(f"cannot resume {str(plan.output)!r}: {problem}")
        (old,) = load_sweeps([plan.output])
    except ValueError as exc:
        if isinstance(exc, ResultError):
            raise SweepError(f"cannot resume: {exc}") from None
        raise SweepError(f"cannot resume {str(plan.output)!r}: it is a merged file") from None
    for key in ("backend", "name"):
        if old.device.get(key) != fresh.device.get(key):
            raise SweepError(f"cannot resume {str(plan.output)!r}: its device.{key}={old.device.get(key)!r} "
                             f"differs from this device's {fresh.device.get(key)!r}")
    settings = dict(old.settings)
    for key, default in RESUME_MUST_MATCH.items():
        was, now = old.settings.get(key, default), fresh.settings.get(key, default)
        if key == "repeats" and plan.tasks and all(t.passes for t in plan.tasks):
            # every task says its own passes (a shape file's passes column, as `refine` writes): more passes
            # extend the file (pass p's order depends on p and the seed only), fewer leave it as it is
            if now > was:
                settings.update(repeats=now, order_seeds=fresh.settings.get("order_seeds"))
            continue
        if was != now:
            raise SweepError(f"cannot resume {str(plan.output)!r}: its settings.{key}={was!r} differs from this "
                             f"run's {now!r}; one file holds one way of measuring")
    was, now = old.device.get("fingerprint"), fresh.device.get("fingerprint")
    if was and now and was != now:  # a file written before fingerprints has none
        raise SweepError(f"cannot resume {str(plan.output)!r}: its device.fingerprint={was!r} differs from this "
                         f"device's {now!r}; one file holds one kind of machine")
    run = dict(old.run)
    run["resumed_at"] = [*run.get("resumed_at", []), utc_now()]
    run["resumed_argv"] = [*run.get("resumed_argv", []), list(plan.argv)]
    run["finished_at"] = None
    return replace(old, run=run, settings=settings)


def _check_output(plan: SweepPlan) -> None:
    """The output can be written and the overwrite rule holds (``mfu_sweep.util.outputs``), before the device opens."""
    out = plan.output
    if plan.resume and plan.force:
        raise SweepError("--resume continues a file and --force overwrites it; pass one of them")
    try:
        check_name(out)
        if plan.resume and not out.exists():
            raise SweepError(f"cannot resume {str(out)!r}: no such file; drop --resume to start it")
        check_suffix(out, ".json", "a JSON sweep result")
        check_output_file(out, force=plan.resume or plan.force, stdout=NO_STDOUT,
                          exists_hint="pass --resume to continue it or --force to overwrite it")
    except OutputError as exc:
        raise SweepError(str(exc)) from None


def _check_dtypes(plan: SweepPlan, hello: dict[str, Any]) -> None:
    """Refuse dtypes (per mode) the opened device says it cannot run, before anything is written."""
    refused = hello.get("unsupported") or {}
    for task in plan.tasks:
        reason = refused.get(task.mode, {}).get(task.dtype)
        if reason:
            runs = [d for d in DTYPES if d not in refused.get(task.mode, {})]
            if not runs:
                raise SweepError(f"--mode {task.mode}: {reason}; this device runs no dtype in {task.mode} mode; "
                                 f"drop --mode {task.mode}")
            raise SweepError(f"--dtype {task.dtype}: {reason}; this device runs {', '.join(runs)} "
                             f"in {task.mode} mode; drop --dtype {task.dtype}")


ProgressFn = Callable[[Task, Record | None], None]


def _task_key(task: Task) -> tuple[Shape, str, str]:
    return (task.shape, task.dtype, task.mode)


def _task_passes(task: Task) -> int | None:
    return task.passes


def run_sweep(plan: SweepPlan, progress: ProgressFn | None = None,
              on_start: Callable[[Sweep, int], None] | None = None,
              notify: Callable[[str], None] | None = None,
              on_pass: Callable[[int, int, int], None] | None = None) -> Sweep:
    """Run every (pass, task) of ``plan`` not already in the output file; return the final sweep.

    ``plan.repeats`` passes run every task, each pass in its own seeded shuffled
    order (``passes.plan_passes``) and, unless ``isolate`` is ``none``, in a fresh
    worker; every record keeps its pass (``Record.pass_index``). ``on_pass(i, R, n)``
    is called when pass ``i`` of ``R`` starts with ``n`` tasks to run, ``progress(task, None)`` before a task and
    ``progress(task, record)`` after it. Ctrl-C or any exception leaves the file
    with every finished record.
    The output's one-writer lock (``mfu_sweep.util.filelock``) is held for the whole run:
    a second sweep to the same file fails at once with a :class:`SweepError` naming
    the holder; ``notify`` hears about a stale lock taken over.
    """
    _check_output(plan)
    try:
        lock = OutputLock(plan.output).acquire()
    except LockError as exc:
        raise SweepError(str(exc)) from None
    try:
        if lock.note and notify:
            notify(lock.note)
        _check_output(plan)  # again under the lock: another writer may have finished meanwhile
        return _run_locked(plan, progress, on_start, on_pass, notify)
    finally:
        lock.release()


def _run_locked(plan: SweepPlan, progress: ProgressFn | None, on_start: Callable[[Sweep, int], None] | None,
                on_pass: Callable[[int, int, int], None] | None, notify: Callable[[str], None] | None = None) -> Sweep:
    runner = _make_runner(plan)
    watch = SweepWatch() if plan.watch else None
    checkpoint = Checkpoint(plan.output)
    sweep, records = None, []
    try:
        _check_dtypes(plan, runner.hello)
        sweep = _header(plan, runner.hello)
        plan, capped = _capped(plan, sweep.device)
        if capped:
            sweep = replace(sweep, settings={**sweep.settings, "memory_cap": capped})
        if plan.resume:
            sweep = _resume_from(plan, sweep)
        if watch:
            sweep = watch.on_header(sweep, plan.resume, notify)
        done = {(r.run_pass, r.key) for r in sweep.records}
        passes = plan_passes(plan.tasks, plan.repeats, _seed(plan), _task_key, done, passes_of=_task_passes)
        # planned: the file's records and this plan's, once each (a resume may measure other shapes than the file's)
        planned = len(done | plan_slots(plan.tasks, plan.repeats, _task_key, passes_of=_task_passes))
        sweep = replace(sweep, run={**sweep.run, "planned": planned})
        if on_start:
            on_start(sweep, sum(len(p.todo) for p in passes))
        checkpoint.start(sweep)  # whole, once; then one journal line per record
        records = list(sweep.records)
        clock = ShapeClock()
        fresh = True  # the worker that answered hello has run nothing yet
        for p in passes:
            if not p.todo:
                continue
            if not fresh:
                runner.close()  # the next task starts a new worker: every pass in its own process
            fresh = False
            if on_pass:
                on_pass(p.index, plan.repeats, len(p.todo))
            clock.restart()
            for task in p.todo:
                if progress:
                    progress(task, None)
                if watch:
                    watch.begin()
                raw = runner.run(task, plan.timeout_s)
                record = replace(finish_record(watch.end(raw) if watch else raw, sweep.peak), pass_index=p.index)
                records.append(clock.stamp(record))
                checkpoint.add(records[-1])
                if progress:
                    progress(task, records[-1])
        sweep = _with_records(sweep, records, watch, finished=True)
        checkpoint.finish(sweep)
        runner.close()
        return sweep
    except BaseException:
        runner.close(abandon=True)  # Ctrl-C or a crash: the shape in flight is abandoned at once
        if checkpoint.journal is not None and sweep is not None:
            _fold_on_the_way_out(checkpoint, _with_records(sweep, records, watch, finished=False))
        raise
    finally:
        checkpoint.close()
        _cleanup_cold()


def _with_records(sweep: Sweep, records: list[Record], watch: SweepWatch | None, finished: bool) -> Sweep:
    """The sweep with its records and machine block; ``finished`` sets ``run.finished_at``."""
    sweep = sweep.with_records(records)
    if finished:
        sweep = replace(sweep, run={**sweep.run, "finished_at": utc_now()})
    return watch.with_block(sweep) if watch else sweep


def _fold_on_the_way_out(checkpoint: Checkpoint, sweep: Sweep) -> None:
    """Interrupted or failed: fold the journal so the file stands alone; if even that fails (a full disk), the
    journal stays beside the file and every reader folds it."""
    try:
        checkpoint.finish(sweep)
    except OSError:
        checkpoint.close(check=False)  # the first error is the one to report; nothing is lost
