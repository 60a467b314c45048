"""Worker processes: run tasks away from the parent so hangs and crashes are results.

Protocol: the parent starts ``python -m mfu_sweep.measure.worker`` and writes one
JSON object per line to its stdin; the worker answers one JSON line per
request on its original stdout. Everything the worker (or torch) prints
goes to stderr, which the parent keeps in a file so the last lines of a
crashed worker end up in its record.

Requests: ``{"op": "hello", "device": ..., "spec_file": ..., "chip": ...}``
answered with the device description, environment and peak; then
``{"op": "run", "task": {...}}`` answered with ``{"record": {...}, "busy_s": seconds}`` (the worker's
own time on the task, which the parent keeps as the record's ``worker_s``).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any

from mfu_sweep.measure.machine.memory import oom_kills
from mfu_sweep.measure.task import SOAK_ENV, Task, blank_record
from mfu_sweep.records.results import Record
from mfu_sweep.util.errors import BackendError

STDERR_TAIL_LINES = 20
# Backends whose first GEMM initialises the device cheaply (a thread pool, a CUDA context and cuBLAS
# handle): done at start-up so it counts against --start-timeout, not the first shape's --timeout.
# Neuron/XLA compile even a tiny GEMM (minutes): their initialisation stays with the first shape.
WARM_BACKENDS = ("cpu", "cuda")


def initialise_device(backend: Any) -> dict[str, Any]:
    """Run one tiny fp32 GEMM so lazy device initialisation is done: ``{"device_init_s": seconds}``, nothing
    for backends not in :data:`WARM_BACKENDS`, or the error (the first shape then meets it as its own)."""
    if getattr(backend, "name", None) not in WARM_BACKENDS:
        return {}
    t0 = time.perf_counter()
    try:
        _tiny_gemm(backend, "eager")
    except (RuntimeError, ValueError, MemoryError) as exc:
        return {"device_init_error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"device_init_s": round(time.perf_counter() - t0, 4)}


def _tiny_gemm(backend: Any, mode: str) -> None:
    from mfu_sweep.gemm.dtypes import get_dtype
    from mfu_sweep.gemm.shapes import Shape

    shape, dt = Shape(1, 64, 64, 64), get_dtype("fp32")
    fn = backend.gemm_fn(shape, dt, mode, backend.make_inputs(shape, dt, 1, 0), None)
    fn(0)
    backend.sync()


def _graph_caches_off() -> ExitStack:
    """A context with the FX graph cache and AOTAutograd's cache off, where this torch has them."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    stack = ExitStack()
    for config, name in ((inductor_config, "fx_graph_cache"), (functorch_config, "enable_autograd_cache")):
        if hasattr(config, name):
            stack.enter_context(config.patch(**{name: False}))
    return stack


