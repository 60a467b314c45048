"""The parent's side of one run process (:mod:`mfu_sweep.measure.steps.run`): start, limits, kill, the outcome.

Every run is a fresh ``python -m mfu_sweep.measure.steps.run`` in a session of its own, with the environment
the caller gives (its private compile caches). Its event lines are read with deadlines:

- until ``ready`` (process start, imports, the model built and placed): ``start_timeout_s``;
- until the first ``step``: ``timeout_s``, counted from ``ready``; a run killed here is status ``timeout``,
  "did not compile within T s" (the first step holds the compile);
- until each later step, and the profiled steps after them: ``timeout_s`` again.

A killed or crashed process is never waited for longer than that: the whole process group is killed.
The outcome is a :class:`RunOutcome`; ``stderr_tail`` keeps the last lines the process printed.
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

STDERR_TAIL_LINES = 12


@dataclass
class RunOutcome:
    """What one run process did: status, error line, step times, the ``ready`` and ``done`` payloads."""

    status: str = "ok"
    error: str | None = None
    steps_s: list[float] = field(default_factory=list)
    ready: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    stderr_tail: str = ""


class _Deadline(Exception):
    pass


class RunProcess:
    """One run process; :meth:`run` drives it to its end (or kills it) and returns its outcome."""

    def __init__(self, request: Mapping[str, Any], env: Mapping[str, str], timeout_s: float | None,
                 start_timeout_s: float | None, on_step: Callable[[int, float], None] | None = None) -> None:
        self.request = dict(request)
        self.env = {**os.environ, **env}
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self.on_step = on_step
        self.popen: subprocess.Popen | None = None
        self.killed = False

    def run(self) -> RunOutcome:
        fd, log = tempfile.mkstemp(prefix="mfu-sweep-steps-", suffix=".log")
        t0 = time.monotonic()
        out = RunOutcome()
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "mfu_sweep.measure.steps.run"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=fd, env=self.env, start_new_session=True, text=True, bufsize=1)
            os.close(fd)
            fd = -1
            self.popen.stdin.write(json.dumps(self.request) + "\n")  # type: ignore[union-attr]
            self.popen.stdin.close()  # type: ignore[union-attr]
            self._follow(out)
        finally:
            if fd >= 0:
                os.close(fd)
            self.kill()
            out.wall_s = time.monotonic() - t0
            out.stderr_tail = _tail(log)
            os.unlink(log)
        if out.status == "error" and out.error is None:
            out.error = self._died(out.stderr_tail)
        return out

    def _follow(self, out: RunOutcome) -> None:
        steps = int(self.request["steps"])
        limit = self.start_timeout_s
        while True:
            try:
                event = self._next(limit)
            except _Deadline:
                self._timed_out(out, steps)
                return
            if event is None:  # the process ended without done/failed: it crashed
                out.status = "oom" if self._oom_killed() else "error"
                if out.status == "oom":
                    out.error = "MemoryError: the run process was killed by SIGKILL, not by this tool: most likely " \
                                "the kernel's out-of-memory killer"
                return
            kind = event.get("event")
            if kind == "ready":
                out.ready = {k: v for k, v in event.items() if k != "event"}
            elif kind == "step":
                out.steps_s.append(float(event["s"]))
                if self.on_step:
                    self.on_step(len(out.steps_s), float(event["s"]))
            elif kind == "done":
                out.stats = dict(event.get("stats") or {})
                return
            elif kind == "failed":
                out.status, out.error = str(event["status"]), str(event["error"])
                return
            limit = self.timeout_s

    def _timed_out(self, out: RunOutcome, steps: int) -> None:
        self.kill()
        out.status = "timeout"
        if not out.ready:
            out.error = (f"did not start within {self.start_timeout_s:g} s (process start, imports, model "
                         "build; --start-timeout)")
        elif not out.steps_s:
            out.error = f"did not compile within {self.timeout_s:g} s (step 1 did not finish)"
        elif len(out.steps_s) < steps:
            out.error = f"step {len(out.steps_s) + 1} did not finish within {self.timeout_s:g} s"
        else:
            out.error = f"the profiled steps did not finish within {self.timeout_s:g} s"

    def _next(self, limit: float | None) -> dict[str, Any] | None:
        stdout = self.popen.stdout  # type: ignore[union-attr]
        deadline = None if limit is None else time.monotonic() + limit
        with selectors.DefaultSelector() as sel:
            sel.register(stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                if sel.select(left):
                    line = stdout.readline()  # type: ignore[union-attr]
                    if not line:
                        return None
                    try:
                        return json.loads(line)
                    except json.JSONDecodeError:
                        continue  # not ours (a library writing to the channel): skip it
                if deadline is not None and time.monotonic() >= deadline:
                    raise _Deadline

    def _oom_killed(self) -> bool:
        code = self._wait()
        return code == -signal.SIGKILL and not self.killed

    def _wait(self) -> int | None:
        try:
            return self.popen.wait(timeout=10)  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            self.kill()
            return self.popen.returncode  # type: ignore[union-attr]

    def _died(self, tail: str) -> str:
        code = self._wait()
        how = f"killed by signal {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        last = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
        return f"the run process ended without a result ({how})" + (f": {last.strip()[:300]}" if last else "")

    def kill(self) -> None:
        """Kill the run's whole process group (its compile workers too) and reap it."""
        popen = self.popen
        if popen is None or popen.poll() is not None:
            return
        self.killed = True
        try:
            os.killpg(popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        popen.wait()


def _tail(path: str, lines: int = STDERR_TAIL_LINES) -> str:
    try:
        with open(path, errors="replace") as fh:
            return "\n".join(fh.read().splitlines()[-lines:])
    except OSError:
        return ""


def describe(request: Mapping[str, Any], env: Mapping[str, str], timeout_s: float | None) -> dict[str, Any]:
    """Ask a fresh run process to open the device and build the model once: its answer (``hello``, ``model``)
    or ``{"error": line}``."""
    try:
        proc = subprocess.run([sys.executable, "-m", "mfu_sweep.measure.steps.run"],
                              input=json.dumps(dict(request)), capture_output=True, text=True,
                              env={**os.environ, **env}, timeout=timeout_s, start_new_session=True)
    except subprocess.TimeoutExpired:
        return {"error": f"opening the device and building the model took more than {timeout_s:g} s "
                         "(--start-timeout)"}
    for line in reversed(proc.stdout.splitlines()):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    last = next((x for x in reversed(proc.stderr.splitlines()) if x.strip()), f"exit code {proc.returncode}")
    return {"error": f"the device or the model could not be opened: {last.strip()[:300]}"}
