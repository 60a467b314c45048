"""One fresh-process run of a real model's steps: ``python -m mfu_sweep.measure.steps.run``.

The parent (:mod:`mfu_sweep.measure.steps.proc`) writes one JSON request line to the process's stdin; the
process answers with JSON event lines on its original stdout (everything torch prints goes to stderr):

- ``{"op": "describe", ...}``: open the device (:func:`mfu_sweep.measure.worker.hello`), build the model
  once (on torch's meta device where it can: no memory) and answer ``{"hello": ..., "model": ...}`` or
  ``{"error": "one line"}``. ``steps`` asks this before anything is written, so a model that cannot be
  built (a ``py:`` FUNCTION that raises) is one error line and no file.
- ``{"op": "run", ...}``: build the model on the device, then ``ready``, one ``step`` event per step as it
  finishes (so the parent can time out a first step that does not), and ``done`` with what the stack
  exposes (:mod:`mfu_sweep.measure.steps.stats`) or ``failed`` with a status (``oom`` or ``error``) and one
  line naming the error class.

A training step is ``zero_grad``, the forward, the loss (:func:`~mfu_sweep.measure.steps.models.loss_of`),
the backward and AdamW's step; an inference step the forward under ``torch.inference_mode`` (eager) or
``torch.no_grad`` (compile, lazy). The device is synchronised before every clock read; on XLA devices
that is ``torch_xla.sync()`` (the lazy graph runs: its first step compiles it) and ``wait_device_ops``.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

MEMORY_LIMIT_ENV = "MFU_SWEEP_STEPS_MEMORY_LIMIT_BYTES"
"""Testing aid: the run process may grow its address space by at most this many bytes after start-up
(``RLIMIT_AS``), so a model larger than that meets a real failed allocation."""


def _emit(channel: TextIO, event: str, **fields: Any) -> None:
    channel.write(json.dumps({"event": event, **fields}) + "\n")
    channel.flush()


def _limit_memory() -> None:
    extra = os.environ.get(MEMORY_LIMIT_ENV)
    if not extra:
        return
    with open("/proc/self/status") as fh:
        vm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + int(extra), resource.getrlimit(resource.RLIMIT_AS)[1]))


def failure(exc: BaseException, backend: Any = None) -> tuple[str, str]:
    """(status, one line) of an exception: ``oom`` for a failed allocation, else ``error`` with its class."""
    from mfu_sweep.measure.steps.models import first_line

    text = f"{type(exc).__name__}: {first_line(exc)}"
    lowered = text.lower()
    oom = isinstance(exc, MemoryError) or "out of memory" in lowered or "can't allocate memory" in lowered
    if backend is not None and not oom:
        oom = bool(backend.is_oom(exc))
    return ("oom" if oom else "error"), text


def _xla_cache(directory: str | None) -> None:
    """XLA's persistent compile cache in ``directory``, before any XLA computation (``initialize_cache``)."""
    if directory:
        import torch_xla.runtime as xr

        xr.initialize_cache(directory, readonly=False)


def _step_fn(work: Any, kind: str, mode: str, compile_mode: str | None, backend: Any) -> Callable[[], Any]:
    """The callable of one step (its result is kept until the device is synchronised)."""
    import torch

    from mfu_sweep.measure.steps.models import call, loss_of

    model = work.model
    if mode == "compile":
        model = torch.compile(model, backend=backend.compile_backend,
                              mode=None if compile_mode in (None, "default") else compile_mode)
    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None) if compile_mode == "reduce-overhead" else None
    if kind == "train":
        work.model.train()
        opt = torch.optim.AdamW(work.model.parameters(), lr=1e-5)

        def train() -> Any:
            if mark:
                mark()
            opt.zero_grad(set_to_none=True)
            loss = loss_of(call(model, work.batch))
            loss.backward()
            opt.step()
            return loss

        return train
    work.model.eval()
    grad_off = torch.inference_mode if mode == "eager" else torch.no_grad

    def infer() -> Any:
        if mark:
            mark()
        with grad_off():
            return call(model, work.batch)

    return infer


def _run(request: dict[str, Any], channel: TextIO) -> None:
    t0 = time.perf_counter()
    _xla_cache(request.get("xla_cache_dir"))
    import torch

    from mfu_sweep.gemm.dtypes import get_dtype
    from mfu_sweep.measure.backends import resolve_device
    from mfu_sweep.measure.steps.models import build, place
    from mfu_sweep.measure.steps.spec import parse_model_spec
    from mfu_sweep.measure.steps.stats import finish_stats, gemm_share, peak_memory, reset_peak_memory

    backend, phase = None, "device"
    try:
        backend = resolve_device(request["device"])
        dtype = get_dtype(request["dtype"])
        backend.set_math_mode(dtype)
        phase = "build"
        _limit_memory()
        spec = parse_model_spec(request["model"])
        work = place(build(spec, request["kind"]), backend.device, backend.torch_dtype(dtype))
        fn = _step_fn(work, request["kind"], request["mode"], request.get("compile_mode"), backend)
        backend.sync()
        reset_peak_memory(backend)
        _emit(channel, "ready", build_s=round(time.perf_counter() - t0, 4), params=work.params)
        for i in range(int(request["steps"])):
            phase = f"step {i + 1}"
            backend.sync()
            start = time.perf_counter()
            out = fn()
            backend.sync()
            _emit(channel, "step", index=i, s=time.perf_counter() - start)
            del out
        phase = "profile"
        stats = finish_stats(request["mode"], backend, peak_memory(backend))
        stats.update(gemm_share(fn, backend, int(request.get("profile_steps") or 0)))
    except Exception as exc:  # noqa: BLE001 - every failure of the user's model is a result
        status, text = failure(exc, backend)
        _emit(channel, "failed", status=status, error=text, phase=phase)
        return
    _emit(channel, "done", stats=stats, torch=torch.__version__)


def _describe(request: dict[str, Any]) -> dict[str, Any]:
    import torch

    from mfu_sweep.measure.steps.models import ModelBuildError, build
    from mfu_sweep.measure.steps.spec import parse_model_spec
    from mfu_sweep.measure.worker import hello

    _, info = hello(request["device"], request.get("spec_file"), request.get("chip"))
    spec = parse_model_spec(request["model"])
    meta = torch.device("meta") if spec.source in ("llm", "hf") else contextlib.nullcontext()
    try:
        with meta:
            work = build(spec, request["kind"])
    except ModelBuildError as exc:
        return {"error": str(exc)}
    model = {"spec": spec.text, "source": spec.source, "params": work.params, "gemm_family": work.gemm_family}
    return {"hello": info, "model": model}


def _serve() -> None:
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything printed by torch or the user's code goes to stderr
    sys.stdout = sys.stderr
    request = json.loads(sys.stdin.readline())
    if request["op"] == "describe":
        try:
            answer = _describe(request)
        except Exception as exc:  # noqa: BLE001 - the parent turns it into one line
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        channel.write(json.dumps(answer) + "\n")
        return
    _run(request, channel)


if __name__ == "__main__":
    _serve()