def initialise_compile(backend: Any, warm: bool) -> dict[str, Any]:
    """Fixed start-up work of ``torch.compile``, done once per worker so no shape's --timeout pays it.

    Always imports torch._dynamo and inductor (seconds on a CPU; the record's compile count reads
    dynamo's metrics). With ``warm`` on a backend in :data:`WARM_BACKENDS` it also compiles a tiny
    GEMM: inductor's first compile in a process (compiler and ISA checks, its worker pool) costs
    ~25 s on a 2-core CPU against ~1.5 s for the next. ``--cold-compile`` sweeps pass ``warm=False``:
    that first compile would fill the shape's fresh cache. ``{"compile_init_s": seconds}`` or the error.

    The tiny GEMM compiles with inductor's and AOTAutograd's graph caches off (the C++ kernel cache
    stays on): a warm-up that hit them (a cache another process filled) skipped the lowering and code
    generation, so their lazy imports (``sympy.combinatorics``, ``torch.fx`` passes: 81 modules) fell to the
    first compiled shape, under its --timeout.
    """
    t0 = time.perf_counter()
    try:
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401

        if warm and getattr(backend, "name", None) in WARM_BACKENDS:
            with _graph_caches_off():
                _tiny_gemm(backend, "compile")
            torch._dynamo.reset()
    except Exception as exc:  # noqa: BLE001 - any failure is the first compiled shape's to meet and record
        return {"compile_init_error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"compile_init_s": round(time.perf_counter() - t0, 4)}


def hello(device: str, spec_file: str | None, chip: str | None, soak_s: float = 0.0,
          modes: Sequence[str] = ("eager",), warm_compile: bool = True) -> tuple[Any, dict[str, Any]]:
    """Open the backend and describe it: (backend, {"device", "environment", "peak"}).

    All fixed start-up work is done here, under ``--start-timeout``: the device's
    lazy initialisation and, when ``modes`` holds ``compile``, torch.compile's
    (:func:`initialise_compile`). With ``soak_s`` > 0 a large GEMM then runs that
    long (clocks and temperature settle) and what ran is recorded as ``environment.soak``.
    """
    from mfu_sweep.measure.backends import resolve_device
    from mfu_sweep.specs import load_chips
    from mfu_sweep.util.allocator import fixed_allocation

    backend = resolve_device(device)
    check_throttle_readings(backend)
    allocator = fixed_allocation()
    info = backend.describe()
    peak = backend.peak(load_chips(spec_file), chip)
    environment = {**backend.environment(), **allocator}
    environment.update(initialise_device(backend))
    if "compile" in modes:
        environment.update(initialise_compile(backend, warm_compile))
    if soak_s > 0:
        environment["soak"] = backend.soak(soak_s)
    return backend, {"device": {**info.to_json(label=""), "requested": device}, "environment": environment,
                     "peak": peak.to_json(), "unsupported": unsupported_dtypes(backend)}


def check_throttle_readings(backend: Any) -> None:
    """Refuse ``--on-throttle discard|wait`` (:data:`ON_THROTTLE_ENV`) on a device that reports no throttling,
    before any shape: a policy that cannot see throttling would silently keep everything."""
    from mfu_sweep.measure.machine.throttle import policy_from_env

    policy = policy_from_env()
    if policy != "keep" and backend.throttle_probe() is None:
        raise BackendError(f"--on-throttle {policy} needs the device's throttle readings: NVML on an NVIDIA GPU "
                           f"(pip install nvidia-ml-py); {backend.describe().name!r} ({backend.name}) has none")


def unsupported_dtypes(backend: Any) -> dict[str, dict[str, str]]:
    """``{mode: {dtype: reason}}`` for the dtypes ``backend.check_supported`` refuses, asked before any shape runs."""
    from mfu_sweep.gemm.dtypes import DTYPES, get_dtype
    from mfu_sweep.measure.backends.base import Unsupported

    out: dict[str, dict[str, str]] = {}
    for mode in ("eager", "compile"):
        for name in DTYPES:
            try:
                backend.check_supported(get_dtype(name), mode)
            except Unsupported as exc:
                out.setdefault(mode, {})[name] = str(exc)
    return out


def with_worker_pid(record: Record) -> Record:
    """The record tagged with the process that measured it (``worker_pid``: which records shared a process)."""
    return replace(record, extra={**record.extra, "worker_pid": os.getpid()})


def soak_seconds() -> float:
    """The warm-up a sweep asked for (``sweep --soak`` sets :data:`SOAK_ENV`)."""
    return float(os.environ.get(SOAK_ENV) or 0)


class InProcessRunner:
    """``--isolate none``: run tasks in this process (for debugging; a hang hangs the sweep)."""

    def __init__(self, device: str, spec_file: str | None, chip: str | None,
                 env: Mapping[str, str] | None = None, modes: Sequence[str] = ("eager",)) -> None:
        os.environ.update(env or {})
        self.backend, self.hello = hello(device, spec_file, chip, soak_seconds(), modes)

    def run(self, task: Task, timeout_s: float | None = None) -> Record:
        from mfu_sweep.measure.bench import run_task

        t0 = time.perf_counter()
        record = with_worker_pid(run_task(self.backend, task))
        return replace(record, extra={**record.extra, "worker_s": round(time.perf_counter() - t0, 6)})

    def close(self, abandon: bool = False) -> None:
        pass


class WorkerDied(RuntimeError):
    """The worker exited or stopped answering; carries what became of it."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _Proc:
    popen: subprocess.Popen
    stderr_path: str


class Worker:
    """One worker process with a request/answer channel and a kill switch."""

    def __init__(self, env: Mapping[str, str] | None = None, start_timeout_s: float = 300.0) -> None:
        fd, path = tempfile.mkstemp(prefix="mfu-sweep-worker-", suffix=".log")
        full_env = {**os.environ, **(env or {})}
        popen = subprocess.Popen(
            [sys.executable, "-m", "mfu_sweep.measure.worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=fd, env=full_env, start_new_session=True, text=True, bufsize=1,
        )
        os.close(fd)
        self.proc = _Proc(popen, path)
        self.start_timeout_s = start_timeout_s
        self.oom_kills = 0

    def request(self, message: dict[str, Any], timeout_s: float | None) -> dict[str, Any]:
        popen = self.proc.popen
        self.oom_kills = oom_kills()  # a SIGKILL while this count rises is the kernel's OOM killer
        try:
            popen.stdin.write(json.dumps(message) + "\n")  # type: ignore[union-attr]
            popen.stdin.flush()  # type: ignore[union-attr]
        except (BrokenPipeError, OSError):
            raise self._died() from None
        line = self._read_line(timeout_s)
        try:
            answer = json.loads(line)
        except json.JSONDecodeError:
            raise WorkerDied("error", f"worker sent garbage: {line[:200]!r}") from None
        if "fatal" in answer:
            raise WorkerDied("error", answer["fatal"])
        return answer

    def _read_line(self, timeout_s: float | None) -> str:
        stdout = self.proc.popen.stdout
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if sel.select(left):
                    line = stdout.readline()  # type: ignore[union-attr]
                    if not line:
                        raise self._died()
                    return line
                if deadline is not None and time.monotonic() >= deadline:
                    self.kill()
                    raise WorkerDied("timeout", f"no result within {timeout_s:g} s; worker killed")

    def _died(self) -> WorkerDied:
        popen = self.proc.popen
        try:
            code = popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = popen.returncode
        how = f"killed by signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        tail = self.stderr_tail()
        killed = code == -signal.SIGKILL
        kills = oom_kills() - self.oom_kills if killed else 0
        if kills > 0:
            how += f" by the kernel's OOM killer (its oom_kill count rose by {kills} while the shape ran)"
        status = "oom" if killed and (kills > 0 or "out of memory" in tail.lower()) else "error"
        return WorkerDied(status, f"worker {how}" + (f"; stderr tail:\n{tail}" if tail else ""))

    def stderr_tail(self, lines: int = STDERR_TAIL_LINES) -> str:
        try:
            with open(self.proc.stderr_path, errors="replace") as fh:
                return "\n".join(fh.read().splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> None:
        popen = self.proc.popen
        if popen.poll() is None:
            try:
                os.killpg(popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            popen.wait()

    def close(self, abandon: bool = False) -> None:
        """Stop the worker: politely (it exits after its task), or at once when ``abandon``."""
        popen = self.proc.popen
        if abandon:
            self.kill()
        elif popen.poll() is None:
            try:
                popen.stdin.close()  # type: ignore[union-attr]
                popen.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        try:
            os.unlink(self.proc.stderr_path)
        except OSError:
            pass


class SubprocessRunner:
    """``--isolate sweep`` (one worker, restarted after a failure) or ``shape`` (one per task).

    ``--soak`` runs in the first worker only: the run's header records it (``environment.soak``), and every
    later worker of the run (each pass's, a restart's) starts without it, so a three-pass sweep soaks once, not
    three times.
    """

    def __init__(self, device: str, spec_file: str | None, chip: str | None, per_task: bool = False,
                 env_for_task: Any = None, start_timeout_s: float = 300.0, modes: Sequence[str] = ("eager",)) -> None:
        # a worker with fresh compile caches per task (env_for_task) must not fill them before its shape
        self.args = {"op": "hello", "device": device, "spec_file": spec_file, "chip": chip, "modes": list(modes),
                     "warm_compile": env_for_task is None}
        self.per_task = per_task
        self.env_for_task = env_for_task
        self.start_timeout_s = start_timeout_s
        self.worker: Worker | None = None
        # with a worker per task, the first one only describes the device: no compile start-up work, which
        # would also touch the user's compile cache under --cold-compile
        self.hello = self._start(runs_tasks=not per_task).get("hello")

    def _start(self, env: Mapping[str, str] | None = None, runs_tasks: bool = True) -> dict[str, Any]:
        self.worker = Worker(env=env)
        args = self.args if runs_tasks else {**self.args, "modes": ["eager"]}
        try:
            answer = self.worker.request(args, self.start_timeout_s)
        except WorkerDied as exc:
            self.worker.close()
            self.worker = None
            raise RuntimeError(f"worker failed to start: {exc}") from None
        if "error" in answer:
            self.worker.close()
            self.worker = None
            error = str(answer["error"])
            if error.startswith("BackendError: "):  # the device is absent or unusable: a user's error
                raise BackendError(error.removeprefix("BackendError: "))
            raise RuntimeError(error)
        self.args = {**self.args, "soak": False}  # --soak once per run: later workers (passes, restarts) skip it
        return answer

    def run(self, task: Task, timeout_s: float | None = None) -> Record:
        env = self.env_for_task(task) if self.env_for_task else None
        started_s = None
        if self.per_task or self.worker is None:
            self.close()
            t0 = time.monotonic()
            try:
                self._start(env)
            except RuntimeError as exc:  # the shape never started: say so, let the sweep go on
                return blank_record(task, "error", f"worker start-up (limit --start-timeout "
                                    f"{self.start_timeout_s:g} s): {exc}", timeout_phase="start-up")
            started_s = round(time.monotonic() - t0, 3)
        assert self.worker is not None
        try:
            answer = self.worker.request({"op": "run", "task": task.to_json()}, timeout_s)
        except WorkerDied as exc:
            self.worker.close()
            self.worker = None
            return blank_record(task, exc.status, str(exc), **_start_fields(started_s))
        record = Record.from_json(answer["record"])
        if record.status == "error" and poisons_context(record.error):
            self.close()  # the device context is gone: the next shape gets a fresh worker, not the same error
        return replace(record, extra={**record.extra, **_start_fields(started_s), **_busy_fields(answer)})

    def close(self, abandon: bool = False) -> None:
        if self.worker is not None:
            self.worker.close(abandon)
            self.worker = None


# Errors after which a CUDA context is unusable: every later kernel in that process fails the same way.
POISONED = ("device-side assert", "illegal memory access", "unspecified launch failure", "misaligned address")


def poisons_context(error: str | None) -> bool:
    """Whether a shape's error leaves the worker's device context unusable (a device-side assert ...)."""
    text = (error or "").lower()
    return any(p in text for p in POISONED)


def _start_fields(started_s: float | None) -> dict[str, Any]:
    """``worker_start_s``: start-up and device initialisation of a worker started for this shape (not timed
    against its --timeout)."""
    return {} if started_s is None else {"worker_start_s": started_s}


def _busy_fields(answer: dict[str, Any]) -> dict[str, Any]:
    """``worker_s``: the worker's own wall time on the shape, from its request to its answer (``busy_s``)."""
    busy = answer.get("busy_s")
    return {} if busy is None else {"worker_s": busy}


def _serve() -> None:
    """Worker main loop (``python -m mfu_sweep.measure.worker``)."""
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything printed by torch now goes to stderr
    sys.stdout = sys.stderr
    backend = None
    from mfu_sweep.measure.bench import run_task

    for line in sys.stdin:
        request = json.loads(line)
        t0 = time.perf_counter()
        try:
            if request["op"] == "hello":
                soak = soak_seconds() if request.get("soak", True) else 0.0
                backend, info = hello(request["device"], request.get("spec_file"), request.get("chip"), soak,
                                      request.get("modes", ("eager",)), request.get("warm_compile", True))
                answer: dict[str, Any] = {"hello": info}
            else:
                answer = {"record": with_worker_pid(run_task(backend, Task.from_json(request["task"]))).to_json()}
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
            key = "error" if request["op"] == "hello" else "fatal"
            answer = {key: f"{type(exc).__name__}: {exc}"}
        answer["busy_s"] = round(time.perf_counter() - t0, 6)
        channel.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    _serve()
